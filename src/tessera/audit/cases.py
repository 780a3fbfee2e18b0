"""The mechanisms under audit, their worst-case neighbouring pairs, events and claims
(docs/security.md, "Privacy audits").

Every :class:`AuditCase` runs a mechanism *as Tessera runs it* on two neighbouring data sets
D₁, D₂ (D₁ the one under which the events are likelier) and states what Tessera claims for it:

* :func:`discrete_laplace_case` — one count, D₁ = D₂ + one row (answers 101 vs 100), noise
  from :func:`tessera.mechanisms.discrete_laplace.sample` at the scale
  :meth:`~tessera.mechanisms.DiscreteLaplace.for_epsilon` gives; claim: pure ε = Δ/b.
  Events: y ≥ 100 + τ (for the discrete Laplace every τ ≥ 1 has likelihood ratio exactly e^ε).
* :func:`discrete_gaussian_case` — the same pair, σ from
  :meth:`~tessera.mechanisms.DiscreteGaussian.for_rho`; claim: ρ-zCDP, compared as the tight
  (ε, δ) profile of CKS20 Thm 7 (:meth:`~tessera.mechanisms.DiscreteGaussian.epsilon_for_delta`)
  at the audit's δ. The threshold events attain that profile.
* :func:`exponential_case` — two candidates with scores (2, 10) on D₁ and (0, 12) on D₂
  (sensitivity Δ = 2, the scores move in opposite directions, the non-monotone worst case);
  claim: pure ε (McSherry–Talwar). Events: the selected index.
* :func:`workload_release_case` — a 6-query workload whose maximum overlap is γ = 3, calibrated
  by the library's own :func:`tessera.release.plan.noise_plan` (with its re-check); D₁ adds the
  witness row of γ to D₂, so exactly the γ witness queries move by one. Claim: the plan's
  certified ε (``plan.spent``). Events: every witness query's noisy answer ≥ its D₂ answer + τ,
  the events on which the privacy loss of the vector output is maximal (each witness
  coordinate contributes 1/b = ε/γ exactly when it lies at or above its D₁ answer).
* :func:`synthesizer_case` — one round of IPMWU or MWEM, substitute-one-row neighbours
  (n public, Ghazi et al.); the DP output of the round is its transcript entry (selected query,
  noisy count), everything else is post-processing. Vectorised: the synthesizer's own
  ``prepare`` (counts, budget split) and h₁ (Gibbs model or explicit histogram), then the two
  private steps its round driver calls, drawn for all trials at once; ``end_to_end``:
  :func:`tessera.synth.ipmwu.ipmwu` / :func:`tessera.synth.mwem.mwem` called once per trial
  with ``rounds=1`` and exact expectations. Claim: the run's own accounting (``record.spent``).
  Events: the rarely selected query is selected (and its noisy count lies above a threshold).
  The LP method (:mod:`tessera.synth.lp`) is post-processing of a release and needs no audit
  of its own: the workload-release audit covers what it reads.

Planted bugs (:func:`tessera.audit.run.planted_cases`) run a *wrong* mechanism against the *honest*
claim: half the discrete Laplace scale, half the discrete Gaussian σ, a workload calibrated with γ −
1, and the exponential mechanism calibrated for sensitivity Δ − 1 (equivalently with ε/Δ instead of
ε/(2Δ)). An audit of them must report ε_lb above the claim; tests/audit checks that it does.

Randomness: ``seed`` given, every run uses :meth:`~tessera.mechanisms.NoiseSource.seeded`
(numpy, NOT PRIVATE, reproducible), one independent stream per (seed, case, data set, and for
the synthesizers trial), derived with ``numpy.random.SeedSequence``; ``seed=None`` uses
OpenDP's secure sampler (:meth:`~tessera.mechanisms.NoiseSource.secure`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.accounting.zcdp import epsilon_for_delta as zcdp_epsilon_for_delta
from tessera.calibration.scales import per_query_scales
from tessera.data.counts import count
from tessera.engine.model import GibbsModel
from tessera.errors import TesseraError
from tessera.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    ExponentialMechanism,
    NoiseSource,
    discrete_gaussian,
    discrete_laplace,
    exponential,
)
from tessera.release.budget import Budget
from tessera.release.plan import NoisePlan, noise_plan
from tessera.schema.domain import Domain
from tessera.synth.accounting import Budget as SynthBudget
from tessera.synth.accounting import exact_scores, select
from tessera.synth.candidates import candidates
from tessera.synth.ipmwu import ipmwu
from tessera.synth.mwem import cells, mwem
from tessera.synth.rounds import prepare
from tessera.synth.schedule import Schedule, selection_sensitivity
from tessera.synth.sensitive import Evaluator, SensitiveCounts, query_functions, sensitive_counts
from tessera.workload.families import k_way_marginals
from tessera.workload.workload import Workload

__all__ = [
    "AUDIT_DELTA",
    "AuditCase",
    "Claim",
    "Event",
    "discrete_gaussian_case",
    "discrete_laplace_case",
    "exponential_case",
    "release_setup",
    "source_for",
    "synthesizer_case",
    "workload_release_case",
]

#: δ at which (ε, δ) claims (the discrete Gaussian's) are audited: large enough that events of
#: probability ~δ are measurable with 10^5–10^6 runs.
AUDIT_DELTA = 1e-2

Outputs = npt.NDArray[np.int64]
#: ``run(which, trials, seed)``: ``trials`` outputs on D₁ (``which`` = 0) or D₂ (1); ``seed``
#: None means OpenDP's secure randomness.
Runner = Callable[[int, int, int | None], Outputs]


@dataclass(frozen=True)
class Claim:
    """What Tessera claims for the mechanism: (ε, δ)-DP (δ = 0: pure), and why."""

    epsilon: float
    delta: float
    statement: str


@dataclass(frozen=True)
class Event:
    """An output event fixed before the runs: ``test(outputs)`` is one bool per run."""

    name: str
    test: Callable[[Outputs], npt.NDArray[np.bool_]]


@dataclass(frozen=True)
class AuditCase:
    """A mechanism, the neighbouring pair it runs on, its candidate events and its claim.

    ``per_trial``: the runner calls the mechanism once per trial (end to end), so it gets
    fewer trials; otherwise one vectorised call draws every trial. ``secure_per_trial``: with
    OpenDP's secure sampler the mechanism is one OpenDP call per trial (a selection: ~0.1 ms
    each), so the secure audit gives it fewer trials too."""

    name: str
    claim: Claim
    pair: str
    run: Runner
    events: tuple[Event, ...]
    per_trial: bool = False
    planted: str | None = None
    secure_per_trial: bool = False


def source_for(seed: int | None, *key: int) -> NoiseSource:
    """OpenDP's secure source (``seed`` None) or an independent seeded stream for ``key``."""
    if seed is None:
        return NoiseSource.secure()
    state = np.random.SeedSequence([int(seed), *map(int, key)]).generate_state(2, np.uint32)
    return NoiseSource.seeded(int(state[0]) << 32 | int(state[1]))


def _threshold_events(base: int, taus: Sequence[int], label: str = "y") -> tuple[Event, ...]:
    return tuple(
        Event(f"{label} ≥ {base + t}", lambda y, c=base + t: np.asarray(y) >= c) for t in taus
    )


# -- discrete Laplace and discrete Gaussian on one count ---------------------------------------

_COUNT = 100  # q(D₂); q(D₁) = 101: D₁ is D₂ plus one row that the query counts
_THRESHOLDS = range(0, 8)


def _run_scalar(sampler: Callable[..., object], parameter: float, key: int, which: int,
                trials: int, seed: int | None) -> Outputs:
    values = np.full(trials, _COUNT + 1 - which, dtype=np.int64)
    release = sampler(values, parameter, source_for(seed, key, which))
    return np.asarray(release.values, dtype=np.int64)  # type: ignore[attr-defined]


def discrete_laplace_case(epsilon: float = 1.0, scale_factor: float = 1.0) -> AuditCase:
    """Discrete Laplace for ``epsilon`` (Δ = 1); ``scale_factor`` < 1 plants a bug."""
    mech = DiscreteLaplace.for_epsilon(epsilon, 1)
    claim = Claim(mech.epsilon(1), 0.0, f"pure ε-DP, ε = Δ/b, b = {mech.scale:.6g}")
    planted = None if scale_factor == 1.0 else f"scale × {scale_factor:g}"
    return AuditCase(
        "discrete Laplace", claim, "one count: 101 (D₁ = D₂ + one row) vs 100",
        partial(_run_scalar, discrete_laplace.sample, mech.scale * scale_factor, 1),
        _threshold_events(_COUNT, _THRESHOLDS), planted=planted)


def discrete_gaussian_case(rho: float = 0.5, delta: float = AUDIT_DELTA,
                           sigma_factor: float = 1.0) -> AuditCase:
    """Discrete Gaussian for ``rho`` (Δ = 1), audited at ``delta``; ``sigma_factor`` < 1 plants
    a bug."""
    mech = DiscreteGaussian.for_rho(rho, 1)
    eps = mech.epsilon_for_delta(delta, 1)
    claim = Claim(eps, delta, f"ρ = {mech.rho(1):.6g}-zCDP; (ε, δ) by CKS20 Thm 7 "
                              f"(σ = {mech.sigma:.6g})")
    planted = None if sigma_factor == 1.0 else f"σ × {sigma_factor:g}"
    return AuditCase(
        "discrete Gaussian", claim, "one count: 101 (D₁ = D₂ + one row) vs 100",
        partial(_run_scalar, discrete_gaussian.sample, mech.sigma * sigma_factor, 2),
        _threshold_events(_COUNT, _THRESHOLDS), planted=planted)


# -- exponential mechanism ---------------------------------------------------------------------

#: Scores on D₁ and D₂ (sensitivity 2; candidate 0 gains 2, candidate 1 loses 2).
EXPONENTIAL_SCORES = (np.array([2, 10], dtype=np.int64), np.array([0, 12], dtype=np.int64))
EXPONENTIAL_SENSITIVITY = 2


def _run_exponential(epsilon: float, design_sensitivity: float, which: int, trials: int,
                     seed: int | None) -> Outputs:
    chosen = exponential.select(EXPONENTIAL_SCORES[which], epsilon, design_sensitivity,
                                source_for(seed, 3, which), runs=trials)
    return np.asarray(chosen.indices, dtype=np.int64)


def exponential_case(epsilon: float = 1.0, sensitivity_error: int = 0) -> AuditCase:
    """The exponential mechanism with ``epsilon`` on scores of sensitivity 2; a
    ``sensitivity_error`` of −1 calibrates it for Δ − 1 = 1 (a planted bug)."""
    mech = ExponentialMechanism(epsilon, EXPONENTIAL_SENSITIVITY)
    claim = Claim(mech.privacy_epsilon(), 0.0, "pure ε-DP, P[i] ∝ exp(ε s_i/(2Δ)), Δ = 2")
    design = EXPONENTIAL_SENSITIVITY + sensitivity_error
    if design <= 0:
        raise TesseraError("the planted sensitivity must stay positive")
    sign = "+" if sensitivity_error > 0 else "−"
    planted = (None if sensitivity_error == 0
               else f"calibrated for Δ {sign} {abs(sensitivity_error)}")
    events = (Event("selects 0", lambda y: np.asarray(y) == 0),
              Event("selects 1", lambda y: np.asarray(y) == 1))
    return AuditCase(
        "exponential mechanism", claim, "scores (2, 10) on D₁ vs (0, 12) on D₂",
        partial(_run_exponential, mech.epsilon, float(design)), events, planted=planted,
        secure_per_trial=True)


# -- an overlap-calibrated workload release ----------------------------------------------------

AUDIT_SCHEMA = {
    "attributes": {
        "age": {"type": "integer", "min": 0, "max": 9},
        "sex": {"type": "categorical", "values": ["F", "M"]},
    }
}
AUDIT_WORKLOAD = (
    "age < 5", "age >= 5", "age BETWEEN 3 AND 6", "sex = 'F'", "sex = 'M'",
    "age >= 7 AND sex = 'F'",
)


@dataclass(frozen=True, eq=False)
class ReleaseSetup:
    """The audited workload, its plan, the witness queries and the exact answers on D₁, D₂."""

    workload: Workload
    plan: NoisePlan
    witness: tuple[int, ...]
    answers: tuple[Outputs, Outputs]
    data: tuple[pd.DataFrame, pd.DataFrame]


def release_setup(epsilon: float = 1.0, rho: float | None = None) -> ReleaseSetup:
    """Plan the audit workload at ``epsilon`` (discrete Laplace) or ``rho`` (discrete Gaussian),
    add/remove, and build D₂ (40 made-up rows) and D₁ = D₂ + the witness row of γ; checks that
    exactly the witness queries move, by one."""
    domain = Domain.from_dict(AUDIT_SCHEMA)
    workload = Workload.from_sql(list(AUDIT_WORKLOAD), domain)
    budget = Budget.of(epsilon=epsilon) if rho is None else Budget.of(rho=rho)
    plan = noise_plan(workload, budget)
    witness = plan.overlap.witness
    if witness is None or not plan.overlap.exact:
        raise TesseraError("the audit workload needs an exact γ with a witness row")
    ages = np.arange(40) % 10
    base = pd.DataFrame({"age": ages, "sex": np.where(np.arange(40) % 3 == 0, "M", "F")})
    row = pd.DataFrame({a.name: a.decode(np.array([c])) for a, c in zip(domain, witness.x)})
    first = pd.concat([base, row], ignore_index=True)
    a1 = np.asarray(count(first, workload).answers, dtype=np.int64)
    a2 = np.asarray(count(base, workload).answers, dtype=np.int64)
    moved = np.flatnonzero(a1 != a2)
    if tuple(moved) != tuple(sorted(witness.queries)) or np.any(a1[moved] - a2[moved] != 1):
        raise TesseraError("the witness row does not move exactly its queries by one")
    return ReleaseSetup(workload, plan, tuple(sorted(witness.queries)), (a1, a2), (first, base))


def planted_scales(setup: ReleaseSetup, overlap_error: float) -> npt.NDArray[np.float64]:
    """The scales calibration gives when the overlap it is handed is γ_w + ``overlap_error``
    (the library's :func:`~tessera.calibration.scales.per_query_scales` on a doctored
    :class:`~tessera.overlap.OverlapResult`; the plan's re-check would refuse these scales,
    which is exactly why the audit must catch them on its own)."""
    ov = setup.plan.overlap
    wrong = ov.score_bound + overlap_error
    doctored = dataclasses.replace(ov, score_bound=wrong,
                                   score_achieved=min(ov.score_achieved, wrong))
    return per_query_scales(doctored, setup.workload.all_weights(), setup.plan.total)


def _run_release(answers: tuple[Outputs, Outputs], scales: npt.NDArray[np.float64],
                 gaussian: bool, which: int, trials: int, seed: int | None) -> Outputs:
    """``trials`` releases of the whole workload, noise as :func:`tessera.answer` adds it (the
    same sampler, at the plan's per-query scales), one vectorised call."""
    a = answers[which]
    values = np.tile(a, trials)
    sampler = discrete_gaussian.sample if gaussian else discrete_laplace.sample
    noisy = sampler(values, np.tile(scales, trials), source_for(seed, 9 if gaussian else 4, which))
    return np.asarray(noisy.values, dtype=np.int64).reshape(trials, a.size)


def _witness_events(setup: ReleaseSetup) -> tuple[Event, ...]:
    w = np.array(setup.witness)
    base = setup.answers[1][w]
    names = [setup.workload.name_of(int(i)) for i in w]
    out = []
    for tau in (1, 2, 3):
        def test(y: Outputs, tau: int = tau) -> npt.NDArray[np.bool_]:
            return np.all(np.asarray(y)[:, w] >= base + tau, axis=1)
        out.append(Event(f"all witness queries ({', '.join(names)}) ≥ q(D₂) + {tau}", test))
    return tuple(out)


def _witness_sum_events(setup: ReleaseSetup) -> tuple[Event, ...]:
    """Σ over the witness queries of (noisy answer − D₂ answer) ≥ t: under Gaussian noise the
    privacy loss of the vector output is increasing in this sum, so these are its likelihood-
    ratio events."""
    w = np.array(setup.witness)
    base = int(setup.answers[1][w].sum())
    out = []
    for t in range(0, 16):
        def test(y: Outputs, t: int = t) -> npt.NDArray[np.bool_]:
            return np.asarray(y)[:, w].sum(axis=1) - base >= t
        out.append(Event(f"Σ witness answers − Σ q(D₂) ≥ {t}", test))
    return tuple(out)


def workload_release_case(epsilon: float = 1.0, overlap_error: float = 0.0,
                          rho: float | None = None, delta: float = AUDIT_DELTA) -> AuditCase:
    """The audit workload answered as the library's plan says: discrete Laplace at ``epsilon``
    (claim: the plan's pure ε) or, with ``rho``, discrete Gaussian (claim: the (ε, δ) that the
    certificate's conversion derives from the plan's ρ, at ``delta``); ``overlap_error`` = −1
    calibrates with γ − 1 (a planted bug)."""
    setup = release_setup(epsilon, rho)
    plan = setup.plan
    scales = plan.scales if overlap_error == 0 else planted_scales(setup, overlap_error)
    gamma = f"γ = {plan.overlap.bound:g} ({'exact' if plan.overlap.exact else 'bound'})"
    if rho is None:
        claim = Claim(plan.spent, 0.0, f"pure ε-DP from the plan: {gamma}, "
                                       f"b = {plan.scales[0]:.6g}, re-checked")
        events = _witness_events(setup)
        name = "workload release (γ-calibrated)"
    else:
        claim = Claim(zcdp_epsilon_for_delta(plan.spent, delta), delta,
                      f"ρ = {plan.spent:.6g}-zCDP from the plan: {gamma}, σ = "
                      f"{plan.scales[0]:.6g}; (ε, δ) by the certificate's conversion")
        events = _witness_sum_events(setup)
        name = "workload release, Gaussian (γ-calibrated)"
    sign = "+" if overlap_error > 0 else "−"
    planted = None if overlap_error == 0 else f"calibrated with γ {sign} {abs(overlap_error):g}"
    t = setup.workload.n_queries
    return AuditCase(
        name, claim, f"{t} queries, γ = {plan.overlap.bound:g}; D₁ = D₂ + the witness row",
        partial(_run_release, setup.answers, np.asarray(scales), rho is not None), events,
        planted=planted)


# -- one round of a synthesizer ----------------------------------------------------------------

SYNTH_SCHEMA = {"attributes": {"a": {"type": "integer", "min": 0, "max": 3}}}
SYNTH_WORKLOAD = ("a = 0", "a = 1")
#: D₁ and D₂ (40 rows each) differ by one row substituted: a = 1 in D₂ becomes a = 0 in D₁.
SYNTH_ROWS = ((13, 21, 6, 0), (12, 22, 6, 0))


def _synth_data(domain: Domain, workload: Workload) -> tuple[SensitiveCounts, SensitiveCounts]:
    out = []
    for sizes in SYNTH_ROWS:
        codes = np.repeat(np.arange(4), sizes).reshape(-1, 1)
        out.append(sensitive_counts(domain, workload, codes))
    return out[0], out[1]


def _run_synth(algorithm: Callable[..., object], key: int, domain: Domain, workload: Workload,
               data: tuple[SensitiveCounts, SensitiveCounts], epsilon: float, which: int,
               trials: int, seed: int | None) -> Outputs:
    out = np.empty((trials, 2), dtype=np.int64)
    for i in range(trials):
        result = algorithm(domain, workload, data[which], epsilon=epsilon, rounds=1,
                           expectations="exact", rows=1, sample_size=1,
                           source=source_for(seed, key, which, i), rng=i)
        transcript = result.record.transcript  # type: ignore[attr-defined]
        out[i] = transcript.selections[0], transcript.noisy_counts[0]
    return out


def _first_expectations(method: str, domain: Domain, workload: Workload) -> npt.NDArray:
    """⟨f, h₁⟩ for every query, h₁ uniform, in the synthesizer's own representation: the
    engine's Gibbs model (IPMWU) or the explicit histogram over the cells (MWEM)."""
    functions, _ = query_functions(domain, workload)
    if method == "ipmwu":
        return np.asarray(GibbsModel(domain, functions).expectations(), dtype=np.float64)
    table = Evaluator(domain, functions).matrix(cells(domain))
    return np.asarray(table.mean(axis=1), dtype=np.float64)


def _run_round(method: str, key: int, domain: Domain, workload: Workload,
               data: tuple[SensitiveCounts, SensitiveCounts], epsilon: float, which: int,
               trials: int, seed: int | None) -> Outputs:
    """Round 1 for all trials at once: the synthesizer's own :func:`~tessera.synth.rounds.prepare`
    (counts, normaliser, budget split) and the two private steps its round driver calls
    (:func:`tessera.synth.accounting.select`, then the plan's measurement on the selected
    counts), each drawn ``trials`` times."""
    source = source_for(seed, key, which)
    functions, _ = query_functions(domain, workload)
    setting, _ = prepare(
        functions=functions, domain=domain, queries=workload, data=data[which],
        log_domain_size=float(np.log(domain.size)), epsilon=epsilon, rho=None,
        neighbours="substitute", rounds=1, step=None, sample_size=1, rows=1,
        expectations="exact", update=None, total_fraction=0.05, source=source, rng=0,
        replay=None, on_invalid="error")
    assert setting.plan is not None and setting.counts is not None
    v = _first_expectations(method, domain, workload)
    chosen, _ = select(setting.plan.selection, setting.counts.counts, v, setting.normaliser,
                       source, runs=trials)
    noisy = setting.plan.measurement.sample(setting.counts.counts[chosen], source)
    return np.stack([np.asarray(chosen, dtype=np.int64),
                     np.asarray(noisy.values, dtype=np.int64)], axis=1)


def synthesizer_case(method: str = "ipmwu", epsilon: float = 1.0,
                     end_to_end: bool = False) -> AuditCase:
    """One round of IPMWU or MWEM at ``epsilon`` (pure, substitute): vectorised (the round's
    private steps drawn for all trials at once) or ``end_to_end`` (the synthesizer called once
    per trial, ~2 ms each)."""
    algorithm = {"ipmwu": ipmwu, "mwem": mwem}.get(method)
    if algorithm is None:
        raise TesseraError(f"unknown synthesizer {method!r}", hint="ipmwu or mwem")
    key = {"ipmwu": 5, "mwem": 6}[method] + (2 if end_to_end else 0)
    domain = Domain.from_dict(SYNTH_SCHEMA)
    workload = Workload.from_sql(list(SYNTH_WORKLOAD), domain)
    data = _synth_data(domain, workload)
    probe = algorithm(domain, workload, data[0], epsilon=epsilon, rounds=1,
                      expectations="exact", rows=1, sample_size=1,
                      source=NoiseSource.seeded(0), rng=0)
    spent = probe.record.spent  # type: ignore[attr-defined]
    claim = Claim(float(spent.epsilon), 0.0, f"{spent.text()} (run record)")
    q1 = int(data[0].counts[0])
    events = (
        Event("selects a = 0", lambda y: np.asarray(y)[:, 0] == 0),
        Event(f"selects a = 0, noisy count ≥ {q1}",
              lambda y: (np.asarray(y)[:, 0] == 0) & (np.asarray(y)[:, 1] >= q1)),
        Event(f"selects a = 0, noisy count ≥ {q1 + 1}",
              lambda y: (np.asarray(y)[:, 0] == 0) & (np.asarray(y)[:, 1] >= q1 + 1)),
    )
    name = {"ipmwu": "IPMWU, one round", "mwem": "MWEM, one round"}[method]
    runner: Runner
    if end_to_end:
        name += " (end to end)"
        runner = partial(_run_synth, algorithm, key, domain, workload, data, epsilon)
    else:
        runner = partial(_run_round, method, key, domain, workload, data, epsilon)
    return AuditCase(
        name, claim, "counts (13, 21) on D₁ vs (12, 22) on D₂ of n = 40 (one row substituted)",
        runner, events, per_trial=end_to_end, secure_per_trial=True)


# -- one round of the adaptive synthesizer -----------------------------------------------------

ADAPTIVE_SCHEMA = {"attributes": {"a": {"type": "integer", "min": 0, "max": 3},
                                  "b": {"type": "integer", "min": 0, "max": 1}}}
#: cells (a, b) row-major; D₂ moves one row of D₁ from (0, 0) to (3, 1) (substitution)
ADAPTIVE_ROWS = ((9, 3, 4, 4, 4, 4, 4, 8), (8, 3, 4, 4, 4, 4, 4, 9))


def adaptive_setup(epsilon: float, planted: bool = False
                    ) -> tuple[Workload, list[Any], Any, list[Any]]:
    """The workload (the (a, b) marginal), its candidates, one round's calibration by the
    method's own :class:`~tessera.synth.schedule.Schedule` (pure ε, substitution) and the
    candidates' exact counts on D₁ and D₂. ``planted``: the add/remove sensitivities (L1 = 1,
    selection Δ = max w) used under substitution — a planted bug."""
    domain = Domain.from_dict(ADAPTIVE_SCHEMA)
    workload = Workload.of(domain, [], partitions=k_way_marginals(domain, 2))
    cands = candidates(workload)
    schedule = Schedule(SynthBudget.of(epsilon=epsilon, neighbours="substitute"),
                        1.0 if planted else 2.0, float(np.sqrt(2.0)),
                        selection_sensitivity(cands, substitute=not planted), 0.9)
    cal = schedule.round(Fraction(epsilon))
    counts = []
    for joint in ADAPTIVE_ROWS:
        table = np.asarray(joint, dtype=np.int64).reshape(4, 2)
        counts.append([table.sum(axis=tuple(k for k in range(2) if k not in c.scope)).ravel()
                       for c in cands])
    return workload, cands, cal, counts


def _run_adaptive(epsilon: float, planted: bool, which: int, trials: int,
                  seed: int | None) -> Outputs:
    """One round for all trials at once: exact scores against the uniform model (N = 40),
    the round's exponential mechanism (runs = trials), then its discrete Laplace on the
    selected marginal. Output per trial: (selected candidate, its first and last noisy cells:
    the two cells the moved row leaves and enters, in every candidate)."""
    _, cands, cal, counts = adaptive_setup(epsilon, planted)
    source = source_for(seed, 9, which)
    n = int(counts[which][0].sum())
    synthetic = [np.full(c.cells, n / c.cells) for c in cands]
    bias = [float(cal.measurement.scale) * c.cells for c in cands]
    scores = exact_scores(counts[which], synthetic, bias, [int(c.weight) for c in cands], n)
    chosen = np.asarray(cal.selection.select(scores, source, runs=trials).indices)
    ends = np.empty((trials, 2), dtype=np.int64)
    for k in range(len(cands)):
        where = np.flatnonzero(chosen == k)
        if where.size:
            values = np.repeat(counts[which][k][None, :], where.size, axis=0)
            noisy = np.asarray(cal.measurement.sample(values, source).values)
            ends[where] = noisy[:, [0, -1]]
    return np.concatenate([chosen.astype(np.int64)[:, None], ends], axis=1)


def adaptive_case(epsilon: float = 1.0, planted: bool = False) -> AuditCase:
    """One round of the adaptive synthesizer at ``epsilon`` (pure, substitution): selection
    over the candidates with the method's exact scores and sensitivity, then the discrete
    Laplace measurement of the selected marginal, calibrated by the method's own schedule.
    ``planted``: calibrated with add/remove sensitivities under substitution (a planted bug;
    the claim stays the honest one)."""
    _, cands, cal, counts = adaptive_setup(epsilon)
    claim = Claim(float(cal.cost), 0.0, "pure ε-DP: one round of the adaptive method's "
                  "schedule (selection + measurement, basic composition)")
    events = []
    for k, c in enumerate(cands):
        first, last = int(counts[0][k][0]), int(counts[0][k][-1])
        events.append(Event(f"selects {c.scope}", lambda y, k=k: np.asarray(y)[:, 0] == k))
        for t in (0, 1):
            events.append(Event(
                f"selects {c.scope}, first cell ≥ {first + t}, last ≤ {last - t}",
                lambda y, k=k, lo=first + t, hi=last - t: (np.asarray(y)[:, 0] == k)
                & (np.asarray(y)[:, 1] >= lo) & (np.asarray(y)[:, 2] <= hi)))
    return AuditCase(
        "adaptive synthesizer, one round", claim,
        "(a, b) joint counts on D₁ vs D₂: one row moved from (0, 0) to (3, 1), n = 40",
        partial(_run_adaptive, epsilon, planted), tuple(events),
        planted="add/remove sensitivities under substitution" if planted else None,
        secure_per_trial=True)
