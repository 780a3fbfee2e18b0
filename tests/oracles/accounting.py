"""Brute-force references for the accounting tests (no shortcuts shared with the code)."""

from __future__ import annotations

import itertools

import numpy as np


def random_pair(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Two random distributions on n outcomes (some zeros, so infinite ratios occur)."""
    p = rng.dirichlet(np.ones(n))
    q = rng.dirichlet(np.ones(n))
    if n > 2 and rng.random() < 0.3:
        p[rng.integers(n)] = 0.0
        p /= p.sum()
    return p, q


def hull_min(xs: np.ndarray, ys: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Lower convex hull of the points (xs, ys) evaluated at ``at``, by brute force over all
    pairs (the value at x is the min over segments [x_i, x_j] ∋ x of the interpolation)."""
    out = np.full(at.shape, np.inf)
    for i in range(xs.size):
        for j in range(xs.size):
            if xs[i] > xs[j]:
                continue
            if xs[i] == xs[j]:
                hit = at == xs[i]
                out[hit] = np.minimum(out[hit], min(ys[i], ys[j]))
                continue
            lam = (at - xs[i]) / (xs[j] - xs[i])
            inside = (lam >= 0) & (lam <= 1)
            val = ys[i] + lam * (ys[j] - ys[i])
            out[inside] = np.minimum(out[inside], val[inside])
    return out


def tradeoff_brute(p: np.ndarray, q: np.ndarray, at: np.ndarray) -> np.ndarray:
    """T(P, Q)(α) from the definition: all deterministic tests φ = 1_S give (P(S), 1 − Q(S));
    randomised tests are their convex combinations, so T is the lower hull of these points,
    made non-increasing by allowing α to be spent wastefully (inf over α_φ ≤ α)."""
    pts_a, pts_b = [], []
    for r in range(p.size + 1):
        for s in itertools.combinations(range(p.size), r):
            idx = list(s)
            pts_a.append(p[idx].sum())
            pts_b.append(1.0 - q[idx].sum())
    # Rounding: a full-mass sum of floats may read 0.9999999999999999.
    xs, ys = np.round(np.array(pts_a), 12), np.array(pts_b)
    h = hull_min(xs, ys, at)
    # inf over α_φ ≤ α: running minimum from the left.
    order = np.argsort(at)
    h_sorted = np.minimum.accumulate(h[order])
    out = np.empty_like(h)
    out[order] = h_sorted
    return out


def discrete_gaussian_pmf(sigma: float, bound: int) -> tuple[np.ndarray, np.ndarray]:
    z = np.arange(-bound, bound + 1)
    logw = -(z.astype(float) ** 2) / (2 * sigma**2)
    w = np.exp(logw - logw.max())
    return z, w / w.sum()
