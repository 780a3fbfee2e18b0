"""Sequential, parallel and maximum-overlap composition of f-DP mechanisms (docs/theory.md §3).

* Tensor product f ⊗ g = T(P × Q, P' × Q') (sequential composition):
  - G_{μ_1} ⊗ … ⊗ G_{μ_n} = G_{√Σμ_i²}                               exact, closed form;
  - piecewise-linear / f_{ε,δ} inputs with few outcomes: exact, by the product of the finite
    pairs (P_i, Q_i) with T(P_i, Q_i) = f_i and Neyman–Pearson on the product;
  - otherwise: convolution of pessimistic PLDs (dp-accounting)          safe lower bound.
* Parallel composition (Smith et al., Thm 5): disjoint parts ⇒ lce{f_1, …, f_k}.
* Maximum overlap (Smith et al., Thm 6): arbitrary parts 𝔻_i ⇒ f_γ = lce{⊗_{i∈I} f_i : I ∈ I_2},
  I_2 = the maximal sets of mechanisms whose parts share a row. I_2 comes from the overlap
  solvers (``tessera.overlap``); any *superset family* of I_2 (each true maximal set contained
  in some given set) is also safe, because ⊗ is monotone (adding factors only lowers f).
  - GDP: f_γ = G_γ, γ = max_{I∈I_2} √Σ_{i∈I} μ_i²                        exact;
  - pure DP: ε' = max_{I∈I_2} Σ_{i∈I} ε_i                                  valid bound;
  - the CLT (Dong–Roth–Su) G_{2K/s} — **an approximation, not a guarantee**: returned as a
    :class:`CLTApproximation`, which is deliberately *not* a :class:`TradeOff`, so it cannot be
    passed where a guarantee is expected.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from tessera.accounting.envelope import lower_convex_envelope
from tessera.accounting.pld import DEFAULT_DISCRETIZATION, PLDTradeOff, compose_plds
from tessera.accounting.tradeoff import (
    DEFAULT_GRID,
    ArrayLike,
    EpsDelta,
    Exactness,
    FloatArray,
    GaussianDP,
    Identity,
    PiecewiseLinear,
    TradeOff,
    tradeoff_of_pair,
)
from tessera.errors import ResourceError, TesseraError

#: Largest product-space size for the exact tensor of piecewise-linear functions.
MAX_EXACT_OUTCOMES: int = 200_000


def tensor(
    fs: Sequence[TradeOff],
    discretization: float = DEFAULT_DISCRETIZATION,
    grid: int = DEFAULT_GRID,
    max_exact_outcomes: int = MAX_EXACT_OUTCOMES,
) -> TradeOff:
    """⊗_i f_i (sequential composition): exact where possible, else a safe lower bound."""
    active = [f for f in fs if not isinstance(f, Identity)]  # f ⊗ Id = f
    if not active:
        return Identity()
    if len(active) == 1:
        return active[0]
    if all(isinstance(f, GaussianDP) for f in active):
        return GaussianDP(math.sqrt(sum(f.mu**2 for f in active)))  # type: ignore[attr-defined]
    if all(isinstance(f, PiecewiseLinear | EpsDelta) for f in active):
        pls = [f.to_piecewise_linear() for f in active]
        size = math.prod(pl.alphas.size for pl in pls)
        if size <= max_exact_outcomes:
            return _tensor_finite_pairs(pls)
    return compose_plds(active, discretization, grid)


def _tensor_finite_pairs(pls: Sequence[PiecewiseLinear]) -> PiecewiseLinear:
    """T(∏P_i, ∏Q_i) with T(P_i, Q_i) = f_i: exact (up to floating-point rounding)."""
    p = np.ones(1)
    q = np.ones(1)
    exactness = Exactness.EXACT
    for pl in pls:
        pi, qi = pl.finite_pair()
        p = np.outer(p, pi).ravel()
        q = np.outer(q, qi).ravel()
        exactness = exactness.combine(pl.exactness)
    return tradeoff_of_pair(p, q, exactness)


def parallel_composition(fs: Sequence[TradeOff], grid: int = DEFAULT_GRID) -> TradeOff:
    """Smith et al., Thm 5: M_i f_i-DP on *disjoint* parts 𝔻_i of the domain ⇒ the joint release
    (M_1(D ∩ 𝔻_1), …, M_k(D ∩ 𝔻_k)) is lce{f_1, …, f_k}-DP."""
    return lower_convex_envelope(list(fs), grid)


def normalise_sets(k: int, maximal_sets: Iterable[Iterable[int]]) -> list[tuple[int, ...]]:
    """Validated, de-duplicated sets of mechanism indices with subsets removed.

    An index that appears in no set is added as a singleton: a mechanism whose part was
    forgotten must still be accounted for (adding a set can only lower the lce: safe)."""
    sets = set()
    for s in maximal_sets:
        t = tuple(sorted(set(int(i) for i in s)))
        if any(i < 0 or i >= k for i in t):
            raise TesseraError(f"overlapping set {t} names a mechanism outside 0..{k - 1}")
        if t:
            sets.add(t)
    seen = {i for t in sets for i in t}
    sets.update((i,) for i in range(k) if i not in seen)
    ordered = sorted(sets, key=len, reverse=True)
    kept: list[tuple[int, ...]] = []
    containing: dict[int, list[frozenset[int]]] = {}  # index -> the kept sets holding it
    for t in ordered:
        st = frozenset(t)
        # a superset of t holds each of its indices: look only among those holding the rarest
        rarest = min(t, key=lambda i: len(containing.get(i, ())))
        if not any(st < u for u in containing.get(rarest, ())):
            kept.append(t)
            for i in t:
                containing.setdefault(i, []).append(st)
    return kept


def _key(f: TradeOff) -> Hashable:
    """Identity of a trade-off function for caching (equal key ⇒ equal function)."""
    if isinstance(f, PLDTradeOff):
        return ("pld", f.key)
    if isinstance(f, GaussianDP | EpsDelta | Identity):
        return f
    if isinstance(f, PiecewiseLinear):
        return ("pl", f.alphas.tobytes(), f.betas.tobytes(), f.exactness)
    return ("obj", id(f))


def overlap_composition(
    fs: Sequence[TradeOff],
    maximal_sets: Iterable[Iterable[int]],
    discretization: float = DEFAULT_DISCRETIZATION,
    grid: int = DEFAULT_GRID,
) -> TradeOff:
    """Smith et al., Thm 6: f_γ = lce{⊗_{i∈I} f_i : I ∈ I_2}.

    ``maximal_sets``: the maximal overlapping sets I_2 (indices into ``fs``), or any family in
    which every maximal overlapping set is contained in some member (safe, possibly looser).
    Sets with the same multiset of mechanisms are composed once; a multiset contained in
    another one is skipped (its tensor dominates)."""
    fs = list(fs)
    sets = normalise_sets(len(fs), maximal_sets)
    if all(isinstance(f, GaussianDP) for f in fs):
        return gdp_overlap_composition([f.mu for f in fs], sets)  # type: ignore[attr-defined]
    keys = [_key(f) for f in fs]
    signatures: dict[tuple[Hashable, ...], tuple[int, ...]] = {}
    for t in sets:
        sig = tuple(sorted((keys[i] for i in t), key=repr))
        signatures.setdefault(sig, t)
    # Drop multisets contained in another one (⊗ over more factors is smaller).
    counted = {sig: _multiset(sig) for sig in signatures}
    kept = [
        t
        for sig, t in signatures.items()
        if not any(o != sig and _submultiset(counted[sig], counted[o]) for o in counted)
    ]
    tensors = [tensor([fs[i] for i in t], discretization, grid) for t in kept]
    return lower_convex_envelope(tensors, grid)


def _multiset(sig: tuple[Hashable, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for k in sig:
        out[repr(k)] = out.get(repr(k), 0) + 1
    return out


def _submultiset(a: dict[str, int], b: dict[str, int]) -> bool:
    return all(b.get(k, 0) >= v for k, v in a.items())


# ---------------------------------------------------------------------------------------------
# Closed forms from the overlap structure
# ---------------------------------------------------------------------------------------------


def gdp_gamma(mus: Sequence[float], maximal_sets: Iterable[Iterable[int]]) -> float:
    """γ = max_{I∈I_2} √Σ_{i∈I} μ_i² (exact for Gaussian mechanisms under Thm 6)."""
    mu = np.asarray(mus, dtype=np.float64)
    sets = normalise_sets(mu.size, maximal_sets)
    return max(math.sqrt(float(np.sum(mu[list(t)] ** 2))) for t in sets)


def gdp_overlap_composition(
    mus: Sequence[float], maximal_sets: Iterable[Iterable[int]]
) -> GaussianDP:
    """μ_i-GDP mechanisms under Thm 6 ⇒ G_γ with γ from :func:`gdp_gamma`."""
    return GaussianDP(gdp_gamma(mus, maximal_sets))


def pure_dp_overlap_composition(
    epsilons: Sequence[float], maximal_sets: Iterable[Iterable[int]]
) -> float:
    """ε_i-DP mechanisms under Thm 6 ⇒ ε'-DP with ε' = max_{I∈I_2} Σ_{i∈I} ε_i (valid)."""
    eps = np.asarray(epsilons, dtype=np.float64)
    sets = normalise_sets(eps.size, maximal_sets)
    return max(float(math.fsum(eps[list(t)])) for t in sets)


def gdp_from_overlap(mu: float, gamma: float) -> GaussianDP:
    """Homogeneous μ-GDP queries whose maximum overlap is at most γ (docs/theory.md §3): G_{μ√γ}."""
    return GaussianDP(mu * math.sqrt(_gamma(gamma)))


def pure_dp_from_overlap(eps: float, gamma: float) -> float:
    """Homogeneous ε-DP queries whose maximum overlap is at most γ: ε·γ-DP."""
    return eps * _gamma(gamma)


#: Most copies composed by privacy-loss distributions: the PLD's support, hence its memory and
#: time, grows with the copies (Laplace, per-copy ε = 0.1: 10⁴ copies 0.4 GiB and 44 s, 10⁵
#: copies 3.4 GiB and minutes; docs/benchmarks.md "Resource guards"). Same limit as the
#: release plan's PLD profile.
PLD_MAX_COPIES = 10_000


def require_pld_copies(copies: int) -> None:
    """Refuse a PLD composition of more than :data:`PLD_MAX_COPIES` copies, before it starts."""
    if copies > PLD_MAX_COPIES:
        raise ResourceError(
            f"composing {copies:,} copies by privacy-loss distributions: above the limit of "
            f"{PLD_MAX_COPIES:,} copies (memory grows with the copies)",
            hint="Gaussian noise composes in closed form (GDP, zCDP); pure ε·k always holds "
            "for Laplace noise")


def homogeneous_overlap(
    f: TradeOff, gamma: float, discretization: float = DEFAULT_DISCRETIZATION
) -> TradeOff:
    """t copies of an f-DP mechanism whose maximum overlap is at most γ: f^{⊗⌈γ⌉}
    (every maximal overlapping set has at most γ members, and ⊗ is monotone). Gaussian
    trade-offs compose in closed form, G_μ^{⊗k} = G_{μ√k}; a PLD composition of more than
    :data:`PLD_MAX_COPIES` copies is refused (:func:`require_pld_copies`)."""
    g = math.ceil(_gamma(gamma))
    if g > PLD_MAX_COPIES:  # (no list of g copies either)
        if isinstance(f, GaussianDP):
            return GaussianDP(f.mu * math.sqrt(g))
        if isinstance(f, Identity):
            return f
        require_pld_copies(g)
    return tensor([f] * g, discretization)


def _gamma(gamma: float) -> float:
    if not (math.isfinite(gamma) and gamma >= 1.0):
        raise TesseraError(f"a maximum overlap γ is ≥ 1, got {gamma!r}")
    return float(gamma)


# ---------------------------------------------------------------------------------------------
# CLT: an approximation, never a guarantee
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CLTApproximation:
    """Dong–Roth–Su central limit approximation ⊗_i f_{ε_i,0} ≈ G_μ, μ = 2K/s with
    K = Σ ε_i (e^{ε_i} − 1)/(e^{ε_i} + 1), s = √Σ ε_i².

    **Not a privacy guarantee** (the true composition can be less private for any finite n).
    It is not a :class:`TradeOff` on purpose; use it for plots and comparisons only.
    """

    mu: float
    epsilons: tuple[float, ...]
    label: str = field(
        default="CLT approximation (Dong–Roth–Su) — NOT a privacy guarantee", init=False
    )
    is_guarantee: ClassVar[bool] = False
    exactness: ClassVar[Exactness] = Exactness.APPROXIMATION

    def __call__(self, alpha: ArrayLike) -> FloatArray:
        return GaussianDP(self.mu)(alpha)

    def approximate_epsilon(self, delta: float) -> float:
        """ε at δ of the approximating G_μ (an approximation, not a guarantee)."""
        return GaussianDP(self.mu).epsilon(delta)

    def describe(self) -> str:
        return f"≈G_{self.mu:.6g} ({self.label})"


def clt_mu(epsilons: Sequence[float]) -> float:
    """μ = 2K/s of the CLT approximation (docs/theory.md §3)."""
    e = np.asarray(epsilons, dtype=np.float64)
    if e.size == 0 or np.any(e < 0) or not np.all(np.isfinite(e)):
        raise TesseraError("the CLT approximation needs a non-empty list of finite ε ≥ 0")
    s = math.sqrt(float(np.sum(e**2)))
    if s == 0.0:
        return 0.0
    k = float(np.sum(e * np.tanh(e / 2.0)))  # (e^ε − 1)/(e^ε + 1) = tanh(ε/2)
    return 2.0 * k / s


def clt_approximation(epsilons: Sequence[float]) -> CLTApproximation:
    """CLT approximation of the sequential composition of ε_i-DP mechanisms."""
    return CLTApproximation(clt_mu(epsilons), tuple(float(x) for x in epsilons))


def clt_overlap_composition(
    epsilons: Sequence[float], maximal_sets: Iterable[Iterable[int]]
) -> CLTApproximation:
    """CLT approximation of Thm 6 for ε_i-DP mechanisms: G_{max_I μ_I} (lce of a totally
    ordered G family is the smallest one). An approximation, not a guarantee."""
    eps = np.asarray(epsilons, dtype=np.float64)
    sets = normalise_sets(eps.size, maximal_sets)
    best = max(sets, key=lambda t: clt_mu(eps[list(t)]))
    return CLTApproximation(clt_mu(eps[list(best)]), tuple(float(x) for x in eps[list(best)]))
