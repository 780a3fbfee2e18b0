"""Outputs a person can read, and pipe (issue 19, items 14 and 16): ``answer`` puts the answers
alone on stdout (CSV, like ``count``) and everything else on stderr; floats are printed rounded
(noise scales to 6 significant digits, post-processed answers to 3 decimals; budgets to the 6th
significant digit of the total, spent rounded up and remaining down), the exact values staying
in the certificate and the ledger's JSON."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.release.decimals import format_budget
from tessera.release.output import significant
from tests.release.test_answer import CLAUSES, DOMAIN, _frame

HEADER = ["query", "answer", "noise_scale", "ci95_low", "ci95_high"]


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    DOMAIN.save(tmp_path / "s.yaml")
    (tmp_path / "w.sql").write_text("\n".join(CLAUSES) + "\n")
    _frame().to_csv(tmp_path / "d.csv", index=False)
    return {"schema": tmp_path / "s.yaml", "workload": tmp_path / "w.sql",
            "data": tmp_path / "d.csv", "dir": tmp_path}


def _invoke(*args: str) -> tuple[str, str]:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout, res.stderr


def _answer(files: dict[str, Path], *extra: str) -> tuple[str, str]:
    return _invoke("answer", str(files["data"]), str(files["workload"]), "--schema",
                   str(files["schema"]), *extra)


def test_item16_answer_stdout_holds_the_csv_alone(files: dict[str, Path]) -> None:
    """γ = 4 at ε = 1.5: scale 4/1.5 per query. stdout is exactly a CSV of the 8 queries;
    the budget, mechanism, guarantees and written paths are on stderr."""
    stdout, stderr = _answer(files, "--epsilon", "1.5", "--weights", "uniform",
                             "--certificate", str(files["dir"] / "c.json"))
    rows = list(csv.reader(io.StringIO(stdout)))
    assert rows[0] == HEADER and [r[0] for r in rows[1:]] == CLAUSES
    assert {r[2] for r in rows[1:]} == {"2.66667"}            # item 14: rounded for people
    for r in rows[1:]:
        assert int(r[3]) < int(r[1]) < int(r[4])
    for line in ("budget: ε = 1.5 (pure ε-DP), add/remove one row neighbours",
                 "γ_w = 4 (exact), 8 queries", "guarantee: pure ε-DP with ε = 1.5",
                 f"certificate: {files['dir'] / 'c.json'}"):
        assert line in stderr and line not in stdout
    exact = json.loads((files["dir"] / "c.json").read_text())["queries"][0]["scale"]
    assert repr(exact) not in ("2.66667",) and abs(exact - 4 / 1.5) < 1e-9  # exact in JSON


def test_item16_answer_csv_pipes_into_a_reader_with_postprocessing(
        files: dict[str, Path]) -> None:
    """With --consistency and a seed: the NOT PRIVATE comment line, then the CSV; consistent
    answers with at most 3 decimals."""
    stdout, stderr = _answer(files, "--rho", "0.3", "--seed", "4", "--consistency")
    lines = stdout.splitlines()
    assert lines[0] == "# NOT PRIVATE: seeded test randomness, never publish"
    rows = list(csv.reader(lines[1:]))
    assert rows[0] == [*HEADER, "consistency"] and len(rows) == 1 + len(CLAUSES)
    for r in rows[1:]:
        whole, _, decimals = r[5].partition(".")
        assert len(decimals) <= 3 and len(r[2].replace(".", "").lstrip("0")) <= 6
    assert "NOT PRIVATE" in stderr and "guarantee:" in stderr


def test_item14_ledger_figures_rounded_spent_up_remaining_down(files: dict[str, Path]) -> None:
    """Two releases of ε = 1.5 on a total of 3: the spent float lands a hair off 3 and the
    remaining one a few 1e-12 above 0; people read 3 and 0, with the rounding stated."""
    ledger = str(files["dir"] / "l.sqlite")
    _invoke("ledger", "init", ledger, "--schema", str(files["schema"]), "--epsilon", "3")
    _, first = _answer(files, "--epsilon", "1.5", "--weights", "uniform", "--ledger", ledger)
    assert "ledger: charged before release; spent 0 → 1.5 (rounded up)" in first
    _answer(files, "--epsilon", "1.5", "--weights", "uniform", "--ledger", ledger)
    shown, _ = _invoke("ledger", "show", ledger)
    assert "spent 3 (exact), remaining 0; 2 releases (spent rounded up, remaining down)" \
        in shown, shown
    doc = json.loads(_invoke("ledger", "show", ledger, "--json")[0])
    assert 0 <= doc["remaining"] < 1e-9 and abs(doc["spent"] - 3) < 1e-9  # exact in JSON


@pytest.mark.parametrize(("x", "total", "up", "text"), [
    (2.99999999999685, 3.0, True, "3"),
    (3.1544e-12, 3.0, False, "0"),
    (1.499999999998972, 3.0, True, "1.5"),
    (1.5000000001, 3.0, True, "1.50001"),
    (1.5000000001, 3.0, False, "1.5"),
    (0.000123456789, 0.001, True, "0.00012346"),
    (250.0, 1000.0, True, "250"),
    (0.0, 1.0, True, "0"),
])
def test_item14_format_budget(x: float, total: float, up: bool, text: str) -> None:
    assert format_budget(x, total, up=up) == text


def test_item14_significant_digits_print_short() -> None:
    values = np.array([5.0000000000052935, 2.6666666666666665, 1234567.89, 1.23456789e-4,
                       0.0, np.inf])
    assert [repr(float(v)) for v in significant(values)] == [
        "5.0", "2.66667", "1234570.0", "0.000123457", "0.0", "inf"]
