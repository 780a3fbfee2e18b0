"""Benchmarks of strategy selection and reconstruction (docs/theory.md §10).

    python bench/bench_strategy.py --part w1          # Adult all 2-way marginals vs ResidualPlanner
    python bench/bench_strategy.py --part coverage    # 95% interval coverage, 500 seeded runs
    python bench/bench_strategy.py --part ranges      # all ranges over 1,024 values
    python bench/bench_strategy.py --part answer-ranges  # tessera.answer on a ranges: block
    python bench/bench_strategy.py --part ranges-2d   # all rectangles over two attributes
    python bench/bench_strategy.py --part predicates  # random predicate workloads
    python bench/bench_strategy.py --part max-split   # --objective max: equal / total / minimax
    python bench/bench_strategy.py --part max-split-2d  # its 2-D rows only (rectangles)
    python bench/bench_strategy.py --part all

Baseline: ResidualPlanner's closed form (Xiao, Kifer et al., NeurIPS 2023) for marginal
workloads, implemented here (:func:`rp_closed_form`): the optimal Gaussian residual mechanism
for Σ_cells Var under ρ-zCDP, σ_A² = √(p_A/v_A) Σ_B √(p_B v_B)/(2ρ) with p_A = Π_{i∈A}(1 − 1/n_i),
v_A = Π_{i∈A}(n_i − 1) Σ_{S⊇A} 1/n_{S∖A}; Var of a cell of S = Σ_{A⊆S} σ_A² p_A / n_{S∖A}².
It is checked against brute-force GLS on a tiny domain (:func:`check_rp_brute_force`) before
it is used. Expected MAE of a Gaussian error of variance v is √(2v/π).

Tessera's numbers are measured: ``tessera.answer`` with OpenDP's secure noise (no seed: the
runs are private; repeats differ), MAE over the cells against the exact counts, the median of
the repeats; times are medians of in-process wall-clock times. The machine is shared (2 cores,
other agents' jobs): the load average is printed with every table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

import tessera as ts
from tessera.data.counts import count
from tessera.mechanisms import NoiseSource, discrete_gaussian
from tessera.release.strategy_release import (
    Z95,
    measure_contrasts,
    measured_noise_variances,
    noise_variances,
    strategy_plan,
)
from tessera.strategy.intervals import (
    BRANCHINGS,
    IntervalDesign,
    Spans,
    level_costs,
    level_groups,
    tree_levels,
)
from tessera.workload.families import k_way_marginals

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
RHO = 0.014973  # (ε = 1, δ = 1e-9)


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


# -- ResidualPlanner's closed form (the baseline) ---------------------------------------------
def rp_closed_form(sizes: dict[str, int], targets: list[tuple[str, ...]], rho: float
                   ) -> dict[tuple[str, ...], float]:
    """Per-cell variance of every target marginal under ResidualPlanner's optimal mechanism."""
    closure = sorted({b for s in targets for k in range(len(s) + 1)
                      for b in itertools.combinations(s, k)}, key=len)

    def n(scope: tuple[str, ...]) -> float:
        return float(math.prod(sizes[a] for a in scope))

    p = {b: math.prod(1 - 1 / sizes[a] for a in b) for b in closure}
    v = {b: math.prod(sizes[a] - 1 for a in b)
         * sum(1 / n(tuple(x for x in s if x not in b)) for s in targets if set(b) <= set(s))
         for b in closure}
    root = sum(math.sqrt(p[b] * v[b]) for b in closure)
    sigma2 = {b: math.sqrt(p[b] / v[b]) * root / (2 * rho) for b in closure}
    return {s: sum(sigma2[b] * p[b] / n(tuple(x for x in s if x not in b)) ** 2
                   for b in closure if set(b) <= set(s)) for s in targets}


def check_rp_brute_force() -> float:
    """The closed form against explicit GLS of ResidualPlanner's mechanism on a tiny domain
    (residual matrices R_A = ⊗ Sub ⊗ 1ᵀ, noise σ_A² ⊗ Sub Subᵀ); returns the largest relative
    difference of the cell variances, and checks the privacy cost Σ p_A/(2σ_A²) = ρ."""
    sizes = {"a": 2, "b": 3, "c": 4}
    names = list(sizes)
    targets = [("a", "b"), ("b", "c"), ("a", "c")]
    rho = 0.7
    closure = sorted({b for s in targets for k in range(len(s) + 1)
                      for b in itertools.combinations(s, k)}, key=len)
    var = rp_closed_form(sizes, targets, rho)

    def sub(m: int) -> np.ndarray:
        return np.hstack([np.ones((m - 1, 1)), -np.eye(m - 1)])

    # σ_A² from the same formulas
    p = {b: math.prod(1 - 1 / sizes[a] for a in b) for b in closure}
    v = {b: math.prod(sizes[a] - 1 for a in b)
         * sum(1 / math.prod(sizes[x] for x in s if x not in b) for s in targets
               if set(b) <= set(s)) for b in closure}
    root = sum(math.sqrt(p[b] * v[b]) for b in closure)
    sigma2 = {b: math.sqrt(p[b] / v[b]) * root / (2 * rho) for b in closure}
    rows, covs = [], []
    for b in closure:
        r, c = np.ones((1, 1)), np.ones((1, 1))
        for a in names:
            if a in b:
                r, c = np.kron(r, sub(sizes[a])), np.kron(c, sub(sizes[a]) @ sub(sizes[a]).T)
            else:
                r = np.kron(r, np.ones((1, sizes[a])))
        rows.append(r)
        covs.append(sigma2[b] * c)
    big_r = np.vstack(rows)
    sigma = np.zeros((big_r.shape[0],) * 2)
    k = 0
    for c in covs:
        sigma[k:k + len(c), k:k + len(c)] = c
        k += len(c)
    sinv = np.linalg.inv(sigma)
    cov = np.linalg.pinv(big_r.T @ sinv @ big_r)
    worst = 0.0
    for s in targets:
        q = np.ones((1, 1))
        for a in names:
            q = np.kron(q, np.eye(sizes[a]) if a in s else np.ones((1, sizes[a])))
        got = np.diag(q @ cov @ q.T)
        worst = max(worst, float(np.max(np.abs(got - var[s]) / var[s])))
    cost = max(float(big_r[:, x] @ sinv @ big_r[:, x]) / 2 for x in range(big_r.shape[1]))
    assert abs(cost - rho) < 1e-9 * rho, (cost, rho)
    assert worst < 1e-9, worst
    return worst


# -- W1: Adult all 2-way marginals ------------------------------------------------------------
def part_w1(repeats: int) -> None:
    worst = check_rp_brute_force()
    print(f"ResidualPlanner closed form = explicit GLS on a 2×3×4 domain: max rel. diff "
          f"{worst:.1e}; privacy cost = ρ")
    dom = ts.Domain.load(DATA / "adult-domain.json")
    data = pd.read_csv(DATA / "adult.csv")
    wl = ts.Workload.of_families(dom, k_way_marginals(dom, 2))
    truth = count(data, wl).answers.astype(float)
    sizes = {a.name: a.size for a in dom}
    targets = [p.attributes for p in wl.partitions]
    cells = np.array([p.n_cells_in(dom) for p in wl.partitions])
    print(f"\nW1: Adult ({len(data):,} rows), all {len(targets)} 2-way marginals = "
          f"{wl.n_queries:,} cells, add/remove; {load()}")
    print("| ρ | method | MAE (median of runs) | expected MAE | vs RP | time s (median) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for rho in (RHO, RHO / 10):
        rp = rp_closed_form(sizes, targets, rho)
        rp_mae = float(sum(c * math.sqrt(2 * rp[s] / math.pi) for s, c in zip(targets, cells))
                       / cells.sum())
        print(f"| {rho:.6g} | ResidualPlanner (closed form, baseline) | — | {rp_mae:.2f} | "
              f"1.000 | — |")
        for strategy in ("direct", "auto"):
            maes, times, expected = [], [], math.nan
            for _ in range(repeats):
                t0 = time.perf_counter()
                rel = ts.answer(data, wl, ts.Budget.of(rho=rho), strategy=strategy)
                times.append(time.perf_counter() - t0)
                maes.append(float(np.mean(np.abs(rel.answers - truth))))
                var = (rel.strategy.variances if rel.strategy is not None
                       else noise_variances(rel.plan))
                expected = float(np.mean(np.sqrt(2 * var / math.pi)))
            chosen = rel.certificate["strategy"]["chosen"]
            name = strategy if strategy == "direct" else f"auto → {chosen}"
            med = statistics.median(maes)
            print(f"| {rho:.6g} | tessera answer, {name} | {med:.2f} | {expected:.2f} | "
                  f"{med / rp_mae:.3f} | {statistics.median(times):.2f} |")


def part_coverage(runs: int) -> None:
    """Coverage of the GLS route's 95% intervals over seeded runs (noise from the seeded
    discrete Gaussian sampler — tests only — at the release's scales)."""
    dom = ts.Domain.load(DATA / "adult-domain.json")
    data = pd.read_csv(DATA / "adult.csv")
    wl = ts.Workload.of_families(dom, k_way_marginals(dom, 2))
    plan, choice = strategy_plan(wl, ts.Budget.of(rho=RHO), neighbours="add-remove",
                                 allocation="auto", strategy="auto", objective="total",
                                 time_limit=60)
    assert choice is not None
    s = choice.chosen
    exact = count(data, s.measured).answers
    truth = count(data, wl).answers
    var = measured_noise_variances(plan, s)
    v = s.reconstruction.variances(var)
    hw = Z95 * np.sqrt(v)
    inside = total = 0
    t0 = time.perf_counter()
    for seed in range(runs):
        source = NoiseSource.seeded(seed)
        noisy = (discrete_gaussian.sample(exact, plan.scales, source).values
                 if s.contrasts is None else measure_contrasts(plan, s, exact, source)[0])
        est, _ = s.estimate(noisy, var)
        inside += int(np.sum(np.abs(est - truth) <= hw))
        total += len(truth)
    cov = inside / total
    print(f"\nCoverage of the 95% intervals (GLS, {s.name}), W1 at ρ = {RHO}: {cov:.4f} over "
          f"{runs} seeded runs × {len(truth):,} cells ({time.perf_counter() - t0:.0f} s; "
          f"{load()})")


# -- ranges over one attribute ------------------------------------------------------------------
def part_ranges(n: int = 1024) -> None:
    spans = Spans.all_ranges(n)
    rho = RHO
    i = np.arange(n)
    gamma = int(np.max((i + 1) * (n - i)))  # a code lies in (i+1)(n−i) ranges: exact γ
    direct_var = gamma / (2 * rho)  # every range σ² = γ/(2ρ)
    print(f"\nAll {spans.n_queries:,} ranges over {n} ordered values, ρ = {rho}; {load()}")
    print(f"direct: γ = {gamma:,} (exact, the sweep's value), RMSE per range "
          f"{math.sqrt(direct_var):.1f}")
    print("| strategy | levels | per-level costs ∝ r^l | RMSE (mean over ranges) | direct / it |"
          " time s |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    best: dict[int, float] = {}
    for b in (1, *BRANCHINGS):
        t0 = time.perf_counter()
        levels = [[(c, c + 1) for c in range(n)]] if b == 1 else tree_levels(n, b)
        design = IntervalDesign(n, tuple(level_groups(levels, n)))
        ratios = [1.0] if b == 1 else sorted({1.0, b ** (1 / 3), b ** 0.5})
        errs = []
        for r in ratios:
            costs = level_costs(len(levels), rho, r)
            errs.append((float(np.mean(design.variances(2 * costs, spans))), r))
        err, r = min(errs)
        best[b] = err
        name = "identity" if b == 1 else f"tree b={b}"
        print(f"| {name} | {len(levels)} | r = {r:.3g} | {math.sqrt(err):.2f} | "
              f"{direct_var / err:.0f}× | {time.perf_counter() - t0:.1f} |")
    from tessera.strategy.choose import choose_strategy
    from tessera.workload.ranges import RangeFamily

    dom = ts.Domain.from_dict({"attributes": {"x": {"type": "integer", "min": 0,
                                                    "max": n - 1}}})
    t0 = time.perf_counter()
    ch = choose_strategy(ts.Workload.of_ranges(dom, [RangeFamily.of(dom, ["x"])]),
                         ts.Definition.ZCDP, rho)
    chosen = float(np.mean(ch.chosen.expected))
    print(f"the chooser (`auto`, {time.perf_counter() - t0:.1f} s): {ch.chosen.name}, RMSE "
          f"{math.sqrt(chosen):.2f} (its level costs optimised from the best r^l split)")
    tree_best = min(v for b, v in best.items() if b != 1)
    # the stronger baseline: every branching with its per-level costs optimised freely (not
    # only ∝ r^l), GLS — chosen must be within 5% of the best of these
    t0 = time.perf_counter()
    gram = spans.gram(n, np.ones(spans.n_queries))
    free = {b: optimal_level_costs(n, b, rho, gram) / spans.n_queries
            for b in BRANCHINGS if b < n}
    b_free = min(free, key=free.get)
    print(f"best tree with per-level costs optimised (L-BFGS over the simplex, GLS): b={b_free}"
          f", RMSE {math.sqrt(free[b_free]):.2f} ({time.perf_counter() - t0:.0f} s); "
          + ", ".join(f"b={b}: {math.sqrt(v):.2f}" for b, v in free.items()))
    t0 = time.perf_counter()
    b_star = min((b for b in best if b != 1), key=best.get)
    levels = tree_levels(n, b_star)
    design = IntervalDesign(n, tuple(level_groups(levels, n)))
    costs = level_costs(len(levels), rho, 1.0)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, n)
    ys = [np.array([x[lo:hi].sum() for lo, hi in lv]) + rng.normal(0, 1 / np.sqrt(2 * c),
                                                                     len(lv))
          for lv, c in zip(levels, costs)]
    design.reconstruct(ys, 2 * costs, spans)
    t_gls = time.perf_counter() - t0
    print(f"MSE ratios: chosen / best tree with costs ∝ r^l: {chosen / tree_best:.3f}; "
          f"chosen / best tree with optimised level costs: {chosen / free[b_free]:.3f} "
          f"(target ≤ 1.05); direct / chosen: {direct_var / chosen:.0f}×; GLS reconstruction "
          f"of all {spans.n_queries:,} ranges (tree b={b_star}, from simulated noisy levels): "
          f"{t_gls:.1f} s")


def optimal_level_costs(n: int, b: int, rho: float, gram: np.ndarray) -> float:
    """min over per-level costs c (Σ c = ρ, zCDP: u_l = 2c_l) of the total GLS error
    ⟨I(u)⁻¹, M⟩ of the b-ary tree — convex in u (the trace of an inverse), so L-BFGS from the
    uniform split over softmax parameters, with the exact gradient
    ∂/∂u_l ⟨C, M⟩ = −Σ_{g ∈ level l} 1_gᵀ C M C 1_g (block sums from 2-D prefix sums)."""
    from scipy.optimize import minimize

    levels = tree_levels(n, b)
    design = IntervalDesign(n, tuple(level_groups(levels, n)))
    lo = [np.array([s for s, _ in lv]) for lv in levels]
    hi = [np.array([e for _, e in lv]) for lv in levels]

    def value_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
        p = np.exp(theta - theta.max())
        p /= p.sum()
        c = design.covariance(2 * rho * p)
        cmc = c @ gram @ c
        q = np.zeros((n + 1, n + 1))
        q[1:, 1:] = cmc.cumsum(0).cumsum(1)
        du = np.array([-float(np.sum(q[h, h] - q[lw, h] - q[h, lw] + q[lw, lw]))
                       for lw, h in zip(lo, hi)])
        dp = 2 * rho * du  # d/dp_l
        return float(np.vdot(c, gram)), p * (dp - float(p @ dp))  # through the softmax

    res = minimize(value_grad, np.zeros(len(levels)), jac=True, method="L-BFGS-B",
                   options={"maxiter": 200})
    return float(res.fun)


def _ranges_data(sizes: dict[str, int], rows: int) -> tuple[ts.Domain, pd.DataFrame]:
    """A schema of ordered integer attributes and synthetic rows (a discretised normal)."""
    dom = ts.Domain.from_dict({"attributes": {a: {"type": "integer", "min": 0, "max": n - 1}
                                              for a, n in sizes.items()}})
    rng = np.random.default_rng(0)
    data = pd.DataFrame({a: np.clip(rng.normal(n / 2, n / 6, rows).round(), 0, n - 1)
                         .astype(int) for a, n in sizes.items()})
    return dom, data


def _timed_answers(data: pd.DataFrame, wl: ts.Workload, repeats: int, **kw: object
                   ) -> tuple[list[float], object, float]:
    """Wall times of ``repeats`` in-process ``answer()`` calls (after one warm-up call that
    imports everything), the last release, and the peak traced memory of one more call."""
    import tracemalloc

    ts.answer(data, wl, ts.Budget.of(rho=RHO), **kw)  # warm-up (imports, caches)
    times = []
    rel = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        rel = ts.answer(data, wl, ts.Budget.of(rho=RHO), **kw)
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    ts.answer(data, wl, ts.Budget.of(rho=RHO), **kw)
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return times, rel, peak


def part_answer_ranges(n: int = 1024, rows: int = 48_842, repeats: int = 3) -> None:
    """``tessera.answer`` end to end on every range of an n-value attribute written as a
    ``ranges:`` block (a lazy family: never 524,800 query objects), synthetic data."""
    import tempfile

    dom, data = _ranges_data({"x": n}, rows)
    print(f"\n`answer` on all ranges over {n} values ({rows:,} synthetic rows), ρ = {RHO}; "
          f"{load()} at the start")
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "w.yaml"
        f.write_text("ranges:\n  - {attribute: x}\n")
        t0 = time.perf_counter()
        wl = ts.Workload.load(f, dom)
        t_load = time.perf_counter() - t0
        times, rel, peak = _timed_answers(data, wl, repeats)
        times_csv, _, peak_csv = _timed_answers(data, wl, repeats, output=Path(d) / "a.csv")
    truth = count(data, wl).answers
    st = rel.certificate["strategy"]
    direct = next(c for c in st["candidates"] if c["strategy"] == "direct")
    chosen = next(c for c in st["candidates"] if c["strategy"] == st["chosen"])
    print(f"{wl.n_queries:,} queries; load the block {t_load:.3f} s; chosen {st['chosen']}")
    print("| call | wall s (median of " + str(repeats) + ") | all runs | peak traced MiB |")
    print("| --- | ---: | --- | ---: |")
    print(f"| answer() | {statistics.median(times):.2f} | "
          f"{', '.join(f'{t:.2f}' for t in times)} | {peak:.0f} |")
    print(f"| answer(output=a.csv) | {statistics.median(times_csv):.2f} | "
          f"{', '.join(f'{t:.2f}' for t in times_csv)} | {peak_csv:.0f} |")
    print(f"last run's steps: {', '.join(f'{k} {v:.2f}' for k, v in rel.timings.items())}")
    print(f"MAE {np.mean(np.abs(rel.answers - truth)):.2f}; expected RMSE: chosen "
          f"{chosen['rmse']:.2f}, direct {direct['rmse']:.1f} (direct / chosen error "
          f"variance {direct['rmse'] ** 2 / chosen['rmse'] ** 2:,.0f}×); {load()} at the end")


def _axis_table(n: int) -> dict[str, float]:
    """Σ_spans V over all ranges of n codes for the identity and for every tree b, its level
    costs optimised freely (tessera.strategy.tree_allocation, from the best ∝ r^l split): the
    separable factors of the 2-D total error (tessera.strategy.rectangles), zCDP."""
    from tessera.strategy.rectangles import axis_options, precision_factors
    from tessera.strategy.tree_allocation import family_quadratic, optimal_level_costs

    spans = Spans.all_ranges(n)
    gram = spans.gram(n, np.ones(spans.n_queries))
    out = {}
    for kind in ("identity", "hierarchical"):
        by_b: dict[int, tuple[float, object]] = {}
        for opt in axis_options(n, kind):
            v = float(opt.design(n).variances(opt.fractions, spans).sum())
            if opt.branching not in by_b or v < by_b[opt.branching][0]:
                by_b[opt.branching] = (v, opt)
        for b, (v, opt) in by_b.items():
            if b > 1:
                fr, _ = optimal_level_costs(opt.design(n), opt.levels, opt.fractions, 1.0, True,
                                            gram, family_quadratic("ranges", 1.0))
                v = float(opt.design(n).variances(
                    precision_factors(fr / fr.sum(), ts.Definition.ZCDP), spans).sum())
            out[f"b={b}"] = v
    return out


def part_ranges_2d(sizes: tuple[int, ...] = (32, 64), closed: tuple[int, ...] = (128,),
                   rows: int = 48_842, repeats: int = 3) -> None:
    """All rectangles over two ordered attributes: candidates' expected errors (closed form),
    chosen vs the best product of trees (every branching pair, level costs optimised freely
    per axis), and ``answer()`` time for ``sizes``; for
    ``closed`` only the closed-form errors (the workload would exceed the lazy family's
    5·10⁶ queries: 128 × 128 has 68 million rectangles)."""
    from tessera.strategy.choose import choose_strategy
    from tessera.workload.ranges import RangeFamily, axis_counts

    print(f"\nAll rectangles over two ordered attributes, ρ = {RHO}, add/remove; {load()}")
    print("| grid | rectangles | direct RMSE | identity RMSE | hierarchical RMSE (chosen) | "
          "direct / chosen (variance) | identity / chosen | chosen / best tree product (MSE) | "
          "answer() s (median) | peak MiB |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in (*sizes, *closed):
        # every product of axis options: the total is (Σ V₁)(Σ V₂)/(2ρ) (separable)
        axis = _axis_table(n)
        best_product = min(v for k, v in axis.items() if k != "b=1") ** 2 / (2 * RHO)
        n_rect = (n * (n + 1) // 2) ** 2
        c = int(axis_counts(n, "ranges").max())
        direct_var = float(c) ** 2 / (2 * RHO)  # γ = (max_v (v+1)(n−v))², uniform
        ident = axis["b=1"] ** 2 / (2 * RHO) / n_rect
        if n in closed:
            chosen_var = best_product / n_rect
            print(f"| {n}×{n} (closed form only) | {n_rect:,} | {math.sqrt(direct_var):.1f} | "
                  f"{math.sqrt(ident):.2f} | {math.sqrt(chosen_var):.2f} | "
                  f"{direct_var / chosen_var:,.0f}× | {ident / chosen_var:.1f}× | 1.000 | — "
                  f"| — |")
            continue
        dom, data = _ranges_data({"x": n, "y": n}, rows)
        wl = ts.Workload.of_ranges(dom, [RangeFamily.of(dom, ["x", "y"])])
        ch = choose_strategy(wl, ts.Definition.ZCDP, RHO, compare=True)
        rmse = {s.name.split("(")[0]: s.rmse for s in ch.candidates}
        chosen_var = ch.chosen.rmse ** 2
        assert abs(rmse["direct"] ** 2 - direct_var) < 1e-6 * direct_var
        times, rel, peak = _timed_answers(data, wl, repeats)
        print(f"| {n}×{n} | {n_rect:,} | {rmse['direct']:.1f} | {rmse['identity']:.2f} | "
              f"{ch.chosen.rmse:.2f} ({ch.chosen.name}) | {direct_var / chosen_var:,.0f}× | "
              f"{rmse['identity'] ** 2 / chosen_var:.1f}× | "
              f"{ch.chosen.total / best_product:.3f} | {statistics.median(times):.2f} | "
              f"{peak:.0f} |")
    print(f"{load()} at the end")


def part_predicates(workloads: int = 5, k: int = 300) -> None:
    from tessera.strategy.choose import choose_strategy

    dom = ts.Domain.load(DATA / "adult-domain.json")
    rng = np.random.default_rng(18)
    names = [a.name for a in dom]
    print(f"\nRandom predicate workloads on Adult's schema ({workloads} × {k} queries, 10% "
          f"repeated), ρ = {RHO}; {load()}")
    print("| workload | kind | chosen | direct RMSE | chosen RMSE | measured / W |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for j in range(workloads):
        one = j % 2 == 1
        sql = []
        for _ in range(k):
            if one:  # ranges over age (one attribute: identity / tree candidates apply)
                lo = int(rng.integers(0, 32))
                hi = int(rng.integers(lo, 32))
                sql.append(f"age >= {lo} AND age <= {hi}")
                continue
            attrs = rng.choice(names, size=int(rng.integers(1, 4)), replace=False)
            parts = []
            for a in attrs:
                size = dom[a].size
                lo = int(rng.integers(0, size))
                parts.append(f'"{a}" >= {lo}' if rng.random() < 0.5 else f'"{a}" = {lo}')
            sql.append(" AND ".join(parts))
        sql += [sql[int(i)] for i in rng.integers(0, k, k // 10)]
        wl = ts.Workload.from_sql(sql, dom)
        ch = choose_strategy(wl, ts.Definition.ZCDP, RHO, compare=True, time_limit=60)
        direct = next(s for s in ch.candidates if s.name == "direct")
        assert ch.chosen.total <= direct.total
        print(f"| {j} | {'age ranges' if one else 'conjunctions'} | {ch.chosen.name} | "
              f"{direct.rmse:.1f} | {ch.chosen.rmse:.1f} | "
              f"{ch.chosen.measured.n_queries}/{wl.n_queries} |")


def part_contrasts() -> None:
    """Residual contrasts from their closed forms (no data): expected MAE against
    ResidualPlanner's on Adult's 2- and 3-way marginals, the 3-way cost of sizing the contrasts
    for 2^24 / 2^28 / 2^31 rows, and what ``--objective max`` buys on W1."""
    import tessera.strategy.contrasts as contrasts
    from tessera.strategy.choose import choose_strategy

    dom = ts.Domain.load(DATA / "adult-domain.json")
    sizes = {a.name: a.size for a in dom}
    print(f"\nResidual contrasts, Adult, ρ = {RHO}, add/remove (closed forms, no data; {load()})")
    print("| workload | rows sized for | expected MAE | ResidualPlanner | ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    default = contrasts.MAX_ROWS
    for k, rows in ((2, default), (3, 2**24), (3, 2**28), (3, 2**31)):
        wl = ts.Workload.of_families(dom, k_way_marginals(dom, k))
        targets = [p.attributes for p in wl.partitions]
        cells = np.array([p.n_cells_in(dom) for p in wl.partitions])
        rp = rp_closed_form(sizes, targets, RHO)
        rp_mae = float(sum(c * math.sqrt(2 * rp[s] / math.pi) for s, c in zip(targets, cells))
                       / cells.sum())
        contrasts.MAX_ROWS = rows
        contrasts.attribute_contrasts.cache_clear()
        try:
            s = choose_strategy(wl, "zcdp", RHO, strategy="residual").chosen
        finally:
            contrasts.MAX_ROWS = default
            contrasts.attribute_contrasts.cache_clear()
        mae = float(np.mean(np.sqrt(2 * s.expected / math.pi)))
        print(f"| all {len(targets)} {k}-way | 2^{int(math.log2(rows))} | {mae:.3f} | "
              f"{rp_mae:.3f} | {mae / rp_mae:.4f} |")
    wl = ts.Workload.of_families(dom, k_way_marginals(dom, 2))
    w = wl.weight_array()
    print("\n| W1, `--strategy residual` | Σ Var | worst cell's Var | time s |")
    print("| --- | ---: | ---: | ---: |")
    for objective in ("total", "max"):
        t0 = time.perf_counter()
        s = choose_strategy(wl, "zcdp", RHO, strategy="residual", objective=objective).chosen
        worst = float(np.max(w * s.expected))
        print(f"| `--objective {objective}` | {s.total:,.0f} | {worst:,.0f} "
              f"| {time.perf_counter() - t0:.2f} |")


def part_max_split() -> None:
    """``--objective max``: the worst weighted cell's variance of the equal, the total-optimal
    and the minimax split of the same strategy (marginals measured as counts: Adult W1 and a
    1+2+3-way workload; trees: all ranges and all prefixes over 1,024 values), the plan time of
    ``choose_strategy(..., objective='max')`` for that strategy (all three computed and
    calibrated), and under ρ-zCDP the certified lower bound on the minimax (marginals:
    MinimaxProblem.lower_bound; trees: the relaxed program over the active queries)."""
    from tessera.strategy.candidates import worst_cell
    from tessera.strategy.choose import choose_strategy
    from tessera.strategy.marginals import (
        MarginalDesign,
        MinimaxProblem,
        minimax_precisions,
        optimal_precisions,
    )
    from tessera.strategy.tree_allocation import (
        family_quadratic,
        minimax_level_costs,
        optimal_level_costs,
    )
    from tessera.workload.ranges import RangeFamily

    dom = ts.Domain.load(DATA / "adult-domain.json")
    sizes = {a.name: a.size for a in dom}
    print(f"\n`--objective max`: worst weighted cell variance by split (ρ = {RHO} zCDP, "
          f"ε = 1 pure; add/remove; {load()})")
    print("| workload | strategy | definition | equal | total-optimal | minimax | "
          "lower bound | equal / minimax | total-opt / minimax | plan s |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    income = "income>50K"
    mixed = (list(k_way_marginals(dom, 1)) + list(k_way_marginals(dom, 2))
             + [p for p in k_way_marginals(dom, 3) if income in p.attributes])
    for label, fams in (("W1: all 105 2-way", k_way_marginals(dom, 2)),
                        ("15 1-way + 105 2-way + 91 3-way with income", mixed)):
        wl = ts.Workload.of_families(dom, fams)
        targets = tuple(dict.fromkeys(p.attributes for p in wl.partitions))
        measured = tuple(s for s in targets if not any(set(s) < set(t) for t in targets))
        design = MarginalDesign(sizes, measured, targets)
        w = np.ones(len(targets))
        for definition, total in (("zcdp", RHO), ("pure", 1.0)):
            zcdp = definition == "zcdp"
            problem = MinimaxProblem.of(design, w, zcdp)
            even = problem.worst(np.full(len(measured), total / len(measured)))
            opt = problem.worst(optimal_precisions(design, w, zcdp=zcdp, total=total))
            cost = minimax_precisions(design, w, zcdp=zcdp, total=total)
            mm = problem.worst(cost)
            bound = f"{problem.lower_bound(cost, total):,.6g}" if zcdp else "(not convex)"
            t0 = time.perf_counter()
            chosen = choose_strategy(wl, definition, total, strategy="identity",
                                     objective="max", time_limit=60).chosen
            plan = time.perf_counter() - t0
            assert abs(worst_cell(chosen) / mm - 1) < 1e-4, (worst_cell(chosen), mm)
            print(f"| {label} ({len(measured)} measured) | identity (counts) | {definition} | "
                  f"{even:,.6g} | {opt:,.6g} | {mm:,.6g} | {bound} | {even / mm:.3f} | "
                  f"{opt / mm:.3f} | {plan:.1f} |")
    n = 1024
    one = ts.Domain.from_dict({"x": n})
    for kind in ("ranges", "prefixes"):
        wl = ts.Workload.of_ranges(one, [RangeFamily.of(one, ["x"], kind)])
        for definition, total in (("zcdp", RHO), ("pure", 1.0)):
            zcdp = definition == "zcdp"
            t0 = time.perf_counter()
            chosen = choose_strategy(wl, definition, total, strategy="hierarchical",
                                     objective="max", time_limit=60).chosen
            plan = time.perf_counter() - t0
            mm = worst_cell(chosen)
            base = choose_strategy(wl, definition, total, strategy="hierarchical",
                                   objective="total", time_limit=60).chosen
            ones = np.ones(wl.n_queries)
            rows = {}
            for label_s, s in (("total", base), ("max", chosen)):
                recon = s.reconstruction
                design, spans = recon.design, recon.spans  # type: ignore[attr-defined]
                levels = []
                for g in design.groups:
                    cuts = np.flatnonzero(np.diff(g)) + 1
                    levels.append(list(zip(np.r_[0, cuts].tolist(), np.r_[cuts, n].tolist())))
                rows[label_s] = (design, levels, spans)

            def worst(c: np.ndarray, design: IntervalDesign, spans: Spans,
                      zcdp: bool = zcdp) -> float:
                return float(np.max(design.variances(2 * c if zcdp else c * c / 2, spans)))

            design, levels, spans = rows["total"]
            even_c = level_costs(len(levels), total, 1.0)
            opt_c, _ = optimal_level_costs(design, levels, even_c, total, zcdp,
                                           spans.gram(n, ones), family_quadratic(kind, 1.0))
            even, opt = worst(even_c, design, spans), worst(opt_c, design, spans)
            assert mm <= min(even, opt) * (1 + 1e-9)
            shown = "(not convex)"
            if zcdp:  # convex: the relaxed bound of the chosen tree
                design, levels, spans = rows["max"]
                bound = minimax_level_costs(design, levels, level_costs(len(levels), total, 1.0),
                                            total, zcdp, spans, ones)[2]
                shown = f"{bound:,.6g}"
            print(f"| all {wl.n_queries:,} {kind}, n = {n} | {base.name} → {chosen.name} | "
                  f"{definition} | {even:,.6g} | {opt:,.6g} | {mm:,.6g} | {shown} | "
                  f"{even / mm:.3f} | {opt / mm:.3f} | {plan:.1f} |")
    part_max_split_2d()


def part_max_split_2d(sizes: tuple[int, ...] = (32, 64)) -> None:
    """The 2-D rows of :func:`part_max_split`: all rectangles over an n × n grid, the product
    of trees (docs/theory.md §10.7). Equal: the total's two trees with equal level costs;
    total-optimal: the split chosen under ``total``; minimax: the chosen strategy under
    ``max`` (each axis's 1-D minimax, :mod:`tessera.strategy.rectangle_minimax`); lower bound
    (ρ-zCDP): within the product family (w κ⁻¹ L₁L₂) and over every level-pair split of the two
    trees (w κ⁻¹ (H₁H₂ − M₁M₂ + G₁G₂))."""
    from tessera.strategy.candidates import worst_cell
    from tessera.strategy.choose import choose_strategy
    from tessera.strategy.rectangle_minimax import (
        axis_variances,
        minimax_axis,
        product_bound,
        split_bound,
    )
    from tessera.strategy.rectangles import AxisOption, best_axis, kappa
    from tessera.workload.ranges import RangeFamily, axis_bounds

    for n in sizes:
        dom = ts.Domain.from_dict({"x": n, "y": n})
        wl = ts.Workload.of_ranges(dom, [RangeFamily.of(dom, ["x", "y"], "ranges")])
        spans = Spans.ranges(*axis_bounds(n, "ranges"))
        for definition, total in (("zcdp", RHO), ("pure", 1.0)):
            d = ts.Definition.parse(definition)
            t0 = time.perf_counter()
            chosen = choose_strategy(wl, definition, total, strategy="hierarchical",
                                     objective="max", time_limit=60).chosen
            plan = time.perf_counter() - t0
            base = choose_strategy(wl, definition, total, strategy="hierarchical",
                                   objective="total", time_limit=60).chosen
            mm, opt = worst_cell(chosen), worst_cell(base)
            even = 1.0 / kappa(d, total)
            for o in base.reconstruction.axes:  # type: ignore[attr-defined]
                eq = AxisOption(o.levels, level_costs(len(o.levels), 1.0, 1.0), o.branching)
                even *= float(axis_variances(eq, spans, d).max())
            axes = tuple(minimax_axis(n, "ranges", d, best_axis(n, "ranges", "hierarchical",
                                                                  d)[0]) for _ in range(2))
            shown = "(not convex)"
            lb = product_bound(axes, d, total, 1.0)  # type: ignore[arg-type]
            if lb is not None:
                sb = split_bound(axes, d, total, 1.0)  # type: ignore[arg-type]
                shown = f"{lb:,.6g} (all splits: {sb:,.6g})"
            assert mm <= min(even, opt) * (1 + 1e-6), (mm, even, opt)
            print(f"| all {wl.n_queries:,} rectangles, {n} × {n} | {base.name} → "
                  f"{chosen.name} | {definition} | {even:,.6g} | {opt:,.6g} | {mm:,.6g} | "
                  f"{shown} | {even / mm:.3f} | {opt / mm:.3f} | {plan:.1f} |")
    print(f"{load()} at the end")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="all",
                    choices=["w1", "coverage", "ranges", "answer-ranges", "ranges-2d",
                             "predicates", "contrasts", "max-split", "max-split-2d",
                             "all"])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--runs", type=int, default=500)
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, tessera {ts.__version__}; "
          f"{json.dumps({'cpus': os.cpu_count()})}")
    if args.part in ("w1", "all"):
        part_w1(args.repeats)
    if args.part in ("coverage", "all"):
        part_coverage(args.runs)
    if args.part in ("ranges", "all"):
        part_ranges()
    if args.part in ("answer-ranges", "all"):
        part_answer_ranges(repeats=max(args.repeats, 3))
    if args.part in ("ranges-2d", "all"):
        part_ranges_2d(repeats=max(args.repeats, 3))
    if args.part in ("predicates", "all"):
        part_predicates()
    if args.part in ("contrasts", "all"):
        part_contrasts()
    if args.part in ("max-split", "all"):
        part_max_split()
    if args.part == "max-split-2d":
        print(f"\n`--objective max` on 2-D rectangles (ρ = {RHO} zCDP, ε = 1 pure; add/remove; "
              f"{load()})")
        part_max_split_2d()


if __name__ == "__main__":
    main()
