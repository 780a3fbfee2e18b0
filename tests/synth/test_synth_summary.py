"""``tessera synth`` tells the person who ran it what they need — method, budget and spend, what
the rows are fitted to, rows written, time — and leaves the run's internals (schedule, rounds,
measurement shares, model size, parameters) to the run record."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tessera.cli.main import app

SCHEMA = """attributes:
  sex: {type: categorical, values: [F, M]}
  age: {type: integer, min: 18, max: 25}
  income: {type: binned, edges: [0, 10, 50, 100]}
  ok: {type: boolean}
"""
QUERIES = ["TRUE", "sex = 'F'", "age < 21", "income >= 50", "ok = true",
           "sex = 'M' AND ok = false", "age >= 23 AND income < 10"]
#: Words of the internals the default output used to print (AIM's T, the measurement share,
#: the one-way initialisation, the normaliser, junction-tree sizes; IPMWU's β, m, expectations).
INTERNALS = ("T = ", "measurement share", "initialisation", "AIM's", "N = ", "junction-tree",
             "model: width", "final estimate", "β = ", "expectations", "engine width",
             "ms/round", "randomness:")


@pytest.fixture()
def files(tmp_path: Path) -> Path:
    (tmp_path / "s.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text("\n".join(QUERIES) + "\n")
    rng = np.random.default_rng(0)
    n = 400
    pd.DataFrame({"sex": rng.choice(["F", "M"], n), "age": rng.integers(18, 26, n),
                  "income": np.round(rng.uniform(0, 99.5, n), 1),
                  "ok": rng.random(n) < 0.5}).to_csv(tmp_path / "d.csv", index=False)
    return tmp_path


@pytest.mark.parametrize(("method", "measured"), [
    ("adaptive", "measured 4 one-way"), ("ipmwu", "workload queries over 5 rounds")])
def test_synth_prints_what_a_user_needs_and_keeps_internals_in_the_record(
        files: Path, method: str, measured: str) -> None:
    rows, record = files / "s.csv", files / "run.json"
    r = CliRunner().invoke(app, [
        "synth", str(files / "d.csv"), str(files / "w.sql"), "-s", str(files / "s.yaml"),
        "-e", "1", "--method", method, "-o", str(rows), "--record", str(record),
        "--rounds", "5", "--seed", "3"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert [ln.split(":")[0] for ln in lines] == [
        "method", "budget", "spent", "fitted to", "rows", "time", "record"], r.stdout
    assert lines[1] == "budget: pure ε-DP with ε = 1 (add/remove one row; exact)", lines[1]
    assert lines[3].startswith("fitted to: 7 queries over 4 attributes; measured ")
    assert measured in lines[3], lines[3]
    assert lines[4] == f"rows: {rows} ({len(pd.read_csv(rows, comment='#')):,} rows)"
    for word in INTERNALS:
        assert word not in r.stdout, (word, r.stdout)
    doc = json.loads(record.read_text())  # the internals are on file, and behind -v
    verbose = CliRunner().invoke(app, [
        "-v", "synth", str(files / "d.csv"), str(files / "w.sql"), "-s", str(files / "s.yaml"),
        "-e", "1", "--method", method, "-o", str(files / "v.csv"), "--rounds", "5", "--seed",
        "3"])
    assert verbose.exit_code == 0, verbose.output
    assert ("info: run: T = 5" if method == "ipmwu" else "info: run: start: T = 5") in (
        verbose.stderr), verbose.stderr
    assert verbose.stdout.splitlines()[0].startswith("method: ")
    assert doc["parameters"]["rounds"] == 5 and doc["timings"]["total"] > 0
    if method == "adaptive":
        assert {"measure_fraction", "initial_rounds", "anneal"} <= set(doc["parameters"])
