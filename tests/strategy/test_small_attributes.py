"""Strategies over attributes with one or two values.

A tree needs a branching below the attribute's size, so over two values (or one) the
hierarchical candidate is not offered and ``auto`` chooses among the others; forced, it is a
clear error, never a traceback. A marginal over an attribute of one value is the marginal
without it (its residuals there are zero spaces): the minimax split spends nothing on copies,
and a split that does give a query a vanishing share is refused by the scale check before the
charge, its interval computed in closed form (the runs that used to hang go through a
subprocess with a timeout, so that a hang fails the test)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import tessera
from tessera.cli.main import app
from tessera.mechanisms import discrete_laplace
from tessera.release import Ledger


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


# -- an attribute of one value under a minimax split ---------------------------------------------


def _cli(cwd: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``tessera ARGS`` in a fresh interpreter on this checkout's code, killed after
    ``timeout`` seconds (a hang fails the test instead of stalling the suite)."""
    env = dict(os.environ, PYTHONPATH=str(Path(tessera.__file__).parents[1]))
    try:
        return subprocess.run([sys.executable, "-m", "tessera.cli.main", *args], cwd=cwd,
                              env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"tessera {' '.join(args)} still running after {timeout} s")


ONE_VALUE_SCHEMA = ("attributes:\n  a: {type: integer, min: 0, max: 0}\n"
                    "  b: {type: integer, min: 0, max: 1}\n  c: {type: integer, min: 0, max: 1}\n")


def _ledger(tmp_path: Path) -> Path:
    r = CliRunner().invoke(app, ["ledger", "init", str(tmp_path / "L.db"), "-s",
                                 str(tmp_path / "s.yaml"), "--epsilon", "3"])
    assert r.exit_code == 0, r.output
    return tmp_path / "L.db"


def test_one_valued_attribute_under_the_minimax_split_answers(tmp_path: Path) -> None:
    """[a] twice (weights 0.25, 0.1) and [a, b, c] with a ∈ {0}: the pure-ε minimax split of
    the residual strategy used to keep every scope over ``a`` at a share of ~10^-94 (its zero
    residuals needed μ > 0), and the interval of that scale never finished. Now [b, c] alone is
    measured with the whole budget: [a, b, c] is [b, c] cell for cell, [a] its total."""
    (tmp_path / "s.yaml").write_text(ONE_VALUE_SCHEMA)
    (tmp_path / "w.yaml").write_text("marginals:\n  - {attributes: [a], weight: 0.25}\n"
                                     "  - {attributes: [a], weight: 0.1}\n"
                                     "  - {attributes: [a, b, c], weight: 1}\n")
    pd.DataFrame({"a": [0] * 5, "b": [0, 1, 1, 0, 1], "c": [1, 1, 0, 0, 1]}).to_csv(
        tmp_path / "d.csv", index=False)
    book = _ledger(tmp_path)
    r = _cli(tmp_path, "answer", "d.csv", "w.yaml", "-s", "s.yaml", "--epsilon", "1",
             "--strategy", "residual", "--objective", "max", "--ledger", "L.db", "--seed", "1",
             "-o", "a.csv")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout + r.stderr
    out = pd.read_csv(tmp_path / "a.csv", comment="#")
    assert list(out["family"]) == ["marginal(a)"] * 2 + ["marginal(a,b,c)"] * 4
    cells = out["answer"].to_numpy()[2:]
    np.testing.assert_allclose(out["answer"].to_numpy()[:2], cells.sum())
    # one marginal measured with the whole ε = 1: scale 1, the discrete Laplace's own sd
    sd = np.sqrt(discrete_laplace.variance(1.0))
    np.testing.assert_allclose(out["std_error"].to_numpy(), [2 * sd] * 2 + [sd] * 4, rtol=1e-5)
    s = Ledger.open(book).summary()
    assert s.spent == pytest.approx(1.0) and [c.status for c in s.releases] == ["released"]


def test_a_vanishing_share_is_refused_by_the_scale_check_before_the_charge(
        tmp_path: Path) -> None:
    """Weights 1 and 10^-80 split ε = 1 into scales 1 and 10^80: the plan's interval of the
    second used to loop without end, before the scale check could run. Now the check refuses
    it, naming the query, and nothing is charged or written."""
    (tmp_path / "s.yaml").write_text("attributes:\n  x: {type: integer, min: 0, max: 3}\n")
    (tmp_path / "w.yaml").write_text("queries:\n  - {name: big, where: 'x < 2', weight: 1}\n"
                                     "  - {name: tiny, where: 'x >= 1', weight: 1e-80}\n")
    (tmp_path / "d.csv").write_text("x\n0\n1\n2\n3\n")
    book = _ledger(tmp_path)
    r = _cli(tmp_path, "answer", "d.csv", "w.yaml", "-s", "s.yaml", "-e", "1", "--weights",
             "shares", "--ledger", "L.db", "-o", "a.csv")
    assert r.returncode == 2 and r.stderr.startswith(
        "error: measured query 1 ('tiny'): its noise scale 1e+80 is past the sampler's limit "
        "2^52 (1 such): the split gives it a vanishing share of the budget (nothing was "
        "charged) (hint: "), r.stdout + r.stderr
    assert Ledger.open(book).summary().releases == ()
    assert not (tmp_path / "a.csv").exists()
