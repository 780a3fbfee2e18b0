"""The adaptive synthesizer, Tessera's default method: AIM's selection and budget schedule on the
exact engine (docs/theory.md §5, "the adaptive method").

AIM (McKenna, Mullins, Sheldon, Miklau, "AIM: An Adaptive and Iterative Mechanism for
Differentially Private Synthetic Data", VLDB 2022, Algorithm 1) with these parts:

* **candidates** (:mod:`tessera.synth.candidates`): marginals over the downward closure of the
  workload's scopes, weighted by w_r = Σ_{s∈W} |r ∩ s|, and — beyond AIM — every workload query
  too wide for a dense marginal (a predicate or Boolean clause over many attributes), measured
  as its own count and fitted as a feature of the Gibbs model;
* **initialisation**: every one-way marginal of the attributes the candidates mention is measured;
* **round t**: (1) the candidates whose addition keeps the model's junction tree within
  ``max_model_size`` · (budget spent / budget) bytes are eligible — public information only, so
  no candidate past the engine's memory guard is ever selected; (2) the exponential mechanism
  selects r with quality

      s_r = w_r · ( ‖y_r − N μ̂_r‖₁ − E‖noise_r‖₁ ),   E‖noise_r‖₁ = √(2/π) σ · cells_r
      (Gaussian) or b · cells_r (Laplace),

  where y_r are the exact counts and μ̂_r the current model's marginal (exact when r lies in a
  measured scope, else from a sample of the model: post-processing either way); (3) the group is
  measured with discrete Gaussian (zCDP) or discrete Laplace (pure DP) noise; (4) the model is
  refitted to **all** measurements so far (:func:`tessera.estimation.maxent.fit`, warm-started);
  (5) if the refit moved r's marginal by less than the expected noise, the noise is halved and
  the selection's ε doubled (AIM's annealing); when what is left would not pay two more rounds,
  a last round spends all of it;
* **output**: rows sampled from the final model by the engine's perfect sampler (``rows``
  defaults to N).

**Privacy.** Scores are computed *exactly* on a dyadic grid
(:func:`tessera.synth.accounting.exact_scores`): the
synthetic part N μ̂_r (public) is rounded to multiples of 2^-k and the data part is an integer,
so ‖y_r − N μ̂_r‖₁ moves by at most Δ₁ (1 under add/remove, 2 under substitution) when one row
changes, with no floating-point slack, and s_r by at most w_r Δ₁: the mechanism is calibrated to
Δ = max_r w_r Δ₁. A marginal moves by Δ₂ = 1 (add/remove) or √2 (substitution) in L2 and Δ₁ in
L1; a wide query by 1 in both. zCDP: the selection is ε-bounded-range, ε²/8-zCDP
(Cesar–Rogers); a discrete Gaussian ρ = Δ₂²/(2σ²) (CKS20); composition adds ρ over adaptively
chosen steps. Pure DP: selection ε, discrete Laplace Δ₁/b, basic composition. Every step is
recorded and :func:`tessera.synth.accounting.prove` recomputes the spend from the records; the
schedule never plans past the budget (exact rational arithmetic on the costs). Under add/remove
N is estimated from the noisy one-way marginals (inverse-variance weighted sums:
post-processing).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import networkx as nx
import numpy as np
import numpy.typing as npt

from tessera.accounting.guarantee import Guarantee
from tessera.engine.factors import scope
from tessera.errors import TesseraError
from tessera.estimation.maxent import FitResult, GroupMeasurement, ScopeModel, fit
from tessera.mechanisms import DiscreteGaussian, DiscreteLaplace, ExponentialMechanism, NoiseSource
from tessera.privacy import Definition, Neighbours
from tessera.schema.domain import Domain
from tessera.synth.accounting import (
    Budget,
    Step,
    exact_scores,
    largest_float_at_most,
    prove,
    step_cost,
)
from tessera.synth.candidates import (
    DEFAULT_MAX_CELLS,
    Candidate,
    candidates,
    model_size,
)
from tessera.synth.ipmwu import Evaluator, SensitiveCounts, Timings
from tessera.workload.families import Partition
from tessera.workload.workload import Workload

__all__ = [
    "AdaptiveParameters",
    "Calibration",
    "Schedule",
    "AdaptiveProgress",
    "AdaptiveRecord",
    "AdaptiveResult",
    "AdaptiveRound",
    "AdaptiveTimings",
    "adaptive",
    "candidate_workload",
    "selection_sensitivity",
]

FloatArray = npt.NDArray[np.float64]
#: Noise on integer counts: discrete Gaussian (zCDP) or discrete Laplace (pure DP).
CountNoise = DiscreteGaussian | DiscreteLaplace
#: AIM's default cap on the model (bytes of the junction tree's tables).
DEFAULT_MAX_MODEL_SIZE = 80 * 2**20
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# -- the sensitive input: exact counts of every candidate -----------------------------------


def candidate_workload(workload: Workload, max_cells: int = DEFAULT_MAX_CELLS) -> Workload:
    """The workload whose exact counts the method reads: the candidates' wide queries (as
    predicate queries) and one marginal family per candidate scope. Public: built from the
    workload and the schema only."""
    dom = workload.domain
    cands = candidates(workload, max_cells)
    wide = [c for c in cands if not c.is_marginal]
    parts = [Partition(f"m{k}", tuple(dom.names[i] for i in c.scope), (None,) * len(c.scope))
             for k, c in enumerate(cands) if c.is_marginal]
    queries = [workload.queries[c.query] for c in wide if c.query is not None]
    return Workload.of(dom, queries, names=[f"w{c.query}" for c in wide], partitions=parts)


@dataclass(frozen=True, eq=False)
class _Exact:
    """Exact counts per candidate (SENSITIVE: only the private steps read them)."""

    counts: tuple[npt.NDArray[np.int64], ...]
    n: int


def _split_counts(cands: Sequence[Candidate], counts: SensitiveCounts) -> _Exact:
    wide = [c for c in cands if not c.is_marginal]
    at = len(wide)
    out_wide = {c.query: counts.counts[k: k + 1] for k, c in enumerate(wide)}
    per: list[npt.NDArray[np.int64]] = []
    for c in cands:
        if c.is_marginal:
            per.append(counts.counts[at: at + c.cells])
            at += c.cells
        else:
            per.append(out_wide[c.query])
    if at != counts.counts.size:
        raise TesseraError("the counts do not match the candidate workload")
    return _Exact(tuple(per), counts.n)


# -- records --------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdaptiveRound:
    """One round (DP outputs and post-processing only: safe to show)."""

    round: int
    candidate: str
    cells: int
    noise: float  # σ (zCDP) or b (pure) of the measurement
    selection_epsilon: float
    spent: float
    annealed: bool
    width: int
    model_bytes: int
    eligible: int
    seconds: float


@dataclass(frozen=True)
class AdaptiveProgress:
    """What the ``progress`` callback receives after each round (the CLI's progress bar)."""

    round: int
    rounds: int  # AIM's planned number of rounds at the initial noise (an estimate)
    spent: float
    budget: float
    error: float  # ‖y_r − N μ̂_r‖₁ / (N cells_r) of the measurement just made: noisy, indicative

    @property
    def remaining(self) -> float:
        return max(self.budget - self.spent, 0.0)


@dataclass(frozen=True)
class AdaptiveParameters:
    """The settings of a run (``defaulted``: those derived rather than given)."""

    rounds: int
    rows: int
    measure_fraction: float
    max_model_size: int
    max_cells: int
    iterations: int
    final_iterations: int
    sample_size: int
    candidates: int
    normaliser: float
    defaulted: tuple[str, ...] = ()


@dataclass(frozen=True)
class AdaptiveTimings(Timings):
    """:class:`~tessera.synth.ipmwu.Timings` (setup: candidates, initial measurements and fit;
    each round; output: the final fit and the rows) and ``fit``: the share of the total spent
    in the maximum-entropy fits."""

    fit: float = 0.0


@dataclass(frozen=True, eq=False)
class AdaptiveRecord:
    """What a run did (the same reading interface as :class:`tessera.synth.ipmwu.RunRecord`):
    budget, spend (equal to :func:`~tessera.synth.accounting.prove` of ``steps``), every
    mechanism, the rounds, parameters, timings, the final model's width."""

    algorithm: str
    budget: Guarantee
    spent: Guarantee
    steps: tuple[Step, ...]
    history: tuple[AdaptiveRound, ...]
    parameters: AdaptiveParameters
    timings: AdaptiveTimings
    width: int
    model_bytes: int
    source: str

    @property
    def neighbours(self) -> Neighbours:
        return self.spent.neighbours

    @property
    def private(self) -> bool:
        return bool(self.steps) and all(s.mechanism.private for s in self.steps)

    def proved(self, definition: Definition | None = None) -> Guarantee:
        """The proof from the recorded steps alone, in the run's definition or ``definition``."""
        return prove(self.steps, definition or self.spent.definition, self.spent.neighbours)

    def describe(self) -> str:
        p, t = self.parameters, self.timings
        measured = sum(1 for s in self.steps if s.role == "measurement")
        annealed = sum(1 for h in self.history if h.annealed)
        return "\n".join([
            self.algorithm,
            f"budget: {self.budget.text()}",
            f"spent:  {self.spent.text()} over {len(self.steps)} mechanisms",
            f"{len(self.history)} rounds ({annealed} with the noise halved), {measured} groups "
            f"measured of {p.candidates} candidates; N = {p.normaliser:.6g}, rows = {p.rows}",
            f"model: width {self.width}, {self.model_bytes:,} bytes of junction-tree tables "
            f"(cap {p.max_model_size:,})",
            f"time: {t.total:.3g} s ({t.fit:.3g} s fitting)",
        ])


@dataclass(frozen=True, eq=False)
class AdaptiveResult:
    """A finished run: the fitted model and its parameters, the measurements, the record and
    the rows (codes)."""

    model: ScopeModel
    fit: FitResult
    measurements: tuple[GroupMeasurement, ...]
    record: AdaptiveRecord
    rows: npt.NDArray[np.int64]
    workload: Workload

    @property
    def private(self) -> bool:
        return self.record.private

    @property
    def width(self) -> int:
        return self.model.width

    @property
    def total(self) -> float:
        return self.record.parameters.normaliser

    def sample(self, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """n fresh rows of the fitted model (post-processing)."""
        return self.model.sample(self.fit.theta, n, rng)

    def answers(self, workload: Workload) -> FloatArray:
        """Exact answers (fractions) of the fitted model for a workload over its schema: every
        query and family cell whose scope lies in the junction tree (engine marginals); other
        queries from a model with the query added at weight 0 (one engine pass)."""
        from tessera.synth.ipmwu import query_functions

        functions, _ = query_functions(workload.domain, workload)
        cliques = self.model.clique_marginals(self.fit.theta)
        out = np.empty(len(functions))
        rest = []
        for j, f in enumerate(functions):
            s = scope(workload.domain, f)
            p = self.model.project(self.fit.marginals, s)
            if p is None and cliques is not None:
                p = _from_cliques(cliques, s)
            if p is None:
                rest.append(j)
                continue
            out[j] = float(p @ _indicator(workload.domain, f, s))
        if rest:
            extra = ScopeModel(workload.domain, self.model.scopes,
                               [*self.model.queries, *((-1 - j, functions[j]) for j in rest)])
            theta = extra.extend(self.fit.theta, self.model)
            mu = extra.marginals(theta)
            for j in rest:
                out[j] = float(mu[extra.query_position[-1 - j]])
        return out


def _indicator(domain: Domain, f: object, s: tuple[int, ...]) -> FloatArray:
    """f(x_s) for every cell of the product of s's domains (row-major)."""
    shape = tuple(domain.sizes[i] for i in s)
    cells = np.stack(np.unravel_index(np.arange(math.prod(shape)), shape), axis=1) \
        if s else np.zeros((1, 0), dtype=np.int64)
    codes = np.zeros((cells.shape[0], len(domain)), dtype=np.int64)
    codes[:, list(s)] = cells
    return Evaluator(domain, [f]).matrix(codes)[0].astype(np.float64)  # type: ignore[list-item]


# -- the schedule ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """One round's two mechanisms and their exact cost."""

    measurement: CountNoise
    selection: ExponentialMechanism
    cost: Fraction


class Schedule:
    """Calibrates rounds from budget shares (exact costs; module docstring): ``budget``, the
    measurements' L1 and L2 sensitivities, the selection's Δ and the measurement's share of a
    round."""

    def __init__(self, budget: Budget, l1: float, l2: float, sel_sensitivity: float,
                 measure_fraction: float) -> None:
        self.budget = budget
        self.total = Fraction(budget.value)
        self.l1, self.l2, self.sel = l1, l2, sel_sensitivity
        self.fraction = Fraction(measure_fraction)
        self.pure = budget.definition is Definition.PURE

    def measurement(self, share: Fraction, sensitivity: float) -> CountNoise:
        value = largest_float_at_most(share)
        if not value > 0:
            raise TesseraError("the budget share of a measurement rounds to 0",
                               hint="a larger budget, or fewer rounds")
        if self.pure:
            return DiscreteLaplace.for_epsilon(value, sensitivity)
        return DiscreteGaussian.for_rho(value, sensitivity)

    def selection(self, share: Fraction) -> ExponentialMechanism:
        if self.pure:
            eps = largest_float_at_most(share)
        else:
            eps = math.sqrt(8.0 * float(share))
        mech = ExponentialMechanism(eps, self.sel)
        while self._sel_cost(mech) > share:
            eps = math.nextafter(eps, 0.0)
            mech = ExponentialMechanism(eps, self.sel)
        return mech

    def _sel_cost(self, mech: ExponentialMechanism) -> Fraction:
        return Fraction(mech.epsilon) if self.pure else Fraction(mech.rho())

    def cost(self, noise: CountNoise, sensitivity: float) -> Fraction:
        if isinstance(noise, DiscreteLaplace):
            return Fraction(noise.epsilon(sensitivity))
        return Fraction(noise.rho(sensitivity))

    def round(self, share: Fraction) -> Calibration:
        """A round costing at most ``share``: ``fraction`` to the measurement, the rest to the
        selection."""
        meas = self.measurement(share * self.fraction, self.l2 if not self.pure else self.l1)
        rest = share - self.cost(meas, self.l2 if not self.pure else self.l1)
        sel = self.selection(rest)
        out = Calibration(meas, sel, self.cost(meas, self.l2 if not self.pure else self.l1)
                           + self._sel_cost(sel))
        assert out.cost <= share
        return out

    def annealed(self, cal: Calibration) -> Calibration:
        """AIM's annealing: noise halved, selection ε doubled (σ/2 costs 4× in ρ, b/2 2× in ε)."""
        if self.pure:
            meas: CountNoise = DiscreteLaplace(
                cal.measurement.scale / 2)  # type: ignore[union-attr]
            sel = ExponentialMechanism(cal.selection.epsilon * 2, self.sel)
        else:
            meas = DiscreteGaussian(cal.measurement.sigma / 2)  # type: ignore[union-attr]
            sel = ExponentialMechanism(cal.selection.epsilon * 2, self.sel)
        s = self.l1 if self.pure else self.l2
        return Calibration(meas, sel, self.cost(meas, s) + self._sel_cost(sel))


def _noise_sd(noise: CountNoise) -> float:
    return math.sqrt(noise.variance)


def _noise_l1(noise: CountNoise) -> float:
    """E|Z| per cell (the bias term of the score)."""
    if isinstance(noise, DiscreteLaplace):
        return noise.scale
    return _SQRT_2_OVER_PI * noise.sigma


def _noise_param(noise: CountNoise) -> float:
    return noise.scale if isinstance(noise, DiscreteLaplace) else noise.sigma


# -- the model side -------------------------------------------------------------------------


class _ModelView:
    """The current model's marginals of every candidate: exact from a measured scope that
    contains it, else from a sample of the model (post-processing)."""

    def __init__(self, domain: Domain, cands: Sequence[Candidate], workload: Workload,
                 sample_size: int, rng: np.random.Generator) -> None:
        self.domain = domain
        self.sizes = tuple(domain.sizes)
        self.cands = cands
        self.sample_size = sample_size
        self.rng = rng
        wide = [c for c in cands if not c.is_marginal]
        self._wide_eval = Evaluator(domain, [workload.queries[c.query] for c in wide]) \
            if wide else None
        self._wide_pos = {c.query: k for k, c in enumerate(wide)}

    def estimates(self, model: ScopeModel, fitted: FitResult, which: Sequence[int],
                  total: float) -> list[FloatArray]:
        mu = fitted.marginals
        cliques: list[tuple[tuple[int, ...], FloatArray]] | None = None  # one pass, if needed
        need_sample = []
        out: dict[int, FloatArray] = {}
        for i in which:
            c = self.cands[i]
            if c.is_marginal:
                p = model.project(mu, c.scope)
                if p is None:
                    if cliques is None:
                        cliques = model.clique_marginals(fitted.theta) or []
                    p = _from_cliques(cliques, c.scope)
                if p is not None:
                    out[i] = total * p
                    continue
            elif c.query in model.query_position:
                out[i] = np.array([total * mu[model.query_position[c.query]]])
                continue
            need_sample.append(i)
        if need_sample:
            columns, weights = _compress(
                model.sample(fitted.theta, self.sample_size, self.rng, method="iid",
                             columns=True), self.sizes)
            for i in need_sample:
                c = self.cands[i]
                if c.is_marginal:
                    idx = np.ravel_multi_index(tuple(columns[a] for a in c.scope),
                                               tuple(self.sizes[a] for a in c.scope))
                    h = np.bincount(idx, weights=weights, minlength=c.cells)
                else:
                    assert self._wide_eval is not None
                    hit = self._wide_eval.matrix(columns.T)[self._wide_pos[c.query]]
                    h = np.array([float(weights[hit].sum())])
                out[i] = total * h / float(self.sample_size)
        return [out[i] for i in which]


def _from_cliques(cliques: Sequence[tuple[tuple[int, ...], FloatArray]],
                  scope: tuple[int, ...]) -> FloatArray | None:
    """P(x_scope) from a clique of the junction tree that contains ``scope`` (axes in the
    clique's own order, transposed to domain order), or None."""
    best = min((c for c in cliques if set(scope) <= set(c[0])), key=lambda c: c[1].size,
               default=None)
    if best is None:
        return None
    variables, table = best
    axes = tuple(i for i, v in enumerate(variables) if v not in scope)
    kept = [v for v in variables if v in scope]
    p = table.sum(axis=axes) if axes else table
    return np.transpose(p, [kept.index(v) for v in scope]).ravel()


def _compress(columns: npt.NDArray, sizes: Sequence[int]) -> tuple[npt.NDArray, FloatArray]:
    """The sample's distinct rows (attribute-major, shape (attributes, k)) and multiplicities:
    one int64 key per row when the domain has fewer than 2^62 points (a 1-D sort); above, rows
    are almost surely distinct and are kept as they are."""
    if math.prod(int(n) for n in sizes) >= 2**62:
        return columns, np.ones(columns.shape[1])
    keys = np.ravel_multi_index(tuple(columns), tuple(sizes))
    uniq, counts = np.unique(keys, return_counts=True)
    return np.stack(np.unravel_index(uniq, tuple(sizes))), counts.astype(np.float64)


def _total(measurements: Sequence[GroupMeasurement]) -> float:
    """N̂ = the inverse-variance weighted mean of the noisy sums of the marginal measurements."""
    num = den = 0.0
    for m in measurements:
        if m.query is not None:
            continue
        var = m.sd * m.sd * m.y.size
        num += float(m.y.sum()) / var
        den += 1.0 / var
    return max(1.0, num / den)


# -- the run --------------------------------------------------------------------------------


def adaptive(
    workload: Workload,
    counts: SensitiveCounts,
    budget: Budget,
    *,
    source: NoiseSource,
    rng: int | np.random.Generator | None = None,
    rounds: int | None = None,
    rows: int | None = None,
    measure_fraction: float = 0.9,
    max_model_size: int = DEFAULT_MAX_MODEL_SIZE,
    max_cells: int = DEFAULT_MAX_CELLS,
    iterations: int = 100,
    final_iterations: int = 1000,
    sample_size: int | None = None,
    progress: Callable[[AdaptiveProgress], None] | None = None,
) -> AdaptiveResult:
    """Run the adaptive method (module docstring) on the exact ``counts`` of
    :func:`candidate_workload` ``(workload, max_cells)``.

    ``rounds``: AIM's T (default 16·d, d the attributes the candidates mention), which sets the
    initial noise; the run ends when the budget is spent. ``rng``: post-processing randomness
    (samples of the model, output rows)."""
    t0 = time.perf_counter()
    dom = workload.domain
    sizes = tuple(dom.sizes)
    if not 0.0 < measure_fraction < 1.0:
        raise TesseraError(f"measure_fraction must be in (0, 1), got {measure_fraction!r}")
    cands = candidates(workload, max_cells)
    if not cands:
        raise TesseraError("the workload mentions no attribute: nothing to measure")
    exact = _split_counts(cands, counts)
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    substitute = budget.neighbours is Neighbours.SUBSTITUTE
    l1, l2 = (2.0, math.sqrt(2.0)) if substitute else (1.0, 1.0)
    weights = [int(c.weight) if c.is_marginal else 1 for c in cands]
    schedule = Schedule(budget, l1, l2, selection_sensitivity(cands, substitute),
                         measure_fraction)
    attrs = sorted({c.scope[0] for c in cands if c.is_marginal and len(c.scope) == 1})
    T = int(rounds) if rounds is not None else 16 * len(attrs)
    if T < 1:
        raise TesseraError(f"rounds must be a positive integer, got {rounds!r}")
    cal = schedule.round(schedule.total / T)
    index = {(c.scope, c.query): i for i, c in enumerate(cands)}

    steps: list[Step] = []
    measurements: list[GroupMeasurement] = []
    spent = Fraction(0)

    def measure(i: int, noise: CountNoise, r: int) -> GroupMeasurement:
        nonlocal spent
        c = cands[i]
        sens = (l1 if schedule.pure else l2) if c.is_marginal else 1.0
        rel = noise.sample(exact.counts[i], source)
        step = Step("measurement", r, rel.mechanism, sens)
        steps.append(step)
        spent += Fraction(step_cost(step, budget.definition))
        m = GroupMeasurement(c.scope, rel.values.astype(np.float64), _noise_sd(noise), c.query)
        measurements.append(m)
        return m

    # initialisation: every one-way marginal (AIM), each at the round's measurement noise
    for a in attrs:
        measure(index[((a,), None)], cal.measurement, 0)
    total = float(exact.n) if substitute else _total(measurements)
    defaulted = tuple(k for k, v in (("rounds", rounds), ("rows", rows),
                                     ("sample_size", sample_size)) if v is None)
    if sample_size is None:  # ~2·10^7 sampled codes per round, 10^4 … 10^5 rows
        sample_size = int(min(100_000, max(10_000, 20_000_000 // max(len(dom), 1))))
    view = _ModelView(dom, cands, workload, sample_size, gen)
    model = _build(dom, measurements, workload, cands)
    tf = time.perf_counter()
    fitted = fit(model, measurements, total, iterations=iterations)
    fit_seconds = time.perf_counter() - tf
    setup = time.perf_counter() - t0
    history: list[AdaptiveRound] = []
    t = 0
    budget_total = schedule.total
    while True:
        t += 1
        tr = time.perf_counter()
        remaining = budget_total - spent
        final = remaining < 2 * cal.cost
        if final:
            if remaining <= 0:
                break
            cal = schedule.round(remaining)
        limit = max_model_size * float(min(spent + cal.cost, budget_total) / budget_total)
        eligible = _eligible(sizes, cands, _model_scopes(measurements), limit)
        if not eligible:
            eligible = [i for i, c in enumerate(cands) if c.is_marginal and len(c.scope) == 1]
        est = view.estimates(model, fitted, eligible, total)
        bias = [_noise_l1(cal.measurement) * cands[i].cells for i in eligible]
        scores = exact_scores([exact.counts[i] for i in eligible], est, bias,
                              [weights[i] for i in eligible], total)
        chosen = cal.selection.select(scores, source)
        steps.append(Step("selection", t, chosen.mechanism, 1.0))
        spent += Fraction(step_cost(steps[-1], budget.definition))
        k = int(chosen.indices[0])
        i = eligible[k]
        before = est[k]
        m = measure(i, cal.measurement, t)
        if not substitute:
            total = _total(measurements)
        new_model = _build(dom, measurements, workload, cands)
        tf = time.perf_counter()
        fitted = fit(new_model, measurements, total, theta=new_model.extend(fitted.theta, model),
                     alpha=fitted.alpha, iterations=iterations)
        fit_seconds += time.perf_counter() - tf
        model = new_model
        after = view.estimates(model, fitted, [i], total)[0]
        used = cal
        annealed = False
        if not final and float(np.abs(after - before).sum()) <= \
                _noise_l1(cal.measurement) * cands[i].cells:
            nxt = schedule.annealed(cal)
            annealed = True
            cal = nxt
        history.append(AdaptiveRound(
            t, cands[i].label(dom), cands[i].cells, _noise_param(used.measurement),
            used.selection.epsilon,
            float(spent), annealed, model.width, model_size(sizes, _model_scopes(
                measurements)), len(eligible), time.perf_counter() - tr))
        if progress is not None:
            err = float(np.abs(m.y - before).sum()) / max(total * cands[i].cells, 1.0)
            progress(AdaptiveProgress(t, T, float(spent), float(budget_total), err))
        if final:
            break
    tf = t_out = time.perf_counter()
    fitted = fit(model, measurements, total, theta=fitted.theta, alpha=fitted.alpha,
                 iterations=final_iterations)
    fit_seconds += time.perf_counter() - tf
    proof = prove(steps, budget.definition, budget.neighbours)
    proven = proof.epsilon if schedule.pure else proof.rho
    if spent > budget_total or proven is None or proven < float(spent):
        raise TesseraError(f"internal error: the run spent {float(spent)!r} of {budget.value!r}"
                           f" (proof: {proven!r})")
    n_rows = int(rows) if rows is not None else max(1, int(round(total)))
    synthetic = model.sample(fitted.theta, n_rows, gen) if n_rows else \
        np.zeros((0, len(dom)), dtype=np.int64)
    params = AdaptiveParameters(
        T, n_rows, measure_fraction, max_model_size, max_cells, iterations, final_iterations,
        sample_size, len(cands), total, defaulted)
    timings = AdaptiveTimings(setup, tuple(h.seconds for h in history),
                              time.perf_counter() - t_out, fit_seconds)
    record = AdaptiveRecord(
        "adaptive (AIM-style selection and schedule; maximum-entropy fit on the exact engine)",
        budget.guarantee(), proof, tuple(steps), tuple(history), params, timings, model.width,
        model_size(sizes, _model_scopes(measurements)), source.label)
    return AdaptiveResult(model, fitted, tuple(measurements), record,
                          np.asarray(synthetic, dtype=np.int64), workload)


def selection_sensitivity(cands: Sequence[Candidate], substitute: bool) -> float:
    """Δ of the quality scores: max_r w_r Δ₁(r), Δ₁ = 2 for a marginal under substitution (a
    row leaves one cell and enters another), 1 otherwise (module docstring)."""
    return max(int(c.weight) * (2.0 if substitute and c.is_marginal else 1.0) for c in cands)


def _model_scopes(measurements: Sequence[GroupMeasurement]) -> list[tuple[int, ...]]:
    return list(dict.fromkeys(m.scope for m in measurements))


def _eligible(sizes: Sequence[int], cands: Sequence[Candidate],
              scopes: Sequence[tuple[int, ...]], limit: float) -> list[int]:
    """The candidates whose measurement keeps the model within ``limit`` bytes (public).

    Shortcuts before the full junction-tree size: a candidate inside a measured scope adds
    nothing; if one bag of every attribute fits, anything fits; a candidate whose attributes lie
    in pairwise different connected components of the measured scopes' graph joins them by one
    new clique (no fill-in), so the size grows by exactly its own table."""
    sets = [frozenset(s) for s in scopes]
    union = frozenset().union(*sets)
    graph = nx.Graph()
    graph.add_nodes_from(union)
    for sc in scopes:
        graph.add_edges_from(itertools.combinations(sc, 2))
    component = {a: k for k, comp in enumerate(nx.connected_components(graph)) for a in comp}
    current: int | None = None
    out = []
    for i, c in enumerate(cands):
        r = frozenset(c.scope)
        if not c.is_marginal or any(r <= s for s in sets) \
                or 8 * math.prod(sizes[a] for a in union | r) <= limit:  # one bag of all fits
            out.append(i)
            continue
        own = [component.get(a, ("new", a)) for a in c.scope]
        if len(set(own)) == len(own):  # joins separate components: no fill-in
            if current is None:
                current = model_size(sizes, scopes)
            grows = 8 * math.prod(sizes[a] for a in c.scope)
            if current + grows <= limit:
                out.append(i)
            continue
        if model_size(sizes, [*scopes, c.scope]) <= limit:
            out.append(i)
    return out


def _build(dom: Domain, measurements: Sequence[GroupMeasurement], workload: Workload,
           cands: Sequence[Candidate]) -> ScopeModel:
    marginal_scopes = list(dict.fromkeys(m.scope for m in measurements if m.query is None))
    queries = list(dict.fromkeys(m.query for m in measurements if m.query is not None))
    return ScopeModel(dom, _maximal(marginal_scopes),
                      [(j, workload.queries[j]) for j in queries])


def _maximal(scopes: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Scopes not contained in another (a sub-scope's table adds nothing to the family)."""
    return [s for s in scopes if not any(set(s) < set(t) for t in scopes)]
