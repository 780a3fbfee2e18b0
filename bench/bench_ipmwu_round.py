"""IPMWU's round cost on NLTCS, all 3-way marginals: the all-queries count of a
round's m samples (one sparse product, ``Evaluator._all_counts``) against the per-query
evaluation it replaced (one look-up per query and predicate), same run, same seeds, same load.

    PYTHONPATH=src python bench/bench_ipmwu_round.py [--rounds 20] [--repeats 3]

Prints the median seconds per round of each (the model build, ~40 s here, is excluded: it is
the same for both), their ratio, the machine's load, and checks both runs drew the same rows
(the change is exact).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tessera.mechanisms import NoiseSource  # noqa: E402
from tessera.schema.domain import Domain  # noqa: E402
from tessera.synth.ipmwu import ipmwu  # noqa: E402
from tessera.synth.sensitive import Evaluator  # noqa: E402
from tessera.workload.families import k_way_marginals  # noqa: E402
from tessera.workload.workload import Workload  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def per_query(self: Evaluator, codes: np.ndarray) -> np.ndarray:
    """The old path: every query evaluated on its own."""
    return Evaluator.counts(self, codes, np.arange(len(self.functions)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    sizes = json.loads((DATA / "nltcs-domain.json").read_text())
    dom = Domain.from_dict({"attributes": {k: {"type": "integer", "min": 0, "max": v - 1}
                                           for k, v in sizes.items()}})
    data = pd.read_csv(DATA / "nltcs.csv")
    w = Workload.of_families(dom, list(k_way_marginals(dom, 3)))
    times: dict[str, list[float]] = {"per query": [], "all at once": []}
    rows: dict[str, bytes] = {}
    fast = Evaluator._all_counts
    for _ in range(args.repeats):
        for name in times:
            Evaluator._all_counts = per_query if name == "per query" else fast  # type: ignore
            r = ipmwu(dom, w, data, epsilon=1.0, neighbours="add-remove", rounds=args.rounds,
                      rows=1000, source=NoiseSource.seeded(1), rng=1)
            times[name].extend(r.record.timings.rounds)
            rows[name] = r.rows.tobytes()
    Evaluator._all_counts = fast  # type: ignore[method-assign]
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"NLTCS 3-way ({w.n_queries} queries), m = {r.record.parameters.sample_size}, "
          f"{args.rounds} rounds × {args.repeats} repeats, load {os.getloadavg()[0]:.1f}")
    for k, v in med.items():
        print(f"  {k:12s} median {v:.4f} s/round")
    print(f"  ratio {med['per query'] / med['all at once']:.1f}×; same rows: "
          f"{rows['per query'] == rows['all at once']}")


if __name__ == "__main__":
    main()
