"""``tessera audit``: prints the audit table, says when the randomness is seeded, exits 1 on a
violated claim."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import tessera.audit.run as run_module
from tessera.audit.cases import discrete_laplace_case
from tessera.cli.main import app


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["audit", *args], env={"COLUMNS": "240"})


def test_audit_prints_the_table_and_says_seeded() -> None:
    result = invoke("--trials", "20000", "--seed", "3", "--planted")
    assert result.exit_code == 0, result.output
    text = result.output
    # the table wraps its cells at the console's width: check words, then the plain lines
    for word in ("Laplace", "Gaussian", "exponential", "workload", "IPMWU", "MWEM", "20,000",
                 "PLANTED", "caught", "pass"):
        assert word in text
    assert "VIOLATED" not in text and "MISSED" not in text
    for name in ("discrete Laplace: pure ε-DP", "workload release (γ-calibrated): pure ε-DP",
                 "IPMWU, one round: pure ε-DP with ε = 1"):
        assert name in text
    assert "randomness: seeded: not private randomness (numpy PCG64, seed 3)" in text


def test_audit_exits_1_when_a_claim_is_violated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A buggy mechanism presented as honest (planted = None) fails the command."""
    import dataclasses

    buggy = dataclasses.replace(discrete_laplace_case(scale_factor=0.5), planted=None)
    monkeypatch.setattr(run_module, "all_cases", lambda end_to_end=False: [buggy])
    result = invoke("--trials", "20000")
    assert result.exit_code == 1
    assert "VIOLATED" in result.output


def test_bad_trials_is_a_one_line_error() -> None:
    result = invoke("--trials", "0")
    assert result.exit_code == 2
    assert "trials must be a positive integer" in result.output
    assert "Traceback" not in result.output
