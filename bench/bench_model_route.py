"""Benchmark: ``tessera answer --estimate adaptive`` on a predicate workload against ``tessera
synth`` and ``tessera answer --estimate gls`` on the same workload, in the same run.

    python bench/bench_model_route.py [--queries 1000] [--reps 3] [--epsilon 1] [--delta 1e-9]

Data: the discretised UCI Adult (``adult.csv`` + ``adult-domain.json``, Private-PGM domain)
from ``../shared/data`` beside the project root (``TESSERA_SHARED_DATA`` overrides).
Workload: ``tessera workload build random -t QUERIES`` (random conjunctions of 1–3 of Adult's
15 attributes, ranges and sets, seed 0). Every run is the CLI in a fresh subprocess, exactly
as a user types it (the commands are printed), under (ε, δ) = (1, 1e-9), add/remove
neighbours, OpenDP's secure samplers (no ``--seed``: repeated runs differ):

* ``tessera synth DATA W -s SCHEMA -e 1 --delta 1e-9 -o rows.csv`` — error from the
  synthetic rows (their counts of W, ``tessera.count``);
* ``tessera answer DATA W -s SCHEMA -e 1 --delta 1e-9 --estimate adaptive -o a.parquet``;
* ``tessera answer DATA W -s SCHEMA -e 1 --delta 1e-9 --estimate gls -o g.parquet``.

Reported per method: wall and CPU seconds of the subprocess (user + system, its own rusage
from ``os.wait4``), its peak resident memory (``ru_maxrss``), and the mean absolute error
against the true counts over the workload's queries (mean ± standard error over the
repetitions). Ratios: adaptive/synth time (the issue's target ≤ 2) and adaptive/GLS error
(target ≤ 1). The machine is shared: the load average is printed
before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TESSERA_SHARED_DATA", ROOT.parent / "shared/data"))
METHODS = ("synth", "adaptive", "gls")


def run(cmd: list[str], log: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak MiB) of one CLI run in a subprocess (its own rusage, os.wait4)."""
    t0 = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=_env())
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{log.read_text()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024.0  # KiB on Linux


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def tessera() -> list[str]:
    return [sys.executable, "-c", "from tessera.cli.main import main; main()"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-9)
    ap.add_argument("--methods", default=",".join(METHODS))
    args = ap.parse_args()
    import pandas as pd

    from tessera import Domain, Workload, count

    data, schema = SHARED_DATA / "adult.csv", SHARED_DATA / "adult-domain.json"
    methods = [m for m in args.methods.split(",") if m]
    tmp = Path(tempfile.mkdtemp(prefix="tessera-model-route-"))
    wfile = tmp / f"random{args.queries}.sql"
    subprocess.run([*tessera(), "workload", "build", "random", "-s", str(schema), "-o",
                    str(wfile), "-t", str(args.queries)], check=True, capture_output=True,
                   env=_env())
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate query names are renamed: expected
        w = Workload.load(wfile, Domain.load(schema))
    truth = count(str(data), w).answers.astype(np.float64)
    print(f"load before: {os.getloadavg()}")
    budget = ["-e", str(args.epsilon), "--delta", str(args.delta)]
    rows: dict[str, list[tuple[float, float, float, float]]] = {m: [] for m in methods}
    for rep in range(args.reps):
        for m in methods:
            if m == "synth":
                out = tmp / f"rows{rep}.csv"
                cmd = [*tessera(), "synth", str(data), str(wfile), "-s", str(schema), *budget,
                       "-o", str(out)]
            else:
                out = tmp / f"{m}{rep}.parquet"
                cmd = [*tessera(), "answer", str(data), str(wfile), "-s", str(schema), *budget,
                       "--estimate", m, "-o", str(out)]
            if rep == 0:
                print("$ tessera " + " ".join(cmd[3:]).replace(str(tmp) + "/", ""))
            wall, cpu, peak = run(cmd, tmp / f"{m}{rep}.log")
            if m == "synth":
                got = count(str(out), w).answers.astype(np.float64)
            else:
                got = pd.read_parquet(out)["answer"].to_numpy(dtype=np.float64)
            mae = float(np.mean(np.abs(got - truth)))
            rows[m].append((wall, cpu, peak, mae))
            print(f"rep {rep} {m:>8}: wall {wall:7.1f} s  cpu {cpu:7.1f} s  peak {peak:7.0f} "
                  f"MiB  MAE {mae:8.2f}", flush=True)
    print(f"load after: {os.getloadavg()}")

    def mean_se(xs: list[float]) -> str:
        if len(xs) < 2:
            return f"{xs[0]:.3g}"
        return f"{statistics.mean(xs):.3g} ± {statistics.stdev(xs) / len(xs) ** 0.5:.2g}"

    print(f"\n{args.queries} random conjunctions on Adult, (ε, δ) = ({args.epsilon:g}, "
          f"{args.delta:g}), {args.reps} runs each\n")
    print("| method | wall s | CPU s | peak MiB | MAE (counts) |")
    print("| --- | --- | --- | --- | --- |")
    for m in methods:
        r = rows[m]
        print(f"| {m} | {mean_se([x[0] for x in r])} | {mean_se([x[1] for x in r])} | "
              f"{max(x[2] for x in r):.0f} | {mean_se([x[3] for x in r])} |")
    if {"synth", "adaptive"} <= set(methods):
        cpu = statistics.mean(x[1] for x in rows["adaptive"]) / statistics.mean(
            x[1] for x in rows["synth"])
        wall = statistics.mean(x[0] for x in rows["adaptive"]) / statistics.mean(
            x[0] for x in rows["synth"])
        print(f"\nadaptive / synth: CPU {cpu:.2f}×, wall {wall:.2f}× (target ≤ 2)")
    if {"gls", "adaptive"} <= set(methods):
        err = statistics.mean(x[3] for x in rows["adaptive"]) / statistics.mean(
            x[3] for x in rows["gls"])
        print(f"adaptive / gls: MAE {err:.2f}× (target ≤ 1)")


if __name__ == "__main__":
    main()
