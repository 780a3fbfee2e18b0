"""IPMWU's parameters on NLTCS, all 2-way marginals, ε = 1, add/remove: paper
2's defaults (T, β, m from its theory) against a few hand-picked alternatives, by the mean cell
error of the output distribution's exact answers, beside uniform random rows.

    PYTHONPATH=src python bench/bench_ipmwu_defaults.py
"""
# ruff: noqa: E402, E501
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from tessera.mechanisms import NoiseSource
from tessera.schema.domain import Domain
from tessera.synth.ipmwu import ipmwu
from tessera.synth.sensitive import Evaluator, query_functions
from tessera.workload.families import k_way_marginals
from tessera.workload.workload import Workload

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
sizes = json.load(open(DATA / "nltcs-domain.json"))
dom = Domain.from_dict({"attributes": {k: {"type": "integer", "min": 0, "max": v - 1} for k, v in sizes.items()}})
data = pd.read_csv(DATA / "nltcs.csv")
w = Workload.of_families(dom, list(k_way_marginals(dom, 2)))
fs, _ = query_functions(dom, w)
X = data.to_numpy()
truth = Evaluator(dom, fs).means(X)
rng = np.random.default_rng(0)
U = rng.integers(0, 2, size=(len(X), len(sizes)))
print("uniform rows mean cell error", np.mean(np.abs(Evaluator(dom, fs).means(U) - truth)), flush=True)
settings = {"paper (T, β, m from theory)": {},
            "exact, mwem update, T=100": dict(expectations="exact", update="mwem", rounds=100),
            "exact, unit, T=200": dict(expectations="exact", rounds=200)}
for name, opts in settings.items():
    for seed in (1, 2):
        t = time.perf_counter()
        r = ipmwu(dom, w, X, epsilon=1.0, neighbours="add-remove", source=NoiseSource.seeded(seed), rng=seed, **opts)
        err = np.mean(np.abs(r.average_answers() - truth))
        p = r.record.parameters
        print(f"{name} seed {seed}: mean cell error {err:.4f} (answers of the output distribution), T={p.rounds}, β={p.step:.3g}, m={p.sample_size}, {time.perf_counter()-t:.0f} s", flush=True)
