"""The LP approach's master problem on HiGHS (docs/theory.md §6), and the explicit reference LP.

:class:`Master` is the restricted master of (P) over a growing set of points (column 0 is α;
rows L_f, U_f per query and S: Σ h = 1), re-optimised by the primal simplex from the last basis
when :func:`tessera.synth.lp.solve_lp`'s pricing adds a column; its duals (y⁻, y⁺, μ, with the
sign conventions of :mod:`tessera.synth.lp`) drive the pricing. :func:`explicit_lp` solves
(P) with one variable per point of a small domain: the reference column generation is checked
against (tests/synth/test_lp.py).
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import highspy
import numpy as np
import numpy.typing as npt

from tessera.engine.factors import Function
from tessera.errors import ResourceError, TesseraError
from tessera.schema.domain import Domain
from tessera.synth.lp_targets import Targets, query_values

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
#: A master re-optimisation is stopped as stalled after max(STALL_SECONDS, STALL_FACTOR × the
#: slowest one so far) and solved again from scratch (:meth:`Master.solve`).
STALL_SECONDS = 2.0
STALL_FACTOR = 20.0


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


def highs(primal: bool = False) -> highspy.Highs:
    """A quiet HiGHS simplex instance at :data:`LP_TOLERANCE` (primal simplex for the master)."""
    h = _quiet_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("solver", "simplex")  # basic solutions: support ≤ |F| + 1
    if primal:  # an added column keeps the basis primal feasible: primal simplex re-optimises
        h.setOptionValue("simplex_strategy", 4)
    h.setOptionValue("primal_feasibility_tolerance", LP_TOLERANCE)
    h.setOptionValue("dual_feasibility_tolerance", LP_TOLERANCE)
    return h


def row_bounds(values: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Rows 2j (L_f: ≥ f̂), 2j + 1 (U_f: ≤ f̂), then S (= 1)."""
    k = len(values)
    inf = highspy.kHighsInf
    lower = np.empty(2 * k + 1)
    upper = np.empty(2 * k + 1)
    lower[0:2 * k:2], upper[0:2 * k:2] = values, inf
    lower[1:2 * k:2], upper[1:2 * k:2] = -inf, values
    lower[-1] = upper[-1] = 1.0
    return lower, upper


def column_entries(rows: BoolArray) -> tuple[IntArray, npt.NDArray[np.int32], FloatArray]:
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
        self.highs = highs(primal=True)
        inf = highspy.kHighsInf
        self.highs.addCols(1, np.array([1.0]), np.array([0.0]), np.array([inf]), 0,
                           np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0))
        lower, upper = row_bounds(self.values)
        # row-wise: α enters L_f with +1 and U_f with −1; S has no α entry
        row_starts = np.arange(2 * self.k + 1, dtype=np.int32)
        self.highs.addRows(2 * self.k + 1, lower, upper, 2 * self.k, row_starts,
                           np.zeros(2 * self.k, dtype=np.int32), np.tile([1.0, -1.0], self.k))

    def add(self, rows: BoolArray) -> None:
        """Add points given by their query values (one row of ``rows`` per point)."""
        rows = np.atleast_2d(rows)
        if rows.shape[0] == 0:
            return
        starts, index, coef = column_entries(rows)
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

    ``normalised=False`` drops Σ h = 1 (h ≥ 0 only): the LP whose dual is Ghazi et al.'s printed
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
    h = highs()
    k = len(targets.values)
    inf = highspy.kHighsInf
    lower, upper = row_bounds(targets.values)
    if not normalised:
        lower[-1], upper[-1] = -inf, inf
    h.addRows(2 * k + 1, lower, upper, 0, np.zeros(2 * k + 1, np.int32), np.zeros(0, np.int32),
              np.zeros(0))
    h.addCols(1, np.array([1.0]), np.array([0.0]), np.array([inf]), 2 * k,
              np.zeros(1, np.int32), np.arange(2 * k, dtype=np.int32), np.tile([1.0, -1.0], k))
    starts, index, coef = column_entries(values)
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


