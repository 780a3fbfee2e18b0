"""Benchmark: exact counts of structured families (marginals, hierarchies) from the compact form.

Each case runs in a fresh process (so its peak resident memory is its own): encode the data,
count the families with numpy and with DuckDB, write the long CSV and Parquet; for the 2-way
marginals also the same cells expanded to predicate queries (today's path), and for the 3-way
ones the expanded path on a sample of the marginals (all 2.6M cells would take minutes).

Usage: python bench/bench_family_counts.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHARED_DATA = Path(
    os.environ.get(
        "TESSERA_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared/data"
    )
)
CASES = {
    "adult-3way": ("adult", {"marginals": [{"all": 3}]}),
    "adult-2way": ("adult", {"marginals": [{"all": 2}]}),
    "nltcs-3way": ("nltcs", {"marginals": [{"all": 3}]}),
    "nltcs-4way": ("nltcs", {"marginals": [{"all": 4}]}),
    "adult-hierarchy-3-level": ("adult", {"hierarchies": [{
        "attributes": ["age", "hours-per-week", "native-country"], "branching": 4,
        "depth": 3}]}),
    "adult-hierarchy-binary": ("adult", {"hierarchies": [{
        "attributes": ["age", "hours-per-week", "native-country"], "branching": 2}]}),
}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(name: str, expanded_sample: int) -> dict[str, object]:
    import numpy as np
    import yaml

    from tessera.data.counts import CountResult, count_encoded
    from tessera.data.source import encode
    from tessera.schema.domain import Domain
    from tessera.workload.workload import Workload

    data, doc = CASES[name]
    domain = Domain.load(SHARED_DATA / f"{data}-domain.json")
    tmp = Path(tempfile.mkdtemp())
    (tmp / "w.yaml").write_text(yaml.safe_dump(doc))
    out: dict[str, object] = {"case": name, "baseline_mb": _peak_mb()}
    t = time.perf_counter()
    w = Workload.load(tmp / "w.yaml", domain)
    out |= {"families": len(w.partitions), "cells": w.n_cells,
            "load_s": time.perf_counter() - t}
    t = time.perf_counter()
    table = encode(str(SHARED_DATA / f"{data}.csv"), domain)
    out["encode_s"] = time.perf_counter() - t
    out["rows"] = table.n_rows
    answers = None
    for method in ("numpy", "duckdb"):
        t0, c0 = time.perf_counter(), time.process_time()
        answers = count_encoded(table, w, method=method)  # type: ignore[arg-type]
        out[f"count_{method}_s"] = time.perf_counter() - t0
        out[f"count_{method}_cpu_s"] = time.process_time() - c0
        if method == "numpy":
            out["peak_after_count_mb"] = _peak_mb()
    assert answers is not None
    result = CountResult(w, answers, table.n_rows, 0, ())
    t = time.perf_counter()
    result.write_csv(tmp / "long.csv")
    out["write_csv_s"] = time.perf_counter() - t
    out["csv_mb"] = (tmp / "long.csv").stat().st_size / 2**20
    t = time.perf_counter()
    result.write_parquet(tmp / "long.parquet")
    out["write_parquet_s"] = time.perf_counter() - t
    out["parquet_mb"] = (tmp / "long.parquet").stat().st_size / 2**20
    out["peak_mb"] = _peak_mb()
    if expanded_sample:
        families = w.partitions
        rng = np.random.default_rng(0)
        pick = sorted(rng.choice(len(families), min(expanded_sample, len(families)),
                                 replace=False).tolist())
        sub = Workload.of_families(domain, [families[i] for i in pick])
        t, c = time.perf_counter(), time.process_time()
        flat = sub.expanded()
        out["expand_s"] = time.perf_counter() - t
        out["expand_cpu_s"] = time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        got = count_encoded(table, flat)
        out["expanded_count_s"] = time.perf_counter() - t
        out["expanded_count_cpu_s"] = time.process_time() - c
        out["expanded_families"] = len(pick)
        out["expanded_cells"] = len(flat)
        want = count_encoded(table, sub)
        assert np.array_equal(got, want), "expanded and structured counts differ"
        out["peak_with_expanded_mb"] = _peak_mb()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="skip the expanded samples")
    parser.add_argument("--only", nargs="*", help="run these cases only")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--expanded", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.expanded)))
        return
    expanded = {"adult-2way": 105, "adult-3way": 20}
    for name in args.only or CASES:
        n = 0 if args.quick else expanded.get(name, 0)
        res = subprocess.run([sys.executable, __file__, "--case", name, "--expanded", str(n)],
                             capture_output=True, text=True, check=True)
        row = json.loads(res.stdout)
        print(f"\n## {name}: {row['families']:,} families, {row['cells']:,} cells, "
              f"{row['rows']:,} rows")
        for k, v in row.items():
            if k in ("case", "families", "cells", "rows"):
                continue
            print(f"  {k:24s} {v:10.3f}" if isinstance(v, float) else f"  {k:24s} {v:>10,}")


if __name__ == "__main__":
    main()
