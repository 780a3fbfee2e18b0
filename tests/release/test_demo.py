"""``tessera demo`` shows both main jobs on one population under one ledger (issue 19, item
20): the private answers (answers, certificate, report) and private synthetic data for the same
workload (rows, run record, evaluation), each charged before it is written."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.release.ledger import Ledger
from tessera.schema.domain import Domain
from tessera.synth.evaluate import evaluate
from tessera.workload.workload import Workload


def test_item20_demo_answers_and_synthesizes_the_same_population(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    res = CliRunner().invoke(app, ["demo", "--out", str(out), "--seed", "5"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].startswith("1. answered 33 queries at ε = 1 (pure ε-DP, add/remove one row)")
    scales = pd.read_csv(out / "answers.csv", comment="#")["noise_scale"]
    assert f"Laplace scale {scales.min():.3g}–{scales.max():.3g} per query" in lines[0], lines[0]
    assert lines[1].startswith("2. made ") and "synthetic rows for the same workload" in lines[1]
    assert "NOT PRIVATE" in lines[1] and "NOT PRIVATE" in res.stderr  # seeded, and evaluation
    for name in ("population.csv", "schema.yaml", "workload.sql", "ledger.sqlite",
                 "answers.csv", "certificate.json", "report.html", "synthetic.csv",
                 "synthetic-run.json", "synthetic-evaluation.json"):
        assert (out / name).is_file(), name
        assert f"{out / name}" in res.stdout
    summary = Ledger.open(out / "ledger.sqlite").summary()
    assert [c.label for c in summary.releases] == ["demo", "demo synthetic data"]
    assert [c.status for c in summary.releases] == ["released", "released"]
    assert summary.spent <= 2.0 + 1e-9 and summary.total == 3.0
    record = json.loads((out / "synthetic-run.json").read_text())
    assert record["ledger"]["status"] == "released"
    # the evaluation on file is the evaluation of the rows on file against the population
    doc = json.loads((out / "synthetic-evaluation.json").read_text())
    domain = Domain.load(out / "schema.yaml")
    again = evaluate(pd.read_csv(out / "population.csv"), out / "synthetic.csv",
                     Workload.load(out / "workload.sql", domain))
    assert doc["max_error"] == again.max_error and doc["queries"] == 33
    assert doc["note"].startswith("NOT PRIVATE")


def test_demo_headline_states_the_noise_that_ran() -> None:
    """The headline's noise is read off the release: the range of the per-query scales it used
    (the optimal allocation gives each query its own) and Σ_q 1/b_q, the cost of the same noise
    under sequential composition — not γ/ε, a uniform scale no query was answered with."""
    from tessera.cli.demo import noise_text
    from tessera.demo.end_to_end import SCHEMA, WORKLOAD_LINES, synthetic_population
    from tessera.release.answering import answer
    from tessera.release.budget import Budget

    names, sql = zip(*(line.split(": ", 1) for line in WORKLOAD_LINES))
    w = Workload.from_sql(list(sql), Domain.from_dict(SCHEMA), names=list(names))
    release = answer(synthetic_population(2_000), w, Budget.of(epsilon=1.0), seed=3)
    scales = release.to_frame()["noise_scale"]
    assert scales.min() < scales.max()  # per-query scales: one number would misstate them
    text = noise_text(release)
    assert text.startswith(f"discrete Laplace scale {scales.min():.3g}–{scales.max():.3g} "
                           "per query;"), text
    assert f"ε = {(1 / scales).sum():.3g} under sequential composition" in text, text
