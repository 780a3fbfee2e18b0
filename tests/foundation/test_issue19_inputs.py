"""Issue 19, items 5, 6, 7 and 12: budgets outside the accepted range, non-UTF-8 files, swapped
arguments and schema mistakes end in one clear error, at once, never a traceback or a hang."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.errors import MAX_ERRORS_SHOWN, QueryError, SchemaError, TesseraError
from tessera.privacy import BUDGET_RANGES, check_budget
from tessera.release import Budget
from tessera.schema.domain import Domain
from tessera.synth.accounting import Budget as RunBudget
from tessera.workload.files import WorkloadError
from tessera.workload.workload import Workload

SCHEMA = ("attributes:\n  age: {type: integer, min: 0, max: 9}\n"
          "  sex: {type: categorical, values: [F, M]}\n")


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text("age > 3\n")
    (tmp_path / "d.csv").write_text("age,sex\n1,F\n5,M\n")
    return tmp_path


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


def one_error(result, text: str) -> None:  # type: ignore[no-untyped-def]
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.output.count("error:") == 1 and text in result.output, result.output


# -- item 5: budgets outside the documented range ----------------------------------------------


@pytest.mark.parametrize(("flags", "text"), [
    (("--epsilon", "1e-20"), "error: ε = 1e-20 is below the smallest budget Tessera accepts, "
                             "1e-06"),
    (("--epsilon", "1e-100"), "error: ε = 1e-100 is below the smallest budget"),
    (("--epsilon", "1e-300"), "error: ε = 1e-300 is below the smallest budget"),
    (("--rho", "1e308"), "error: ρ = 1e+308 is above the largest budget Tessera accepts, "
                         "10000"),
    (("--mu", "1e308"), "error: μ = 1e+308 is above the largest budget"),
    (("--epsilon", "1e-9", "--delta", "1e-6"), "error: ε = 1e-09 is below the smallest"),
    (("--epsilon", "inf"), "error: ε must be a finite number > 0, got inf"),
    (("--epsilon", "nan"), "error: ε must be a finite number > 0, got nan"),
])
@pytest.mark.parametrize("command", ["answer", "synth"])
def test_item5_budget_outside_the_range_refused_at_once(files: Path, command: str,
                                                        flags: tuple[str, ...],
                                                        text: str) -> None:
    extra = ("-o", "s.csv") if command == "synth" else ()
    start = time.perf_counter()
    r = run(command, "d.csv", "w.sql", "-s", "schema.yaml", *flags, *extra)
    assert time.perf_counter() - start < 30  # at once: no calibration is attempted
    one_error(r, text)
    assert "(hint: use " in r.output and "docs/guide.md, Budgets" in r.output
    assert not (files / "s.csv").exists()


@pytest.mark.parametrize("symbol", ["ε", "ρ", "μ"])
def test_item5_range_ends_are_accepted_and_just_outside_refused(symbol: str) -> None:
    low, high = BUDGET_RANGES[symbol]
    assert check_budget(symbol, low) == low and check_budget(symbol, high) == high
    with pytest.raises(TesseraError, match="below the smallest"):
        check_budget(symbol, low * (1 - 1e-12))
    with pytest.raises(TesseraError, match="above the largest"):
        check_budget(symbol, high * (1 + 1e-12))


def test_item5_library_budgets_share_the_range() -> None:
    with pytest.raises(TesseraError, match="below the smallest"):
        Budget.of(epsilon=1e-20)
    with pytest.raises(TesseraError, match="above the largest"):
        Budget.of(rho=1e308)
    with pytest.raises(TesseraError, match="below the smallest"):
        RunBudget.of(rho=1e-300)
    with pytest.raises(TesseraError, match="must be a finite number"):
        RunBudget.of(epsilon=True)  # type: ignore[arg-type]


# -- item 6: non-UTF-8 files -------------------------------------------------------------------


def test_item6_non_utf8_workload(files: Path) -> None:
    (files / "w.sql").write_bytes(b"age > 3\nsex = 'F\xe9'\n")
    one_error(run("count", "d.csv", "w.sql", "-s", "schema.yaml"),
              "error: w.sql:2: the workload is not UTF-8 text: byte 0xe9 at line 2, column 9 "
              "(hint: save the file as UTF-8")


def test_item6_non_utf8_schema(files: Path) -> None:
    (files / "schema.yaml").write_bytes(SCHEMA.encode() + b"  r\xe9gion: {type: boolean}\n")
    one_error(run("count", "d.csv", "w.sql", "-s", "schema.yaml"),
              "error: schema.yaml:4: the schema is not UTF-8 text: byte 0xe9 at line 4, "
              "column 4")


def test_item6_utf8_with_bom_is_read(files: Path) -> None:
    (files / "w.sql").write_bytes(b"\xef\xbb\xbfage > 3\n")
    assert Workload.load(files / "w.sql", Domain.load(files / "schema.yaml")).n_queries == 1


# -- item 7: repeated errors capped ------------------------------------------------------------


def test_item7_swapped_data_and_workload_prints_a_capped_list(files: Path) -> None:
    rows = "".join(f"{i % 10},{'FM'[i % 2]}\n" for i in range(2000))
    (files / "d.csv").write_text("age,sex\n" + rows)
    r = run("count", "w.sql", "d.csv", "-s", "schema.yaml")
    assert r.exit_code == 2
    lines = r.output.splitlines()
    assert len(lines) == MAX_ERRORS_SHOWN + 1, r.output
    assert lines[0] == ("error: d.csv: 2,001 of 2,001 lines are not queries: is this the data? "
                        "(hint: commands take DATA first, then WORKLOAD (tessera answer DATA "
                        "WORKLOAD ...))")
    assert lines[-1] == f"error: … and {2002 - MAX_ERRORS_SHOWN:,} more errors"


def test_item7_the_error_keeps_every_error(tmp_path: Path) -> None:
    (tmp_path / "w.sql").write_text("".join(f"nope{i} >\n" for i in range(25)))
    with pytest.raises(WorkloadError) as info:
        Workload.load(tmp_path / "w.sql", Domain.from_dict({"attributes": {
            "age": {"type": "integer", "min": 0, "max": 9}}}))
    assert len(info.value.errors) == 25
    assert str(info.value).splitlines()[-1] == "… and 15 more errors"


# -- item 12: schema mistakes ------------------------------------------------------------------


def test_item12_misspelt_type_key_is_named(files: Path) -> None:
    (files / "schema.yaml").write_text("attributes:\n  age: {tpye: integer, min: 0, max: 9}\n")
    one_error(run("count", "d.csv", "w.sql", "-s", "schema.yaml"),
              "error: schema.yaml: attribute 'age': no 'type' (unknown key 'tpye', did you mean "
              "'type'?) (hint: add type: one of ['binned', 'boolean', 'categorical', "
              "'integer'])")


def test_item12_yaml_syntax_error_names_the_file(files: Path) -> None:
    (files / "schema.yaml").write_text(
        "attributes:\n  age: {type: integer, min: 0, max: 9\n  sex: [\n")
    r = run("count", "d.csv", "w.sql", "-s", "schema.yaml")
    one_error(r, "error: schema.yaml:3:6: not valid YAML: expected ',' or '}', but got ':' "
                 "(while parsing a flow mapping at line 2, column 8)")
    assert "<unicode string>" not in r.output


def test_item12_workload_yaml_and_json_syntax_errors_name_the_file(tmp_path: Path) -> None:
    domain = Domain.from_dict({"attributes": {"age": {"type": "integer", "min": 0, "max": 9}}})
    (tmp_path / "w.yaml").write_text("queries:\n - {where: 'age > 1'\n")
    with pytest.raises(QueryError, match=r"w\.yaml:3:1: not valid YAML: expected ',' or '}'"):
        Workload.load(tmp_path / "w.yaml", domain)
    (tmp_path / "w.json").write_text('{"queries": [}')
    with pytest.raises(QueryError, match=r"w\.json:1:14: not valid JSON: Expecting value"):
        Workload.load(tmp_path / "w.json", domain)
    (tmp_path / "s.json").write_text('{"attributes": ')
    with pytest.raises(SchemaError, match=r"s\.json:1:16: not valid JSON"):
        Domain.load(tmp_path / "s.json")
