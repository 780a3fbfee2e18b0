"""The Clopper–Pearson ε lower bound (tessera.audit.estimators) against exact binomial tails."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tessera.audit.estimators import (
    EventCounts,
    best_lower_bound,
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
    expected_shortfall,
    point_estimate,
    trials_for,
)
from tessera.errors import TesseraError


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 5000), frac=st.floats(0, 1), level=st.sampled_from([0.9, 0.995]))
def test_clopper_pearson_bounds_are_the_exact_binomial_tail_inversions(
    n: int, frac: float, level: float
) -> None:
    """p_hi is the p with P[Bin(n, p) ≤ k] = 1 − level; p_lo the p with P[Bin(n, p) ≥ k] =
    1 − level (the definition of the exact one-sided bounds)."""
    k = round(frac * n)
    lo, hi = clopper_pearson_lower(k, n, level), clopper_pearson_upper(k, n, level)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    if k < n:
        assert stats.binom.cdf(k, n, hi) == pytest.approx(1 - level, rel=1e-6, abs=1e-12)
    if k > 0:
        assert stats.binom.sf(k - 1, n, lo) == pytest.approx(1 - level, rel=1e-6, abs=1e-12)


def test_closed_forms_at_the_ends() -> None:
    """k = 0: p_hi = 1 − (1 − level)^{1/n}; k = n: p_lo = (1 − level)^{1/n}."""
    n, level = 1000, 0.995
    assert clopper_pearson_upper(0, n, level) == pytest.approx(1 - (1 - level) ** (1 / n))
    assert clopper_pearson_lower(n, n, level) == pytest.approx((1 - level) ** (1 / n))
    assert clopper_pearson_lower(0, n, level) == 0.0
    assert clopper_pearson_upper(n, n, level) == 1.0


def test_lower_bound_formula_and_delta() -> None:
    c = EventCounts(7310, 10_000, 2690, 10_000)
    level = 1 - 0.01 / 2
    expected = math.log(clopper_pearson_lower(7310, 10_000, level)
                        / clopper_pearson_upper(2690, 10_000, level))
    assert epsilon_lower_bound(c) == pytest.approx(expected)
    assert epsilon_lower_bound(c) < point_estimate(c) == pytest.approx(math.log(7310 / 2690))
    # δ is subtracted from the likelier side; a δ above p₁ leaves no evidence at all
    assert epsilon_lower_bound(c, delta=0.1) < epsilon_lower_bound(c)
    assert epsilon_lower_bound(c, delta=0.9) == 0.0
    # no evidence either way when the event is as likely on both
    assert epsilon_lower_bound(EventCounts(500, 1000, 500, 1000)) == 0.0


def test_best_lower_bound_is_bonferroni_over_events_and_directions() -> None:
    hits_1, hits_2 = [5000, 2690], [5000, 7310]
    lb, k, swapped = best_lower_bound(hits_1, 10_000, hits_2, 10_000)
    assert (k, swapped) == (1, True)
    each = 1 - 0.01 / 4  # 2 events × 2 directions
    assert lb == pytest.approx(epsilon_lower_bound(EventCounts(7310, 10_000, 2690, 10_000),
                                                   confidence=each))
    assert lb < epsilon_lower_bound(EventCounts(7310, 10_000, 2690, 10_000))


def test_coverage_of_the_bound_on_a_known_pair() -> None:
    """Binomial draws with true log-ratio exactly 1: the 90%-confidence bound exceeds 1 in at
    most ~10% of 2,000 repetitions (seed 7; the binomial 99.9% upper limit of the count is 0.10
    + 3.1·√(0.09/2000) ≈ 0.121)."""
    rng = np.random.default_rng(7)  # not-privacy-noise: simulated event counts
    n, p2 = 2000, 0.2
    p1 = p2 * math.e
    h1, h2 = rng.binomial(n, p1, 2000), rng.binomial(n, p2, 2000)
    over = sum(epsilon_lower_bound(EventCounts(int(a), n, int(b), n), confidence=0.9) > 1.0
               for a, b in zip(h1, h2))
    assert over / 2000 <= 0.121


def test_trial_counts_invert_the_shortfall() -> None:
    n = trials_for(0.73, 0.27, 0.02, tests=16)
    assert expected_shortfall(0.73, 0.27, n, tests=16) <= 0.02
    assert expected_shortfall(0.73, 0.27, n - 1, tests=16) > 0.02 * (1 - 1e-3)


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(TesseraError, match="hits"):
        EventCounts(11, 10, 0, 10)
    with pytest.raises(TesseraError, match="confidence"):
        epsilon_lower_bound(EventCounts(1, 10, 1, 10), confidence=1.0)
    with pytest.raises(TesseraError, match="same non-empty"):
        best_lower_bound([], 10, [], 10)
