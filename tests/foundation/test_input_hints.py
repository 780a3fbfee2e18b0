"""Input that used to be read silently or explained wrongly: columns the schema does not declare
(refused unless ``--extra-columns ignore``, then named on stderr), values padded by a ``', '``
separator read as ``','`` (the hint points at ``--delimiter``, not at ``--on-invalid drop``),
a file that does not split into fields, and ``'?'`` where the schema declares ``missing: true``
(the hint names ``--na``)."""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from typer.testing import CliRunner

import tessera
from tessera.cli.main import app
from tessera.data.table import CsvOptions
from tessera.errors import DataError, DataWarning

SCHEMA = (
    "attributes:\n"
    "  age: {type: integer, min: 0, max: 99}\n"
    "  job: {type: categorical, values: [Private, State-gov], missing: true}\n"
    "  sex: {type: categorical, values: [Male, Female]}\n"
)


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


def input_error(result) -> str:  # type: ignore[no-untyped-def]
    """The one error line of a refused run (exit 2, no traceback)."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = [ln for ln in result.output.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text("age > 30\njob = 'Private'\n")
    return tmp_path


def workload(files: Path) -> tessera.Workload:
    return tessera.Workload.load(files / "w.sql", tessera.Domain.load(files / "schema.yaml"))


# -- columns the schema does not declare -------------------------------------------------------

EXTRA_CSV = "age,job,sex,salary,zip\n39,State-gov,Male,10,1\n50,Private,Female,20,2\n"


def test_an_undeclared_column_is_refused_by_name_with_the_option_that_allows_it(
        files: Path) -> None:
    (files / "d.csv").write_text(EXTRA_CSV)
    line = input_error(run("count", "d.csv", "w.sql", "-s", "schema.yaml"))
    assert "2 columns that the schema does not declare: 'salary', 'zip'" in line
    assert "--extra-columns ignore" in line


@pytest.mark.parametrize("command", ["count", "answer"])
def test_extra_columns_ignore_reads_the_schema_columns_and_names_the_others(
        files: Path, command: str) -> None:
    (files / "d.csv").write_text(EXTRA_CSV)
    more = ["--epsilon", "1", "--seed", "1"] if command == "answer" else []
    result = run(command, "d.csv", "w.sql", "-s", "schema.yaml", "--extra-columns", "ignore",
                 *more)
    assert result.exit_code == 0, result.output
    assert ("warning: ignored 2 columns of the data that the schema does not declare "
            "(--extra-columns ignore): 'salary', 'zip'") in result.output
    if command == "count":
        assert "age > 30,2\njob = 'Private',1\n" in result.output


def test_an_unknown_extra_columns_policy_is_refused(files: Path) -> None:
    (files / "d.csv").write_text(EXTRA_CSV)
    line = input_error(run("count", "d.csv", "w.sql", "-s", "schema.yaml",
                           "--extra-columns", "keep"))
    assert "--extra-columns 'keep': use 'error' or 'ignore'" in line


def _sources(files: Path) -> dict[str, object]:
    frame = pd.read_csv(io.StringIO(EXTRA_CSV))
    frame.to_parquet(files / "d.parquet", index=False)
    (files / "d.csv").write_text(EXTRA_CSV)
    return {"csv": str(files / "d.csv"), "parquet": str(files / "d.parquet"),
            "pandas": frame, "arrow": pa.Table.from_pandas(frame, preserve_index=False)}


@pytest.mark.parametrize("kind", ["csv", "parquet", "pandas", "arrow"])
def test_every_source_refuses_or_ignores_extra_columns_alike(files: Path, kind: str) -> None:
    source = _sources(files)[kind]
    w = workload(files)
    with pytest.raises(DataError, match=r"does not declare: 'salary', 'zip'.*--extra-columns"):
        tessera.count(source, w)
    with pytest.warns(DataWarning, match=r"ignored 2 columns .*'salary', 'zip'"):
        result = tessera.count(source, w, extra_columns="ignore")
    assert result.answers.tolist() == [2, 1]


def test_a_schema_that_covers_every_column_reads_without_a_warning(files: Path) -> None:
    (files / "d.csv").write_text("age,job,sex\n39,State-gov,Male\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert tessera.count(str(files / "d.csv"), workload(files)).answers.tolist() == [1, 0]


# -- a ', ' separator read as ',' (UCI Adult) --------------------------------------------------

#: UCI Adult's layout: ', ' between fields and '?' for a missing value ('?' padded to ' ?' too).
ADULT_LIKE = "39, State-gov, Male\n50, ?, Female\n38, Private, Male\n"


@pytest.mark.parametrize("header", [False, True], ids=["no-header", "header"])
def test_padded_values_point_at_the_delimiter_not_at_dropping_rows(
        files: Path, header: bool) -> None:
    (files / "adult.data").write_text(("age, job, sex\n" if header else "") + ADULT_LIKE)
    flags = [] if header else ["--no-header"]
    line = input_error(run("count", "adult.data", "w.sql", "-s", "schema.yaml", *flags))
    assert "' State-gov'" in line  # the values are still named
    assert "values have leading spaces (' Private' in 'job'): the delimiter may be ', ' — " \
           "try --delimiter ', '" in line
    assert "pass --on-invalid drop" not in line


def test_padded_values_in_a_frame_say_strip_them(files: Path) -> None:
    frame = pd.DataFrame({"age": [39], "job": [" Private"], "sex": ["Male"]})
    with pytest.raises(DataError, match=r"leading spaces \(' Private' in 'job'\): strip them"):
        tessera.count(frame, workload(files))


# -- a file that does not split into fields ----------------------------------------------------


def test_a_header_read_as_one_column_points_at_the_delimiter(files: Path) -> None:
    (files / "d.csv").write_text("age;job;sex\n39;Private;Male\n")
    line = input_error(run("count", "d.csv", "w.sql", "-s", "schema.yaml", "-d", ","))
    assert "column 'age' of the schema is not in the data" in line
    assert "the header was read as one column 'age;job;sex': the delimiter may be ';' — " \
           "try --delimiter ';'" in line


def test_a_row_read_as_one_field_points_at_the_delimiter(files: Path) -> None:
    (files / "d.csv").write_text("39;Private;Male\n50;Private;Female\n")
    line = input_error(run("count", "d.csv", "w.sql", "-s", "schema.yaml", "--no-header",
                           "-d", ","))
    assert "d.csv:1: a row of 1 field, expected 3" in line
    assert "the row did not split into fields: the delimiter may be ';' — try --delimiter ';'" \
        in line


def test_adult_read_with_the_wrong_delimiter_suggests_its_own(files: Path) -> None:
    (files / "adult.data").write_text(ADULT_LIKE)
    line = input_error(run("count", "adult.data", "w.sql", "-s", "schema.yaml", "--no-header",
                           "-d", ";"))
    assert "try --delimiter ', '" in line


# -- '?' where the schema declares missing values ----------------------------------------------


@pytest.mark.parametrize("header", [True, False], ids=["header", "no-header"])
def test_a_question_mark_names_na_when_missing_is_declared(files: Path, header: bool) -> None:
    (files / "d.csv").write_text(("age,job,sex\n" if header else "")
                                 + "39,State-gov,Male\n50,?,Female\n")
    flags = [] if header else ["--no-header"]
    line = input_error(run("count", "d.csv", "w.sql", "-s", "schema.yaml", *flags))
    assert "column 'job': 1 rows outside the domain: '?' (1 rows)" in line
    assert "'?' is not a declared missing marker; if it means missing, pass --na '?'" in line
    assert "declare" not in line.split("hint:")[1].replace("declared", "")
    ok = run("count", "d.csv", "w.sql", "-s", "schema.yaml", "--na", "?", *flags)
    assert ok.exit_code == 0, ok.output


def test_a_question_mark_without_declared_missing_says_declare_it_too(files: Path) -> None:
    (files / "d.csv").write_text("age,job,sex\n39,State-gov,Male\n50,Private,?\n")
    line = input_error(run("count", "d.csv", "w.sql", "-s", "schema.yaml"))
    assert "pass --na '?' (CsvOptions(na_values=('?',))) and declare 'sex' with missing: " \
           "true" in line


def test_the_python_api_gets_the_same_hints(files: Path) -> None:
    (files / "d.csv").write_text(ADULT_LIKE)
    w = workload(files)
    with pytest.raises(DataError, match=r"try --delimiter ', ' \(CsvOptions\(delimiter=', '\)\)"):
        tessera.count(str(files / "d.csv"), w, csv=CsvOptions(header=False))
    with pytest.raises(DataError, match=r"pass --na '\?'"):
        tessera.count(str(files / "d.csv"), w, csv=CsvOptions(header=False, delimiter=", "))
    result = tessera.count(str(files / "d.csv"), w,
                           csv=CsvOptions(header=False, delimiter=", ", na_values=("?",)))
    assert result.answers.tolist() == [3, 1]
