"""The default split of predicate workloads (``optimal``, issue 18 item 2): the least total
variance under the overlap constraint, checked against the convex program over every row of a
small domain; never worse than uniform; re-proved by ``verify`` from the stated scales."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from tessera.calibration.optimal import OptimalSplit
from tessera.release import Budget, answer, noise_plan, verify_certificate
from tessera.release import plan as plan_module
from tessera.release.certificate import digest
from tessera.release.plan import uniform_excess
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload

DOMAIN = Domain.from_dict({"a": 4, "b": 3, "c": 2})
RHO = 0.5
#: one busy row (a = 0, b = 0: four queries) and queries that meet at most one other: uniform
#: prices them all at ρ/4, the optimum gives the lonely ones far more
CLAUSES = ["a = 0", "b = 0", "a = 0 AND c = 0", "a <= 1 AND b = 0", "a = 3", "b = 2 AND a >= 2",
           "c = 1 AND a = 2"]


def _rows() -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(s) for s in DOMAIN.sizes)))


def _membership(wl: Workload) -> np.ndarray:
    """(rows, queries): the explicit constraint matrix of the whole domain."""
    return np.array([[bool(q(DOMAIN, x)) for q in wl.queries] for x in _rows()], dtype=float)


def _brute_optimum(wl: Workload, rho: float) -> float:
    """min Σ_q 1/(2 c_q) s.t. Σ_{q ∋ x} c_q ≤ ρ for every row x (SLSQP on the explicit rows,
    in log c: convex objective, the constraints are what the overlap solver must separate)."""
    a = _membership(wl)
    t = a.shape[1]
    rows = a[a.sum(axis=1) > 0]
    x0 = np.full(t, np.log(rho / max(1.0, rows.sum(axis=1).max())))
    problem = {"fun": lambda z: float(np.sum(0.5 * np.exp(-z))),
               "jac": lambda z: -0.5 * np.exp(-z),
               "constraints": [{"type": "ineq", "fun": lambda z: rho - rows @ np.exp(z),
                                "jac": lambda z: -rows * np.exp(z)}]}
    res = minimize(x0=x0, method="SLSQP", options={"ftol": 1e-11, "maxiter": 2000}, **problem)
    if not res.success:
        # SLSQP can stop on "Positive directional derivative for linesearch" near the optimum:
        # restart it from its last point, then fall back to trust-constr (same program)
        res = minimize(x0=res.x, method="SLSQP", options={"ftol": 1e-11, "maxiter": 2000},
                       **problem)
    if not res.success:
        res = minimize(x0=res.x, method="trust-constr",
                       options={"gtol": 1e-12, "xtol": 1e-14, "maxiter": 20000}, **problem)
    assert res.success, res.message
    assert np.max(rows @ np.exp(res.x)) <= rho * (1 + 1e-7)  # feasible (no lower value by slack)
    return float(res.fun)


def _total_variance(plan: plan_module.NoisePlan) -> float:
    return float(np.sum(plan.scales**2))  # σ² under zCDP


def _row_loads(plan: plan_module.NoisePlan) -> np.ndarray:
    return _membership(plan.workload) @ plan.costs


def test_default_split_is_optimal_and_beats_uniform() -> None:
    wl = Workload.from_sql(CLAUSES, DOMAIN)
    plan = noise_plan(wl, Budget.of(rho=RHO))
    uni = noise_plan(wl, Budget.of(rho=RHO), allocation="uniform")
    assert plan.allocation == "optimal" and "least total variance" in plan.method
    best = _brute_optimum(wl, RHO)
    assert _total_variance(plan) == pytest.approx(best, rel=1e-6)
    assert _total_variance(plan) < 0.8 * _total_variance(uni)  # uniform: far from it here
    # every row of the domain pays at most the budget, and the re-check says so
    assert _row_loads(plan).max() <= plan.spent * (1 + 1e-12) and plan.spent <= RHO
    assert uniform_excess(plan) < 0


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 3),
                          st.sampled_from(["=", "<=", ">="]), st.booleans()),
                min_size=2, max_size=7))
def test_optimal_matches_the_explicit_convex_program(
        spec: list[tuple[str, int, str, bool]]) -> None:
    """Random small workloads (d = 3 attributes, 24 rows): the default split's total variance
    is the optimum of the program with every row's constraint written out, never above
    uniform's, and no row pays more than ρ."""
    clauses = []
    for k, (attr, v, op, conj) in enumerate(spec):
        v = min(v, DOMAIN[attr].size - 1)
        text = f"{attr} {op} {v}"
        if conj:  # a second predicate on the next attribute
            other = "abc"[("abc".index(attr) + 1) % 3]
            text += f" AND {other} = {k % DOMAIN[other].size}"
        clauses.append(text)
    clauses = list(dict.fromkeys(clauses))
    if len(clauses) < 2:
        return
    wl = Workload.from_sql(clauses, DOMAIN)
    plan = noise_plan(wl, Budget.of(rho=RHO))
    assert plan.allocation == "optimal"
    assert _row_loads(plan).max() <= RHO * (1 + 1e-12)
    assert _total_variance(plan) == pytest.approx(_brute_optimum(wl, RHO), rel=1e-5)
    assert uniform_excess(plan) <= 1e-9


def test_a_planted_uniform_optimiser_fails_the_brute_force_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: an 'optimiser' that returns the uniform split is caught."""
    wl = Workload.from_sql(CLAUSES, DOMAIN)
    def planted(workload, definition, total, rel, **kw):  # type: ignore[no-untyped-def]
        uni = noise_plan(workload, Budget.of(rho=total), neighbours=rel, allocation="uniform")
        return OptimalSplit(uni.scales, "planted: uniform")

    monkeypatch.setattr(plan_module, "optimal_split", planted)
    plan = noise_plan(wl, Budget.of(rho=RHO))
    assert _total_variance(plan) != pytest.approx(_brute_optimum(wl, RHO), rel=1e-5)


def _frame(n: int = 2000) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({n_: rng.integers(0, s, n) for n_, s in zip(DOMAIN.names, DOMAIN.sizes)})


def test_verify_reproves_the_stated_split() -> None:
    """verify does not re-run the optimiser: it re-proves the certificate's scales, so a
    certificate verifies even if the optimiser would stop elsewhere today; smaller scales
    (more spend) or a split worse than uniform are caught even with the digest recomputed."""
    wl = Workload.from_sql(CLAUSES, DOMAIN)
    release = answer(_frame(), wl, Budget.of(rho=RHO))
    cert = json.loads(json.dumps(release.certificate))
    assert cert["allocation"]["kind"] == "optimal"
    assert verify_certificate(cert, wl).ok

    def edited(factor: float, who: slice) -> dict:
        doc = json.loads(json.dumps(cert))
        for q in doc["queries"][who]:
            q["scale"] *= factor
        doc["digest"] = digest(doc)
        return doc

    overspent = verify_certificate(edited(0.9, slice(None)), wl)
    assert not overspent.ok and any("does not prove" in d or "re-checks" in d
                                    for d in overspent.differences), overspent.differences
    # more noise everywhere is private but worse than uniform: refused as 'optimal'
    worse = verify_certificate(edited(3.0, slice(None)), wl)
    assert any("exceeds the uniform" in d for d in worse.differences), worse.differences


def test_strategy_certificates_record_the_split_and_older_ones_still_verify(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeated query sends W through the strategy chooser, whose ``direct`` candidate now
    carries the optimal split (``strategy.direct_split``); a certificate made before that (direct
    on its shares, no such field) is recomputed the old way and still verifies."""
    import tessera.strategy.direct as direct_candidate

    wl = Workload.from_sql([*CLAUSES, CLAUSES[0]], DOMAIN, names=[*CLAUSES, "again"])
    release = answer(_frame(), wl, Budget.of(rho=RHO))
    cert = json.loads(json.dumps(release.certificate))
    assert cert["strategy"]["chosen"] == "direct" and cert["strategy"]["direct_split"] == "optimal"
    assert cert["allocation"]["kind"] == "optimal" and verify_certificate(cert, wl).ok
    dropped = json.loads(json.dumps(cert))
    del dropped["strategy"]["direct_split"]
    dropped["digest"] = digest(dropped)
    assert not verify_certificate(dropped, wl).ok  # an optimal split read as an old one

    monkeypatch.setattr(direct_candidate, "optimisable", lambda workload: False)
    old = json.loads(json.dumps(answer(_frame(), wl, Budget.of(rho=RHO)).certificate))
    monkeypatch.undo()
    assert old["allocation"]["kind"] == "uniform" and "direct_split" not in old["strategy"]
    assert verify_certificate(old, wl).ok  # (as made before the field and the optimal split)


def test_a_strategy_beside_an_optimised_direct_candidate_verifies() -> None:
    """Ranges over one attribute (≤ 60 queries): the chooser optimises ``direct`` but picks a
    tree; the certificate records the direct candidate's split so verify recomputes the same
    candidate table."""
    dom = Domain.from_dict({"a": 16, "b": 2})
    wl = Workload.from_sql([f"a >= {lo} AND a <= {hi}" for lo in range(0, 16, 3)
                            for hi in range(lo, 16, 4)], dom)
    frame = pd.DataFrame({"a": np.arange(300) % 16, "b": np.arange(300) % 2})
    cert = json.loads(json.dumps(answer(frame, wl, Budget.of(rho=RHO)).certificate))
    assert cert["strategy"]["chosen"] != "direct"
    assert cert["strategy"].get("direct_split") == "optimal"
    assert verify_certificate(cert, wl).ok


# -- a split stopped early (issue 18 item 5): verify re-proves it, never re-optimises -----------
WIDE = Domain.from_dict({"a": 6, "b": 5, "c": 4, "d": 3})


def _wide_workload(repeat: bool) -> Workload:
    """30 random two-attribute predicates on a 360-row domain: the cutting plane needs more
    than 2 rounds here (stopped after 2, its split differs from the converged one by ~25%).
    ``repeat``: the first query twice, so W goes through the strategy chooser's ``direct``."""
    rng = np.random.default_rng(1)
    clauses = []
    for _ in range(30):
        pair = rng.choice(list("abcd"), 2, replace=False)
        clauses.append(" AND ".join(f"{x} {rng.choice(['<=', '>=', '='])} "
                                    f"{rng.integers(0, WIDE[x].size)}" for x in pair))
    queries = Workload.from_sql(clauses, WIDE, names=[f"q{i}" for i in range(30)]).queries
    clauses = [c for i, c in enumerate(clauses) if queries[i] not in queries[:i]]  # distinct
    if repeat:  # the first query again, under a name of its own
        return Workload.from_sql(clauses + clauses[:1], WIDE, names=[*clauses, "again"])
    return Workload.from_sql(clauses, WIDE)


def _wide_frame() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    return pd.DataFrame({n: rng.integers(0, s, 500) for n, s in zip(WIDE.names, WIDE.sizes)})


def _stopped_early(wl: Workload, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The certificate of a release whose optimiser stopped after 2 cutting-plane rounds (as a
    run stopped by the wall-clock guard under load would), and a check that it did stop early:
    its split differs from the converged one far beyond CHOICE_RTOL."""
    import tessera.calibration.optimal as optimal_module

    converged = answer(_wide_frame(), wl, Budget.of(rho=RHO)).certificate
    monkeypatch.setattr(optimal_module, "OPTIMAL_ROUNDS", 2)
    cert = json.loads(json.dumps(answer(_wide_frame(), wl, Budget.of(rho=RHO)).certificate))
    monkeypatch.undo()
    assert cert["allocation"]["kind"] == "optimal"
    early = np.array([q["scale"] for q in cert["queries"]])
    full = np.array([q["scale"] for q in converged["queries"]])
    assert np.max(np.abs(early / full - 1)) > 1e-2
    return cert


def _check_stopped_early_split(cert: dict, wl: Workload) -> None:
    """What verify proves of an optimised split (docs/certificate.md): it verifies as stated;
    an over-spend (scales × 0.9) fails the exact re-proof, a split worse than uniform fails
    the uniform comparison — both with the digest recomputed — and the digest catches an
    edit that did not recompute it."""
    assert verify_certificate(cert, wl).ok, verify_certificate(cert, wl).differences

    def edited(factors: np.ndarray, redigest: bool = True) -> dict:
        doc = json.loads(json.dumps(cert))
        for q, f in zip(doc["queries"], factors):
            q["scale"] *= float(f)
        if redigest:
            doc["digest"] = digest(doc)
        return doc

    t = len(cert["queries"])
    over = verify_certificate(edited(np.full(t, 0.9)), wl).differences
    assert any("does not prove" in d or "re-checks" in d for d in over), over
    # private (every scale at least the stated one) but with more total variance than uniform
    worse = verify_certificate(edited(np.full(t, 3.0)), wl).differences
    assert any("exceeds the uniform" in d for d in worse), worse
    untouched = verify_certificate(edited(np.r_[1.5, np.ones(t - 1)], redigest=False), wl)
    assert any(d.startswith("digest") for d in untouched.differences), untouched.differences


@pytest.mark.parametrize("repeat", [False, True], ids=["plan", "strategy-direct"])
def test_a_split_stopped_early_verifies_without_the_optimiser(
        repeat: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A certificate whose optimal split was stopped after 2 rounds verifies with the normal
    code, which never runs the optimiser (it would raise here); the edits are caught."""
    import tessera.strategy.direct as direct_candidate

    wl = _wide_workload(repeat)
    cert = _stopped_early(wl, monkeypatch)
    if repeat:
        assert cert["strategy"]["chosen"] == "direct"
        assert cert["strategy"]["direct_split"] == "optimal"
    else:
        assert "strategy" not in cert

    def no_optimiser(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("verify ran the optimiser")

    monkeypatch.setattr(direct_candidate, "optimal_split", no_optimiser)
    monkeypatch.setattr(plan_module, "optimal_split", no_optimiser)
    _check_stopped_early_split(cert, wl)


@pytest.mark.parametrize("planted", ["no re-proof", "no uniform check"])
def test_planted_verify_bugs_are_caught(planted: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks above can fail: a verify whose re-proof of the stated scales never refuses
    an over-spend, or that skips the comparison with the uniform split, is caught."""
    import tessera.release.certificate as certificate_module

    wl = _wide_workload(repeat=True)
    cert = _stopped_early(wl, monkeypatch)
    if planted == "no re-proof":
        real = plan_module.recheck_spent

        def no_refusal(workload, costs, neighbours, total, time_limit):  # type: ignore[no-untyped-def]
            # the stated scales' load is computed but never held against the budget
            return real(workload, costs, neighbours, float("inf"), time_limit)
        monkeypatch.setattr(plan_module, "recheck_spent", no_refusal)
    else:
        monkeypatch.setattr(certificate_module, "uniform_excess", lambda plan, limit: -1.0)
    with pytest.raises(AssertionError):
        _check_stopped_early_split(cert, wl)


@pytest.mark.parametrize("neighbours", ["add-remove", "substitute"])
@pytest.mark.parametrize("allocation", ["optimal", "importance"])
def test_an_optimised_split_releases_no_query_of_weight_0(neighbours: str, allocation: str
                                                          ) -> None:
    """Weight 0 means "not released" (docs/theory.md §3.10), under ``--weights optimal`` and
    ``importance`` too: the split is the released queries' (the one of weight 0 stated as
    null), and the comparison with the uniform split is over them. (Found by the property test
    of tests/release/test_certified_scales.py: the weight-0 query got a scale, and the uniform
    split's total variance came out ∞, so the optimiser's split was kept even where it was
    several times worse — which verify then refused in an untouched certificate.)"""
    dom = Domain.from_dict({"a": 4, "b": 5})
    wl = Workload.from_sql(["a IN (0, 1, 3) AND b = 4", "a >= 1 AND a <= 3", "b >= 2 AND b <= 3",
                            "b <= 1", "a = 2", "a = 0 AND b = 0"], dom,
                           names=[f"q{i}" for i in range(6)])
    wl = Workload.of(dom, wl.queries, names=wl.names, weights=[0.0, 1.0, 1.0, 1.0, 2.0, 1.0])
    frame = pd.DataFrame({"a": [0, 1, 2, 3], "b": [0, 4, 2, 1]})
    cert = json.loads(json.dumps(answer(frame, wl, Budget.of(epsilon=1.0), neighbours=neighbours,
                                        allocation=allocation).certificate))
    assert cert["queries"][0]["scale"] is None
    assert all(q["scale"] is not None for q in cert["queries"][1:])
    result = verify_certificate(cert, wl)
    assert result.ok, result.differences
