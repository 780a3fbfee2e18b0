"""``tessera.Synthesizer``, ``tessera.synth.evaluate`` and the ``synth`` / ``evaluate`` commands:
decoded rows, budgets, the ledger charged before anything leaves, run records, errors."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import tessera
from tessera.accounting.zcdp import rho_for_epsilon_delta
from tessera.cli.main import app
from tessera.errors import DataError, QueryError, TesseraError
from tessera.privacy import Definition, Neighbours
from tessera.release import Budget, BudgetExceeded, Ledger, answer
from tessera.schema.domain import Domain
from tessera.synth.charge import Target, ledger_charge
from tessera.synth.evaluate import evaluate, synthetic_frame
from tessera.synth.fitted import NOT_PRIVATE_MARK, FittedSynthesizer
from tessera.synth.synthesizer import Synthesizer
from tessera.workload.builders import marginal_families
from tessera.workload.families import Partition
from tessera.workload.workload import Workload

SCHEMA = """attributes:
  sex: {type: categorical, values: [F, M], missing: true}
  age: {type: integer, min: 18, max: 25}
  income: {type: binned, edges: [0, 10, 50, 100]}
  ok: {type: boolean}
"""
QUERIES = ["TRUE", "sex = 'F'", "age < 21", "income >= 50", "ok = true",
           "sex = 'M' AND ok = false", "age >= 23 AND income < 10"]
OTHER = ["age = 19", "income < 10 AND sex = 'F'", "ok = false AND age >= 20"]
SEX = {"F", "M", None}
AGES = set(range(18, 26))
BINS = {"[0, 10)", "[10, 50)", "[50, 100)"}


@pytest.fixture(scope="module")
def domain() -> Domain:
    return Domain.from_dict(__import__("yaml").safe_load(SCHEMA))


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 400
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)
    return pd.DataFrame({"sex": sex, "age": rng.integers(18, 26, n),
                         "income": np.round(rng.uniform(0, 99.5, n), 1),
                         "ok": rng.random(n) < np.where(sex == "F", 0.7, 0.3)})


@pytest.fixture(scope="module")
def workload(domain: Domain) -> Workload:
    return Workload.from_sql(QUERIES, domain)


@pytest.fixture(scope="module")
def fitted(data: pd.DataFrame, workload: Workload) -> dict[str, FittedSynthesizer]:
    out = {m: Synthesizer(m, rows=300).fit(data, workload, Budget.of(epsilon=2.0), seed=3)
           for m in ("adaptive", "ipmwu", "mwem")}
    release = answer(data, workload, Budget.of(epsilon=2.0), neighbours="substitute", seed=3)
    out["lp"] = Synthesizer("lp", rows=300).fit(data, workload, release=release, seed=3)
    return out


# -- rows in the schema's values, exact answers ------------------------------------------------


@pytest.mark.parametrize("method", ["adaptive", "ipmwu", "mwem", "lp"])
def test_sample_is_in_the_schemas_values(fitted: dict[str, FittedSynthesizer],
                                         method: str) -> None:
    f = fitted[method]
    frame = f.sample()
    assert list(frame.columns) == ["sex", "age", "income", "ok"]
    assert len(frame) == 300 and f.rows.shape == (300, 4)
    assert set(frame["sex"]) <= SEX
    assert set(frame["age"]) <= AGES and all(isinstance(v, (int, np.integer))
                                             for v in frame["age"])
    assert set(frame["income"]) <= BINS
    assert set(frame["ok"]) <= {True, False}
    assert frame.attrs["private"] is False and not f.private
    fresh = f.sample(50, rng=1)
    assert len(fresh) == 50 and set(fresh["income"]) <= BINS
    assert f.sample(50, rng=1).equals(fresh)  # sampling is seeded post-processing


@pytest.mark.parametrize("method", ["adaptive", "ipmwu", "mwem", "lp"])
def test_answers_are_those_of_the_output_distribution(fitted: dict[str, FittedSynthesizer],
                                                      workload: Workload, domain: Domain,
                                                      method: str) -> None:
    f = fitted[method]
    a = f.answers()
    assert a.shape == (workload.n_queries,) and a[0] == pytest.approx(1.0)
    assert np.all((a >= -1e-12) & (a <= 1 + 1e-12))
    # another workload: exact answers agree with a large fresh sample (4σ ≤ 0.009)
    other = Workload.from_sql(OTHER, domain)
    rows = f.sample(100_000, rng=7)
    empirical = tessera.count(synthetic_frame(rows, domain), other).answers / len(rows)
    np.testing.assert_allclose(f.answers(other), empirical, atol=0.01)
    if method == "mwem":
        np.testing.assert_allclose(a, f.result.average_answers())


def test_ipmwu_answers_for_new_queries_match_mwem(data: pd.DataFrame, workload: Workload,
                                                  domain: Domain) -> None:
    """Same seed, exact expectations: the same trajectory, so the same average distribution;
    IPMWU's answers to unfitted queries (θ = 0 extension) equal MWEM's explicit ones."""
    common = dict(rounds=15, expectations="exact")
    a = Synthesizer("ipmwu", **common).fit(data, workload, Budget.of(rho=0.5), seed=5)
    b = Synthesizer("mwem", **common).fit(data, workload, Budget.of(rho=0.5), seed=5)
    np.testing.assert_array_equal(a.record.transcript.selections,
                                  b.record.transcript.selections)
    other = Workload.from_sql(OTHER, domain)
    np.testing.assert_allclose(a.answers(other), b.answers(other), atol=1e-9)
    np.testing.assert_allclose(a.answers(), b.answers(), atol=1e-9)


def test_seeded_fits_are_reproducible(data: pd.DataFrame, workload: Workload) -> None:
    s = Synthesizer("ipmwu", rounds=10)
    a = s.fit(data, workload, Budget.of(epsilon=1.0), seed=11)
    b = s.fit(data, workload, Budget.of(epsilon=1.0), seed=11)
    np.testing.assert_array_equal(a.rows, b.rows)


# -- methods and options -------------------------------------------------------------------------


def test_methods_and_the_default() -> None:
    with pytest.raises(TesseraError, match="unknown method") as e:
        Synthesizer("pgm")
    assert "adaptive, ipmwu, mwem, lp" in str(e.value.hint)
    with pytest.raises(TesseraError, match="no option 'step'"):
        Synthesizer("adaptive", step=0.1)
    with pytest.raises(TesseraError, match="no option 'rng'"):  # fit's own, not an option
        Synthesizer("ipmwu", rng=1)
    # a budget is a constructor argument (not an option): tests/synth/test_ecosystem_api.py
    assert Synthesizer("ipmwu", epsilon=1.0).options == ()
    assert Synthesizer().method == "adaptive" and tessera.Synthesizer is Synthesizer
    assert Synthesizer("mwem", rounds=3) == Synthesizer("mwem", rounds=3)  # a frozen config


def test_lp_needs_a_release(data: pd.DataFrame, workload: Workload, domain: Domain) -> None:
    with pytest.raises(TesseraError, match="release"):
        Synthesizer("lp").fit(data, workload, Budget.of(epsilon=1.0))
    with pytest.raises(QueryError, match="tautology"):
        no_total = Workload.from_sql(QUERIES[1:], domain)
        release = answer(data, no_total, Budget.of(epsilon=1.0), seed=1)  # add/remove
        Synthesizer("lp").fit(data, no_total, release=release)


# -- budgets and the run record ------------------------------------------------------------------


def test_budget_targets() -> None:
    t = Target.of(Budget.of(epsilon=1.5))
    assert (t.definition, t.value, t.kwargs()) == (Definition.PURE, 1.5, {"epsilon": 1.5})
    t = Target.of(Budget.of(rho=0.3))
    assert (t.definition, t.value, t.kwargs()) == (Definition.ZCDP, 0.3, {"rho": 0.3})
    t = Target.of(Budget.of(mu=1.0))
    assert (t.definition, t.value) == (Definition.ZCDP, 0.5)
    assert "NOT proven" in t.notes[0]
    t = Target.of(Budget.of(epsilon=1.0, delta=1e-6))
    assert t.definition is Definition.ZCDP
    assert t.value == rho_for_epsilon_delta(1.0, 1e-6) and 1e-6 in t.deltas
    with pytest.raises(TesseraError, match="not a budget"):
        Target.of(1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("budget", [Budget.of(epsilon=1.0), Budget.of(rho=0.2),
                                    Budget.of(mu=0.8), Budget.of(epsilon=2.0, delta=1e-5)],
                         ids=["pure", "zcdp", "gdp", "approx"])
def test_run_record_spent_is_the_proof(data: pd.DataFrame, workload: Workload,
                                       budget: Budget) -> None:
    f = Synthesizer("ipmwu", rounds=8).fit(data, workload, budget, seed=2,
                                           neighbours="add-remove")
    rec = json.loads(json.dumps(f.run_record()))  # JSON-ready
    r = f.record
    assert rec["spent"][0] == r.proved().to_dict()
    zcdp = [g for g in rec["spent"] if g["definition_token"] == "zcdp"]
    assert zcdp == [r.proved(Definition.ZCDP).to_dict()]
    deltas = [g["delta"] for g in rec["spent"] if g["definition_token"] == "approx"]
    assert {1e-5, 1e-6, 1e-9} <= set(deltas)
    assert rec["private"] is False and rec["neighbours"] == "add-remove"
    assert rec["parameters"]["rounds"] == 8 and rec["width"] == r.width
    assert rec["timings"]["n_rounds"] == 8 and rec["rows"] == f.rows.shape[0]
    spent = r.proved()
    assert (spent.epsilon if spent.definition is Definition.PURE else spent.rho) \
        <= Target.of(budget).value
    if budget.definition is Definition.GDP:
        assert rec["not_proven"][0]["definition"] == "gdp"
    if budget.definition is Definition.APPROX:
        at = [g for g in rec["spent"] if g.get("delta") == 1e-5][0]
        assert at["epsilon"] <= 2.0


def test_progress_reports_every_round(data: pd.DataFrame, workload: Workload) -> None:
    events = []
    f = Synthesizer("mwem", rounds=6).fit(data, workload, Budget.of(epsilon=1.0), seed=1,
                                          progress=events.append)
    assert [(p.step, p.phase) for p in events if p.step != "round"] == [
        ("counting", "start"), ("counting", "end"), ("setup", "start"), ("setup", "end"),
        ("sampling", "start"), ("sampling", "end")]
    seen = [p for p in events if p.step == "round"]
    assert [p.round for p in seen] == list(range(1, 7))
    assert all(p.rounds == 6 and not p.rounds_bound and p.error >= 0 for p in seen)
    assert seen[0].query == seen[0].detail.query  # the round's own record, as before
    assert seen[-1].spent == pytest.approx(f.record.spent.epsilon)
    assert seen[-1].remaining == pytest.approx(0.0, abs=1e-12)
    # add/remove (the default): the noisy total's 5 % first, then 6 rounds of the rest
    assert seen[0].remaining == pytest.approx(1.0 - 0.05 - 0.95 / 6)


# -- the ledger ----------------------------------------------------------------------------------


def _ledger(tmp_path: Path, domain: Domain, total: float, neighbours: str,
            definition: str = "pure") -> Ledger:
    return Ledger.init(tmp_path / f"{neighbours}.db", total=total, definition=definition,
                       neighbours=neighbours, domain=domain, dataset="test")


@pytest.mark.parametrize("neighbours", ["add-remove", "substitute"])
def test_the_ledger_is_charged_the_runs_budget(tmp_path: Path, data: pd.DataFrame,
                                               workload: Workload, domain: Domain,
                                               neighbours: str) -> None:
    book = _ledger(tmp_path, domain, 3.0, neighbours)
    f = Synthesizer("ipmwu", rounds=5).fit(data, workload, Budget.of(epsilon=1.0), seed=1,
                                           neighbours=neighbours, ledger=book)
    assert book.spent() == 1.0
    (c,) = book.releases()
    assert c.status == "released" and f.charge.release_id == c.release_id
    assert f.run_record()["ledger"]["status"] == "released"
    # a later release over predicate queries composes with it per row (pair)
    w = Workload.from_sql(["age = 18", "age = 19"], domain)  # disjoint
    after = book.charge(w, [0.25, 0.25], label="q", mechanism="test").spent_after
    assert after == (1.25 if neighbours == "add-remove" else 1.5)


def test_substitution_needs_the_identity_charge(domain: Domain) -> None:
    """Replacing a row never changes the tautology's count: charged alone it would cost 0."""
    w, costs = ledger_charge(domain, 1.0, Neighbours.ADD_REMOVE)
    assert w.names == ("synthetic data (every row)",) and costs.tolist() == [1.0]
    w, costs = ledger_charge(domain, 1.0, Neighbours.SUBSTITUTE)
    assert w.n_queries == domain.size and np.all(costs == 0.5)
    big = Domain.from_dict({f"x{i}": 2 for i in range(30)})
    with pytest.raises(tessera.ResourceError, match="identity"):
        ledger_charge(big, 1.0, Neighbours.SUBSTITUTE)


def test_overspending_is_refused_and_nothing_is_charged(tmp_path: Path, data: pd.DataFrame,
                                                        workload: Workload,
                                                        domain: Domain) -> None:
    book = _ledger(tmp_path, domain, 0.5, "add-remove")
    with pytest.raises(BudgetExceeded):
        Synthesizer("ipmwu").fit(data, workload, Budget.of(epsilon=1.0), ledger=book)
    assert book.releases() == () and book.spent() == 0.0


def test_a_data_error_is_reported_before_any_charge(tmp_path: Path, workload: Workload,
                                                    domain: Domain) -> None:
    """Values outside the schema reach the curator before the ledger is charged: no budget is
    spent on a typo, and no data-dependent error is raised after a charge."""
    book = _ledger(tmp_path, domain, 2.0, "add-remove")
    bad = pd.DataFrame({"sex": ["F", "X"], "age": [20, 21], "income": [5.0, 7.0],
                        "ok": [True, False]})
    with pytest.raises(DataError):
        Synthesizer("ipmwu").fit(bad, workload, Budget.of(epsilon=1.0), ledger=book)
    assert book.releases() == () and book.spent() == 0.0


def test_runs_that_would_fail_on_public_inputs_are_refused_before_the_charge(
        tmp_path: Path, data: pd.DataFrame, workload: Workload, domain: Domain) -> None:
    book = _ledger(tmp_path, domain, 5.0, "add-remove")
    with pytest.raises(TesseraError, match="rows"):
        Synthesizer("ipmwu", rows=-1).fit(data, workload, Budget.of(epsilon=1.0), ledger=book)
    with pytest.raises(TesseraError, match="expectations"):
        Synthesizer("mwem", expectations="guess").fit(data, workload, Budget.of(epsilon=1.0),
                                                      ledger=book)
    with pytest.raises(tessera.ResourceError):
        Synthesizer("mwem", max_cells=100).fit(data, workload, Budget.of(epsilon=1.0),
                                               ledger=book)
    assert book.releases() == ()


def test_a_ledger_of_another_definition_or_relation_is_refused(
        tmp_path: Path, data: pd.DataFrame, workload: Workload, domain: Domain) -> None:
    zcdp = _ledger(tmp_path, domain, 1.0, "add-remove", definition="zcdp")
    with pytest.raises(TesseraError, match="ρ-zCDP"):
        Synthesizer().fit(data, workload, Budget.of(epsilon=0.5), ledger=zcdp)
    substitute = _ledger(tmp_path, domain, 1.0, "substitute")
    # the default relation is add/remove (issue 19 item 8): the message says how to agree
    with pytest.raises(TesseraError, match=r"--neighbours substitute"):
        Synthesizer().fit(data, workload, Budget.of(epsilon=0.5), ledger=substitute)
    with pytest.raises(TesseraError, match="Ledger.open"):
        Synthesizer().fit(data, workload, Budget.of(epsilon=0.5), ledger=str(zcdp.path))
    assert zcdp.releases() == () and substitute.releases() == ()


# -- evaluation ----------------------------------------------------------------------------------


def test_evaluate_matches_a_pandas_computation(tmp_path: Path, data: pd.DataFrame,
                                               domain: Domain) -> None:
    queries = Workload.from_sql(["sex = 'F'", "age < 21", "income >= 50",
                                 "sex = 'M' AND ok = false"], domain).queries
    w = Workload.of(domain, queries, partitions=[Partition.marginal(domain, ["sex", "income"])])
    rng = np.random.default_rng(4)
    m = 250
    synth = pd.DataFrame({"sex": rng.choice(np.array(["F", "M", None], dtype=object), m),
                          "age": rng.integers(18, 26, m),
                          "income": rng.choice(sorted(BINS), m),
                          "ok": rng.random(m) < 0.5})
    ev = evaluate(data, synth, w)

    real_income = pd.cut(data["income"], [0, 10, 50, 100], right=False,
                         labels=["[0, 10)", "[10, 50)", "[50, 100)"]).astype(str)
    real = [(data.sex == "F").mean(), (data.age < 21).mean(), (data.income >= 50).mean(),
            ((data.sex == "M") & ~data.ok).mean()]
    fake = [(synth.sex == "F").mean(), (synth.age < 21).mean(),
            (synth.income == "[50, 100)").mean(), ((synth.sex == "M") & ~synth.ok).mean()]
    errors = np.abs(np.array(real) - np.array(fake))
    np.testing.assert_allclose(ev.errors[:4], errors, atol=1e-12)
    # the marginal over (sex, income): cells in row-major order, sex NULL last
    sexes, bins = ["F", "M", None], sorted(BINS)
    cells_real = [((data.sex == s) & (real_income == b)).mean() for s in sexes for b in bins]
    cells_fake = [((synth.sex.isna() if s is None else synth.sex == s) & (synth.income == b)
                   ).mean() for s in sexes for b in bins]
    l1 = float(np.abs(np.array(cells_real) - np.array(cells_fake)).sum())
    assert ev.family_l1 == {"marginal(sex,income)": pytest.approx(l1, abs=1e-12)}
    assert ev.mean_family_l1 == pytest.approx(l1)
    all_errors = np.concatenate([errors, np.abs(np.array(cells_real) - np.array(cells_fake))])
    assert ev.max_error == pytest.approx(all_errors.max())
    assert ev.mean_error == pytest.approx(all_errors.mean())
    assert ev.real_rows == len(data) and ev.synthetic_rows == m
    doc = json.loads(json.dumps(ev.to_dict()))
    assert len(doc["per_query"]) == w.n_queries and "NOT PRIVATE" in doc["note"]
    assert ev.plot(tmp_path / "errors.png").stat().st_size > 0  # with the per-family panel


def test_evaluate_reads_written_rows(tmp_path: Path, fitted: dict[str, FittedSynthesizer],
                                     data: pd.DataFrame, workload: Workload) -> None:
    f = fitted["ipmwu"]
    direct = evaluate(data, f, workload)
    for name in ("rows.csv", "rows.parquet"):
        path = f.write(tmp_path / name)
        np.testing.assert_allclose(evaluate(data, path, workload).errors, direct.errors)
    assert (tmp_path / "rows.csv").read_text().startswith(f"# {NOT_PRIVATE_MARK}\n")
    meta = pq.read_schema(tmp_path / "rows.parquet").metadata
    assert meta[b"tessera.private"] == b"false"
    assert json.loads(meta[b"tessera.record"])["method"] == "ipmwu"
    png = direct.plot(tmp_path / "errors.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -- the command line ----------------------------------------------------------------------------


def test_cli_synth_and_evaluate(tmp_path: Path, data: pd.DataFrame) -> None:
    schema, wl, csv = tmp_path / "schema.yaml", tmp_path / "w.sql", tmp_path / "data.csv"
    schema.write_text(SCHEMA)
    wl.write_text("\n".join(QUERIES) + "\n")
    data.to_csv(csv, index=False)
    runner = CliRunner()
    led = tmp_path / "budget.db"
    r = runner.invoke(app, ["ledger", "init", str(led), "--schema", str(schema), "--epsilon",
                            "1.5"])  # synth and ledger agree on their default relation
    assert r.exit_code == 0, r.output
    out, record = tmp_path / "synth.csv", tmp_path / "run.json"
    r = runner.invoke(app, ["synth", str(csv), str(wl), "--schema", str(schema), "--epsilon",
                            "1", "--rows", "120", "--rounds", "10", "-o", str(out), "--ledger",
                            str(led), "--record", str(record), "--seed", "7"])
    assert r.exit_code == 0, r.output
    assert "NOT PRIVATE" in r.output and "spent 0 → 1" in r.output
    lines = out.read_text().splitlines()
    assert lines[0] == f"# {NOT_PRIVATE_MARK}" and lines[1] == "sex,age,income,ok"
    assert len(lines) == 122
    doc = json.loads(record.read_text())
    assert doc["spent"][0]["epsilon"] <= 1.0 and doc["ledger"]["status"] == "released"
    assert doc["parameters"]["rounds"] == 10

    # over budget: refused, nothing written, nothing charged
    refused = tmp_path / "refused.csv"
    r = runner.invoke(app, ["synth", str(csv), str(wl), "--schema", str(schema), "--epsilon",
                            "1", "-o", str(refused), "--ledger", str(led), "--seed", "7"])
    assert r.exit_code == 2 and "refused" in r.output
    assert not refused.exists() and Ledger.open(led).spent() == 1.0

    r = runner.invoke(app, ["synth", str(csv), str(wl), "--schema", str(schema), "--epsilon",
                            "1", "-o", str(refused), "--method", "pgm"])
    assert r.exit_code == 2 and "unknown method" in r.output and not refused.exists()

    png = tmp_path / "errors.png"
    r = runner.invoke(app, ["evaluate", str(csv), str(out), str(wl), "--schema", str(schema),
                            "--plot", str(png), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["synthetic_rows"] == 120 and doc["real_rows"] == len(data)
    expected = evaluate(data, pd.read_csv(out, skiprows=1), Workload.load(wl, Domain.load(schema)))
    assert doc["max_error"] == pytest.approx(expected.max_error)
    assert png.exists()

    # without a workload: the one synth fits without one (every 2-way marginal), said so
    r = runner.invoke(app, ["evaluate", str(csv), str(out), "--schema", str(schema), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    domain = Domain.load(schema)
    pairs = evaluate(data, pd.read_csv(out, skiprows=1), marginal_families(domain, 2))
    assert doc["notes"] == ["default workload: all 6 2-way marginals of the schema's 4 "
                            "attributes (no workload was given to the evaluation)"]
    assert len(doc["families"]) == 6
    assert doc["mean_family_l1"] == pytest.approx(pairs.mean_family_l1)


def test_cli_lp(tmp_path: Path, data: pd.DataFrame) -> None:
    schema, wl, csv = tmp_path / "schema.yaml", tmp_path / "w.sql", tmp_path / "data.csv"
    schema.write_text(SCHEMA)
    wl.write_text("\n".join(QUERIES) + "\n")
    data.to_csv(csv, index=False)
    led = tmp_path / "budget.db"
    Ledger.init(led, total=1.0, definition="pure", neighbours="add-remove",
                domain=Domain.load(schema), dataset="t")
    out = tmp_path / "lp.parquet"
    r = CliRunner().invoke(app, ["synth", str(csv), str(wl), "--schema", str(schema),
                                 "--epsilon", "1", "--method", "lp", "--rows", "200",
                                 "--neighbours", "add-remove", "--ledger", str(led), "-o",
                                 str(out), "--seed", "1"])
    assert r.exit_code == 0, r.output
    frame = pd.read_parquet(out)
    assert len(frame) == 200 and set(frame["income"]) <= BINS
    (c,) = Ledger.open(led).releases()
    assert c.status == "released" and math.isclose(c.spent_after, 1.0, rel_tol=1e-9)


# -- issue 19 items 3 and 8 ----------------------------------------------------------------------


def test_issue19_item3_adaptive_rounds_below_its_initialisation_are_refused_before_the_charge(
        tmp_path: Path, data: pd.DataFrame, workload: Workload, domain: Domain) -> None:
    """4 attributes, measure_fraction 0.9: the initialisation spends 4 × 0.9/T of the budget, so
    T = 3 (< 3.6) would overspend after the charge; refused before it, and T = 4 runs."""
    from tessera.synth.accounting import Budget as RunBudget
    from tessera.synth.candidates import candidates
    from tessera.synth.synthesizer import initial_spend

    run = RunBudget.of(epsilon=0.5)
    cands = candidates(workload, 10_000)
    init, attrs, T = initial_spend(cands, run, 3, 0.9)
    assert (attrs, T) == (4, 3) and init > Fraction(0.5)  # the overspend is real
    assert initial_spend(cands, run, 4, 0.9)[0] <= Fraction(0.5)
    book = _ledger(tmp_path, domain, 1.0, "add-remove")
    with pytest.raises(TesseraError, match=r"rounds ≥ 4"):
        Synthesizer("adaptive", rounds=3).fit(data, workload, Budget.of(epsilon=0.5),
                                               ledger=book)
    assert book.releases() == () and book.spent() == 0.0
    f = Synthesizer("adaptive", rounds=4, rows=50).fit(data, workload, Budget.of(epsilon=0.5),
                                                       ledger=book, seed=1)
    assert f.record.spent.epsilon <= 0.5 and book.spent() == 0.5


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan, "3", True])
def test_a_bad_start_rule_is_refused_before_the_charge(
        tmp_path: Path, data: pd.DataFrame, workload: Workload, domain: Domain,
        bad: object) -> None:
    book = _ledger(tmp_path, domain, 1.0, "add-remove")
    with pytest.raises(TesseraError, match="cell_sigmas"):
        Synthesizer("adaptive", cell_sigmas=bad).fit(data, workload, Budget.of(epsilon=0.5),
                                                     ledger=book)
    assert book.releases() == () and book.spent() == 0.0


@pytest.mark.parametrize("bad", [1.0, 0.5, -2.0, math.inf, math.nan, "2", True])
def test_a_bad_annealing_step_is_refused_before_the_charge(
        tmp_path: Path, data: pd.DataFrame, workload: Workload, domain: Domain,
        bad: object) -> None:
    """A step ≤ 1 would never lower the noise (or raise it): refused before anything is read
    or charged."""
    book = _ledger(tmp_path, domain, 1.0, "add-remove")
    with pytest.raises(TesseraError, match="anneal"):
        Synthesizer("adaptive", anneal=bad).fit(data, workload, Budget.of(epsilon=0.5),
                                                ledger=book)
    assert book.releases() == () and book.spent() == 0.0


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan, "2.5", True])
def test_a_bad_prior_scale_is_refused_before_the_charge(
        tmp_path: Path, data: pd.DataFrame, workload: Workload, domain: Domain,
        bad: object) -> None:
    book = _ledger(tmp_path, domain, 1.0, "add-remove")
    with pytest.raises(TesseraError, match="prior_scale"):
        Synthesizer("adaptive", prior_scale=bad).fit(data, workload, Budget.of(epsilon=0.5),
                                                     ledger=book)
    assert book.releases() == () and book.spent() == 0.0


def test_issue19_item8_one_default_neighbour_relation(tmp_path: Path, data: pd.DataFrame,
                                                      workload: Workload) -> None:
    """Synthesis, answers, ledgers and the CLI share add/remove as the default."""
    import inspect

    from tessera.cli.synth import synth as synth_command
    from tessera.privacy import DEFAULT_NEIGHBOURS

    assert DEFAULT_NEIGHBOURS is Neighbours.ADD_REMOVE
    f = Synthesizer("ipmwu", rounds=3, rows=10).fit(data, workload, Budget.of(epsilon=1.0),
                                                    seed=1)
    assert f.neighbours is Neighbours.ADD_REMOVE
    assert f.record.steps[0].role == "total"  # n is measured, not published
    assert inspect.signature(answer).parameters["neighbours"].default is Neighbours.ADD_REMOVE
    assert inspect.signature(synth_command).parameters["neighbours"].default == "add-remove"
    assert inspect.signature(Synthesizer.preflight).parameters["neighbours"].default \
        is Neighbours.ADD_REMOVE


# -- issue 20 item 3: every method usable from the CLI -------------------------------------------


def test_progress_lines_when_stderr_is_not_a_terminal(tmp_path: Path, data: pd.DataFrame,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """CliRunner's stderr is no terminal: plain lines (round, budget spent, elapsed) instead of
    a bar that never shows; every PLAIN_EVERY seconds (0 here: every round). (More in
    tests/synth/test_progress.py.)"""
    import tessera.cli.synth as cli_synth

    monkeypatch.setattr(cli_synth, "PLAIN_EVERY", 0.0)
    schema, wl, csv = tmp_path / "schema.yaml", tmp_path / "w.sql", tmp_path / "data.csv"
    schema.write_text(SCHEMA)
    wl.write_text("\n".join(QUERIES) + "\n")
    data.to_csv(csv, index=False)
    for method, first in (("ipmwu", "synth: round 1/5, spent"), ("adaptive", "synth: round 1/"),
                          ("lp", "synth: LP iteration 1,")):
        r = CliRunner().invoke(app, ["synth", str(csv), str(wl), "--schema", str(schema),
                                     "--epsilon", "1", "--method", method, "-o",
                                     str(tmp_path / f"{method}.csv"), "--seed", "1"]
                               + (["--rounds", "5"] if method == "ipmwu" else []))
        assert r.exit_code == 0, r.output
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("synth: ")]
        firsts = [ln for ln in lines if ln.startswith(first)]
        assert firsts and "elapsed" in firsts[0], r.stderr
    monkeypatch.setattr(cli_synth, "PLAIN_EVERY", 3600.0)  # a short run: no round lines
    r = CliRunner().invoke(app, ["synth", str(csv), str(wl), "--schema", str(schema),
                                 "--epsilon", "1", "--method", "ipmwu", "--rounds", "5", "-o",
                                 str(tmp_path / "quiet.csv"), "--seed", "1"])
    assert r.exit_code == 0 and "synth: round" not in r.stderr
    assert "synth: started" in r.stderr and "synth: done" in r.stderr


def test_lp_under_add_remove_adds_and_charges_the_tautology(tmp_path: Path, data: pd.DataFrame,
                                                            domain: Domain) -> None:
    """A workload without TRUE: the LP adds it, the release (and the ledger) pay for it, the
    record says so, and n̂ rows come out."""
    w = Workload.from_sql(QUERIES[1:], domain)  # no TRUE
    book = _ledger(tmp_path, domain, 1.0, "add-remove")
    f = Synthesizer("lp").fit(data, w, Budget.of(epsilon=1.0), ledger=book, seed=2,
                              answer=answer)
    rec = f.run_record()
    assert any("TRUE was added" in n for n in rec["budget"]["notes"])
    assert rec["budget"]["asked"]["epsilon"] == 1.0 and rec["lp"]["n_source"].startswith(
        "noisy total")
    (charged,) = book.releases()
    assert charged.n_queries == w.n_queries + 1 and book.spent() == pytest.approx(1.0)
    assert f.rows.shape[0] == round(rec["lp"]["n"])  # n̂ rows by default
    assert abs(f.rows.shape[0] - len(data)) < 50  # n̂ = 400 + discrete Laplace noise
    with_true = Workload.from_sql(QUERIES, domain)
    g = Synthesizer("lp").fit(data, with_true, Budget.of(epsilon=1.0), seed=2, answer=answer)
    assert g.run_record()["budget"]["notes"] == []  # nothing added when TRUE is there


@pytest.mark.parametrize("method", ["adaptive", "ipmwu", "mwem"])
def test_default_rows_are_n(data: pd.DataFrame, workload: Workload, method: str) -> None:
    """As many rows as the data: n under substitution, the noisy n̂ under add/remove."""
    sub = Synthesizer(method, rounds=4).fit(data, workload, Budget.of(epsilon=1.0), seed=1,
                                            neighbours="substitute")
    assert sub.rows.shape[0] == len(data)
    ar = Synthesizer(method, rounds=4).fit(data, workload, Budget.of(epsilon=1.0), seed=1)
    n_hat = ar.record.parameters.normaliser
    assert ar.rows.shape[0] == round(n_hat) and n_hat != len(data)


# -- issue 20 item 5: every query kind ------------------------------------------------------------


def test_every_query_kind_of_the_workload_layer(data: pd.DataFrame, domain: Domain) -> None:
    """Conjunctions, clauses (OR, NOT) and, over two-valued attributes, BDD queries: every
    method fits them, and the exact answers of its output distribution agree with the rows it
    draws (the rows are drawn from it: within 5 binomial standard errors)."""
    from tessera.engine import bdd_manager, conjunction, disjunction, parity

    clauses = Workload.from_sql(["TRUE", "sex = 'F' OR ok = true",
                                 "age < 21 OR (income >= 50 AND sex = 'M')", "NOT (ok = true)",
                                 "age >= 23"], domain)
    assert {type(q).__name__ for q in clauses.queries} == {"Query", "BooleanClause"}
    for method in ("adaptive", "ipmwu", "mwem", "lp"):
        f = Synthesizer(method, rows=4000).fit(data, clauses, Budget.of(epsilon=2.0), seed=1,
                                               answer=answer)
        on_rows = evaluate(data, f.sample(), clauses)
        exact = f.answers()
        assert exact.shape == (5,) and np.all((exact >= -1e-9) & (exact <= 1 + 1e-9))
        assert on_rows.synthetic_rows == 4000
        drawn = on_rows.synthetic  # fractions of the drawn rows
        assert np.all(np.abs(drawn - exact) <= 5 * np.sqrt(0.25 / 4000) + 1e-9), method

    binary = Domain.from_dict({"attributes": {n: {"type": "boolean"} for n in "abcdef"}})
    rng = np.random.default_rng(5)
    X = rng.integers(0, 2, size=(600, 6))
    X[:, 1] = X[:, 0] ^ (rng.random(600) < 0.1)  # b follows a
    mgr = bdd_manager(binary.names)
    bdds = [parity(mgr, {"a": 1, "b": 1}), disjunction(mgr, ["c", "d", "e"]),
            conjunction(mgr, {"a": 1, "f": 0})]
    truth = np.array([np.mean(q.evaluate(binary, X)) for q in bdds])
    for method in ("adaptive", "ipmwu", "mwem"):
        f = Synthesizer(method).fit(X, bdds, Budget.of(epsilon=4.0), seed=2, domain=binary)
        assert f.rows.shape[1] == 6 and f.workload.names == ("q0", "q1", "q2")
        got = f.answers()
        drawn = np.array([np.mean(q.evaluate(binary, f.rows)) for q in bdds])
        assert np.all(np.abs(drawn - got) <= 5 * np.sqrt(0.25 / f.rows.shape[0]) + 1e-9)
        assert abs(got[0] - truth[0]) < 0.15, (method, got, truth)  # a ⊕ b is rare: learnt
    with pytest.raises(QueryError, match="two values"):
        Synthesizer("ipmwu").fit(data, [parity(bdd_manager(["age"]), ["age"])],
                                 Budget.of(epsilon=1.0), domain=domain)
    with pytest.raises(QueryError, match="domain=domain"):
        Synthesizer("ipmwu").fit(X, bdds, Budget.of(epsilon=1.0))
