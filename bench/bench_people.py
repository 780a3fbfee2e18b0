"""Benchmark: a release for one person against the same release for one row
(docs/people.md, docs/theory.md §3.13).

    python bench/bench_people.py [--people 2000] [--k 1 5 10 20 50] [--seed 0]
                                 [--count rows|people]

Data: the made-up transactions table of ``examples/people/make_transactions.py`` (people with
1–50 purchases each), generated in memory; its schema and 28-query workload.

For each K and each of ε = 1 (pure, discrete Laplace) and ρ = 0.5 (zCDP, discrete Gaussian),
the library's plan (:func:`tessera.release.strategy_release.strategy_plan`, as ``tessera
answer`` makes it, no data) at the row level and for one person of at most K rows: γ_w, the
per-query noise scale (b or σ) and the ratio person/row over every query (the theorem:
exactly K in both). Then — only because the table is made up, so its exact counts may be
looked at — what bounding costs in bias: the exact counts of the bounded table against the
unbounded ones (mean relative undercount over the queries), and the expected RMSE per query,
√(noise variance + bias²), the curator's trade-off in choosing K.

``--count people``: every query counts distinct customers (docs/theory.md §3.14): the person's
γ_w is the coverage of K rows (the ratio person/row is then at most K), and the bias is against
the distinct counts with no row dropped.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import time
from pathlib import Path

import numpy as np

from tessera.data.counts import count
from tessera.privacy import ONE_ROW, PrivacyUnit
from tessera.release.budget import Budget
from tessera.release.strategy_release import noise_variances, strategy_plan
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload

ROOT = Path(__file__).resolve().parents[1]


def generator():  # examples/ is not a package: load the script as a module
    spec = importlib.util.spec_from_file_location(
        "make_transactions", ROOT / "examples" / "people" / "make_transactions.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=2000)
    parser.add_argument("--k", type=int, nargs="+", default=[1, 5, 10, 20, 50])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", choices=["rows", "people"], default="rows")
    args = parser.parse_args()
    gen = generator()
    frame = gen.transactions(args.people, args.seed)
    import yaml

    domain = Domain.from_dict(yaml.safe_load(gen.SCHEMA))
    lines = [ln for ln in gen.WORKLOAD.splitlines() if ln and not ln.startswith("#")]
    names = [ln.split(":", 1)[0] for ln in lines]
    wl = Workload.from_sql([ln.split(":", 1)[1].strip() for ln in lines], domain, names=names)
    per = frame.groupby("customer").size()
    print(f"{len(frame):,} purchases of {len(per):,} customers ({per.min()}–{per.max()}, "
          f"median {int(per.median())}); {wl.n_queries} queries")
    unbounded = (count(frame, wl, extra_columns="ignore") if args.count == "rows"
                 else count(frame, wl, unit=PrivacyUnit("customer", int(per.max()), "people"))
                 ).answers.astype(float)
    for budget in (Budget.of(epsilon=1.0), Budget.of(rho=0.5)):
        t0 = time.perf_counter()
        kw = {"neighbours": "add-remove", "allocation": "auto", "strategy": "auto",
              "objective": "total", "time_limit": 60.0}
        row, _ = strategy_plan(wl, budget, unit=ONE_ROW, **kw)
        scale = "b" if budget.definition.value == "pure" else "σ"
        print(f"\n{budget.text()}: row level γ_w = {row.overlap.bound:g}, {scale} = "
              f"{row.scales.min():.4g}–{row.scales.max():.4g} ({time.perf_counter() - t0:.1f} s)")
        print(f"{'K':>4} {'γ_w score':>10} {scale + ' (person)':>14} {'ratio min':>10} "
              f"{'ratio max':>10} {'undercount':>11} {'RMSE noise':>11} {'RMSE total':>11}")
        for k in args.k:
            unit = PrivacyUnit("customer", k, args.count)
            person, _ = strategy_plan(wl, budget, unit=unit, **kw)
            ratio = person.scales / row.scales
            exact = count(frame, wl, unit=unit).answers.astype(float)
            under = float(np.mean((unbounded - exact) / unbounded))
            var = noise_variances(person)
            noise = math.sqrt(float(np.mean(var)))
            total = math.sqrt(float(np.mean(var + (unbounded - exact) ** 2)))
            print(f"{k:>4} {person.overlap.score_bound:>10g} {person.scales.mean():>14.4g} "
                  f"{ratio.min():>10.6f} {ratio.max():>10.6f} {under:>10.1%} {noise:>11.4g} "
                  f"{total:>11.4g}")


if __name__ == "__main__":
    main()
