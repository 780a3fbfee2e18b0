"""Direct vs ``--strategy auto`` on GROUP BY sums: empirical RMSE over repeated releases.

    PYTHONPATH=src python bench/bench_sum_strategy.py [--runs 20] [--rows 20000] [--seed 7]
        [--neighbours add-remove|substitute]

Makes up a sales table (region, channel, tier, weekday, amount 0..500; random, seeded, nothing
written), takes every 1- and 2-way ``SUM(CLAMP(amount, 0, 200)) GROUP BY`` of the four
categorical columns (10 statements, 16 + 89 = 105 groups), and answers it
``--runs`` times at ε = 1 (discrete Laplace) and at ρ = 0.5 (discrete Gaussian), add/remove one
row (or substitute one row: ``--neighbours substitute``), with the direct plan and with the
plan ``auto`` chooses, on the same exact sums (DuckDB) with OpenDP's secure noise. Prints the
RMSE over every group and run of each, and the ratio.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time

import numpy as np
import pandas as pd

from tessera.data.source import encode
from tessera.mechanisms import NoiseSource, discrete_gaussian, discrete_laplace
from tessera.privacy import Neighbours
from tessera.release.aggregate_plan import aggregate_plan
from tessera.release.aggregates import exact_linear
from tessera.release.budget import Budget
from tessera.release.sum_strategy import reconstruct, sum_strategy_plan
from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload
from tessera.workload.select import parse_statement

VALUES = {"region": ["north", "south", "east", "west"], "channel": ["web", "store"],
          "tier": ["basic", "plus", "pro"],
          "weekday": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]}


def table(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({a: rng.choice(v, rows) for a, v in VALUES.items()})
    frame["amount"] = np.minimum(rng.gamma(2.0, 30.0, rows).astype(int), 500)
    return frame


def workload(domain: Domain) -> AggregateWorkload:
    attrs = list(VALUES)
    groups = [[a] for a in attrs] + [list(p) for p in itertools.combinations(attrs, 2)]
    texts = [f"SELECT {', '.join(g)}, SUM(CLAMP(amount, 0, 200)) FROM sales "
             f"GROUP BY {', '.join(g)}" for g in groups]
    return AggregateWorkload(domain, tuple(parse_statement(t, domain)[0] for t in texts))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--neighbours", choices=[n.value for n in Neighbours],
                        default=Neighbours.ADD_REMOVE.value)
    args = parser.parse_args()
    n = Neighbours.parse(args.neighbours)
    domain = Domain.from_dict({"attributes": {
        **{a: {"type": "categorical", "values": v} for a, v in VALUES.items()},
        "amount": {"type": "integer", "min": 0, "max": 500}}})
    w = workload(domain)
    encoded = encode(table(args.rows, args.seed), domain)
    truth = exact_linear(domain, w.linear, encoded).astype(np.float64)
    source = NoiseSource.secure()
    print(f"{len(w.statements)} statements, {len(w.linear)} groups, {args.rows:,} rows, "
          f"{args.runs} runs each, {n.label}")
    for budget in (Budget.of(epsilon=1.0), Budget.of(rho=0.5)):
        sampler = (discrete_laplace.sample if budget.mechanism == "discrete_laplace"
                   else discrete_gaussian.sample)
        t0 = time.perf_counter()
        direct = aggregate_plan(w, budget, neighbours=n)
        auto = sum_strategy_plan(w, budget, neighbours=n, strategy="auto")
        assert auto is not None
        planned = time.perf_counter() - t0
        exact_d = exact_linear(domain, direct.linear, encoded)
        exact_a = exact_linear(domain, auto.measured, encoded)
        err_d, err_a = [], []
        for _ in range(args.runs):
            err_d.append(sampler(exact_d, direct.scales, source).values - truth)
            rec = reconstruct(auto, sampler(exact_a, auto.scales, source).values)
            err_a.append(rec.answers - truth)
        rmse_d = math.sqrt(float(np.mean(np.square(err_d))))
        rmse_a = math.sqrt(float(np.mean(np.square(err_a))))
        f = auto.families[0]
        exp = dict(f.expected)
        print(f"{budget.text()}: auto = {f.name} ({len(auto.measured)} measured sums); "
              f"RMSE direct {rmse_d:,.0f}, auto {rmse_a:,.0f}, ratio {rmse_d / rmse_a:.2f}x "
              f"(expected {math.sqrt(exp['direct'] / exp[f.name]):.2f}x); plans {planned:.1f} s")


if __name__ == "__main__":
    main()
