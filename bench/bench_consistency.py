"""Least-squares consistency: how much it lowers the error of released answers.

Post-processing (free in privacy) projects the noisy answers onto the answers some data set
could have (docs/theory.md §7): the expected weighted squared error falls from t to dim 𝒮.
Measured here against the noisy answers themselves (the baseline) in the same run, with
OpenDP's discrete Gaussian noise calibrated to each workload's maximum overlap at ρ = 0.5:

    python bench/bench_consistency.py [--reps 50]
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path

import numpy as np

from tessera.data.counts import count
from tessera.mechanisms import NoiseSource, discrete_gaussian
from tessera.release import Budget, noise_plan
from tessera.release.consistency import consistent_answers
from tessera.schema.domain import Domain
from tessera.workload.builders import marginals, random_workload
from tessera.workload.families import hierarchy
from tessera.workload.workload import Workload

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("TESSERA_SHARED_DATA", REPO.parent / "shared" / "data"))


def workloads(domain: Domain) -> dict[str, Workload]:
    return {
        "age binary hierarchy (1-D)": Workload.of_families(
            domain, hierarchy(domain, ["age"])).expanded(),
        "age × hours-per-week hierarchy (2-D)": Workload.of_families(
            domain, hierarchy(domain, ["age", "hours-per-week"], depth=4)).expanded(),
        "all 2-way marginals": marginals(domain, 2),
        "1,000 random predicates": random_workload(domain, 1000, attributes_per_query=(1, 2),
                                                   seed=3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    domain = Domain.load(DATA / "adult-domain.json")
    print("| workload | t | dim 𝒮 | predicted MSE ratio dim/t | observed MSE ratio | "
          "observed MAE ratio | consistency s / rep | peak MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for name, wl in workloads(domain).items():
        plan = noise_plan(wl, Budget.of(rho=0.5))
        truth = count(DATA / "adult.csv", wl).answers
        sigma = plan.scales
        var = np.array([discrete_gaussian.variance(float(s)) for s in sigma])
        noisy = np.stack([discrete_gaussian.sample(truth, sigma, NoiseSource.secure()).values
                          for _ in range(args.reps)], axis=1).astype(float)
        t0 = time.perf_counter()
        res = consistent_answers(wl, noisy, var)
        per_rep = (time.perf_counter() - t0) / args.reps
        err_raw = noisy - truth[:, None]
        err_con = res.answers - truth[:, None]
        w = 1.0 / var[:, None]
        mse = float((w * err_con**2).sum() / (w * err_raw**2).sum())
        mae = float(np.abs(err_con).mean() / np.abs(err_raw).mean())
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"| {name} | {len(wl):,} | {res.dimension:,} | {res.dimension / len(wl):.4f} | "
              f"{mse:.4f} | {mae:.4f} | {per_rep:.3f} | {peak:.0f} |")


if __name__ == "__main__":
    main()
