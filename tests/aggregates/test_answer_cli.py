"""``tessera answer`` and ``tessera verify`` on a workload of SELECT statements: answers per
statement, group and aggregate; the certificate's spend re-derived from the workload alone; a
tampered scale refused; parse errors name the line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.schema.domain import Domain
from tessera.workload.select import parse_statement, read_aggregates

SCHEMA = """attributes:
  age: {type: integer, min: 0, max: 9}
  sex: {type: categorical, values: [F, M]}
  income: {type: integer, min: -5, max: 20, missing: true}
"""
WORKLOAD = """young: age < 3
tot: SELECT COUNT(*), SUM(income) FROM t
by_sex: SELECT sex, COUNT(*), AVG(CLAMP(income, 0, 10)) AS mean_income FROM t GROUP BY sex
"""


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(3)
    n = 400
    df = pd.DataFrame({"age": rng.integers(0, 10, n), "sex": rng.choice(["F", "M"], n),
                       "income": rng.integers(-5, 21, n).astype(object),
                       "pid": rng.integers(0, 100, n)})
    df.loc[::13, "income"] = None
    (tmp_path / "d.csv").write_text(df.to_csv(index=False))
    (tmp_path / "s.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text(WORKLOAD)
    return tmp_path


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("budget,person", [(["--epsilon", "1"], []),
                                           (["--rho", "0.5", "--neighbours", "substitute"],
                                            ["--privacy-id", "pid", "--max-rows", "3"])])
def test_answer_and_verify(files, budget, person):
    res = run("answer", files / "d.csv", files / "w.sql", "--schema", files / "s.yaml", *budget,
              *person, "--extra-columns", "ignore", "--seed", "1",
              "--certificate", files / "c.json", "-o", files / "o.csv")
    assert res.exit_code == 0, res.output
    out = pd.read_csv(files / "o.csv", keep_default_na=False, comment="#")
    assert list(out["aggregate"]) == ["COUNT(*)", "COUNT(*)", "SUM(income)", "COUNT(*)",
                                      "mean_income", "COUNT(*)", "mean_income"]
    assert list(out["group"])[3:] == ["sex=F", "sex=F", "sex=M", "sex=M"]
    means = out[out["aggregate"] == "mean_income"]
    assert ((means["ci95_low"] >= 0) & (means["ci95_high"] <= 10)).all()
    doc = json.loads((files / "c.json").read_text())
    assert doc["spent"]["value"] <= float(budget[1])
    res = run("verify", files / "c.json", files / "w.sql", "--schema", files / "s.yaml")
    assert res.exit_code == 0, res.output
    assert "verified" in res.output
    # a scale halved: the re-derived spend exceeds the budget
    doc["linear_queries"][2]["scale"] /= 2
    (files / "bad.json").write_text(json.dumps(doc))
    res = run("verify", files / "bad.json", files / "w.sql", "--schema", files / "s.yaml")
    assert res.exit_code != 0
    assert "does NOT check out" in res.output and "exceeds the budget" in res.output


def test_person_noise_is_k_times_a_rows(files):
    """ε: a person of K rows pays K × a row: every scale grows by K."""
    scales = []
    for extra in ([], ["--privacy-id", "pid", "--max-rows", "4"]):
        res = run("answer", files / "d.csv", files / "w.sql", "--schema", files / "s.yaml",
                  "--epsilon", "1", "--extra-columns", "ignore", "--seed", "1",
                  "--certificate", files / "c.json", *extra)
        assert res.exit_code == 0, res.output
        doc = json.loads((files / "c.json").read_text())
        scales.append(np.array([r["scale"] for r in doc["linear_queries"]]))
    np.testing.assert_allclose(scales[1], 4 * scales[0], rtol=1e-9)


def test_clamp_in_certificate_and_bounds(files):
    w = read_aggregates(files / "w.sql", Domain.load(files / "s.yaml"))
    bounds = [lq.bound(w.domain) for lq in w.linear]
    assert bounds == [1, 1, 20, 1, 10, 1, 1, 10, 1]


def test_options_that_do_not_apply_are_refused(files):
    res = run("answer", files / "d.csv", files / "w.sql", "--schema", files / "s.yaml",
              "--epsilon", "1", "--objective", "max")
    assert res.exit_code != 0 and "cannot be used with aggregate statements" in res.output


def test_consistency_adds_consistent_answers(files):
    (files / "n.sql").write_text("SELECT COUNT(*), SUM(income) FROM t\n"
                                 "SELECT sex, COUNT(*), SUM(income) FROM t GROUP BY sex\n")
    res = run("answer", files / "d.csv", files / "n.sql", "--schema", files / "s.yaml",
              "--epsilon", "1", "--extra-columns", "ignore", "--seed", "2", "--consistency",
              "-o", files / "o.csv")
    assert res.exit_code == 0, res.output
    assert "2 equalities" in res.output
    out = pd.read_csv(files / "o.csv", keep_default_na=False, comment="#")
    c = out["consistent"].to_numpy()
    assert abs(c[0] - (c[2] + c[4])) < 1e-6 and abs(c[1] - (c[3] + c[5])) < 1e-6
    assert out["answer"][0] != c[0]  # (the noisy total was moved)


BAD = [
    ("SELECT SUM(sex) FROM t", "categorical attribute, not an integer one"),
    ("SELECT MAX(age) FROM t", "unsupported aggregate MAX"),
    ("SELECT COUNT(*) FROM t GROUP BY foo", "unknown column 'foo'"),
    ("SELECT COUNT(*) FROM t JOIN u ON t.a = u.a", "JOIN is not supported"),
    ("SELECT sex, COUNT(*) FROM t", "must be a GROUP BY column"),
    ("SELECT SUM(CLAMP(age, 0.5, 3)) FROM t", "not an integer"),
    ("SELECT SUM(agee) FROM t", "did you mean 'age'"),
    ("SELECT COUNT(DISTINCT age) FROM t", "DISTINCT"),
    ("SELECT SUM(age) FROM (SELECT * FROM t)", "not a subquery"),
    ("SELECT COUNT(*) FROM t ORDER BY age", "ORDER BY is not supported"),
]


@pytest.mark.parametrize("text,message", BAD)
def test_statement_errors(text, message):
    dom = Domain.from_dict(__import__("yaml").safe_load(SCHEMA))
    with pytest.raises(Exception, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_statement(text, dom)


def test_file_errors_name_lines(files):
    (files / "bad.sql").write_text("SELECT COUNT(*) FROM t\nSELECT COUNT(*) FROM u\n"
                                   "SELECT MAX(age) FROM t\n")
    res = run("answer", files / "d.csv", files / "bad.sql", "--schema", files / "s.yaml",
              "--epsilon", "1")
    assert res.exit_code != 0
    assert "bad.sql:2: FROM u: another table" in res.output
    assert "bad.sql:3: unsupported aggregate MAX" in res.output


def test_group_by_limit(files):
    (files / "s2.yaml").write_text(SCHEMA + "  big: {type: integer, min: 0, max: 999999}\n")
    dom = Domain.load(files / "s2.yaml")
    (files / "g.sql").write_text("SELECT COUNT(*) FROM t GROUP BY big, age\n")
    with pytest.raises(Exception, match="above the limit"):
        read_aggregates(files / "g.sql", dom)


def test_other_commands_name_select_lines(files):
    res = run("overlap", files / "w.sql", "--schema", files / "s.yaml")
    assert res.exit_code != 0
    assert "w.sql:2: an aggregate statement (SELECT …) where a WHERE clause" in res.output
    assert "counted exactly by tessera count" in res.output
    # tessera count reads them: the exact answers (tests/aggregates/test_count_cli.py)
    res = run("count", files / "d.csv", files / "w.sql", "--schema", files / "s.yaml",
              "--extra-columns", "ignore")
    assert res.exit_code == 0 and "statement,group,aggregate,answer" in res.output, res.output
    # tessera plan reads them: the direct plan of every group (no data)
    res = run("plan", files / "w.sql", "--schema", files / "s.yaml", "--epsilon", "1")
    assert res.exit_code == 0 and "noise of each group" in res.output, res.output


def test_seeded_answers_say_not_private(files):
    res = run("answer", files / "d.csv", files / "w.sql", "--schema", files / "s.yaml",
              "--epsilon", "1", "--extra-columns", "ignore", "--seed", "1", "-o", files / "o.csv")
    assert res.exit_code == 0, res.output
    assert (files / "o.csv").read_text().startswith("# NOT PRIVATE")


def test_ledger_is_charged_before_release(files):
    """A person ledger of ρ = 1 under substitution: two releases of ρ = 0.5 are charged (the
    ledger re-solves the sums' levels), a third is refused before anything is released."""
    led = files / "p.ledger"
    res = run("ledger", "init", led, "--schema", files / "s.yaml", "--rho", "1",
              "--privacy-id", "pid", "--max-rows", "2", "--neighbours", "substitute")
    assert res.exit_code == 0, res.output
    args = ["answer", files / "d.csv", files / "w.sql", "--schema", files / "s.yaml", "--rho",
            "0.5", "--privacy-id", "pid", "--max-rows", "2", "--neighbours", "substitute",
            "--ledger", led]
    for spent in ("0 → 0.5", "0.5 → 1"):
        res = run(*args, "-o", files / "o.csv")
        assert res.exit_code == 0, res.output
        assert f"spent {spent}" in res.output
    (files / "o.csv").unlink()
    res = run(*args, "-o", files / "o.csv")
    assert res.exit_code != 0 and "budget" in res.output.lower()
    assert not (files / "o.csv").exists()


def test_sums_of_too_many_values_are_refused(files):
    (files / "s3.yaml").write_text(SCHEMA + "  cents: {type: integer, min: 0, max: 9999999}\n")
    (files / "c.sql").write_text("SELECT SUM(cents) FROM t\n")
    with pytest.raises(Exception, match="counted value by value"):
        read_aggregates(files / "c.sql", Domain.load(files / "s3.yaml"))
