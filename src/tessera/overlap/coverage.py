"""Maximum weighted coverage of at most K records: what one person costs when each person counts
at most once per query (docs/theory.md §3.14).

A *distinct* count q(D) = #{persons with at least one kept row in q} moves by at most 1 when one
person is added or removed, and by exactly [some kept row of the person lies in q]. With
per-query scores s_q ≥ 0 (s_q = h(w_q): ε_q under pure ε, ρ_q ∝ w_q² under zCDP and μ² under
GDP — every |Δ_q| is 0 or 1, so |Δ_q| = Δ_q²) one person of at most K rows costs

    C_K(s) = max_{R ⊆ 𝔻, |R| ≤ K} Σ_q s_q · [R ∩ q ≠ ∅],

the maximum weighted *coverage* of K records. C_1 is the row score S = γ_w (§3.8). Only the
set I(x) of a record matters, and a record whose I(x) lies inside another's never helps, so the
search runs over the maximal realisable sets (:func:`tessera.overlap.substitution.
realisable_sets`, built attribute by attribute from the workload's atoms).

**Exact.** Branch and bound over those sets (:func:`branch_and_bound`): include or exclude the
set of largest marginal gain; a node's bound is its covered score plus the r largest marginal
gains of the sets still allowed (r records left) — valid because coverage is submodular (a set's
gain only shrinks as more is covered). Guarded by a work limit (:data:`MAX_WORK`); past it, the
largest bound of the open nodes is itself a proven upper bound.

**Proven upper bounds** (each ≥ C_K; :func:`max_coverage` reports the smallest):

* ``K·S``: every record covers at most S (triangle inequality);
* ``Σ s``: no more than every satisfiable query;
* ``colouring``: in a proper colouring of the overlap graph a colour class holds pairwise
  disjoint queries, so one record meets at most one of them and K records at most K:
  C_K ≤ Σ_classes (sum of the K largest scores in the class);
* ``K largest sets``: the root bound of the branch and bound, the K heaviest maximal sets;
* ``LP dual``: for any π with 0 ≤ π ≤ s, C_K ≤ Σ_q (s_q − π_q) + K·max_x Σ_{q∈I(x)} π_q
  (split each covered query's score into π_q, paid by some record covering it, and the rest);
  π from the dual of the LP relaxation, the bound re-evaluated in exact rationals.

A greedy (largest marginal gain K times) gives a witness attaining at least (1 − 1/e)·C_K
(Nemhauser–Wolsey–Fisher 1978). Values are exact rationals of the float scores.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.errors import ResourceError, TesseraError
from tessera.overlap.clauses import expand
from tessera.overlap.colouring import MAX_GRAPH_QUERIES, greedy_colouring, overlap_graph
from tessera.overlap.substitution import maximal_rows, realisable_sets
from tessera.schema.domain import Domain
from tessera.workload.clause import BooleanClause
from tessera.workload.query import Query

#: Distinct overlap patterns enumerated for the exact search (beyond: bounds only).
MAX_STATES = 20_000
#: Element operations (sets × queries per node) the branch and bound may spend.
MAX_WORK = 60_000_000
#: The LP dual bound is tried when its constraint matrix has at most this many non-zeros.
MAX_LP_NONZEROS = 2_000_000
#: Relative margin below which the branch and bound never prunes (float sums of non-negative
#: scores are accurate to t·2^-53 relative, far below it).
PRUNE_MARGIN = 1e-9

#: A point solver for the engine's greedy: scores → (a maximising record or None, an upper
#: bound on max_x Σ_{q∈I(x)} scores_q).
PointSolver = Callable[[npt.NDArray[np.float64]], tuple[tuple[int, ...] | None, float]]


@dataclass(frozen=True)
class CoverageResult:
    """C_K(s): ``value`` exact (``exact``) or a proven upper bound — the only figure that may
    calibrate noise; ``achieved`` what the ``witness`` records (at most K) cover, ≤ C_K;
    ``covered`` the indices of the queries they cover; ``bounds`` every upper bound computed
    (name, value); ``notes`` why the search was not exact, when it was not."""

    k: int
    value: Fraction
    achieved: Fraction
    exact: bool
    method: str
    witness: tuple[tuple[int, ...], ...]
    covered: tuple[int, ...]
    bounds: tuple[tuple[str, Fraction], ...] = field(default=())
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.value < self.achieved:
            raise ValueError("a coverage bound below its witness: a solver bug")
        if len(self.witness) > self.k:
            raise ValueError("a coverage witness with more than K records")

    @property
    def bound(self) -> float:
        """``value`` as the smallest float ≥ it (for calibration)."""
        return float_up(self.value)

    @property
    def achieved_float(self) -> float:
        """``achieved`` as the largest float ≤ it (a lower bound; never for calibration)."""
        return float_down(self.achieved)


def float_up(x: Fraction) -> float:
    """The smallest float ≥ x."""
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def float_down(x: Fraction) -> float:
    """The largest float ≤ x."""
    f = float(x)
    return f if Fraction(f) <= x else math.nextafter(f, -math.inf)


def exact_sum(scores: npt.NDArray[np.float64], mask: npt.NDArray[np.bool_] | None = None
              ) -> Fraction:
    """Σ scores (over ``mask``) in exact rationals."""
    vals = scores if mask is None else scores[mask]
    return sum((Fraction(v) for v in vals.tolist()), Fraction(0))


def covered_by(domain: Domain, queries: Sequence[Query], records: Sequence[Sequence[int]]
               ) -> npt.NDArray[np.bool_]:
    """[R ∩ q ≠ ∅] for every query: the union of I(x) over the records (each evaluated)."""
    out = np.zeros(len(queries), dtype=bool)
    for x in records:
        point = tuple(int(c) for c in x)
        out |= np.fromiter((q(domain, point) for q in queries), dtype=bool, count=len(queries))
    return out


# -- the search over enumerated sets ----------------------------------------------------------


def greedy(incidence: npt.NDArray[np.bool_], scores: npt.NDArray[np.float64], k: int
           ) -> list[int]:
    """K times the set of largest marginal gain (stops when nothing is gained): a (1 − 1/e)
    approximation of C_K (Nemhauser–Wolsey–Fisher)."""
    r = incidence.astype(np.float64)
    left = scores.copy()
    chosen: list[int] = []
    for _ in range(k):
        gain = r @ left
        j = int(np.argmax(gain)) if len(gain) else -1
        if j < 0 or gain[j] <= 0:
            break
        chosen.append(j)
        left[incidence[j]] = 0.0
    return chosen


@dataclass
class _Search:
    """The state of one branch and bound (see :func:`branch_and_bound`)."""

    best: list[int]
    best_value: float
    work: int = 0
    open_bound: float = 0.0  # the largest bound of a node left unexplored (when stopped)


def branch_and_bound(
    incidence: npt.NDArray[np.bool_], scores: npt.NDArray[np.float64], k: int,
    start: Sequence[int], *, max_work: int = MAX_WORK, deadline: float | None = None,
) -> tuple[list[int], bool, float]:
    """(the best ≤ K sets found, whether the search finished, an upper bound on C_K).

    Nodes fix some sets in, some out; the bound of a node is its covered score plus the r
    largest marginal gains of the sets not excluded (r = K − sets in) — by submodularity no r
    further sets gain more — or, if smaller, the uncovered score those sets reach at all. A
    node is pruned only when its bound is below the incumbent by :data:`PRUNE_MARGIN`
    (relative), so when the search finishes no pruned node held a larger coverage. Stopped by
    ``max_work`` or ``deadline``, the largest bound of the open nodes
    (and the incumbent) bound C_K from above."""
    m, t = incidence.shape
    r = incidence.astype(np.float64)
    best_value = float(scores[incidence[list(start)].any(axis=0)].sum()) if start else 0.0
    st = _Search(list(start), best_value)
    # a node: (chosen sets, excluded mask, bound of its parent)
    stack: list[tuple[tuple[int, ...], npt.NDArray[np.bool_], float]] = [
        ((), np.zeros(m, dtype=bool), math.inf)]
    while stack:
        chosen, excluded, parent = stack.pop()
        if st.work > max_work or (deadline is not None and time.monotonic() > deadline):
            st.open_bound = max([parent, *(p for *_, p in stack)])
            return st.best, False, max(st.best_value, st.open_bound) * (1 + PRUNE_MARGIN)
        covered = (incidence[list(chosen)].any(axis=0) if chosen
                   else np.zeros(t, dtype=bool))
        left = np.where(covered, 0.0, scores)
        value = float(scores[covered].sum())
        if value > st.best_value * (1 + PRUNE_MARGIN) or (
                value >= st.best_value * (1 - PRUNE_MARGIN) and _better(
                    scores, covered, incidence, st.best)):
            st.best, st.best_value = list(chosen), value
        slots = k - len(chosen)
        if slots == 0:
            continue
        gain = r @ left
        st.work += m * t
        gain[excluded] = 0.0
        order = np.argsort(-gain, kind="stable")
        top = gain[order[:slots]]
        allowed = ~excluded & (gain > 0)
        reach = incidence[allowed].any(axis=0) if allowed.any() else np.zeros(t, dtype=bool)
        # the r largest gains, and no more than the uncovered score the allowed sets reach
        bound = value + min(float(top.sum()), float(left[reach].sum()))
        if len(top) == 0 or top[0] <= 0 or bound < st.best_value * (1 - PRUNE_MARGIN):
            continue
        j = int(order[0])
        out = excluded.copy()
        out[j] = True
        stack.append((chosen, out, bound))  # then without j
        stack.append(((*chosen, j), excluded, bound))  # first with j (popped next)
    return st.best, True, st.best_value


def _better(scores: npt.NDArray[np.float64], covered: npt.NDArray[np.bool_],
            incidence: npt.NDArray[np.bool_], best: list[int]) -> bool:
    """A near-tie settled in exact rationals: does ``covered`` score more than ``best``?"""
    other = incidence[best].any(axis=0) if best else np.zeros(len(scores), dtype=bool)
    return exact_sum(scores, covered) > exact_sum(scores, other)


def top_k_sets_bound(incidence: npt.NDArray[np.bool_], scores: npt.NDArray[np.float64], k: int
                     ) -> Fraction:
    """Σ of the K largest set scores (every record's I(x) lies in a maximal set): ≥ C_K."""
    own = incidence.astype(np.float64) @ scores
    if len(own) == 0:
        return Fraction(0)
    kth = float(np.sort(own)[::-1][min(k, len(own)) - 1])
    # the float order may misplace near-ties: order every set near the K-th exactly
    near = np.flatnonzero(own >= kth * (1 - 1e-6))
    exact = sorted((exact_sum(scores, incidence[j]) for j in near.tolist()), reverse=True)
    return sum(exact[:k], Fraction(0))


def lp_dual_bound(incidence: npt.NDArray[np.bool_], scores: npt.NDArray[np.float64], k: int
                  ) -> Fraction | None:
    """Σ_q (s_q − π_q) + K·max_j π(M_j) for π from the dual of the LP relaxation

        max Σ s_q z_q  s.t.  z_q ≤ Σ_{j: q∈M_j} y_j,  Σ_j y_j ≤ K,  0 ≤ z ≤ 1,  y ≥ 0,

    clipped to [0, s] and re-evaluated in exact rationals (valid for every such π, module
    docs); None when the LP solver is unavailable or fails, or the LP is larger than
    :data:`MAX_LP_NONZEROS`."""
    try:
        from scipy.optimize import linprog
        from scipy.sparse import csr_matrix, hstack, identity, vstack
    except ImportError:  # pragma: no cover - scipy is a dependency
        return None
    m, t = incidence.shape
    if m == 0 or t == 0 or int(incidence.sum()) > MAX_LP_NONZEROS:
        return None
    cover = csr_matrix(incidence.T.astype(np.float64))  # (t, m)
    a = vstack([hstack([identity(t, format="csr"), -cover]),
                hstack([csr_matrix((1, t)), csr_matrix(np.ones((1, m)))])]).tocsr()
    b = np.zeros(t + 1)
    b[-1] = k
    c = np.concatenate([-scores, np.zeros(m)])
    bounds = [(0.0, 1.0)] * t + [(0.0, None)] * m
    try:
        res = linprog(c, A_ub=a, b_ub=b, bounds=bounds, method="highs")
    except (ValueError, RuntimeError):
        return None
    if res.status != 0 or getattr(res, "ineqlin", None) is None:
        return None
    pi = np.clip(-np.asarray(res.ineqlin.marginals[:t], dtype=np.float64), 0.0, scores)
    return dual_bound(incidence, scores, pi, k)


def dual_bound(incidence: npt.NDArray[np.bool_], scores: npt.NDArray[np.float64],
               pi: npt.NDArray[np.float64], k: int) -> Fraction:
    """Σ_q (s_q − π_q) + K·max_j π(M_j) in exact rationals, for 0 ≤ π ≤ s (checked)."""
    if np.any(pi < 0) or np.any(pi > scores):
        raise ValueError("π must lie in [0, s]")
    rest = sum((Fraction(a) - Fraction(b) for a, b in zip(scores.tolist(), pi.tolist())),
               Fraction(0))
    own = incidence.astype(np.float64) @ pi
    # the float maximum may misorder near-ties: take every set within a margin of it exactly
    near = np.flatnonzero(own >= own.max() * (1 - 1e-6)) if len(own) else []
    top = max((exact_sum(pi, incidence[j]) for j in near), default=Fraction(0))
    return rest + k * top


# -- bounds that need no enumeration ----------------------------------------------------------


def colouring_top_k_bound(domain: Domain, queries: Sequence[Query],
                          scores: npt.NDArray[np.float64], k: int) -> Fraction | None:
    """Σ over the colour classes of a greedy colouring of the overlap graph of the sum of the K
    largest scores in the class (module docs); None for too many queries."""
    keep = [i for i, q in enumerate(queries) if scores[i] > 0 and not q.is_contradiction()]
    if not keep:
        return Fraction(0)
    if len(keep) > MAX_GRAPH_QUERIES:
        return None
    s = scores[keep]
    adj = overlap_graph(domain, [queries[i] for i in keep])
    colour = greedy_colouring(adj, s, "dsatur")
    total = Fraction(0)
    for c in np.unique(colour).tolist():
        members = np.sort(s[colour == c])[::-1][:k]
        total += sum((Fraction(v) for v in members.tolist()), Fraction(0))
    return total


def satisfiable_sum(queries: Sequence[Query], scores: npt.NDArray[np.float64]) -> Fraction:
    """Σ s_q over the queries some record satisfies: ≥ C_K for every K."""
    ok = np.fromiter((not q.is_contradiction() for q in queries), dtype=bool,
                     count=len(queries))
    return exact_sum(scores, ok)


# -- the dispatcher ---------------------------------------------------------------------------


def max_coverage(
    domain: Domain,
    queries: Sequence[Any],
    scores: npt.ArrayLike,
    k: int,
    *,
    row_bound: float | None = None,
    point: PointSolver | None = None,
    max_states: int = MAX_STATES,
    max_work: int = MAX_WORK,
    time_limit: float | None = None,
) -> CoverageResult:
    """C_K(s) for predicate queries and Boolean clauses with scores ``s`` ≥ 0 (module docs):
    exact by branch and bound over the maximal realisable sets (:func:`maximal_patterns`) when
    there are at most ``max_states`` and the search ends within ``max_work`` (and
    ``time_limit`` seconds); otherwise the smallest proven upper bound, with the reason in
    ``notes``.

    ``row_bound``: a proven upper bound on the row score S = C_1 (the overlap solvers'), for the
    bound K·S; ``point``: a point solver, for the greedy witness when the sets are not
    enumerated (without one the witness is empty)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.shape != (len(queries),) or not (np.isfinite(s).all() and (s >= 0).all()):
        raise TesseraError("coverage scores must be finite, ≥ 0, one per query")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise TesseraError(f"K must be an integer ≥ 1, got {k!r}")
    start = time.monotonic()
    deadline = None if time_limit is None else start + float(time_limit)
    bounds: list[tuple[str, Fraction]] = [("Σ s (every satisfiable query)",
                                           satisfiable_sum(queries, s))]
    if row_bound is not None:
        bounds.append(("K·S (K times the row score)", k * Fraction(row_bound)))
    notes: list[str] = []
    try:
        inc, pts = maximal_patterns(domain, queries, max_states)
    except TesseraError as e:
        notes.append(f"not exact: {e.message} (more than {max_states:,} overlap patterns to "
                     "search, or a clause too large to split); the smallest proven upper "
                     "bound is used")
        return _bounded(domain, queries, s, k, bounds, notes, point)
    gains = inc.astype(np.float64) @ s
    useful = np.flatnonzero(gains > 0)
    inc, pts = inc[useful], pts[useful]
    bounds.append(("the K largest realisable sets", top_k_sets_bound(inc, s, k)))
    first = greedy(inc, s, k)
    greedy_value = exact_sum(s, inc[first].any(axis=0)) if first else Fraction(0)
    if len(inc) > k and greedy_value < min(b for _, b in bounds):
        # the LP dual often proves the greedy optimal at once (before any branching)
        lp = lp_dual_bound(inc, s, k)
        if lp is not None:
            bounds.append(("LP dual", lp))
    method = f"branch and bound over {len(inc):,} maximal realisable sets"
    if len(inc) <= k or greedy_value >= min(b for _, b in bounds):
        # every set fits, or the greedy attains a proven bound: it is the maximum
        chosen, finished, float_upper = first, True, float(greedy_value)
        why = "every set fits" if len(inc) <= k else f"it attains the {_smallest(bounds)}"
        method = f"greedy over {len(inc):,} maximal realisable sets, optimal: {why}"
    else:
        chosen, finished, float_upper = branch_and_bound(inc, s, k, first, max_work=max_work,
                                                         deadline=deadline)
    covered = inc[chosen].any(axis=0) if chosen else np.zeros(len(queries), dtype=bool)
    achieved = exact_sum(s, covered)
    witness = tuple(tuple(int(c) for c in pts[j]) for j in chosen)
    if finished:
        return CoverageResult(k, achieved, achieved, True, method, witness,
                              _indices(covered), tuple(bounds))
    notes.append(f"not exact: the branch and bound stopped after {max_work:,} operations"
                 + ("" if deadline is None else " or at its time limit")
                 + "; the smallest proven upper bound is used")
    bounds.append(("branch and bound (largest open node)", Fraction(float_upper)))
    value = max(achieved, min(b for _, b in bounds))
    return CoverageResult(k, value, achieved, value == achieved,
                          f"{method} (stopped): {_smallest(bounds)}", witness,
                          _indices(covered), tuple(bounds), tuple(notes))


def maximal_patterns(domain: Domain, queries: Sequence[Any], max_states: int = MAX_STATES
                     ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """The maximal realisable sets I(x) (rows over ``queries``) and a point realising each.
    Predicate queries: :func:`~.substitution.realisable_sets` over the atoms; with Boolean
    clauses, over their disjoint terms (:func:`~.clauses.expand`; moving a value to a
    dominating atom only adds terms, hence clauses — OR is monotone — so every maximal set is
    still realised), collapsed to the clauses. A :class:`~tessera.errors.ResourceError` past
    ``max_states`` patterns, for a clause that cannot be split exactly, or for a compiled
    (BDD) query."""
    if all(type(q) is Query for q in queries):
        sets = realisable_sets(domain, queries, max_states=max_states, only_maximal=True)
        keep = maximal_rows(sets.incidence)
        return sets.incidence[keep], sets.points[keep]
    if not all(type(q) is Query or isinstance(q, BooleanClause) for q in queries):
        raise ResourceError("compiled Boolean (BDD) queries have no enumerable patterns here")
    ex = expand(queries)
    if not ex.exact:
        raise ResourceError("a Boolean clause has too many disjoint terms to enumerate")
    sets = realisable_sets(domain, ex.queries, max_states=max_states, only_maximal=True)
    inc = ex.collapse(sets.incidence)
    _, first = np.unique(np.packbits(inc, axis=1), axis=0, return_index=True)
    first = np.sort(first)
    inc, pts = inc[first], sets.points[first]
    keep = maximal_rows(inc)
    return inc[keep], pts[keep]


def _bounded(domain: Domain, queries: Sequence[Query], s: npt.NDArray[np.float64], k: int,
             bounds: list[tuple[str, Fraction]], notes: list[str],
             point: PointSolver | None) -> CoverageResult:
    """Bounds without enumeration, and the engine's greedy witness (module docs)."""
    colour = (colouring_top_k_bound(domain, queries, s, k)
              if all(type(q) is Query for q in queries) else None)
    if colour is not None:
        bounds.append(("colouring (K largest per colour class)", colour))
    records: list[tuple[int, ...]] = []
    covered = np.zeros(len(queries), dtype=bool)
    if point is not None:
        left = s.copy()
        for _ in range(k):
            x, upper = point(left)
            if x is None or upper <= 0:
                break
            hit = covered_by(domain, queries, [x])
            if not np.any(left[hit] > 0):
                break
            records.append(x)
            covered |= hit
            left[hit] = 0.0
            if len(records) == 1:  # the first solve's bound on S: K·S
                bounds.append(("K·S (K times the row score)", k * Fraction(upper)))
    achieved = exact_sum(s, covered)
    value = max(achieved, min(b for _, b in bounds))
    return CoverageResult(k, value, achieved, value == achieved,
                          f"greedy witness; {_smallest(bounds)}", tuple(records),
                          _indices(covered), tuple(bounds), tuple(notes))


def _smallest(bounds: Sequence[tuple[str, Fraction]]) -> str:
    name, _ = min(bounds, key=lambda b: b[1])
    return f"bound {name}"


def _indices(mask: npt.NDArray[np.bool_]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.flatnonzero(mask))
