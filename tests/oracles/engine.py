"""Brute-force oracles: enumerate every point of a small domain (tests only)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from tessera.schema.domain import Domain


@dataclass(frozen=True)
class BruteForce:
    points: np.ndarray  # (|D|, n) codes
    F: np.ndarray  # (|D|, |F|) f(x)
    scores: np.ndarray  # Σ θ f(x) (−inf where a constraint fails)
    log_z: float
    max_value: float
    prob: np.ndarray  # P[x]
    expectations: np.ndarray


def all_points(domain: Domain) -> np.ndarray:
    return np.array(list(itertools.product(*(range(k) for k in domain.sizes))), dtype=np.int64)


def brute_force(domain: Domain, queries: Sequence, theta: Sequence[float],
                constraints: Sequence = ()) -> BruteForce:
    X = all_points(domain)
    F = np.stack([np.asarray(q.evaluate(domain, X), dtype=float) for q in queries], axis=1) \
        if queries else np.zeros((len(X), 0))
    scores = F @ np.asarray(theta, dtype=float)
    for c in constraints:
        scores[~np.asarray(c.evaluate(domain, X), dtype=bool)] = -np.inf
    log_z = float(logsumexp(scores))
    prob = np.exp(scores - log_z)
    return BruteForce(X, F, scores, log_z, float(scores.max()), prob, prob @ F)
