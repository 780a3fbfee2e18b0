"""Measures end to end: SUM/AVG(CLAMP(amount, lo, hi)) of a real-valued column outside the
schema — exact sums from DuckDB equal pandas' (rounded to units), ``tessera answer`` and
``tessera verify`` with a person bound, a tampered clamp or scale refused, and every bad input
(no bounds, a column absent from the data, a missing or non-numeric value) a clear error."""

from __future__ import annotations

import json
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.data.source import encode
from tessera.errors import DataError, QueryError
from tessera.privacy import PrivacyUnit
from tessera.release.aggregates import exact_linear
from tessera.schema.domain import Domain
from tessera.workload.select import parse_statement, read_aggregates

SCHEMA = """attributes:
  region: {type: categorical, values: [north, south]}
  age: {type: integer, min: 0, max: 9}
"""
WORKLOAD = """tot: SELECT COUNT(*), SUM(CLAMP(amount, 0, 150.5)) AS revenue FROM t
by: SELECT region, SUM(CLAMP(amount, -20, 100)) AS s, AVG(CLAMP(hours, 0, 12.5)) AS h \
FROM t WHERE age < 7 GROUP BY region
"""
DOMAIN = Domain.from_dict({"attributes": {
    "region": {"type": "categorical", "values": ["north", "south"]},
    "age": {"type": "integer", "min": 0, "max": 9}}})


def table(n: int = 300, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"customer": rng.integers(0, 80, n),
                         "region": rng.choice(["north", "south"], n),
                         "age": rng.integers(0, 10, n),
                         "amount": np.round(rng.normal(60, 50, n), 2),
                         "hours": np.round(rng.uniform(0, 14, n) * 4) / 4})


@pytest.fixture
def files(tmp_path):
    table().to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "s.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text(WORKLOAD)
    return tmp_path


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_exact_sums_equal_pandas(files):
    df = table()
    w = read_aggregates(files / "w.sql", DOMAIN)
    assert w.measures == {"amount": -4, "hours": -5}
    exact = exact_linear(DOMAIN, w.linear, encode(str(files / "d.csv"), DOMAIN,
                                                  measures=("amount", "hours"),
                                                  unit=PrivacyUnit("customer", 10**6)))
    labels = w.labels()
    got = {(s, g, a, r): int(v) for (s, g, a, r), v in zip(labels, exact)}

    def units(x: pd.Series, lo: float, hi: float, e: int) -> int:
        return int(sum(round(Decimal(repr(v)) * Decimal(10) ** -e) for v in x.clip(lo, hi)))

    assert got[("tot", "", "COUNT(*)", "count")] == len(df)
    assert got[("tot", "", "revenue", "sum")] == units(df.amount, 0, 150.5, -4)
    for region in ("north", "south"):
        part = df[(df.region == region) & (df.age < 7)]
        key = f"region={region}"
        assert got[("by", key, "s", "sum")] == units(part.amount, -20, 100, -4)
        assert got[("by", key, "h", "sum")] == units(part.hours, 0, 12.5, -5)
        assert got[("by", key, "h", "count")] == len(part)


@pytest.mark.parametrize("budget", [["--epsilon", "1"],
                                    ["--rho", "0.5"]])
def test_answer_verify_and_tamper(files, budget):
    res = run("answer", files / "d.csv", files / "w.sql", "--schema", files / "s.yaml",
              *budget, "--privacy-id", "customer", "--max-rows", "4", "--seed", "1",
              "--certificate", files / "c.json", "-o", files / "o.csv")
    assert res.exit_code == 0, res.output
    out = pd.read_csv(files / "o.csv", keep_default_na=False, comment="#")
    assert list(out["aggregate"]) == ["COUNT(*)", "revenue", "s", "h", "s", "h"]
    h = out[out["aggregate"] == "h"]
    assert ((h["ci95_low"] >= 0) & (h["ci95_high"] <= 12.5)).all()
    doc = json.loads((files / "c.json").read_text())
    rev = doc["linear_queries"][1]
    assert rev["measure"] == {"unit": "1e-4", "exponent": -4}
    assert rev["clamp"] == [0, 1_505_000] and rev["bound"] == 1_505_000
    # the published noise scale is the certified one, in the answer's units
    assert float(out["noise_scale"][1]) == pytest.approx(rev["scale"] * 1e-4, rel=1e-12)
    ok = run("verify", files / "c.json", files / "w.sql", "--schema", files / "s.yaml")
    assert ok.exit_code == 0 and "verified" in ok.output, ok.output
    for field, value, words in (("clamp", [0, 1_000_000], "value bounds"),
                                ("scale", rev["scale"] / 3, "spent"),
                                ("measure", {"unit": "1e-2", "exponent": -2}, "measure unit")):
        bad = json.loads((files / "c.json").read_text())
        bad["linear_queries"][1][field] = value
        (files / "bad.json").write_text(json.dumps(bad))
        res = run("verify", files / "bad.json", files / "w.sql", "--schema", files / "s.yaml")
        assert res.exit_code != 0 and words in res.output, (field, res.output)


def test_person_pays_per_row(files):
    """A customer of at most 4 rows meets 4 aggregates (the count, the revenue, and in one
    region s and h): the revenue's discrete Laplace scale is 4 × 4 × 150.5."""
    res = run("answer", files / "d.csv", files / "w.sql", "--schema", files / "s.yaml",
              "--epsilon", "1", "--privacy-id", "customer", "--max-rows", "4", "--seed", "2",
              "-o", files / "o.csv")
    assert res.exit_code == 0, res.output
    out = pd.read_csv(files / "o.csv", keep_default_na=False, comment="#")
    assert float(out["noise_scale"][1]) == pytest.approx(4 * 4 * 150.5, rel=1e-9)
    assert float(out["noise_scale"][0]) == pytest.approx(4 * 4, rel=1e-9)


@pytest.mark.parametrize("text,words", [
    ("SELECT SUM(amount) FROM t", "state its public bounds"),
    ("SELECT AVG(amount) FROM t", "AVG(CLAMP(amount, lo, hi))"),
    ("SELECT COUNT(amount) FROM t", "COUNT(*)"),
    ("SELECT SUM(CLAMP(age, 0, 2.5)) FROM t", "not an integer"),
    ("SELECT SUM(CLAMP(amount, 0, 1000.000001)) FROM t", "significant digits"),
    ("SELECT SUM(CLAMP(amount, 0, 'x')) FROM t", "not a number"),
    ("SELECT SUM(CLAMP(amount, 0, 5)) FROM t GROUP BY amount", "unknown column"),
])
def test_parse_errors(text, words):
    with pytest.raises(QueryError, match=None) as e:
        from tessera.workload.aggregates import AggregateWorkload

        AggregateWorkload(DOMAIN, (parse_statement(text, DOMAIN)[0],))
    assert words in str(e.value)


@pytest.mark.parametrize("column,values,words", [
    ("amount", ["1.5", "", "2"], "1 rows have no value"),
    ("amount", ["1.5", "abc", "2"], "'abc' (1 rows)"),
    ("amount", ["1.5", "inf", "2"], "not finite numbers"),
])
def test_bad_values(tmp_path, column, values, words):
    df = pd.DataFrame({"region": ["north"] * 3, "age": [1, 2, 3], column: values})
    df.to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(DataError) as e:
        encode(str(tmp_path / "d.csv"), DOMAIN, measures=("amount",))
    assert words in str(e.value) and "'amount'" in str(e.value)


def test_measure_absent_from_the_data(files):
    (files / "w2.sql").write_text("SELECT SUM(CLAMP(amout, 0, 10)) FROM t\n")
    res = run("answer", files / "d.csv", files / "w2.sql", "--schema", files / "s.yaml",
              "--epsilon", "1", "--extra-columns", "ignore", "--seed", "1")
    assert res.exit_code != 0
    assert "no column 'amout' in the data" in res.output and "amount" in res.output
    assert "Traceback" not in res.output


def test_ledger_charges_measures(files):
    """Two releases of sums of measures under different clamps charged to one ledger: the
    summary shows the spend (each alone costs ε = 1; together 1.55, not 2: the union on both
    releases' breakpoints merged); one that would exceed the total is refused, nothing
    charged; one whose bounds the ledger's unit of the measure cannot express is refused
    before any charge, naming both units; the certificates verify (a release summed in the
    ledger's unit)."""
    schema = ["--schema", files / "s.yaml", "--extra-columns", "ignore"]
    assert run("ledger", "init", files / "l.db", "--schema", files / "s.yaml", "--epsilon",
               "2.5").exit_code == 0
    first = run("answer", files / "d.csv", files / "w.sql", *schema, "--epsilon", "1",
                "--ledger", files / "l.db", "--certificate", files / "c1.json",
                "-o", files / "o1.csv")
    assert first.exit_code == 0, first.output
    (files / "w2.sql").write_text(
        "n: SELECT SUM(CLAMP(amount, -50, 2.5)) AS small FROM t WHERE region = 'north'\n")
    second = run("answer", files / "d.csv", files / "w2.sql", *schema, "--epsilon", "1",
                 "--ledger", files / "l.db", "--certificate", files / "c2.json",
                 "-o", files / "o2.csv")
    assert second.exit_code == 0, second.output
    shown = run("ledger", "show", files / "l.db").output
    # the union: a row at amount = -50 in the north pays 1 + what release 1 charges it
    assert "2 releases" in shown and "spent 1.55 (exact)" in shown, shown
    assert "alone 1, spent after 1.55" in shown
    doc = json.loads((files / "c2.json").read_text())  # summed in the ledger's unit, 10^-4
    assert doc["linear_queries"][0]["measure"]["exponent"] == -4
    assert doc["linear_queries"][0]["clamp"] == [-500_000, 25_000]
    for cert, work in (("c1.json", "w.sql"), ("c2.json", "w2.sql")):
        ok = run("verify", files / cert, files / work, "--schema", files / "s.yaml")
        assert ok.exit_code == 0 and "verified" in ok.output, ok.output
    over = run("answer", files / "d.csv", files / "w2.sql", *schema, "--epsilon", "1",
               "--ledger", files / "l.db", "-o", files / "o3.csv")
    assert over.exit_code != 0 and "refused" in over.output and "Traceback" not in over.output
    (files / "w3.sql").write_text("b: SELECT SUM(CLAMP(amount, 0, 5000)) FROM t\n")
    other = run("answer", files / "d.csv", files / "w3.sql", *schema, "--epsilon", "0.1",
                "--ledger", files / "l.db", "-o", files / "o4.csv")
    assert other.exit_code != 0 and "Traceback" not in other.output
    flat = " ".join(other.output.split())
    assert "'amount'" in flat and "10^-4" in flat and "10^-3" in flat, flat
    assert "nothing was charged" in flat and "hint" in flat
    assert not (files / "o3.csv").exists() and not (files / "o4.csv").exists()
    assert "2 releases" in run("ledger", "show", files / "l.db").output
