"""``tessera answer --count people`` on aggregate statements, ``tessera verify`` of its
certificate, a people ledger charging aggregate and WHERE-clause releases together, and the
refusals (docs/aggregates.md, "Counting people"; docs/theory.md §3.14)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tessera.release.ledger import Ledger

from .test_answer_cli import run

SCHEMA = """attributes:
  year: {type: integer, min: 0, max: 2}
  sex: {type: categorical, values: [F, M]}
  hours: {type: integer, min: 0, max: 60, missing: true}
"""
WORKLOAD = """SELECT sex, COUNT(*), SUM(CLAMP(hours, 0, 80)) FROM t WHERE year = 0 GROUP BY sex
SELECT sex, COUNT(*), SUM(CLAMP(hours, 0, 80)) FROM t WHERE year = 1 GROUP BY sex
SELECT AVG(CLAMP(hours, 10, 50)) FROM t WHERE year = 2
"""
PEOPLE = ("--privacy-id", "pid", "--max-rows", "3", "--count", "people")


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(4)
    n = 300
    df = pd.DataFrame({"year": rng.integers(0, 3, n), "sex": rng.choice(["F", "M"], n),
                       "hours": rng.integers(0, 61, n).astype(object),
                       "pid": rng.integers(0, 80, n)})
    df.loc[::17, "hours"] = None
    (tmp_path / "d.csv").write_text(df.to_csv(index=False))
    (tmp_path / "s.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text(WORKLOAD)
    return tmp_path


def answer(files, *extra):
    return run("answer", files / "d.csv", files / "w.sql", "--schema", files / "s.yaml", *extra)


@pytest.mark.parametrize("budget", [["--epsilon", "1"], ["--rho", "0.5", "--neighbours",
                                                          "substitute"]])
def test_answer_and_verify_counting_people(files, budget):
    res = answer(files, *budget, *PEOPLE, "--seed", "1", "--certificate", files / "c.json",
                 "-o", files / "o.csv")
    assert res.exit_code == 0, res.output
    assert "counted once per query" in res.output and "every group is measured" in res.output
    assert "sums each person's total there, clamped once" in res.output
    doc = json.loads((files / "c.json").read_text())
    assert doc["privacy_unit"] == {"id_column": "pid", "max_rows": 3, "count": "people"}
    assert "counted once per query" in doc["spent"]["guarantee"]
    # a person moves a sum by its clamp's top (80, above the schema's 60), not a row's 60
    assert [r["bound"] for r in doc["linear_queries"]][:3] == [1, 80, 1]
    assert doc["spent"]["value"] <= float(budget[1])
    res = run("verify", files / "c.json", files / "w.sql", "--schema", files / "s.yaml")
    assert res.exit_code == 0 and "verified" in res.output, res.output
    for i, key, change in ((1, "scale", 0.5), (1, "bound", 0.75)):
        bad = json.loads(json.dumps(doc))
        bad["linear_queries"][i][key] *= change
        (files / "bad.json").write_text(json.dumps(bad))
        res = run("verify", files / "bad.json", files / "w.sql", "--schema", files / "s.yaml")
        assert res.exit_code != 0 and "does NOT check out" in res.output, res.output
    # the certificate read as counting rows: a row-level person (K × 60 per row) pays more
    rows = json.loads(json.dumps(doc))
    del rows["privacy_unit"]["count"]
    (files / "rows.json").write_text(json.dumps(rows))
    res = run("verify", files / "rows.json", files / "w.sql", "--schema", files / "s.yaml")
    assert res.exit_code != 0 and "does NOT check out" in res.output, res.output


def test_people_pay_the_coverage_not_k_times_a_row(files):
    """ρ: K = 3 rows per person, two yearly statements and an average: counting rows every
    scale is K·√(S) ∝ 3; counting people √(the coverage of 3 records), smaller."""
    scales = {}
    for count in ("rows", "people"):
        res = answer(files, "--rho", "0.5", "--privacy-id", "pid", "--max-rows", "3",
                     "--count", count, "--seed", "1", "--certificate", files / f"{count}.json")
        assert res.exit_code == 0, res.output
        doc = json.loads((files / f"{count}.json").read_text())
        scales[count] = np.array([r["scale"] for r in doc["linear_queries"]])
    assert np.all(scales["people"] < scales["rows"])


def test_strategy_and_consistency_are_refused(files):
    for extra, text in ((["--strategy", "residual"], "is not a sum of other counts"),
                        (["--consistency"], "nothing was charged")):
        res = answer(files, "--epsilon", "1", *PEOPLE, *extra)
        assert res.exit_code != 0 and text in res.output, res.output
        assert "hint" in res.output


def test_a_people_ledger_charges_aggregates_with_where_clauses(files):
    """One ledger for persons of one row each: the aggregates and a WHERE clause no group of
    theirs holds (year 2 without hours: the average reads hours) are never paid by one person
    together — the union of the two releases costs the larger, not the sum."""
    book = files / "l.ledger"
    one = ("--privacy-id", "pid", "--max-rows", "1", "--count", "people")
    (files / "where.sql").write_text("year = 2 AND hours IS NULL\n")
    res = run("ledger", "init", book, "--schema", files / "s.yaml", "--rho", "2", *one)
    assert res.exit_code == 0, res.output
    res = answer(files, "--rho", "0.5", *one, "--seed", "1", "--ledger", book)
    assert res.exit_code == 0, res.output
    res = run("answer", files / "d.csv", files / "where.sql", "--schema", files / "s.yaml",
              "--rho", "0.5", *one, "--seed", "1", "--ledger", book)
    assert res.exit_code == 0, res.output
    charges = Ledger.open(book).releases()
    assert len(charges) == 2 and charges[1].method == "union"
    assert charges[1].spent_after == pytest.approx(0.5, rel=1e-6)
    assert charges[1].exact and charges[1].spent_lower <= charges[1].spent_after
    # a release counting rows, or a ledger counting rows, is refused before any charge
    res = answer(files, "--rho", "0.5", "--privacy-id", "pid", "--max-rows", "1", "--ledger",
                 book)
    assert res.exit_code != 0 and "nothing was charged" in res.output
    assert "--count people" in res.output
    rows_book = files / "rows.ledger"
    run("ledger", "init", rows_book, "--schema", files / "s.yaml", "--rho", "2", "--privacy-id",
        "pid", "--max-rows", "1")
    res = answer(files, "--rho", "0.5", *one, "--ledger", rows_book)
    assert res.exit_code != 0 and "--count rows" in res.output
    assert len(Ledger.open(book).releases()) == 2 and not Ledger.open(rows_book).releases()


def test_plan_prints_a_persons_cost_under_both_counts(files):
    """``tessera plan`` on SELECT statements (no data): the noise of every group under each
    count, the one --count chooses marked, and the scales those releases use."""
    res = run("plan", files / "w.sql", "--schema", files / "s.yaml", "--rho", "0.5", *PEOPLE)
    assert res.exit_code == 0, res.output
    assert "a person costs (--count rows)" in res.output
    assert "the coverage of 3 records ← this plan" in res.output
    res = run("plan", files / "w.sql", "--schema", files / "s.yaml", "--rho", "0.5", *PEOPLE,
              "--json")
    assert res.exit_code == 0, res.output
    plans = json.loads(res.stdout)["plans"]
    people, rows = np.array(plans["people"]["scales"]), np.array(plans["rows"]["scales"])
    assert np.all(people < rows) and plans["people"]["spent"] <= 0.5
    res = answer(files, "--rho", "0.5", *PEOPLE, "--seed", "1", "--certificate",
                 files / "c.json")
    assert res.exit_code == 0, res.output
    cert = json.loads((files / "c.json").read_text())
    assert [r["scale"] for r in cert["linear_queries"]] == pytest.approx(people.tolist())
    res = run("plan", files / "w.sql", "--schema", files / "s.yaml", "--rho", "0.5",
              "--target-error", "3")
    assert res.exit_code != 0 and "cannot be used with aggregate statements" in res.output
