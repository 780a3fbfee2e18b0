"""Cost of the adaptive route's answerability constraint (docs/theory.md §10.5,
:mod:`tessera.synth.answerable`) on Adult.

Workload: the 2-way marginals over 6 attributes (15 families) and P predicate queries — random
conjunctions over 3 to 8 attributes (seeded), so that some are wider than ``max_cells`` and
some are read from the model by an engine pass. The same seeded run (ρ = 0.014973) is timed

* ``off``: the synthesizer alone (``answer_memory`` None, what the route did before), then its
  answers read at the default limit, and
* ``on``: :func:`tessera.answer_adaptive` (the constraint at the default 2 GiB limit),

medians over ``--repeats``; the per-round withheld counts and the share of the run spent in
the constraint are reported. Usage::

    python bench/bench_answerable.py --queries 10 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np
import pandas as pd

import tessera as ts
from tessera.schema.intervals import IntervalSet
from tessera.synth.adaptive_record import model_counts
from tessera.synth.answerable import Answerable
from tessera.workload.families import Partition
from tessera.workload.query import Query

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
ATTRS = ["age", "education", "marital-status", "occupation", "sex", "income>50K"]


def workload(dom: ts.Domain, n_queries: int, seed: int) -> ts.Workload:
    rng = np.random.default_rng(seed)
    queries = []
    for _ in range(n_queries):  # a_i < |A_i| / 2 over 3 … 8 random attributes
        k = int(rng.integers(3, 9))
        attrs = rng.choice(len(dom), k, replace=False)
        queries.append(Query.conjunction(dom, {
            dom.names[a]: IntervalSet.of([(0, max(1, dom.sizes[a] // 2))]) for a in attrs}))
    fams = [Partition.marginal(dom, [a, b]) for i, a in enumerate(ATTRS) for b in ATTRS[i + 1:]]
    return ts.Workload.of(dom, queries, names=[f"q{j}" for j in range(n_queries)],
                          partitions=fams)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rho", type=float, default=0.014973)
    args = ap.parse_args()
    dom = ts.Domain.load(DATA / "adult-domain.json")
    data = pd.read_csv(DATA / "adult.csv")
    wl = workload(dom, args.queries, 0)
    spent: list[float] = []
    original = Answerable.refusal

    def timed(self, structure):  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        try:
            return original(self, structure)
        finally:
            spent.append(time.perf_counter() - t)

    Answerable.refusal = timed  # type: ignore[method-assign]
    off, on = [], []
    for r in range(args.repeats):
        t = time.perf_counter()
        fitted = ts.Synthesizer("adaptive", rows=0).fit(data, wl, ts.Budget.of(rho=args.rho),
                                                         seed=r)
        a_off = model_counts(fitted.result, wl)
        off.append(time.perf_counter() - t)
        print(f"seed {r}: off {off[-1]:.2f} s, rounds {len(fitted.result.record.history)}",
              flush=True)
        spent.clear()
        t = time.perf_counter()
        rel = ts.answer_adaptive(data, wl, ts.Budget.of(rho=args.rho), seed=r)
        on.append(time.perf_counter() - t)
        rec = rel.fitted.result.record
        same = np.array_equal(a_off, rel.answers)
        print(f"seed {r}: off {off[-1]:.2f} s, on {on[-1]:.2f} s (constraint {sum(spent):.2f} s"
              f" in {len(spent)} structure checks), rounds {len(rec.history)}, withheld "
              f"{rec.withheld}, answers identical: {same}", flush=True)
    print(f"median: off {statistics.median(off):.2f} s, on {statistics.median(on):.2f} s, "
          f"ratio {statistics.median(on) / statistics.median(off):.2f}x; load "
          f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
