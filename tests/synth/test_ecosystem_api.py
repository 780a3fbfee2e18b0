"""``tessera.Synthesizer`` called as SmartNoise, SDV and synthcity are: the budget and the schema
in the constructor, a default workload, ``fit(df)``, ``sample(n)`` and ``fit_sample(df)``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import tessera as ts
from tessera.accounting.zcdp import rho_for_epsilon_delta
from tessera.cli.main import app
from tessera.errors import QueryError, TesseraError
from tessera.release import Budget
from tessera.schema.domain import Domain
from tessera.workload.builders import marginal_families
from tessera.workload.workload import Workload

SCHEMA = """attributes:
  sex: {type: categorical, values: [F, M], missing: true}
  age: {type: integer, min: 18, max: 25}
  income: {type: binned, edges: [0, 10, 50, 100]}
  ok: {type: boolean}
"""
FAST = {"rounds": 8}  # a short run: these tests check the API, not the fit's accuracy


@pytest.fixture(scope="module")
def domain() -> Domain:
    return Domain.from_dict(yaml.safe_load(SCHEMA))


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 300
    sex = rng.choice(np.array(["F", "M"], dtype=object), n)
    return pd.DataFrame({"sex": sex, "age": rng.integers(18, 26, n),
                         "income": np.round(rng.uniform(0, 99.5, n), 1),
                         "ok": rng.random(n) < np.where(sex == "F", 0.7, 0.3)})


def test_fit_sample_gives_n_rows_of_the_schema_for_the_two_way_default(
        domain: Domain, data: pd.DataFrame) -> None:
    synth = ts.Synthesizer(epsilon=1.0, domain=domain, seed=1, **FAST)
    rows = synth.fit_sample(data, n=57)
    assert isinstance(rows, pd.DataFrame)
    assert list(rows.columns) == list(domain.names) and len(rows) == 57
    assert set(rows["age"]) <= set(range(18, 26))
    assert rows.attrs["private"] is False  # seeded: NOT PRIVATE, and it says so
    fitted = synth.fitted
    assert fitted.workload == marginal_families(domain, 2)
    record = fitted.run_record()
    assert record["budget"]["asked"]["epsilon"] == 1.0
    assert any("all 6 2-way marginals" in note for note in record["notes"])
    more = synth.sample(5)  # more draws from the same fit: post-processing
    assert len(more) == 5 and list(more.columns) == list(domain.names)


def test_fit_sample_without_n_gives_the_runs_rows(domain: Domain, data: pd.DataFrame) -> None:
    synth = ts.Synthesizer(rho=0.5, domain=domain, seed=2, rows=40, **FAST)
    rows = synth.fit_sample(data)
    assert len(rows) == 40 and list(rows.columns) == list(domain.names)


def test_default_falls_back_to_one_way_under_a_small_memory_limit(
        domain: Domain, data: pd.DataFrame) -> None:
    # 2-way: 85 cells (680 bytes of counts); 1-way: 16 cells (128 bytes)
    synth = ts.Synthesizer(epsilon=1.0, domain=domain, seed=3, answer_memory=256, **FAST)
    rows = synth.fit_sample(data, n=20)
    assert len(rows) == 20 and list(rows.columns) == list(domain.names)
    fitted = synth.fitted
    assert fitted.workload == marginal_families(domain, 1)
    (note,) = [n for n in fitted.run_record()["notes"] if n.startswith("default workload")]
    assert "all 4 1-way marginals" in note and "2-way marginals were refused" in note
    assert "memory limit of 256" in note  # why: the limit it did not fit


def test_default_falls_back_when_the_engine_refuses_the_two_way_model(
        domain: Domain, data: pd.DataFrame) -> None:
    # the 2-way model's junction tree holds all 144 cells (18.5 KiB); the 1-way one fits
    synth = ts.Synthesizer("ipmwu", epsilon=1.0, domain=domain, seed=3, memory_limit=8000,
                           rounds=5)
    rows = synth.fit_sample(data, n=20)
    assert len(rows) == 20 and list(rows.columns) == list(domain.names)
    assert synth.fitted.workload == marginal_families(domain, 1)
    (note,) = synth.fitted.run_record()["notes"]
    assert "all 4 1-way marginals" in note and "the dynamic program needs" in note


def test_an_explicit_workload_overrides_the_default(domain: Domain, data: pd.DataFrame) -> None:
    w = Workload.from_sql(["sex = 'F'", "age < 21 AND ok = true"], domain)
    given = ts.Synthesizer(epsilon=1.0, domain=domain, workload=w, seed=4, **FAST)
    given.fit(data)
    assert given.fitted.workload == w
    assert "notes" not in given.fitted.run_record()
    at_fit = ts.Synthesizer(epsilon=1.0, domain=domain, seed=4, **FAST)
    at_fit.fit(data, workload=w)
    assert at_fit.fitted.workload == w


def test_a_budget_in_the_constructor_and_in_fit_is_refused(
        domain: Domain, data: pd.DataFrame) -> None:
    synth = ts.Synthesizer(epsilon=1.0, domain=domain)
    with pytest.raises(TesseraError, match="both to the constructor and to fit"):
        synth.fit(data, marginal_families(domain, 1), Budget.of(epsilon=1.0))
    with pytest.raises(TesseraError, match="a budget is needed"):
        ts.Synthesizer(domain=domain).fit(data)
    with pytest.raises(TesseraError, match="not fitted yet"):
        synth.sample(3)


def test_constructor_inputs_are_checked_before_any_data(domain: Domain,
                                                        data: pd.DataFrame) -> None:
    with pytest.raises(TesseraError, match="one budget"):
        ts.Synthesizer(epsilon=1.0, rho=0.5)
    with pytest.raises(TesseraError, match="delta= goes with epsilon"):
        ts.Synthesizer(delta=1e-6)
    with pytest.raises(TesseraError, match="δ must be in"):
        ts.Synthesizer(epsilon=1.0, delta=2.0)
    with pytest.raises(TesseraError, match="no option 'epsilon_'"):
        ts.Synthesizer(epsilon_=1.0)
    with pytest.raises(QueryError, match="public schema"):
        ts.Synthesizer(epsilon=1.0).fit(data)


def test_epsilon_delta_is_calibrated_as_its_cks20_rho(domain: Domain, data: pd.DataFrame) -> None:
    synth = ts.Synthesizer(epsilon=1.0, delta=1e-6, domain=domain, seed=5, **FAST)
    synth.fit(data)
    budget = synth.fitted.run_record()["budget"]
    assert budget["asked"] == {"definition": "approx", "epsilon": 1.0, "delta": 1e-6}
    assert budget["calibrated_as"]["rho"] == rho_for_epsilon_delta(1.0, 1e-6)


def test_seeded_runs_repeat(domain: Domain, data: pd.DataFrame) -> None:
    a = ts.Synthesizer(epsilon=1.0, domain=domain, seed=6, **FAST).fit_sample(data, n=30)
    b = ts.Synthesizer(epsilon=1.0, domain=domain, seed=6, **FAST).fit_sample(data, n=30)
    pd.testing.assert_frame_equal(a, b)


def test_the_explicit_form_is_unchanged(domain: Domain, data: pd.DataFrame) -> None:
    w = Workload.from_sql(["sex = 'F'", "age < 21"], domain)
    synth = ts.Synthesizer("adaptive", **FAST)
    fitted = synth.fit(data, w, Budget.of(epsilon=1.0), seed=7)
    assert fitted.workload == w and "notes" not in fitted.run_record()
    assert list(fitted.sample(10).columns) == list(domain.names)
    assert synth.fitted is fitted  # kept for sample()


def _cli_files(tmp_path: Path, data: pd.DataFrame) -> tuple[Path, Path]:
    schema = tmp_path / "schema.yaml"
    schema.write_text(SCHEMA)
    csv = tmp_path / "data.csv"
    data.to_csv(csv, index=False)
    return csv, schema


def test_cli_synth_without_a_workload_fits_the_same_default(
        tmp_path: Path, domain: Domain, data: pd.DataFrame) -> None:
    """``tessera synth DATA --schema S`` builds the default workload as the Python constructor
    form does, says so on stderr and in the record, and the record verifies against the
    workload ``tessera workload build marginals -k 2`` writes."""
    csv, schema = _cli_files(tmp_path, data)
    out, rec = tmp_path / "synth.csv", tmp_path / "run.json"
    r = CliRunner().invoke(app, ["synth", str(csv), "--schema", str(schema), "--epsilon", "1",
                                 "-o", str(out), "--record", str(rec), "--seed", "1",
                                 "--rounds", "8"])
    assert r.exit_code == 0, r.output
    note = "default workload: all 6 2-way marginals of the schema's 4 attributes"
    assert note in r.stderr and note not in r.stdout
    assert "fitted to: 6 marginals over 4 attributes" in r.stdout
    record = json.loads(rec.read_text())
    assert record["notes"][0].startswith(note)
    python = ts.Synthesizer(epsilon=1.0, domain=domain, seed=1, **FAST)
    python.fit(csv)
    assert record["workload"]["sha256"] == \
        python.fitted.run_record()["workload"]["sha256"]  # the same default as in Python
    assert len(pd.read_csv(out, comment="#")) == record["rows"]
    built = tmp_path / "w2.yaml"
    r = CliRunner().invoke(app, ["workload", "build", "marginals", "-k", "2", "--schema",
                                 str(schema), "-o", str(built)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["verify", str(rec), str(built), "--schema", str(schema)])
    assert "workload.sha256" not in r.output  # only the seed stops it verifying
    assert "seeded test randomness" in r.output


def test_cli_synth_default_falls_back_to_one_way_and_lp_adds_true(
        tmp_path: Path, data: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a memory limit the 2-way counts exceed, the CLI's default is the 1-way marginals
    (and why, on stderr); with --method lp (add/remove) the default gets TRUE added, as a given
    workload does; a given workload leaves no note."""
    import tessera.synth.synthesizer as synthesizer

    csv, schema = _cli_files(tmp_path, data)
    base = ["synth", str(csv), "--schema", str(schema), "--epsilon", "1", "--seed", "2"]
    with monkeypatch.context() as m:  # 2-way: 85 cells (680 bytes of counts); 1-way: 16
        m.setattr(synthesizer, "DEFAULT_MEMORY_LIMIT", 256)
        r = CliRunner().invoke(app, [*base, "--rounds", "8", "-o", str(tmp_path / "o.csv")])
    assert r.exit_code == 0, r.output
    assert "default workload: all 4 1-way marginals" in r.stderr
    assert "memory limit of 256" in r.stderr
    r = CliRunner().invoke(app, [*base, "-o", str(tmp_path / "a.csv"), "--method", "lp"])
    assert r.exit_code == 0, r.output
    assert "default workload: all 6 2-way marginals" in r.stderr
    assert "the query TRUE was added" in r.stdout
    one = tmp_path / "one.sql"
    one.write_text("sex = 'F'\nage < 21\nincome >= 10\nok = true\n")
    r = CliRunner().invoke(app, ["synth", str(csv), str(one), "--schema", str(schema),
                                 "--epsilon", "1", "--seed", "2", "--rounds", "8",
                                 "-o", str(tmp_path / "b.csv")])
    assert r.exit_code == 0, r.output
    assert "default workload" not in r.output + r.stderr


def test_lp_with_a_constructor_budget_is_refused_with_the_form_that_works(
        domain: Domain, data: pd.DataFrame) -> None:
    """The LP answers the workload with tessera.answer, which reads a tessera.Budget: a budget
    stated to the constructor is refused before anything is read, naming the working form."""
    with pytest.raises(TesseraError, match="takes a tessera.Budget"):
        ts.Synthesizer("lp", epsilon=1.0, domain=domain, seed=3).fit(data, answer=ts.answer)
    fitted = ts.Synthesizer("lp", domain=domain, seed=3).fit(
        data, budget=Budget.of(epsilon=1.0), answer=ts.answer)
    assert fitted.notes[0].startswith("default workload: all 6 2-way marginals")
