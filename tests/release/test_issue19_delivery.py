"""Issue 19, items 1 and 2: the ledger never pays for what is not delivered.

Every output path is checked before the charge (nothing charged, nothing written); a failure or
Ctrl-C after the charge marks the release aborted and leaves no requested file; a release is
``released`` only when every requested file exists; files appear whole (temp file + rename).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tessera.cli.common import is_interruption
from tessera.cli.main import app
from tessera.data.outputs import Output, OutputError, check_outputs, staged
from tessera.release import Budget, Ledger, answer
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload

SCHEMA = ("attributes:\n  age: {type: integer, min: 0, max: 9}\n"
          "  sex: {type: categorical, values: [F, M]}\n")
DOMAIN = Domain.from_dict({"attributes": {
    "age": {"type": "integer", "min": 0, "max": 9},
    "sex": {"type": "categorical", "values": ["F", "M"]}}})


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text("a: age < 5\nb: sex = 'F'\n")
    rng = np.random.default_rng(0)
    pd.DataFrame({"age": rng.integers(0, 10, 200),
                  "sex": rng.choice(["F", "M"], 200)}).to_csv(tmp_path / "d.csv", index=False)
    r = CliRunner().invoke(app, ["ledger", "init", "L.db", "-s", "schema.yaml",
                                 "--epsilon", "3"])
    assert r.exit_code == 0, r.output
    return tmp_path


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


def ledger_state(path: Path) -> tuple[float, list[str]]:
    s = Ledger.open(path).summary()
    return round(s.spent, 6), [c.status for c in s.releases]


def left(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir()} - {"schema.yaml", "w.sql", "d.csv", "L.db"}


ANSWER = ("answer", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "--ledger", "L.db")


# -- item 1: checked before the charge ---------------------------------------------------------


@pytest.mark.parametrize(("extra", "message"), [
    (("-o", "/nonexistent/dir/a.csv"),
     "error: /nonexistent/dir/a.csv: cannot write the answers: directory /nonexistent/dir does "
     "not exist (hint: create it first (mkdir -p /nonexistent/dir))"),
    (("-o", "answers.txt"),
     "error: answers.txt: cannot write the answers as .txt (hint: use .csv or .parquet)"),
    (("-o", "a.csv", "--report", "/nonexistent/r.html"),
     "error: /nonexistent/r.html: cannot write the report: directory /nonexistent does not "
     "exist"),
    (("-o", "a.csv", "--certificate", "/nonexistent/c.json"),
     "error: /nonexistent/c.json: cannot write the certificate: directory /nonexistent does "
     "not exist"),
    (("--certificate", "c.csv"),
     "error: c.csv: cannot write the certificate as .csv (hint: use .json)"),
    (("-o", "."), "error: .: cannot write the answers as a file without suffix"),
])
def test_item1_answer_outputs_checked_before_the_charge(files: Path, extra: tuple[str, ...],
                                                        message: str) -> None:
    r = run(*ANSWER, *extra)
    assert r.exit_code == 2 and message in r.output, r.output
    assert "Traceback" not in r.output and "charged" not in r.output
    assert ledger_state(files / "L.db") == (0.0, [])
    assert left(files) == set()


def test_item1_answer_output_directory_not_writable(files: Path) -> None:
    # /proc refuses new files even to root: the probe file finds what permissions alone miss
    r = run(*ANSWER, "-o", "/proc/a.csv")
    assert r.exit_code == 2, r.output
    assert r.output.startswith("error: /proc/a.csv: cannot write the answers in /proc: ")
    assert "(hint: choose a directory you can write to)" in r.output
    assert ledger_state(files / "L.db") == (0.0, [])


def test_item1_synth_outputs_checked_before_the_charge(files: Path) -> None:
    r = run("ledger", "init", "S.db", "-s", "schema.yaml", "--epsilon", "3")
    assert r.exit_code == 0
    base = ("synth", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "--ledger", "S.db",
            "--neighbours", "add-remove", "--seed", "1", "--rows", "50")
    for extra, message in [
        (("-o", "/nonexistent/s.csv"), "error: /nonexistent/s.csv: cannot write the synthetic "
                                       "rows: directory /nonexistent does not exist"),
        (("-o", "s.txt"), "error: s.txt: cannot write the synthetic rows as .txt"),
        (("-o", "s.csv", "--record", "/nonexistent/r.json"),
         "error: /nonexistent/r.json: cannot write the run record: directory /nonexistent"),
    ]:
        r = run(*base, *extra)
        assert r.exit_code == 2 and message in r.output, r.output
        assert ledger_state(files / "S.db") == (0.0, [])
    assert left(files) == {"S.db"}
    r = run(*base, "-o", "s.csv", "--record", "r.json")
    assert r.exit_code == 0, r.output
    assert ledger_state(files / "S.db") == (1.0, ["released"])
    assert left(files) == {"S.db", "s.csv", "r.json"}


def test_item1_synth_lp_outputs_checked_before_the_answer_is_charged(files: Path) -> None:
    (files / "w.sql").write_text("t: TRUE\na: age < 5\nb: sex = 'F'\n")
    r = run("synth", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "--ledger", "L.db",
            "--neighbours", "add-remove", "--method", "lp", "-o", "/nonexistent/s.csv")
    assert r.exit_code == 2 and "directory /nonexistent does not exist" in r.output, r.output
    assert ledger_state(files / "L.db") == (0.0, [])


# -- item 1: a failure after the charge --------------------------------------------------------


def test_item1_failure_after_the_charge_marks_aborted_and_leaves_no_file(
        files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tessera.release.report as report

    def full_disk(release: object, path: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, "write_report", full_disk)
    r = run(*ANSWER, "-o", "a.csv", "--certificate", "c.json", "--report", "r.html")
    assert r.exit_code == 2 and r.output == (
        "error: r.html: cannot write the report: No space left on device (hint: release #1 "
        "'w' (ε ≤ 1 alone) was charged before this failure (writing the files) and is marked "
        "aborted in the ledger: its budget stays spent, and no requested file was written)\n"
    ), r.output
    assert ledger_state(files / "L.db") == (1.0, ["aborted"])  # the budget stays spent
    assert left(files) == set()  # neither the answers nor the certificate, no temp file


def test_item1_released_only_when_every_file_exists(files: Path) -> None:
    r = run(*ANSWER, "-o", "a.parquet", "--certificate", "c.json", "--report", "r.html")
    assert r.exit_code == 0, r.output
    assert ledger_state(files / "L.db") == (1.0, ["released"])
    assert left(files) == {"a.parquet", "c.json", "r.html"}


def test_item1_library_answer_checks_outputs_before_the_charge(tmp_path: Path) -> None:
    book = Ledger.init(tmp_path / "L.db", total=1.0, definition="pure",
                       neighbours="add-remove", domain=DOMAIN, dataset="d")
    frame = pd.DataFrame({"age": [1, 2, 7], "sex": ["F", "M", "F"]})
    wl = Workload.from_sql(["age < 5"], DOMAIN)
    with pytest.raises(OutputError, match="directory .* does not exist"):
        answer(frame, wl, Budget.of(epsilon=1.0), ledger=book,
               output=tmp_path / "missing" / "a.csv")
    assert book.summary().releases == ()
    rel = answer(frame, wl, Budget.of(epsilon=1.0), ledger=book, output=tmp_path / "a.csv",
                 seed=1)
    assert rel.charge is not None and rel.charge.status == "released"
    assert (tmp_path / "a.csv").exists()
    assert [c.status for c in book.releases()] == ["released"]


# -- item 2: Ctrl-C ----------------------------------------------------------------------------


def test_item2_ctrl_c_after_the_charge_marks_aborted(
        files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answer_module = importlib.import_module("tessera.release.answering")

    def interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(answer_module, "count_encoded", interrupt)
    r = run(*ANSWER, "-o", "a.csv", "--certificate", "c.json", "--report", "r.html")
    assert r.exit_code == 130 and r.output.strip().endswith("interrupted"), r.output
    assert "Traceback" not in r.output
    assert ledger_state(files / "L.db") == (1.0, ["aborted"])
    assert left(files) == set()


def test_item2_ctrl_c_while_writing_leaves_no_file(
        files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tessera.release.report as report

    def interrupt(release: object, path: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "write_report", interrupt)
    r = run(*ANSWER, "-o", "a.csv", "--certificate", "c.json", "--report", "r.html")
    assert r.exit_code == 130 and r.output.strip() == "interrupted", r.output
    assert ledger_state(files / "L.db") == (1.0, ["aborted"])
    assert left(files) == set()


def test_item2_duckdb_query_interrupted_is_one_clean_line(
        files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    answer_module = importlib.import_module("tessera.release.answering")

    def duckdb_interrupted(*args: object, **kwargs: object) -> None:
        try:
            raise RuntimeError("Query interrupted")  # what DuckDB raises on SIGINT in a query
        except RuntimeError as e:
            raise ValueError("wrapped") from e

    monkeypatch.setattr(answer_module, "encode", duckdb_interrupted)
    r = run(*ANSWER, "-o", "a.csv")
    assert r.exit_code == 130 and r.output.strip() == "interrupted", r.output
    assert ledger_state(files / "L.db") == (0.0, [])  # interrupted before the charge


def test_item2_is_interruption_is_narrow() -> None:
    assert is_interruption(KeyboardInterrupt())
    assert is_interruption(RuntimeError("Query interrupted"))
    assert not is_interruption(RuntimeError("Query failed"))
    assert not is_interruption(ValueError("Query interrupted"))


# -- the helper itself -------------------------------------------------------------------------


def test_item1_staged_writes_all_or_nothing(tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.json"
    a.write_text("old\n")
    with pytest.raises(RuntimeError), staged([a, b]) as (ta, tb):
        assert ta.parent == tmp_path and ta.suffix == ".csv" and ta.name.startswith(".")
        ta.write_text("new\n")
        raise RuntimeError("the second writer fails")
    assert a.read_text() == "old\n" and not b.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]  # no temporary file left
    with staged([a, b]) as (ta, tb):
        ta.write_text("new\n")
        tb.write_text("{}\n")
        assert a.read_text() == "old\n"  # nothing replaced before every file is complete
    assert a.read_text() == "new\n" and b.read_text() == "{}\n"
    assert (b.stat().st_mode & 0o777) == 0o666 & ~_umask()


def test_item1_check_outputs_refuses_a_directory_and_a_shared_path(tmp_path: Path) -> None:
    (tmp_path / "d.csv").mkdir()
    with pytest.raises(OutputError, match="the answers path is a directory"):
        check_outputs([Output(tmp_path / "d.csv", "answers", (".csv",))])
    with pytest.raises(OutputError, match="the record and the rows would be written to the "
                                          "same file"):
        check_outputs([Output(Path("x.json"), "rows"), None,
                       Output(Path("x.json").absolute(), "record")])


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
