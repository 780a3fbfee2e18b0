"""The certificate of an aggregate release, and its re-check from the workload alone
(docs/aggregates.md; the proof is docs/theory.md §3.15).

The certificate records, for every linear query, where it comes from (statement, group,
aggregate, role), its value bounds (the clamp [lo, hi] and M = max |g|; counting people, what
one person moves it, D = max(|lo|, |hi|) or 1) and its noise scale.
:func:`verify_aggregate_certificate` re-reads the workload and schema, expands the same linear
queries, checks that their bounds match, and re-derives the spend from the recorded scales
alone: costs 1/b or 1/(2σ²) rounded up, the levels' exact weighted overlap, K or K² per person
— or, each person counted once per query, the coverage of K records with the scores c·D^p
(docs/theory.md §3.14).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.accounting.zcdp import epsilon_for_delta
from tessera.errors import QueryError
from tessera.mechanisms.record import MechanismRecord
from tessera.privacy import ONE_ROW, Neighbours, PrivacyUnit
from tessera.release.aggregate_plan import AggregatePlan, linear_bounds
from tessera.release.budget import Budget
from tessera.release.decimals import decimal_value
from tessera.release.ledger import Charge
from tessera.release.linear_costs import linear_cost_bound
from tessera.release.plan import unit_costs
from tessera.workload.aggregates import AggregateWorkload, LinearQuery

#: The ``format`` field of an aggregate certificate.
FORMAT = "tessera-aggregate-certificate"


def workload_digest(workload: AggregateWorkload) -> str:
    """sha256 of the linear queries as the schema reads them (label, SQL, clamp)."""
    h = hashlib.sha256()
    for (st, group, agg, role), lq in zip(workload.labels(), workload.linear):
        unit = "" if lq.exponent is None else f"\x1f1e{lq.exponent}"
        h.update(f"{st}\x1f{group}\x1f{agg}\x1f{role}\x1f{lq.query.to_sql(workload.domain)}"
                 f"\x1f{lq.attribute}\x1f{lq.lo}\x1f{lq.hi}{unit}\x1e".encode())
    return h.hexdigest()


def build_aggregate_certificate(plan: AggregatePlan, mechanism: MechanismRecord,
                                charge: Charge | None) -> dict[str, Any]:
    """The JSON-ready certificate (module docstring)."""
    return certificate_document(plan, mechanism, charge, [float(s) for s in plan.scales])


def certificate_document(plan: Any, mechanism: MechanismRecord, charge: Charge | None,
                         scales: list[float | None]) -> dict[str, Any]:
    """The certificate of ``plan`` (an :class:`AggregatePlan`, or a strategy plan of
    :mod:`.sum_strategy`) with each linear query's noise scale (None: not measured itself)."""
    w = plan.workload
    rows = []
    bounds = linear_bounds(w.cost_domain, plan.linear, plan.unit).tolist()
    for (st, group, agg, role), lq, s, m in zip(w.labels(), plan.linear, scales, bounds):
        row = {"statement": st, "group": group, "aggregate": agg, "role": role,
               "attribute": lq.attribute,
               "clamp": None if lq.lo is None else [lq.lo, lq.hi],
               "bound": int(m), "scale": s}
        if lq.exponent is not None:  # a measure: clamp, bound and scale are in units of 10^e
            row["measure"] = {"unit": f"1e{lq.exponent}", "exponent": lq.exponent}
        rows.append(row)
    doc: dict[str, Any] = {
        "format": FORMAT,
        "version": 1,
        "private": mechanism.private,
        "budget": plan.budget.to_dict(),
        "neighbours": plan.neighbours.value,
        "privacy_unit": None if plan.unit.is_row else plan.unit.to_dict(),
        "mechanism": plan.mechanism,
        "workload": {"sha256": workload_digest(w), "statements": len(w.statements),
                     "linear_queries": len(plan.linear)},
        "linear_queries": rows,
        "spent": {"value": plan.spent.bound, "exact": plan.spent.exact,
                  "guarantee": _guarantee(plan)},
    }
    if charge is not None:
        doc["ledger"] = {"release_id": charge.release_id, "seq": charge.seq,
                         "label": charge.label}
    return doc


def _guarantee(plan: Any) -> str:
    unit = plan.unit.label(plan.neighbours)
    units = (" (measures in units of their resolution)" if plan.workload.measures else "")
    if plan.mechanism == "discrete_laplace":
        return (f"pure ε-DP with ε = {plan.spent.bound:.6g} ({unit}; discrete Laplace on "
                f"integer sums{units} and counts)")
    text = (f"ρ-zCDP with ρ = {plan.spent.bound:.6g} ({unit}; discrete Gaussian on integer "
            f"sums{units} and counts, CKS20)")
    delta = plan.budget.delta
    if delta is not None:  # the (ε, δ) target: implied by ρ-zCDP (CKS20 Cor. 13)
        eps = epsilon_for_delta(plan.spent.bound, float(delta))
        text += f", hence (ε, δ)-DP with ε = {eps:.6g}, δ = {float(delta):g}"
    return text


def certified_units(doc: dict[str, Any], workload: AggregateWorkload) -> AggregateWorkload:
    """``workload`` with each measure summed in the unit its certificate records: a release
    charged to a ledger sums a measure in the ledger's unit, not always its own
    (docs/aggregates.md, "Measures"; docs/theory.md §3.15). Unchanged when they agree, or when
    the bounds cannot take the recorded unit (the rows' comparison then reports it)."""
    units: dict[str, int] = {}
    for row in doc.get("linear_queries", []):
        m = row.get("measure") if isinstance(row, dict) else None
        if (isinstance(m, dict) and isinstance(row.get("attribute"), str)
                and isinstance(m.get("exponent"), int)):
            units.setdefault(row["attribute"], m["exponent"])
    fixed = {a: e for a, e in units.items() if workload.measures.get(a) not in (None, e)}
    if not fixed:
        return workload
    try:
        return workload.at_resolutions(fixed)
    except QueryError:
        return workload


def read_aggregate_certificate(path: str | Path) -> dict[str, Any] | None:
    """The certificate at ``path`` if it is an aggregate release's, else ``None`` (another
    kind, or not JSON: the other readers say what is wrong)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("format") == FORMAT else None


def verify_aggregate_certificate(doc: dict[str, Any], workload: AggregateWorkload, *,
                                 time_limit: float | None = 60.0) -> list[str]:
    """The differences between ``doc`` and what the workload and schema give (empty: it
    checks out): the linear queries and their bounds, the spend re-derived from the scales,
    and that it is within the budget."""
    if "strategy" in doc:  # measured through strategies (docs/theory.md §3.15)
        return ["the certificate is a strategy release's: check it with "
                "tessera.release.sum_strategy.verify_release (tessera verify does)"]
    diffs: list[str] = []
    rows = doc.get("linear_queries", [])
    linear = workload.linear
    if doc.get("workload", {}).get("sha256") != workload_digest(workload):
        diffs.append("workload sha256: the certificate is for another workload or schema")
    if len(rows) != len(linear):
        return [*diffs, f"linear queries: certificate {len(rows)}, workload {len(linear)}"]
    budget = Budget.from_dict(doc["budget"])
    unit = (PrivacyUnit.from_dict(doc["privacy_unit"]) if doc.get("privacy_unit")
            else PrivacyUnit.of())
    diffs += linear_row_differences(rows, workload, unit)
    try:
        scales = np.array([float(r["scale"]) for r in rows])
    except (KeyError, TypeError, ValueError):
        return [*diffs, "linear queries: a scale is missing or not a number (a strategy "
                        "release's certificate has a 'strategy' section)"]
    return [*diffs, *spend_differences(doc, workload, linear, scales, budget,
                                       Neighbours.parse(doc["neighbours"]), unit, time_limit)]


def spend_differences(doc: dict[str, Any], workload: AggregateWorkload,
                      measured: Sequence[LinearQuery], scales: npt.NDArray[np.float64],
                      budget: Budget, neighbours: Neighbours, unit: PrivacyUnit,
                      time_limit: float | None) -> list[str]:
    """The spend re-derived from the measured linear queries' scales (their exact weighted
    cost, docs/theory.md §3.15): a difference when it exceeds the budget or the spend the
    certificate records."""
    cb = linear_cost_bound(workload.cost_domain, measured, unit_costs(budget, scales),
                           definition=budget.calibration, neighbours=neighbours, unit=unit,
                           time_limit=time_limit, threshold=decimal_value(budget.total))
    spent = 0.0 if cb is None else cb.bound
    out = []
    if cb is not None and cb.value > decimal_value(budget.total):
        out.append(f"spent: re-derived {spent!r} exceeds the budget {budget.total!r}")
    recorded = doc.get("spent", {}).get("value")
    if recorded is None or spent > float(recorded):
        out.append(f"spent: re-derived {spent!r}, certificate {recorded!r}")
    return out


def linear_row_differences(rows: list[Any], workload: AggregateWorkload,
                           unit: PrivacyUnit = ONE_ROW) -> list[str]:
    """Where the certificate's linear query rows differ from the workload's: their number,
    measure units, clamps and bounds (M_q of ``unit``: a row's, or a person's counted once
    per query)."""
    linear = workload.linear
    if len(rows) != len(linear):
        return [f"linear queries: certificate {len(rows)}, workload {len(linear)}"]
    diffs: list[str] = []
    bounds = linear_bounds(workload.cost_domain, linear, unit).tolist()
    for i, (row, lq, bound) in enumerate(zip(rows, linear, bounds)):
        clamp = None if lq.lo is None else [lq.lo, lq.hi]
        unit = None if lq.exponent is None else {"unit": f"1e{lq.exponent}",
                                                 "exponent": lq.exponent}
        if row.get("measure") != unit:
            diffs.append(f"linear query {i} ({row.get('statement')!r}, {row.get('aggregate')}): "
                         f"measure unit {row.get('measure')} differs from the workload's {unit}")
        if row.get("clamp") != clamp or row.get("bound") != bound:
            diffs.append(f"linear query {i} ({row.get('statement')!r}, {row.get('aggregate')}): "
                         f"value bounds {row.get('clamp')}/{row.get('bound')} differ from the "
                         f"workload's {clamp}/{bound}")
    return diffs
