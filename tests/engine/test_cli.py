"""``tessera treewidth`` end to end (typer runner, real files)."""

from __future__ import annotations

import itertools
from pathlib import Path

from typer.testing import CliRunner

from tessera.cli.main import app

SCHEMA = """attributes:
  age: {type: integer, min: 0, max: 99}
  sex: {type: categorical, values: [F, M]}
  region: {type: categorical, values: [N, S, E, W]}
"""


def write(tmp_path: Path, lines: list[str], schema: str = SCHEMA) -> tuple[Path, Path]:
    (tmp_path / "s.yaml").write_text(schema)
    (tmp_path / "w.sql").write_text("\n".join(lines) + "\n")
    return tmp_path / "w.sql", tmp_path / "s.yaml"


def test_treewidth_prints_width_table_and_memory(tmp_path: Path) -> None:
    w, s = write(tmp_path, ["a: age < 30 AND sex = 'F'", "b: age >= 20 AND region IN ('N', 'S')"])
    result = CliRunner().invoke(app, ["treewidth", str(w), "--schema", str(s)])
    assert result.exit_code == 0, result.output
    assert "width 1" in result.output  # G(F) is a path a - age - b plus leaves
    assert "largest table" in result.output and "memory estimate" in result.output


def test_treewidth_refuses_above_memory_limit(tmp_path: Path) -> None:
    schema = "attributes:\n" + "".join(f"  a{i}: {{type: boolean}}\n" for i in range(24))
    lines = [f"q{i}_{j}: a{i} AND a{j}" for i, j in itertools.combinations(range(24), 2)]
    w, s = write(tmp_path, lines, schema)
    result = CliRunner().invoke(app, ["treewidth", str(w), "--schema", str(s),
                                      "--memory-limit", "64MiB", "--heuristic", "min-degree"])
    assert result.exit_code == 2
    assert "width 23" in result.output and "limit 64.0 MiB" in result.output


def test_treewidth_rejects_unknown_heuristic(tmp_path: Path) -> None:
    w, s = write(tmp_path, ["sex = 'F'"])
    result = CliRunner().invoke(app, ["treewidth", str(w), "--schema", str(s),
                                      "--heuristic", "best"])
    assert result.exit_code == 2 and "min-fill" in result.output
