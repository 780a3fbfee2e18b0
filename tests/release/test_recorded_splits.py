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

from tessera.privacy import Definition, Neighbours
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


# -- the chosen candidate's shares, stated as used (``strategy.shares``) ----------------------
MARGINALS = Domain.from_dict({"a": 2, "b": 10, "c": 12, "d": 3})
LINE = Domain.from_dict({"x": 64})


def _max_release(case: str) -> tuple[dict, Workload]:
    """A release under ``--objective max`` whose chosen split is SLSQP's minimax: marginals
    measured as counts (identity, pure ε, substitution) or residual contrasts (auto, ρ-zCDP),
    or the level costs of a tree over all ranges of 64 values."""
    from tessera.workload.families import Partition
    from tessera.workload.ranges import RangeFamily

    if case == "tree":
        wl = Workload.of_ranges(LINE, [RangeFamily.of(LINE, ["x"], "ranges")])
        frame = pd.DataFrame({"x": np.arange(400) % 64})
        rel = answer(frame, wl, Budget.of(rho=RHO), strategy="hierarchical", objective="max")
    else:
        dom = MARGINALS
        wl = Workload.of_families(dom, [Partition.marginal(dom, ["a"]),
                                        Partition.marginal(dom, ["b", "c"], 2.0),
                                        Partition.marginal(dom, ["c", "d"])])
        rng = np.random.default_rng(0)
        frame = pd.DataFrame({a.name: rng.integers(0, a.size, 500) for a in dom})
        if case == "identity":
            rel = answer(frame, wl, Budget.of(epsilon=1.0), strategy="identity",
                         objective="max", neighbours="substitution")
        else:
            rel = answer(frame, wl, Budget.of(rho=RHO), objective="max")
    cert = json.loads(json.dumps(rel.certificate))
    assert cert["strategy"]["objective"] == "max"
    assert cert["strategy"]["chosen"].startswith({"tree": "hierarchical"}.get(case, case))
    assert len(_chosen_row(cert)["shares"]) > 1
    return cert, wl


def _chosen_row(cert: dict) -> dict:
    return next(r for r in cert["strategy"]["candidates"]
                if r["strategy"] == cert["strategy"]["chosen"])


@pytest.fixture(scope="module", params=["identity", "residual", "tree"])
def max_release(request: pytest.FixtureRequest) -> tuple[dict, Workload]:
    return _max_release(request.param)


def _other_rounding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another platform: every share that is not 1 rounds one unit up in its last (6th)
    significant digit, as a share lying at a rounding boundary could."""
    import tessera.strategy.interval_candidates as interval_candidates
    import tessera.strategy.marginal_candidates as marginal_candidates
    from tessera.strategy.context import SHARE_DIGITS, shares_for

    def bumped(costs, definition):  # type: ignore[no-untyped-def]
        w = shares_for(costs, definition)
        unit = 10.0 ** (np.floor(np.log10(w)) - (SHARE_DIGITS - 1))
        return np.where(w < 1.0, np.array([float(f"{x:.{SHARE_DIGITS}g}")
                                           for x in w + unit]), w)

    for module in (interval_candidates, marginal_candidates):
        monkeypatch.setattr(module, "shares_for", bumped)


def _without_shares(cert: dict) -> dict:
    """The certificate as made before the shares were recorded (re-digested)."""
    doc = json.loads(json.dumps(cert))
    for row in doc["strategy"]["candidates"]:
        row.pop("shares", None)
    doc["digest"] = digest(doc)
    return doc


def test_stated_shares_verify_where_a_share_rounds_the_other_way(
        max_release: tuple[dict, Workload], monkeypatch: pytest.MonkeyPatch) -> None:
    """The certificate states the shares as used; verify takes them from it, so it verifies
    where every recomputed share rounds one unit the other way (the measured workload's hash
    is the stated shares'); a certificate made before the shares were stated verifies as
    before, except there (its recomputed, re-rounded shares change the hash)."""
    cert, wl = max_release
    assert verify_certificate(cert, wl).ok, verify_certificate(cert, wl).differences
    assert verify_certificate(_without_shares(cert), wl).ok
    _other_rounding(monkeypatch)
    assert verify_certificate(cert, wl).ok, verify_certificate(cert, wl).differences
    old = verify_certificate(_without_shares(cert), wl).differences
    assert any(d.startswith("strategy.measured_workload.sha256") for d in old), old


def _check_stated_shares(cert: dict, wl: Workload) -> None:
    """An edited share fails (with the digest recomputed: the share check, and the stated
    scales are not the edited shares' own), and so does an edit without the digest."""
    assert verify_certificate(cert, wl).ok, verify_certificate(cert, wl).differences
    doc = json.loads(json.dumps(cert))
    shares = _chosen_row(doc)["shares"]
    shares[-1] = repr(float(shares[-1]) * (1 - 1e-4))  # (beyond SHARE_RTOL; no other choice)
    assert any(d.startswith("digest") for d in verify_certificate(doc, wl).differences)
    doc["digest"] = digest(doc)
    edited = verify_certificate(doc, wl).differences
    assert any(".shares[" in d for d in edited), edited
    assert any(".scale:" in d for d in edited), edited


def test_an_edited_share_fails(max_release: tuple[dict, Workload]) -> None:
    _check_stated_shares(*max_release)


def _worse_split_release() -> tuple[dict, Workload]:
    """A complete, self-consistent certificate of a split that is not the minimax (the
    release's minimax solver planted to return the total-optimal split): private, every field
    following from its shares — only the choice of split is wrong."""
    import tessera.strategy.marginal_candidates as marginal_candidates

    with pytest.MonkeyPatch.context() as m:
        m.setattr(marginal_candidates, "minimax_precisions",
                  lambda design, w, *, zcdp, total: marginal_candidates.optimal_precisions(
                      design, w, zcdp=zcdp, total=total))
        return _max_release("identity")


def test_a_split_other_than_the_minimax_fails() -> None:
    cert, wl = _worse_split_release()
    diffs = verify_certificate(cert, wl).differences
    assert any(".shares[" in d for d in diffs), diffs


@pytest.mark.parametrize("planted", ["ignores the stated shares", "no share check"])
def test_planted_verify_bugs_on_the_stated_shares_are_caught(
        planted: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks above can fail: a verify that recomputes and rounds the shares instead of
    taking the stated ones fails where a share rounds the other way; one that never compares
    the stated shares with the recomputed split accepts a split other than the minimax."""
    import tessera.release.certificate as certificate_module
    import tessera.release.strategy_release as strategy_release

    if planted == "ignores the stated shares":
        cert, wl = _max_release("identity")
        choose = strategy_release.choose_strategy
        monkeypatch.setattr(strategy_release, "choose_strategy",
                            lambda *a, **k: choose(*a, **{**k, "stated_shares": None}))
        _other_rounding(monkeypatch)
        diffs = verify_certificate(cert, wl).differences
        assert any(d.startswith("strategy.measured_workload.sha256") for d in diffs), diffs
    else:
        cert, wl = _worse_split_release()
        monkeypatch.setattr(certificate_module, "_check_stated_shares",
                            lambda choice, diffs: None)
        assert verify_certificate(cert, wl).ok, verify_certificate(cert, wl).differences


@pytest.mark.parametrize("case", ["identity-pure", "residual-zcdp", "tree-zcdp", "tree-pure"])
def test_shares_within_share_rtol_move_every_expected_variance_by_the_stated_bound(
        case: str) -> None:
    """The bound behind SHARE_RTOL (certificate.py): shares each moved by at most d relative
    move every expected variance of W by at most ((1+d)/(1−d))² − 1 — checked on 200 random
    moves of the candidate's shares (each to ±d, the extremes included), every query, through
    with_shares (the candidate's own calibration and GLS); a planted bound with d in place
    of the square is exceeded."""
    from tessera.release.certificate import SHARE_RTOL
    from tessera.strategy.context import Context
    from tessera.strategy.stated_shares import shares_of, with_shares
    from tessera.workload.families import Partition
    from tessera.workload.ranges import RangeFamily

    kind, definition = case.split("-")
    if kind == "tree":
        dom = Domain.from_dict({"x": 16})
        wl = Workload.of_ranges(dom, [RangeFamily.of(dom, ["x"], "ranges")])
        strategy = "hierarchical"
    else:
        dom = Domain.from_dict({"a": 2, "b": 3, "c": 4})
        wl = Workload.of_families(dom, [Partition.marginal(dom, ["a", "b"]),
                                        Partition.marginal(dom, ["b", "c"], 2.0)])
        strategy = kind
    d = SHARE_RTOL
    ctx = Context(Definition.parse(definition), 1.0, Neighbours.ADD_REMOVE)
    base = choose_strategy(wl, ctx.definition, 1.0, strategy=strategy, objective="max").chosen
    assert base.name.startswith(strategy)
    shares = np.array(shares_of(base.measured))
    rng = np.random.default_rng(0)
    worst = 0.0
    for t in range(200):
        move = rng.choice([-1.0, 1.0], shares.size) if t < 100 else rng.uniform(-1, 1,
                                                                                 shares.size)
        moved = with_shares(base, tuple(float(x) for x in shares * (1 + d * move)), ctx)
        worst = max(worst, float(np.max(np.abs(moved.expected / base.expected - 1))))
    bound = ((1 + d) / (1 - d)) ** 2 - 1
    assert worst <= bound * (1 + 1e-6), (worst, bound)
    assert worst > d * 1.5  # (planted: a bound of d is exceeded)
