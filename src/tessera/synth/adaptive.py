"""The adaptive synthesizer, Tessera's default method: AIM's selection and budget schedule on the
exact engine (docs/theory.md §5, "the adaptive method").

AIM (McKenna, Mullins, Sheldon, Miklau, "AIM: An Adaptive and Iterative Mechanism for
Differentially Private Synthetic Data", VLDB 2022, Algorithm 1) with these parts:

* **candidates** (:mod:`tessera.synth.candidates`): marginals over the downward closure of the
  workload's scopes, weighted by w_r = Σ_{s∈W} |r ∩ s|, and — beyond AIM — every workload query
  too wide for a dense marginal (a predicate or Boolean clause over many attributes), measured
  as its own count and fitted as a feature of the Gibbs model;
* **initialisation**: every one-way marginal of the attributes the candidates mention is measured;
  and (beyond AIM) that of every attribute outside the workload, once, at the same noise
  (:mod:`tessera.synth.columns`: else the model, and so the rows, would leave those columns
  uniformly random), charged to the same budget and never offered to the selection (weight
  0: no workload query reads it); T, the start and the selection are the workload's alone;
* **the start** (beyond AIM, :func:`~tessera.synth.schedule.starting_rounds`): AIM's T = 16·d
  fixes the first noise whatever the budget and the data's size. From n̂ (the noisy one-way
  marginals' total: post-processing) and the workload marginals' mean number of cells n̄ (public),
  the rounds start at the largest T ≤ 16·d with n̂ / (n̄ · sd(T)) ≥ ``cell_sigmas`` (5: the
  average cell stands 5 noise standard deviations out), but at no fewer than 4·d rounds; when
  that is fewer than 16·d, the one-way marginals are measured again at the new round noise
  (both measurements enter every fit; nothing is discarded). Adult 2-way, ε = 0.3, at 3 sd:
  σ 300 → 150; NLTCS 3-way at ε = 1 and 10: unchanged (docs/benchmarks.md);
* **the selection's share** (beyond AIM): a round gives ``measure_fraction`` of its budget to
  the measurement and the rest to the selection. AIM's 0.9 is kept for the one-way
  initialisation and for the rounds when the start lowered T (the measurements are scarce);
  when the start keeps AIM's T the rounds measure at 0.8, since the selection's resolution is a
  fixed multiple of the measurement's noise whatever the budget — (Δ₁/Δ₂)·σ·√(f/(1 − f)) under
  ρ-zCDP, 2b·f/(1 − f) under pure ε (docs/theory.md §5, "the selection's share"). A given
  ``rounds`` or ``measure_fraction``, or ``cell_sigmas = 0``, keeps one share throughout;
* **coarsened measurements** (beyond AIM, :mod:`tessera.synth.coarsening`): after the start,
  values whose noisy one-way count is below ``coarsen_sigmas`` (3) round-noise sd are grouped
  (ordered attributes: runs of consecutive codes; categorical: one group, MST's rule), every
  later marginal of two or more attributes is measured over the products of groups (same
  sensitivity, fewer cells: a smaller noise penalty), one-way marginals stay fine, and the
  rounds are fitted over group codes; the final model is written over the fine domain exactly.
  Off for workloads with wide queries (functions of the fine values);
* **round t**: (1) the candidates whose addition keeps the model's junction tree within
  ``max_model_size`` · (budget spent / budget) bytes are eligible — public information only, so
  no candidate past the engine's memory guard is ever selected; with ``answer_memory`` (the
  adaptive route's), also only those whose measurement keeps every query of the workload
  answerable from the model within that memory limit (:mod:`tessera.synth.answerable`; public
  too: the workload, the limit and the past selections, docs/theory.md §10.5); (2) the
  exponential mechanism selects r with quality

      s_r = w_r · ( ‖y_r − N μ̂_r‖₁ − E‖noise_r‖₁ ),   E‖noise_r‖₁ = √(2/π) σ · cells_r
      (Gaussian) or b · cells_r (Laplace),

  where y_r are the exact counts and μ̂_r the current model's marginal (exact when r lies in a
  measured scope, else from a sample of the model: post-processing either way); (3) the group is
  measured with discrete Gaussian (zCDP) or discrete Laplace (pure DP) noise; (4) the model is
  refitted to **all** measurements so far (:func:`tessera.estimation.maxent.fit`, warm-started);
  (5) if the refit moved r's marginal by less than the expected noise, the noise is divided
  and the selection's ε multiplied by ``anneal`` (AIM's annealing, whose step is 2; Tessera's
  default doubles the round's cost — √2 under zCDP, 2 under pure ε — and spends the budget in
  finer steps: docs/theory.md §5); when what is left would not pay two more rounds, a last
  round spends all of it;
* **the final estimate** (beyond AIM, :mod:`tessera.estimation.prior`): the rounds fit by
  maximum likelihood; when the average workload cell stood fewer than 10 noise sd out at the
  rounds' first noise (:data:`PRIOR_CELL_SIGMAS`, judged like the start from n̂ and public
  sizes), the final model is the posterior mode under a weakly informative Cauchy(0, 2.5)
  prior on its interactions (main effects free; ``prior_scale``, 0 = AIM's maximum-likelihood
  model): the likelihood lets the noise of marginals measured once into the model, and with
  little budget that is most of its error (docs/theory.md §5);
* **output**: rows sampled from the final model by the engine's perfect sampler (``rows``
  defaults to N), then ``polish_passes`` passes of a local search that brings the rows' counts
  over the workload's scopes closer to the model's own
  (:func:`~tessera.synth.row_polish.polish_rows`,
  :mod:`tessera.estimation.polish`): the rounding of N rows otherwise adds its own error
  (NLTCS 3-way, ε = 10: 1.5× the model's).

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

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.errors import TesseraError
from tessera.estimation.maxent import GroupMeasurement, fit
from tessera.estimation.prior import PRIOR_SCALE, posterior_mode
from tessera.mechanisms import NoiseSource
from tessera.privacy import Neighbours
from tessera.synth.accounting import Budget, Step, exact_scores, prove, step_cost
from tessera.synth.adaptive_record import (
    AdaptiveParameters,
    AdaptiveProgress,
    AdaptiveRecord,
    AdaptiveResult,
    AdaptiveRound,
    AdaptiveTimings,
)
from tessera.synth.answerable import Answerable
from tessera.synth.candidates import (
    DEFAULT_MAX_CELLS,
    candidates,
    eligible,
    grown_size,
    model_size,
    outside_attributes,
    split_counts,
)
from tessera.synth.coarsening import (
    COARSEN_SIGMAS,
    Coarsened,
    CoarseSpace,
    one_way_counts,
    value_groups,
    value_runs,
)
from tessera.synth.model_view import (
    ModelView,
    build_model,
    maximal_scopes,
    model_scopes,
    noisy_total,
)
from tessera.synth.progress import Reporter, rounds_left
from tessera.synth.row_polish import polish_rows
from tessera.synth.schedule import (
    CELL_SIGMAS,
    LEAST_ROUNDS_PER_ATTRIBUTE,
    MEASURE_FRACTION,
    SELECTIVE_MEASURE_FRACTION,
    CountNoise,
    Schedule,
    annealing_step,
    noise_l1,
    noise_param,
    noise_sd,
    sensitivities,
    starting_rounds,
)
from tessera.synth.sensitive import SensitiveCounts
from tessera.workload.workload import Workload

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_MAX_MODEL_SIZE", "FINAL_ITERATIONS", "adaptive"]

FloatArray = npt.NDArray[np.float64]
#: The cap on the model (bytes of the junction tree's tables, fine domain). AIM's is 80 MiB;
#: with coarsened measurements marginals of many-valued attributes become affordable and a
#: model of 10^7 cells made one Adult ε = 1 run 8× slower than another (202 / 25 s CPU) for no
#: lower error
#: (docs/benchmarks.md, "What each default contributes": 8 MiB 0.972× against 0.983× at 80 MiB,
#: 2.4× less CPU).
DEFAULT_MAX_MODEL_SIZE = 8 * 2**20
#: Iterations of the final maximum-likelihood fit (warm-started from the rounds' model). It
#: binds only on clear runs without the prior, where 1,000 stopped short of the optimum: paired
#: seeded runs over the panel (docs/benchmarks.md, "What each default contributes"), 3,000
#: against 1,000: military 0.903 ± 0.017 at ε = 3, 0.988 ± 0.005 at ε = 1, 1.009 ± 0.003 at
#: ε = 0.3; every other table and budget the same rows (birthdays at ε = 3: 1.003 ± 0.011).
FINAL_ITERATIONS = 3000


#: The final estimate is the posterior mode (``prior_scale``) when the average workload cell
#: stands fewer than this many noise standard deviations out at the rounds' first noise: there
#: the likelihood lets the noise into the model (NLTCS 3-way, ε = 0.1: 3.0, the error 0.92×;
#: Adult 2-way: 0.5–1.5). Above it the prior moves the estimate by ~1 % at 1.5–2× the fit's
#: time (NLTCS ε = 1: 28; ε = 10: 214; docs/theory.md §5, "the final estimate").
PRIOR_CELL_SIGMAS = 10.0
#: The final posterior mode's engine work (passes × junction-tree bytes) is at most this many
#: times all the likelihood fits' of the run: a deterministic bound on its time relative to the
#: fits' (before it, one Adult ε = 1 run took 189 s against 38–45 s for the others; in the
#: benchmark's paired runs the cap never bound, and one of five runs after it still took 78 s
#: of CPU: docs/theory.md §5, "the final estimate").
PRIOR_WORK = 2.0


def mean_cells(sizes: Sequence[int], scopes: Sequence[Sequence[int]]) -> float:
    """The mean number of cells of the marginals over ``scopes`` (public sizes)."""
    return sum(math.prod(sizes[a] for a in s) for s in scopes) / len(scopes)


def adaptive(
    workload: Workload,
    counts: SensitiveCounts,
    budget: Budget,
    *,
    source: NoiseSource,
    rng: int | np.random.Generator | None = None,
    rounds: int | None = None,
    rows: int | None = None,
    measure_fraction: float | None = None,
    max_model_size: int = DEFAULT_MAX_MODEL_SIZE,
    max_cells: int = DEFAULT_MAX_CELLS,
    iterations: int = 100,
    final_iterations: int = FINAL_ITERATIONS,
    sample_size: int | None = None,
    exact_work: int | None = None,
    polish_passes: int = 30,
    cell_sigmas: float = CELL_SIGMAS,
    coarsen_sigmas: float = COARSEN_SIGMAS,
    batch: int | None = None,
    accelerated: bool = True,
    answer_memory: int | None = None,
    anneal: float | None = None,
    prior_scale: float = PRIOR_SCALE,
    uniform_columns: bool = False,
    progress: Callable[[Any], None] | None = None,
) -> AdaptiveResult:
    """Run the adaptive method (module docstring) on the exact ``counts`` of
    :func:`candidate_workload` ``(workload, max_cells)``.

    ``rounds``: AIM's T (default 16·d, d the attributes the candidates mention, lowered by the
    start's rule (module docstring) to no fewer than 4·d), which sets the initial noise; the run
    ends when the budget is spent. ``cell_sigmas``: the start's rule (0: AIM's T whatever the
    budget; a given ``rounds`` is always kept). ``measure_fraction``: the measurement's share of
    every round (None, the default: 0.9, and 0.8 for the rounds when the start, run because
    ``rounds`` was not given, keeps AIM's T; module docstring). ``batch``: selections (each followed
    by its measurement) per round before the model is refitted (default 1 up to 127 attributes,
    then ⌊d/64⌋: the lazy updating of AIM+GReM, Fuentes et al. 2026). ``accelerated``: the
    fits use mirror descent with Nesterov momentum and adaptive restart
    (:func:`tessera.estimation.maxent.fit`, ``momentum``). ``answer_memory``: keep every
    query of ``workload`` answerable from the model within this engine memory limit (bytes):
    each selection is offered only the candidates whose measurement leaves the answer pass
    within the guard (:class:`tessera.synth.answerable.Answerable`; public inputs and past
    outputs only; the adaptive route sets it); None (the default): no such constraint, nothing
    of it computed. ``anneal``: the annealing step (> 1; AIM's is 2; None, the default: the
    step that doubles a round's cost, :func:`~tessera.synth.schedule.annealing_step`).
    ``prior_scale``: the final estimate is the posterior mode under a Cauchy(0, s) prior on the
    model's interactions (:func:`tessera.estimation.prior.posterior_mode`; s = 2.5, the
    default) when the average workload cell stood fewer than :data:`PRIOR_CELL_SIGMAS` noise
    sd out at the rounds' first noise; 0, or a clearer run: the maximum-likelihood fit, AIM's
    estimate (the record's ``prior_scale`` says which ran).
    ``uniform_columns``: measure nothing of the attributes outside the workload (the
    candidates' one-way marginals with ``columns``): the model, and so the rows, leave them
    uniformly random; the record names them. By default (False) each one's one-way marginal is
    measured once at the initialisation, at the noise of the workload's first one-way
    measurements, and charged with the rest (module docstring).
    ``progress``: called with a :class:`~tessera.synth.progress.ProgressEvent` at every step
    (setup, each round, the final fit, the sampling; a round's ``detail`` is its
    :class:`~tessera.synth.adaptive_record.AdaptiveProgress`); ``rounds`` is an upper bound
    until the final round (:func:`~tessera.synth.progress.rounds_left`).
    ``rng``: post-processing randomness (samples of the model, output rows)."""
    report = Reporter.of(progress)
    report("setup", "start")
    t0 = time.perf_counter()
    dom = workload.domain
    sizes = tuple(dom.sizes)
    if measure_fraction is not None and not 0.0 < measure_fraction < 1.0:
        raise TesseraError(f"measure_fraction must be in (0, 1), got {measure_fraction!r}")
    cands = candidates(workload, max_cells, columns=not uniform_columns)
    if not any(not c.outside for c in cands):
        raise TesseraError("the workload mentions no attribute: nothing to measure")
    exact = split_counts(cands, counts)
    # the one-way marginals of attributes outside the workload: measured once (so the model
    # keeps their distribution), never offered to the selection (no workload query reads them)
    columns = [i for i, c in enumerate(cands) if c.outside]
    selectable = [c for c in cands if not c.outside]
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    # n is public under substitution of a row; never for a person (their rows change in number)
    substitute = budget.neighbours is Neighbours.SUBSTITUTE and budget.unit.is_row
    l1, l2, sel, count_sensitivity = sensitivities(selectable, budget)  # (× K: a person)
    weights = [int(c.weight) if c.is_marginal else 1 for c in cands]
    schedule = Schedule(budget, l1, l2, sel,
                         MEASURE_FRACTION if measure_fraction is None else measure_fraction)
    attrs = sorted({c.scope[0] for c in selectable if c.is_marginal and len(c.scope) == 1})
    T = int(rounds) if rounds is not None else 16 * len(attrs)
    if T < 1:
        raise TesseraError(f"rounds must be a positive integer, got {rounds!r}")
    if not (math.isfinite(cell_sigmas) and cell_sigmas >= 0):
        raise TesseraError(f"cell_sigmas must be finite and ≥ 0, got {cell_sigmas!r}")
    if not (math.isfinite(coarsen_sigmas) and coarsen_sigmas >= 0):
        raise TesseraError(f"coarsen_sigmas must be finite and ≥ 0, got {coarsen_sigmas!r}")
    if anneal is not None and (isinstance(anneal, bool) or not isinstance(
            anneal, (int, float)) or not (math.isfinite(anneal) and anneal > 1)):
        raise TesseraError(f"anneal must be a finite number > 1, got {anneal!r}")
    anneal_step = float(anneal) if anneal is not None else annealing_step(schedule.pure)
    initial_rounds = T
    cal = schedule.round(schedule.total / T)
    per_round = int(batch) if batch is not None else max(1, len(attrs) // 64)
    if per_round < 1:
        raise TesseraError(f"batch must be a positive integer, got {batch!r}")
    index = {(c.scope, c.query): i for i, c in enumerate(cands)}
    keeper = Answerable(workload, answer_memory) if answer_memory is not None else None
    if keeper is not None and not keeper.active:
        keeper = None  # no query is read by a pass: nothing to keep

    steps: list[Step] = []
    measurements: list[GroupMeasurement] = []
    spent = Fraction(0)

    space: CoarseSpace | None = None  # the groups, once values are merged
    fitted_on = measurements  # what the model is fitted to: these, or their coarse form
    coarse: dict[int, Coarsened] = {}  # per candidate, under ``space``'s groups

    def refresh(a: int) -> None:
        nonlocal space
        assert space is not None
        counts_a = one_way_counts(measurements, a)
        if counts_a is not None:
            space = space.with_counts(a, counts_a)

    def estimates(which: Sequence[int]) -> list[FloatArray]:
        """N μ̂ of candidates in their measured cells: the model's, a one-way one refined
        within its groups by q (:meth:`CoarseSpace.fine_one_way`)."""
        est = view.estimates(model, fitted, which, total)
        if space is None:
            return est
        return [space.fine_one_way(cands[i].scope[0], e) if cands[i].is_marginal
                and len(cands[i].scope) == 1 else e for i, e in zip(which, est, strict=True)]

    def coarsened(i: int) -> Coarsened:
        if i not in coarse:
            c = cands[i]
            shape = [sizes[a] for a in c.scope] if c.is_marginal else [1]
            # one-way marginals stay fine: they alone inform the values within a group
            coarse[i] = Coarsened.of(shape, space.maps(c.scope) if c.is_marginal and len(
                c.scope) > 1 and space is not None else None)
        return coarse[i]

    def measure(i: int, noise: CountNoise, r: int) -> GroupMeasurement:
        nonlocal spent
        c, how = cands[i], coarsened(i)
        sens = (l1 if schedule.pure else l2) if c.is_marginal else count_sensitivity
        rel = noise.sample(how.sum(exact.counts[i]), source)
        step = Step("measurement", r, rel.mechanism, sens)
        steps.append(step)
        spent += Fraction(step_cost(step, budget.definition))
        m = GroupMeasurement(c.scope, rel.values.astype(np.float64), noise_sd(noise), c.query,
                             how.groups)
        measurements.append(m)
        if space is not None:
            fitted_on.append(space.coarse(m))
            if m.groups is None and len(c.scope) == 1:  # q_a from every fine one-way
                refresh(c.scope[0])
        return m

    # initialisation: every one-way marginal (AIM), each at the round's measurement noise
    for a in attrs:
        measure(index[((a,), None)], cal.measurement, 0)
    before = spent
    for i in columns:  # the columns outside the workload, at the same noise
        measure(i, cal.measurement, 0)
    columns_cost = spent - before
    total = float(exact.n) if substitute else noisy_total(measurements)
    marginal_scopes = maximal_scopes([c.scope for c in selectable if c.is_marginal])
    cells = mean_cells(sizes, marginal_scopes) if marginal_scopes else math.nan  # public
    if rounds is None and cell_sigmas > 0 and marginal_scopes:  # the start: n̂, public sizes
        start = starting_rounds(schedule, T, LEAST_ROUNDS_PER_ATTRIBUTE * len(attrs), total,
                                cells, cell_sigmas)
        if start < T:
            T, cal = start, schedule.round(schedule.total / start)
            for a in attrs:
                measure(index[((a,), None)], cal.measurement, 0)
            if not substitute:
                total = noisy_total(measurements)
        elif measure_fraction is None:  # the cells stand out at AIM's T: a larger selection
            schedule = schedule.with_fraction(SELECTIVE_MEASURE_FRACTION)
            cal = schedule.round(schedule.total / T)
    # how many noise sd the average workload cell stands out at the rounds' first noise
    # (n̂ and public sizes: post-processing); the final estimate's prior is for below
    # PRIOR_CELL_SIGMAS
    clarity = total / (cells * noise_sd(cal.measurement)) if marginal_scopes else math.inf
    if coarsen_sigmas > 0 and all(c.is_marginal for c in cands):
        # the groups, from the noisy one-way counts (post-processing); wide queries are
        # functions of the fine values, so a workload with any keeps every value
        tau = coarsen_sigmas * noise_sd(cal.measurement)
        ones = {a: one_way_counts(measurements, a) for a in attrs}
        merged = CoarseSpace.of(dom, {
            a: (value_runs if dom[dom.names[a]].ordered else value_groups)(v, tau)
            for a, v in ones.items() if v is not None}, ones)  # type: ignore[misc]
        if merged.merged:
            space = merged
            fitted_on = [space.coarse(m) for m in measurements]
            coarse.clear()  # the initialisation's measurements were made fine
    model_dom = dom if space is None else space.domain
    model_cands = cands if space is None else [  # their cells in the model's (group) codes
        dataclasses.replace(c, cells=math.prod(space.domain.sizes[a] for a in c.scope))
        if c.is_marginal else c for c in cands]
    defaulted = tuple(k for k, v in (("rounds", rounds), ("rows", rows),
                                     ("sample_size", sample_size), ("batch", batch),
                                     ("measure_fraction", measure_fraction))
                      if v is None)
    if sample_size is None:  # ~2·10^7 sampled codes per round, 10^4 … 10^5 rows
        sample_size = int(min(100_000, max(10_000, 20_000_000 // max(len(dom), 1))))
    if exact_work is None:  # exact tree marginals while at most ~2x the sample's time (~40 ns
        exact_work = 128 * sample_size * len(dom)  # per sampled code, measured on Adult)
    view = ModelView(model_dom, model_cands, workload, sample_size, gen, int(exact_work))
    model = build_model(model_dom, fitted_on, workload)
    tf = time.perf_counter()
    fitted = fit(model, fitted_on, total, iterations=iterations, momentum=accelerated)
    # the fits' engine work (passes × junction-tree bytes): the final posterior mode may spend
    # at most PRIOR_WORK times it, so its time stays a bounded multiple of the fits'
    size_now = model_size(sizes, model_scopes(measurements))
    fit_work = fitted.oracle_calls * size_now
    fit_seconds = time.perf_counter() - tf
    setup = time.perf_counter() - t0
    history: list[AdaptiveRound] = []
    withheld: dict[int, int] = {}  # per round: offers the answerability constraint removed
    if keeper is not None:
        keeper.confirm([(m.scope, m.query) for m in measurements])
    size_bound: int | None = None  # the model's size (or an upper bound), when known
    t = 0
    budget_total = schedule.total
    report("setup", round=0, rounds=rounds_left(budget_total - spent, cal.cost, per_round),
           bound=True, spent=float(spent), budget=float(budget_total))
    while True:
        t += 1
        tr = time.perf_counter()
        remaining = budget_total - spent
        final = remaining < 2 * per_round * cal.cost
        if final:
            if remaining <= 0:
                break
            cal = schedule.round(remaining / per_round)
        picked: list[tuple[int, FloatArray]] = []  # (candidate, its estimate before the round)
        est_of: dict[int, FloatArray] = {}
        scores_of: dict[int, float] = {}
        for _ in range(per_round):
            if budget_total - spent < cal.cost:  # only in the final round: nothing left
                break
            limit = max_model_size * float(min(spent + cal.cost, budget_total) / budget_total)
            taken = {j for j, _ in picked}
            scopes = model_scopes(measurements)
            offered = [i for i in eligible(sizes, cands, scopes, limit, size_bound)
                       if i not in taken and not cands[i].outside]
            if keeper is not None:  # public: the workload, the limit, past selections
                kept = keeper.offered(offered, cands, [(m.scope, m.query) for m in measurements])
                withheld[t] = withheld.get(t, 0) + len(offered) - len(kept)
                offered = kept
            if not offered:
                offered = [i for i, c in enumerate(cands) if c.is_marginal
                           and len(c.scope) == 1 and i not in taken and not c.outside]
            if not offered:
                break
            fresh = [i for i in offered if i not in scores_of]
            if fresh:  # the model is refitted once per round: its estimates are reused
                est = estimates(fresh)
                bias = [noise_l1(cal.measurement) * coarsened(i).cells for i in fresh]
                sc = exact_scores([coarsened(i).sum(exact.counts[i]) for i in fresh], est,
                                  bias, [weights[i] for i in fresh], total)
                for i, e, v in zip(fresh, est, sc, strict=True):
                    est_of[i], scores_of[i] = e, float(v)
            chosen = cal.selection.select(np.array([scores_of[i] for i in offered]), source)
            steps.append(Step("selection", t, chosen.mechanism, 1.0))
            spent += Fraction(step_cost(steps[-1], budget.definition))
            i = offered[int(chosen.indices[0])]
            size_bound = grown_size(sizes, scopes, size_bound, cands[i].scope)
            measure(i, cal.measurement, t)
            picked.append((i, est_of[i]))
        if not substitute:
            total = noisy_total(measurements)
        new_model = build_model(model_dom, fitted_on, workload)
        tf = time.perf_counter()
        fitted = fit(new_model, fitted_on, total, theta=new_model.extend(fitted.theta, model),
                     alpha=fitted.alpha, iterations=iterations, momentum=accelerated)
        fit_seconds += time.perf_counter() - tf
        model = new_model
        afters = estimates([i for i, _ in picked])
        moved = sum(float(np.abs(a - b).sum()) for (_, b), a in zip(picked, afters, strict=True))
        expected = sum(noise_l1(cal.measurement) * coarsened(i).cells for i, _ in picked)
        used = cal
        annealed = not final and moved <= expected
        if annealed:
            cal = schedule.annealed(cal, anneal_step)
        size_now = size_bound = model_size(sizes, model_scopes(measurements))
        fit_work += fitted.oracle_calls * size_now
        seconds = (time.perf_counter() - tr) / max(len(picked), 1)
        for i, _ in picked:
            history.append(AdaptiveRound(
                t, cands[i].label(dom), coarsened(i).cells, noise_param(used.measurement),
                used.selection.epsilon, float(spent), annealed, model.width, size_now,
                len(offered), seconds, withheld.get(t, 0)))
            h = history[-1]  # DP outputs and post-processing only (AdaptiveRound)
            logger.debug("round %d of ~%d: measured %s (%d cells, noise %.4g; selection ε "
                         "%.4g of %d eligible), spent %.6g of %.6g, width %d%s", t, T,
                         h.candidate, h.cells, h.noise, h.selection_epsilon, h.eligible,
                         h.spent, float(budget_total), h.width,
                         ", annealed" if annealed else "")
        # the rounds this run makes: t when this was the final round, else at most t + the
        # rounds the remaining budget pays for at the current cost (progress.rounds_left)
        bound = t if final else t + rounds_left(budget_total - spent, cal.cost, per_round)
        if picked:
            i, before_i = picked[-1]
            y = measurements[-1].y
            err = float(np.abs(y - before_i).sum()) / max(total * coarsened(i).cells, 1.0)
            report("round", round=t, rounds=bound, bound=not final, spent=float(spent),
                   error=err, detail=AdaptiveProgress(t, bound, float(spent),
                                                      float(budget_total), err))
        if final:
            break
    tf = t_out = time.perf_counter()
    report("final fit", "start", rounds=report.round, bound=False)
    fitted = fit(model, fitted_on, total, theta=fitted.theta, alpha=fitted.alpha,
                 iterations=final_iterations, momentum=accelerated)
    if prior_scale > 0 and clarity < PRIOR_CELL_SIGMAS:  # the posterior mode (estimation.prior)
        fit_work += fitted.oracle_calls * size_now
        fitted = posterior_mode(model, fitted_on, total, scale=prior_scale,
                                likelihood=fitted.theta, passes=int(
                                    PRIOR_WORK * fit_work / max(size_now, 1)))
    else:
        prior_scale = 0.0
    if space is not None:  # the model over the fine domain, exactly (CoarseSpace.expand)
        model, fitted = space.expand(model, fitted)
    if keeper is not None:  # by construction never: every selection kept the answers
        keeper.confirm([(m.scope, m.query) for m in measurements],
                       (tuple(model.scopes), tuple(j for j, _ in model.queries)))
    fit_seconds += time.perf_counter() - tf
    report("final fit")
    proof = prove(steps, budget.definition, budget.neighbours, budget.unit)
    proven = proof.epsilon if schedule.pure else proof.rho
    if spent > budget_total or proven is None or proven < float(spent):
        raise TesseraError(f"internal error: the run spent {float(spent)!r} of {budget.value!r}"
                           f" (proof: {proven!r})")
    logger.info("adaptive: %d rounds, %d mechanisms, spent %.6g of %.6g (re-proved), model "
                "width %d", len({h.round for h in history}), len(steps), float(spent),
                float(budget_total), model.width)
    n_rows = int(rows) if rows is not None else max(1, int(round(total)))
    report("sampling", "start", rows=n_rows)
    synthetic = model.sample(fitted.theta, n_rows, gen) if n_rows else \
        np.zeros((0, len(dom)), dtype=np.int64)
    if n_rows and polish_passes > 0:  # towards the workload's scopes and the outside columns
        synthetic = polish_rows(synthetic, model, fitted,
                                [*marginal_scopes, *(cands[i].scope for i in columns)],
                                polish_passes, gen)
    report("sampling", rows=n_rows)
    share = float(schedule.fraction)  # the rounds' (exact: a Fraction of the float given)
    params = AdaptiveParameters(
        T, n_rows, share, max_model_size, max_cells, iterations, final_iterations,
        sample_size, len(selectable), total, per_round, accelerated, defaulted, polish_passes,
        int(exact_work), initial_rounds, float(cell_sigmas) if rounds is None else 0.0,
        float(coarsen_sigmas), None if answer_memory is None else int(answer_memory),
        len(keeper.functions) if keeper is not None else 0, anneal_step, float(prior_scale),
        clarity if math.isfinite(clarity) else None,
        tuple(dom.names[cands[i].scope[0]] for i in columns), float(columns_cost / budget_total),
        tuple(dom.names[a] for a in outside_attributes(workload)) if uniform_columns else ())
    timings = AdaptiveTimings(setup, tuple(h.seconds for h in history),
                              time.perf_counter() - t_out, fit_seconds)
    record = AdaptiveRecord(
        "adaptive (AIM-style selection and schedule; maximum-entropy fit on the exact engine)",
        budget.guarantee(), proof, tuple(steps), tuple(history), params, timings, model.width,
        model_size(sizes, model_scopes(measurements)), source.label)
    return AdaptiveResult(model, fitted, tuple(measurements), record,
                          np.asarray(synthetic, dtype=np.int64), workload)
