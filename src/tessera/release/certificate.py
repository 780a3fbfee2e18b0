"""Release certificates: what was released, under which guarantee, and how to check it
(docs/certificate.md, schema ``docs/certificate.schema.json``; docs/theory.md §3, §7).

A certificate records the definition and neighbour relation, the mechanism that ran (and
whether its randomness was private), the workload's canonical hash, γ_w with its witness and
whether it is exact, every per-query parameter, and the guarantee in every definition the
mechanism provably has — plus what is *not* proven (a discrete Gaussian is not exactly μ-GDP).
A release made for one person (a privacy id, at most K rows each; docs/theory.md §3.13) has a
``privacy_unit`` section — the id column's name (never its values), K, the factor a person pays
over a row (K for ε, K² for ρ) and the bounding rule — and its γ_w, spent and guarantees are a
person's; ``verify`` reads the unit from there and recomputes the person's γ and spend.

:func:`verify_certificate` recomputes the accounting from the schema and workload alone — no
data — and lists every difference. The ``digest`` (SHA-256 of the canonical JSON of every other
field) shows an edit made without recomputing it; it is an integrity check, not a signature:
anyone can recompute it, so it does not say *who* made the certificate, and ``verify`` proves
that the stated accounting follows from the public inputs — not that the certificate is
authentic or belongs to a given answer file (sign both with your organisation's tools for that).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tessera import __version__
from tessera.data.outputs import write_text
from tessera.data.validation import BOUNDING_RULE
from tessera.errors import TesseraError
from tessera.mechanisms.record import MechanismRecord
from tessera.privacy import Definition, PrivacyUnit
from tessera.release.budget import DISCRETE_LAPLACE, Budget
from tessera.release.ledger import Charge
from tessera.release.plan import (
    INTERVAL_LEVEL,
    NoisePlan,
    noise_plan,
    restated,
    uniform_excess,
)
from tessera.software import versions
from tessera.strategy.choose import StrategyChoice
from tessera.strategy.context import SHARE_DIGITS
from tessera.strategy.stated_shares import shares_of
from tessera.workload.canonical import canonical_json, workload_hash
from tessera.workload.workload import Workload

SCHEMA_ID = "https://tessera-dp.org/schemas/certificate/1.json"
SCHEMA_VERSION = 1
#: How the certificate names OpenDP's secure randomness.
SECURE_RANDOMNESS = "OpenDP secure"
#: Every field of a version-1 certificate (docs/certificate.schema.json).
TOP_LEVEL_KEYS = ("$schema", "schema_version", "library", "created", "private", "mechanism",
                  "budget", "calibration", "neighbours", "workload", "allocation", "overlap",
                  "spent", "queries", "families", "guarantees", "not_proven", "postprocessing",
                  "ledger", "digest")
#: Fields a certificate may have beyond :data:`TOP_LEVEL_KEYS`: ``strategy`` (what was measured
#: and how W was reconstructed; absent in certificates made before strategies: W measured) and
#: ``privacy_unit`` (a release for one person; absent: the unit is one row); ``software`` (the
#: versions of Tessera, OpenDP, dp-accounting and Python that made it:
#: :func:`tessera.software.versions`; absent in certificates made before it was recorded).
OPTIONAL_KEYS = ("strategy", "privacy_unit", "software")
#: Relative tolerance when a recomputed float is compared with the certificate's.
RTOL = 1e-9
#: Relative tolerance when what an optimiser recomputes is compared with the certificate: the
#: stated scales against the recomputed split (the ``--objective max`` minimax split by SLSQP,
#: tree level costs, residual contrasts' precisions; an optimised predicate split is not
#: recomputed: :func:`verify_certificate`), the candidates' expected errors, γ_w of the split's
#: shares, and the optimised split's total variance against the uniform split's. These
#: optimisers stop at a tolerance and another BLAS or CPU moves their last digits; the privacy
#: proof never uses this tolerance (it re-proves the stated scales exactly: docs/certificate.md).
CHOICE_RTOL = 1e-6
#: Relative difference between a stated share and the recomputed one that verify accepts
#: (docs/certificate.md, "Stated shares"): both are rounded to SHARE_DIGITS significant digits
#: (each by at most 5·10^(−SHARE_DIGITS) relative) from splits equal to CHOICE_RTOL, so they
#: differ by at most 10^(1−SHARE_DIGITS) + CHOICE_RTOL relative to the larger (slack: twice
#: CHOICE_RTOL). A noise variance, γ_w/(2ρ w_f²) or 2(γ_w/(ε w_f))², then moves by at most
#: ((1+SHARE_RTOL)/(1−SHARE_RTOL))² − 1 ≈ 4.8e-5, and so does every expected error.
SHARE_RTOL = 10.0 ** (1 - SHARE_DIGITS) + 2 * CHOICE_RTOL

_NOT_GDP = ("μ-GDP: not proven for the discrete Gaussian that ran (a continuous Gaussian with "
            "the same σ would be μ-GDP with μ = √(2ρ)); the proven guarantee is ρ-zCDP")


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _parameters(parameter: str, scale: float, cost: float, halfwidth: int) -> dict[str, Any]:
    return {"parameter": parameter, "scale": _finite(float(scale)), "cost": float(cost),
            f"halfwidth{int(INTERVAL_LEVEL * 100)}": int(halfwidth) if halfwidth >= 0 else None}


def _plan_fields(plan: NoisePlan) -> dict[str, Any]:
    """The part of the certificate that depends on the public inputs only (recomputable)."""
    wl, ov = plan.workload, plan.overlap
    witness = None
    if ov.witness is not None:
        witness = {
            "row": {a.name: a.label(c) for a, c in zip(wl.domain, ov.witness.x)},
            "queries": [wl.name_of(i) for i in ov.witness.queries],
        }
        if ov.witness.y is not None:
            witness["substituted_by"] = {a.name: a.label(c)
                                         for a, c in zip(wl.domain, ov.witness.y)}
        if plan.unit.counts_people:  # a person of ≤ K rows covering the witness queries
            witness["rows"] = [{a.name: a.label(c) for a, c in zip(wl.domain, r)}
                               for r in ov.witness.rows]
        elif not plan.unit.is_row:  # a person of K identical rows (or K identical pairs)
            witness["copies"] = plan.unit.max_rows
    mech = plan.mechanism
    param = "scale b" if mech == DISCRETE_LAPLACE else "σ"
    for p, cells in wl.family_slices():  # one noise parameter per family: the form records it
        if not np.all(plan.scales[cells] == plan.scales[cells][0]):
            raise TesseraError(f"family {p.name!r}: its cells have different noise scales")
    unit = {} if plan.unit.is_row else {"privacy_unit": unit_fields(plan.unit, plan)}
    return {
        **unit,
        "budget": plan.budget.to_dict(),
        "calibration": {"definition": plan.budget.calibration.value, "total": plan.total},
        "neighbours": plan.neighbours.value,
        "workload": {"sha256": workload_hash(wl), "queries": wl.n_queries,
                     "families": len(wl.partitions)},
        "allocation": {"kind": plan.allocation, "method": plan.method},
        "overlap": {
            "definition": ov.comp.value,
            "gamma_w": ov.bound,
            "exact": ov.exact,
            "achieved": ov.achieved,
            "method": ov.method,
            "witness": witness,
        },
        "spent": {"value": plan.spent, "exact": plan.spent_exact,
                  "sequential": plan.sequential},
        "queries": [
            _parameters(param, s, c, hw) | {"name": n}
            for n, s, c, hw in zip(wl.names, plan.scales, plan.costs, plan.halfwidths)
        ],
        "families": [
            _parameters(param, plan.scales[cells][0], plan.costs[cells][0],
                        plan.halfwidths[cells][0])
            | {"name": p.name, "kind": p.kind, "attributes": list(p.attributes),
               "cells": cells.stop - cells.start}
            for p, cells in wl.family_slices()
        ],
        "guarantees": [g.to_dict() for g in plan.guarantees()],
        "not_proven": [_NOT_GDP] if plan.budget.definition is Definition.GDP else [],
    }


def unit_fields(unit: PrivacyUnit, plan: NoisePlan) -> dict[str, Any]:
    """The certificate's ``privacy_unit``: the id column's name (never a value of it), K, what a
    person pays over a row (``cost_factor``: K for ε, K² for ρ; γ_w and spent are a person's)
    and the bounding rule. Counting people (``count``: people) there is no factor: ``cost`` is
    ``coverage``, the maximum weighted coverage of K rows."""
    if unit.counts_people:  # no factor: the coverage of K rows (docs/theory.md §3.14)
        return {"id_column": unit.id_column, "max_rows": unit.max_rows, "count": unit.count,
                "relation": unit.label(plan.neighbours), "cost": "coverage",
                "bounding": BOUNDING_RULE}
    return {"id_column": unit.id_column, "max_rows": unit.max_rows,
            "relation": unit.label(plan.neighbours),
            "cost_factor": unit.factor(plan.budget.calibration), "bounding": BOUNDING_RULE}


def certificate_unit(certificate: dict[str, Any]) -> PrivacyUnit:
    """The unit a certificate states (one row when it has no ``privacy_unit``)."""
    return PrivacyUnit.from_dict(certificate.get("privacy_unit"))


def build_certificate(
    plan: NoisePlan,
    mechanism: MechanismRecord,
    postprocessing: dict[str, str],
    *,
    charge: Charge | None = None,
    choice: StrategyChoice | None = None,
) -> dict[str, Any]:
    """The certificate of a release (see the module docstring), with its digest; through a
    strategy (``choice``), the plan fields describe the measured queries and ``strategy`` says
    which and how W was reconstructed."""
    body: dict[str, Any] = {
        "$schema": SCHEMA_ID,
        "schema_version": SCHEMA_VERSION,
        "library": {"name": "tessera-dp", "version": __version__},
        "software": versions(),
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "private": mechanism.private,
        "mechanism": {"id": plan.mechanism, "name": mechanism.name,
                      "definition": mechanism.definition.value,
                      # what one unit moves a count by: 1 for a row, K for a person
                      "sensitivity": 1 if plan.unit.counts_people else plan.unit.max_rows,
                      "randomness": SECURE_RANDOMNESS if mechanism.private
                      else "seeded (NOT PRIVATE: tests only)"},
        **_plan_fields(plan),
        "postprocessing": postprocessing,
        "ledger": None if charge is None else {
            "release_id": charge.release_id, "spent_before": charge.spent_before,
            "spent_after": charge.spent_after, "exact": charge.exact},
    }
    if choice is not None:
        from tessera.release.strategy_release import strategy_fields

        body["strategy"] = strategy_fields(choice, plan)
        if choice.chosen.contrasts is not None:
            body["mechanism"]["sensitivity"] = "per residual: strategy.contrasts"
    body["digest"] = digest(body)
    return body


def digest(certificate: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of every field but ``digest``."""
    body = {k: v for k, v in certificate.items() if k != "digest"}
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def write_certificate(certificate: dict[str, Any], path: Path) -> Path:
    """The certificate as indented JSON, written atomically (whole or not at all)."""
    return write_text(path, json.dumps(certificate, indent=1, ensure_ascii=False,
                                       allow_nan=False) + "\n")


def read_certificate(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise TesseraError(f"cannot read certificate: {e}", where=str(p)) from None
    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION:
        raise TesseraError("not a Tessera certificate of schema version 1", where=str(p))
    return doc


@dataclass(frozen=True)
class Verification:
    """The outcome of :func:`verify_certificate`: ``differences`` empty iff it checks out."""

    differences: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.differences


def verify_certificate(
    certificate: dict[str, Any], workload: Workload, *, time_limit: float | None = 60.0
) -> Verification:
    """Recompute the accounting from ``workload`` alone and compare every recomputable field;
    check the digest and that the stated guarantees follow from the stated parameters.

    **Proof and choice, separately.** The privacy proof rests on the certificate's stated
    scales only: :func:`~tessera.release.plan.restated` re-proves them with the exact re-check
    (costs rounded up, exact rational sums), and every field that follows from them (costs,
    half-widths, spent, guarantees, contrasts' σ) must match to :data:`RTOL`. The *choice* —
    that the stated scales are the split the public inputs give, and the strategy's expected
    errors — is recomputed (the optimisers run again) and compared to :data:`CHOICE_RTOL`, so
    another platform's last digits do not reject a valid certificate; a stated scale moved by
    more than that, or any field inconsistent with the stated scales, still fails.

    **An optimised predicate split** (allocation ``optimal``, W as given or the ``direct``
    strategy with ``direct_split`` ``optimal``) is not recomputed: the cutting-plane loop may
    stop at a wall-clock guard, which no re-run reproduces. Its stated scales are re-proved
    exactly (privacy), its total variance must not exceed the uniform split's calibrated to γ
    (:func:`~tessera.release.plan.uniform_excess`, to :data:`CHOICE_RTOL`), every other field
    is checked as above, and its optimality is not re-checked (docs/certificate.md). The same
    holds for the optimised split of a ``direct`` candidate that lost to another strategy: the
    candidate table records it (``candidates[k].scales``), and it is re-proved and compared
    with the uniform split the same way (:func:`_check_losing_direct`), its expected errors
    recomputed from it; a certificate made before the table recorded it has the optimiser
    run again, as before.

    **Stated shares**: every non-direct candidate's shares (the measured workload's weights,
    rounded to SHARE_DIGITS digits) are recorded in the candidate table and taken from there,
    not recomputed and rounded (a share at a rounding boundary could round the other way and
    change the measured workload's hash); each must equal the recomputed share to
    :data:`SHARE_RTOL` (:func:`_check_stated_shares`). A certificate without them has them
    recomputed, as before."""
    diffs: list[str] = []
    if certificate.get("digest") != digest(certificate):
        diffs.append("digest: the certificate was edited after it was made")
    try:
        budget = Budget.from_dict(certificate["budget"])
        unit = certificate_unit(certificate)  # one row, or one person: γ and spent K-fold
        stated = certificate.get("strategy")
        scales = stated_scales(certificate)
        if stated is None:  # made before strategies: W itself was measured
            # (an optimised split is re-proved from its stated scales, not re-optimised)
            recomputed = noise_plan(workload, budget, neighbours=certificate["neighbours"],
                                    allocation=certificate["allocation"]["kind"],
                                    time_limit=time_limit, stated_scales=scales, unit=unit)
            choice = None
        else:
            from tessera.release.strategy_release import (
                recorded_direct_split,
                stated_share_values,
                strategy_plan,
            )

            recomputed, choice = strategy_plan(
                workload, budget, neighbours=certificate["neighbours"],
                allocation="auto",  # (a strategy section is written only for auto/forced)
                strategy=stated["requested"], objective=stated["objective"],
                time_limit=time_limit, estimate=stated.get("estimate", "gls"),
                stated_scales=scales, direct_split=stated.get("direct_split", "shares"),
                max_split=stated.get("max_split", "best-of-two"),
                stated_chosen=stated.get("chosen"),
                recorded_direct=recorded_direct_split(stated),
                stated_shares=stated_share_values(stated), unit=unit)
        plan = restated(recomputed, scales, time_limit)  # the proof: the stated scales alone
        if plan.allocation == "optimal" and uniform_excess(plan, time_limit) > CHOICE_RTOL:
            diffs.append("allocation: the 'optimal' split's total variance exceeds the uniform "
                         "split's")
        if choice is not None:
            _check_losing_direct(choice, budget, certificate["neighbours"], time_limit, diffs)
            _check_stated_shares(choice, diffs)
    except (KeyError, TypeError, ValueError, TesseraError) as e:
        return Verification(tuple(diffs) + (f"cannot recompute the plan: {e}",))
    # the choice: the stated scales are the recomputed split's (an optimiser's output: to a
    # tolerance), and the strategy's expected errors and γ_w of its shares agree to the same
    # (the shares of marginal, residual and tree splits are rounded to SHARE_DIGITS digits
    # before they are used, and they are the measured workload's weights, in its hash)
    rtol, loose = RTOL, ()
    split = recomputed.scales
    if choice is not None:
        if choice.chosen.split == "optimal":  # the cutting-plane split's own scales
            split = choice.chosen.scales
        rtol, loose = CHOICE_RTOL, ("strategy.candidates", "overlap.gamma_w", "overlap.achieved")
    _compare_split(plan.scales, np.asarray(split, dtype=np.float64), rtol, certificate, diffs)
    expected = _plan_fields(plan)
    if choice is not None:
        from tessera.release.strategy_release import (
            recorded_direct_split,
            stated_share_values,
            strategy_fields,
        )

        expected["strategy"] = strategy_fields(choice, plan)
        if not stated_share_values(certificate["strategy"]):
            # made before the table recorded the shares: recomputed and rounded above, as then
            for row in expected["strategy"]["candidates"]:
                row.pop("shares", None)
        if recorded_direct_split(certificate["strategy"]) is None:
            # made before the candidate table recorded a losing direct split: the optimiser
            # ran again above, and the table is compared as it was then written
            for row in expected["strategy"]["candidates"]:
                row.pop("scales", None)
    for key, value in expected.items():
        _compare(key, certificate.get(key), value, diffs, loose, rtol)
    mech = certificate.get("mechanism", {})
    if mech.get("id") != plan.mechanism:
        diffs.append(f"mechanism.id: {mech.get('id')!r}, recomputed {plan.mechanism!r}")
    if mech.get("definition") != plan.budget.calibration.value:
        diffs.append(f"mechanism.definition: {mech.get('definition')!r}, recomputed "
                     f"{plan.budget.calibration.value!r}")
    if certificate.get("private") is not True:
        diffs.append("private: the release used seeded test randomness (NOT PRIVATE)")
    elif (mech.get("randomness") != SECURE_RANDOMNESS
          or "seeded" in str(mech.get("name", "")).lower()):
        diffs.append("mechanism: says private but names seeded (test) randomness")
    unknown = sorted(set(certificate) - set(TOP_LEVEL_KEYS) - set(OPTIONAL_KEYS))
    missing = sorted(set(TOP_LEVEL_KEYS) - set(certificate))
    if unknown or missing:
        diffs.append(f"fields: unknown {unknown}, missing {missing}")
    return Verification(tuple(diffs))


def _check_losing_direct(choice: StrategyChoice, budget: Budget, neighbours: str,
                         time_limit: float | None, diffs: list[str]) -> None:
    """A losing ``direct`` candidate's optimised split, as the candidate table records it, is a
    valid split (docs/certificate.md): its exact load re-proved ≤ the budget and its total
    variance no worse than the uniform split's (to :data:`CHOICE_RTOL`), as for a chosen one;
    its expected errors are recomputed from it in closed form and compared with the table."""
    from tessera.release.strategy_release import check_direct_split

    where = "strategy.candidates[direct].scales"
    try:
        plan = check_direct_split(choice, budget, neighbours, time_limit)
    except TesseraError as e:
        diffs.append(f"{where}: the recorded split is not a valid split of the budget: {e}")
        return
    if plan is not None and uniform_excess(plan, time_limit) > CHOICE_RTOL:
        diffs.append(f"{where}: the recorded 'optimal' split's total variance exceeds the "
                     "uniform split's")


def _check_stated_shares(choice: StrategyChoice, diffs: list[str]) -> None:
    """Every candidate's shares the certificate's table states, taken as used (not recomputed
    and rounded: :mod:`tessera.strategy.stated_shares`), are the split the public inputs give
    — the recomputed candidate's shares (the minimax split under ``max``), each to
    :data:`SHARE_RTOL` relative. The chosen one's privacy is the stated scales' (re-proved
    exactly), and those must be its stated shares' own (the split comparison); the table's
    figures, the measured workload's hash and γ_w follow from the stated shares."""
    row = {s.name: k for k, s in enumerate(choice.candidates)}
    for stated_s, recomputed_s in choice.restated:
        where = f"strategy.candidates[{row[stated_s.name]}].shares"
        stated, recomputed = shares_of(stated_s.measured), shares_of(recomputed_s.measured)
        for i, (a, b) in enumerate(zip(stated, recomputed)):
            if not abs(a - b) <= SHARE_RTOL * max(abs(a), abs(b)):
                diffs.append(f"{where}[{i}]: {a!r}, the recomputed split gives {b!r} "
                             f"(relative difference {abs(a / b - 1):.3g}, tolerance "
                             f"{SHARE_RTOL:.2g})")


def stated_scales(certificate: dict[str, Any]) -> list[float | None]:
    """The certificate's noise scale of every measured query in expanded order: each predicate
    query's (``queries``), then each family's once per cell (``families``); None: not
    released."""
    out: list[float | None] = [q["scale"] for q in certificate["queries"]]
    for f in certificate.get("families", []):
        out.extend([f["scale"]] * int(f["cells"]))
    return out


def _compare_split(stated: np.ndarray, recomputed: np.ndarray, rtol: float,
                   certificate: dict[str, Any], diffs: list[str]) -> None:
    """The stated scales are the recomputed split's, to ``rtol`` (relative, per query); a
    mismatch is named by its field (``queries[i].scale`` or ``families[k].scale``)."""
    if stated.shape != recomputed.shape or np.any(np.isinf(stated) != np.isinf(recomputed)):
        diffs.append("scales: the stated split releases other queries than the recomputed one")
        return
    finite = np.isfinite(stated)
    gap = np.zeros(stated.shape)
    gap[finite] = np.abs(stated[finite] / recomputed[finite] - 1.0)
    n_queries = len(certificate["queries"])
    cells = np.cumsum([int(f["cells"]) for f in certificate.get("families", [])])
    seen: set[str] = set()
    for i in np.flatnonzero(gap > rtol):
        where = (f"queries[{i}]" if i < n_queries else
                 f"families[{int(np.searchsorted(cells, i - n_queries, side='right'))}]")
        if where not in seen:
            seen.add(where)
            diffs.append(f"{where}.scale: {float(stated[i])!r}, the recomputed split gives "
                         f"{float(recomputed[i])!r} (relative difference {gap[i]:.3g}, "
                         f"tolerance {rtol:g})")


def _compare(path: str, got: Any, want: Any, diffs: list[str],
             loose: tuple[str, ...] = (), loose_rtol: float = RTOL) -> None:
    """Structural comparison; floats to :data:`RTOL`, or to ``loose_rtol`` under a path that
    starts with one of ``loose`` (an optimiser's output); every mismatch named by its path."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            diffs.append(f"{path}: {got!r}, recomputed {want!r}")
            return
        for k in sorted(set(want) | set(got)):
            if k == "method" and path in ("allocation", "overlap"):
                # the solver's route may legitimately differ between runs with a time limit
                continue
            _compare(f"{path}.{k}", got.get(k), want.get(k), diffs, loose, loose_rtol)
        return
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            diffs.append(f"{path}: length {len(got) if isinstance(got, list) else '?'}, "
                         f"recomputed {len(want)}")
            return
        for i, (g, w) in enumerate(zip(got, want)):
            _compare(f"{path}[{i}]", g, w, diffs, loose, loose_rtol)
        return
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        rtol = loose_rtol if loose and path.startswith(loose) else RTOL
        if not np.isclose(float(got), want, rtol=rtol, atol=0.0):
            diffs.append(f"{path}: {got!r}, recomputed {want!r}")
        return
    if got != want:
        diffs.append(f"{path}: {got!r}, recomputed {want!r}")
