"""``tessera audit``: prints the audit table, says when the randomness is seeded, exits 1 on a
violated claim."""

from __future__ import annotations

import io
import json
import re

import pytest
from rich.console import Console
from typer.testing import CliRunner

import tessera.audit.run as run_module
from tessera.audit.cases import discrete_laplace_case
from tessera.audit.run import AuditRow, all_cases, planted_cases
from tessera.cli.audit import print_audit
from tessera.cli.main import app


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["audit", *args], env={"COLUMNS": "240"})


def test_audit_prints_the_table_and_says_seeded() -> None:
    result = invoke("--trials", "20000", "--seed", "3", "--planted", "--wide")
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


def _rows() -> list[AuditRow]:
    """Rows of every real case (names, claims, pairs, the longest of its events), with made-up
    measurements: what the layout must fit."""
    return [AuditRow(c.name, c.claim.epsilon, c.claim.delta, c.claim.statement, 0.5, 0.5,
                     200_000, max(c.events, key=lambda e: len(e.name)).name, c.pair, True,
                     c.planted, 0.0) for c in all_cases() + planted_cases()]


def test_item19_audit_table_readable_at_80_columns() -> None:
    """At 80 columns: no line longer, nothing cut ("…"), each mechanism's row at most 2
    lines, and each row's paragraph (event, runs, claim, neighbours) at most 5 lines with the
    full name and event in it. Before: names cut to "discre…", an event over ~10 lines."""
    rows = _rows()
    buf = io.StringIO()
    print_audit(rows, Console(file=buf, width=80))
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= 80 and "…" not in buf.getvalue()
    starts = [next(j for j, line in enumerate(lines) if re.match(rf"^ *{i} +\S", line))
              for i in range(1, len(rows) + 1)]
    ends = [*starts[1:], next(j for j, line in enumerate(lines) if not line.strip()
                              and j > starts[-1])]
    assert all(b - a <= 2 for a, b in zip(starts, ends))
    paragraphs = re.split(r"\n(?=\s*\d+\. )", "\n".join(lines[ends[-1]:]).strip())
    assert len(paragraphs) == len(rows)
    for i, (r, text) in enumerate(zip(rows, paragraphs), 1):
        assert len(text.splitlines()) <= 5
        flat = " ".join(part.strip() for part in text.splitlines())
        assert flat.startswith(f"{i}. {r.mechanism}")
        assert f"event {r.event};".replace(" ", "") in flat.replace(" ", "")


def test_item19_audit_wide_and_json_keep_every_column() -> None:
    rows = _rows()
    buf = io.StringIO()
    print_audit(rows, Console(file=buf, width=400), wide=True)
    text = buf.getvalue()
    for r in rows:
        assert r.event in text and r.mechanism in text
    result = invoke("--trials", "2000", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {d["mechanism"] for d in doc} == {c.name for c in all_cases()}
    assert all({"event", "pair", "claim", "epsilon_lb", "ratio", "violated"} <= d.keys()
               for d in doc)
