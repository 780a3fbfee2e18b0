"""Overlap oracles: upper bounds on the load L(y) = max_x Σ_{q∈I(x)} y_q, and the sets I(x)
that separate (docs/theory.md §3).

The allocation (:mod:`tessera.calibration.allocation`) takes the workload's overlap structure
only through an *oracle* ``overlap(y) ≥ max_x Σ_{q∈I(x)} y_q`` (y ≥ 0):

* a number γ ≥ γ(Q) becomes y ↦ γ · max_q y_q (:func:`overlap_from_gamma`);
* the maximal overlapping sets I_2 give the exact y ↦ max_I Σ_{q∈I} y_q
  (:func:`overlap_from_sets`);
* a callable returning a number is used as is (it must be an upper bound);
* a *separation oracle* returns ``(bound, I)`` with I a realised set I(x*), or an
  :class:`~tessera.overlap.OverlapResult` for comp ``pure`` under add/remove;
  :func:`overlap_from_workload` builds one from a workload with
  :func:`tessera.overlap.max_overlap`.

:class:`CombinedOracle` takes the minimum of every bound the caller gave (each is an upper
bound, so the minimum is one) and collects the violated sets (cuts) they reveal.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tessera.accounting.composition import normalise_sets
from tessera.errors import TesseraError
from tessera.overlap import max_overlap
from tessera.overlap.local_search import RowSearch
from tessera.privacy import Definition, Neighbours
from tessera.workload.query import Query

FloatArray = npt.NDArray[np.float64]
_EPS = float(np.finfo(np.float64).eps)
#: ``overlap(y)`` ≥ max_x Σ_{q: q(x)=1} y_q for per-query weights y ≥ 0.
Overlap = Callable[[FloatArray], float]
#: A realised overlapping set I(x) (sorted query indices).
Cut = tuple[int, ...]
#: Separation oracle: y ↦ (bound ≥ max_x Σ_{q∈I(x)} y_q, I(x*) or None).
CutOracle = Callable[[FloatArray], tuple[float, Sequence[int] | None]]


def overlap_from_gamma(gamma: float) -> Overlap:
    """y ↦ γ · max_q y_q: valid for any y when γ ≥ γ(Q) (each row meets ≤ γ queries)."""
    g = float(gamma)
    if not (math.isfinite(g) and g >= 1.0):
        raise TesseraError(f"a maximum overlap γ is ≥ 1, got {gamma!r}")
    return lambda y: g * float(np.max(y)) if np.size(y) else 0.0


def overlap_from_sets(workload_size: int, maximal_sets: Iterable[Iterable[int]]) -> Overlap:
    """y ↦ max_{I∈I_2} Σ_{q∈I} y_q: exact when the sets are the maximal overlapping sets."""
    sets = normalise_sets(workload_size, maximal_sets)
    n = len(sets)
    rows = np.repeat(np.arange(n), [len(t) for t in sets])
    cols = np.concatenate([np.asarray(t, dtype=np.int64) for t in sets])

    def oracle(y: FloatArray) -> float:
        sums = np.bincount(rows, weights=np.asarray(y, dtype=np.float64)[cols], minlength=n)
        return float(np.max(sums))

    return oracle


def sequential_overlap(y: FloatArray) -> float:
    """y ↦ Σ_q y_q: the structure-free bound comp(Q) of sequential composition."""
    return float(math.fsum(np.asarray(y, dtype=np.float64).tolist()))


@dataclass(frozen=True)
class WorkloadOracle:
    """Separation oracle of a workload: y ↦ (L(y) or a proven upper bound, I(x*)).

    Calls ``tessera.overlap.max_overlap(workload, y, comp="pure", neighbours="add-remove")``
    (the load is linear in y = h(p), whatever the privacy definition): ``.bound`` is exact or a
    proven upper bound, ``.witness.queries`` the set of the best row found, re-checked by
    evaluating every query on it (so it is a genuine constraint of (P)).

    ``time_limit`` (seconds per call, None = exact) is used when the bound matters: the final
    certificate and when cut generation stalls. While cuts are being generated
    :meth:`quick` uses ``separation_time_limit``: an anytime search finds a violated row long
    before it proves optimality, and any bound it returns is still valid; :meth:`within` takes
    the limit of the call. :attr:`row_search` is the local search of
    :mod:`tessera.overlap.local_search` (predicate conjunctions only, else None): it proposes
    heavy rows — cuts — in milliseconds, and never bounds anything.
    """

    workload: Any
    domain: Any = None
    time_limit: float | None = None
    separation_time_limit: float | None = 1.0
    method: str = "auto"

    def _solve(self, y: FloatArray, limit: float | None) -> tuple[float, Sequence[int] | None]:
        res = max_overlap(
            self.workload,
            np.asarray(y, dtype=np.float64),
            domain=self.domain,
            comp=Definition.PURE,
            neighbours=Neighbours.ADD_REMOVE,
            time_limit=limit,
            method=self.method,  # type: ignore[arg-type]
        )
        return res.bound, None if res.witness is None else res.witness.queries

    def __call__(self, y: FloatArray) -> tuple[float, Sequence[int] | None]:
        return self._solve(y, self.time_limit)

    def quick(self, y: FloatArray) -> tuple[float, Sequence[int] | None]:
        limits = [x for x in (self.time_limit, self.separation_time_limit) if x is not None]
        return self._solve(y, min(limits) if limits else None)

    def within(self, y: FloatArray, seconds: float | None) -> tuple[float, Sequence[int] | None]:
        """The exact solve (or a proven upper bound) in at most ``seconds`` (None: the
        oracle's own limit), never more than the oracle's own limit."""
        limits = [x for x in (self.time_limit, seconds) if x is not None]
        return self._solve(y, min(limits) if limits else None)

    @cached_property
    def row_search(self) -> RowSearch | None:
        """The local search over the workload's value classes (predicate conjunctions of a
        flat workload; None otherwise)."""
        wl = self.workload
        queries = getattr(wl, "queries", wl)
        if getattr(wl, "is_structured", False) or not all(type(q) is Query for q in queries):
            return None
        domain = self.domain if self.domain is not None else getattr(wl, "domain", None)
        return None if domain is None else RowSearch.of(domain, list(queries))


def overlap_from_workload(
    workload: Any,
    *,
    domain: Any = None,
    time_limit: float | None = None,
    separation_time_limit: float | None = 1.0,
    method: str = "auto",
) -> WorkloadOracle:
    """The separation oracle of ``workload`` through ``tessera.overlap.max_overlap``
    (:class:`WorkloadOracle`); pass it as ``allocate(..., overlap=...)``."""
    return WorkloadOracle(workload, domain, time_limit, separation_time_limit, method)


def read_answer(answer: object, t: int) -> tuple[float, Cut | None, bool]:
    """An oracle's answer as (bound, cut, separating): a number (not separating), a pair or
    an ``OverlapResult`` (separating, the set possibly None: e.g. no row meets any query)."""
    if isinstance(answer, tuple) and len(answer) == 2:
        bound, found = answer
    elif hasattr(answer, "score_bound") and hasattr(answer, "witness"):
        comp = getattr(answer, "comp", "pure")
        nb = getattr(answer, "neighbours", "add-remove")
        if comp != "pure" or nb != "add-remove":
            raise TesseraError(
                f"the overlap oracle returned a {comp}/{nb} result; allocation needs the linear "
                "load (comp='pure', neighbours='add-remove')",
                hint="call max_overlap(..., comp='pure', neighbours='add-remove'); the target's "
                "definition and neighbour relation are applied here",
            )
        bound = answer.score_bound
        wit = answer.witness
        found = None if wit is None else wit.queries
    else:
        return float(answer), None, False  # type: ignore[arg-type]
    cut = None
    if found is not None:
        cut = tuple(sorted({int(i) for i in found}))
        if any(i < 0 or i >= t for i in cut):
            raise TesseraError(f"the overlap oracle's set {cut} names a query outside 0..{t - 1}")
        cut = cut or None
    return float(bound), cut, True


@dataclass(frozen=True)
class CombinedOracle:
    """All the bounds the caller gave, combined: their minimum is an upper bound on L(y);
    explicit sets and separation oracles also yield violated sets (cuts)."""

    size: int
    callables: tuple[Callable[[FloatArray], object], ...]
    sets: tuple[Cut, ...]
    incidence: sp.csr_matrix | None
    sequential: bool  # no bound given at all: sequential composition

    def answer(
        self, y: FloatArray, above: float = math.inf, limit: int = 32, quick: bool = False,
        seconds: float | None = None,
    ) -> tuple[float, list[Cut], bool]:
        """(min of the bounds at y, sets with load > ``above`` — most loaded first —, whether
        some oracle can separate). ``quick``: use an oracle's ``quick`` method if it has one
        (a cheaper, still valid, answer for cut generation); ``seconds``: the time an oracle
        with a ``within`` method may take (its answer is still exact or a proven bound)."""
        bounds: list[float] = []
        cuts: list[Cut] = []
        separating = self.incidence is not None
        if self.incidence is not None:
            loads = self.incidence @ y
            bounds.append(float(np.max(loads)))
            hot = np.flatnonzero(loads > above)
            for i in hot[np.argsort(-loads[hot], kind="stable")][:limit]:
                cuts.append(self.sets[int(i)])
        for f in self.callables:
            g = getattr(f, "quick", None) if quick else None
            timed = getattr(f, "within", None) if seconds is not None and not quick else None
            if callable(timed):
                raw = timed(y, seconds)
            else:
                raw = (g if callable(g) else f)(y)
            bound, cut, sep = read_answer(raw, self.size)
            bounds.append(bound)
            separating |= sep
            if cut is not None:
                cuts.append(cut)
        if not bounds:
            bounds.append(sequential_overlap(y))
        return min(bounds), cuts, separating

    def bound(self, y: FloatArray) -> float:
        return self.answer(y)[0]

    @property
    def has_quick(self) -> bool:
        return any(callable(getattr(f, "quick", None)) for f in self.callables)

    @property
    def row_search(self) -> RowSearch | None:
        """The first oracle's local search (:class:`WorkloadOracle`), if it has one: it
        proposes cuts, never bounds."""
        for f in self.callables:
            rs = getattr(f, "row_search", None)
            if isinstance(rs, RowSearch):
                return rs
        return None


def scaled_load(
    y: FloatArray, ly: float | None, load: Callable[[FloatArray], float]
) -> Callable[[FloatArray], float]:
    """u ↦ an upper bound on load(u) from ``ly`` ≥ load(y), a bound already proven at y.

    The load (the weighted maximum overlap, capped by Σ u) is monotone and positively
    homogeneous in the weights, so u ≤ r·y elementwise gives load(u) ≤ r·load(y) ≤ r·ly with
    r = max_q u_q/y_q; the float ratio and product are rounded up by 8 ulps. Where y_q = 0 < u_q,
    or without ``ly``, it asks ``load`` (the oracle) itself. This saves the exact solve that
    re-checking the rescaled split u = y·B/ly would cost."""
    if ly is None or not math.isfinite(ly):
        return load
    yv = np.asarray(y, dtype=np.float64)

    def bound(u: FloatArray) -> float:
        uv = np.asarray(u, dtype=np.float64)
        if uv.shape != yv.shape or np.any((yv <= 0) & (uv > 0)) or np.any(uv < 0):
            return load(u)
        pos = yv > 0
        r = float(np.max(uv[pos] / yv[pos])) if np.any(pos) else 0.0
        return r * ly * (1.0 + 8.0 * _EPS)

    return bound


def combine_oracles(
    workload_size: int,
    overlap: float | Overlap | CutOracle | None,
    maximal_sets: Iterable[Iterable[int]] | None,
) -> CombinedOracle:
    sets: tuple[Cut, ...] = ()
    incidence = None
    if maximal_sets is not None:
        sets = clean_sets(workload_size, maximal_sets)
        incidence = incidence_matrix(workload_size, sets)
    callables: tuple[Callable[[FloatArray], object], ...] = ()
    if overlap is not None:
        callables = (overlap if callable(overlap) else overlap_from_gamma(float(overlap)),)
    sequential = maximal_sets is None and (overlap is None or overlap is sequential_overlap)
    return CombinedOracle(workload_size, callables, sets, incidence, sequential)


def clean_sets(t: int, sets: Iterable[Iterable[int]]) -> tuple[Cut, ...]:
    """Validated, de-duplicated, non-empty sets (subsets are kept: redundant constraints are
    harmless, and removing them is quadratic). A query in no set is added as a singleton, as
    :func:`normalise_sets` does: a forgotten query must still count in the load."""
    out: dict[Cut, None] = {}
    for s in sets:
        cut = tuple(sorted({int(i) for i in s}))
        if any(i < 0 or i >= t for i in cut):
            raise TesseraError(f"overlapping set {cut} names a query outside 0..{t - 1}")
        if cut:
            out[cut] = None
    seen = {i for cut in out for i in cut}
    for i in range(t):
        if i not in seen:
            out[(i,)] = None
    return tuple(out)


def incidence_matrix(t: int, sets: Sequence[Cut]) -> sp.csr_matrix:
    """The m×t 0/1 matrix A with A[I, q] = [q ∈ I]."""
    lengths = [len(s) for s in sets]
    rows = np.repeat(np.arange(len(sets)), lengths)
    cols = np.fromiter((q for s in sets for q in s), dtype=np.int64, count=sum(lengths))
    return sp.csr_matrix((np.ones(cols.size), (rows, cols)), shape=(len(sets), t))
