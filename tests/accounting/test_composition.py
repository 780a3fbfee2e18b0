"""Tensor products, lce, Thm 5 (parallel) and Thm 6 (maximum overlap) (docs/theory.md §3)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tessera.accounting import (
    CLTApproximation,
    Exactness,
    GaussianDP,
    Guarantee,
    Identity,
    PiecewiseLinear,
    TradeOff,
    check_axioms,
    clt_approximation,
    clt_mu,
    clt_overlap_composition,
    eps_delta,
    gaussian_dp,
    gdp_gamma,
    gdp_overlap_composition,
    homogeneous_overlap,
    laplace,
    lower_convex_envelope,
    overlap_composition,
    parallel_composition,
    pure_dp,
    pure_dp_overlap_composition,
    tensor,
    tradeoff_of_pair,
)
from tessera.accounting.composition import normalise_sets
from tessera.errors import TesseraError
from tests.oracles.accounting import hull_min, random_pair, tradeoff_brute

ALPHA = np.linspace(0.0, 1.0, 2001)


# -- tensor ------------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(mu=st.floats(0.0, 5.0), nu=st.floats(0.0, 5.0))
def test_gdp_tensor_identity(mu: float, nu: float) -> None:
    """G_μ ⊗ G_ν = G_√(μ²+ν²), checked against the definition T(N(0,I), N((μ,ν), I)):
    the optimal test thresholds the projection on (μ,ν), a 1-D problem with shift √(μ²+ν²)."""
    g = tensor([gaussian_dp(mu), gaussian_dp(nu)])
    assert isinstance(g, GaussianDP) and g.mu == pytest.approx(math.hypot(mu, nu))
    # Direct check at a few α by integrating over the first coordinate (Neyman–Pearson on R²).
    rng = np.random.default_rng(0)
    for a in rng.uniform(0.01, 0.99, 3):
        s = math.hypot(mu, nu)
        thr = stats.norm.isf(a)
        assert float(g(a)) == pytest.approx(stats.norm.cdf(thr - s), abs=1e-12)


def test_tensor_with_identity_and_associativity() -> None:
    f = eps_delta(0.7, 0.01)
    assert tensor([f, Identity()]) is f
    rng = np.random.default_rng(5)
    for _ in range(10):
        fs = [tradeoff_of_pair(*random_pair(rng, int(rng.integers(2, 4)))) for _ in range(3)]
        left = tensor([tensor([fs[0], fs[1]]), fs[2]])
        right = tensor([fs[0], tensor([fs[1], fs[2]])])
        swapped = tensor([fs[2], fs[0], fs[1]])
        assert np.allclose(left(ALPHA), right(ALPHA), atol=1e-12)
        assert np.allclose(left(ALPHA), swapped(ALPHA), atol=1e-12)
        # ⊗ only loses privacy: f ⊗ g ≤ f.
        assert np.all(left(ALPHA) <= fs[0](ALPHA) + 1e-12)


def test_exact_tensor_matches_brute_force_product() -> None:
    """f ⊗ g of finite pairs vs enumerating every test on the product space."""
    rng = np.random.default_rng(17)
    at = np.linspace(0, 1, 201)
    for _ in range(15):
        p1, q1 = random_pair(rng, int(rng.integers(2, 4)))
        p2, q2 = random_pair(rng, int(rng.integers(2, 4)))
        f = tensor([tradeoff_of_pair(p1, q1), tradeoff_of_pair(p2, q2)])
        assert isinstance(f, PiecewiseLinear) and f.exactness is Exactness.EXACT
        brute = tradeoff_brute(np.outer(p1, p2).ravel(), np.outer(q1, q2).ravel(), at)
        assert np.allclose(f(at), brute, atol=1e-12)


@pytest.mark.parametrize("k", [1, 2, 5, 8])
def test_pure_dp_k_fold_matches_binomial_formula(k: int) -> None:
    """f_{ε,0}^{⊗k}: the exact (optimal) composition, δ(ε') = Σ_j C(k,j) p^j (1−p)^{k−j}
    [1 − e^{ε' − (2j−k)ε}]₊ with p = e^ε/(1+e^ε) (Kairouz–Oh–Viswanath)."""
    eps = 0.6
    f = tensor([pure_dp(eps)] * k)
    p = math.exp(eps) / (1 + math.exp(eps))
    for e2 in [0.0, 0.5, 1.3, 2.0, k * eps]:
        ref = sum(
            math.comb(k, j)
            * p**j
            * (1 - p) ** (k - j)
            * max(0.0, 1 - math.exp(e2 - (2 * j - k) * eps))
            for j in range(k + 1)
        )
        assert float(f.delta(e2)) == pytest.approx(ref, abs=1e-12)
    assert f.epsilon(0.0) == pytest.approx(k * eps, rel=1e-9)


def test_pld_tensor_is_below_exact_tensor() -> None:
    """Numerical (PLD) tensor of f_{1,0}^{⊗6} ≤ the exact one, and close."""
    exact = tensor([pure_dp(1.0)] * 6)
    numeric = tensor([pure_dp(1.0)] * 6, max_exact_outcomes=1)
    assert numeric.exactness is Exactness.LOWER_BOUND
    diff = exact(ALPHA) - numeric(ALPHA)
    assert np.all(diff >= -1e-15)
    assert np.max(diff) < 1e-3


# -- lce ---------------------------------------------------------------------------------------


def test_lce_with_dominated_function() -> None:
    assert lower_convex_envelope([gaussian_dp(0.5), gaussian_dp(2.0)]) == gaussian_dp(2.0)
    assert lower_convex_envelope([pure_dp(1.0), pure_dp(0.2), Identity()]) == pure_dp(1.0)
    # A dominated PL function: the numeric lce equals it exactly.
    f1 = tensor([pure_dp(0.5)] * 3)  # ≤ f_{0.5,0}
    out = lower_convex_envelope([pure_dp(0.5).to_piecewise_linear(), f1])
    assert np.allclose(out(ALPHA), f1(ALPHA), atol=1e-14)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), k=st.integers(2, 4))
def test_lce_brute_force_on_random_pl(seed: int, k: int) -> None:
    """lce{f_i} = the lower convex hull of min_i f_i over *all* points (breakpoints plus a fine
    grid, brute force over pairs); also ≤ every f_i, convex, a trade-off function."""
    rng = np.random.default_rng(seed)
    fs = [tradeoff_of_pair(*random_pair(rng, int(rng.integers(2, 5)))) for _ in range(k)]
    out = lower_convex_envelope(fs)
    xs = np.unique(np.concatenate([np.linspace(0, 1, 161)] + [f.alphas for f in fs]))
    ys = np.min(np.stack([f(xs) for f in fs]), axis=0)
    at = np.linspace(0, 1, 101)
    assert np.allclose(out(at), hull_min(xs, ys, at), atol=1e-12)
    for f in fs:
        assert np.all(out(ALPHA) <= f(ALPHA) + 1e-14)
    assert check_axioms(out).ok


def test_lce_of_smooth_functions_is_safe() -> None:
    """lce{G_1, f_{0.3,0.05}} (they cross): numeric (PL lower bounds), below both."""
    g, f = gaussian_dp(1.0), eps_delta(0.3, 0.05)
    out = lower_convex_envelope([g, f])
    assert out.exactness is Exactness.LOWER_BOUND
    m = np.minimum(g(ALPHA), f(ALPHA))
    assert np.all(out(ALPHA) <= m + 1e-15)
    # Its min is not convex, so the lce is strictly below the min somewhere.
    assert np.max(m - out(ALPHA)) > 1e-3
    assert check_axioms(out).ok


# -- Thm 5 / Thm 6 -----------------------------------------------------------------------------


def test_parallel_composition_corollaries() -> None:
    assert parallel_composition(
        [gaussian_dp(0.3), gaussian_dp(1.1), gaussian_dp(0.7)]
    ) == GaussianDP(1.1)
    assert parallel_composition([pure_dp(0.3), pure_dp(2.0)]) == pure_dp(2.0)


def _brute_thm6(fs: list[TradeOff], parts: list[set[int]], domain: int) -> np.ndarray:
    """Thm 6 from its definition: every row x touches I(x) = {i : x ∈ 𝔻_i}; the guarantee is
    lce over all x of ⊗_{i∈I(x)} f_i (I_1 = subsets of some I(x); subsets only add larger
    functions)."""
    tensors = []
    for x in range(domain):
        ix = [i for i, d in enumerate(parts) if x in d]
        tensors.append(tensor([fs[i] for i in ix]) if ix else Identity())
    pls = [t.to_piecewise_linear() for t in tensors]
    xs = np.unique(np.concatenate([np.linspace(0, 1, 201)] + [pl.alphas for pl in pls]))
    ys = np.min(np.stack([pl(xs) for pl in pls]), axis=0)
    return hull_min(xs, ys, ALPHA[::20])


def _maximal_sets(parts: list[set[int]], domain: int) -> list[tuple[int, ...]]:
    sets = {tuple(i for i, d in enumerate(parts) if x in d) for x in range(domain)}
    sets.discard(())
    return [s for s in sets if not any(set(s) < set(t) for t in sets)]


def test_thm6_small_examples_brute_force() -> None:
    rng = np.random.default_rng(23)
    for _ in range(12):
        domain = int(rng.integers(3, 8))
        k = int(rng.integers(2, 5))
        parts = [set(np.flatnonzero(rng.random(domain) < 0.5).tolist()) or {0} for _ in range(k)]
        fs: list[TradeOff] = [
            rng.choice([pure_dp(float(rng.uniform(0.2, 1.5))), eps_delta(0.5, 0.05)])
            for _ in range(k)
        ]
        out = overlap_composition(fs, _maximal_sets(parts, domain))
        assert np.allclose(out(ALPHA[::20]), _brute_thm6(fs, parts, domain), atol=1e-11)


def test_thm6_gdp_exact_gamma_and_pure_dp_bound() -> None:
    sets = [(0, 1, 2), (2, 3), (4,)]
    mus = [0.3, 0.4, 1.2, 0.5, 2.0]
    assert gdp_gamma(mus, sets) == pytest.approx(
        max(math.sqrt(0.09 + 0.16 + 1.44), math.sqrt(1.44 + 0.25), 2.0)
    )
    expected = gdp_overlap_composition(mus, sets)
    assert overlap_composition([gaussian_dp(m) for m in mus], sets) == expected
    eps = [0.1, 0.2, 0.3, 0.4, 0.5]
    assert pure_dp_overlap_composition(eps, sets) == pytest.approx(0.7)
    # The f-DP Thm 6 for pure DP is at least as tight as ε' (its ε at δ = 0 equals ε').
    f = overlap_composition([pure_dp(e) for e in eps], sets)
    assert f.epsilon(0.0) == pytest.approx(0.7, rel=1e-9)
    assert np.all(f(ALPHA) >= pure_dp(0.7)(ALPHA) - 1e-12)


def test_thm6_homogeneous_laplace_equals_gamma_fold() -> None:
    lap = laplace(2.0)
    sets = [(0, 1, 2), (1, 2, 3), (3, 4)]
    a = overlap_composition([lap] * 5, sets)
    b = homogeneous_overlap(lap, 3)
    assert a.epsilon(1e-6) == pytest.approx(b.epsilon(1e-6), rel=1e-12)
    assert homogeneous_overlap(lap, 2.2).epsilon(1e-6) == pytest.approx(b.epsilon(1e-6))


def test_superset_family_is_safe_and_missing_index_is_added() -> None:
    assert (3,) in normalise_sets(4, [(0, 1), (1, 2)])
    assert normalise_sets(3, [(0, 1), (0,), (1, 0)]) == [(0, 1), (2,)]
    fs = [pure_dp(0.5)] * 4
    tight = overlap_composition(fs, [(0, 1), (2, 3)])
    loose = overlap_composition(fs, [(0, 1, 2), (3,)])
    assert np.all(loose(ALPHA) <= tight(ALPHA) + 1e-14)
    with pytest.raises(TesseraError):
        normalise_sets(2, [(0, 5)])


@settings(max_examples=300, deadline=None)
@given(k=st.integers(1, 7), data=st.data())
def test_normalise_sets_keeps_exactly_the_maximal_sets(k: int, data: st.DataObject) -> None:
    """Against brute force: the distinct non-empty sets plus a singleton for every index no set
    names, minus every set strictly inside another, largest first."""
    sets = data.draw(st.lists(st.lists(st.integers(0, k - 1), max_size=k), max_size=9))
    family = {tuple(sorted(set(s))) for s in sets if s}
    family |= {(i,) for i in range(k) if not any(i in s for s in sets)}
    maximal = {t for t in family if not any(set(t) < set(u) for u in family)}
    kept = normalise_sets(k, sets)
    assert set(kept) == maximal and len(kept) == len(maximal)
    assert [len(t) for t in kept] == sorted((len(t) for t in kept), reverse=True)


def test_clt_is_labelled_approximation_not_a_guarantee() -> None:
    c = clt_approximation([0.1] * 100)
    assert isinstance(c, CLTApproximation) and not isinstance(c, TradeOff)
    assert c.is_guarantee is False and "NOT a privacy guarantee" in c.describe()
    assert c.exactness is Exactness.APPROXIMATION
    # μ = 2K/s; for small ε close to √Σε² = 1.
    assert clt_mu([0.1] * 100) == pytest.approx(2 * 100 * 0.1 * math.tanh(0.05) / 1.0)
    assert 0.99 < c.mu < 1.0
    with pytest.raises(TesseraError):
        Guarantee.fdp(c)  # type: ignore[arg-type]
    # The approximation is close to the exact composition here (sanity, not a guarantee).
    exact = homogeneous_overlap(pure_dp(0.1), 100)
    assert np.max(np.abs(exact(ALPHA) - c(ALPHA))) < 0.02
    cm = clt_overlap_composition([0.1, 0.2, 0.3], [(0, 1), (2,)])
    assert cm.mu == pytest.approx(max(clt_mu([0.1, 0.2]), clt_mu([0.3])))


def test_gdp_profile_of_thm6_is_exact_union_bound_counterexample() -> None:
    """Sequential composition of all sets would be G_{√Σμ²}; Thm 6 gives strictly better."""
    mus = [1.0] * 6
    sets = [(0, 1), (2, 3), (4, 5)]
    assert gdp_gamma(mus, sets) == pytest.approx(math.sqrt(2))
    assert tensor([gaussian_dp(m) for m in mus]).mu == pytest.approx(math.sqrt(6))  # type: ignore[attr-defined]


def test_all_pairs_structure_from_sets() -> None:
    """Itertools-built I_2 on a 3-attribute example: triangle without joint overlap (docs/theory.md
    §2):
    pairwise overlapping set predicates whose triple does not overlap give I_2 = the 3 pairs."""
    sets = list(itertools.combinations(range(3), 2))
    f = overlap_composition([pure_dp(1.0)] * 3, sets)
    assert f.epsilon(0.0) == pytest.approx(2.0, rel=1e-9)
