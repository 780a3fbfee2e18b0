"""IPMWU: implicit private multiplicative weights, as Ghazi et al. state it (docs/theory.md §5).

Ghazi et al., §4, Algorithm 1, with the correction of docs/theory.md §5 (the exponential mechanism
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

**Parameters**: :mod:`tessera.synth.parameters` (Ghazi et al. §4.1's T, β, m, each overridable).

**Privacy** (:mod:`tessera.synth.accounting`): pure ε by basic composition (ε₀ = ε/(2T) per
step) or ρ-zCDP (ρ/(2T) per step); substitute one row with n public (Ghazi et al.), or
add/remove one row with a privatised total. The run's :class:`RunRecord` lists every
mechanism that ran, and its ``spent`` equals :func:`tessera.synth.accounting.prove` of those
steps (checked before return).

**Replay.** A :class:`Transcript` (the selections and noisy counts of a run: its DP outputs) can
be replayed by :func:`ipmwu` and :func:`tessera.synth.mwem.mwem`: the rounds then use the
recorded f_t and a_t instead of running the mechanisms (post-processing of the transcript, no new
cost). Two runs from the same seeded :class:`~tessera.mechanisms.NoiseSource` also draw the same
noise. Both are how the explicit-histogram baseline validates IPMWU.

The pieces IPMWU shares with :mod:`tessera.synth.mwem` live beside it: the sensitive
counts and their evaluator (:mod:`tessera.synth.sensitive`), the parameters
(:mod:`tessera.synth.parameters`) and the round driver with its record and transcript
(:mod:`tessera.synth.rounds`); this module is the implicit representation of h_t and
the algorithm's entry point.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.data.table import ExtraColumns, OnInvalid
from tessera.engine.decomposition import DEFAULT_MEMORY_LIMIT
from tessera.engine.factors import Function
from tessera.engine.model import GibbsModel
from tessera.errors import QueryError, TesseraError
from tessera.mechanisms import NoiseSource
from tessera.privacy import Neighbours
from tessera.schema.domain import Domain
from tessera.synth.parameters import (
    Expectations,
    Update,
)
from tessera.synth.progress import Reporter
from tessera.synth.rounds import (
    Progress,
    RunRecord,
    Timings,
    Transcript,
    drive,
    finish,
    iter_thetas,
    prepare,
    sample_average,
)
from tessera.synth.sensitive import Evaluator, query_functions
from tessera.workload.workload import Workload

__all__ = [
    "IPMWUResult",
    "ipmwu",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


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
    extra_columns: ExtraColumns = "error",
    progress: Progress | None = None,
) -> IPMWUResult:
    """IPMWU (Ghazi et al., Algorithm 1; docs/theory.md §5) on ``data`` for the workload
    ``queries``.

    ``data``: see :func:`sensitive_counts` (not needed for a ``replay``). Budget: exactly one of
    ``epsilon`` (pure DP, basic composition) and ``rho`` (zCDP); ``neighbours`` substitute
    (Ghazi et al.: n public) or add-remove (a noisy total with ``total_fraction`` of the budget).
    ``rounds`` T, ``step`` β, ``sample_size`` m and ``rows`` default to Ghazi et al.'s theory
    (:func:`default_parameters`). ``expectations``: ``"sample"`` (the paper: f(S_t) from m
    perfect samples) or ``"exact"`` (engine marginals). ``update``: ``"unit"`` (the paper, the
    default) or ``"mwem"``; a ``replay`` defaults to its transcript's update, step, m and rows.
    ``source`` is the privacy randomness (default OpenDP secure; ``NoiseSource.seeded`` for
    tests: NOT PRIVATE); ``rng`` the post-processing randomness (S_t, the rows: a numpy
    ``Generator`` or a seed; sampling touches no sensitive value). ``constraints`` are hard
    (must-be-1) functions, as in :class:`~tessera.engine.model.GibbsModel`, whose other options
    are passed on. ``progress`` sees a :class:`~tessera.synth.progress.ProgressEvent` at every
    step: the setup (start, end), each round (``detail``: its :class:`RoundProgress`), the
    sampling of the rows (start, end).
    """
    report = Reporter.of(progress)
    report("setup", "start")
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
        source=source, rng=rng, replay=replay, on_invalid=on_invalid,
        extra_columns=extra_columns)
    evaluator = Evaluator(domain, functions)
    setup = time.perf_counter() - t0
    report("setup", round=0, rounds=setting.params.rounds, bound=False)
    out = drive(_Implicit(model, evaluator), setting, progress=report)
    t1 = time.perf_counter()
    p = setting.params
    gen = setting.rng
    report("sampling", "start", rows=p.rows)

    def samplers() -> Iterator[Callable[[int], np.ndarray]]:
        for theta in iter_thetas(out.transcript.selections, out.theta_steps, len(functions)):
            yield lambda k, theta=theta: model.with_theta(theta).sample(k, gen)

    synthetic_rows = sample_average(p.rows, p.rounds, gen, samplers(), len(domain))
    report("sampling", rows=p.rows)
    timings = Timings(setup, tuple(out.round_times), time.perf_counter() - t1)
    record = finish("IPMWU (Ghazi et al., Algorithm 1, implicit Gibbs weights)", setting, out,
                    budget, timings, model.width)
    return IPMWUResult(synthetic_rows, record, model, qnames)
