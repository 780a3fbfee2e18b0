"""Hostile input ends in one error line (exit 2) with the location and a hint, never a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import tessera
from tessera.cli.main import app
from tessera.errors import QueryWarning

SCHEMA = (
    "attributes:\n  age: {type: integer, min: 0, max: 120}\n"
    "  sex: {type: categorical, values: [M, F]}\n"
)


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


def assert_input_error(result, message: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"error: {message}" in result.output, result.output


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text("age > 30\n")
    return tmp_path


def test_version() -> None:
    result = run("--version")
    assert result.exit_code == 0
    assert result.output == f"tessera-dp {tessera.__version__}\n"


# -- a directory as DATA -----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["count", "answer"])
def test_empty_directory_as_data(files: Path, command: str) -> None:
    (files / "empty").mkdir()
    extra = ["--epsilon", "1"] if command == "answer" else []
    result = run(command, "empty", "w.sql", "-s", "schema.yaml", *extra)
    assert_input_error(
        result,
        "empty is a directory with no .parquet/.csv files (hint: pass a CSV or Parquet file, "
        "or a directory of .parquet files)",
    )


def test_mixed_and_csv_directories_are_refused(files: Path) -> None:
    df = pd.DataFrame({"age": [20, 40, 50], "sex": ["M", "F", "M"]})
    (files / "mixed").mkdir()
    df.to_parquet(files / "mixed" / "a.parquet")
    df.to_csv(files / "mixed" / "b.csv", index=False)
    assert_input_error(
        run("count", "mixed", "w.sql", "-s", "schema.yaml"),
        "mixed is a directory with both .parquet and CSV files (1 and 1) (hint: a directory is "
        "read as one Parquet data set: keep only its .parquet files, or pass one file)",
    )
    (files / "csvs").mkdir()
    df.to_csv(files / "csvs" / "b.csv", index=False)
    assert_input_error(
        run("count", "csvs", "w.sql", "-s", "schema.yaml"),
        "csvs is a directory of CSV files (1) (hint: pass one CSV file; a directory is read as "
        "a Parquet data set)",
    )


def test_parquet_directory_is_read(files: Path) -> None:
    df = pd.DataFrame({"age": [20, 40, 50], "sex": ["M", "F", "M"]})
    (files / "pq").mkdir()
    df.to_parquet(files / "pq" / "a.parquet")
    df.to_parquet(files / "pq" / "b.parquet")
    (files / "pq" / "_SUCCESS").write_text("")
    result = run("count", "pq", "w.sql", "-s", "schema.yaml")
    assert result.exit_code == 0, result.output
    assert "age > 30,4" in result.output


def test_broken_parquet_file(files: Path) -> None:
    (files / "bad.parquet").write_text("nope")
    result = run("count", "bad.parquet", "w.sql", "-s", "schema.yaml")
    assert_input_error(result, "cannot read bad.parquet as Parquet: ")
    assert "too small to be a Parquet file" in result.output


# -- absurd integer bounds ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bound", "shown"), [("1e23", "'1e23'"), ("1.0e+23", "1e+23"), ("0.5", "0.5"), ("true", "True")]
)
@pytest.mark.parametrize("command", ["schema check", "count", "overlap", "treewidth"])
def test_non_integer_bound(files: Path, bound: str, shown: str, command: str) -> None:
    spec = f"{{type: integer, min: 0, max: {bound}}}"
    (files / "big.yaml").write_text(f"attributes:\n  age: {spec}\n")
    args = ["big.yaml"] if command == "schema check" else ["w.sql", "-s", "big.yaml"]
    if command == "count":
        (files / "d.csv").write_text("age\n3\n")
        args = ["d.csv", *args]
    result = run(*command.split(), *args)
    assert_input_error(
        result,
        f"big.yaml: attribute 'age' (integer): max {shown} is not an integer (hint: write max "
        "as a whole number in digits, e.g. max: 120; a float such as 1e23 cannot name one "
        "integer exactly)",
    )


def test_too_many_integer_codes(files: Path) -> None:
    spec = "{type: integer, min: 0, max: 99999999999}"
    (files / "wide.yaml").write_text(f"attributes:\n  age: {spec}\n")
    assert_input_error(
        run("schema", "check", "wide.yaml"),
        "wide.yaml: attribute 'age' (integer): min 0 to max 99999999999 is 100,000,000,000 "
        "values, more than 2**31 (hint: narrow the range, or declare a binned attribute "
        "(type: binned, edges: [...]) for a wide numeric range)",
    )


# -- ragged CSV rows and stray quotes ----------------------------------------------------------

CSV_HINT = "(hint: fix that line (quote fields that contain the delimiter), or check --delimiter)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("age,sex\n20,M\n40,F,extra\n50,M\n", "bad.csv:3: a row of 3 fields, expected 2"),
        ("age,sex\n20,M\n40\n50,M\n", "bad.csv:3: a row of 1 field, expected 2"),
        ('age,sex\n20,M\n40,"F\n50,M\n', "bad.csv:3: a value with an unterminated quote"),
    ],
)
@pytest.mark.parametrize(
    "flags", [[], ["--no-header", "--delimiter", ",", "--skip-rows", "1"]], ids=["sniffed", "given"]
)
def test_ragged_csv_names_the_line(files: Path, text: str, message: str, flags: list[str]) -> None:
    (files / "bad.csv").write_text(text)
    result = run("count", "bad.csv", "w.sql", "-s", "schema.yaml", *flags)
    assert_input_error(result, f"{message} {CSV_HINT}")


# -- "note: 0 search nodes" --------------------------------------------------------------------


def test_search_note_says_proved_at_the_root(files: Path) -> None:
    (files / "w2.sql").write_text("age > 30\nage > 40\nsex = 'M'\nage < 50 AND sex = 'F'\n")
    result = run("overlap", "w2.sql", "-s", "schema.yaml", "--method", "branch-bound")
    assert result.exit_code == 0, result.output
    assert "note: proved at the root (no branching needed)" in result.output
    assert "0 search nodes" not in result.output


def test_search_note_counts_nodes() -> None:
    from tessera.overlap.routes import nodes_note

    assert nodes_note(0) == "proved at the root (no branching needed)"
    assert nodes_note(1) == "1 search node"
    assert nodes_note(12) == "12 search nodes"


# -- query names in any script -----------------------------------------------------------------


def test_unicode_query_name(files: Path) -> None:
    from tessera.schema.domain import Domain
    from tessera.workload.workload import Workload

    (files / "u.sql").write_text("été: age > 30\nΔ_1: age < 3\n")
    result = run("workload", "check", "u.sql", "-s", "schema.yaml")
    assert result.exit_code == 0, result.output
    assert "syntax error" not in result.output
    w = Workload.load(files / "u.sql", Domain.load(files / "schema.yaml"))
    assert w.names == ("été", "Δ_1")
    w.save(files / "u2.sql")
    assert (files / "u2.sql").read_text() == "été: age >= 31\nΔ_1: age <= 2\n"


# -- literals that match no value: accepted, with a warning naming file:line -----------------

PCLASS = (
    "attributes:\n  Pclass: {type: integer, min: 1, max: 3}\n"
    "  sex: {type: categorical, values: [M, F]}\n"
)
NEVER = "no row can have this value"


def test_out_of_range_and_fractional_literals_warn(files: Path) -> None:
    from tessera.schema.domain import Domain
    from tessera.workload.workload import Workload

    (files / "p.yaml").write_text(PCLASS)
    # the same literals twice: the fast parser's memo must not swallow the second warning
    (files / "w.sql").write_text(
        "Pclass = 1\nPclass = 2 AND sex = 'M'\nPclass IN (0, 7)\nPclass = 1.5\n"
        "Pclass IN (0, 7) AND sex = 'F'\nPclass = 1.5\nPclass < 1.5\n"
    )
    expected = [
        f"w.sql:3: 0 is outside Pclass's range 1..3; {NEVER}",
        f"w.sql:3: 7 is outside Pclass's range 1..3; {NEVER}",
        f"w.sql:4: 1.5 is not an integer, and Pclass takes integers; {NEVER}",
        f"w.sql:5: 0 is outside Pclass's range 1..3; {NEVER}",
        f"w.sql:5: 7 is outside Pclass's range 1..3; {NEVER}",
        f"w.sql:6: 1.5 is not an integer, and Pclass takes integers; {NEVER}",
    ]
    # the same clause twice is also the same name twice: made unique, said while loading
    renamed = ("w.sql:6: query name 'Pclass = 1.5' is already used (w.sql:4); this query is "
               "named 'Pclass = 1.5 (2)'")
    result = run("workload", "check", "w.sql", "-s", "p.yaml")
    assert result.exit_code == 0, result.output
    assert [line for line in result.stderr.splitlines() if line.startswith("warning:")] == [
        f"warning: {w}" for w in [renamed, *expected]
    ]
    with pytest.warns(QueryWarning, match=re.escape(renamed)):
        w = Workload.load(Path("w.sql"), Domain.load(files / "p.yaml"))
    assert list(w.warnings) == expected
    assert not w.queries[2].predicates[0].coverage  # still accepted: a contradiction


def test_literal_warning_in_structured_workload(files: Path) -> None:
    (files / "p.yaml").write_text(PCLASS)
    (files / "w.yaml").write_text('queries:\n  - {name: q, where: "Pclass <> 9"}\n')
    result = run("workload", "check", "w.yaml", "-s", "p.yaml")
    assert result.exit_code == 0, result.output
    assert f"warning: w.yaml:queries[0]: 9 is outside Pclass's range 1..3; {NEVER}" in (
        result.stderr
    )


# -- a broken schema reports every error ---------------------------------------------------------


def test_schema_reports_every_error(files: Path) -> None:
    (files / "bad.yaml").write_text(
        "attributes:\n  a: {type: integer, min: 5, max: 1}\n  b: {type: categorical}\n"
        "  c: {type: integer, min: 0, max: 3}\n  d: {type: intger}\n"
    )
    result = run("schema", "check", "bad.yaml")
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        "error: bad.yaml: attribute 'a': min 5 > max 1 (hint: swap them)",
        "error: bad.yaml: attribute 'b' (categorical): 'values' must be a list, got None "
        "(hint: values: [a, b, c])",
        "error: bad.yaml: attribute 'd': unknown type 'intger' (hint: one of ['binned', "
        "'boolean', 'categorical', 'integer']; did you mean 'integer'?)",
    ]


def test_domain_from_dict_raises_all_errors_together() -> None:
    from tessera.errors import SchemaError
    from tessera.schema.domain import Domain

    with pytest.raises(SchemaError) as info:
        Domain.from_dict({"attributes": [{"name": "a", "type": "integer", "min": 2, "max": 1},
                                         {"type": "boolean"},
                                         {"name": "c", "type": "boolean"}]})
    assert str(info.value).splitlines() == [
        "attribute 'a': min 2 > max 1 (hint: swap them)",
        "attributes[1]: each entry needs a 'name'",
    ]


# -- schema infer to stdout ----------------------------------------------------------------------


@pytest.mark.parametrize("flags", [[], ["-o", "-"]], ids=["no-output", "dash"])
def test_schema_infer_to_stdout(files: Path, flags: list[str]) -> None:
    from tessera.data.infer import NOT_PRIVATE_HEADER

    (files / "d.csv").write_text("a,b\n1,x\n3,y\n")
    result = run("schema", "infer", "d.csv", *flags)
    assert result.exit_code == 0, result.output
    assert result.stdout == NOT_PRIVATE_HEADER + (
        "attributes:\n  a:\n    type: integer\n    min: 1\n    max: 3\n"
        "  b:\n    type: categorical\n    values:\n    - x\n    - y\n"
    )
    assert "WARNING: this schema was inferred from the data and is NOT PRIVATE." in (
        result.stderr
    )
    assert not (files / "-").exists()


@pytest.mark.parametrize(
    "clause",
    ["Pclass IN (0, 7)", "(Pclass = 9 OR Pclass = 1) AND sex = 'M'", "Pclass NOT IN (4, 1.5)",
     "Pclass != 0"],
)
def test_fast_path_warns_as_the_main_parser(clause: str) -> None:
    from tessera.schema.domain import Domain
    from tessera.workload.fastparse import FastParser
    from tessera.workload.parse import parse_query

    domain = Domain.from_dict(yaml_load(PCLASS))
    fast = FastParser(domain)
    for _ in range(2):  # the second time from the memo
        notes: list[str] = []
        slow: list[str] = []
        assert fast.try_parse(clause, notes) == parse_query(clause, domain, slow)
        assert notes == slow != []


def yaml_load(text: str):  # type: ignore[no-untyped-def]
    import yaml

    return yaml.safe_load(text)
