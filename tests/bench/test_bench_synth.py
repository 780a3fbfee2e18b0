"""Smoke test of bench/bench_synth.py: its smallest part runs end to end on a tiny input.

Not a timed test (the bench measures; this only checks that the script runs and writes its
table, results and plot)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bench.scripts import load_bench


@pytest.fixture(scope="module")
def bench():  # noqa: ANN201
    pytest.importorskip("matplotlib")
    return load_bench("bench_synth")


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


def test_baseline_summary_replaces_the_lost_cache(bench, tmp_path: Path,  # noqa: ANN001
                                                  monkeypatch) -> None:
    """A baseline run evaluated from the /tmp cache is summarised in the committed file; once
    its rows are gone, ``--reuse-baselines`` takes the same errors and time from the summary;
    a second evaluation replaces the entry (no duplicates); another ε is not taken from it."""
    import argparse
    import gzip

    import numpy as np

    bl = bench.baselines
    monkeypatch.setattr(bl, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(bl, "SUMMARY", tmp_path / "summary.json")
    domain, edges, codes = bench.tree_data(5, 2_000, seed=0)
    w = bench.edge_workload(domain, edges)
    real, n = bench.real_fractions(codes, w)
    synth = codes.copy()
    synth[:300, 1] ^= 1  # not-privacy-noise: a planted difference, so the error is not 0
    key = bl.cache_key("tree", "2way", "mst", 1.0, 0)
    bl.CACHE.mkdir()
    rows_path = bl.CACHE / f"{key}.tsv.gz"
    with gzip.open(rows_path, "wt") as f:
        f.write("\t".join(domain.names) + "\n")
        f.writelines("\t".join(map(str, r)) + "\n" for r in synth.tolist())
    rec = {"dataset": "tree", "workload": "2way", "method": "mst", "epsilon": 1.0,
           "delta": 1e-9, "seed": 0, "time_s": 12.5, "cpu_s": 11.0, "rows": 2_000,
           "rows_path": str(rows_path), "mbi": bl.mbi_version(), "measured_at": "today",
           "machine": "test", "command": "run", "peak_rss_mb": 100.0}
    (bl.CACHE / f"{key}.json").write_text(bench.json.dumps(rec))
    args = argparse.Namespace(pgm_path=None, reuse_baselines=True)
    fresh = bench.run_baseline("mst", "tree", 2, 1.0, 0, args, domain, w, real, n)
    expected, _, _ = bench.errors(real, n, synth, w)
    assert fresh.status == "ok" and fresh.marginal_l1 == pytest.approx(expected)
    assert fresh.marginal_l1 > 0.01
    bench.run_baseline("mst", "tree", 2, 1.0, 0, args, domain, w, real, n)
    runs = bl.summary_runs()
    assert len(runs) == 1 and runs[0]["errors"]["marginal_l1"] == pytest.approx(expected)
    assert runs[0]["cpu_s"] == 11.0 and "rows_path" not in runs[0]
    rows_path.unlink()  # the /tmp cache is gone
    again = bench.run_baseline("mst", "tree", 2, 1.0, 0, args, domain, w, real, n)
    assert again.note.startswith("summary:")
    assert again.marginal_l1 == pytest.approx(expected) and again.seconds == 12.5
    other = bench.run_baseline("mst", "tree", 2, 0.5, 0, args, domain, w, real, n)
    assert other.status == "not run" and np.isnan(other.marginal_l1)


def test_marginal_counts_match_tessera_count(bench) -> None:  # noqa: ANN001
    """The bench's bincount of a marginals-only workload equals ``tessera.count`` cell by cell
    (codes of 3-valued attributes, so a transposed or mis-ordered table is caught)."""
    import numpy as np

    import tessera as ts
    from tessera.workload.families import Partition

    dom = ts.Domain.from_dict({"a": 3, "b": 2, "c": 4, "d": 3})
    rng = np.random.default_rng(0)  # not-privacy-noise: test data
    codes = np.column_stack([rng.integers(0, k, 500) for k in dom.sizes])
    w = ts.Workload.of_families(dom, [Partition.marginal(dom, ["c", "a"]),
                                      Partition.marginal(dom, ["b", "d", "a"]),
                                      Partition.marginal(dom, ["d"])])
    assert bench.marginals_only(w)
    fast = bench.marginal_counts(codes, w)
    slow = ts.count(bench.decode_rows(dom, codes), w).answers
    np.testing.assert_array_equal(fast, slow)
