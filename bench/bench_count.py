"""Benchmark: `tessera count` vs a naive per-query pandas loop on UCI Adult (raw).

    python bench/bench_count.py [--queries 10000] [--repeat 3] [--data
    ../shared/data/adult-raw/adult.data]

Both sides answer the same random workload (1–3 constrained attributes per query, ranges and
sets, seed 0) and must agree exactly. Two settings, each timed end to end, best of --repeat:

* from the CSV file: DuckDB reads + validates + counts, vs pandas.read_csv + the loop;
* from an in-memory pandas DataFrame: `tessera.count(df, ...)` vs the loop alone.

The naive loop is what one writes without Tessera: for every query, one boolean mask per
condition over the whole DataFrame (`between`, `isin`, `isna`), AND-ed and summed.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from tessera import CsvOptions, Domain, Workload, count, random_workload

ROOT = Path(__file__).resolve().parents[1]
CSV = CsvOptions(header=False, delimiter=", ", na_values=("?",))


def naive_count(df: pd.DataFrame, workload: Workload) -> np.ndarray:
    domain = workload.domain
    out = np.empty(len(workload), dtype=np.int64)
    for i, q in enumerate(workload.queries):
        mask = np.ones(len(df), dtype=bool)
        for p in q.predicates:
            attr, col = domain[p.attribute], df[p.attribute]
            present = p.coverage & attr.present()
            cond = np.zeros(len(df), dtype=bool)
            if attr.ordered and attr.kind == "integer":
                for lo, hi in present.spans:
                    cond |= col.between(attr.value(lo), attr.value(hi - 1)).to_numpy()
            else:
                cond |= col.isin([attr.value(c) for c in present]).to_numpy()
            if attr.missing_code is not None and attr.missing_code in p.coverage:
                cond |= col.isna().to_numpy()
            mask &= cond
        out[i] = mask.sum()
    return out


def read_pandas(path: Path, domain: Domain) -> pd.DataFrame:
    return pd.read_csv(
        path,
        header=None,
        names=list(domain.names),
        sep=", ",
        engine="python",
        na_values=["?"],
        keep_default_na=False,
    )


def best(fn, repeat: int):  # type: ignore[no-untyped-def]
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return min(times), result


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared/data/adult-raw/adult.data")
    args = ap.parse_args()

    domain = Domain.load(ROOT / "examples/adult/schema.yaml")
    workload = random_workload(domain, args.queries, attributes_per_query=(1, 3), seed=0)
    n_scopes = len(workload.scopes())
    df = read_pandas(args.data, domain)

    t_naive_mem, naive = best(lambda: naive_count(df, workload), 1)
    t_naive_csv = t_naive_mem + best(lambda: read_pandas(args.data, domain), args.repeat)[0]
    t_csv, res_csv = best(lambda: count(str(args.data), workload, csv=CSV), args.repeat)
    t_mem, res_mem = best(lambda: count(df, workload), args.repeat)
    assert np.array_equal(res_csv.answers, naive), "tessera and pandas disagree (CSV)"
    assert np.array_equal(res_mem.answers, naive), "tessera and pandas disagree (DataFrame)"

    print(
        f"UCI Adult: {len(df):,} rows; {len(workload):,} random queries over {n_scopes} scopes; "
        "answers identical"
    )
    print("| input | tessera count (s) | naive pandas loop (s) | speed-up |")
    print("|---|---:|---:|---:|")
    print(f"| CSV file | {t_csv:.3f} | {t_naive_csv:.3f} | {t_naive_csv / t_csv:.1f}× |")
    print(f"| pandas DataFrame | {t_mem:.3f} | {t_naive_mem:.3f} | {t_naive_mem / t_mem:.1f}× |")


if __name__ == "__main__":
    main()
