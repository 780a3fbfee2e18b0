"""Benchmark: exact counts on a 10-million-row table, DuckDB vs Spark vs pandas.

    python bench/bench_spark.py [--rows 10000000] [--queries 10000] [--master local[2]]
        [--data ../shared/data/adult.csv] [--dir /tmp/tessera-bench-spark] [--sample 200]

The table is UCI Adult (the shared, integer-coded ``adult.csv``, 48,842 rows) resampled with
replacement to ``--rows`` rows with a fixed seed and written to Parquet under ``--dir`` (made
once, never committed). Two workloads: ``--queries`` random predicate queries (seed 1) and all
2-way marginals (105 families, 5,856 cells). Each engine runs in a fresh child process, end to
end from the Parquet file (read, validate every value, code, count):

* **DuckDB** (``tessera.count(path, w)``): time of ``encode`` and of the counts, rows/s, and the
  child's peak memory (``ru_maxrss``), to compare with the table's size in pandas;
* **Spark** ``--master`` (``tessera.count(SparkSource(path, master), w)``): the same times
  (session start reported apart), and the JVM's peak resident memory (``VmHWM``);
* **pandas**: ``pd.read_parquet`` of the file (its time and peak memory), then the 2-way
  marginals by ``groupby(...).size()`` (all of them), and the predicate queries by boolean
  masks (per attribute a membership table gathered over the column, AND-ed, summed) on the
  first ``--sample`` queries only, extrapolated linearly to all of them (marked so).

Every engine's answers must equal DuckDB's (the pandas sample too), or the run fails. The
machine's cores are shared with other work: times vary between runs; the table says so.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def markdown_table(header: list[str], rows: list[list[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(r) + " |")


def make_table(data: Path, rows: int, path: Path) -> None:
    """Adult resampled to ``rows`` rows (seed 0), written to Parquet in row groups of 1M."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    adult = pd.read_csv(data)
    rng = np.random.default_rng(0)  # not-privacy-noise: benchmark data
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, pa.Schema.from_pandas(adult, preserve_index=False)) as out:
        for lo in range(0, rows, 1_000_000):
            take = rng.integers(0, len(adult), min(1_000_000, rows - lo))
            out.write_table(pa.Table.from_pandas(adult.iloc[take], preserve_index=False))
    tmp.rename(path)


def workloads(schema: Path, n_queries: int) -> dict[str, Any]:
    from tessera.schema.domain import Domain
    from tessera.workload.builders import marginal_families, random_workload

    domain = Domain.load(schema)
    return {"predicates": random_workload(domain, n_queries, seed=1),
            "marginals": marginal_families(domain, 2)}


def child(args: argparse.Namespace) -> None:
    """One engine on one workload, in this (fresh) process: JSON on stdout."""
    w = workloads(args.schema, args.queries)[args.workload]
    out = Path(args.dir) / f"answers-{args.child}-{args.workload}.npy"
    result: dict[str, Any] = {}
    if args.child == "duckdb":
        from tessera.data.counts import count_encoded
        from tessera.data.source import encode

        t0 = time.perf_counter()
        enc = encode(str(args.table), w.domain)
        result["encode_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        answers = count_encoded(enc, w)
        result["count_s"] = time.perf_counter() - t0
        result["peak_mib"] = peak_mib()
    elif args.child == "spark":
        from tessera.data.counts import count_encoded
        from tessera.data.source import encode
        from tessera.data.spark_source import SparkSource, spark_session

        t0 = time.perf_counter()
        spark = spark_session(args.master, [("spark.driver.memory", "2g"),
                                            ("spark.sql.shuffle.partitions", "4"),
                                            ("spark.ui.enabled", "false")])
        spark.sparkContext.setLogLevel("ERROR")
        result["session_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        enc = encode(SparkSource(str(args.table), master=args.master), w.domain)
        result["encode_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        answers = count_encoded(enc, w)
        result["count_s"] = time.perf_counter() - t0
        result["peak_mib"] = peak_mib()
        result["jvm_peak_mib"] = _jvm_peak(spark)
    else:
        answers, result = _pandas(args, w)
    np.save(out, answers)
    result["answers"] = str(out)
    print(json.dumps(result))


def _jvm_peak(spark: Any) -> float | None:
    """The JVM's peak resident memory (``VmHWM``), read from /proc (Linux)."""
    try:
        pid = spark.sparkContext._gateway.proc.pid
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except (AttributeError, OSError):
        return None
    return None


def _pandas(args: argparse.Namespace, w: Any) -> tuple[np.ndarray, dict[str, Any]]:
    import pandas as pd

    t0 = time.perf_counter()
    df = pd.read_parquet(args.table)
    result: dict[str, Any] = {"load_s": time.perf_counter() - t0,
                              "frame_mib": df.memory_usage(deep=True).sum() / 2**20,
                              "load_peak_mib": peak_mib()}
    domain = w.domain
    t0 = time.perf_counter()
    if args.workload == "marginals":
        parts = []
        for p in w.partitions:
            a, b = p.attributes
            sizes = (domain[a].size, domain[b].size)
            counts = df.groupby([a, b]).size()
            grid = np.zeros(sizes, dtype=np.int64)
            grid[counts.index.get_level_values(0), counts.index.get_level_values(1)] = counts
            parts.append(grid.ravel())
        answers = np.concatenate(parts)
        result["count_s"] = time.perf_counter() - t0
        result["extrapolated"] = False
    else:
        columns = {a: df[a].to_numpy() for a in domain.names}
        n = min(args.sample, len(w))
        answers = np.empty(n, dtype=np.int64)
        for i, q in enumerate(w.queries[:n]):
            mask = np.ones(len(df), dtype=bool)
            for p in q.predicates:
                member = np.zeros(domain[p.attribute].size, dtype=bool)
                for lo, hi in p.coverage.spans:
                    member[lo:hi] = True
                mask &= member[columns[p.attribute]]
            answers[i] = int(mask.sum())
        elapsed = time.perf_counter() - t0
        result["count_s"] = elapsed * len(w) / n
        result["sampled"] = n
        result["extrapolated"] = n < len(w)
    result["peak_mib"] = peak_mib()
    return answers, result


def run_child(args: argparse.Namespace, engine: str, workload: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", engine, "--workload", workload,
           "--table", str(args.table), "--schema", str(args.schema), "--dir", args.dir,
           "--queries", str(args.queries), "--master", args.master, "--sample", str(args.sample)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"{engine} on {workload} failed")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"  {engine:6s} {workload:10s} {json.dumps(result)}", file=sys.stderr)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "adult.csv")
    ap.add_argument("--schema", type=Path,
                    default=ROOT.parent / "shared" / "data" / "adult-domain.json")
    ap.add_argument("--dir", default="/tmp/tessera-bench-spark")
    ap.add_argument("--sample", type=int, default=200)
    ap.add_argument("--engines", default="duckdb,spark,pandas")
    ap.add_argument("--child", choices=["duckdb", "spark", "pandas"])
    ap.add_argument("--workload", choices=["predicates", "marginals"])
    ap.add_argument("--table", type=Path)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    args.table = Path(args.dir) / f"adult-{args.rows}-seed0.parquet"
    if not args.table.exists():
        t0 = time.perf_counter()
        make_table(args.data, args.rows, args.table)
        print(f"wrote {args.table} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    size_mib = args.table.stat().st_size / 2**20
    engines = args.engines.split(",")
    rows = []
    results: dict[tuple[str, str], dict[str, Any]] = {}
    for workload in ("predicates", "marginals"):
        for engine in engines:
            results[engine, workload] = run_child(args, engine, workload)
        base = np.load(results[engines[0], workload]["answers"])
        for engine in engines[1:]:
            other = np.load(results[engine, workload]["answers"])
            if not np.array_equal(base[: len(other)], other):
                raise SystemExit(f"{engine} disagrees with {engines[0]} on {workload}")
    for (engine, workload), r in results.items():
        if engine == "pandas":
            total = r["load_s"] + r["count_s"]
            detail = (f"load {r['load_s']:.1f} s + count {r['count_s']:.1f} s"
                      + (f" (extrapolated from {r['sampled']} queries)"
                         if r.get("extrapolated") else ""))
            peak = f"{r['peak_mib']:,.0f} (frame {r['frame_mib']:,.0f})"
        else:
            total = r["encode_s"] + r["count_s"]
            detail = f"read+validate+code {r['encode_s']:.1f} s + count {r['count_s']:.1f} s"
            if engine == "spark":
                detail += f" (+ session start {r['session_s']:.1f} s)"
            peak = f"{r['peak_mib']:,.0f}" + (
                f" (JVM {r['jvm_peak_mib']:,.0f})" if r.get("jvm_peak_mib") else "")
        label = {"duckdb": "DuckDB", "spark": f"Spark {args.master}", "pandas": "pandas"}[engine]
        rows.append([workload, label, f"{total:.1f}", f"{args.rows / total:,.0f}", detail, peak])
    print(f"\n{args.rows:,} rows ({args.table.name}, {size_mib:,.0f} MiB Parquet); "
          f"{os.cpu_count()} cores shared with other work\n")
    markdown_table(["workload", "engine", "seconds", "rows/s", "breakdown", "peak MiB"], rows)


if __name__ == "__main__":
    main()
