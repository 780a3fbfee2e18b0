"""Private answering end to end: calibration, certificate, verification, ledger, CLI.

Statistical checks use fixed seeds or OpenDP's secure noise with tolerances from theory
(chi-square at p < 1e-6), and each is shown to reject a planted bug.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.errors import QueryError, TesseraError
from tessera.mechanisms import discrete_gaussian, discrete_laplace
from tessera.overlap import max_overlap
from tessera.privacy import Definition, Neighbours
from tessera.release import Budget, BudgetExceeded, Ledger, answer, noise_plan, verify_certificate
from tessera.release.certificate import digest
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload

SCHEMA = {
    "attributes": {
        "age": {"type": "integer", "min": 0, "max": 9},
        "sex": {"type": "categorical", "values": ["F", "M"]},
        "region": {"type": "categorical", "values": ["N", "S", "E", "W"]},
    }
}
DOMAIN = Domain.from_dict(SCHEMA)
#: a partition by age band (one query per row), a partition by region, and two extras:
#: γ = 4 (age band, region, 'sex = F', 'age >= 5 AND region = N' meet at age 5+, F, N).
CLAUSES = [
    "age < 5", "age >= 5",
    "region = 'N'", "region = 'S'", "region = 'E'", "region = 'W'",
    "sex = 'F'", "age >= 5 AND region = 'N'",
]


def _frame(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(0, 10, n),
        "sex": rng.choice(["F", "M"], n),
        "region": rng.choice(["N", "S", "E", "W"], n),
    })


def _truth(frame: pd.DataFrame, workload: Workload) -> np.ndarray:
    from tessera.data.counts import count

    return count(frame, workload).answers


WL = Workload.from_sql(CLAUSES, DOMAIN)


@pytest.mark.parametrize(
    ("budget", "definition", "total"),
    [
        (Budget.of(epsilon=1.0), Definition.PURE, 1.0),
        (Budget.of(rho=0.5), Definition.ZCDP, 0.5),
        (Budget.of(mu=1.0), Definition.ZCDP, 0.5),
    ],
)
def test_plan_calibrates_to_the_exact_overlap(budget: Budget, definition: Definition,
                                              total: float) -> None:
    plan = noise_plan(WL, budget, allocation="uniform")
    assert plan.overlap.exact and plan.overlap.bound == pytest.approx(4.0)
    if definition is Definition.PURE:
        assert np.allclose(plan.scales, 4.0, rtol=1e-9)  # b = γ/ε
    else:
        assert np.allclose(plan.scales, math.sqrt(4.0 / (2 * total)), rtol=1e-9)  # σ² = γ/(2ρ)
    # what a row pays, re-checked by the solver, never exceeds the budget
    assert plan.spent <= total and plan.spent == pytest.approx(total, rel=1e-9)
    brute = max(sum(c for c, q in zip(plan.costs, WL.queries) if q(DOMAIN, x))
                for x in np.ndindex(10, 2, 4))
    assert brute <= plan.spent * (1 + 1e-12)


def test_pure_guarantee_is_analytic_not_infinite() -> None:
    """Regression (audit): the pure guarantee of a Laplace release is γ_w/b, never ∞."""
    plan = noise_plan(WL, Budget.of(epsilon=0.7), allocation="uniform")
    pure = plan.guarantees()[0]
    assert pure.definition is Definition.PURE
    assert math.isfinite(pure.epsilon) and pure.epsilon == pytest.approx(0.7, rel=1e-9)
    assert pure.epsilon == pytest.approx(plan.overlap.bound / plan.scales[0], rel=1e-9)


def test_underflowing_weights_never_mean_no_noise() -> None:
    """Regression (audit): GDP/zCDP weights whose squares underflow gave γ_w = 0 and scale 0."""
    tiny = Workload.of(DOMAIN, WL.queries, weights=[1e-200] * len(WL))
    with pytest.raises(QueryError, match="underflows"):
        max_overlap(tiny, comp="gdp")
    with pytest.raises(QueryError, match="underflows"):
        max_overlap(tiny, comp="zcdp")
    # the release path normalises the shares: the same noise as unit weights, never zero
    mixed = Workload.of(DOMAIN, WL.queries, weights=[1e-200, 2e-200] * (len(WL) // 2))
    plan = noise_plan(mixed, Budget.of(rho=0.5))
    ref = noise_plan(Workload.of(DOMAIN, WL.queries, weights=[1.0, 2.0] * (len(WL) // 2)),
                     Budget.of(rho=0.5))
    assert np.all(plan.scales > 0) and np.allclose(plan.scales, ref.scales, rtol=1e-12)


def test_approx_budget_meets_delta_through_zcdp() -> None:
    plan = noise_plan(WL, Budget.of(epsilon=1.0, delta=1e-6), allocation="uniform")
    at = {g.delta: g.epsilon for g in plan.guarantees() if g.definition is Definition.APPROX}
    assert at[1e-6] <= 1.0 and at[1e-6] == pytest.approx(1.0, rel=1e-6)
    assert discrete_gaussian.DiscreteGaussian(float(plan.scales[0])).rho() * 4 <= plan.spent * (
        1 + 1e-9)


def _chi2_pvalue(noise: np.ndarray, pmf: Any) -> float:
    """Chi-square of integer noise against a pmf, pooling the tails to expected counts ≥ 5."""
    lo, hi = int(noise.min()), int(noise.max())
    ks = np.arange(lo, hi + 1)
    expected = pmf(ks) * noise.size
    observed = np.bincount(noise - lo, minlength=ks.size).astype(float)
    keep = expected >= 5
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], noise.size - expected[keep].sum())
    return float(stats.chisquare(obs, exp).pvalue)


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_noise_has_the_distribution_the_certificate_states(kind: str) -> None:
    """Secure OpenDP noise on 4,000 copies of a partition: noisy − exact follows the pmf at the
    certificate's scale; the same test rejects 0.8 × that scale (a planted bug)."""
    queries = [f"age = {a}" for a in range(10)] * 400  # γ = 400: b = 400/ε
    wl = Workload.from_sql(queries, DOMAIN, names=[f"q{i}" for i in range(len(queries))])
    frame = _frame(500)
    budget = Budget.of(epsilon=40.0) if kind == "laplace" else Budget.of(rho=8.0)
    # an explicit split measures W as given (the default strategy would merge the copies)
    release = answer(frame, wl, budget, allocation="uniform", time_limit=30)
    assert release.private and release.certificate["private"] is True
    scale = release.certificate["queries"][0]["scale"]
    noise = release.noisy - _truth(frame, wl)
    mod = discrete_laplace if kind == "laplace" else discrete_gaussian
    assert _chi2_pvalue(noise, lambda k: mod.pmf(k, scale)) > 1e-6
    assert _chi2_pvalue(noise, lambda k: mod.pmf(k, 0.8 * scale)) < 1e-6


def _leaves(doc: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _leaves(v, path + (k,))]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc) for p in _leaves(v, path + (i,))]
    return [path]


def _edited(doc: Any, path: tuple) -> Any:
    out = copy.deepcopy(doc)
    node = out
    for k in path[:-1]:
        node = node[k]
    v = node[path[-1]]
    if isinstance(v, bool):
        node[path[-1]] = not v
    elif isinstance(v, (int, float)):
        node[path[-1]] = v * 1.01 + 1
    elif isinstance(v, str):
        node[path[-1]] = v + "x"
    else:
        node[path[-1]] = 0
    return out


def test_verify_accepts_the_untouched_certificate_and_rejects_every_single_field_edit() -> None:
    release = answer(_frame(), WL, Budget.of(rho=0.3))  # secure noise: a real release
    cert = json.loads(json.dumps(release.certificate))
    assert verify_certificate(cert, WL).ok
    paths = [p for p in _leaves(cert) if p != ("digest",)]
    assert len(paths) > 50
    for path in paths:
        edited = _edited(cert, path)
        assert not verify_certificate(edited, WL).ok, path
        # even with the digest recomputed, every recomputable field is checked on its own
        edited["digest"] = digest(edited)
        # (descriptive fields — when, which library, solver routes — only the digest guards)
        informational = path[0] in ("created", "library", "software", "mechanism",
                                    "postprocessing", "ledger", "$schema",
                                    "schema_version") or path[-1] == "method"
        if not informational:
            assert not verify_certificate(edited, WL).ok, path
    other = Workload.from_sql(CLAUSES[:-1], DOMAIN)
    assert not verify_certificate(cert, other).ok


def test_seeded_release_says_not_private(tmp_path: Path) -> None:
    release = answer(_frame(), WL, Budget.of(epsilon=1.0), seed=7)
    assert not release.private and release.certificate["private"] is False
    assert "NOT PRIVATE" in release.mechanism.describe()
    out = release.write(tmp_path / "a.csv")
    assert out.read_text().startswith("# NOT PRIVATE")
    assert not verify_certificate(release.certificate, WL).ok


def test_ledger_is_charged_before_release_and_refuses_overspending(tmp_path: Path) -> None:
    book = Ledger.init(tmp_path / "l.sqlite", total=1.5, definition="pure",
                       neighbours=Neighbours.ADD_REMOVE, domain=DOMAIN, dataset="t")
    first = answer(_frame(), WL, Budget.of(epsilon=1.0), ledger=book, label="one", seed=1)
    assert first.charge is not None and first.charge.spent_after == pytest.approx(1.0)
    assert book.summary().releases[0].status == "released"
    with pytest.raises(BudgetExceeded, match="remaining"):
        answer(_frame(), WL, Budget.of(epsilon=1.0), ledger=book, label="two", seed=1)
    # a release over a disjoint sub-population costs the max, not the sum (Thm 5)
    young = Workload.from_sql(["age < 3 AND sex = 'F'", "age < 3 AND sex = 'M'"], DOMAIN)
    old = Workload.from_sql(["age >= 8"], DOMAIN)
    book2 = Ledger.init(tmp_path / "m.sqlite", total=1.0, definition="pure",
                        neighbours=Neighbours.ADD_REMOVE, domain=DOMAIN, dataset="t")
    answer(_frame(), young, Budget.of(epsilon=1.0), ledger=book2, seed=1)
    answer(_frame(), old, Budget.of(epsilon=1.0), ledger=book2, seed=1)
    assert book2.spent() == pytest.approx(1.0)
    # a ledger of another definition is refused before anything is counted
    with pytest.raises(TesseraError, match="ledger counts"):
        answer(_frame(), WL, Budget.of(rho=0.1), ledger=book2, seed=1)


def test_cli_answer_verify_and_ledger(tmp_path: Path) -> None:
    runner = CliRunner()
    schema = tmp_path / "s.yaml"
    DOMAIN.save(schema)
    wl = tmp_path / "w.sql"
    wl.write_text("\n".join(CLAUSES) + "\n")
    data = tmp_path / "d.csv"
    _frame().to_csv(data, index=False)
    ledger = tmp_path / "l.sqlite"
    res = runner.invoke(app, ["ledger", "init", str(ledger), "--schema", str(schema),
                              "--epsilon", "2"])
    assert res.exit_code == 0, res.output
    cert = tmp_path / "c.json"
    res = runner.invoke(app, ["answer", str(data), str(wl), "--schema", str(schema),
                              "--epsilon", "1", "-o", str(tmp_path / "a.csv"),
                              "--certificate", str(cert), "--ledger", str(ledger),
                              "--consistency"])
    assert res.exit_code == 0, res.output
    assert "pure ε-DP" in res.output and "add/remove one row" in res.output
    frame = pd.read_csv(tmp_path / "a.csv")
    assert list(frame.columns[:5]) == ["query", "answer", "noise_scale", "ci95_low", "ci95_high"]
    assert "consistency" in frame.columns
    res = runner.invoke(app, ["verify", str(cert), str(wl), "--schema", str(schema)])
    assert res.exit_code == 0 and "verified" in res.output, res.output
    doc = json.loads(cert.read_text())
    doc["queries"][0]["scale"] *= 2
    cert.write_text(json.dumps(doc))
    res = runner.invoke(app, ["verify", str(cert), str(wl), "--schema", str(schema)])
    assert res.exit_code == 2 and "does NOT check out" in res.output
    res = runner.invoke(app, ["ledger", "show", str(ledger)])
    assert res.exit_code == 0 and "spent 1" in res.output, res.output
    res = runner.invoke(app, ["answer", str(data), str(wl), "--schema", str(schema),
                              "--epsilon", "1.5", "--ledger", str(ledger)])
    assert res.exit_code == 2 and "refused" in res.output and "Traceback" not in res.output


@pytest.mark.parametrize("budget", [Budget.of(epsilon=1.0), Budget.of(rho=0.2),
                                    Budget.of(mu=0.9), Budget.of(epsilon=2.0, delta=1e-7)])
def test_certificate_validates_against_the_published_schema(budget: Budget) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parents[2] / "docs" / "certificate.schema.json")
                        .read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    release = answer(_frame(), WL, budget, seed=3, postprocess=("consistency", "nonnegative"))
    doc = json.loads(json.dumps(release.certificate))
    jsonschema.validate(doc, schema)
    doc["queries"][0]["scale"] = -1.0
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


def test_structured_workload_release_end_to_end(tmp_path: Path) -> None:
    """Marginals and a hierarchy beside predicate queries: one plan, exact γ from the partition
    bound, per-family certificate entries that verify, a ledger that stores the families
    compactly, and the long answer table."""
    from tessera.workload.families import Partition, hierarchy

    families = (Partition.marginal(DOMAIN, ["age", "sex"]),
                Partition.marginal(DOMAIN, ["region"], weight=2.0),
                *hierarchy(DOMAIN, ["age"], depth=3))
    wl = Workload.of(DOMAIN, WL.queries[:2], WL.names[:2], partitions=families)
    assert wl.n_queries == 2 + 20 + 4 + (1 + 2 + 4)
    frame = _frame()
    book = Ledger.init(tmp_path / "l.sqlite", total=1.0, definition="zcdp",
                       neighbours=Neighbours.ADD_REMOVE, domain=DOMAIN, dataset="t")
    release = answer(frame, wl, Budget.of(rho=0.5), ledger=book, seed=5,
                     allocation="shares")
    plan = release.plan
    # a row meets 1 predicate query (an age band) + 1 cell of each of the 5 families; shares
    # ∝ weight, normalised by the largest (2): Σ h(w) over a row = (1 + 1 + 4 + 1 + 1 + 1)/4
    assert plan.overlap.exact and plan.overlap.bound == pytest.approx(9.0 / 4)
    brute = max(sum(c for c, q in zip(plan.costs, wl.expanded().queries) if q(DOMAIN, x))
                for x in np.ndindex(10, 2, 4))
    assert brute <= plan.spent * (1 + 1e-12) and plan.spent <= 0.5
    cert = release.certificate
    assert [f["name"] for f in cert["families"]] == [p.name for p in families]
    assert cert["workload"]["queries"] == wl.n_queries and len(cert["queries"]) == 2
    doc = json.loads(json.dumps(cert))
    assert verify_certificate(doc, wl).differences == (
        "private: the release used seeded test randomness (NOT PRIVATE)",)
    doc["families"][1]["scale"] *= 1.5
    assert any(d.startswith("families[1].scale") for d in verify_certificate(doc, wl).differences)
    # the noise is centred on the exact counts of each cell
    truth = _truth(frame, wl.expanded())
    assert np.all(np.abs(release.noisy - truth) <= 10 * plan.scales)
    # the ledger stored the families compactly and re-reads them
    entry = book.entry(release.charge.release_id)
    assert entry.workload.partitions == families and len(entry.costs) == wl.n_queries
    assert book.spent() == pytest.approx(plan.spent, rel=1e-9)
    out = release.write(tmp_path / "a.csv")
    long = pd.read_csv(out, comment="#")
    assert list(long.columns[:3]) == ["family", "cell", "answer"] and len(long) == wl.n_queries
    assert long["cell"].iloc[2] == "age=0, sex=F"


def test_a_data_error_is_reported_before_the_ledger_is_charged(tmp_path: Path) -> None:
    """Values outside the schema reach the curator before any budget is spent, and nothing
    data-dependent is raised after a charge (found by the privacy review)."""
    from tessera.errors import DataError

    book = Ledger.init(tmp_path / "l.sqlite", total=1.0, definition="pure",
                       neighbours=Neighbours.ADD_REMOVE, domain=DOMAIN, dataset="t")
    bad = _frame(100)
    bad.loc[3, "region"] = "Z"
    with pytest.raises(DataError, match="region"):
        answer(bad, WL, Budget.of(epsilon=1.0), ledger=book, seed=1)
    assert book.releases() == () and book.spent() == 0.0
