"""matplotlib (the ``plot`` extra) and sqlglotc (the ``fast`` extra) are optional: nothing
imports them when tessera is imported; without matplotlib the release report is written without
figures (a note in each one's place), and every explicit plot request fails with one line that
names the extra — before any work is done. The dependency bounds are the ones pyproject states.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import tessera
from tessera.accounting.guarantee import Guarantee
from tessera.accounting.plot import plot_tradeoffs
from tessera.cli.main import app
from tessera.errors import TesseraError
from tessera.release import Budget, Ledger, answer
from tessera.release.report import render_report
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload

ROOT = Path(__file__).parents[2]
SRC = Path(tessera.__file__).parent
OPTIONAL = ("matplotlib", "PIL", "sqlglotc")
SCHEMA = ("attributes:\n  age: {type: integer, min: 0, max: 9}\n"
          "  sex: {type: categorical, values: [F, M]}\n")
DOMAIN = Domain.from_dict({"attributes": {
    "age": {"type": "integer", "min": 0, "max": 9},
    "sex": {"type": "categorical", "values": ["F", "M"]}}})
HINT = "pip install 'tessera-dp[plot]'"


def _frame(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"age": rng.integers(0, 10, n), "sex": rng.choice(["F", "M"], n)})


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """matplotlib (and Pillow, its dependency) as if not installed: importing it fails."""
    for name in [n for n in sys.modules if n.split(".")[0] in ("matplotlib", "PIL")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "PIL", None)


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text("a: age < 5\nb: sex = 'F'\n")
    _frame().to_csv(tmp_path / "d.csv", index=False)
    return tmp_path


def _top_level_imports(tree: ast.Module) -> set[str]:
    """Modules imported when the module is imported: its top-level statements, through
    top-level ``try``/``if`` blocks, but not under ``if TYPE_CHECKING:``."""
    found: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.If):
            if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                todo += node.body
            todo += node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody
            for handler in node.handlers:
                todo += handler.body
    return found


def test_no_module_imports_an_optional_dependency_when_imported() -> None:
    for path in sorted(SRC.rglob("*.py")):
        eager = {m for m in _top_level_imports(ast.parse(path.read_text(encoding="utf-8")))
                 if m.split(".")[0] in OPTIONAL}
        assert not eager, (str(path.relative_to(SRC)), eager)


def test_the_extras_and_bounds_are_the_ones_pyproject_states() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = " ".join(project["dependencies"])
    assert "matplotlib" not in base and "sqlglotc" not in base
    extras = project["optional-dependencies"]
    assert extras["plot"] == ["matplotlib>=3.8"]
    assert [d.split(";")[0] for d in extras["fast"]] == ["sqlglotc"]
    assert "tessera-dp[plot,fast]" in extras["dev"]  # the tests run every optional path
    pins = {d.split(">")[0].split("<")[0]: d for d in project["dependencies"]}
    assert pins["opendp"] == "opendp>=0.14.2,<0.17"
    assert pins["sqlglot"].endswith(",<31") and pins["dp-accounting"].endswith(",<0.7")


def test_the_report_without_matplotlib_says_where_each_figure_would_be(
        no_matplotlib: None) -> None:
    wl = Workload.from_sql(["age < 5", "age >= 5", "sex = 'F'"], DOMAIN)
    page = render_report(answer(_frame(), wl, Budget.of(epsilon=1.0), seed=1))
    assert page.count("Figure not drawn: matplotlib is not installed") == 3
    assert "tessera-dp[plot]" in page and "<img" not in page
    for section in ("guarantee", "workload", "overlap", "gain", "tradeoff", "noise", "answers"):
        assert f'<section id="{section}">' in page


def test_cli_answer_report_without_matplotlib_is_written_and_says_so(
        files: Path, no_matplotlib: None) -> None:
    r = CliRunner().invoke(app, ["ledger", "init", "L.db", "-s", "schema.yaml", "--epsilon", "3"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["answer", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1",
                                 "--ledger", "L.db", "-o", "a.csv", "--report", "r.html"])
    assert r.exit_code == 0, r.output
    assert f"warning: the report's figures are not drawn: matplotlib is not installed ({HINT} " \
        "adds it)" in r.stderr, r.stderr
    assert "Figure not drawn" in (files / "r.html").read_text()
    assert [c.status for c in Ledger.open(files / "L.db").summary().releases] == ["released"]


def test_a_plot_request_without_matplotlib_fails_in_one_line_before_any_work(
        files: Path, no_matplotlib: None) -> None:
    runner = CliRunner()
    r = runner.invoke(app, ["tradeoff", "-t", "10", "-g", "2", "--mu", "0.3", "-o", "c.png"])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert r.output.startswith("error: drawing trade-off curves (tessera tradeoff -o) needs "
                               "matplotlib, which is not installed"), r.output
    assert HINT in r.output and "overlap" not in r.stdout  # nothing computed or printed
    r = runner.invoke(app, ["evaluate", "d.csv", "d.csv", "w.sql", "-s", "schema.yaml",
                            "--plot", "e.png"])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "needs matplotlib" in r.output and HINT in r.output and "NOT PRIVATE" not in r.output
    assert not (files / "c.png").exists() and not (files / "e.png").exists()
    with pytest.raises(TesseraError, match=r"needs matplotlib.*tessera-dp\[plot\]"):
        plot_tradeoffs([("one", Guarantee.zcdp(0.5).as_tradeoff())], files / "x.png")
