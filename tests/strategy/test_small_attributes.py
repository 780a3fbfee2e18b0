"""Strategies over attributes with one or two values: a tree needs a branching below the
attribute's size, so over two values (or one) the hierarchical candidate is not offered and
``auto`` chooses among the others; forced, it is a clear error, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tessera.cli.main import app


def _files(tmp_path: Path, values: int, workload: str) -> Path:
    (tmp_path / "s.yaml").write_text(
        f"attributes:\n  x: {{type: integer, min: 0, max: {values - 1}}}\n")
    (tmp_path / "w.yaml").write_text(workload)
    (tmp_path / "d.csv").write_text("x\n" + "".join(f"{k % values}\n" for k in range(9)))
    return tmp_path


def _answer(tmp_path: Path, *extra: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["answer", str(tmp_path / "d.csv"), str(tmp_path / "w.yaml"),
                                    "-s", str(tmp_path / "s.yaml"), "--seed", "1", *extra])


MARGINAL = "marginals:\n  - {attributes: [x]}\n"
RANGES = "ranges:\n  - {attribute: x}\n"


@pytest.mark.parametrize(("values", "workload", "budget", "objective"), [
    (2, MARGINAL, "-e", "total"),
    (2, MARGINAL, "-e", "max"),
    (2, RANGES, "-e", "total"),
    (2, RANGES, "--rho", "max"),
    (1, MARGINAL, "-e", "max"),
    (1, RANGES, "--rho", "total"),
])
def test_auto_answers_without_a_tree(tmp_path: Path, values: int, workload: str, budget: str,
                                     objective: str) -> None:
    _files(tmp_path, values, workload)
    r = _answer(tmp_path, budget, "0.5", "--strategy", "auto", "--objective", objective)
    assert r.exit_code == 0 and r.exception is None, r.output
    rows = [line for line in r.output.splitlines() if line.startswith('"')][1:]
    assert len(rows) == (values if workload == MARGINAL else values * (values + 1) // 2)


def test_forced_hierarchical_over_two_values_is_a_clear_error(tmp_path: Path) -> None:
    _files(tmp_path, 2, "marginals:\n  - {attributes: [x]}\n")
    r = _answer(tmp_path, "-e", "1", "--strategy", "hierarchical")
    assert r.exit_code == 2 and r.output == (
        "error: strategy 'hierarchical' does not apply to this workload: attribute 'x' has 2 "
        "values: an interval tree needs a branching b < n (b ≥ 2), i.e. at least 3 values "
        "(hint: use --strategy identity (the attribute's histogram) or auto)\n"), r.output


def test_plan_compares_the_candidates_over_two_values(tmp_path: Path) -> None:
    _files(tmp_path, 2, "marginals:\n  - {attributes: [x]}\n")
    r = CliRunner().invoke(app, ["plan", str(tmp_path / "w.yaml"), "-s",
                                 str(tmp_path / "s.yaml"), "-e", "1"])
    assert r.exit_code == 0 and r.exception is None, r.output
    assert "hierarchical" not in r.output and "identity" in r.output
