"""The run record of a fitted synthesizer: what ran, what it spent, what it cost (docs/synth.md).

:func:`run_record` is the JSON-ready record a run writes (``tessera synth --record``);
:func:`spent` what the run provably spent, proved from its recorded mechanisms alone;
:func:`summary` what a person needs after a run (method, budget, what the rows are fitted to,
time) and :func:`describe` the run's internals (schedule, rounds, parameters, model size).
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from tessera.accounting.guarantee import Guarantee
from tessera.accounting.zcdp import epsilon_for_delta
from tessera.mechanisms import MechanismRecord
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.software import versions
from tessera.synth.accounting import Step, prove, step_cost
from tessera.synth.charge import Target
from tessera.synth.columns import columns_record
from tessera.workload.canonical import schema_hash, sha256_of, workload_hash
from tessera.workload.sizes import counted, workload_size
from tessera.workload.workload import Workload

__all__ = [
    "ALGORITHMS",
    "RECORD_VERSION",
    "FittedRun",
    "applied_to",
    "charge_dict",
    "describe",
    "jsonable",
    "lp_record",
    "parameter_text",
    "proved_spend",
    "run_record",
    "sealed",
    "spent",
    "step_dict",
    "step_from_dict",
    "summary",
    "unit_section",
    "workload_dict",
]



class FittedRun(Protocol):
    """What the record reads of a :class:`tessera.synth.fitted.FittedSynthesizer` (which
    imports this module, so it is named by its fields here)."""

    @property
    def method(self) -> str: ...

    @property
    def private(self) -> bool: ...

    @property
    def rows(self) -> Any: ...

    workload: Workload
    result: Any
    target: Target | None
    neighbours: Neighbours
    charge: Any
    synthesizer: Any
    notes: tuple[str, ...]
    unit: PrivacyUnit


#: Version of the synthesis record's layout (``record_version``).
RECORD_VERSION = 1

ALGORITHMS = {
    "lp": "LP approach (Ghazi et al. §3; column generation), post-processing of a private release",
}


def spent(fitted: FittedRun) -> list[Guarantee]:
    """What the run provably spent, from its recorded mechanisms alone (:func:`proved_spend`).
    For ``lp``: empty (the release's guarantees are in :func:`run_record`)."""
    if fitted.method == "lp":
        return []
    assert fitted.target is not None
    r = fitted.result.record
    return proved_spend(r.steps, r.spent.definition, r.neighbours, fitted.target.deltas,
                        fitted.unit)


def proved_spend(steps: Sequence[Step], definition: Definition, neighbours: Neighbours,
                 deltas: Sequence[float], unit: PrivacyUnit = ONE_ROW) -> list[Guarantee]:
    """Pure ε (a pure run), ρ-zCDP (always) and (ε, δ) at ``deltas`` of a run whose mechanisms
    were ``steps``: :func:`tessera.synth.accounting.prove` of the steps, and the CKS20
    conversion of its ρ (or the pure ε where smaller). :func:`tessera.synth.verify.verify_record`
    recomputes it from a record's steps alone. ``unit``: what the steps' sensitivities are a
    change of (a person's: K times a row's), named by every guarantee."""
    out = []
    pure = None
    if definition is Definition.PURE:
        pure = prove(steps, Definition.PURE, neighbours, unit)
        out.append(pure)
    z = prove(steps, Definition.ZCDP, neighbours, unit)
    out.append(z)
    rho = float(z.rho or 0.0)
    for delta in deltas:
        eps = _epsilon_for_delta(rho, delta)
        note = "from ρ-zCDP (CKS20 Cor. 13)"
        if pure is not None and float(pure.epsilon or 0.0) <= eps:
            eps, note = float(pure.epsilon or 0.0), "implied by pure ε-DP"
        out.append(Guarantee.approx(eps, delta, neighbours, basis="upper bound", note=note,
                                    unit=unit))
    return out


@functools.lru_cache(maxsize=1024)
def _epsilon_for_delta(rho: float, delta: float) -> float:
    """:func:`tessera.accounting.zcdp.epsilon_for_delta`, memoised (a pure function of two
    floats; a verifier recomputes the same conversions for every record it checks)."""
    return epsilon_for_delta(rho, delta)


def step_dict(step: Step, definition: Definition, applied_to: dict[str, Any]) -> dict[str, Any]:
    """One mechanism that ran, as the record lists it: role, round, what it was applied to,
    the mechanism (name, definition, noise parameter and its value, private or seeded), the
    sensitivity of what it read, and its cost in the run's definition
    (:func:`tessera.synth.accounting.step_cost`)."""
    m = step.mechanism
    key = "epsilon" if definition is Definition.PURE else "rho"
    return {"role": step.role, "round": step.round, "applied_to": applied_to,
            "mechanism": {"name": m.name, "definition": m.definition.value,
                          "parameter": m.parameter, "value": m.value, "private": m.private},
            "sensitivity": step.sensitivity,
            "cost": {key: step_cost(step, definition)}}


def step_from_dict(d: dict[str, Any]) -> Step:
    """The :class:`~tessera.synth.accounting.Step` a :func:`step_dict` describes."""
    m = d["mechanism"]
    rec = MechanismRecord(str(m["name"]), Definition(m["definition"]), str(m["parameter"]),
                          None if m["value"] is None else float(m["value"]), bool(m["private"]))
    return Step(str(d["role"]), int(d["round"]), rec, float(d["sensitivity"]))


def applied_to(fitted: FittedRun) -> list[dict[str, Any]]:
    """What each recorded step read, in step order: the total, a selection over the
    candidates, a query's count (its index in the workload's expanded order) or a marginal
    (its attributes; a coarsened one also its groups: per attribute, each code's group)."""
    r = fitted.result.record
    names = fitted.workload.domain.names
    if fitted.method == "adaptive":
        measured = iter(fitted.result.measurements)
        out = []
        for s in r.steps:
            if s.role == "selection":
                out.append({"selection": "candidates"})
                continue
            g = next(measured)
            if g.query is not None:
                out.append({"query": int(g.query)})
                continue
            target: dict[str, Any] = {"marginal": [names[i] for i in g.scope]}
            if g.groups is not None:  # coarsened: each attribute's code → group map
                target["groups"] = {names[a]: list(m) for a, m in zip(g.scope, g.groups,
                                                                      strict=True)}
            out.append(target)
        return out
    selections = r.transcript.selections
    out = []
    for s in r.steps:
        if s.role == "total":
            out.append({"total": "TRUE"})
        elif s.role == "selection":
            out.append({"selection": "queries"})
        else:
            out.append({"query": int(selections[s.round - 1])})
    return out


def run_record(fitted: FittedRun) -> dict[str, Any]:
    """JSON-ready: method and algorithm, the software that ran (versions of Tessera, OpenDP,
    dp-accounting and Python: :func:`tessera.software.versions`), privacy (budget asked, what
    the run is calibrated as, spent in every definition, what is not proven), parameters,
    timings, the model's width, the rows and the ledger's charge."""
    ledger = charge_dict(fitted.charge)
    if fitted.method == "lp":
        return sealed(lp_record(fitted, ledger))
    assert fitted.target is not None
    r = fitted.result.record
    t = r.timings
    params = dataclasses.asdict(r.parameters)
    params["defaulted"] = list(params["defaulted"])
    for key in ("columns", "uniform_columns"):  # the adaptive method's outside columns
        if key in params:
            params[key] = list(params[key])
    params["options"] = {k: jsonable(v) for k, v in fitted.synthesizer.options}
    if params.get("answer_memory") is not None:  # the selection's answerability constraint
        params["withheld"] = {str(rnd): n for rnd, n in
                              {h.round: h.withheld for h in r.history}.items() if n}
    not_proven = []
    if fitted.target.asked.get("definition") == Definition.GDP.value:
        not_proven.append({"definition": Definition.GDP.value, "mu": fitted.target.asked["mu"],
                           "reason": "discrete mechanisms: ρ = μ²/2-zCDP is proven, "
                                     "μ-GDP is only the target"})
    out = {
        "method": fitted.method,
        "algorithm": r.algorithm,
        "software": versions(),
        "private": fitted.private,
        "randomness": r.source,
        "neighbours": fitted.neighbours.value,
        **unit_section(fitted.unit),
        "schema": {"sha256": schema_hash(fitted.workload.domain)},
        "budget": {
            "asked": fitted.target.asked,
            "calibrated_as": {"definition": fitted.target.definition.value,
                              ("epsilon" if fitted.target.definition is Definition.PURE
                               else "rho"): fitted.target.value},
            "notes": list(fitted.target.notes),
        },
        "spent": [g.to_dict() for g in spent(fitted)],
        "not_proven": not_proven,
        "mechanisms": len(r.steps),
        "steps": [step_dict(s, r.spent.definition, a)
                  for s, a in zip(r.steps, applied_to(fitted), strict=True)],
        "parameters": params,
        "timings": {"setup": t.setup, "rounds": sum(t.rounds), "mean_round": t.mean_round,
                    "output": t.output, "total": t.total, "n_rounds": len(t.rounds),
                    **({"fit": t.fit} if hasattr(t, "fit") else {})},
        "width": r.width,
        "rows": int(fitted.rows.shape[0]),
        "workload": workload_dict(fitted.workload),
        "columns": columns_record(fitted.workload, *(
            (r.parameters.columns, r.parameters.columns_share)
            if fitted.method == "adaptive" else ())),
        "ledger": ledger,
    } | ({"notes": list(fitted.notes)} if fitted.notes else {})
    return sealed(out)


def sealed(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its version first and its ``digest`` last: SHA-256 of the canonical JSON
    of every other field (an integrity check any edit breaks; anyone can recompute it, so it is
    not a signature — docs/certificate.md)."""
    body = {"record_version": RECORD_VERSION, **{k: v for k, v in record.items()
                                                 if k not in ("record_version", "digest")}}
    return body | {"digest": sha256_of(body)}


def lp_record(fitted: FittedRun, ledger: dict[str, Any] | None) -> dict[str, Any]:
    res = fitted.result
    rec = res.record()  # type: ignore[union-attr]
    privacy = rec.pop("privacy")
    timings = rec.pop("timings")
    return {
        "method": "lp",
        "algorithm": ALGORITHMS["lp"],
        "software": versions(),
        "private": fitted.private,
        "randomness": privacy.get("randomness"),
        "neighbours": fitted.neighbours.value,
        **unit_section(fitted.unit),
        "schema": {"sha256": schema_hash(fitted.workload.domain)},
        "budget": {"asked": privacy.get("budget"), "calibrated_as": privacy.get("calibration"),
                   "notes": list(fitted.notes)},
        "spent": privacy.get("guarantees", []),
        "spent_basis": privacy.get("basis"),
        "not_proven": [],
        "parameters": {"options": {k: jsonable(v) for k, v in fitted.synthesizer.options},
                       "n": privacy.get("n")},
        "lp": {k: jsonable(v) for k, v in rec.items()},
        "timings": {k: float(v) for k, v in timings.items()},
        "width": rec.get("width"),
        "rows": int(fitted.rows.shape[0]),
        "workload": workload_dict(fitted.workload),
        "columns": columns_record(fitted.workload),
        "ledger": ledger,
        "release_certificate": privacy.get("certificate"),
    }


def unit_section(unit: PrivacyUnit) -> dict[str, Any]:
    """A record's ``privacy_unit`` (only for a person: the id column's name, never its values,
    and K; every step's sensitivity is then K times a row's, docs/theory.md §3.13)."""
    if unit.is_row:
        return {}
    return {"privacy_unit": unit.to_dict() | {
        "sensitivities": "every mechanism's sensitivity is K times a row's (a person's at "
                         "most K kept rows)"}}


def describe(fitted: FittedRun) -> str:
    """A few lines for a terminal."""
    if fitted.method == "lp":
        rec = run_record(fitted)
        lp = rec["lp"]
        lines = [rec["algorithm"],
                 f"α = {lp['alpha']:.6g}, lower bound {lp['lower_bound']:.6g}, gap "
                 f"{lp['gap']:.3g} ({lp['status']}), {lp['iterations']} iterations, "
                 f"{lp['support']} support points, width {lp['width']}",
                 f"rows: {rec['rows']:,} (within {lp['rows_within']:.3g} of the release's "
                 f"answers w.p. ≥ {1 - lp['failure']:g})"]
        lines += [f"privacy: {g.get('definition')} {parameter_text(g)} (post-processing of "
                  "the release)" for g in rec["spent"]]
        if rec["columns"]["uniform"]:
            lines.append("columns outside the workload left UNIFORMLY RANDOM "
                         f"(uniform_columns): {', '.join(rec['columns']['uniform'])}")
        lines += list(fitted.notes)
    else:
        lines = [fitted.result.record.describe()]
        if fitted.method != "adaptive":  # the adaptive record's own lines say it
            uniform = columns_record(fitted.workload)["uniform"]
            if uniform:
                lines.append("columns outside the workload left UNIFORMLY RANDOM "
                             f"(uniform_columns): {', '.join(uniform)}")
        lines += [f"spent: {g.text()}" for g in spent(fitted)
                  if g.definition is Definition.APPROX]
        assert fitted.target is not None
        lines += list(fitted.target.notes)
    if not fitted.private and fitted.method == "lp":  # the run record's own text says it
        lines.append("NOT PRIVATE: seeded test randomness")
    return "\n".join(lines)


def summary(fitted: FittedRun, seconds: float | None = None, output: Any = None) -> str:
    """A few lines for the person who ran it: the method, the budget and what the run provably
    spent (with the caveats of its target), what the rows were fitted to, how many rows (and
    where: ``output``) and the time (``seconds``, else the run's own from its record). The
    internals — the schedule, the rounds, the model's size, every parameter — are in the run
    record (:func:`run_record`) and :func:`describe`."""
    rec = run_record(fitted)
    w = fitted.workload
    over = f"{workload_size(w)} over {counted(len(w.domain.names), 'attribute')}"
    lines = [f"method: {rec['algorithm']}"]
    if fitted.method == "lp":
        lp = rec["lp"]
        first = rec["spent"][:1]  # the release's own definition; (ε, δ) only if it is not pure
        shown = first + [g for g in rec["spent"][1:] if first and first[0].get("definition") !=
                         Definition.PURE.label and g.get("definition") == Definition.APPROX.label]
        lines += [f"privacy: {g.get('definition')} {parameter_text(g)} (post-processing of "
                  "the release)" for g in shown]
        lines.append(f"fitted to: the private release's answers to {over}; the rows' answers "
                     f"are within {lp['rows_within']:.3g} of them (fractions of the rows) with "
                     f"probability ≥ {1 - lp['failure']:g}")
        lines += list(fitted.notes)
    else:
        r = fitted.result.record
        if r.budget is None:  # a replay of a transcript spends nothing new
            lines.append(f"replay of a transcript (post-processing): {r.spent.text()}")
        else:
            lines.append(f"budget: {r.budget.text()}")
            lines.append(f"spent: {r.spent.text()}")
        if r.spent.definition is not Definition.PURE:  # pure ε already is (ε, 0)-DP
            lines += [f"spent: {g.text()}" for g in spent(fitted)
                      if g.definition is Definition.APPROX]
        lines += list(fitted.target.notes)
        lines.append(f"fitted to: {over}; {measured_text(fitted)}")
    if rec["columns"]["uniform"]:  # what the rows do NOT model
        lines.append("columns outside the workload left UNIFORMLY RANDOM: "
                     f"{', '.join(rec['columns']['uniform'])}")
    rows = f"{rec['rows']:,} rows"
    lines.append(f"rows: {output} ({rows})" if output is not None else f"rows: {rows}")
    total = seconds if seconds is not None else rec["timings"].get("total")
    if total is not None:
        lines.append(f"time: {total:.3g} s")
    return "\n".join(lines)


def measured_text(fitted: FittedRun) -> str:
    """What the run measured with noise, in words: the adaptive method's marginals by size
    (and any wide queries), or the workload queries IPMWU / MWEM selected over their rounds."""
    res: Any = fitted.result
    if fitted.method == "adaptive":
        scopes = {m.scope for m in res.measurements if m.query is None}
        wide = {m.query for m in res.measurements if m.query is not None}
        sizes = sorted(Counter(len(s) for s in scopes).items())
        words = {1: "one", 2: "two", 3: "three", 4: "four"}
        parts = [f"{n:,} {words.get(k, k)}-way" for k, n in sizes]
        text = ("measured " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1
                               else "".join(parts))
                + (" marginal" if len(scopes) == 1 else " marginals")) if parts else "measured"
        if wide:
            text += f"{' and' if parts else ''} {counted(len(wide), 'wide query', 'wide queries')}"
        return text
    r = res.record
    chosen = len(set(r.transcript.selections.tolist()))
    return (f"measured {counted(chosen, 'workload query', 'workload queries')} over "
            f"{counted(len(r.transcript.selections), 'round')}")


def parameter_text(g: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {g[k]:.6g}" for k in ("epsilon", "delta", "rho", "mu") if k in g)


def jsonable(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return repr(v)


def charge_dict(charge: Any) -> dict[str, Any] | None:
    if charge is None:
        return None
    if dataclasses.is_dataclass(charge) and not isinstance(charge, type):
        return {k: jsonable(v) for k, v in dataclasses.asdict(charge).items()}
    return {"release_id": str(getattr(charge, "release_id", charge))}


def workload_dict(w: Workload) -> dict[str, Any]:
    return {"sha256": workload_hash(w), "queries": w.n_queries,
            "predicate_queries": len(w.queries),
            "families": [p.name for p in w.partitions]}


