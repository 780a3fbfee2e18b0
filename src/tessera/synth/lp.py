"""The LP approach to private synthetic data (docs/theory.md §6, paper 2 §3).

Input: noisy answers of a workload F, calibrated by Tessera's overlap accounting
(:func:`tessera.release.answer`), normalised to f̂_f = noisy_f / n. Output: a histogram h over
the domain 𝔻 that solves the primal of paper 2's eq. (1),

    (P)   min α   s.t.   f̂_f − α ≤ Σ_x f(x) h_x ≤ f̂_f + α   (f ∈ F),   Σ_x h_x = 1,   h ≥ 0,

with at most |F| + 1 points of positive mass, and synthetic rows drawn from it. Everything here
is **post-processing** of the release: the rows carry the release's guarantee and nothing else
(:attr:`LPSynthesis.privacy`).

**Column generation** (never 2^d variables). The restricted master is (P) over a finite set of
points (columns), re-solved by HiGHS's primal simplex from the last basis when a column is added
(:meth:`Master.solve` for stalls). Its rows are, per query, L_f: Σ_k f(x_k) h_k + α ≥ f̂_f and
U_f: Σ_k f(x_k) h_k − α ≤ f̂_f, and S: Σ_k h_k = 1.
HiGHS reports row duals of a minimisation with the convention "reduced cost = c − Aᵀ·dual", so
the dual of a ≥ row is ≥ 0 and of a ≤ row ≤ 0: y⁻_f = dual(L_f) ≥ 0, y⁺_f = −dual(U_f) ≥ 0 and
μ = dual(S) is **free** (the corrected dual of docs/theory.md §6). The reduced cost of a point x
(cost 0, coefficient f(x) in L_f and U_f, 1 in S) is

    c̄_x = 0 − Σ_f f(x) y⁻_f − Σ_f f(x) (−y⁺_f) − μ = −(Σ_f f(x)(y⁻_f − y⁺_f) + μ),

and α's (cost 1, +1 in L_f, −1 in U_f) is 1 − Σ_f (y⁻_f + y⁺_f) ≥ 0. So the master is optimal
for (P) iff v* + μ ≤ 0 with v* = max_x Σ_f θ_f f(x), θ = y⁻ − y⁺ (eq. (3), corrected): the
**pricing** problem is the engine's max-plus program with signed weights θ
(:meth:`~tessera.engine.GibbsModel.max_assignment`, exponential only in the width), and its
argmax is the entering column when v* + μ > 0. Dropping μ (paper 2's printed eq. (2)–(3))
tests v* > 0 instead, which can stop at a non-optimal master (tests/synth/test_lp.py).

**Certified gap.** For any y ≥ 0 with Σ_f (y⁺_f + y⁻_f) ≤ 1 and any h in the simplex,

    α(h) ≥ Σ_f [y⁻_f (f̂_f − ⟨f, h⟩) + y⁺_f (⟨f, h⟩ − f̂_f)]
         = Σ_f f̂_f θ_f − ⟨θ·f, h⟩ ≥ Σ_f f̂_f θ_f − v*,

so LB(y) = Σ_f f̂_f θ_f − v* (the corrected dual objective at μ = −v*) is a lower bound on the
optimum of (P), computed from the pricing value at every iteration (y rescaled by
1/Σ(y⁺ + y⁻) if the solver's tolerances push that sum above 1). The primal value reported is
recomputed from the returned h (clipped at 0, renormalised), α = max_f |⟨f, h⟩ − f̂_f|, so
``alpha − lower_bound`` is a gap that does not rely on the LP solver's tolerances. The loop stops
when the gap is ≤ ``gap_tolerance`` or no column prices out (v* + μ ≤ ``pricing_tolerance``,
or the argmax is already a column), or on an iteration or time limit, returning the best primal
and the best bound seen.

**n, the number of rows.** Under *substitution* n is public (neighbours have the same n) and the
caller passes it. Under *add/remove* n is private: it is taken from the release itself, as the
noisy answer of a released tautology query (``TRUE`` in the workload, or a cube's total), which
is post-processing; passing ``n`` then requires ``public_n=True``, a statement that n is public
knowledge (the release's guarantee does not cover it). Without either, the call is refused.
Queries the release did not answer (weight 0, scale ∞) are not in the LP.

**Rows.** m i.i.d. draws from h (post-processing; numpy's generator is fine). Each support point
is the representative of a product of value classes on which every f ∈ F is constant; a drawn
row takes a uniform code within each class (like the engine's sampler), which changes no answer
of F. The default m is Hoeffding's with a union bound: every query within ``accuracy`` of ⟨f, h⟩
with probability ≥ 1 − η when m ≥ ln(2|F|/η)/(2·accuracy²) (:func:`sample_size`). The accuracy
defaults to the LP's α (the rows are then within 2α of f̂ w.p. ≥ 1 − η), but never finer than
the measurements' own noise scale (:func:`default_accuracy`); m is capped at ``max_rows``.

**Guarantee** (docs/theory.md §6): the data's histogram is feasible with α = ‖f̂ − f(X)‖_∞, so
the optimum h* has ‖⟨f, h*⟩ − f(X)‖_∞ ≤ 2‖f̂ − f(X)‖_∞ (exactly when ``alpha`` is optimal; with a
gap, add the gap).

Why this module is long (about 800 lines): it is one method, the LP synthesiser (the
targets, the column-generation master and its pricing, the explicit-domain LP that validates it,
and the sampling of rows from the optimum with its accuracy bound). Each part is used only by
:func:`solve_lp` or to check it.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import highspy
import numpy as np
import numpy.typing as npt

from tessera.engine import DEFAULT_MEMORY_LIMIT, BooleanQuery, GibbsModel, workload_functions
from tessera.engine.factors import Function
from tessera.errors import QueryError, ResourceError, TesseraError
from tessera.privacy import Neighbours
from tessera.schema.domain import Domain
from tessera.workload.query import Query
from tessera.workload.value_classes import ValueClasses
from tessera.workload.workload import Workload

if TYPE_CHECKING:  # the release layer is a sibling of synth: no runtime import (lint-imports)
    import pandas as pd

    from tessera.release.answer import Release

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: HiGHS primal and dual feasibility tolerances of the master and the explicit LP (the default
#: 1e-7 would limit agreement between the two to about that).
LP_TOLERANCE = 1e-9
#: :func:`explicit_lp` enumerates the domain: at most this many points.
EXPLICIT_MAX_POINTS = 1 << 16
#: ... and builds a matrix of at most this many nonzeros (HiGHS indexes them with int32).
EXPLICIT_MAX_NONZEROS = 200_000_000
#: :class:`QueryEvaluator` tabulates a predicate over its attribute's codes up to this size.
TABLE_MAX = 1 << 16
#: A master re-optimisation is stopped as stalled after max(STALL_SECONDS, STALL_FACTOR × the
#: slowest one so far) and solved again from scratch (:meth:`Master.solve`).
STALL_SECONDS = 2.0
STALL_FACTOR = 20.0
#: Default cap on the number of synthetic rows.
MAX_ROWS = 1_000_000
#: Floor of the default sampling accuracy (when the LP fits exactly, α = 0).
MIN_ACCURACY = 1e-3
#: Weights below this are dropped from the returned histogram (then renormalised; α is
#: recomputed on the histogram actually returned).
ZERO_WEIGHT = 1e-13


# -- targets ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Targets:
    """What the LP fits: normalised answers f̂ of queries over ``domain``.

    ``values[j]`` = f̂ of ``functions[j]``; ``scales[j]`` its noise scale in normalised units
    (NaN if unknown); ``n`` the normaliser and ``n_source`` where it came from; ``indices[j]``
    the query's position in the release's expanded order (0..k−1 without a release).
    """

    domain: Domain
    functions: tuple[Function, ...]
    names: tuple[str, ...]
    values: FloatArray
    scales: FloatArray
    n: float
    n_source: str
    indices: IntArray

    @staticmethod
    def of(
        domain: Domain,
        queries: Sequence[Function] | Workload,
        values: npt.ArrayLike,
        *,
        names: Sequence[str] | None = None,
        n: float = 1.0,
        n_source: str = "given",
    ) -> Targets:
        """Targets from already normalised values (no release: tests, other pipelines)."""
        if isinstance(queries, Workload):
            functions, own = workload_functions(queries)
            names = own if names is None else names
        else:
            functions = tuple(queries)
        vals = np.asarray(values, dtype=np.float64).reshape(-1)
        if vals.shape != (len(functions),):
            raise QueryError(f"{vals.size} target values for {len(functions)} queries")
        if not np.all(np.isfinite(vals)):
            raise QueryError("target values must be finite")
        names = tuple(names) if names is not None else tuple(f"q{j}" for j in range(len(vals)))
        if len(functions) == 0:
            raise QueryError("the LP needs at least one query")
        return Targets(domain, tuple(functions), names, vals, np.full(len(vals), np.nan),
                       float(n), n_source, np.arange(len(vals), dtype=np.int64))


def release_targets(
    release: Release, *, n: float | None = None, public_n: bool = False,
    answers: str = "published",
) -> Targets:
    """The normalised answers f̂ = answer / n of a release's answered queries.

    ``answers``: ``"published"`` (the release's last post-processing step, else the noisy
    answers) or ``"noisy"``. ``n``: module docs (required under substitution unless the release
    answers a tautology; under add/remove only with ``public_n=True``).
    """
    plan = release.plan
    workload = plan.workload
    functions, names = workload_functions(workload)
    if answers == "published":
        values = np.asarray(release.answers, dtype=np.float64)
    elif answers == "noisy":
        values = np.asarray(release.noisy, dtype=np.float64)
    else:
        raise TesseraError(f"unknown answers {answers!r}", hint="'published' or 'noisy'")
    scales = np.asarray(plan.scales, dtype=np.float64)
    released = np.isfinite(scales)
    if not released.any():
        raise TesseraError("the release answers no query")
    neighbours = Neighbours.parse(plan.neighbours)
    n_value, n_source = _normaliser(functions, names, values, released, neighbours, n, public_n)
    idx = np.flatnonzero(released).astype(np.int64)
    return Targets(workload.domain, tuple(functions[i] for i in idx),
                   tuple(names[i] for i in idx), values[idx] / n_value, scales[idx] / n_value,
                   n_value, n_source, idx)


def _normaliser(
    functions: Sequence[Function], names: Sequence[str], values: FloatArray, released: BoolArray,
    neighbours: Neighbours, n: float | None, public_n: bool,
) -> tuple[float, str]:
    if n is not None:
        if not (math.isfinite(n) and n > 0):
            raise TesseraError(f"n must be a finite number > 0, got {n!r}")
        if neighbours is Neighbours.SUBSTITUTE:
            return float(n), "public n (substitution: neighbours have the same n)"
        if not public_n:
            raise TesseraError(
                "under add/remove neighbours the number of rows n is private: the release's "
                "guarantee does not cover an n passed in",
                hint="answer a tautology (TRUE) in the workload and let n come from its noisy "
                "answer, or pass public_n=True if n is public knowledge")
        return float(n), "n given as public knowledge (public_n=True; not covered by the release)"
    totals = [j for j, f in enumerate(functions)
              if released[j] and isinstance(f, Query) and not f.predicates]
    if not totals:
        hint = ("pass n (public under substitution)" if neighbours is Neighbours.SUBSTITUTE
                else "add a tautology (TRUE) to the workload: its noisy answer is the total")
        raise TesseraError("the number of rows n is needed to normalise the answers", hint=hint)
    j = totals[0]
    return max(float(values[j]), 1.0), (f"noisy total of query {names[j]!r} (clipped at 1; "
                                         "post-processing of the release)")


# -- the master LP ----------------------------------------------------------------------------


_BANNER_SHOWN = False


def _quiet_highs() -> highspy.Highs:
    """A HiGHS instance without its banner: the first construction in a process prints it to
    the C-level stdout before any option can be set, so fd 1 points to /dev/null meanwhile."""
    global _BANNER_SHOWN
    if _BANNER_SHOWN:
        return highspy.Highs()
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no usable stdout: nothing to protect
        _BANNER_SHOWN = True
        return highspy.Highs()
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            h = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    _BANNER_SHOWN = True
    return h


def _highs(primal: bool = False) -> highspy.Highs:
    h = _quiet_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("solver", "simplex")  # basic solutions: support ≤ |F| + 1
    if primal:  # an added column keeps the basis primal feasible: primal simplex re-optimises
        h.setOptionValue("simplex_strategy", 4)
    h.setOptionValue("primal_feasibility_tolerance", LP_TOLERANCE)
    h.setOptionValue("dual_feasibility_tolerance", LP_TOLERANCE)
    return h


def _row_bounds(values: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Rows 2j (L_f: ≥ f̂), 2j + 1 (U_f: ≤ f̂), then S (= 1)."""
    k = len(values)
    inf = highspy.kHighsInf
    lower = np.empty(2 * k + 1)
    upper = np.empty(2 * k + 1)
    lower[0:2 * k:2], upper[0:2 * k:2] = values, inf
    lower[1:2 * k:2], upper[1:2 * k:2] = -inf, values
    lower[-1] = upper[-1] = 1.0
    return lower, upper


def _column_entries(rows: BoolArray) -> tuple[IntArray, npt.NDArray[np.int32], FloatArray]:
    """CSC pieces of point columns: for each point, rows 2j and 2j + 1 where f_j = 1, and S."""
    k = rows.shape[1]
    rows = np.asarray(rows, dtype=bool)
    counts = 2 * rows.sum(axis=1) + 1
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32)
    point, j = np.nonzero(rows)  # row-major: grouped by point, j increasing
    index = np.empty(int(counts.sum()), dtype=np.int32)
    # within each point's block: 2j, 2j + 1 for its queries, then S
    offsets = starts[point] + 2 * (np.arange(len(j)) - np.concatenate(
        [[0], np.cumsum(rows.sum(axis=1))[:-1]])[point])
    index[offsets] = 2 * j
    index[offsets + 1] = 2 * j + 1
    index[starts + counts - 1] = 2 * k
    return starts, index, np.ones(len(index))


@dataclass(frozen=True)
class MasterSolution:
    """The restricted master's solution: α, h on its columns, and its duals."""

    objective: float
    weights: FloatArray
    y_minus: FloatArray  # dual of L_f (≥ 0)
    y_plus: FloatArray  # minus the dual of U_f (≥ 0)
    mu: float  # dual of Σ h = 1 (free)
    simplex_iterations: int


class Master:
    """The restricted master LP over a growing set of points (column 0 is α)."""

    def __init__(self, values: FloatArray) -> None:
        self.values = np.asarray(values, dtype=np.float64)
        self.k = len(self.values)
        self.n_columns = 0
        self.slowest = 0.0  # seconds of the slowest re-optimisation so far
        self.restarts = 0  # stalled runs solved again from scratch
        self.highs = _highs(primal=True)
        inf = highspy.kHighsInf
        self.highs.addCols(1, np.array([1.0]), np.array([0.0]), np.array([inf]), 0,
                           np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
        lower, upper = _row_bounds(self.values)
        # row-wise: α enters L_f with +1 and U_f with −1; S has no α entry
        row_starts = np.arange(2 * self.k + 1, dtype=np.int32)
        self.highs.addRows(2 * self.k + 1, lower, upper, 2 * self.k, row_starts,
                           np.zeros(2 * self.k, dtype=np.int32), np.tile([1.0, -1.0], self.k))

    def add(self, rows: BoolArray) -> None:
        """Add points given by their query values (one row of ``rows`` per point)."""
        rows = np.atleast_2d(rows)
        if rows.shape[0] == 0:
            return
        starts, index, coef = _column_entries(rows)
        n = rows.shape[0]
        self.highs.addCols(n, np.zeros(n), np.zeros(n), np.full(n, highspy.kHighsInf),
                           len(index), starts, index, coef)
        self.n_columns += n

    def solve(self) -> MasterSolution:
        """Re-optimise from the current basis (primal simplex). A run that takes far longer
        than the slowest one so far (a stall of the degenerate primal simplex, seen at ~1,000
        columns on 2,500 rows) is stopped and the LP solved again from scratch by the dual
        simplex, which is used from then on."""
        h = self.highs
        ok = highspy.HighsModelStatus.kOptimal
        limit = max(STALL_SECONDS, STALL_FACTOR * self.slowest)
        h.setOptionValue("time_limit", h.getRunTime() + limit)  # HiGHS's clock is cumulative
        t0 = time.perf_counter()
        h.run()
        status = h.getModelStatus()
        if status != ok:
            self.restarts += 1
            h.clearSolver()
            h.setOptionValue("simplex_strategy", 1)
            h.setOptionValue("time_limit", highspy.kHighsInf)
            h.run()
            status = h.getModelStatus()
        self.slowest = max(self.slowest, time.perf_counter() - t0)
        if status != ok:
            raise TesseraError(f"HiGHS: the master LP ended with {h.modelStatusToString(status)}")
        sol = h.getSolution()
        col = np.asarray(sol.col_value)
        dual = np.asarray(sol.row_dual)
        return MasterSolution(
            objective=float(h.getInfo().objective_function_value),
            weights=col[1:].copy(),
            y_minus=dual[0:2 * self.k:2].copy(),
            y_plus=-dual[1:2 * self.k:2],
            mu=float(dual[-1]),
            simplex_iterations=int(h.getInfo().simplex_iteration_count),
        )


# -- evaluation -------------------------------------------------------------------------------


class QueryEvaluator:
    """f_j(x) for all j at once: predicate queries as table look-ups (one per predicate, an AND
    per query, vectorised over points and queries); other functions by their own evaluate."""

    def __init__(self, domain: Domain, functions: Sequence[Function]) -> None:
        self.domain = domain
        self.functions = tuple(functions)
        tables, attrs, owner, others = [], [], [], []
        for j, f in enumerate(self.functions):
            if isinstance(f, Query) and all(domain[p.attribute].size <= TABLE_MAX
                                            for p in f.predicates):
                for p in f.predicates:
                    a = domain.index(p.attribute)
                    tables.append(p.coverage.contains_array(np.arange(domain[p.attribute].size)))
                    attrs.append(a)
                    owner.append(j)
            else:
                others.append(j)
        self.automata: dict[int, tuple[IntArray, list[IntArray], BoolArray]] = {}
        for j in others:
            f = self.functions[j]
            layers = (f.cofactor_layers(f.scope, max_states=1 << 20)
                      if isinstance(f, BooleanQuery) and f.scope else None)
            if layers is not None:  # read once, walked for every point
                positions = np.array([domain.index(a) for a in f.scope], dtype=np.int64)
                self.automata[j] = (positions, list(layers[0]), layers[1])
        sizes = [len(t) for t in tables]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.flat = (np.concatenate(tables) if tables else np.zeros(0)).astype(bool)
        self.attrs = np.asarray(attrs, dtype=np.int64)
        self.owner = np.asarray(owner, dtype=np.int64)
        self.others = others

    def __call__(self, codes: npt.ArrayLike) -> BoolArray:
        """Shape (points, |F|)."""
        codes = np.atleast_2d(np.asarray(codes, dtype=np.int64))
        out = np.ones((codes.shape[0], len(self.functions)), dtype=bool)
        if len(self.attrs):
            member = self.flat[self.offsets + codes[:, self.attrs]]  # (points, predicates)
            false = ~member
            rows, cols = np.nonzero(false)
            out[rows, self.owner[cols]] = False
        for j in self.others:
            if j in self.automata:
                positions, transitions, accept = self.automata[j]
                state = np.zeros(codes.shape[0], dtype=np.int64)
                for a, table in zip(positions, transitions):
                    state = table[state, codes[:, a]]
                out[:, j] = accept[state]
            else:
                out[:, j] = self.functions[j].evaluate(self.domain, codes)
        return out


def query_values(domain: Domain, functions: Sequence[Function], codes: npt.ArrayLike) -> BoolArray:
    """f_j(x) for rows of codes: shape (rows, |F|)."""
    return QueryEvaluator(domain, functions)(codes)


def _histogram(values: BoolArray, weights: FloatArray,
               targets: FloatArray) -> tuple[FloatArray, FloatArray, float]:
    """(h clipped at 0, tiny weights dropped, renormalised; ⟨f, h⟩; max_f |⟨f, h⟩ − f̂_f|)."""
    h = np.where(weights > ZERO_WEIGHT, weights, 0.0)
    total = math.fsum(h.tolist())
    if total <= 0:
        raise TesseraError("the LP returned a histogram of zero mass")
    h = h / total
    fitted = values.T.astype(np.float64) @ h
    return h, fitted, float(np.max(np.abs(fitted - targets)))


# -- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Iteration:
    """One round of column generation: the master's α, the certified bound, the pricing."""

    iteration: int
    columns: int
    alpha: float  # primal value of this round's master (recomputed from h)
    lower_bound: float  # LB(y) of this round (not the running best)
    pricing: float  # v* + μ: > 0 means the argmax enters
    seconds: float  # since the start


@dataclass(frozen=True, eq=False)
class LPSolution:
    """A solution of (P) with its certificate of (near-)optimality.

    ``support`` (points as codes, value-class representatives) and ``weights`` (h > 0 on them,
    summing to 1) are the sparse histogram; ``fitted[j]`` = ⟨f_j, h⟩; ``alpha`` =
    max_j |fitted_j − f̂_j| (an upper bound on the optimum), ``lower_bound`` a certified lower
    bound; ``status``: ``"optimal"`` (gap ≤ tolerance or no column prices out),
    ``"stalled"`` (the argmax is a column already but its reduced cost is above the tolerance:
    the master's numerical limit; the gap says how far from optimal), ``"iteration limit"`` or
    ``"time limit"``.
    """

    targets: Targets
    support: IntArray
    weights: FloatArray
    fitted: FloatArray
    alpha: float
    lower_bound: float
    status: str
    gap_tolerance: float
    iterations: int
    columns: int
    width: int
    y_minus: FloatArray
    y_plus: FloatArray
    mu: float
    history: tuple[Iteration, ...]
    timings: dict[str, float]
    classes: tuple[ValueClasses, ...] | None = None
    restarts: int = 0  # stalled master runs solved again from scratch

    @property
    def gap(self) -> float:
        return max(self.alpha - self.lower_bound, 0.0)

    @property
    def certified(self) -> bool:
        """The gap is within the tolerance (an optimum up to ``gap_tolerance``)."""
        return self.gap <= self.gap_tolerance

    def sample(self, m: int, rng: np.random.Generator) -> IntArray:
        """m i.i.d. rows from h as codes (uniform codes within each support point's classes)."""
        pick = rng.choice(len(self.weights), size=int(m), p=self.weights)
        rows = self.support[pick].astype(np.int64)
        if self.classes is not None:
            for i, vc in enumerate(self.classes):
                if vc.n_classes < vc.size:
                    rows[:, i] = vc.expand(vc.class_of(rows[:, i]), rng)
        return rows

    def record(self) -> dict[str, Any]:
        """A JSON-ready summary (no rows)."""
        return {
            "alpha": self.alpha, "lower_bound": self.lower_bound, "gap": self.gap,
            "certified": self.certified, "gap_tolerance": self.gap_tolerance,
            "status": self.status, "iterations": self.iterations, "columns": self.columns,
            "support": len(self.weights), "queries": len(self.targets.values),
            "width": self.width, "n": self.targets.n, "n_source": self.targets.n_source,
            "restarts": self.restarts, "timings": dict(self.timings),
        }


# -- column generation ------------------------------------------------------------------------


def solve_lp(
    targets: Targets,
    *,
    initial: npt.ArrayLike | None = None,
    gap_tolerance: float = 1e-8,
    pricing_tolerance: float = 1e-10,
    max_iterations: int = 100_000,
    time_limit: float | None = None,
    constraints: Sequence[Function] = (),
    heuristic: str = "min-fill",
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    callback: Any = None,
) -> LPSolution:
    """Solve (P) for ``targets`` by column generation (module docs).

    ``initial``: starting points (codes, one row each); default the argmax of Σ_f f̂_f f(x).
    ``constraints``: hard conditions on the points (e.g. a binary encoding's validity), as for
    :class:`~tessera.engine.GibbsModel`. ``callback(iteration: Iteration)`` is called after
    every round. The engine's decomposition is built once (its memory guard may refuse it with
    a :class:`~tessera.errors.ResourceError` before anything is allocated).
    """
    if not gap_tolerance >= 0:
        raise TesseraError("gap_tolerance must be ≥ 0")
    start = time.perf_counter()
    dom, fs, f_hat = targets.domain, targets.functions, targets.values
    model = GibbsModel(dom, fs, constraints=constraints, heuristic=heuristic,
                       memory_limit=memory_limit)
    timings = {"build": time.perf_counter() - start, "master": 0.0, "pricing": 0.0}
    if initial is None:
        t0 = time.perf_counter()
        _, x0 = model.with_theta(f_hat).max_assignment()
        timings["pricing"] += time.perf_counter() - t0
        points = [np.asarray(x0, dtype=np.int64)]
    else:
        points = [np.asarray(r, dtype=np.int64) for r in np.atleast_2d(initial)]
        if constraints:
            ok = np.all(query_values(dom, constraints, np.array(points)), axis=1)
            points = [p for p, good in zip(points, ok) if good]
            if not points:
                raise QueryError("no initial point satisfies the constraints")
    seen: set[bytes] = set()
    unique = []
    for p in points:
        if p.tobytes() not in seen:
            seen.add(p.tobytes())
            unique.append(p)
    codes = [*unique]
    evaluate = QueryEvaluator(dom, fs)
    buffer = evaluate(np.array(codes))  # f(x_k) of the columns, rows [0, len(codes))
    master = Master(f_hat)
    master.add(buffer)

    best_alpha, best_h, best_fit = math.inf, np.zeros(0), np.zeros(0)
    best_lb = 0.0  # α ≥ 0 always (LB at y = 0)
    history: list[Iteration] = []
    status = "iteration limit"
    sol = None
    iteration = 0
    while iteration < max_iterations:
        iteration += 1
        t0 = time.perf_counter()
        sol = master.solve()
        timings["master"] += time.perf_counter() - t0
        h, fitted, alpha = _histogram(buffer[: len(codes)], sol.weights, f_hat)
        if alpha < best_alpha:
            best_alpha, best_h, best_fit = alpha, h, fitted
        # the master's duals, clipped to the dual cone y ≥ 0
        y_minus, y_plus = np.maximum(sol.y_minus, 0.0), np.maximum(sol.y_plus, 0.0)
        theta = y_minus - y_plus
        t0 = time.perf_counter()
        v_star, x_star = model.with_theta(theta).max_assignment()
        timings["pricing"] += time.perf_counter() - t0
        x_star = np.asarray(x_star, dtype=np.int64)
        # LB(y) = Σ f̂θ − v* with y rescaled into Σ(y⁺ + y⁻) ≤ 1 (module docs)
        scale = max(1.0, math.fsum(y_minus.tolist()) + math.fsum(y_plus.tolist()))
        lb = (math.fsum((f_hat * theta).tolist()) - v_star) / scale
        best_lb = max(best_lb, lb)
        reduced = v_star + sol.mu  # > 0: x* has the negative reduced cost −(v* + μ)
        x_new = x_star if x_star.tobytes() not in seen else None
        record = Iteration(iteration, len(codes), alpha, lb, reduced,
                           time.perf_counter() - start)
        history.append(record)
        if callback is not None:
            callback(record)
        if best_alpha - best_lb <= gap_tolerance or reduced <= pricing_tolerance:
            status = "optimal"
            break
        if x_new is None:  # the argmax is a column already: the master is as good as it gets
            status = "stalled"
            break
        if time_limit is not None and time.perf_counter() - start > time_limit:
            status = "time limit"
            break
        seen.add(x_new.tobytes())
        row = evaluate(x_new[None, :])
        if len(codes) == len(buffer):  # grow geometrically (no quadratic copying)
            buffer = np.vstack([buffer, np.zeros_like(buffer)])
        buffer[len(codes)] = row[0]
        codes.append(x_new)
        master.add(row)
    assert sol is not None
    timings["total"] = time.perf_counter() - start
    keep = best_h > 0
    support = np.array(codes, dtype=np.int64)[: len(best_h)][keep]
    return LPSolution(
        targets=targets, support=support, weights=best_h[keep], fitted=best_fit,
        alpha=best_alpha, lower_bound=min(best_lb, best_alpha), status=status,
        gap_tolerance=gap_tolerance, iterations=iteration, columns=len(codes),
        width=model.width, y_minus=sol.y_minus, y_plus=sol.y_plus, mu=sol.mu,
        history=tuple(history), timings=timings,
        classes=tuple(model.structure.compiled.classes), restarts=master.restarts,
    )


# -- the explicit LP (reference) --------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ExplicitSolution:
    """(P) over every point of the domain: the reference for column generation."""

    alpha: float  # HiGHS's optimal objective
    points: IntArray  # every feasible point (codes)
    weights: FloatArray  # h on them
    y_minus: FloatArray
    y_plus: FloatArray
    mu: float
    seconds: float


def domain_points(domain: Domain, max_points: int = EXPLICIT_MAX_POINTS) -> IntArray:
    """Every point of ``domain`` as codes (refused above ``max_points``)."""
    if domain.size > max_points:
        raise ResourceError(f"the domain has {domain.size:,} points: the explicit LP takes at "
                            f"most {max_points:,}", hint="use solve_lp (column generation)")
    grid = itertools.product(*(range(s) for s in domain.sizes))
    return np.array(list(grid), dtype=np.int64).reshape(-1, len(domain))


def explicit_lp(
    targets: Targets, *, constraints: Sequence[Function] = (),
    max_points: int = EXPLICIT_MAX_POINTS, normalised: bool = True,
) -> ExplicitSolution:
    """Solve (P) with one variable per point of the domain (small domains only).

    ``normalised=False`` drops Σ h = 1 (h ≥ 0 only): the LP whose dual is paper 2's printed
    eq. (2), without μ — kept to show that it is a different problem (docs/theory.md §6).
    """
    start = time.perf_counter()
    points = domain_points(targets.domain, max_points)
    if constraints:
        points = points[np.all(query_values(targets.domain, constraints, points), axis=1)]
    values = query_values(targets.domain, targets.functions, points)
    nonzeros = 2 * int(values.sum()) + len(points)
    if nonzeros > EXPLICIT_MAX_NONZEROS:
        raise ResourceError(f"the explicit LP would have {nonzeros:,} nonzeros (limit "
                            f"{EXPLICIT_MAX_NONZEROS:,})", hint="use solve_lp (column generation)")
    h = _highs()
    k = len(targets.values)
    inf = highspy.kHighsInf
    lower, upper = _row_bounds(targets.values)
    if not normalised:
        lower[-1], upper[-1] = -inf, inf
    h.addRows(2 * k + 1, lower, upper, 0, np.zeros(2 * k + 1, np.int32), np.zeros(0, np.int32),
              np.zeros(0))
    h.addCols(1, np.array([1.0]), np.array([0.0]), np.array([inf]), 2 * k,
              np.zeros(1, np.int32), np.arange(2 * k, dtype=np.int32), np.tile([1.0, -1.0], k))
    starts, index, coef = _column_entries(values)
    n = len(points)
    h.addCols(n, np.zeros(n), np.zeros(n), np.full(n, inf), len(index), starts, index, coef)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise TesseraError(f"HiGHS: {h.modelStatusToString(h.getModelStatus())}")
    sol = h.getSolution()
    col, dual = np.asarray(sol.col_value), np.asarray(sol.row_dual)
    return ExplicitSolution(float(h.getInfo().objective_function_value), points, col[1:].copy(),
                            dual[0:2 * k:2].copy(), -dual[1:2 * k:2], float(dual[-1]),
                            time.perf_counter() - start)


# -- rows and the synthesis record ------------------------------------------------------------


def sample_size(n_queries: int, accuracy: float, failure: float = 0.05) -> int:
    """m ≥ ln(2|F|/η)/(2·accuracy²): m i.i.d. rows from h keep every ⟨f, h⟩ within
    ``accuracy`` with probability ≥ 1 − η (Hoeffding and a union bound, docs/theory.md §6)."""
    if not (accuracy > 0 and 0 < failure < 1 and n_queries >= 1):
        raise TesseraError("sample_size needs accuracy > 0, 0 < failure < 1, ≥ 1 query")
    return math.ceil(math.log(2 * n_queries / failure) / (2 * accuracy * accuracy))


def sampling_accuracy(n_queries: int, m: int, failure: float = 0.05) -> float:
    """The accuracy m rows give at failure probability η: √(ln(2|F|/η)/(2m))."""
    return math.sqrt(math.log(2 * n_queries / failure) / (2 * m))


@dataclass(frozen=True, eq=False)
class LPSynthesis:
    """Synthetic rows from the LP approach, with the solution and the input's privacy.

    ``rows``: codes (m × d); ``sampling_accuracy``: with probability ≥ 1 − ``failure`` every
    answered query on the rows is within it of ⟨f, h⟩, so within ``alpha + sampling_accuracy``
    of f̂. ``privacy``: the release's guarantees — the LP and the sampling are post-processing.
    """

    solution: LPSolution
    rows: IntArray
    failure: float
    sampling_accuracy: float
    privacy: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def private(self) -> bool:
        return bool(self.privacy.get("private"))

    def to_frame(self) -> pd.DataFrame:
        """The rows with their values (``attrs['private']`` as for a release)."""
        import pandas as pd

        dom = self.solution.targets.domain
        columns = {}
        for i, a in enumerate(dom):  # decode each code once, then index
            lookup = np.empty(a.size, dtype=object)
            lookup[:] = a.decode(np.arange(a.size))
            columns[a.name] = lookup[self.rows[:, i]]
        frame = pd.DataFrame(columns)
        frame.attrs["private"] = self.private
        return frame

    def record(self) -> dict[str, Any]:
        """JSON-ready: the solution's record, the sampling and the privacy of the input."""
        return self.solution.record() | {
            "rows": int(self.rows.shape[0]), "failure": self.failure,
            "sampling_accuracy": self.sampling_accuracy,
            "rows_within": self.solution.alpha + self.sampling_accuracy,
            "privacy": self.privacy, "timings": self.solution.timings | self.timings,
        }


def release_privacy(release: Release, targets: Targets) -> dict[str, Any]:
    """The input release's guarantee, carried over: the LP is post-processing of it."""
    cert = release.certificate
    return {
        "private": bool(release.private),
        "neighbours": str(release.plan.neighbours.value),
        "guarantees": list(cert.get("guarantees", [])),
        "certificate_digest": cert.get("digest"),
        "basis": "post-processing of the release (docs/theory.md §6): the LP, its histogram "
                 "and the sampled rows cost no privacy",
        "n": targets.n_source,
        "randomness": "private" if release.private else
                      "NOT PRIVATE: the input release used seeded test randomness",
    }


def default_accuracy(solution: LPSolution) -> float:
    """The default sampling accuracy: the LP's α, but not finer than the measurements' own
    noise scale (max_f of b_f/n or σ_f/n) nor :data:`MIN_ACCURACY` (when the LP fits exactly,
    α = 0; rows sampled more finely than the noise buy nothing)."""
    scales = solution.targets.scales
    noise = float(np.max(scales)) if np.all(np.isfinite(scales)) else 0.0
    return max(solution.alpha, noise, MIN_ACCURACY)


def synthesize(
    release: Release,
    *,
    n: float | None = None,
    public_n: bool = False,
    answers: str = "published",
    m: int | None = None,
    accuracy: float | None = None,
    failure: float = 0.05,
    max_rows: int = MAX_ROWS,
    rng: np.random.Generator | int | None = None,
    **options: Any,
) -> LPSynthesis:
    """The LP approach end to end: targets from ``release`` (:func:`release_targets`), (P) by
    column generation (:func:`solve_lp`, ``options``), then ``m`` rows from the histogram.

    Default m = :func:`sample_size` at ``accuracy`` (default :func:`default_accuracy`) and
    ``failure``, capped at ``max_rows``.
    """
    targets = release_targets(release, n=n, public_n=public_n, answers=answers)
    solution = solve_lp(targets, **options)
    k = len(targets.values)
    if m is None:
        acc = default_accuracy(solution) if accuracy is None else accuracy
        m = min(sample_size(k, acc, failure), int(max_rows))
    if m < 1:
        raise TesseraError(f"m = {m}: at least one row")
    t0 = time.perf_counter()
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    rows = solution.sample(m, gen)
    timings = {"sample": time.perf_counter() - t0}
    return LPSynthesis(solution, rows, failure, sampling_accuracy(k, m, failure),
                       release_privacy(release, targets), timings)
