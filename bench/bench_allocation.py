"""Benchmark: importance-weighted budget allocation (docs/theory.md §3), cutting planes vs
baselines.

Part A — the master problem min Σ w v^{−k} s.t. A v ≤ 1, v ≤ 1 on random set families, in the
same run:
* ours: ``solve_master`` (primal-dual interior point + active-set polish), its certified gap;
* baseline: SLSQP in log v (the previous ``allocate`` refinement, which skipped t > 400 or
  m > 4000), its objective measured against our certified lower bound.

Part B — end to end on random Adult workloads with ``overlap_from_workload`` (tessera.overlap
as separation oracle): rounds, time, certified gap, and the error against the uniform
allocation and the Lagrange shape w^{1/(k+1)} rescaled by the oracle (the previous behaviour
without explicit maximal sets).

Part C — the default split of ``tessera answer`` on predicate workloads (``optimal``):
``noise_plan`` with ``optimal`` (cutting planes with unit importances, at most
``OPTIMAL_ROUNDS`` rounds; what ``auto`` gives up to ``OPTIMAL_MAX_QUERIES`` queries) against
``uniform``, same workloads, same ρ, same run: plan time of each (median of ``--repeats``),
total variance Σ σ_q² of each, and how the optimiser ended.

Usage: OPENBLAS_NUM_THREADS=1 python bench/bench_allocation.py [--quick] [--part a|b|c|all]
(small LAPACK calls are much slower with a multi-threaded BLAS on a busy machine.)
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import numpy as np
from scipy import optimize

from tessera.accounting import Guarantee
from tessera.calibration import allocate, overlap_from_workload, solve_master
from tessera.schema.domain import Domain
from tessera.workload.builders import random_workload

SHARED_DATA = Path(
    os.environ.get(
        "TESSERA_SHARED_DATA", Path(__file__).resolve().parents[1].parent / "shared/data"
    )
)
ADULT = str(SHARED_DATA / "adult-domain.json")


def slsqp_master(w: np.ndarray, k: int, sets: list[tuple[int, ...]]) -> float:
    """The previous refinement: SLSQP in z = log v on the dense constraint matrix; the point
    is rescaled to feasibility and its objective returned."""
    t = w.size
    a = np.zeros((len(sets) + t, t))
    for r, s in enumerate(sets):
        a[r, list(s)] = 1.0
    a[len(sets) :] = np.eye(t)
    shape = w ** (1.0 / (k + 1))
    u0 = shape / np.max(a @ shape)

    def obj(z: np.ndarray) -> tuple[float, np.ndarray]:
        val = w * np.exp(z) ** (-k)
        return float(np.sum(val)), -k * val

    res = optimize.minimize(
        obj,
        np.log(u0),
        jac=True,
        method="SLSQP",
        constraints=[
            {
                "type": "ineq",
                "fun": lambda z: 1.0 - a @ np.exp(z),
                "jac": lambda z: -a * np.exp(z)[None, :],
            }
        ],
        options={"maxiter": 500, "ftol": 1e-12},
    )
    v = np.exp(res.x) if np.all(np.isfinite(res.x)) else u0
    v = v / max(1.0, float(np.max(a @ v)))
    return float(np.sum(w * v ** (-k)))


def part_a(quick: bool) -> None:
    sizes = [(50, 30), (200, 100), (400, 300)] + ([] if quick else [(1000, 300), (3000, 1000)])
    rng = np.random.default_rng(0)
    print("\nA. master problem (k = 2, pure ε): time and objective / certified lower bound")
    head = ["t", "m", "ours s", "ours gap", "SLSQP s", "SLSQP obj/LB − 1", "time ratio"]
    rows = []
    for t, m in sizes:
        w = rng.uniform(0.05, 1.0, t)
        sets = [
            tuple(sorted(rng.choice(t, int(rng.integers(2, 20)), replace=False).tolist()))
            for _ in range(m)
        ]
        start = time.perf_counter()
        sol = solve_master(w, 2, sets)
        ours = time.perf_counter() - start
        row = [str(t), str(m), f"{ours:.2f}", f"{sol.gap:.1e}"]
        if t <= 400:
            start = time.perf_counter()
            base = slsqp_master(w, 2, sets)
            took = time.perf_counter() - start
            row += [f"{took:.2f}", f"{base / sol.lower_bound - 1:.1e}", f"×{took / ours:.1f}"]
        else:
            row += ["skipped (the old code skipped t > 400)", "", ""]
        rows.append(row)
    table(head, rows)


def part_b(quick: bool, limit: float) -> None:
    dom = Domain.load(ADULT)
    cases = [(30, "range"), (60, "range")] + ([] if quick else [(100, "set"), (200, "mixed")])
    print(
        f"\nB. end to end, Adult workloads, μ-GDP (k = 1), weights U(0.1, 10); "
        f"oracle time limit {limit:g}s (quick 1s)"
    )
    head = [
        "t",
        "kind",
        "rounds",
        "cuts",
        "time s",
        "converged",
        "gap",
        "err / uniform",
        "err / shape",
    ]
    rows = []
    for n, kind in cases:
        wl = random_workload(dom, n, kind=kind, seed=1)  # type: ignore[arg-type]
        w = np.random.default_rng(0).uniform(0.1, 10.0, n)
        oracle = overlap_from_workload(wl, time_limit=limit)
        target = Guarantee.gdp(1.0)
        start = time.perf_counter()
        a = allocate(n, target, importance=w, overlap=oracle)
        took = time.perf_counter() - start
        uni = allocate(n, target, overlap=oracle)
        shape = allocate(n, target, importance=w, overlap=oracle, refine=False)
        gap = a.optimality_gap
        rows.append(
            [
                str(n),
                kind,
                str(a.rounds),
                str(len(a.cuts)),
                f"{took:.1f}",
                str(a.converged),
                "n/a" if gap is None else f"{gap:.1e}",
                f"{a.error / uni.weighted_error(w):.3f}",
                f"{a.error / shape.weighted_error(w):.3f}",
            ]
        )
    table(head, rows)


def part_c(quick: bool, repeats: int) -> None:
    from tessera.calibration.optimal import optimisable
    from tessera.release import Budget, noise_plan
    from tessera.workload.workload import Workload

    dom = Domain.load(ADULT)
    names = [a.name for a in dom]
    rho = 0.014973
    cases: list[tuple[str, Workload]] = []
    for n in (30, 60) if quick else (30, 60, 100, 200):
        for kind in ("range", "set", "mixed"):
            cases.append((f"{n} {kind}", random_workload(dom, n, kind=kind, seed=1)))  # type: ignore[arg-type]
    for n in () if quick else (500, 1000):  # past the default: where certification stops it
        cases.append((f"{n} mixed", random_workload(dom, n, kind="mixed", seed=1)))
    rng = np.random.default_rng(18)  # bench_strategy.py's conjunctions of 1-3 predicates
    for n in (60,) if quick else (60, 200):
        sql = []
        for _ in range(n):
            parts = []
            for a in rng.choice(names, size=int(rng.integers(1, 4)), replace=False):
                lo = int(rng.integers(0, dom[a].size))
                parts.append(f'"{a}" >= {lo}' if rng.random() < 0.5 else f'"{a}" = {lo}')
            sql.append(" AND ".join(parts))
        cases.append((f"{n} conj(1-3)", Workload.from_sql(sql, dom)))
    print(f"\nC. the default split (optimal) against uniform, Adult schema, ρ = {rho}, "
          f"add/remove; median of {repeats} plan(s) each; load {os.getloadavg()[0]:.1f}")
    head = ["workload", "auto gives", "uniform s", "optimal s", "Σσ² optimal / uniform",
            "worst σ² ratio", "load", "how it ended"]
    rows = []
    for label, wl in cases:
        times: dict[str, list[float]] = {"uniform": [], "optimal": []}
        plans = {}
        for _ in range(repeats):
            for kind in ("uniform", "optimal"):
                start = time.perf_counter()
                plans[kind] = noise_plan(wl, Budget.of(rho=rho), allocation=kind)  # type: ignore[arg-type]
                times[kind].append(time.perf_counter() - start)
        uni, opt = plans["uniform"].scales ** 2, plans["optimal"].scales ** 2
        assert np.sum(opt) <= np.sum(uni) * (1 + 1e-9)  # never worse than uniform
        how = plans["optimal"].method.split("(", 1)[-1].rstrip(")")
        rows.append([label, "optimal" if optimisable(wl) else "uniform",
                     f"{np.median(times['uniform']):.2f}", f"{np.median(times['optimal']):.2f}",
                     f"{np.sum(opt) / np.sum(uni):.3f}", f"{np.max(opt) / np.max(uni):.3f}",
                     f"{os.getloadavg()[0]:.1f}", how])
        print(" | ".join(rows[-1]), flush=True)  # progress: a row as soon as it is measured
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    table(head, rows)


def table(head: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(wd) for h, wd in zip(head, widths)))
    for r in rows:
        print("  ".join(c.ljust(wd) for c, wd in zip(r, widths)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--part", choices=("a", "b", "c", "all"), default="all")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.part in ("a", "all"):
        part_a(args.quick)
    if args.part in ("b", "all"):
        part_b(args.quick, args.time_limit)
    if args.part in ("c", "all"):
        part_c(args.quick, args.repeats)


if __name__ == "__main__":
    main()
