"""Smoke test of bench/bench_synth.py: its smallest part runs end to end on a tiny input.

Not a timed test (the bench measures; this only checks that the script runs and writes its
table, results and plot)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_synth.py"


@pytest.fixture(scope="module")
def bench():  # noqa: ANN201
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("bench_synth", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_synth"] = module
    spec.loader.exec_module(module)
    return module


def test_rates_part_runs_on_a_tiny_input(bench, tmp_path: Path, capsys) -> None:  # noqa: ANN001
    bench.main(["--part", "rates", "--rates-d", "4", "--rates-n", "300", "600",
                "--rates-seeds", "1", "--plots", str(tmp_path), "--results", str(tmp_path)])
    out = capsys.readouterr().out
    assert "| 300 |" in out and "| 600 |" in out
    assert (tmp_path / "bench_synth_rates.png").stat().st_size > 0
    doc = json.loads((tmp_path / "rates.json").read_text())
    assert [r["status"] for r in doc["runs"]] == ["ok", "ok"]
    assert all(0.0 <= r["marginal_l1"] <= 2.0 for r in doc["runs"])


def test_tree_data_follows_its_tree(bench) -> None:  # noqa: ANN001
    """Each child copies its parent with probability ≥ 0.55 (flip ≤ 0.45), so every edge's
    agreement rate is above 1/2 — the data carries the tree (seeded, n = 20,000)."""
    import numpy as np

    _, edges, codes = bench.tree_data(16, 20_000, seed=0)
    for parent, child in edges:
        agree = float(np.mean(codes[:, parent] == codes[:, child]))
        assert 0.53 < agree < 0.97, (parent, child, agree)


def test_pending_method_is_reported_not_raised(bench, monkeypatch) -> None:  # noqa: ANN001
    """A method Synthesizer refuses as 'not implemented yet' is reported 'pending' (the bench
    then runs it, unedited, once it exists); any other refusal is raised."""
    import tessera as ts

    domain, edges, codes = bench.tree_data(4, 200, seed=0)
    w = bench.edge_workload(domain, edges)
    real, n = bench.real_fractions(codes, w)

    def planned(method: str, **options: object) -> None:
        raise ts.TesseraError(f"method {method!r} is not implemented yet")

    monkeypatch.setattr(bench.ts, "Synthesizer", planned)
    run = bench.run_tessera("adaptive", 1.0, 0, codes, w, real, n, 60.0)
    assert run.status == "pending" and "not implemented" in run.note

    def unknown(method: str, **options: object) -> None:
        raise ts.TesseraError(f"unknown method {method!r}")

    monkeypatch.setattr(bench.ts, "Synthesizer", unknown)
    with pytest.raises(ts.TesseraError, match="unknown method"):
        bench.run_tessera("nope", 1.0, 0, codes, w, real, n, 60.0)
