"""The columns outside the workload: every one is modelled by default (the adaptive method
measures its one-way marginal from the same budget; ipmwu, mwem and lp refuse the workload),
or left uniformly random on request (``uniform_columns``), said on stderr and in the record;
the added measurements are charged, recorded and re-proved by ``verify``."""

from __future__ import annotations

import copy
import json
import math
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.errors import QueryError, QueryWarning, TesseraError
from tessera.release import Budget, Ledger, answer
from tessera.release.certificate import verify_certificate
from tessera.schema.domain import Domain
from tessera.synth.candidates import candidate_workload, candidates, outside_attributes
from tessera.synth.fitted import FittedSynthesizer
from tessera.synth.record import sealed
from tessera.synth.synthesizer import Synthesizer
from tessera.synth.verify import verify_record
from tessera.workload.workload import Workload

SCHEMA = """attributes:
  a: {type: integer, min: 0, max: 3}
  b: {type: categorical, values: [x, y, z]}
  c: {type: boolean}
  gain: {type: integer, min: 0, max: 15}
"""
#: The workload mentions a, b, c only: ``gain`` is outside it.
QUERIES = ["a < 2", "b = 'x'", "c = true", "a >= 1 AND b = 'y'", "b = 'z' AND c = false"]
N = 5000
#: P[gain = 0] in the data: very skewed (uniform would put 1/16 there).
ZERO = 0.92


@pytest.fixture(scope="module")
def domain() -> Domain:
    return Domain.from_dict(__import__("yaml").safe_load(SCHEMA))


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    gain = np.where(rng.random(N) < ZERO, 0, rng.integers(1, 16, N))
    return pd.DataFrame({"a": rng.integers(0, 4, N),
                         "b": rng.choice(np.array(["x", "y", "z"], dtype=object), N),
                         "c": rng.random(N) < 0.3, "gain": gain})


@pytest.fixture(scope="module")
def workload(domain: Domain) -> Workload:
    return Workload.from_sql(QUERIES, domain)


@pytest.fixture(scope="module")
def runs(data: pd.DataFrame, workload: Workload) -> dict[str, FittedSynthesizer]:
    budget = Budget.of(rho=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", QueryWarning)
        return {"default": Synthesizer().fit(data, workload, budget, seed=4),
                "uniform": Synthesizer(uniform_columns=True).fit(data, workload, budget,
                                                                 seed=4)}


def _gain_step(fitted: FittedSynthesizer) -> list[dict[str, Any]]:
    return [s for s in fitted.run_record()["steps"]
            if s["applied_to"].get("marginal") == ["gain"]]


def one_way_kept(data: pd.DataFrame, fitted: FittedSynthesizer, sigma: float) -> bool:
    """Whether the rows' P[gain = 0] is the data's within what the noise allows: the model's
    one-way marginal is the noisy one (one discrete Gaussian of sd σ per cell, N̂ from the
    one-way sums) refitted, so P̂ moves by at most ~5σ·√cells / n (the cell's own noise and its
    share of the simplex's normalisation, at 5 sd), plus 5 sd of the sampling of m rows."""
    real = float((data["gain"] == 0).mean())
    rows = np.asarray(fitted.rows)
    m = rows.shape[0]
    synthetic = float(np.mean(rows[:, fitted.domain.index("gain")] == 0))
    tolerance = 5 * sigma * math.sqrt(16) / len(data) + 5 * math.sqrt(real * (1 - real) / m)
    return abs(synthetic - real) <= tolerance


def test_an_attribute_outside_the_workload_keeps_its_one_way_marginal(
        data: pd.DataFrame, runs: dict[str, FittedSynthesizer]) -> None:
    (step,) = _gain_step(runs["default"])  # measured once, at the initialisation
    assert step["role"] == "measurement" and step["round"] == 0
    assert step["mechanism"]["parameter"] == "σ"
    sigma = float(step["mechanism"]["value"])
    assert 0 < sigma < 10  # the tolerance below is then ~0.04: uniform is 0.86 away
    assert one_way_kept(data, runs["default"], sigma)
    # the planted bug — the column left uniform, as before — is caught by the same check
    assert not _gain_step(runs["uniform"])
    assert not one_way_kept(data, runs["uniform"], sigma)


def test_the_added_measurement_is_charged_and_recorded(
        runs: dict[str, FittedSynthesizer]) -> None:
    f = runs["default"]
    rec = f.run_record()
    (step,) = _gain_step(f)
    cost = Fraction(step["cost"]["rho"])
    assert rec["columns"] == {"outside_workload": ["gain"], "measured": ["gain"],
                              "budget_share": float(cost / Fraction(1.0)), "uniform": []}
    assert 0 < rec["columns"]["budget_share"] < 0.05
    assert rec["parameters"]["columns"] == ["gain"]
    assert rec["parameters"]["candidates"] == len(candidates(f.workload))  # never selectable
    # the same zCDP budget: every step's cost, this one's included, sums to the spend ≤ ρ
    total = sum(Fraction(s["cost"]["rho"]) for s in rec["steps"])
    assert float(total) == pytest.approx(rec["spent"][0]["rho"], rel=1e-12)
    assert total <= Fraction(1.0)
    assert "one-way marginals of gain measured" in f.describe()
    u = runs["uniform"].run_record()
    assert u["columns"] == {"outside_workload": ["gain"], "measured": [], "budget_share": 0.0,
                            "uniform": ["gain"]}
    assert "UNIFORMLY RANDOM" in runs["uniform"].describe()


def test_the_selection_never_picks_an_outside_column(
        runs: dict[str, FittedSynthesizer]) -> None:
    history = runs["default"].result.record.history
    assert history and all("gain" not in h.candidate for h in history)


def test_uniform_columns_warn(data: pd.DataFrame, workload: Workload) -> None:
    with pytest.warns(QueryWarning, match="uniform columns: 1 attribute.*gain"):
        Synthesizer(uniform_columns=True, rows=10).fit(data, workload, Budget.of(rho=0.5),
                                                       seed=1)
    with pytest.raises(TesseraError, match="uniform_columns must be True or False"):
        Synthesizer(uniform_columns="yes").fit(data, workload, Budget.of(rho=0.5), seed=1)


def test_a_workload_of_every_attribute_runs_as_before(data: pd.DataFrame,
                                                      domain: Domain) -> None:
    """Nothing outside the workload: nothing added, the run identical whichever option (the
    seeded NLTCS and Adult runs of every attribute are bit-identical to the code before)."""
    full = Workload.from_sql([*QUERIES, "gain < 3"], domain)
    assert outside_attributes(full) == ()
    assert candidates(full, columns=True) == candidates(full)
    assert candidate_workload(full, columns=True) == candidate_workload(full)
    a = Synthesizer(rows=200).fit(data, full, Budget.of(rho=0.3), seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning when nothing is left out
        b = Synthesizer(rows=200, uniform_columns=True).fit(data, full, Budget.of(rho=0.3),
                                                            seed=2)
    assert np.array_equal(a.rows, b.rows)
    assert a.run_record()["columns"] == {"outside_workload": [], "measured": [],
                                         "budget_share": 0.0, "uniform": []}


def test_verify_re_proves_the_added_measurement(data: pd.DataFrame,
                                                workload: Workload) -> None:
    f = Synthesizer(rows=50).fit(data, workload, Budget.of(rho=0.5))  # private randomness
    rec = json.loads(json.dumps(f.run_record()))
    result = verify_record(rec, workload, verify_certificate=verify_certificate)
    assert result.ok, result.differences
    for edit, where in ((lambda r: r["columns"].update(measured=[]), "columns.measured"),
                        (lambda r: r["columns"].update(budget_share=0.0),
                         "columns.budget_share"),
                        (lambda r: r["columns"].update(uniform=["gain"]), "columns.uniform")):
        forged = copy.deepcopy(rec)
        edit(forged)
        diffs = verify_record(sealed(forged), workload,
                              verify_certificate=verify_certificate).differences
        assert any(d.startswith(where) for d in diffs), (where, diffs)
    # the measurement's cost is the mechanism's privacy map, like every other step's
    (step,) = [s for s in rec["steps"] if s["applied_to"].get("marginal") == ["gain"]]
    assert step["sensitivity"] == 1.0
    forged = copy.deepcopy(rec)
    forged["steps"][rec["steps"].index(step)]["cost"]["rho"] /= 2
    assert not verify_record(sealed(forged), workload,
                             verify_certificate=verify_certificate).ok


@pytest.mark.parametrize("method", ["ipmwu", "mwem", "lp"])
def test_the_reference_methods_refuse_a_workload_that_leaves_columns_out(
        tmp_path: Path, data: pd.DataFrame, workload: Workload, domain: Domain,
        method: str) -> None:
    """Ghazi et al.'s algorithms fit the workload as given: refused before any charge, with
    the ways forward; accepted (warned, recorded) with uniform_columns."""
    book = Ledger.init(tmp_path / "l.db", total=5.0, definition="pure",
                       neighbours="add-remove", domain=domain, dataset="t")
    extra = {"answer": answer} if method == "lp" else {}
    rounds = {"rounds": 4} if method != "lp" else {}
    with pytest.raises(QueryError, match="no query or family of it mentions 1 attribute"
                       r"\(s\): gain") as e:
        Synthesizer(method, **rounds).fit(data, workload, Budget.of(epsilon=1.0), ledger=book,
                                          seed=1, **extra)
    assert "--uniform-columns" in (e.value.hint or "") and "--method adaptive" in e.value.hint
    assert not book.releases()  # nothing charged
    with pytest.warns(QueryWarning, match="gain"):
        f = Synthesizer(method, uniform_columns=True, rows=100, **rounds).fit(
            data, workload, Budget.of(epsilon=1.0), seed=1, **extra)
    assert f.run_record()["columns"]["uniform"] == ["gain"]
    assert "UNIFORMLY RANDOM" in f.describe()


def test_the_initialisation_counts_the_outside_columns(data: pd.DataFrame,
                                                       workload: Workload) -> None:
    """Four one-way marginals at the noise of a round of ρ/3 cost 4 · 0.9/3 > ρ: refused before
    any charge (without gain, three cost 0.9 ρ: allowed)."""
    with pytest.raises(TesseraError, match=r"all 4 one-way marginals \(1 of attributes "
                                           "outside the workload\\)"):
        Synthesizer(rounds=3).preflight(workload, Budget.of(rho=1.0))
    Synthesizer(rounds=3, uniform_columns=True).preflight(workload, Budget.of(rho=1.0))


def test_cli_uniform_columns(tmp_path: Path, data: pd.DataFrame) -> None:
    schema, wl, csv = tmp_path / "schema.yaml", tmp_path / "w.sql", tmp_path / "data.csv"
    schema.write_text(SCHEMA)
    wl.write_text("\n".join(QUERIES) + "\n")
    data.iloc[:800].to_csv(csv, index=False)
    base = ["synth", str(csv), str(wl), "--schema", str(schema), "--rho", "0.5", "--seed", "1",
            "--rows", "100"]
    r = CliRunner().invoke(app, [*base, "-o", str(tmp_path / "a.csv"), "--record",
                                 str(tmp_path / "a.json")])
    assert r.exit_code == 0, r.output
    assert json.loads((tmp_path / "a.json").read_text())["columns"]["measured"] == ["gain"]
    assert "uniform columns" not in r.stderr
    r = CliRunner().invoke(app, [*base, "--uniform-columns", "-o", str(tmp_path / "b.csv"),
                                 "--record", str(tmp_path / "b.json")])
    assert r.exit_code == 0, r.output
    assert "warning: uniform columns: 1 attribute(s) outside the workload" in r.stderr
    assert json.loads((tmp_path / "b.json").read_text())["columns"]["uniform"] == ["gain"]
    assert "UNIFORMLY RANDOM" in r.stdout
    r = CliRunner().invoke(app, [*base, "--method", "ipmwu", "--rounds", "3", "-o",
                                 str(tmp_path / "c.csv")])
    assert r.exit_code != 0 and "gain" in r.stderr and "--uniform-columns" in r.stderr
    assert not (tmp_path / "c.csv").exists()
