"""Progress that tells the truth: a typed event per step for the Python callback (the rounds
with a truthful count, the final fit, the sampling), plain lines on a stderr that is no
terminal (start, steps, a line every few seconds through a long step, end), and a bar whose
spinner keeps moving through the final fit on a terminal."""

from __future__ import annotations

import copy
import io
import pickle
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rich.console import Console
from typer.testing import CliRunner

import tessera.synth.adaptive as adaptive_module
from tessera.cli.main import app
from tessera.release import Budget
from tessera.schema.domain import Domain
from tessera.synth.adaptive import FINAL_ITERATIONS
from tessera.synth.adaptive_record import AdaptiveProgress
from tessera.synth.progress import ProgressEvent, rounds_left
from tessera.synth.synthesizer import Synthesizer
from tessera.workload.workload import Workload

SCHEMA = """attributes:
  sex: {type: categorical, values: [F, M]}
  age: {type: integer, min: 18, max: 25}
  ok: {type: boolean}
"""
QUERIES = ["sex = 'F'", "age < 21", "ok = true", "sex = 'M' AND ok = false",
           "age >= 23 AND ok = true"]


@pytest.fixture(scope="module")
def domain() -> Domain:
    return Domain.from_dict(__import__("yaml").safe_load(SCHEMA))


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    n = 600
    return pd.DataFrame({"sex": rng.choice(np.array(["F", "M"], dtype=object), n),
                         "age": rng.integers(18, 26, n), "ok": rng.random(n) < 0.4})


@pytest.fixture(scope="module")
def workload(domain: Domain) -> Workload:
    return Workload.from_sql(QUERIES, domain)


def test_the_callback_sees_every_step_of_an_adaptive_run(data: pd.DataFrame,
                                                         workload: Workload) -> None:
    events: list[Any] = []
    f = Synthesizer().fit(data, workload, Budget.of(rho=0.5), seed=3, progress=events.append)
    assert all(isinstance(e, ProgressEvent) for e in events)
    steps = [(e.step, e.phase) for e in events if e.step != "round"]
    assert steps == [("counting", "start"), ("counting", "end"), ("setup", "start"),
                     ("setup", "end"), ("final fit", "start"), ("final fit", "end"),
                     ("sampling", "start"), ("sampling", "end")]
    order = [e.step for e in events]
    assert order.index("final fit") > max(i for i, s in enumerate(order) if s == "round")
    elapsed = [e.elapsed for e in events]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0
    rounds = [e for e in events if e.step == "round"]
    made = len({h.round for h in f.result.record.history})
    assert [e.round for e in rounds] == list(range(1, made + 1))
    # rounds is truthful: an upper bound (never below the truth, never rising) until the final
    # round, then exact; the final fit and the sampling repeat the exact count
    assert all(e.rounds_bound and e.rounds >= made for e in rounds[:-1])
    assert [e.rounds for e in rounds] == sorted((e.rounds for e in rounds), reverse=True)
    assert rounds[-1].rounds == made and not rounds[-1].rounds_bound
    assert all(e.rounds == made and not e.rounds_bound for e in events
               if e.step in ("final fit", "sampling"))
    last = rounds[-1]
    assert isinstance(last.detail, AdaptiveProgress) and last.detail.rounds == made
    assert last.spent == pytest.approx(f.record.spent.rho) and last.budget == 0.5
    assert last.error == last.detail.error >= 0  # the round's fields, as the callback had them
    assert events[-1].rows == f.rows.shape[0]


def test_rounds_left_is_an_upper_bound() -> None:
    """The adaptive loop's rule: a round that is not the last needs 2 · p · c left and spends
    p · c; the last spends what is left."""
    def simulate(remaining: Fraction, cost: Fraction, p: int) -> int:
        made = 0
        while remaining > 0:
            made += 1
            if remaining < 2 * p * cost:
                break
            remaining -= p * cost
        return made

    for r in range(0, 40):
        for c in (Fraction(1), Fraction(3, 2), Fraction(7, 3)):
            for p in (1, 2):
                assert rounds_left(Fraction(r, 2), c, p) == simulate(Fraction(r, 2), c, p)


def test_an_event_keeps_the_round_records_fields_and_copies(data: pd.DataFrame,
                                                             workload: Workload) -> None:
    events: list[Any] = []
    Synthesizer("ipmwu", rounds=3, rows=20).fit(data, workload, Budget.of(epsilon=1.0),
                                                seed=1, progress=events.append)
    r = next(e for e in events if e.step == "round")
    assert r.query == r.detail.query and r.measured == r.detail.measured
    assert copy.deepcopy(r) == r and pickle.loads(pickle.dumps(r)) == r
    setup = next(e for e in events if e.step == "setup")
    with pytest.raises(AttributeError, match="no 'query'"):
        _ = setup.query
    assert not hasattr(setup, "iteration")


def _slow_final_fit(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """The final fit (the only one with ``final_iterations`` iterations) made slow, as on a
    large model."""
    real = adaptive_module.fit

    def slow(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("iterations") == FINAL_ITERATIONS:
            time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(adaptive_module, "fit", slow)


def _files(tmp_path: Path, data: pd.DataFrame) -> list[str]:
    schema, wl, csv = tmp_path / "schema.yaml", tmp_path / "w.sql", tmp_path / "data.csv"
    schema.write_text(SCHEMA)
    wl.write_text("\n".join(QUERIES) + "\n")
    data.to_csv(csv, index=False)
    return ["synth", str(csv), str(wl), "--schema", str(schema), "--rho", "0.5", "--seed", "1",
            "-o", str(tmp_path / "rows.csv")]


def test_a_short_run_in_a_log_says_when_it_starts_each_step_and_ends(
        tmp_path: Path, data: pd.DataFrame) -> None:
    """CliRunner's stderr is no terminal; the default 5 s between lines; a run of ~1 s."""
    r = CliRunner().invoke(app, _files(tmp_path, data))
    assert r.exit_code == 0, r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("synth: ")]
    assert lines[0] == "synth: started (adaptive)"
    assert lines[-1].startswith("synth: done, elapsed ")
    said = " | ".join(lines)
    for step in ("reading the data", "setup", "final fit", "sampling the rows"):
        assert f"synth: {step}" in said, said


def test_a_long_final_fit_in_a_log_is_never_silent(tmp_path: Path, data: pd.DataFrame,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A line at least every PLAIN_EVERY seconds (0.2 here) while the final fit runs (1.5 s)."""
    import tessera.cli.synth as cli_synth

    monkeypatch.setattr(cli_synth, "PLAIN_EVERY", 0.2)
    _slow_final_fit(monkeypatch, 1.5)
    r = CliRunner().invoke(app, _files(tmp_path, data))
    assert r.exit_code == 0, r.output
    during = [ln for ln in r.stderr.splitlines() if ln.startswith("synth: final fit")]
    assert len(during) >= 4, r.stderr  # its start, then the heartbeat
    assert all("elapsed" in ln for ln in during)
    seconds = [int(ln.rsplit("elapsed ", 1)[1].split()[0]) for ln in during]
    assert seconds[-1] > seconds[0]  # the clock moves with it


def test_on_a_terminal_the_bar_keeps_moving_through_the_final_fit(
        tmp_path: Path, data: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    import tessera.cli.synth as cli_synth

    screen = io.StringIO()
    monkeypatch.setattr(cli_synth, "info", Console(file=screen, force_terminal=True, width=160))
    _slow_final_fit(monkeypatch, 1.0)
    r = CliRunner().invoke(app, _files(tmp_path, data))
    assert r.exit_code == 0, r.output
    frames = [f for f in screen.getvalue().split("\r") if "final fit" in f]
    assert len(set(frames)) >= 3, screen.getvalue()[-2000:]  # the spinner turns
    assert any("sampling the rows" in f for f in screen.getvalue().split("\r"))
