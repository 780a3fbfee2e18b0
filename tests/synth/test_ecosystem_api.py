"""``tessera.Synthesizer`` called as SmartNoise, SDV and synthcity are: the budget and the schema
in the constructor, a default workload, ``fit(df)``, ``sample(n)`` and ``fit_sample(df)``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

import tessera as ts
from tessera.accounting.zcdp import rho_for_epsilon_delta
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
