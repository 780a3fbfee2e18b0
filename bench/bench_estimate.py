"""Benchmark of ``--estimate model`` (GReM-LNN, :mod:`tessera.estimation.lnn`) and ``--estimate
adaptive`` (:func:`tessera.answer_adaptive`) on W1: Adult, all 105 2-way marginals (35,290
cells), add/remove, ρ = 0.014973 and ρ/10.

    python bench/bench_estimate.py --seeds 5

For every ρ the strategy ``--estimate model`` measures (``strategy_plan(..., estimate="model")``:
the marginals and their error-optimal split) is measured with the seeded discrete Gaussian
sampler at the plan's scales (seeded noise: a benchmark, not a release) — the same noisy
measurements for every method of a seed. Methods, MAE in counts over the 35,290 cells
against the exact counts:

* ``tessera answer`` as a user runs it (default strategy: residual contrasts, GLS), end to end
  with the seed as its noise seed;
* GLS of the marginals ``--estimate model`` measures (ResidualPlanner-style reconstruction);
* that GLS clipped at 0 (not consistent);
* GReM-LNN: the estimator of :mod:`tessera.estimation.lnn` from the same measurements;
* adaptive, model answers: :func:`tessera.answer_adaptive` (the adaptive synthesizer's
  select–measure–fit loop at the same ρ, every cell N̂ · P_θ read exactly from its fitted model)
  with the seed as its noise seed;
* adaptive, sampled rows: the rows the same run samples from its model (``rows`` = N̂, what
  ``tessera synth`` writes), counted;
* ResidualPlanner (Xiao, Kifer et al., NeurIPS 2023): its closed-form expected MAE,
  Σ cells · √(2 Var/π) / cells (``bench_strategy.rp_closed_form``, checked there against
  explicit GLS): no noise is drawn for it.

Every method's wall time is timed per seed (mean ± sd: the mean and standard deviation over
the seeds; also the median of the MAEs); the process's peak RSS is printed at the end.

Reported: median and range over the seeds; time per GReM-LNN run (median, in-process wall
clock and process CPU time: on a loaded machine the CPU time is the cost); the load
average of the shared machine (2 cores) before and after.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import tessera as ts
from tessera.data.counts import count
from tessera.estimation.lnn import MarginalMeasurement, estimate_marginals
from tessera.mechanisms import NoiseSource, discrete_gaussian
from tessera.release.strategy_release import noise_variances, strategy_plan
from tessera.workload.families import k_way_marginals

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
RHO = 0.014973  # (ε = 1, δ = 1e-9)
TARGETS = {"tessera answer (default: GLS of residual contrasts)": 35.5,
           "GLS (ResidualPlanner-style)": 35.2, "GLS clipped at 0": 21.8, "GReM-LNN": 8.0,
           "adaptive, model answers": 8.0, "adaptive, sampled rows": 8.0}
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_strategy import rp_closed_form  # noqa: E402  (the baseline, checked there)


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def mean_sd(v: list[float]) -> str:
    sd = statistics.stdev(v) if len(v) > 1 else 0.0
    return f"{statistics.mean(v):.2f} ± {sd:.2f}"


def run(rho: float, seeds: int, data: pd.DataFrame, dom: ts.Domain, wl: ts.Workload,
        truth: np.ndarray) -> None:
    plan, choice = strategy_plan(wl, ts.Budget.of(rho=rho), neighbours="add-remove",
                                 allocation="auto", strategy="auto", objective="total",
                                 time_limit=60, estimate="model")
    assert choice is not None
    s = choice.chosen
    measured = s.measured
    exact = count(data, measured).answers
    var = noise_variances(plan)
    starts = list(measured.family_starts)
    scopes = [p.attributes for p in measured.partitions]
    sizes = {a.name: a.size for a in dom}
    targets = [p.attributes for p in wl.partitions]
    maes: dict[str, list[float]] = {k: [] for k in TARGETS}
    wall: dict[str, list[float]] = {k: [] for k in TARGETS}
    cpu: list[float] = []
    iters: list[int] = []
    deficits: list[float] = []
    split: list[tuple[float, float]] = []
    for seed in range(seeds):
        t0 = time.perf_counter()
        noisy = discrete_gaussian.sample(exact, plan.scales, NoiseSource.seeded(seed)).values
        noisy = noisy.astype(np.float64)
        gls, _ = s.estimate(noisy, var)
        t_gls = time.perf_counter() - t0
        maes["GLS (ResidualPlanner-style)"].append(float(np.mean(np.abs(gls - truth))))
        maes["GLS clipped at 0"].append(float(np.mean(np.abs(np.maximum(gls, 0) - truth))))
        wall["GLS (ResidualPlanner-style)"].append(t_gls)
        wall["GLS clipped at 0"].append(t_gls)
        ms = [MarginalMeasurement(a, noisy[starts[k]:starts[k + 1]], float(var[starts[k]]))
              for k, a in enumerate(scopes)]
        t0, c0 = time.perf_counter(), time.process_time()
        est = estimate_marginals(sizes, ms, targets)
        wall["GReM-LNN"].append(time.perf_counter() - t0 + t_gls)
        cpu.append(time.process_time() - c0)
        iters.append(est.iterations)
        deficits.append(est.deficit)
        got = np.concatenate([est.marginals[t].ravel() for t in targets])
        maes["GReM-LNN"].append(float(np.mean(np.abs(got - truth))))
        # the default release (its own strategy: residual contrasts), end to end
        t0 = time.perf_counter()
        default = ts.answer(data, wl, ts.Budget.of(rho=rho), seed=seed)
        wall["tessera answer (default: GLS of residual contrasts)"].append(
            time.perf_counter() - t0)
        maes["tessera answer (default: GLS of residual contrasts)"].append(
            float(np.mean(np.abs(default.answers - truth))))
        # the adaptive route: one run, its model's answers and the rows it samples
        t0 = time.perf_counter()
        rel = ts.answer_adaptive(data, wl, ts.Budget.of(rho=rho), seed=seed, rows=None)
        t_route = time.perf_counter() - t0
        maes["adaptive, model answers"].append(float(np.mean(np.abs(rel.answers - truth))))
        wall["adaptive, model answers"].append(t_route)
        split.append((rel.timings["fit"], rel.timings["answers"]))
        t0 = time.perf_counter()
        rows = pd.DataFrame(rel.fitted.rows, columns=list(dom.names))
        from_rows = count(rows, wl).answers.astype(np.float64)
        t_rows = time.perf_counter() - t0
        maes["adaptive, sampled rows"].append(float(np.mean(np.abs(from_rows - truth))))
        wall["adaptive, sampled rows"].append(rel.timings["fit"] + t_rows)
        print(f"  seed {seed}: " + ", ".join(f"{k} {v[-1]:.2f}" for k, v in maes.items()),
              flush=True)
    rp = rp_closed_form(sizes, targets, rho)
    cells = np.array([p.n_cells_in(dom) for p in wl.partitions])
    rp_mae = float(sum(c * math.sqrt(2 * rp[t] / math.pi) for t, c in zip(targets, cells))
                   / cells.sum())
    gls_mean = statistics.mean(maes["GLS (ResidualPlanner-style)"])
    lnn = (f"{statistics.median(cpu):.1f} s CPU, {statistics.median(iters):.0f} it., "
           f"deficit ≤ {max(deficits):.1e}")
    fit_s = statistics.mean(f for f, _ in split)
    ans_s = statistics.mean(a for _, a in split)
    notes = {"GReM-LNN": lnn,
             "adaptive, model answers": f"fit {fit_s:.1f} s + answers {ans_s:.1f} s",
             "adaptive, sampled rows": "the same run's rows, counted"}
    for name, v in maes.items():
        target = TARGETS[name] if rho == RHO else float("nan")
        print(f"| {rho:.6g} | {name} | {mean_sd(v)} | {statistics.median(v):.2f} | "
              f"{min(v):.2f}–{max(v):.2f} | {gls_mean / statistics.mean(v):.2f} | "
              f"{target:.1f} | {mean_sd(wall[name])} | {notes.get(name, '—')} |")
    print(f"| {rho:.6g} | ResidualPlanner (closed-form expected MAE, no draws) | {rp_mae:.2f} | "
          f"— | — | {gls_mean / rp_mae:.2f} | {35.2 if rho == RHO else math.nan:.1f} | — | "
          "baseline of bench_strategy |")
    best = min(maes, key=lambda k: statistics.mean(maes[k]))
    print(f"winner at ρ = {rho:.6g}: {best} (mean MAE {statistics.mean(maes[best]):.2f}); "
          f"{load()}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--rhos", default=f"{RHO},{RHO / 10}")
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, tessera {ts.__version__}, cpus {os.cpu_count()}; "
          f"{load()}")
    dom = ts.Domain.load(DATA / "adult-domain.json")
    data = pd.read_csv(DATA / "adult.csv")
    wl = ts.Workload.of_families(dom, k_way_marginals(dom, 2))
    truth = count(data, wl).answers.astype(np.float64)
    print(f"W1: Adult ({len(data):,} rows), {len(wl.partitions)} 2-way marginals = "
          f"{wl.n_queries:,} cells, add/remove, {args.seeds} seeds (seeded noise)")
    n = len(data)
    indep = []
    for p in wl.partitions:  # bias of the independence model from the exact 1-way marginals
        a, b = p.attributes
        ma = np.bincount(data[a], minlength=dom[a].size)
        mb = np.bincount(data[b], minlength=dom[b].size)
        indep.append(np.outer(ma, mb).ravel() / n)
    print(f"reference (not private, bias only): independence model from the exact 1-way "
          f"marginals, MAE {np.mean(np.abs(np.concatenate(indep) - truth)):.2f}")
    print("| ρ | method | MAE mean ± sd | median | range | GLS / it (means) | issue target (ρ) | "
          "wall s mean ± sd | notes |")
    print("| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | --- |")
    for rho in (float(r) for r in args.rhos.split(",")):
        run(rho, args.seeds, data, dom, wl, truth)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS of the process {peak:,.0f} MB; {load()}")


if __name__ == "__main__":
    main()
