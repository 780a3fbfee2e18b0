"""Benchmark: the overlap time limit on 10⁶-query workloads (resource guards).

    python bench/bench_guards.py [--lines 1000000] [--time-limit 10] [--schema adult-domain.json]

Writes ``--lines`` random conjunctions over the discretised Adult schema (1–3 attributes each,
half ranges ``BETWEEN``, half sets ``IN``; seed 0) and solves ``workload_cost(time_limit=…)``
in a fresh child process per case, after loading (the time limit covers the solve, not the
parse). Same run, same file:

* **guarded**: the default: the set-up estimate (``SETUP_SECONDS_PER_PREDICATE`` × predicates)
  exceeds the limit, so the one-pass split bound answers (a proven upper bound);
* **baseline**: the guard switched off (``SETUP_FLOOR_SECONDS = inf``): the solvers' set-up
  (structure recovery, engine estimate, value classes, incumbent, split bound, witness
  re-check) runs whatever the limit, as before.

Solve seconds are wall-clock and CPU (the CPU figure is the stable one on a shared machine);
peak RSS is the child's ru_maxrss, parse included. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT.parent / "shared/data/adult-domain.json"

CHILD = """
import json, math, resource, sys, time
from tessera.calibration.cost import workload_cost
from tessera.schema.domain import Domain
from tessera.overlap import routes
from tessera.workload.workload import Workload
path, schema, limit, mode = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
if mode == "baseline":
    routes.SETUP_FLOOR_SECONDS = math.inf
t0 = time.monotonic()
w = Workload.load(path, Domain.load(schema))
load = time.monotonic() - t0
wall, cpu = time.monotonic(), time.process_time()
c = workload_cost(w, time_limit=limit)
print(json.dumps({"load": load, "wall": time.monotonic() - wall,
                  "cpu": time.process_time() - cpu, "bound": c.weighted.bound,
                  "exact": c.weighted.exact, "method": c.weighted.method,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_workload(path: Path, n: int, sizes: dict[str, int], seed: int = 0) -> None:
    """``n`` random conjunctions (module docstring)."""
    names = list(sizes)
    rng = np.random.default_rng(seed)  # not-privacy-noise

    def col(a: str) -> str:
        return a if a.isidentifier() else f'"{a}"'

    lines = []
    for _ in range(n):
        terms = []
        for i in rng.choice(len(names), size=int(rng.integers(1, 4)), replace=False):
            a = names[int(i)]
            k = sizes[a]
            if rng.random() < 0.5:
                lo, hi = sorted(int(x) for x in rng.integers(0, k, size=2))
                terms.append(f"{col(a)} BETWEEN {lo} AND {hi}")
            else:
                vals = sorted({int(x) for x in rng.integers(0, k, size=int(rng.integers(2, 6)))})
                terms.append(f"{col(a)} IN ({', '.join(map(str, vals))})")
        lines.append(" AND ".join(terms))
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--schema", type=Path, default=SCHEMA)
    args = ap.parse_args()
    sizes = json.loads(args.schema.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "random.sql"
        write_workload(path, args.lines, sizes)
        rows = []
        for mode in ("guarded", "baseline"):
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(path), str(args.schema),
                 str(args.time_limit), mode], capture_output=True, text=True, check=True)
            rows.append((mode, json.loads(done.stdout.strip().splitlines()[-1])))
    print(f"{args.lines:,} random conjunctions, workload_cost(time_limit={args.time_limit:g})\n")
    print("| case | solve s (CPU s) | γ bound | exact | method | peak RSS |")
    print("| --- | --- | --- | --- | --- | --- |")
    for mode, r in rows:
        print(f"| {mode} | {r['wall']:.1f} ({r['cpu']:.1f}) | {r['bound']:,.0f} | "
              f"{'yes' if r['exact'] else 'no'} | {r['method']} | {r['rss']:,.0f} MiB |")
    print(f"\n(parse: {rows[0][1]['load']:.1f} s, not covered by the time limit)")


if __name__ == "__main__":
    main()
