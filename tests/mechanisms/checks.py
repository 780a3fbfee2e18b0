"""Statistical checks shared by the mechanism tests: each returns a number a test thresholds.

The same function judges the correct sampler and a planted bug, so a test that passes for the
sampler is also shown to be able to fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import stats

#: A p-value below this rejects the hypothesis "the samples follow the pmf".
P_REJECT = 1e-6
#: |z| above this rejects a second moment (6 standard errors: two-sided level ≈ 2e-9).
Z_REJECT = 6.0

Pmf = Callable[[np.ndarray], np.ndarray]


def integer_chi_square(samples: np.ndarray, pmf: Pmf, support: np.ndarray) -> float:
    """p-value of Pearson's χ² test of integer samples against ``pmf``.

    One bin per integer whose expected count is ≥ 5; the two end bins are cumulative ("≤ lo",
    "≥ hi"), so every bin has expected count ≥ 5. ``support`` must carry all but a negligible
    mass; expected counts are renormalised to the sample size.
    """
    samples = np.asarray(samples).reshape(-1)
    n = samples.size
    probs = pmf(support)
    ok = n * probs >= 5
    lo, hi = int(support[ok].min()), int(support[ok].max())
    inner = np.arange(lo + 1, hi)
    expected = np.concatenate(
        [[probs[support <= lo].sum()], pmf(inner), [probs[support >= hi].sum()]]
    )
    expected = n * expected / expected.sum()
    inside = samples[(samples > lo) & (samples < hi)] - (lo + 1)
    low, high = (samples <= lo).sum(), (samples >= hi).sum()
    observed = np.concatenate([[low], np.bincount(inside, minlength=inner.size), [high]])
    return float(stats.chisquare(observed, expected).pvalue)


def categorical_chi_square(indices: np.ndarray, probabilities: np.ndarray) -> float:
    """p-value of Pearson's χ² test of selected indices against selection probabilities.

    Categories with expected count below 5 are pooled, smallest first, until the pool has 5.
    """
    indices = np.asarray(indices)
    observed = np.bincount(indices, minlength=probabilities.size).astype(np.float64)
    expected = indices.size * probabilities / probabilities.sum()
    order = np.argsort(expected)
    pooled = np.cumsum(expected[order])
    cut = int(np.searchsorted(pooled, 5.0)) + 1 if expected[order[0]] < 5 else 0
    if cut:
        small, rest = order[:cut], order[cut:]
        observed = np.append(observed[rest], observed[small].sum())
        expected = np.append(expected[rest], expected[small].sum())
    assert observed.size >= 2, "need two categories with expected count ≥ 5"
    return float(stats.chisquare(observed, expected).pvalue)


def second_moment_z(noise: np.ndarray, pmf: Pmf, support: np.ndarray) -> float:
    """z-score of the empirical variance about the known mean 0, mean(Z²), against E Z².

    Its standard error is √((E Z⁴ − (E Z²)²)/n), from the 4th moment of the pmf.
    """
    noise = np.asarray(noise, dtype=np.float64).reshape(-1)
    k = support.astype(np.float64)
    p = pmf(support)
    m2 = float((k**2 * p).sum())
    m4 = float((k**4 * p).sum())
    se = math.sqrt((m4 - m2 * m2) / noise.size)
    return (float(np.mean(noise**2)) - m2) / se
