"""`tessera tradeoff --workload`: t and γ come from the workload itself."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tessera.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "examples/adult/schema.yaml"


def _run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["tradeoff", *args])


def test_workload_overlap_replaces_t_and_gamma(tmp_path: Path) -> None:
    w = tmp_path / "w.sql"
    # three disjoint age bands plus one query overlapping all: γ = 2 of t = 4
    w.write_text("age < 30\nage BETWEEN 30 AND 49\nage >= 50\nsex = 'Female'\n")
    res = _run("-w", str(w), "-s", str(SCHEMA), "--mu", "0.5")
    assert res.exit_code == 0, res.output
    assert "4 queries" in res.output and "γ ≤ 2 " in res.output
    # overlap: 0.5·√2; sequential: 0.5·√4 = 1
    assert "μ = 0.707107" in res.output and "μ = 1 " in res.output


def test_substitution_counts_the_symmetric_difference(tmp_path: Path) -> None:
    w = tmp_path / "w.sql"
    w.write_text("age < 30\nage BETWEEN 30 AND 49\nage >= 50\n")  # a partition: γ = 1
    res = _run("-w", str(w), "-s", str(SCHEMA), "--mu", "1", "--neighbours", "substitute")
    assert res.exit_code == 0, res.output
    # moving a row between two bands changes 2 counts (docs/theory.md §1): μ = √2
    assert "2 queries per neighbour change" in res.output
    assert "μ = 1.41421" in res.output


def test_workload_needs_schema_and_excludes_t(tmp_path: Path) -> None:
    w = tmp_path / "w.sql"
    w.write_text("age < 30\n")
    assert _run("-w", str(w), "--mu", "1").exit_code == 2
    res = _run("-w", str(w), "-s", str(SCHEMA), "-t", "3", "--mu", "1")
    assert res.exit_code == 2 and "Traceback" not in res.output
