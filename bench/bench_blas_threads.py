"""One BLAS thread inside the fits against the BLAS library's default, paired in one process.

    python bench/bench_blas_threads.py --tables quakes arrests health_insurance movielens \
        --eps 1 --seeds 0

For each panel table (``bench/panel.py``: its 2-way marginals, δ = 1e-9, add/remove), each ε
and each seed, the adaptive synthesizer runs twice with the test-only ``seed`` (NOT PRIVATE:
both arms draw the same noise for as long as they make the same choices): once with
``tessera.engine.threads.FIT_BLAS_THREADS = None`` (OpenBLAS's own thread count, what the fits
did before the limit) and once with 1 (the default), in alternating order. Printed per run: CPU
time (this process's, all threads), wall time, the mean 2-way marginal L1 error, whether the two
arms' rows are identical, and the ratios one thread / default; at the end the peak resident
memory. The machine's load is printed with each run: the default arm's cost grows with it
(OpenBLAS's idle threads spin while they wait for work), so compare CPU time and note the load.
"""

from __future__ import annotations

import argparse
import importlib
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# every BLAS library loads here with its own default thread count, before bench_synth (which
# sets OMP_NUM_THREADS=1 for the libraries loaded after it) can lower it: the baseline arm
# is what a user's process gets
importlib.import_module("scipy.optimize")

import bench_synth as bs  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import panel  # noqa: E402
from threadpoolctl import threadpool_info  # noqa: E402

import tessera as ts  # noqa: E402
from tessera.engine import threads  # noqa: E402
from tessera.workload.builders import marginal_families  # noqa: E402

ARMS = {"default": None, "one": 1}


def fit(frame: pd.DataFrame, w: ts.Workload, eps: float, seed: int,
        limit: int | None) -> dict[str, Any]:
    """One seeded fit with ``limit`` BLAS threads in the fits: rows, CPU and wall seconds."""
    threads.FIT_BLAS_THREADS = limit
    c0, t0 = time.process_time(), time.perf_counter()
    rows = np.asarray(ts.Synthesizer("adaptive", seed=seed).fit(
        frame, w, ts.Budget.of(epsilon=eps, delta=bs.DELTA)).rows)
    return {"rows": rows, "cpu": time.process_time() - c0, "wall": time.perf_counter() - t0,
            "load": os.getloadavg()[0]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", nargs="+", default=["quakes", "arrests", "health_insurance",
                                                    "movielens"], choices=tuple(panel.TABLES))
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--data-dir", type=Path, default=panel.DEFAULT_DIR)
    args = ap.parse_args(argv)
    print(bs.machine_note())
    print("BLAS libraries (threads by default): " + ", ".join(
        f"{p['internal_api']} {Path(p['filepath']).name} ({p['num_threads']})"
        for p in threadpool_info() if p["user_api"] == "blas"))
    print("| table | ε | seed | CPU default / one (s) | wall default / one (s) | CPU ratio | "
          "L1 default / one | same rows | load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    flip = False
    for name in args.tables:
        csv, dom = panel.materialise(name, args.data_dir)
        domain = ts.Domain.load(dom)
        frame = pd.read_csv(csv)[list(domain.names)]
        w = marginal_families(domain, 2)
        real, _ = bs.real_fractions(frame, w)
        for eps in args.eps:
            for seed in args.seeds:
                order = ["one", "default"] if flip else ["default", "one"]
                flip = not flip
                out = {arm: fit(frame, w, eps, seed, ARMS[arm]) for arm in order}
                d, o = out["default"], out["one"]
                l1 = {arm: float(np.mean(bs.family_errors(real, r["rows"], w)))
                      for arm, r in out.items()}
                same = d["rows"].shape == o["rows"].shape and bool(np.all(d["rows"] == o["rows"]))
                print(f"| {name} | {eps:g} | {seed} | {d['cpu']:.1f} / {o['cpu']:.1f} | "
                      f"{d['wall']:.1f} / {o['wall']:.1f} | {o['cpu'] / d['cpu']:.3f} | "
                      f"{l1['default']:.4f} / {l1['one']:.4f} | {'yes' if same else 'no'} | "
                      f"{max(d['load'], o['load']):.1f} |", flush=True)
    threads.FIT_BLAS_THREADS = 1
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
