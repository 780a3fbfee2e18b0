"""Re-prove a synthesis run's spend from its record alone (docs/synth.md "Verifying a record").

``tessera verify run.json WORKLOAD --schema S`` reads a run record written by ``tessera synth
--record`` (:func:`tessera.synth.record.run_record`) and checks, from the record, the schema and
the workload only — no data, no code of the run:

1. the ``digest`` (SHA-256 of the canonical JSON of every other field): any edit shows;
2. the schema's and the workload's hashes are those of the files given;
3. the budget: what the run is calibrated in follows from what was asked (ε → pure ε; ρ → ρ;
   (ε, δ) → the largest ρ whose CKS20 conversion gives it; μ → ρ = μ²/2);
4. every mechanism: the sensitivity it was applied with is the one its target has (a count:
   1 under both relations; a marginal under substitution: L1 2, L2 √2; K times that for a
   record made for one person, its ``privacy_unit``; a selection's scores: 1
   in count units, the exponential mechanism's ε already covering the scores' sensitivity), its
   target exists in the workload (a query index, a candidate marginal, or the one-way marginal
   of an attribute outside the workload, which the adaptive method measures so that every
   column is modelled: the record's ``columns`` names exactly those, with their exact share of
   the budget), and its cost is the
   mechanism's own privacy map of its recorded parameter and sensitivity
   (:func:`tessera.synth.accounting.step_cost`); IPMWU and MWEM ran exactly 2T steps (+ the total
   under add/remove);
5. the spend: the exact sum of those costs (basic composition for pure ε, additivity of ρ) and its
   (ε, δ) conversions equal the record's ``spent``, within the calibrated budget, and every
   mechanism used private randomness (a seeded, NOT PRIVATE run does not verify, as for release
   certificates);
6. for ``lp``: the embedded release certificate checks out against the workload (with the
   tautology ``TRUE`` when the record says it was added) by the release layer's own verifier,
   passed in (:func:`tessera.release.certificate.verify_certificate`; this layer does not import
   it), and the record's spend and budget are the certificate's.

What it does not prove: that the rows belong to this record (sign both for that), or that the
selection scores were computed as the method says (their sensitivity is a property of the method,
stated here, not something a record can show).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from tessera.accounting.zcdp import rho_for_epsilon_delta
from tessera.errors import TesseraError
from tessera.privacy import Definition, Neighbours, PrivacyUnit
from tessera.synth.accounting import step_cost
from tessera.synth.candidates import candidates, outside_attributes
from tessera.synth.charge import REPORTED_DELTAS
from tessera.synth.record import RECORD_VERSION, proved_spend, step_from_dict
from tessera.synth.synthesizer import with_tautology
from tessera.workload.canonical import schema_hash, sha256_of, workload_hash
from tessera.workload.workload import Workload

__all__ = ["RTOL", "RecordVerification", "is_run_record", "read_record", "verify_record"]

#: Relative tolerance for a recomputed float against the record's (the JSON round trip is exact;
#: this only absorbs a different but equally valid float evaluation order).
RTOL = 1e-12


@dataclass(frozen=True)
class RecordVerification:
    """The outcome of :func:`verify_record`: ``differences`` empty iff it checks out."""

    differences: tuple[str, ...]
    steps: int = 0

    @property
    def ok(self) -> bool:
        return not self.differences


def is_run_record(doc: Any) -> bool:
    """Whether a JSON document is a synthesis run record (not a release certificate)."""
    return isinstance(doc, dict) and "record_version" in doc and "method" in doc


def read_record(path: str | Path) -> dict[str, Any]:
    """A run record from its JSON file (a clear error for anything else)."""
    import json

    p = Path(path)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TesseraError(f"cannot read the run record: {e}", where=str(p)) from None
    if not is_run_record(doc) or doc.get("record_version") != RECORD_VERSION:
        raise TesseraError(f"not a Tessera synthesis record of version {RECORD_VERSION}",
                           where=str(p), hint="tessera synth --record run.json writes one")
    return doc


def _close(a: Any, b: float) -> bool:
    return (isinstance(a, (int, float)) and not isinstance(a, bool)
            and math.isclose(float(a), b, rel_tol=RTOL, abs_tol=0.0))


def _calibrated(asked: dict[str, Any]) -> tuple[Definition, float]:
    """What a run asked for is calibrated as (module docs, item 3)."""
    d = Definition(asked["definition"])
    if d is Definition.PURE:
        return d, float(asked["epsilon"])
    if d is Definition.ZCDP:
        return d, float(asked["rho"])
    if d is Definition.APPROX:
        return Definition.ZCDP, _rho_for(float(asked["epsilon"]), float(asked["delta"]))
    if d is Definition.GDP:
        return Definition.ZCDP, float(asked["mu"]) ** 2 / 2
    raise TesseraError(f"a run is not calibrated in {d.label}")


@functools.lru_cache(maxsize=256)
def _rho_for(epsilon: float, delta: float) -> float:
    return float(rho_for_epsilon_delta(epsilon, delta))  # memoised: every record re-asks it


def _expected_sensitivity(method: str, step: dict[str, Any], substitute: bool,
                          definition: Definition, unit: PrivacyUnit) -> float:
    """A row's sensitivity of what the step read, times K for a person (docs/theory.md §3.13:
    a person's ≤ K kept rows move every count K times as far); a selection's recorded
    sensitivity is 1 (its ε covers the scores', whose Δ is K times a row's for a person)."""
    target = step.get("applied_to", {})
    if step["role"] == "selection":
        return 1.0
    k = float(unit.max_rows)
    if step["role"] == "measurement" and "marginal" in target:
        if not substitute:
            return k
        return k * (2.0 if definition is Definition.PURE else math.sqrt(2.0))
    return k  # a count (query or total)


def verify_record(
    record: dict[str, Any], workload: Workload, *,
    verify_certificate: Callable[..., Any] | None = None,
) -> RecordVerification:
    """Re-prove a run record's spend from the record, the schema and the workload (module
    docs); every difference named by its field."""
    diffs: list[str] = []
    body = {k: v for k, v in record.items() if k != "digest"}
    if record.get("digest") != sha256_of(body):
        diffs.append("digest: the record was edited after it was made")
    if record.get("schema", {}).get("sha256") != schema_hash(workload.domain):
        diffs.append("schema.sha256: the record was made for another schema")
    method = record.get("method")
    if method == "lp":
        return RecordVerification(tuple(diffs + _verify_lp(record, workload,
                                                           verify_certificate)))
    if record.get("workload", {}).get("sha256") != workload_hash(workload):
        diffs.append("workload.sha256: the record was made for another workload")
    try:
        neighbours = Neighbours.parse(record["neighbours"])
        unit = PrivacyUnit.from_dict(record.get("privacy_unit"))
        definition, value = _calibrated(record["budget"]["asked"])
        key = "epsilon" if definition is Definition.PURE else "rho"
        cal = record["budget"]["calibrated_as"]
        if cal.get("definition") != definition.value or not _close(cal.get(key), value):
            diffs.append(f"budget.calibrated_as: {cal!r}, recomputed "
                         f"{{'definition': {definition.value!r}, {key!r}: {value!r}}}")
        steps = record["steps"]
        if not isinstance(steps, list):
            raise TypeError("steps is not a list")
        diffs += _check_steps(method, steps, workload, record, neighbours, definition, key,
                              unit)
        proved = [step_from_dict(s) for s in steps]
        total = sum((Fraction(step_cost(s, definition)) for s in proved), Fraction(0))
        if total > Fraction(value):
            diffs.append(f"spent: the mechanisms spend {float(total)!r} {key}, over the "
                         f"calibrated budget {value!r}")
        deltas = sorted({*REPORTED_DELTAS, *([float(record["budget"]["asked"]["delta"])]
                                             if "delta" in record["budget"]["asked"]
                                             else [])}, reverse=True)
        want = [g.to_dict() for g in proved_spend(proved, definition, neighbours, deltas,
                                                  unit)]
        if record.get("spent") != want:
            diffs.append(f"spent: {record.get('spent')!r}, recomputed from the steps {want!r}")
        private = bool(proved) and all(s.mechanism.private for s in proved)
        if record.get("private") is not private:
            diffs.append(f"private: {record.get('private')!r}, the mechanisms say {private!r}")
        elif not private:  # as for release certificates: a seeded run is no release
            diffs.append("private: the run used seeded test randomness (NOT PRIVATE)")
        if record.get("mechanisms") != len(steps):
            diffs.append(f"mechanisms: {record.get('mechanisms')!r}, the record lists "
                         f"{len(steps)}")
    except (KeyError, TypeError, ValueError, TesseraError) as e:
        return RecordVerification(tuple(diffs) + (f"cannot re-prove the spend: {e!r}",))
    return RecordVerification(tuple(diffs), len(steps))


def _check_groups(where: str, target: dict[str, Any], workload: Workload) -> list[str]:
    """A coarsened marginal's groups: one map per attribute of the marginal, a group for every
    code, groups numbered 0 … g − 1 (the calibration does not depend on them: summing cells
    keeps the marginal's sensitivity, docs/theory.md §5)."""
    groups, marginal = target["groups"], target.get("marginal", [])
    if not isinstance(groups, dict) or set(groups) != set(marginal):
        return [f"{where}.applied_to.groups: not one map per attribute of {marginal}"]
    dom = workload.domain
    out = []
    for name, m in groups.items():
        size = dom.sizes[dom.names.index(name)] if name in dom.names else -1
        if (not isinstance(m, list) or len(m) != size
                or sorted(set(m)) != list(range(len(set(m))))):
            out.append(f"{where}.applied_to.groups[{name!r}]: not a map of its {size} codes to "
                       "groups 0 … g − 1")
    return out


def _check_steps(method: Any, steps: list[dict[str, Any]], workload: Workload,
                 record: dict[str, Any], neighbours: Neighbours, definition: Definition,
                 key: str, unit: PrivacyUnit) -> list[str]:
    diffs: list[str] = []
    substitute = neighbours is Neighbours.SUBSTITUTE
    n_queries = workload.n_queries
    scopes: set[tuple[str, ...]] = set()
    if method == "adaptive":
        cells = int(record["parameters"]["max_cells"])
        names = workload.domain.names
        scopes = {tuple(names[i] for i in c.scope)
                  for c in candidates(workload, cells) if c.is_marginal}
        outside = {(names[a],) for a in outside_attributes(workload)}
        scopes |= outside
        diffs += _check_columns(steps, record, outside, definition, key)
    elif method in ("ipmwu", "mwem"):
        rounds = int(record["parameters"]["rounds"])
        want = 2 * rounds + (0 if substitute else 1)
        if len(steps) != want:
            diffs.append(f"steps: {len(steps)} mechanisms, {method} with T = {rounds} runs "
                         f"{want}")
    else:
        diffs.append(f"method: {method!r} is not a method tessera synth runs")
    for k, s in enumerate(steps):
        where = f"steps[{k}]"
        target = s.get("applied_to", {})
        if "query" in target and not 0 <= int(target["query"]) < n_queries:
            diffs.append(f"{where}.applied_to: query {target['query']} is not in the workload")
        if "marginal" in target and tuple(target["marginal"]) not in scopes:
            diffs.append(f"{where}.applied_to: {target['marginal']} is not a candidate "
                         "marginal of the workload")
        if "groups" in target:
            diffs += _check_groups(where, target, workload)
        want = _expected_sensitivity(str(method), s, substitute, definition, unit)
        if not _close(s.get("sensitivity"), want):
            diffs.append(f"{where}.sensitivity: {s.get('sensitivity')!r}, its target has "
                         f"{want!r}")
            continue
        cost = step_cost(step_from_dict(s), definition)
        if not _close(s.get("cost", {}).get(key), cost):
            diffs.append(f"{where}.cost: {s.get('cost')!r}, the mechanism's privacy map gives "
                         f"{key} = {cost!r}")
    return diffs


def _check_columns(steps: list[dict[str, Any]], record: dict[str, Any],
                   outside: set[tuple[str, ...]], definition: Definition,
                   key: str) -> list[str]:
    """The record's ``columns`` against its steps: ``measured`` names exactly the attributes
    outside the workload whose one-way marginals the steps measure, ``budget_share`` is their
    exact cost over the calibrated budget, and ``uniform`` every other outside attribute."""
    columns = record.get("columns")
    if not isinstance(columns, dict):  # a record from before the field measured none of them
        if any(tuple(s.get("applied_to", {}).get("marginal", ())) in outside for s in steps):
            return ["columns: missing, yet the steps measure attributes outside the workload"]
        return []
    measured, cost = [], Fraction(0)
    for s in steps:
        target = tuple(s.get("applied_to", {}).get("marginal", ()))
        if target in outside and s.get("role") == "measurement":
            if target[0] not in measured:
                measured.append(target[0])
            cost += Fraction(step_cost(step_from_dict(s), definition))
    diffs = []
    if list(columns.get("measured", [])) != measured:
        diffs.append(f"columns.measured: {columns.get('measured')!r}, the steps measure "
                     f"{measured!r}")
    _, value = _calibrated(record["budget"]["asked"])
    share = float(cost / Fraction(value))
    if not _close(columns.get("budget_share"), share):
        diffs.append(f"columns.budget_share: {columns.get('budget_share')!r}, the steps' "
                     f"{key} over the budget is {share!r}")
    rest = sorted(a for (a,) in outside if a not in measured)
    if sorted(columns.get("uniform", [])) != rest:
        diffs.append(f"columns.uniform: {columns.get('uniform')!r}, not measured: {rest!r}")
    return diffs


def _verify_lp(record: dict[str, Any], workload: Workload,
               verify_certificate: Callable[..., Any] | None) -> list[str]:
    diffs: list[str] = []
    cert = record.get("release_certificate")
    if not isinstance(cert, dict):
        return ["release_certificate: missing (the LP's spend is its release's)"]
    fitted = workload
    if any("TRUE was added" in n for n in record.get("budget", {}).get("notes", [])):
        fitted, _ = with_tautology(workload)
    if record.get("workload", {}).get("sha256") != workload_hash(fitted):
        diffs.append("workload.sha256: the record was made for another workload")
    if verify_certificate is None:
        diffs.append("release_certificate: no certificate verifier given")
    else:
        result = verify_certificate(cert, fitted)
        diffs += [f"release_certificate: {d}" for d in result.differences]
    if record.get("spent") != cert.get("guarantees"):
        diffs.append("spent: not the release certificate's guarantees")
    if record.get("budget", {}).get("asked") != cert.get("budget"):
        diffs.append("budget.asked: not the release certificate's budget")
    if record.get("neighbours") != cert.get("neighbours"):
        diffs.append("neighbours: not the release certificate's")
    mine, theirs = record.get("privacy_unit"), cert.get("privacy_unit")
    if (mine is None) != (theirs is None) or (mine is not None and theirs is not None and any(
            mine.get(k) != theirs.get(k) for k in ("id_column", "max_rows"))):
        diffs.append("privacy_unit: not the release certificate's")
    return diffs
