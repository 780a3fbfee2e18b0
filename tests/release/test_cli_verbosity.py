"""The global ``--verbose/-v`` and ``--quiet/-q``: the library logs its main steps to the
``tessera`` logger (a NullHandler alone when used as a library); ``-v`` shows them on stderr,
``-vv`` every step; ``-q`` leaves results, errors and the NOT PRIVATE marks only. What is
logged is public or DP: never the number of rows."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import tessera
from tessera.cli.main import app
from tessera.release import Budget, Ledger, answer
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload

SCHEMA = ("attributes:\n  age: {type: integer, min: 0, max: 9}\n"
          "  sex: {type: categorical, values: [F, M]}\n")
#: an unusual number of rows, so a log line that gave it away would show it
ROWS = 317
ANSWER = ("answer", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "--ledger", "L.db",
          "-o", "a.csv")


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"age": rng.integers(0, 10, ROWS), "sex": rng.choice(["F", "M"], ROWS)})


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text("a: age < 5\nb: sex = 'F'\nc: age >= 3 AND sex = 'M'\n")
    _frame().to_csv(tmp_path / "d.csv", index=False)
    r = run("ledger", "init", "L.db", "-s", "schema.yaml", "--epsilon", "5")
    assert r.exit_code == 0, r.output
    return tmp_path


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


def row_count(line: str) -> bool:
    """Whether ``line`` states the data's number of rows (a whole number on its own, not
    digits inside a timing or a noise value such as 0.0317 s)."""
    return re.search(rf"(?<![\d.]){ROWS}(?![\d.])", line) is not None


def log_lines(text: str) -> list[str]:
    return [line for line in text.splitlines()
            if line.startswith(("debug:", "info:", "warning:", "error:"))]


def test_the_library_has_a_null_handler_only() -> None:
    handlers = logging.getLogger("tessera").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)
    assert tessera.__name__ == "tessera"


def test_the_library_logs_its_key_steps(files: Path, caplog: pytest.LogCaptureFixture) -> None:
    w = Workload.load(files / "w.sql", Domain.load(files / "schema.yaml"))
    with caplog.at_level(logging.DEBUG, logger="tessera"):
        answer(files / "d.csv", w, Budget.of(epsilon=1.0), ledger=files / "L.db")
    by = {(r.name, r.levelno) for r in caplog.records}
    assert ("tessera.release.plan", logging.INFO) in by  # the calibration chosen
    assert ("tessera.data.source", logging.INFO) in by  # the engine that read the data
    assert ("tessera.release.ledger", logging.INFO) in by  # the charge
    assert ("tessera.release.answering", logging.DEBUG) in by  # the noise added
    assert not any(row_count(r.getMessage()) for r in caplog.records)


def test_default_shows_the_summary_and_no_log_lines(files: Path) -> None:
    r = run(*ANSWER)
    assert r.exit_code == 0, r.output
    assert "guarantee: pure ε-DP" in r.stderr and "answers:" in r.stderr
    assert log_lines(r.stderr) == []


def test_verbose_shows_calibration_read_and_charge(files: Path) -> None:
    r = run("-v", *ANSWER)
    assert r.exit_code == 0, r.output
    lines = log_lines(r.stderr)
    assert any(x.startswith("info: calibrated 3 queries: ε = 1 (pure ε-DP)") for x in lines), lines
    assert "info: reading d.csv with duckdb (2 attributes)" in lines, lines
    assert any(x.startswith("info: ledger L.db: charged 'w' (3 queries, discrete_laplace)")
               for x in lines), lines
    assert not any(x.startswith("debug:") for x in lines)
    assert "guarantee: pure ε-DP" in r.stderr  # the summary as without -v
    assert not any(row_count(x) for x in lines)


def test_very_verbose_shows_every_synthesis_round(files: Path) -> None:
    r = run("-vv", "synth", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "--ledger", "L.db",
            "-o", "s.csv", "--rows", "50", "--seed", "3")
    assert r.exit_code == 0, r.output
    lines = log_lines(r.stderr)
    rounds = [x for x in lines if x.startswith("debug: tessera.synth.adaptive: round ")]
    assert rounds and "measured" in rounds[0] and "spent" in rounds[0], lines
    assert any(x.startswith("info: synthesizing (adaptive) for 3 queries") for x in lines)
    assert any(x.startswith("info: adaptive: ") and "re-proved" in x for x in lines), lines
    assert not any(row_count(x) for x in lines), lines  # the data's size: private


def test_quiet_leaves_results_errors_and_not_private_only(files: Path) -> None:
    r = run("-q", *ANSWER)
    assert r.exit_code == 0, r.output
    assert r.stderr == "" and r.stdout == ""
    assert (files / "a.csv").is_file()
    assert [c.status for c in Ledger.open(files / "L.db").summary().releases] == ["released"]
    # without -o the answers still go to stdout; a seeded run still says NOT PRIVATE
    r = run("-q", "answer", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "--seed", "2")
    assert r.exit_code == 0, r.output
    assert r.stderr.strip() == "NOT PRIVATE: seeded test randomness (--seed); never publish"
    assert "a," in r.stdout.replace('"', "")
    # an error is still one line
    r = run("-q", "answer", "nope.csv", "w.sql", "-s", "schema.yaml", "-e", "1")
    assert r.exit_code == 2 and r.stderr.startswith("error:"), r.output
    # and -q silences the count's "wrote" line, not its NOT PRIVATE mark
    r = run("-q", "count", "d.csv", "w.sql", "-s", "schema.yaml", "-o", "c.csv")
    assert r.exit_code == 0, r.output
    assert "NOT PRIVATE" in r.stderr and "wrote" not in r.stderr


def test_verbose_and_quiet_together_is_a_one_line_error(files: Path) -> None:
    r = run("-v", "-q", *ANSWER)
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.stderr.strip() == ("error: --verbose and --quiet contradict each other: give one "
                                "of them")
    assert Ledger.open(files / "L.db").summary().releases == ()
