"""Issue 19, items 9, 10, 11 and 13: one meaning per short option, help and hints a user can
read, query counts of structured workloads, duplicate names, weight 0, and empty data."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from tessera.cli import workload as cli_workload
from tessera.cli.main import app
from tessera.errors import DataWarning, QueryWarning, TesseraError
from tessera.release import Budget, Ledger, answer
from tessera.schema.domain import Domain
from tessera.workload import builders
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
    (tmp_path / "w.sql").write_text("age > 3\n")
    (tmp_path / "d.csv").write_text("age,sex\n1,F\n5,M\n")
    return tmp_path


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


# -- item 9: short options ---------------------------------------------------------------------


def _commands(group: Any, prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for name, cmd in group.commands.items():
        if hasattr(cmd, "commands"):  # a group (typer may bring its own copy of click)
            out += _commands(cmd, f"{prefix}{name} ")
        else:
            out.append((prefix + name, cmd))
    return out


def test_item9_each_short_option_has_one_meaning() -> None:
    meaning: dict[str, set[str]] = {}
    for _, cmd in _commands(typer.main.get_command(app)):  # type: ignore[arg-type]
        for p in cmd.params:
            if p.param_type_name == "option":
                longs = sorted(o for o in p.opts if o.startswith("--")) or [str(p.name)]
                for short in (o for o in p.opts if not o.startswith("--")):
                    meaning.setdefault(short, set()).update(longs)
    assert {s: m for s, m in meaning.items() if len(m) != 1} == {}
    assert meaning["-d"] == {"--delimiter"} and meaning["-n"] == {"--neighbours"}, meaning
    assert meaning["-m"] == {"--mechanism"} and meaning["-t"] == {"--queries"}


# -- item 10: help, counts, hints --------------------------------------------------------------


def test_item10_engine_help_shows_the_spark_extra() -> None:
    r = CliRunner().invoke(app, ["answer", "--help"], env={"COLUMNS": "200"})
    assert "pip install '.[spark]'" in r.output, r.output


def test_item10_max_cells_on_the_cli(files: Path) -> None:
    assert cli_workload.DEFAULT_MAX_CELLS == builders.DEFAULT_MAX_CELLS
    r = run("workload", "build", "marginals", "-s", "schema.yaml", "-k", "2", "-o", "m.yaml",
            "--max-cells", "10")
    assert r.exit_code == 2
    assert ("error: 2-way marginals has 20 cells, above the limit of 10 (hint: choose fewer "
            "attributes (--attribute), or raise the limit (--max-cells; max_cells= in Python))"
            in r.output), r.output
    r = run("workload", "build", "marginals", "-s", "schema.yaml", "-k", "2", "-o", "m.yaml",
            "--max-cells", "20")
    assert r.exit_code == 0 and "(20 cells)" in r.output, r.output


def test_item10_answer_and_overlap_count_the_cells_of_marginals(files: Path) -> None:
    (files / "m.yaml").write_text("marginals:\n  - {all: 1}\n")
    r = run("answer", "d.csv", "m.yaml", "-s", "schema.yaml", "-e", "1", "--seed", "1")
    assert r.exit_code == 0, r.output
    assert "12 queries, allocation" in r.output and "0 queries" not in r.output
    r = run("overlap", "m.yaml", "-s", "schema.yaml")
    assert r.exit_code == 0, r.output
    assert "(12 queries)" in r.output and "(0 queries)" not in r.output


def test_item10_hints_name_no_python_internals(files: Path) -> None:
    run("ledger", "init", "L.db", "-s", "schema.yaml", "--epsilon", "1")
    r = run("ledger", "init", "L.db", "-s", "schema.yaml", "--epsilon", "1")
    assert r.exit_code == 2
    assert "Ledger.open" not in r.output and "overwrite=True" not in r.output
    assert "(hint: use it as it is (it keeps the spent budget), or choose another path" \
        in r.output, r.output


# -- item 11: duplicate names, weight 0 --------------------------------------------------------


def test_item11_duplicate_query_names_made_unique_with_a_warning(files: Path) -> None:
    (files / "w.sql").write_text("a: age > 3\na: sex = 'F'\n")
    r = run("answer", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "--seed", "1",
            "-o", "a.csv")
    assert r.exit_code == 0, r.output
    assert ("warning: w.sql:2: query name 'a' is already used (w.sql:1); this query is named "
            "'a (2)'") in r.output
    assert list(pd.read_csv("a.csv", comment="#")["query"]) == ["a", "a (2)"]
    with pytest.warns(QueryWarning, match="query 3: query name 'x' is already used"):
        w = Workload.from_sql(["age > 1", "age > 2", "age > 3"], DOMAIN,
                              names=["x", "x (2)", "x"])
    assert w.names == ("x", "x (2)", "x (3)")


def test_item11_all_weights_zero_refused_before_the_charge(files: Path) -> None:
    (files / "w.yaml").write_text("queries:\n  - {where: 'age > 3', weight: 0}\n"
                                  "  - {where: \"sex = 'F'\", weight: 0}\n")
    run("ledger", "init", "L.db", "-s", "schema.yaml", "--epsilon", "1")
    for weights in ("auto", "uniform", "shares"):
        r = run("answer", "d.csv", "w.yaml", "-s", "schema.yaml", "-e", "1", "--ledger", "L.db",
                "--weights", weights)
        assert r.exit_code == 2 and ("error: every query of the workload has weight 0: nothing "
                                     "would be released") in r.output, r.output
    assert Ledger.open(files / "L.db").summary().releases == ()


def test_item11_weight_zero_is_not_released_under_uniform(files: Path) -> None:
    (files / "w.yaml").write_text("queries:\n  - {name: a, where: 'age > 3', weight: 0}\n"
                                  "  - {name: b, where: \"sex = 'F'\"}\n")
    w = Workload.load(files / "w.yaml", DOMAIN)
    frame = pd.DataFrame({"age": [1, 5], "sex": ["F", "M"]})
    for allocation in ("auto", "uniform", "shares"):
        rel = answer(frame, w, Budget.of(epsilon=1.0), allocation=allocation,  # type: ignore[arg-type]
                     seed=1)
        table = rel.to_frame().set_index("query")
        assert pd.isna(table.loc["a", "answer"]) and not pd.isna(table.loc["b", "answer"])


# -- item 13: empty data -----------------------------------------------------------------------


@pytest.mark.parametrize("content", ["", "age,sex\n"], ids=["zero-bytes", "header-only"])
def test_item13_empty_data_under_substitution_refused_before_the_charge(
        files: Path, content: str) -> None:
    (files / "d.csv").write_text(content)
    run("ledger", "init", "L.db", "-s", "schema.yaml", "--epsilon", "1", "--neighbours",
        "substitute")
    r = run("answer", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "--ledger", "L.db",
            "--neighbours", "substitute", "-o", "a.csv")
    assert r.exit_code == 2 and r.output == (
        "error: the data has no rows: under substitute neighbours n is public and must be at "
        "least 1 (nothing was charged) (hint: check the file (a header only?), or use "
        "add/remove neighbours, under which an empty data set is valid)\n"), r.output
    assert Ledger.open(files / "L.db").summary().releases == ()
    assert not (files / "a.csv").exists()


@pytest.mark.parametrize("content", ["", "age,sex\n"], ids=["zero-bytes", "header-only"])
def test_item13_empty_data_under_add_remove_warns_and_answers(files: Path,
                                                              content: str) -> None:
    (files / "d.csv").write_text(content)
    r = run("answer", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "-o", "a.csv",
            "--certificate", "c.json")
    assert r.exit_code == 0, r.output
    assert ("warning: the data has no rows (n = 0): answered as a valid empty data set under "
            "add/remove neighbours") in r.output
    assert "no rows" not in (files / "c.json").read_text()  # the warning is not published
    assert "no rows" not in (files / "a.csv").read_text()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        answer(str(files / "d.csv"), Workload.load(files / "w.sql", DOMAIN),
               Budget.of(epsilon=1.0), seed=1)
    assert [type(w.message) for w in seen] == [DataWarning]


def test_item13_zero_byte_file_is_not_a_missing_column(files: Path) -> None:
    (files / "d.csv").write_text("")
    r = run("count", "d.csv", "w.sql", "-s", "schema.yaml")
    assert "not in the data" not in r.output, r.output
    with pytest.raises(TesseraError, match="no rows"):
        answer(str(files / "d.csv"), Workload.load(files / "w.sql", DOMAIN),
               Budget.of(epsilon=1.0), neighbours="substitute", seed=1)


def test_item11_many_duplicate_names_are_renamed_in_linear_time() -> None:
    """10⁵ copies of one name: renamed in one pass (the first version probed k = 2, 3, … for
    every copy: 5·10⁹ probes), with the first warnings and one that counts the rest."""
    import time
    import warnings as warnings_module

    from tessera.workload.workload import unique_names

    names = ["a"] * 100_000 + ["a (3)"]
    start = time.process_time()
    with warnings_module.catch_warnings(record=True) as caught:
        warnings_module.simplefilter("always")
        out = unique_names(names)
    assert time.process_time() - start < 5.0  # a guard against the quadratic loop, not a benchmark
    assert len(set(out)) == len(out) == len(names)
    assert out[:4] == ("a", "a (2)", "a (4)", "a (5)") and out[-1] == "a (3)"
    messages = [str(w.message) for w in caught]
    assert len(messages) == 11 and messages[-1] == "… and 99,989 more queries renamed the same way"
