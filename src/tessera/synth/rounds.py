"""The rounds of IPMWU and MWEM on any representation of h_t (docs/theory.md §5).

One round (:func:`drive`): v ← f(S_t) or ⟨f, h_t⟩; f_t ← the exponential mechanism on
|f(X) − v_f|; a_t ← the noisy count of f_t over N; the multiplicative-weights step on θ_{f_t}.
:func:`prepare` runs what comes before the rounds in a fixed order (budget, exact counts, the
noisy total under add/remove, parameters, the calibrated plan of
:mod:`tessera.synth.accounting`); :func:`finish` builds the :class:`RunRecord` and fails closed
unless the mechanisms that ran prove the planned spend. The :class:`Transcript` (the DP outputs)
can be replayed instead of running the mechanisms (post-processing). The representation of h_t
is the caller's: implicit Gibbs weights (:mod:`tessera.synth.ipmwu`) or an explicit histogram
(:mod:`tessera.synth.mwem`), behind the :class:`Distribution` protocol.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from tessera.accounting.guarantee import Guarantee
from tessera.data.table import ExtraColumns, OnInvalid
from tessera.engine.factors import Function
from tessera.errors import TesseraError
from tessera.mechanisms import NoiseSource
from tessera.privacy import Definition, Neighbours
from tessera.schema.domain import Domain
from tessera.synth.accounting import (
    Budget,
    Plan,
    Step,
    measure,
    noise_cost,
    plan,
    prove,
    select,
    split_total,
)
from tessera.synth.parameters import (
    Expectations,
    Parameters,
    Update,
    default_parameters,
    with_alpha,
)
from tessera.synth.progress import Reporter
from tessera.synth.sensitive import SensitiveCounts, sensitive_counts
from tessera.workload.workload import Workload

__all__ = [
    "Distribution",
    "Outcome",
    "Progress",
    "RoundProgress",
    "RunRecord",
    "Setting",
    "Timings",
    "Transcript",
    "drive",
    "finish",
    "iter_thetas",
    "prepare",
    "sample_average",
    "spent_within",
    "theta_step",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


# -- records ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Transcript:
    """The DP outputs of a run: the selected query and the noisy count of every round, the
    normaliser N (n public under substitution, or the noisy total n̂), the parameters and the
    guarantee of the run that made them. Replaying it is post-processing."""

    selections: IntArray
    noisy_counts: IntArray
    normaliser: float
    noisy_total: int | None = None
    parameters: Parameters | None = None
    guarantee: Guarantee | None = None

    def __post_init__(self) -> None:
        s = np.asarray(self.selections, dtype=np.int64).reshape(-1)
        c = np.asarray(self.noisy_counts, dtype=np.int64).reshape(-1)
        if s.shape != c.shape:
            raise TesseraError("a transcript needs one noisy count per selection")
        if not (math.isfinite(self.normaliser) and self.normaliser > 0):
            raise TesseraError(f"the normaliser must be positive, got {self.normaliser!r}")
        object.__setattr__(self, "selections", s)
        object.__setattr__(self, "noisy_counts", c)

    def __len__(self) -> int:
        return int(self.selections.size)

    @property
    def answers(self) -> FloatArray:
        """a_t = noisy count / N."""
        return self.noisy_counts / float(self.normaliser)


@dataclass(frozen=True)
class Timings:
    """Wall-clock seconds: ``setup`` (model or histogram, exact counts), each round, the output
    rows."""

    setup: float
    rounds: tuple[float, ...]
    output: float

    @property
    def total(self) -> float:
        return self.setup + sum(self.rounds) + self.output

    @property
    def mean_round(self) -> float:
        return sum(self.rounds) / len(self.rounds) if self.rounds else 0.0


@dataclass(frozen=True, eq=False)
class RunRecord:
    """What a run did: budget, spend, every mechanism, the DP outputs, parameters, timings.

    ``spent`` is the planned spend of the calibrated mechanisms (a replay spends nothing new:
    its output has the replayed transcript's :attr:`guarantee`); it equals
    :func:`tessera.synth.accounting.prove` of ``steps`` (:meth:`proved`). ``synthetic`` holds
    v_{f_t} (f_t(S_t) or ⟨f_t, h_t⟩) and ``theta_steps`` the change of θ_{f_t} of each round:
    post-processing, like the rows. ``width`` is the engine's decomposition width (IPMWU)."""

    algorithm: str
    budget: Guarantee | None
    spent: Guarantee
    steps: tuple[Step, ...]
    transcript: Transcript
    synthetic: FloatArray
    theta_steps: FloatArray
    parameters: Parameters
    timings: Timings
    width: int | None
    source: str
    replayed: bool = False

    @property
    def neighbours(self) -> Neighbours:
        return self.spent.neighbours

    @property
    def guarantee(self) -> Guarantee | None:
        """The guarantee of the output: the spend, or the replayed transcript's."""
        return self.transcript.guarantee if self.replayed else self.spent

    @property
    def private(self) -> bool:
        """False when any mechanism used seeded test randomness (then NOT PRIVATE)."""
        return bool(self.steps) and all(s.mechanism.private for s in self.steps)

    def proved(self, definition: Definition | None = None) -> Guarantee:
        """The accounting's proof from the recorded steps alone, in the run's definition or in
        ``definition`` (a pure run's steps are also zCDP: ε²/8 per selection, ε²/2 per
        discrete Laplace measurement; :meth:`Guarantee.at_delta` then gives (ε, δ))."""
        return prove(self.steps, definition or self.spent.definition, self.spent.neighbours)

    def describe(self) -> str:
        p, t = self.parameters, self.timings
        lines = [self.algorithm]
        if self.replayed:
            g = self.transcript.guarantee
            lines.append("replay of a transcript (post-processing): "
                         + (g.text() if g is not None else "guarantee of the transcript"))
        else:
            assert self.budget is not None
            lines.append(f"budget: {self.budget.text()}")
            lines.append(f"spent:  {self.spent.text()} over {len(self.steps)} mechanisms")
            if self.spent.definition is Definition.PURE and self.steps:
                lines.append(f"        also {self.proved(Definition.ZCDP).text()}")
        lines.append(f"T = {p.rounds}, β = {p.step:.6g}, m = {p.sample_size}, rows = {p.rows}, "
                     f"expectations = {p.expectations}, update = {p.update}, "
                     f"N = {p.normaliser:g}, α ≈ {p.alpha:.3g} (approximation)"
                     + (f"; defaulted: {', '.join(p.defaulted)}" if p.defaulted else ""))
        if self.width is not None:
            lines.append(f"engine width: {self.width}")
        lines.append(f"time: setup {t.setup:.3f} s, {len(t.rounds)} rounds {sum(t.rounds):.3f} s "
                     f"({t.mean_round * 1e3:.2f} ms/round), output {t.output:.3f} s")
        lines.append(f"randomness: {self.source}")
        if not self.private and not self.replayed:
            lines.append("NOT PRIVATE: seeded test randomness")
        return "\n".join(lines)


# -- the algorithm ------------------------------------------------------------------------------


class Distribution(Protocol):
    """One round's distribution h_t, as the driver needs it."""

    def expectations(self) -> FloatArray:
        """⟨f, h⟩ for every query."""

    def sample_answers(self, m: int, rng: np.random.Generator,
                       which: IntArray | None = None) -> FloatArray:
        """f(S) for S = m i.i.d. rows of h (every query, or ``which``)."""

    def updated(self, j: int, delta: float) -> Distribution:
        """The distribution ∝ h · exp(delta · f_j)."""


@dataclass
class Outcome:
    transcript: Transcript
    steps: list[Step]
    synthetic: FloatArray
    theta_steps: FloatArray
    round_times: list[float]
    final: Distribution


@dataclass
class Setting:
    """Everything a driver run needs besides the distribution (internal)."""

    params: Parameters
    normaliser: float
    counts: SensitiveCounts | None
    plan: Plan | None
    source: NoiseSource | None
    rng: np.random.Generator
    replay: Transcript | None
    steps: list[Step] = field(default_factory=list)
    noisy_total: int | None = None


def theta_step(update: str, beta: float, synthetic: float, answer: float) -> float:
    """The change of θ_{f_t}: −β sign(v − a) (unit step) or (a − v)/2 (MWEM step)."""
    if update == "unit":
        return -beta * float(np.sign(synthetic - answer))
    return (answer - synthetic) / 2.0


@dataclass(frozen=True)
class RoundProgress:
    """What a finished round reports to a ``progress`` callback: DP outputs and
    post-processing only (the selected query, v_{f_t}, a_t and the budget spent so far), so
    it is safe to show. :attr:`error` = |v_{f_t} − a_t| is the round's estimate of the current
    error: the selection favours the worst queries, so it tracks the maximum error (noisily)."""

    round: int  # 1 … rounds
    rounds: int
    query: int  # f_t
    synthetic: float  # v_{f_t}
    measured: float  # a_t
    spent: float | None = None  # ε or ρ spent through this round (None: a replay spends none)
    budget: float | None = None  # ε or ρ of the run

    @property
    def error(self) -> float:
        return abs(self.synthetic - self.measured)

    @property
    def remaining(self) -> float | None:
        if self.spent is None or self.budget is None:
            return None
        return max(self.budget - self.spent, 0.0)


#: A run's ``progress`` callback: a :class:`~tessera.synth.progress.ProgressEvent` per step (a
#: round's ``detail`` is its :class:`RoundProgress`).
Progress = Callable[[Any], None]


def drive(h: Distribution, s: Setting,
          observe: Callable[[int, Distribution], None] | None = None,
          progress: Progress | None = None) -> Outcome:
    """The T rounds of docs/theory.md §5 on any representation of h_t (implicit or explicit);
    ``progress`` sees a ``"round"`` :class:`~tessera.synth.progress.ProgressEvent` after every
    round (its ``detail`` a :class:`RoundProgress`; T rounds exactly)."""
    report = Reporter.of(progress)
    p = s.params
    T, N = p.rounds, s.normaliser
    selections = np.zeros(T, dtype=np.int64)
    noisy = np.zeros(T, dtype=np.int64)
    synthetic = np.zeros(T)
    deltas = np.zeros(T)
    times: list[float] = []
    steps = s.steps
    for t in range(T):
        t0 = time.perf_counter()
        if observe is not None:
            observe(t, h)
        if s.replay is not None:
            j, c = int(s.replay.selections[t]), int(s.replay.noisy_counts[t])
            v = (h.expectations()[j] if p.expectations == "exact"
                 else h.sample_answers(p.sample_size, s.rng, np.array([j]))[0])
        else:
            assert s.plan is not None and s.counts is not None and s.source is not None
            vs = (h.expectations() if p.expectations == "exact"
                  else h.sample_answers(p.sample_size, s.rng))
            chosen, step = select(s.plan.selection, s.counts.counts, vs, N, s.source,
                                  round=t + 1)
            j = int(chosen[0])
            c, measured = measure(s.plan.measurement, int(s.counts.counts[j]), s.source,
                                  round=t + 1)
            steps.extend((step, measured))
            v = float(vs[j])
        delta = theta_step(p.update, p.step, v, c / N)
        selections[t], noisy[t], synthetic[t], deltas[t] = j, c, v, delta
        if delta != 0.0:
            h = h.updated(j, delta)
        times.append(time.perf_counter() - t0)
        if report.callback is not None:
            spent = budget = None
            if s.plan is not None:
                spent = float(s.plan.total_cost() + (t + 1) * s.plan.round_cost())
                budget = s.plan.budget.value
            rp = RoundProgress(t + 1, T, j, v, c / N, spent, budget)
            report("round", round=t + 1, rounds=T, bound=False, spent=spent, budget=budget,
                   error=rp.error, detail=rp)
    transcript = Transcript(selections, noisy, N, s.noisy_total, p)
    return Outcome(transcript, steps, synthetic, deltas, times, h)


def prepare(
    *,
    functions: Sequence[Function],
    domain: Domain,
    queries: Sequence[Function] | Workload,
    data: Any,
    log_domain_size: float,
    epsilon: float | None,
    rho: float | None,
    neighbours: Neighbours | str,
    rounds: int | None,
    step: float | None,
    sample_size: int | None,
    rows: int | None,
    expectations: Expectations,
    update: Update | None,
    total_fraction: float,
    source: NoiseSource | None,
    rng: np.random.Generator | int | None,
    replay: Transcript | None,
    on_invalid: OnInvalid,
    extra_columns: ExtraColumns = "error",
) -> tuple[Setting, Budget | None]:
    """Budget, counts, normaliser, parameters and plan, in that order (shared with MWEM):
    under add/remove the total is measured first and the defaults use n̂ (post-processing)."""
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    if replay is not None:
        if epsilon is not None or rho is not None:
            raise TesseraError("a replay spends no budget: do not give epsilon or rho")
        old = replay.parameters
        rounds = len(replay) if rounds is None else rounds
        if rounds > len(replay):
            raise TesseraError(f"the transcript has {len(replay)} rounds, not {rounds}")
        if old is not None:
            step = old.step if step is None else step
            update = old.update if update is None else update  # type: ignore[assignment]
            sample_size = old.sample_size if sample_size is None else sample_size
            rows = old.rows if rows is None else rows
        if step is None or sample_size is None:
            raise TesseraError("replaying a transcript without parameters needs step= and "
                               "sample_size=")
        params = default_parameters(
            log_domain_size=log_domain_size, n_queries=len(functions),
            normaliser=replay.normaliser, definition=Definition.PURE, value=1.0, rounds=rounds,
            step=step, sample_size=sample_size, rows=rows, expectations=expectations,
            update="unit" if update is None else update)
        if old is not None:
            params = with_alpha(params, old.alpha)
        return Setting(params, replay.normaliser, None, None, None, generator, replay,
                       noisy_total=replay.noisy_total), None
    update = "unit" if update is None else update
    budget = Budget.of(epsilon, rho, neighbours)
    counts = sensitive_counts(domain, queries, data, on_invalid=on_invalid,
                              extra_columns=extra_columns)
    source = NoiseSource.secure() if source is None else source
    total = split_total(budget, total_fraction)
    steps: list[Step] = []
    noisy_total = None
    if total is None:
        normaliser = float(counts.n)
    else:
        noisy_total, st = measure(total, counts.n, source, role="total", round=0)
        steps.append(st)
        normaliser = float(max(1, noisy_total))
    rest = budget.value
    if total is not None:
        rest = budget.value - noise_cost(total, budget.definition)
    params = default_parameters(
        log_domain_size=log_domain_size, n_queries=len(functions), normaliser=normaliser,
        definition=budget.definition, value=rest, rounds=rounds, step=step,
        sample_size=sample_size, rows=rows, expectations=expectations, update=update)
    calibrated = plan(budget, params.rounds, total)
    return Setting(params, normaliser, counts, calibrated, source, generator, None, steps,
                   noisy_total), budget


def finish(algorithm: str, s: Setting, out: Outcome, budget: Budget | None, timings: Timings,
           width: int | None) -> RunRecord:
    """The run record; fails closed if the recorded steps do not prove the planned spend."""
    steps = tuple(out.steps)
    if s.replay is not None:
        g = s.replay.guarantee
        definition = g.definition if g is not None else Definition.PURE
        neighbours = g.neighbours if g is not None else Neighbours.SUBSTITUTE
        spent = prove((), definition, neighbours)
        source = "replayed transcript (no privacy randomness drawn)"
    else:
        assert s.plan is not None and budget is not None and s.source is not None
        spent = s.plan.planned
        proved = prove(steps, budget.definition, budget.neighbours)
        if proved != spent or not spent_within(spent, budget):
            raise TesseraError(f"accounting mismatch: planned {spent.text()}, the mechanisms "
                               f"that ran prove {proved.text()}")
        source = s.source.label
    transcript = Transcript(out.transcript.selections, out.transcript.noisy_counts,
                            out.transcript.normaliser, out.transcript.noisy_total, s.params,
                            spent if s.replay is None else s.replay.guarantee)
    return RunRecord(algorithm, None if budget is None else budget.guarantee(), spent, steps,
                     transcript, out.synthetic, out.theta_steps, s.params, timings, width,
                     source, s.replay is not None)


def spent_within(spent: Guarantee, budget: Budget) -> bool:
    v = spent.epsilon if spent.definition is Definition.PURE else spent.rho
    return v is not None and v <= budget.value


def iter_thetas(selections: IntArray, theta_steps: FloatArray, n_queries: int,
                upto: int | None = None) -> Iterator[FloatArray]:
    """θ of h_{t+1} for t = 0 … ``upto`` (default T − 1): the sum of the first t steps, added in
    the order the run added them (so the floats are the run's own)."""
    T = len(selections) - 1 if upto is None else upto
    theta = np.zeros(n_queries)
    for t in range(T + 1):
        yield theta.copy()
        if t < len(selections):
            theta[int(selections[t])] += theta_steps[t]


def sample_average(
    rows: int, rounds: int, rng: np.random.Generator,
    samplers: Iterable[Callable[[int], np.ndarray]], width: int,
) -> np.ndarray:
    """``rows`` draws from (1/T) Σ_t h_t: t uniform per row, then ``k_t`` rows of h_t from the
    t-th sampler (called in round order, only when k_t > 0); shuffled."""
    which = rng.integers(0, rounds, size=rows)
    per_round = np.bincount(which, minlength=rounds)
    parts = [draw(int(k)) for draw, k in zip(samplers, per_round, strict=False) if k]
    if not parts:
        return np.zeros((0, width), dtype=np.int64)
    out = np.concatenate(parts)
    return out[rng.permutation(out.shape[0])]

