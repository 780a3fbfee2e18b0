"""``--count people`` on the command line: ``plan`` prints a person's two costs (rows: K·γ;
people: the coverage of K rows), ``count`` gives the distinct people after bounding, ``answer``
says "distinct people" and writes a certificate ``verify`` re-derives, and the option errors."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from tessera.cli.main import app

from .test_person_cli import files

PERSON = ["--privacy-id", "customer", "--max-rows", "4"]


def test_plan_prints_both_costs(tmp_path: Path) -> None:
    schema, wl, _ = files(tmp_path)
    res = CliRunner().invoke(app, ["plan", str(wl), "--schema", str(schema), "--epsilon", "1",
                                   *PERSON, "--count", "people"])
    assert res.exit_code == 0, res.output
    assert "--count rows): γ_w = 12 (exact)" in res.output  # γ = 3 per row (age 5+, N), K = 4
    assert "--count people): γ_w = 4 (exact)" in res.output  # 4 rows cover all 4 queries
    assert "coverage of 4 rows ← this plan" in res.output
    res = CliRunner().invoke(app, ["plan", str(wl), "--schema", str(schema), "--epsilon", "1",
                                   *PERSON, "--json"])
    doc = json.loads(res.output)
    assert doc["person_costs"]["rows"]["gamma_w"] == 12.0
    assert doc["person_costs"]["people"]["gamma_w"] == 4.0


def test_count_answer_verify(tmp_path: Path) -> None:
    runner = CliRunner()
    schema, wl, data = files(tmp_path)
    out = tmp_path / "counts.csv"
    res = runner.invoke(app, ["count", str(data), str(wl), "--schema", str(schema), "-o",
                              str(out), *PERSON, "--count", "people"])
    assert res.exit_code == 0, res.output
    frame = pd.read_csv(data)
    people = pd.read_csv(out)["answer"].tolist()
    # every customer has at most 10 rows here; a person is counted once however many
    assert people[0] <= frame.customer[frame.age < 5].nunique()
    assert people[2] <= frame.customer[frame.region == "N"].nunique()
    res = runner.invoke(app, ["count", str(data), str(wl), "--schema", str(schema), "-o",
                              str(out), *PERSON])
    rows = pd.read_csv(out)["answer"].tolist()
    assert all(p <= r for p, r in zip(people, rows)) and people != rows
    cert = tmp_path / "c.json"
    res = runner.invoke(app, ["answer", str(data), str(wl), "--schema", str(schema),
                              "--epsilon", "1", "-o", str(tmp_path / "a.csv"), "--certificate",
                              str(cert), *PERSON, "--count", "people"])
    assert res.exit_code == 0, res.output
    assert "distinct people" in res.output and "counted once per query" in res.output
    doc = json.loads(cert.read_text())
    assert doc["privacy_unit"]["count"] == "people" and doc["overlap"]["gamma_w"] == 4.0
    res = runner.invoke(app, ["verify", str(cert), str(wl), "--schema", str(schema)])
    assert res.exit_code == 0 and "verified" in res.output, res.output


def test_option_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    schema, wl, data = files(tmp_path)
    res = runner.invoke(app, ["answer", str(data), str(wl), "--schema", str(schema),
                              "--epsilon", "1", "--count", "people"])
    assert res.exit_code == 2 and "needs --privacy-id" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(app, ["answer", str(data), str(wl), "--schema", str(schema),
                              "--epsilon", "1", *PERSON, "--count", "persons"])
    assert res.exit_code == 2 and "unknown --count 'persons'" in res.output
    res = runner.invoke(app, ["synth", str(data), str(wl), "--schema", str(schema),
                              "--epsilon", "1", *PERSON, "--count", "people"])
    assert res.exit_code == 2 and "Traceback" not in res.output
