"""The run record of a fitted synthesizer: what ran, what it spent, what it cost (docs/synth.md).

:func:`run_record` is the JSON-ready record a run writes (``tessera synth --record``);
:func:`spent` what the run provably spent, proved from its recorded mechanisms alone;
:func:`describe` a few lines for a terminal.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

import numpy as np

from tessera.accounting.guarantee import Guarantee
from tessera.accounting.zcdp import epsilon_for_delta
from tessera.privacy import Definition, Neighbours
from tessera.synth.charge import Target
from tessera.workload.workload import Workload

__all__ = [
    "ALGORITHMS",
    "FittedRun",
    "charge_dict",
    "describe",
    "jsonable",
    "lp_record",
    "parameter_text",
    "run_record",
    "spent",
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


ALGORITHMS = {
    "lp": "LP approach (Ghazi et al. §3; column generation), post-processing of a private release",
}


def spent(fitted: FittedRun) -> list[Guarantee]:
    """What the run provably spent, from its recorded mechanisms alone: pure ε (pure runs),
    ρ-zCDP (always) and (ε, δ) at :attr:`Target.deltas`. For ``lp``: empty (the release's
    guarantees are in :meth:`run_record`)."""
    if fitted.method == "lp":
        return []
    assert fitted.target is not None
    r = fitted.result.record
    out = []
    pure = None
    if r.spent.definition is Definition.PURE:
        pure = r.proved(Definition.PURE)
        out.append(pure)
    z = r.proved(Definition.ZCDP)
    out.append(z)
    rho = float(z.rho or 0.0)
    for delta in fitted.target.deltas:
        eps = epsilon_for_delta(rho, delta)
        note = "from ρ-zCDP (CKS20 Cor. 13)"
        if pure is not None and float(pure.epsilon or 0.0) <= eps:
            eps, note = float(pure.epsilon or 0.0), "implied by pure ε-DP"
        out.append(Guarantee.approx(eps, delta, r.neighbours, basis="upper bound",
                                    note=note))
    return out


def run_record(fitted: FittedRun) -> dict[str, Any]:
    """JSON-ready: method and algorithm, privacy (budget asked, what the run is calibrated
    as, spent in every definition, what is not proven), parameters, timings, the model's
    width, the rows and the ledger's charge."""
    ledger = charge_dict(fitted.charge)
    if fitted.method == "lp":
        return lp_record(fitted, ledger)
    assert fitted.target is not None
    r = fitted.result.record
    t = r.timings
    params = dataclasses.asdict(r.parameters)
    params["defaulted"] = list(params["defaulted"])
    params["options"] = {k: jsonable(v) for k, v in fitted.synthesizer.options}
    not_proven = []
    if fitted.target.asked.get("definition") == Definition.GDP.value:
        not_proven.append({"definition": Definition.GDP.value, "mu": fitted.target.asked["mu"],
                           "reason": "discrete mechanisms: ρ = μ²/2-zCDP is proven, "
                                     "μ-GDP is only the target"})
    return {
        "method": fitted.method,
        "algorithm": r.algorithm,
        "private": fitted.private,
        "randomness": r.source,
        "neighbours": fitted.neighbours.value,
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
        "parameters": params,
        "timings": {"setup": t.setup, "rounds": sum(t.rounds), "mean_round": t.mean_round,
                    "output": t.output, "total": t.total, "n_rounds": len(t.rounds),
                    **({"fit": t.fit} if hasattr(t, "fit") else {})},
        "width": r.width,
        "rows": int(fitted.rows.shape[0]),
        "workload": workload_dict(fitted.workload),
        "ledger": ledger,
    }


def lp_record(fitted: FittedRun, ledger: dict[str, Any] | None) -> dict[str, Any]:
    res = fitted.result
    rec = res.record()  # type: ignore[union-attr]
    privacy = rec.pop("privacy")
    timings = rec.pop("timings")
    return {
        "method": "lp",
        "algorithm": ALGORITHMS["lp"],
        "private": fitted.private,
        "randomness": privacy.get("randomness"),
        "neighbours": fitted.neighbours.value,
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
        "ledger": ledger,
    }


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
        lines += list(fitted.notes)
    else:
        lines = [fitted.result.record.describe()]
        lines += [f"spent: {g.text()}" for g in spent(fitted)
                  if g.definition is Definition.APPROX]
        assert fitted.target is not None
        lines += list(fitted.target.notes)
    if not fitted.private and fitted.method == "lp":  # the run record's own text says it
        lines.append("NOT PRIVATE: seeded test randomness")
    return "\n".join(lines)


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
    return {"queries": w.n_queries, "predicate_queries": len(w.queries),
            "families": [p.name for p in w.partitions]}


