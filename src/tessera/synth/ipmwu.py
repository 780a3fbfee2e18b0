"""IPMWU: implicit private multiplicative weights, as paper 2 states it (docs/theory.md §5).

Paper 2, §4, Algorithm 1, with the correction of docs/theory.md §5 (the exponential mechanism
uses ε/(2Δ)). The distribution of round t is kept implicitly as a Gibbs model over the workload,

    h_t(x) ∝ exp(Σ_f θ_f f(x)),   θ = −β z,   h_1 uniform (z = 0),

and run by the engine (docs/theory.md §4): exact expectations ⟨f, h_t⟩ and a perfect sampler,
in time exponential only in the width of the workload's decomposition. One round:

1. v ← f(S_t) for every f, S_t = m i.i.d. rows of h_t (``expectations="sample"``, the paper's
   version), or v ← ⟨f, h_t⟩ exactly (``expectations="exact"``: the limit m → ∞, no sampling
   error). Either is post-processing of past outputs;
2. f_t ← exponential mechanism, score |f(X) − v_f| of sensitivity 1/n (count units in
   :mod:`tessera.synth.accounting`), P[f] ∝ exp(ε₀ · score/(2Δ));
3. a_t ← (q_{f_t}(X) + Z)/N, Z integer noise on the count (discrete Laplace or Gaussian);
4. the multiplicative-weights step on f_t:

   * ``update="unit"`` (the paper): z_{f_t} += sign(v_{f_t} − a_t), i.e.
     θ_{f_t} −= β · sign(v_{f_t} − a_t). **Sign convention:** h_{t+1}(x) ∝ h_t(x) ·
     exp(−β sign(v − a) f_t(x)): when the synthetic answer v is above the measurement a, the
     rows with f_t(x) = 1 lose weight, and gain it when v is below;
   * ``update="mwem"`` (Hardt–Ligett–McSherry, docs/theory.md §5 "standard improvements"):
     θ_{f_t} += (a_t − v_{f_t})/2, i.e. h ← h · exp(f (a − v)/2).

The output is ``rows`` synthetic rows from the **average** (1/T) Σ_{t=1}^{T} h_t of the
distributions the rounds used (h_1 … h_T; h_{T+1}, after the last step, is not part of it, as in
the paper): each row picks t uniformly and is drawn from h_t by the perfect sampler; the rows are
then shuffled. The post-processing randomness (S_t, t, the rows) comes from a numpy
``Generator``: it touches no sensitive value, so it needs no secure source.

**Parameters** (:func:`default_parameters`, each overridable), paper 2 §4.1 with L = ln|𝔻| (the
log of the number of points the constraints allow), N the normaliser, |F| the number of queries:

* pure ε:  α(T) = (L · ln(|F|T) / (N ε))^{1/3};
* ρ-zCDP:  α(T) = (√L · ln(|F|T) / (2 N √ρ))^{1/2} (the (ε,δ) rate of §4.1 with ε ≈ 2√(ρ ln(1/δ)));
* T = ⌈L/α(T)²⌉ (the smallest integer fixed point: the multiplicative-weights term √(L/T) equals
  the noise term), β = √(L/T), m = ⌈ln(|F|T)/α²⌉, rows = m;

up to the constants the paper leaves out: α is an approximation, never a guarantee. Default T is
capped at :data:`MAX_DEFAULT_ROUNDS` and m at :data:`MAX_DEFAULT_SAMPLE` (the record says so).

**Privacy** (:mod:`tessera.synth.accounting`): pure ε by basic composition (ε₀ = ε/(2T) per
step) or ρ-zCDP (ρ/(2T) per step); substitute one row with n public (paper 2), or add/remove one
row with a privatised total. The run's :class:`RunRecord` lists every mechanism that ran, and its
``spent`` equals :func:`tessera.synth.accounting.prove` of those steps (checked before return).

**Replay.** A :class:`Transcript` (the selections and noisy counts of a run: its DP outputs) can
be replayed by :func:`ipmwu` and :func:`tessera.synth.mwem.mwem`: the rounds then use the
recorded f_t and a_t instead of running the mechanisms (post-processing of the transcript, no new
cost). Two runs from the same seeded :class:`~tessera.mechanisms.NoiseSource` also draw the same
noise. Both are how the explicit-histogram baseline validates IPMWU.

Why this module is long (about 880 lines): it is one algorithm, IPMWU, with the machinery
its run shares with :mod:`tessera.synth.mwem`: the sensitive counts and their evaluator, the
default parameters, the round driver (:func:`drive`) and the run's record and transcript. MWEM
imports these pieces from here rather than duplicate them; splitting them off would leave
this module a thin loop over names defined elsewhere.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.accounting.guarantee import Guarantee
from tessera.data.counts import count
from tessera.data.source import encode
from tessera.data.table import OnInvalid
from tessera.engine.bdd import BooleanQuery
from tessera.engine.decomposition import DEFAULT_MEMORY_LIMIT
from tessera.engine.factors import Function
from tessera.engine.model import GibbsModel, workload_functions
from tessera.errors import DataError, QueryError, TesseraError
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
from tessera.workload.workload import Workload

__all__ = [
    "MAX_DEFAULT_ROUNDS",
    "MAX_DEFAULT_SAMPLE",
    "Evaluator",
    "IPMWUResult",
    "Parameters",
    "Progress",
    "RoundProgress",
    "RunRecord",
    "SensitiveCounts",
    "Timings",
    "Transcript",
    "default_parameters",
    "ipmwu",
    "iter_thetas",
    "sensitive_counts",
]

Expectations = Literal["sample", "exact"]
Update = Literal["unit", "mwem"]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Cap on the default number of rounds (the theory's T grows like (nε)^{2/3}).
MAX_DEFAULT_ROUNDS = 10_000
#: Cap on the default sample size m (and hence on the default number of output rows).
MAX_DEFAULT_SAMPLE = 1_000_000
_ROW_BLOCK = 1 << 16


# -- the sensitive input ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SensitiveCounts:
    """The exact counts q_f(X) of every query and the number of rows n: SENSITIVE, NOT PRIVATE.

    Only the private steps read them; no record ever holds them."""

    counts: IntArray
    n: int

    def __post_init__(self) -> None:
        c = np.asarray(self.counts)
        if c.ndim != 1 or not (np.issubdtype(c.dtype, np.integer) or c.size == 0):
            raise DataError("counts must be a vector of integers")
        if isinstance(self.n, bool) or int(self.n) != self.n or self.n < 1:
            raise DataError(f"the number of rows must be a positive integer, got {self.n!r}")
        if c.size and (c.min() < 0 or c.max() > self.n):
            raise DataError("a count lies outside [0, n]")
        object.__setattr__(self, "counts", np.ascontiguousarray(c, dtype=np.int64))
        object.__setattr__(self, "n", int(self.n))


def query_functions(domain: Domain, queries: Sequence[Function] | Workload,
               names: Sequence[str] | None = None,
               ) -> tuple[tuple[Function, ...], tuple[str, ...]]:
    if isinstance(queries, Workload):
        if queries.domain != domain:
            raise QueryError("the workload is over another domain")
        functions, own = workload_functions(queries)
    else:
        functions, own = tuple(queries), tuple(f"q{j}" for j in range(len(queries)))
    if not functions:
        raise QueryError("the workload has no queries")
    out = own if names is None else tuple(names)
    if len(out) != len(functions):
        raise QueryError(f"{len(out)} names for {len(functions)} queries")
    return functions, out


class Evaluator:
    """f(x) for every query on rows of codes, each query compiled once (a Boolean query's
    automaton is built once, not per call)."""

    def __init__(self, domain: Domain, functions: Sequence[Function]) -> None:
        self.domain = domain
        self.functions = tuple(functions)
        self._compiled = [self._compile(f) for f in self.functions]

    def _compile(self, f: Function) -> Callable[[np.ndarray], np.ndarray]:
        domain = self.domain
        if isinstance(f, BooleanQuery):
            order = f.scope
            if not order:
                value = f.node == f.manager.true
                return lambda codes: np.full(codes.shape[0], value, dtype=bool)
            layers = f.cofactor_layers(order, max_states=1 << 30)
            assert layers is not None
            transitions, accept = layers
            columns = [domain.index(n) for n in order]

            def run(codes: np.ndarray) -> np.ndarray:
                state = np.zeros(codes.shape[0], dtype=np.int64)
                for col, table in zip(columns, transitions, strict=True):
                    state = table[state, codes[:, col]]
                return accept[state]

            return run
        return lambda codes: np.asarray(f.evaluate(domain, codes), dtype=bool)

    def counts(self, codes: npt.ArrayLike, which: npt.ArrayLike | None = None) -> IntArray:
        """Σ_rows f(x) for every query (or the queries ``which``), in blocks of rows."""
        codes = np.asarray(codes)
        idx = range(len(self.functions)) if which is None else np.atleast_1d(which)
        out = np.zeros(len(idx), dtype=np.int64)
        for lo in range(0, codes.shape[0], _ROW_BLOCK):
            block = codes[lo: lo + _ROW_BLOCK]
            for k, j in enumerate(idx):
                out[k] += int(np.count_nonzero(self._compiled[int(j)](block)))
        return out

    def means(self, codes: npt.ArrayLike, which: npt.ArrayLike | None = None) -> FloatArray:
        """f(S) = (1/|S|) Σ_{x∈S} f(x) for every query (or ``which``)."""
        codes = np.asarray(codes)
        return self.counts(codes, which) / float(codes.shape[0])

    def matrix(self, codes: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """The |F| × rows table of f(x)."""
        codes = np.asarray(codes)
        return np.stack([g(codes) for g in self._compiled]) if self._compiled else \
            np.zeros((0, codes.shape[0]), dtype=bool)


def _check_codes(domain: Domain, codes: np.ndarray) -> np.ndarray:
    if codes.ndim != 2 or codes.shape[1] != len(domain):
        raise DataError(f"rows of codes must have shape (n, {len(domain)}), got {codes.shape}")
    if not np.issubdtype(codes.dtype, np.integer):
        raise DataError(f"codes must be integers, got dtype {codes.dtype}")
    sizes = np.array(domain.sizes)
    bad = (codes < 0) | (codes >= sizes[None, :])
    if bad.any():
        i, j = map(int, np.argwhere(bad)[0])
        raise DataError(f"row {i}: code {int(codes[i, j])} outside attribute "
                        f"{domain.names[j]!r} (0..{sizes[j] - 1})")
    return codes


def sensitive_counts(
    domain: Domain,
    queries: Sequence[Function] | Workload,
    data: Any,
    *,
    on_invalid: OnInvalid = "error",
) -> SensitiveCounts:
    """The exact counts of ``queries`` on ``data`` (NOT PRIVATE; only the private steps read them).

    ``data``: a :class:`SensitiveCounts` (returned as is, after a length check), rows of codes
    (an integer array of shape (n, len(domain))), or anything :func:`tessera.data.source.encode`
    reads (a path, a DataFrame, an Arrow table, a DuckDB relation). A workload of predicate queries
    is counted by :func:`tessera.data.counts.count` (never row by row).
    """
    functions, _ = query_functions(domain, queries)
    if isinstance(data, SensitiveCounts):
        if data.counts.size != len(functions):
            raise DataError(f"{data.counts.size} counts for {len(functions)} queries")
        return data
    if isinstance(data, np.ndarray | list | tuple):
        codes = _check_codes(domain, np.asarray(data))
    elif isinstance(queries, Workload):
        res = count(data, queries, on_invalid=on_invalid)
        return SensitiveCounts(res.answers, res.n_rows)
    else:
        codes = encode(data, domain, on_invalid=on_invalid).codes()
    if codes.shape[0] == 0:
        raise DataError("the data has no rows")
    return SensitiveCounts(Evaluator(domain, functions).counts(codes), codes.shape[0])


# -- parameters ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Parameters:
    """T, β, m and the output size of a run, with the theory they came from.

    ``alpha`` is paper 2's accuracy scale at these T (§4.1, up to constants and logarithmic
    factors): an approximation, not a guarantee. ``defaulted`` names the parameters that were
    derived (with ``" (capped)"`` when a cap bit)."""

    rounds: int
    step: float
    sample_size: int
    rows: int
    expectations: str
    update: str
    alpha: float
    log_domain_size: float
    n_queries: int
    normaliser: float
    defaulted: tuple[str, ...] = ()


def _alpha(rounds: int, log_domain: float, n_queries: int, normaliser: float,
           definition: Definition, value: float) -> float:
    lf = math.log(max(n_queries * rounds, 2))
    if definition is Definition.PURE:
        return (log_domain * lf / (normaliser * value)) ** (1.0 / 3.0)
    return (math.sqrt(log_domain) * lf / (2.0 * normaliser * math.sqrt(value))) ** 0.5


def default_parameters(
    *,
    log_domain_size: float,
    n_queries: int,
    normaliser: float,
    definition: Definition,
    value: float,
    rounds: int | None = None,
    step: float | None = None,
    sample_size: int | None = None,
    rows: int | None = None,
    expectations: Expectations = "sample",
    update: Update = "unit",
) -> Parameters:
    """Paper 2's parameters (module docstring) for a budget ``value`` (ε or ρ, what the rounds
    may spend) and normaliser N; any given value is kept as it is."""
    if expectations not in ("sample", "exact"):
        raise TesseraError(f"unknown expectations {expectations!r}", hint="'sample' or 'exact'")
    if update not in ("unit", "mwem"):
        raise TesseraError(f"unknown update {update!r}", hint="'unit' or 'mwem'")
    L = max(float(log_domain_size), 0.0)
    defaulted: list[str] = []

    def alpha(t: int) -> float:
        return _alpha(t, L, n_queries, normaliser, definition, value) if L > 0 else 0.0

    if rounds is None:
        def too_few(t: int) -> bool:  # is t below its own theoretical count ⌈L/α(t)²⌉?
            a = alpha(t)
            return a > 0 and math.ceil(L / (a * a)) > t

        lo, hi = 1, MAX_DEFAULT_ROUNDS
        if not too_few(lo) or too_few(hi):
            rounds = lo if not too_few(lo) else hi
        else:
            while hi - lo > 1:  # too_few is monotone: α(t) grows with t
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if too_few(mid) else (lo, mid)
            rounds = hi
        defaulted.append("rounds (capped)" if rounds == MAX_DEFAULT_ROUNDS else "rounds")
    _positive_int(rounds, "rounds")
    a = alpha(int(rounds))
    if step is None:
        step = math.sqrt(L / rounds)
        defaulted.append("step")
    if not (math.isfinite(step) and step >= 0):
        raise TesseraError(f"the step β must be finite and ≥ 0, got {step!r}")
    if sample_size is None:
        lf = math.log(max(n_queries * rounds, 2))
        raw = lf / (a * a) if a > 0 else 1.0
        sample_size = int(min(MAX_DEFAULT_SAMPLE, max(1, math.ceil(raw))))
        defaulted.append("sample_size (capped)" if sample_size == MAX_DEFAULT_SAMPLE
                         else "sample_size")
    _positive_int(sample_size, "sample_size")
    if rows is None:
        rows = sample_size
        defaulted.append("rows")
    if isinstance(rows, bool) or int(rows) != rows or rows < 0:
        raise TesseraError(f"rows must be an integer ≥ 0, got {rows!r}")
    return Parameters(int(rounds), float(step), int(sample_size), int(rows), expectations, update,
                      a, L, n_queries, float(normaliser), tuple(defaulted))


def _positive_int(value: Any, name: str) -> None:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise TesseraError(f"{name} must be a positive integer, got {value!r}")


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
class _Outcome:
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


Progress = Callable[[RoundProgress], None]


def drive(h: Distribution, s: Setting,
          observe: Callable[[int, Distribution], None] | None = None,
          progress: Progress | None = None) -> _Outcome:
    """The T rounds of docs/theory.md §5 on any representation of h_t (implicit or explicit);
    ``progress`` is called after every round (:class:`RoundProgress`)."""
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
        if progress is not None:
            spent = budget = None
            if s.plan is not None:
                spent = float(s.plan.total_cost() + (t + 1) * s.plan.round_cost())
                budget = s.plan.budget.value
            progress(RoundProgress(t + 1, T, j, v, c / N, spent, budget))
    transcript = Transcript(selections, noisy, N, s.noisy_total, p)
    return _Outcome(transcript, steps, synthetic, deltas, times, h)


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
            params = _replace_alpha(params, old.alpha)
        return Setting(params, replay.normaliser, None, None, None, generator, replay,
                       noisy_total=replay.noisy_total), None
    update = "unit" if update is None else update
    budget = Budget.of(epsilon, rho, neighbours)
    counts = sensitive_counts(domain, queries, data, on_invalid=on_invalid)
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


def _replace_alpha(p: Parameters, alpha: float) -> Parameters:
    return Parameters(p.rounds, p.step, p.sample_size, p.rows, p.expectations, p.update, alpha,
                      p.log_domain_size, p.n_queries, p.normaliser, p.defaulted)


def finish(algorithm: str, s: Setting, out: _Outcome, budget: Budget | None, timings: Timings,
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


class _Implicit:
    """h_t as a Gibbs model (engine): θ indexed like the queries."""

    def __init__(self, model: GibbsModel, evaluator: Evaluator) -> None:
        self.model = model
        self.evaluator = evaluator

    def expectations(self) -> FloatArray:
        return self.model.expectations()

    def sample_answers(self, m: int, rng: np.random.Generator,
                       which: IntArray | None = None) -> FloatArray:
        return self.evaluator.means(self.model.sample(m, rng), which)

    def updated(self, j: int, delta: float) -> _Implicit:
        theta = np.array(self.model.theta, dtype=np.float64)
        theta[j] += delta
        return _Implicit(self.model.with_theta(theta), self.evaluator)


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


@dataclass(frozen=True, eq=False)
class IPMWUResult:
    """Synthetic rows (codes, shape (rows, len(domain))) and the run record; the round
    distributions are available as Gibbs models (:meth:`distribution`)."""

    rows: npt.NDArray[np.integer]
    record: RunRecord
    model: GibbsModel
    names: tuple[str, ...]

    @property
    def domain(self) -> Domain:
        return self.model.domain

    @property
    def private(self) -> bool:
        return self.record.private

    def theta(self, t: int) -> FloatArray:
        """θ of h_{t+1}: t = 0 is the uniform h_1, t = T the distribution after the last step."""
        r = self.record
        T = r.parameters.rounds
        if not 0 <= t <= T:
            raise TesseraError(f"t must be in 0..{T}, got {t}")
        *_, last = iter_thetas(r.transcript.selections, r.theta_steps, len(self.names), t)
        return last

    def distribution(self, t: int) -> GibbsModel:
        """h_{t+1} as a Gibbs model (shares the decomposition)."""
        return self.model.with_theta(self.theta(t))

    def average_answers(self) -> FloatArray:
        """⟨f, (1/T) Σ_t h_t⟩ for every query: the answers of the distribution the rows are
        drawn from (exact; one engine pass per round)."""
        r = self.record
        total = np.zeros(len(self.names))
        for theta in iter_thetas(r.transcript.selections, r.theta_steps, len(self.names)):
            total += self.model.with_theta(theta).expectations()
        return total / r.parameters.rounds

    def to_frame(self) -> pd.DataFrame:
        """The rows decoded to the domain's values."""
        return pd.DataFrame({a.name: a.decode(self.rows[:, i])
                             for i, a in enumerate(self.domain)})


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


def ipmwu(
    domain: Domain,
    queries: Sequence[Function] | Workload,
    data: Any = None,
    *,
    epsilon: float | None = None,
    rho: float | None = None,
    neighbours: Neighbours | str = Neighbours.SUBSTITUTE,
    rounds: int | None = None,
    step: float | None = None,
    sample_size: int | None = None,
    rows: int | None = None,
    expectations: Expectations = "sample",
    update: Update | None = None,
    total_fraction: float = 0.05,
    source: NoiseSource | None = None,
    rng: np.random.Generator | int | None = None,
    replay: Transcript | None = None,
    names: Sequence[str] | None = None,
    constraints: Sequence[Function] = (),
    heuristic: str = "min-fill",
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    on_invalid: OnInvalid = "error",
    progress: Progress | None = None,
) -> IPMWUResult:
    """IPMWU (paper 2, Algorithm 1; docs/theory.md §5) on ``data`` for the workload ``queries``.

    ``data``: see :func:`sensitive_counts` (not needed for a ``replay``). Budget: exactly one of
    ``epsilon`` (pure DP, basic composition) and ``rho`` (zCDP); ``neighbours`` substitute
    (paper 2: n public) or add-remove (a noisy total with ``total_fraction`` of the budget).
    ``rounds`` T, ``step`` β, ``sample_size`` m and ``rows`` default to paper 2's theory
    (:func:`default_parameters`). ``expectations``: ``"sample"`` (the paper: f(S_t) from m
    perfect samples) or ``"exact"`` (engine marginals). ``update``: ``"unit"`` (the paper, the
    default) or ``"mwem"``; a ``replay`` defaults to its transcript's update, step, m and rows.
    ``source`` is the privacy randomness (default OpenDP secure; ``NoiseSource.seeded`` for
    tests: NOT PRIVATE); ``rng`` the post-processing randomness (S_t, the rows: a numpy
    ``Generator`` or a seed; sampling touches no sensitive value). ``constraints`` are hard
    (must-be-1) functions, as in :class:`~tessera.engine.model.GibbsModel`, whose other options
    are passed on. ``progress`` is called after every round with a :class:`RoundProgress`.
    """
    t0 = time.perf_counter()
    functions, qnames = query_functions(domain, queries, names)
    model = GibbsModel(domain, functions, names=qnames, constraints=constraints,
                       heuristic=heuristic, memory_limit=memory_limit)
    log_domain = model.log_partition()  # θ = 0: ln of the number of allowed points
    if not math.isfinite(log_domain):
        raise QueryError("the constraints exclude every point of the domain")
    setting, budget = prepare(
        functions=functions, domain=domain, queries=queries, data=data,
        log_domain_size=log_domain, epsilon=epsilon, rho=rho, neighbours=neighbours,
        rounds=rounds, step=step, sample_size=sample_size, rows=rows,
        expectations=expectations, update=update, total_fraction=total_fraction,
        source=source, rng=rng, replay=replay, on_invalid=on_invalid)
    evaluator = Evaluator(domain, functions)
    setup = time.perf_counter() - t0
    out = drive(_Implicit(model, evaluator), setting, progress=progress)
    t1 = time.perf_counter()
    p = setting.params
    gen = setting.rng

    def samplers() -> Iterator[Callable[[int], np.ndarray]]:
        for theta in iter_thetas(out.transcript.selections, out.theta_steps, len(functions)):
            yield lambda k, theta=theta: model.with_theta(theta).sample(k, gen)

    synthetic_rows = sample_average(p.rows, p.rounds, gen, samplers(), len(domain))
    timings = Timings(setup, tuple(out.round_times), time.perf_counter() - t1)
    record = finish("IPMWU (paper 2, Algorithm 1, implicit Gibbs weights)", setting, out,
                    budget, timings, model.width)
    return IPMWUResult(synthetic_rows, record, model, qnames)
