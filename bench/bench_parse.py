"""Benchmark: loading large text workloads (parse + `tessera workload check` statistics).

    python bench/bench_parse.py [--random 10000] [--m3 /tmp/m3.sql] [--baseline-lines 200000]
                                [--full-baseline]

Each case loads a text workload (one WHERE clause per line) with `Workload.load` and computes
`WorkloadStats.of(workload)` (what `tessera workload check` prints), in a fresh child process, so
that peak memory (ru_maxrss) belongs to that case alone. Same run, same files:

* **fast**: the default path, `tessera.workload.fastparse` for simple conjunctions;
* **baseline**: the same code with `tessera.workload.fastparse.ENABLED = False`: every line through
  sqlglot (`parse_query`), predicates not shared.

Cases: 10,000 random simple conjunctions on the raw Adult schema (1–4 terms: =, <>, <, <=, >,
>=, BETWEEN, IN, IS [NOT] NULL; names bare or quoted; seed 0); the same number of random
queries as `Query.to_sql` writes them (sets of ranges are ``(x = 1 OR x BETWEEN 3 AND 4)``
groups); Adult 2-way marginals as text (35,290 lines, discretised `adult-domain.json`); all
3-way marginals as text (2,647,508 lines; `--m3`, built with
`tessera workload build marginals -k 3 --schema adult-domain.json -o FILE` when absent, which
takes minutes). The 2.6M-line baseline takes about as long as `main` did (minutes, 3 GiB), so by
default it runs on the file's first `--baseline-lines` lines only (`--full-baseline` for all).

Lines/s (parse only) and seconds (parse + check) are wall-clock, with the CPU-time figures in
parentheses: on a shared machine the CPU ones are the stable comparison. Peak RSS is the child's
ru_maxrss, imports included (printed below the table).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RAW_SCHEMA = ROOT / "examples/adult/schema.yaml"
DISCRETE_SCHEMA = ROOT.parent / "shared/data/adult-domain.json"


# -- workloads ---------------------------------------------------------------------------------


def simple_conjunctions(n: int, seed: int = 0) -> list[str]:
    """Random simple conjunctions over the raw Adult schema, every one valid."""
    from tessera.schema.domain import Categorical, Domain, IntegerRange

    domain = Domain.load(RAW_SCHEMA)
    rng = np.random.default_rng(seed)
    attrs = list(domain)

    def name(a: object) -> str:
        n_ = a.name  # type: ignore[attr-defined]
        return n_ if n_.isidentifier() or rng.random() < 0.5 else f'"{n_}"'

    def text(v: str) -> str:
        return "'" + v.replace("'", "''") + "'"

    lines = []
    for _ in range(n):
        terms = []
        for i in rng.choice(len(attrs), size=int(rng.integers(1, 5)), replace=False):
            a = attrs[int(i)]
            col = name(a)
            if isinstance(a, IntegerRange):
                lo, hi = sorted(int(x) for x in rng.integers(a.lo, a.hi + 1, size=2))
                form = int(rng.integers(0, 5))
                if form == 0:
                    terms.append(f"{col} = {lo}")
                elif form == 1:
                    terms.append(f"{col} {rng.choice(['<', '<=', '>', '>=', '<>'])} {lo}")
                elif form == 2:
                    terms.append(f"{col} BETWEEN {lo} AND {hi}")
                elif form == 3:
                    items = ", ".join(str(v) for v in sorted({lo, hi, (lo + hi) // 2}))
                    terms.append(f"{col} IN ({items})")
                else:
                    terms.append(f"{col} >= {lo} AND {col} < {hi + 1}")
            else:
                assert isinstance(a, Categorical)
                form = int(rng.integers(0, 4))
                if form == 3 and a.missing:
                    terms.append(f"{col} IS {'NOT ' if rng.random() < 0.5 else ''}NULL")
                elif form >= 2:
                    k = int(rng.integers(1, min(4, a.n_values) + 1))
                    vals = rng.choice(a.values, size=k, replace=False)
                    neg = "NOT " if rng.random() < 0.2 else ""
                    terms.append(f"{col} {neg}IN ({', '.join(text(str(v)) for v in vals)})")
                else:
                    op = "=" if form == 0 else "<>"
                    terms.append(f"{col} {op} {text(str(rng.choice(a.values)))}")
        lines.append(" AND ".join(terms))
    return lines


def to_sql_lines(n: int, seed: int = 0) -> list[str]:
    from tessera import random_workload
    from tessera.schema.domain import Domain

    domain = Domain.load(RAW_SCHEMA)
    w = random_workload(domain, n, attributes_per_query=(1, 4), seed=seed)
    return [q.to_sql(domain) for q in w.queries]


def marginals_file(k: int, path: Path) -> Path:
    if not path.exists():
        print(f"building {path} (all {k}-way marginals as text) ...", file=sys.stderr)
        subprocess.run(
            [sys.executable, "-m", "tessera.cli.main", "workload", "build", "marginals",
             "-k", str(k), "--schema", str(DISCRETE_SCHEMA), "-o", str(path)],
            check=True,
        )  # fmt: skip
    return path


# -- one measured load, in a child process -----------------------------------------------------


def child(path: str, schema: str, fast: bool) -> None:
    import tessera.workload.fastparse
    from tessera.schema.domain import Domain
    from tessera.workload.stats import WorkloadStats
    from tessera.workload.workload import Workload

    tessera.workload.fastparse.ENABLED = fast
    domain = Domain.load(schema)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t, c = time.perf_counter(), time.process_time()
    w = Workload.load(path, domain)
    parse_s, parse_cpu = time.perf_counter() - t, time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    stats = WorkloadStats.of(w)
    check_s, check_cpu = time.perf_counter() - t, time.process_time() - c
    print(json.dumps({
        "lines": len(w), "parse_s": parse_s, "parse_cpu": parse_cpu, "check_s": check_s,
        "check_cpu": check_cpu, "duplicates": len(stats.duplicates),
        "rss_before_mib": rss_before / 1024,
        "rss_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }))  # fmt: skip


def measure(path: Path, schema: Path, fast: bool) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path), str(schema), "1" if fast else "0"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def head(path: Path, n: int, tmp: Path) -> Path:
    out = tmp / f"{path.stem}-first{n}.sql"
    with path.open() as src, out.open("w") as dst:
        for i, line in enumerate(src):
            if i >= n:
                break
            dst.write(line)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--random", type=int, default=10_000, help="random clauses per random case")
    ap.add_argument("--m3", type=Path, default=Path("/tmp/m3.sql"), help="3-way marginals text")
    ap.add_argument("--baseline-lines", type=int, default=200_000)
    ap.add_argument("--full-baseline", action="store_true")
    ap.add_argument("--skip-m3", action="store_true")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        path, schema, fast = args.child
        child(path, schema, fast == "1")
        return

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        cases: list[tuple[str, Path, Path, bool]] = []
        p = tmp / "random-simple.sql"
        p.write_text("\n".join(simple_conjunctions(args.random)) + "\n")
        cases.append((f"{args.random:,} random simple conjunctions (raw Adult)", p, RAW_SCHEMA,
                      True))
        p = tmp / "random-to-sql.sql"
        p.write_text("\n".join(to_sql_lines(args.random)) + "\n")
        cases.append((f"{args.random:,} random queries as to_sql writes them (raw Adult)", p,
                      RAW_SCHEMA, True))
        cases.append(("Adult 2-way marginals", marginals_file(2, tmp / "m2.sql"),
                      DISCRETE_SCHEMA, True))
        if not args.skip_m3:
            m3 = marginals_file(3, args.m3)
            if not args.full_baseline:
                n = args.baseline_lines
                cases.append((f"Adult 3-way marginals, first {n:,} lines", head(m3, n, tmp),
                              DISCRETE_SCHEMA, True))
            cases.append(("Adult 3-way marginals", m3, DISCRETE_SCHEMA, args.full_baseline))

        print("| workload | lines | fast: lines/s (cpu) | fast: parse + check, s (cpu) "
              "| baseline: lines/s (cpu) | baseline: parse + check, s (cpu) "
              "| speed-up, cpu (wall) | peak RSS fast / baseline, MiB |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for label, path, schema, baseline in cases:
            f = measure(path, schema, fast=True)
            b = measure(path, schema, fast=False) if baseline else None
            n = f["lines"]
            f_wall, f_cpu = f["parse_s"] + f["check_s"], f["parse_cpu"] + f["check_cpu"]
            cells = [
                label, f"{n:,}", f"{n / f['parse_s']:,.0f} ({n / f['parse_cpu']:,.0f})",
                f"{f_wall:.2f} ({f_cpu:.2f})",
            ]  # fmt: skip
            if b is not None:
                assert b["lines"] == n and b["duplicates"] == f["duplicates"]
                b_wall, b_cpu = b["parse_s"] + b["check_s"], b["parse_cpu"] + b["check_cpu"]
                cells += [
                    f"{n / b['parse_s']:,.0f} ({n / b['parse_cpu']:,.0f})",
                    f"{b_wall:.2f} ({b_cpu:.2f})",
                    f"{b_cpu / f_cpu:.0f}× ({b_wall / f_wall:.0f}×)",
                    f"{f['rss_peak_mib']:,.0f} / {b['rss_peak_mib']:,.0f}",
                ]  # fmt: skip
            else:
                cells += ["—", "—", "—", f"{f['rss_peak_mib']:,.0f} / —"]
            print("| " + " | ".join(cells) + " |", flush=True)
        print(f"\nRSS after imports (before reading a file): {f['rss_before_mib']:,.0f} MiB")


if __name__ == "__main__":
    main()
