"""``tessera demo --people``: counts, sums and means of a made-up purchases table, private for
one customer of at most K rows, charged to a person ledger, with a certificate that verifies."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.demo.people import CATEGORIES, CHANNELS, REGIONS, transactions
from tessera.release.aggregate_certificate import verify_aggregate_certificate
from tessera.release.ledger import Ledger
from tessera.schema.domain import Domain
from tessera.workload.select import read_aggregates


def test_people_demo_answers_counts_sums_and_means_per_person(tmp_path: Path) -> None:
    out = tmp_path / "people"
    res = CliRunner().invoke(app, ["demo", "--people", "--out", str(out), "--seed", "5",
                                   "--max-rows", "8"])
    assert res.exit_code == 0, res.output
    assert "NOT PRIVATE" in res.stderr  # seeded
    for name in ("purchases.csv", "schema.yaml", "workload.sql", "ledger.sqlite",
                 "answers.csv", "certificate.json"):
        assert (out / name).is_file(), name
        assert f"{out / name}" in res.stdout
    lines = res.stdout.splitlines()
    data = pd.read_csv(out / "purchases.csv")
    per = data.groupby("customer").size()
    assert per.min() >= 1 and per.max() <= 50 and per.size == 2000
    assert lines[0].startswith(f"1. made up {len(data):,} purchases of 2,000 customers")
    assert f"{int((per > 8).sum()):,} have more than K = 8" in lines[0]
    # the schema declares the purchase columns, not the id
    domain = Domain.load(out / "schema.yaml")
    assert "customer" not in domain.names and "amount" in domain.names
    # the certificate: one person of at most 8 rows, and it re-checks from the workload alone
    doc = json.loads((out / "certificate.json").read_text())
    assert doc["privacy_unit"] == {"id_column": "customer", "max_rows": 8}
    assert verify_aggregate_certificate(doc, read_aggregates(out / "workload.sql", domain)) == []
    assert "the certificate verified" in res.stdout
    assert f"tessera verify {out / 'certificate.json'} {out / 'workload.sql'}" in res.stdout
    # K×: the same noise costs ε/K for one row, ε for one person
    assert "one row at ε = 0.125; one customer of up to K = 8 rows costs K× that, ε = 1" \
        in res.stdout, res.stdout
    # the answers: every statement's groups, and its counts, sums and means
    ans = pd.read_csv(out / "answers.csv", comment="#", keep_default_na=False)
    groups = {st: set(g) for st, g in ans.groupby("statement")["group"]}
    assert groups["by_region"] == {f"region={r}" for r in REGIONS}
    assert groups["by_region_channel"] == {f"region={r}, channel={c}"
                                           for r in REGIONS for c in CHANNELS}
    assert groups["web_by_category"] == {f"category={c}" for c in CATEGORIES}
    assert set(ans.loc[ans.statement == "by_region", "aggregate"]) == {
        "COUNT(*)", "SUM(amount)", "AVG(amount)"}
    assert len(ans) == 4 * 3 + 8 * 2 + 4 * 2 + 2
    # the ledger: a person ledger, charged once, for that release
    book = Ledger.open(out / "ledger.sqlite")
    summary = book.summary()
    assert [(c.label, c.status) for c in summary.releases] == [("demo people", "released")]
    assert abs(summary.spent - 1.0) < 1e-6 and summary.total == 3.0
    assert doc["ledger"]["label"] == "demo people"


def test_people_demo_table_is_made_up_deterministically() -> None:
    """Seeded made-up data: the same table each run; 1–50 rows per customer, amounts 0..500."""
    a, b = transactions(300, seed=1), transactions(300, seed=1)
    pd.testing.assert_frame_equal(a, b)
    per = a.groupby("customer").size()
    assert per.size == 300 and 1 <= per.min() and per.max() <= 50
    assert a["amount"].between(0, 500).all()
    # a customer lives in one region
    assert (a.groupby("customer")["region"].nunique() == 1).all()


def test_max_rows_without_people_is_refused(tmp_path: Path) -> None:
    """--max-rows is K of the people demo: given to the other demo, it is refused, not ignored."""
    res = CliRunner().invoke(app, ["demo", "--max-rows", "3", "--out", str(tmp_path / "d")])
    assert res.exit_code != 0
    assert "--max-rows goes with --people" in res.output
    assert not (tmp_path / "d").exists()
