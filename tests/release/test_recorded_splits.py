"""Splits an optimiser found, recorded in the certificate and checked by ``verify`` rather than
recomputed (docs/certificate.md, "An optimised split"): the optimised split of a ``direct``
candidate that lost to another strategy (the cutting plane's wall-clock guard makes a re-run
irreproducible)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

from tessera.privacy import Definition
from tessera.release import Budget, answer, verify_certificate
from tessera.release.certificate import digest
from tessera.schema.domain import Domain
from tessera.strategy.choose import choose_strategy
from tessera.workload.workload import Workload

RHO = 0.5
#: 15 ranges over a 16-value attribute: the chooser optimises ``direct`` (its cutting plane
#: needs 4 rounds here) but a tree wins (expected total 46.9 against direct's 89.3)
DOMAIN = Domain.from_dict({"a": 16, "b": 2})
RANGES = [f"a >= {lo} AND a <= {hi}" for lo in range(0, 16, 3) for hi in range(lo, 16, 4)]


def _workload() -> Workload:
    return Workload.from_sql(RANGES, DOMAIN)


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"a": np.arange(300) % 16, "b": np.arange(300) % 2})


def _direct_row(cert: dict) -> dict:
    return next(r for r in cert["strategy"]["candidates"] if r["strategy"] == "direct")


def _stopped_early(monkeypatch: pytest.MonkeyPatch) -> dict:
    """The certificate of a release whose losing ``direct`` candidate's cutting plane stopped
    after 3 rounds (as one stopped by the wall-clock guard would): its recorded split differs
    from the converged one by far more than CHOICE_RTOL."""
    import tessera.calibration.optimal as optimal_module

    converged = answer(_frame(), _workload(), Budget.of(rho=RHO)).certificate
    monkeypatch.setattr(optimal_module, "OPTIMAL_ROUNDS", 3)
    cert = json.loads(json.dumps(answer(_frame(), _workload(), Budget.of(rho=RHO)).certificate))
    monkeypatch.undo()
    assert cert["strategy"]["chosen"].startswith("hierarchical")
    assert cert["strategy"]["direct_split"] == "optimal"
    early, full = np.array(_direct_row(cert)["scales"]), np.array(_direct_row(converged)["scales"])
    assert np.max(np.abs(early / full - 1)) > 1e-2
    return cert


@pytest.fixture
def no_optimiser(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """verify must not run the cutting plane (it raises here)."""
    import tessera.release.plan as plan_module
    import tessera.strategy.direct as direct_candidate

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("verify ran the optimiser")

    with monkeypatch.context() as m:
        m.setattr(direct_candidate, "optimal_split", refuse)
        m.setattr(plan_module, "optimal_split", refuse)
        yield


def _forged(cert: dict, factors: np.ndarray) -> dict:
    """The certificate with the recorded direct split scaled by ``factors`` and every field
    that follows from it recomputed as a careful forger would (the direct row's expected
    errors, from the edited split in closed form; the digest)."""
    doc = json.loads(json.dumps(cert))
    row = _direct_row(doc)
    row["scales"] = [s * float(f) for s, f in zip(row["scales"], factors)]
    choice = choose_strategy(_workload(), Definition.ZCDP, RHO,
                             direct_scales=tuple(row["scales"]))
    new = next(r for r in choice.table() if r["strategy"] == "direct")
    row.update({k: new[k] for k in ("expected_total", "expected_max", "rmse")})
    doc["digest"] = digest(doc)
    return doc


def _check_recorded_direct_split(cert: dict) -> None:
    """What verify proves of a losing direct candidate's recorded split: the certificate
    verifies as made; a recorded split that over-spends (× 0.9), or is worse than uniform
    (× 3), fails with every derived field recomputed; an edit of one recorded scale without
    the row's expected errors, or without the digest, fails."""
    wl = _workload()
    assert verify_certificate(cert, wl).ok, verify_certificate(cert, wl).differences
    t = len(_direct_row(cert)["scales"])
    over = verify_certificate(_forged(cert, np.full(t, 0.9)), wl).differences
    assert any("not a valid split" in d and "re-checks" in d for d in over), over
    worse = verify_certificate(_forged(cert, np.full(t, 3.0)), wl).differences
    assert any("exceeds the uniform" in d for d in worse), worse
    doc = json.loads(json.dumps(cert))
    _direct_row(doc)["scales"][0] *= 1.5
    unredigested = verify_certificate(doc, wl).differences
    assert any(d.startswith("digest") for d in unredigested), unredigested
    doc["digest"] = digest(doc)
    stale = verify_certificate(doc, wl).differences
    assert any(".expected_total" in d for d in stale), stale


@pytest.fixture(scope="module")
def stopped_cert() -> dict:
    with pytest.MonkeyPatch.context() as m:
        return _stopped_early(m)


def test_a_losing_direct_split_verifies_from_the_record(stopped_cert: dict,
                                                         no_optimiser: None) -> None:
    """A tree chosen beside a direct candidate whose optimiser stopped early: the certificate
    records the direct split in its candidate table, and verify checks it without running the
    optimiser (which would raise here); the edits are caught."""
    _check_recorded_direct_split(stopped_cert)


def test_older_certificates_without_the_recorded_split_still_verify() -> None:
    """A certificate made before the table recorded the split (no ``scales`` in the direct
    row) has the optimiser run again, as before: a converged one verifies; one whose optimiser
    stopped early does not (the re-run finds another split) — what the record fixes."""
    wl = _workload()
    converged = json.loads(json.dumps(answer(_frame(), wl, Budget.of(rho=RHO)).certificate))
    with pytest.MonkeyPatch.context() as m:
        early = _stopped_early(m)
    for cert, ok in ((converged, True), (early, False)):
        del _direct_row(cert)["scales"]
        cert["digest"] = digest(cert)
        assert verify_certificate(cert, wl).ok is ok, verify_certificate(cert, wl).differences


@pytest.mark.parametrize("planted", ["ignores the record", "no load check", "no uniform check"])
def test_planted_verify_bugs_on_the_recorded_split_are_caught(
        planted: str, stopped_cert: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks above can fail: a verify that ignores the recorded split (re-running the
    optimiser), that never re-proves its load, or that skips its comparison with the uniform
    split, is caught."""
    import tessera.release.certificate as certificate_module
    import tessera.release.strategy_release as strategy_release

    if planted == "ignores the record":
        monkeypatch.setattr(strategy_release, "recorded_direct_split", lambda section: None)
    elif planted == "no load check":
        monkeypatch.setattr(strategy_release, "check_direct_split", lambda *args: None)
    else:
        real = certificate_module.uniform_excess

        def lenient(plan, limit):  # type: ignore[no-untyped-def]
            # the chosen split's comparison stays; the losing direct split's is skipped
            return -1.0 if plan.workload.n_queries == len(RANGES) else real(plan, limit)
        monkeypatch.setattr(certificate_module, "uniform_excess", lenient)
    with pytest.raises(AssertionError):
        _check_recorded_direct_split(stopped_cert)
