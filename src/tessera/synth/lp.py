"""The LP approach to private synthetic data (docs/theory.md §6, Ghazi et al. §3).

Input: noisy answers of a workload F, calibrated by Tessera's overlap accounting
(:func:`tessera.release.answering`), normalised to f̂_f = noisy_f / n. Output: a histogram h over
the domain 𝔻 that solves the primal of Ghazi et al.'s eq. (1),

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
argmax is the entering column when v* + μ > 0. Dropping μ (Ghazi et al.'s printed eq. (2)–(3))
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
of F. The default m is n (as many rows as the data: the public n, or the release's noisy n̂
under add/remove), like every method. Given an ``accuracy``, m is Hoeffding's with a union bound
instead: every query within ``accuracy`` of ⟨f, h⟩ with probability ≥ 1 − η when
m ≥ ln(2|F|/η)/(2·accuracy²) (:func:`sample_size`); :func:`default_accuracy` (the LP's α, never
finer than the measurements' own noise scale) is a sensible one. m is capped at ``max_rows``.
Either way the record states the sampling accuracy m rows give (:func:`sampling_accuracy`).

**Guarantee** (docs/theory.md §6): the data's histogram is feasible with α = ‖f̂ − f(X)‖_∞, so
the optimum h* has ‖⟨f, h*⟩ − f(X)‖_∞ ≤ 2‖f̂ − f(X)‖_∞ (exactly when ``alpha`` is optimal; with a
gap, add the gap).

The pieces: the targets f̂ and the query values of points (:mod:`tessera.synth.lp_targets`),
the HiGHS master and the explicit reference LP (:mod:`tessera.synth.lp_master`); here,
the column generation (the pricing on the engine), the solution and the rows.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tessera.engine import DEFAULT_MEMORY_LIMIT, GibbsModel
from tessera.engine.factors import Function
from tessera.errors import QueryError, TesseraError
from tessera.synth.lp_master import Master
from tessera.synth.lp_targets import QueryEvaluator, Targets, query_values, release_targets
from tessera.workload.value_classes import ValueClasses

if TYPE_CHECKING:  # the release layer is a sibling of synth: no runtime import (lint-imports)
    import pandas as pd

    from tessera.release.answering import Release

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: Default cap on the number of synthetic rows.
MAX_ROWS = 1_000_000
#: Floor of the default sampling accuracy (when the LP fits exactly, α = 0).
MIN_ACCURACY = 1e-3
#: Weights below this are dropped from the returned histogram (then renormalised; α is
#: recomputed on the histogram actually returned).
ZERO_WEIGHT = 1e-13


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
        "budget": cert.get("budget"),
        "certificate": cert,
        "calibration": cert.get("calibration"),
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

    Default m = n, the normaliser (the public n, or the release's noisy n̂ under add/remove):
    as many rows as the data, like every other method; with ``accuracy`` given, m =
    :func:`sample_size` at ``accuracy`` and ``failure`` instead (Hoeffding). Capped at
    ``max_rows``.
    """
    targets = release_targets(release, n=n, public_n=public_n, answers=answers)
    solution = solve_lp(targets, **options)
    k = len(targets.values)
    if m is None and accuracy is None:
        m = min(max(1, round(targets.n)), int(max_rows))
    elif m is None:
        m = min(sample_size(k, accuracy, failure), int(max_rows))
    if m < 1:
        raise TesseraError(f"m = {m}: at least one row")
    t0 = time.perf_counter()
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    rows = solution.sample(m, gen)
    timings = {"sample": time.perf_counter() - t0}
    return LPSynthesis(solution, rows, failure, sampling_accuracy(k, m, failure),
                       release_privacy(release, targets), timings)
