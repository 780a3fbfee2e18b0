"""Strategies for aggregate statements: each summed quantity's linear queries measured through the
counting strategy with the least expected error, on its weighted histogram (docs/theory.md
§3.15, "Strategies for sums"; §10).

**Plan** (public inputs only: schema, workload, budget, neighbours, unit, the requested
strategy). The workload's linear queries are grouped into families that share one summed
quantity u with one clamp (:func:`tessera.strategy.sums.sum_families`; the counts are the family
of h_1). The budget B is split over the families in the proportions of the direct plan
(:mod:`.aggregate_plan`): with its shape u_q and S_f the exact worst change of family f's own
queries at costs u, family f gets B_f = B·S_f/Σ_g S_g. Each family's counting workload
(:func:`~tessera.strategy.sums.counting_workload`) is handed to the strategy chooser at the
counting budget B_f/T_f under the relation of :func:`~tessera.strategy.sums.
counting_calibration`: under add/remove T_f = M_f^p (M_f = max |clamp|, p = 1 under ε, 2 under
ρ) with the add/remove counting cost; under substitution, for a sum, T_f = 2M_f (ε), 2M_f²
(ρ, a clamp of one sign) or 4M_f² (ρ, both signs) with the add/remove counting cost, and for the
counts T = 1 with the counting substitution cost (exact: h_1 moves as a count). By the theorems
of §3.15 a counting strategy calibrated there spends at most B_f on h_u. ``direct`` (the family's
own queries at costs u·B_f/S_f: exactly the direct plan's shape) is kept unless a strategy has a
smaller expected Σ_q w_q Var_q (continuous noise model, upper bounds on the discrete variances),
ties to direct. All measured queries — every family's, as linear queries on h_u — are then
calibrated *jointly* by :func:`~.aggregate_plan.fit_to_budget`: their exact worst change (the
levels of §3.15 under add/remove and under ε substitution, the exact pair program under ρ
substitution — which T_f also bounds) rescaled to B and re-checked, so the spend rests on the
exact re-check, never on the reduction alone (Σ_f spends ≤ B, so the rescaling only lowers the
noise). Substitution needs n public: the release refuses empty data, as the direct one does.
When every family keeps direct, the plan is the direct plan, and :func:`sum_strategy_plan`
returns ``None``.

**Release**: the measured queries are exact integer sums on the engine
(:func:`~.aggregates.exact_linear`: h_u summed per measured cell), noised with OpenDP's discrete
Laplace or Gaussian, and each family's workload is read back by the strategy's generalised least
squares with the exact discrete variances (:meth:`~tessera.strategy.reconstruction.Strategy.
estimate`); an AVG is the reconstructed sum over the reconstructed count (two families: their
noises are independent), with the delta method's interval from the reconstructed variances.

Under substitution a row may move from (c, v) to (c', v'), and A h_u by v·a(c) − v'·a(c'): not
M times a counting pair (the tautology's count does not move, the total sum does), hence the
factor T_f ≥ M_f^p (docs/theory.md §3.15, "under substitution"). Residual strategies measure
marginals (not residual contrasts).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.errors import TesseraError
from tessera.mechanisms import discrete_gaussian, discrete_laplace
from tessera.mechanisms.record import MechanismRecord
from tessera.overlap.linear import power, sensitivities
from tessera.privacy import ONE_ROW, Neighbours, PrivacyUnit
from tessera.release.aggregate_certificate import (
    certificate_document,
    certified_units,
    linear_row_differences,
    spend_differences,
    verify_aggregate_certificate,
    workload_digest,
)
from tessera.release.aggregate_plan import as_scales, fit_to_budget, halfwidths, shape
from tessera.release.budget import DISCRETE_LAPLACE, Budget
from tessera.release.decimals import decimal_value
from tessera.release.exact_costs import CostBound
from tessera.release.ledger import Charge
from tessera.release.linear_costs import linear_cost_bound
from tessera.release.plan import unit_costs
from tessera.strategy.choose import STRATEGIES, TIE, choose_strategy, people_strategy
from tessera.strategy.reconstruction import Strategy, model_variance
from tessera.strategy.sums import (
    SumFamily,
    counting_calibration,
    counting_workload,
    measured_linear,
    sum_families,
)
from tessera.workload.aggregates import AggregateWorkload, LinearQuery
from tessera.workload.workload import Workload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: What the certificate says of the intervals of reconstructed answers.
INTERVAL_NOTE = ("reconstructed answers: 95% interval ±1.96 × the exact standard deviation of "
                 "the GLS estimate (normal approximation to a linear combination of independent "
                 "discrete noises; not a proven bound); directly measured: exact")


@dataclass(frozen=True, eq=False)
class FamilyChoice:
    """One family's choice: ``strategy`` None (direct: its own linear queries measured) or the
    counting strategy measured on h_u; ``budget`` B_f; ``expected``: (candidate, expected
    Σ_q w_q Var_q) of direct and of every other candidate evaluated; ``measured`` the measured
    linear queries and ``u`` their costs per unit of sensitivity before the joint fit."""

    family: SumFamily
    budget: float
    counting: Workload
    index: IntArray
    strategy: Strategy | None
    expected: tuple[tuple[str, float], ...]
    measured: tuple[LinearQuery, ...]
    u: FloatArray

    @property
    def name(self) -> str:
        return "direct" if self.strategy is None else self.strategy.name


@dataclass(frozen=True, eq=False)
class SumStrategyPlan:
    """The measured linear queries of every family (``measured``, family by family), their
    noise ``scales``, ``costs`` (per unit of sensitivity, rounded up), exact 95% noise
    ``halfwidths``, and the exact re-checked ``spent``."""

    workload: AggregateWorkload
    linear: tuple[LinearQuery, ...]
    budget: Budget
    neighbours: Neighbours
    unit: PrivacyUnit
    requested: str
    families: tuple[FamilyChoice, ...]
    measured: tuple[LinearQuery, ...]
    scales: FloatArray
    costs: FloatArray
    spent: CostBound
    halfwidths: IntArray

    @property
    def mechanism(self) -> str:
        return self.budget.mechanism

    def noise_variances(self) -> FloatArray:
        """The exact variance of every measured query's discrete noise."""
        fn = (discrete_laplace.variance if self.mechanism == DISCRETE_LAPLACE
              else discrete_gaussian.variance)
        return np.array([fn(float(s)) for s in self.scales])

    def offsets(self) -> list[int]:
        """Where each family's measured queries start (and the end)."""
        out = [0]
        for f in self.families:
            out.append(out[-1] + len(f.measured))
        return out


def sum_strategy_plan(workload: AggregateWorkload, budget: Budget, *,
                      neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
                      unit: PrivacyUnit = ONE_ROW, strategy: str = "auto",
                      time_limit: float | None = 60.0) -> SumStrategyPlan | None:
    """The plan of the module docstring; ``None`` when the workload is measured directly (the
    direct plan, :func:`~.aggregate_plan.aggregate_plan`): ``strategy`` ``direct``, or ``auto``
    where no family gains from a strategy, or counting people. Counting people, a strategy
    other than ``direct`` or ``auto`` is refused before anything is charged: it reconstructs
    a group's count or sum from other groups', and a count of people (a sum of persons'
    clamped totals) is not the sum of its parts'
    (:func:`tessera.strategy.choose.people_strategy`)."""
    if strategy not in STRATEGIES:
        raise TesseraError(f"unknown strategy {strategy!r}", hint=", ".join(STRATEGIES))
    n = Neighbours.parse(neighbours)
    if unit.counts_people:  # every group measured as it is (docs/theory.md §3.14)
        people_strategy(strategy)
        return None
    if strategy == "direct":
        return None
    d = budget.calibration
    p = power(d)
    domain = workload.cost_domain
    linear = workload.linear
    bounds = sensitivities(domain, linear)
    u = shape(workload, linear, bounds, p)
    families = sum_families(workload, bounds)
    worst = []
    for f in families:
        idx = list(f.indices)
        cb = linear_cost_bound(domain, [linear[i] for i in idx], u[idx], definition=d,
                               neighbours=n, unit=unit, time_limit=time_limit)
        worst.append(0.0 if cb is None else float(cb.bound))
    total = float(decimal_value(budget.total))
    if sum(worst) == 0:
        return None  # (the direct plan says why nothing can be calibrated)
    chosen: list[FamilyChoice] = []
    for f, s_f in zip(families, worst):
        chosen.append(_choose_family(workload, f, u, total * s_f / sum(worst), s_f, budget,
                                     n, unit, strategy, time_limit))
    if all(c.strategy is None for c in chosen):
        return None
    measured = tuple(q for c in chosen for q in c.measured)
    shape_all = np.concatenate([c.u for c in chosen])
    scales, costs, spent = fit_to_budget(domain, measured, shape_all, budget, neighbours=n,
                                         unit=unit, time_limit=time_limit)
    return SumStrategyPlan(workload, linear, budget, n, unit, strategy, tuple(chosen), measured,
                           scales, costs, spent, halfwidths(budget, scales))


def _choose_family(workload: AggregateWorkload, f: SumFamily, u: FloatArray, b_f: float,
                   s_f: float, budget: Budget, n: Neighbours, unit: PrivacyUnit, strategy: str,
                   time_limit: float | None) -> FamilyChoice:
    """Family f at budget ``b_f``: direct (costs u·B_f/S_f) against the counting strategies at
    the counting budget B_f/T under the relation of :func:`~tessera.strategy.sums.
    counting_calibration` (module docstring)."""
    idx = list(f.indices)
    own = tuple(workload.linear[i] for i in idx)
    counting, index = counting_workload(workload, f)
    if b_f <= 0 or s_f <= 0:  # nothing of this family can change: measured directly
        return FamilyChoice(f, 0.0, counting, index, None, (), own, u[idx])
    d = budget.calibration
    c_direct = u[idx] * (b_f / s_f)
    weights = np.array([lq.weight for lq in own])
    direct_total = float(weights @ model_variance(d)(as_scales(budget, c_direct)))
    factor, relation = counting_calibration(f, power(d), n)
    try:
        choice = choose_strategy(counting, d, b_f / factor, neighbours=relation,
                                 strategy=strategy, compare=strategy == "auto",
                                 estimate="model", optimise_direct=False, unit=unit,
                                 time_limit=time_limit)
    except TesseraError as e:
        raise TesseraError(f"{f.label}: {e.message}", hint=e.hint) from None
    others = [s for s in choice.candidates if s.name != "direct"]
    expected = (("direct", direct_total), *((s.name, float(s.total)) for s in others))
    best = min(others, key=lambda s: s.total, default=None)
    if strategy == "auto" and (best is None or not best.total < direct_total * (1.0 - TIE)):
        best = None
    if best is None:
        return FamilyChoice(f, b_f, counting, index, None, expected, own, c_direct)
    measured = measured_linear(f, best.measured)
    if len(measured) != len(best.scales) or not np.all(np.isfinite(best.scales)):
        raise TesseraError(f"{f.label}: strategy {best.name} measures queries without a "
                           "finite scale", hint="use --strategy direct")
    return FamilyChoice(f, b_f, counting, index, best, expected, measured,
                        unit_costs(budget, np.asarray(best.scales, dtype=np.float64)))


# -- the release ------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Reconstructed:
    """Every linear query of the workload: ``answers`` (in units), exact ``variances``, the
    exact noise ``halfwidths`` (−1: reconstructed, normal approximation) and ``scales`` (NaN:
    reconstructed)."""

    answers: FloatArray
    variances: FloatArray
    halfwidths: IntArray
    scales: FloatArray


def reconstruct(plan: SumStrategyPlan, noisy: npt.ArrayLike) -> Reconstructed:
    """The workload's linear answers from the noisy measured queries: a direct family's own
    noisy answers, a strategy family's by the strategy's GLS with the exact discrete noise
    variances (post-processing)."""
    y = np.asarray(noisy, dtype=np.float64)
    var = plan.noise_variances()
    m = len(plan.linear)
    answers, variances = np.full(m, np.nan), np.full(m, np.nan)
    half, scales = np.full(m, -1, dtype=np.int64), np.full(m, np.nan)
    off = plan.offsets()
    for k, f in enumerate(plan.families):
        sl = slice(off[k], off[k + 1])
        idx = np.asarray(f.family.indices, dtype=np.int64)
        if f.strategy is None:
            answers[idx], variances[idx] = y[sl], var[sl]
            half[idx], scales[idx] = plan.halfwidths[sl], plan.scales[sl]
            continue
        a, v = f.strategy.estimate(y[sl], var[sl])
        answers[idx], variances[idx] = a[f.index], v[f.index]
    return Reconstructed(answers, variances, half, scales)


def measured_digest(queries: tuple[LinearQuery, ...], workload: AggregateWorkload) -> str:
    """sha256 of measured linear queries (SQL, role, attribute, clamp, unit)."""
    h = hashlib.sha256()
    for q in queries:
        h.update(f"{q.role}\x1f{q.query.to_sql(workload.domain)}\x1f{q.attribute}\x1f{q.lo}"
                 f"\x1f{q.hi}\x1f{q.exponent}\x1e".encode())
    return h.hexdigest()


def strategy_section(plan: SumStrategyPlan) -> dict[str, Any]:
    """The certificate's ``strategy`` section: per family its summed quantity, budget share,
    the counting budget and relation the chooser calibrated its candidates to (B_f/T_f,
    :func:`~tessera.strategy.sums.counting_calibration`), chosen strategy, candidates' expected
    errors and measured queries' hash; then every measured query with its scale (what the spend
    is re-derived from)."""
    fams = []
    p = power(plan.budget.calibration)
    for f in plan.families:
        factor, relation = counting_calibration(f.family, p, plan.neighbours)
        fams.append({
            "family": f.family.label,
            "bound": f.family.bound,
            "linear_queries": len(f.family.indices),
            "budget": f.budget,
            "counting_budget": f.budget / factor,
            "counting_neighbours": relation.value,
            "chosen": f.name,
            "candidates": [{"strategy": s, "expected_total": t} for s, t in f.expected],
            "measured": {"sha256": measured_digest(f.measured, plan.workload),
                         "queries": len(f.measured)},
        })
    rows = []
    for k, f in enumerate(plan.families):
        for q in f.measured:
            rows.append({"family": k, "role": q.role, "attribute": q.attribute,
                         "clamp": None if q.lo is None else [q.lo, q.hi],
                         "query": q.query.to_sql(plan.workload.domain)})
    for row, s in zip(rows, plan.scales.tolist()):
        row["scale"] = float(s)
    return {"requested": plan.requested, "families": fams, "measured_queries": rows,
            "interval": INTERVAL_NOTE}


def build_certificate(plan: SumStrategyPlan, mechanism: MechanismRecord,
                      charge: Charge | None) -> dict[str, Any]:
    """The aggregate certificate (:mod:`.aggregate_certificate`) with a ``strategy`` section;
    each linear query's ``scale`` is its own when measured directly, else null (``family``
    says which family reconstructs it)."""
    rec = reconstruct_scales(plan)
    doc = certificate_document(plan, mechanism, charge, rec)
    for row, k in zip(doc["linear_queries"], family_of(plan)):
        row["family"] = k
    doc["strategy"] = strategy_section(plan)
    return doc


def reconstruct_scales(plan: SumStrategyPlan) -> list[float | None]:
    """Each linear query's own noise scale (directly measured), else None."""
    out: list[float | None] = [None] * len(plan.linear)
    off = plan.offsets()
    for k, f in enumerate(plan.families):
        if f.strategy is None:
            for i, s in zip(f.family.indices, plan.scales[off[k]:off[k + 1]].tolist()):
                out[i] = float(s)
    return out


def family_of(plan: SumStrategyPlan) -> list[int]:
    """The family of every linear query."""
    out = [0] * len(plan.linear)
    for k, f in enumerate(plan.families):
        for i in f.family.indices:
            out[i] = k
    return out


def verify_strategy_certificate(doc: dict[str, Any], workload: AggregateWorkload, *,
                                time_limit: float | None = 60.0) -> list[str]:
    """The differences between a strategy release's certificate and what the public inputs
    give (empty: it checks out): the choice recomputed (every family's strategy and measured
    queries), and the spend re-derived from the recorded scales of the measured queries alone
    (the levels' exact cost, K or K² per person), within the budget."""
    diffs: list[str] = []
    if doc.get("workload", {}).get("sha256") != workload_digest(workload):
        diffs.append("workload sha256: the certificate is for another workload or schema")
    diffs += linear_row_differences(doc.get("linear_queries", []), workload)
    section = doc["strategy"]
    budget = Budget.from_dict(doc["budget"])
    unit = (PrivacyUnit.from_dict(doc["privacy_unit"]) if doc.get("privacy_unit")
            else PrivacyUnit.of())
    n = Neighbours.parse(doc["neighbours"])
    plan = sum_strategy_plan(workload, budget, neighbours=n, unit=unit,
                             strategy=str(section.get("requested")), time_limit=time_limit)
    if plan is None:
        return [*diffs, "strategy: the recomputed choice measures every family directly"]
    stated = section.get("families", [])
    if len(stated) != len(plan.families):
        return [*diffs, f"strategy: certificate {len(stated)} families, recomputed "
                        f"{len(plan.families)}"]
    for k, (row, f) in enumerate(zip(stated, plan.families)):
        want = {"family": f.family.label, "chosen": f.name,
                "measured": {"sha256": measured_digest(f.measured, workload),
                             "queries": len(f.measured)}}
        for key, value in want.items():
            if row.get(key) != value:
                diffs.append(f"strategy family {k} ({f.family.label}): {key} "
                             f"{row.get(key)!r}, recomputed {value!r}")
    rows = section.get("measured_queries", [])
    if len(rows) != len(plan.measured):
        return [*diffs, f"strategy: certificate {len(rows)} measured queries, recomputed "
                        f"{len(plan.measured)}"]
    try:
        scales = np.array([float(r["scale"]) for r in rows])
    except (KeyError, TypeError, ValueError):
        return [*diffs, "strategy: a measured query has no numeric scale"]
    if not np.all(np.isfinite(scales) & (scales > 0)):
        return [*diffs, "strategy: a measured query's scale is not a finite number > 0"]
    return [*diffs, *spend_differences(doc, workload, plan.measured, scales, budget, n, unit,
                                       time_limit)]


def verify_release(doc: dict[str, Any], workload: AggregateWorkload, *,
                   time_limit: float | None = 60.0) -> list[str]:
    """The differences of an aggregate release's certificate, direct
    (:func:`~.aggregate_certificate.verify_aggregate_certificate`) or through strategies
    (:func:`verify_strategy_certificate`): empty when it checks out. Each measure is taken in
    the unit the certificate records (:func:`~.aggregate_certificate.certified_units`)."""
    workload = certified_units(doc, workload)
    if "strategy" in doc:
        return verify_strategy_certificate(doc, workload, time_limit=time_limit)
    return verify_aggregate_certificate(doc, workload, time_limit=time_limit)
