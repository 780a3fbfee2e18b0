"""``--privacy-id COLUMN --max-rows K`` end to end on the command line: a person ledger, a
person release (its answers and certificate never hold the id), ``verify``, a refused release
of another unit, synthesis with its record verified, and the option errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.schema.domain import Domain

DOMAIN = Domain.from_dict({"attributes": {
    "age": {"type": "integer", "min": 0, "max": 9},
    "region": {"type": "categorical", "values": ["N", "S", "E", "W"]},
}})
QUERIES = ["age < 5", "age >= 5", "region = 'N'", "age >= 5 AND region = 'N'"]


def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    schema, wl, data = tmp_path / "s.yaml", tmp_path / "w.sql", tmp_path / "t.csv"
    DOMAIN.save(schema)
    wl.write_text("\n".join(QUERIES) + "\n")
    rng = np.random.default_rng(0)
    n = 600
    pd.DataFrame({"customer": [f"person-{i:03d}" for i in rng.integers(0, 120, n)],
                  "age": rng.integers(0, 10, n), "region": rng.choice(list("NSEW"), n)}
                 ).to_csv(data, index=False)
    return schema, wl, data


def test_person_release_on_the_command_line(tmp_path: Path) -> None:
    runner = CliRunner()
    schema, wl, data = files(tmp_path)
    ledger, cert, out = tmp_path / "l.sqlite", tmp_path / "c.json", tmp_path / "a.csv"
    person = ["--privacy-id", "customer", "--max-rows", "4"]
    res = runner.invoke(app, ["ledger", "init", str(ledger), "--schema", str(schema),
                              "--epsilon", "2", *person])
    assert res.exit_code == 0 and "add/remove one person" in res.output, res.output
    res = runner.invoke(app, ["answer", str(data), str(wl), "--schema", str(schema),
                              "--epsilon", "1", "-o", str(out), "--certificate", str(cert),
                              "--ledger", str(ledger), *person])
    assert res.exit_code == 0, res.output
    assert "unit of privacy: one person (privacy id 'customer', at most 4 rows each)" in \
        res.output
    assert "add/remove one person" in res.output
    answers = out.read_text()
    # no id is released (ids are spelled so that no hex digest can contain one)
    assert "customer" not in answers and "person-" not in answers
    doc = json.loads(cert.read_text())
    assert doc["privacy_unit"]["max_rows"] == 4 and "person-" not in cert.read_text()
    res = runner.invoke(app, ["verify", str(cert), str(wl), "--schema", str(schema)])
    assert res.exit_code == 0 and "verified" in res.output, res.output
    # a row-level release against the person ledger: refused, with the reason and the hint
    res = runner.invoke(app, ["answer", str(data), str(wl), "--schema", str(schema),
                              "--epsilon", "0.5", "--ledger", str(ledger)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "the ledger protects one person" in res.output and "--privacy-id customer" in \
        res.output
    res = runner.invoke(app, ["ledger", "show", str(ledger)])
    assert res.exit_code == 0 and "1 release (" in res.output, res.output


def test_person_synthesis_on_the_command_line(tmp_path: Path) -> None:
    runner = CliRunner()
    schema, _, data = files(tmp_path)
    wl = tmp_path / "m.yaml"
    wl.write_text("marginals:\n  - {attributes: [age, region]}\n")
    rows, record = tmp_path / "rows.csv", tmp_path / "run.json"
    res = runner.invoke(app, ["synth", str(data), str(wl), "--schema", str(schema),
                              "--epsilon", "1", "-o", str(rows), "--record", str(record),
                              "--rounds", "6", "--privacy-id", "customer", "--max-rows", "3"])
    assert res.exit_code == 0, res.output
    assert "one person (privacy id 'customer', at most 3 rows each)" in res.output
    assert "customer" not in rows.read_text().splitlines()[0]
    assert json.loads(record.read_text())["privacy_unit"]["max_rows"] == 3
    res = runner.invoke(app, ["verify", str(record), str(wl), "--schema", str(schema)])
    assert res.exit_code == 0, res.output


def test_option_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    schema, wl, data = files(tmp_path)
    for extra, words in ((["--max-rows", "3"], "needs --privacy-id"),
                         (["--privacy-id", "customer"], "needs --max-rows"),
                         (["--privacy-id", "client", "--max-rows", "2"],
                          "privacy id column 'client' is not in the data")):
        res = runner.invoke(app, ["answer", str(data), str(wl), "--schema", str(schema),
                                  "--epsilon", "1", *extra])
        assert res.exit_code == 2 and words in res.output, res.output
        assert "Traceback" not in res.output
