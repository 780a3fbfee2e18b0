"""Estimators refitted by brute force over NLTCS's whole 2^16-cell table, on the measurements of
a seeded adaptive run (docs/benchmarks.md, "the final estimate as a posterior mode"):
maximum likelihood, a Gaussian prior on the interactions, a total-correlation penalty and a KL
penalty towards the independence of the noisy one-way marginals. Every θ is a table per
measured scope plus free one-way tables, minimised by L-BFGS with exact gradients; the error is
the model's mean L1 over all 560 3-way marginals. Seeded noise: a benchmark, NOT PRIVATE.
Usage::

    python bench/synth_prior_bruteforce.py 0.1 0 3     # ε, then seeds
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ab_synth as ab  # noqa: E402
import bench_synth as bs  # noqa: E402
import numpy as np  # noqa: E402
from scipy.optimize import minimize  # noqa: E402

import tessera as ts  # noqa: E402

FRAME, WORKLOAD, REAL, N_ROWS = ab.setting("nltcs")
D = 16
CELLS = 1 << D
BITS = (np.arange(CELLS)[:, None] >> np.arange(D)[None, :]) & 1  # bit a = attribute a's code
TRUTH = np.bincount(FRAME.to_numpy().astype(np.int64) @ (1 << np.arange(D)),
                    minlength=CELLS) / len(FRAME)
_INDEX: dict[tuple[int, ...], np.ndarray] = {}


def cell_of(scope: tuple[int, ...]) -> np.ndarray:
    """Every full cell's cell in the marginal over ``scope`` (row-major, domain order)."""
    if scope not in _INDEX:
        idx = np.zeros(CELLS, dtype=np.int64)
        for a in scope:
            idx = idx * 2 + BITS[:, a]
        _INDEX[scope] = idx
    return _INDEX[scope]


TRIPLES = list(itertools.combinations(range(D), 3))
EXACT = {s: np.bincount(cell_of(s), TRUTH, minlength=8) for s in TRIPLES}


def error(p: np.ndarray) -> float:
    return float(np.mean([np.abs(np.bincount(cell_of(s), p, minlength=8) - EXACT[s]).sum()
                          for s in TRIPLES]))


Measurement = tuple[tuple[int, ...], np.ndarray, float]


def refit(meas: list[Measurement], total: float, l2: float = 0.0, tc: float = 0.0,
          reference: np.ndarray | None = None, kl: float = 0.0) -> np.ndarray:
    """argmin L(θ) + (l2/2)‖θ_interactions‖² + tc·TC(P_θ) + kl·KL(P_θ ‖ reference)."""
    scopes = sorted({m[0] for m in meas} | {(a,) for a in range(D)}, key=lambda s: (len(s), s))
    offset, k = {}, 0
    for s in scopes:
        offset[s] = k
        k += 2 ** len(s)
    penalised = np.zeros(k)
    for s in scopes:
        if len(s) >= 2:
            penalised[offset[s]: offset[s] + 2 ** len(s)] = 1.0

    def distribution(theta: np.ndarray) -> np.ndarray:
        logit = np.zeros(CELLS)
        for s in scopes:
            logit += theta[offset[s]: offset[s] + 2 ** len(s)][cell_of(s)]
        p = np.exp(logit - logit.max())
        return p / p.sum()

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        p = distribution(theta)
        value, per_cell = 0.0, np.zeros(CELLS)  # per_cell: ∂F/∂p, then centred under p
        for s, y, sd in meas:
            r = total * np.bincount(cell_of(s), p, minlength=2 ** len(s)) - y
            value += float(r @ r) / (2 * sd * sd)
            per_cell += (total * r / (sd * sd))[cell_of(s)]
        if tc or kl:
            h = np.log(np.maximum(p, 1e-300))
            if tc:
                g = h.copy()
                for a in range(D):
                    g -= np.log(np.maximum(np.bincount(BITS[:, a], p, minlength=2),
                                           1e-300))[BITS[:, a]]
                value += tc * float(p @ g)
                per_cell += tc * g
            if kl:
                g = h - np.log(reference)  # type: ignore[arg-type]
                value += kl * float(p @ g)
                per_cell += kl * g
        z = p * (per_cell - float(p @ per_cell))
        grad = np.zeros(k)
        for s in scopes:
            grad[offset[s]: offset[s] + 2 ** len(s)] = np.bincount(cell_of(s), z,
                                                                  minlength=2 ** len(s))
        value += 0.5 * l2 * float((penalised * theta) @ theta)
        return value, grad + l2 * penalised * theta

    res = minimize(objective, np.zeros(k), jac=True, method="L-BFGS-B",
                   options={"maxiter": 3000, "gtol": 1e-9, "ftol": 1e-15})
    return distribution(res.x)


def independence(meas: list[Measurement]) -> np.ndarray:
    q = np.ones(CELLS)
    for a in range(D):
        ys = [(y, sd) for s, y, sd in meas if s == (a,)]
        y = sum(y / sd ** 2 for y, sd in ys) / sum(1 / sd ** 2 for _, sd in ys)
        p = np.maximum(y, 0.5)
        q *= (p / p.sum())[BITS[:, a]]
    return q


def main() -> None:
    eps, seeds = float(sys.argv[1]), [int(x) for x in sys.argv[2:]]
    print(f"the exact one-way marginals' product: {error(independence_exact()):.4f}")
    variants: list[tuple[str, Callable[[list[Measurement], float], np.ndarray]]] = [
        ("maximum likelihood", lambda m, t: refit(m, t)),
        *((f"Gaussian prior, precision {v:g}", lambda m, t, v=v: refit(m, t, l2=v))
          for v in (0.1, 0.3)),
        *((f"total correlation, λ = {v:g}", lambda m, t, v=v: refit(m, t, tc=v))
          for v in (3, 10, 30)),
        ("KL to the noisy one-ways' independence, λ = 30",
         lambda m, t: refit(m, t, reference=independence(m), kl=30)),
    ]
    for seed in seeds:
        fitted = ts.Synthesizer("adaptive", prior_scale=0).fit(
            FRAME, WORKLOAD, bs.budget(eps), neighbours=bs.NEIGHBOURS, seed=seed)
        res = fitted.result
        meas = [(tuple(m.scope), np.asarray(m.y, float), float(m.sd)) for m in res.measurements]
        own = ab.model_error(res, WORKLOAD, REAL, N_ROWS)
        print(f"seed {seed}: Tessera's likelihood model {own:.4f}")
        for name, how in variants:
            print(f"  {name}: {error(how(meas, res.total)):.4f}", flush=True)


def independence_exact() -> np.ndarray:
    q = np.ones(CELLS)
    for a in range(D):
        q *= np.bincount(BITS[:, a], TRUTH, minlength=2)[BITS[:, a]]
    return q


if __name__ == "__main__":
    main()
