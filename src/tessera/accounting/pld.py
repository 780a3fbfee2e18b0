"""Numerical trade-off functions from privacy loss distributions (docs/theory.md §3, §7).

Uses Google's ``dp-accounting`` PLDs with *pessimistic* discretisation: every δ(ε) it returns is
an upper bound of the mechanism's true hockey-stick divergence (both neighbouring directions,
add and remove, are kept and the larger δ is taken). From such a profile

    f_low(α) = max(0, max_k f_{ε_k, δ̂(ε_k)}(α))      over a finite grid ε_0 < … < ε_K

is a safe lower bound of the mechanism's trade-off function: the mechanism is (ε_k, δ̂(ε_k))-DP
for every k, hence f_{ε_k,δ̂(ε_k)}-DP, hence f_low-DP. Refining the grid only raises f_low.

Composition (the tensor product ⊗) of numerical trade-off functions is the convolution of
their PLDs, done by dp-accounting (FFT, pessimistic tail truncation), and then rebuilt as above.

Mechanism parameters (sensitivity Δ, integer for the discrete ones):

* Laplace: noise Lap(b); ε = Δ/b pure DP, trade-off exactly known (tested against it).
* discrete Laplace: P[Z = z] ∝ exp(−|z|/b) (OpenDP's ``scale`` b). Exactly f_{Δ/b,0} for Δ = 1.
* Gaussian: N(0, σ²); exactly G_{Δ/σ} (here numerically, for composition with the others).
* discrete Gaussian: P[Z = z] ∝ exp(−z²/(2σ²)) (OpenDP's ``scale`` σ).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pldlib
from dp_accounting.pld.common import DifferentialPrivacyParameters

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
    check_delta,
    round_up,
)
from tessera.errors import TesseraError

PLD = pldlib.PrivacyLossDistribution

#: Default width of the privacy-loss grid (dp-accounting's default).
DEFAULT_DISCRETIZATION: float = 1e-4

#: Mass that each composition may truncate from the tails (moved to +∞ loss: pessimistic).
TAIL_MASS_TRUNCATION: float = 1e-15


@dataclass(frozen=True, eq=False)
class PLDTradeOff(TradeOff):
    """A trade-off function known through a pessimistic PLD: a safe lower bound.

    ``key`` identifies the mechanism (same key ⇒ same PLD), so that k copies are composed by
    one self-convolution; ``name`` is for display.
    """

    pld: PLD
    name: str
    key: Hashable
    discretization: float = DEFAULT_DISCRETIZATION
    grid: int = DEFAULT_GRID
    exactness: Exactness = field(default=Exactness.LOWER_BOUND, init=False)

    def delta(self, epsilon: ArrayLike) -> FloatArray:
        """dp-accounting's pessimistic δ̂(ε) (an upper bound of the true δ(ε))."""
        e = np.asarray(epsilon, dtype=np.float64)
        flat = np.atleast_1d(e).ravel()
        order = np.argsort(flat, kind="stable")
        out = np.empty(flat.size)
        out[order] = np.asarray(self.pld.get_delta_for_epsilon(flat[order]), dtype=np.float64)
        out = np.clip(out, 0.0, 1.0)
        return out.reshape(e.shape) if e.ndim else np.asarray(out[0])

    def epsilon(self, delta: float) -> float:
        """dp-accounting's ε(δ) for the pessimistic PLD, nudged up by a relative 1e-12."""
        check_delta(delta)
        return round_up(float(self.pld.get_epsilon_for_delta(delta)))

    @cached_property
    def lower(self) -> PiecewiseLinear:
        """max_k f_{ε_k, δ̂(ε_k)} over ``grid`` points ε_k ∈ [0, ε_top]; beyond ε_top the
        profile is flat at δ̂(∞) (the mass at infinite loss) up to 1e-14."""
        delta_inf = float(self.delta(np.array([np.inf]))[0])
        eps_top = float(self.pld.get_epsilon_for_delta(min(delta_inf + 1e-14, 0.999)))
        if not math.isfinite(eps_top):
            eps_top = 50.0
        eps = np.linspace(0.0, max(eps_top, 1e-9), self.grid)
        return PiecewiseLinear.from_profile(eps, self.delta(eps), Exactness.LOWER_BOUND)

    def __call__(self, alpha: ArrayLike) -> FloatArray:
        return self.lower(alpha)

    def to_piecewise_linear(self, grid: int = DEFAULT_GRID) -> PiecewiseLinear:
        return self.lower

    def describe(self) -> str:
        return self.name


# ---------------------------------------------------------------------------------------------
# Mechanisms
# ---------------------------------------------------------------------------------------------


def _positive(name: str, value: float) -> float:
    v = float(value)
    if not (math.isfinite(v) and v > 0.0):
        raise TesseraError(f"{name} must be finite and > 0, got {value!r}")
    return v


def laplace(
    scale: float, sensitivity: float = 1.0, discretization: float = DEFAULT_DISCRETIZATION
) -> PLDTradeOff:
    """Laplace mechanism q(D) + Lap(scale), L1 sensitivity Δ (ε = Δ/scale)."""
    b = _positive("Laplace scale", scale)
    s = _positive("sensitivity", sensitivity)
    pld = pldlib.from_laplace_mechanism(
        b, sensitivity=s, pessimistic_estimate=True, value_discretization_interval=discretization
    )
    return PLDTradeOff(
        pld, f"Laplace(b={b:.6g}, Δ={s:g})", ("laplace", b, s, discretization), discretization
    )


def discrete_laplace(
    scale: float, sensitivity: int = 1, discretization: float = DEFAULT_DISCRETIZATION
) -> PLDTradeOff:
    """Discrete Laplace, P[z] ∝ exp(−|z|/scale), integer sensitivity Δ (ε = Δ/scale)."""
    b = _positive("discrete Laplace scale", scale)
    s = _integer_sensitivity(sensitivity)
    pld = pldlib.from_discrete_laplace_mechanism(
        1.0 / b,
        sensitivity=s,
        pessimistic_estimate=True,
        value_discretization_interval=discretization,
    )
    return PLDTradeOff(
        pld,
        f"DiscreteLaplace(b={b:.6g}, Δ={s})",
        ("dlaplace", b, s, discretization),
        discretization,
    )


def gaussian(
    sigma: float, sensitivity: float = 1.0, discretization: float = DEFAULT_DISCRETIZATION
) -> PLDTradeOff:
    """Gaussian mechanism q(D) + N(0, σ²), L2 sensitivity Δ (exactly (Δ/σ)-GDP)."""
    sg = _positive("Gaussian σ", sigma)
    s = _positive("sensitivity", sensitivity)
    pld = pldlib.from_gaussian_mechanism(
        sg, sensitivity=s, pessimistic_estimate=True, value_discretization_interval=discretization
    )
    return PLDTradeOff(
        pld, f"Gaussian(σ={sg:.6g}, Δ={s:g})", ("gaussian", sg, s, discretization), discretization
    )


def discrete_gaussian(
    sigma: float, sensitivity: int = 1, discretization: float = DEFAULT_DISCRETIZATION
) -> PLDTradeOff:
    """Discrete Gaussian, P[z] ∝ exp(−z²/(2σ²)), integer sensitivity Δ."""
    sg = _positive("discrete Gaussian σ", sigma)
    s = _integer_sensitivity(sensitivity)
    pld = pldlib.from_discrete_gaussian_mechanism(
        sg, sensitivity=s, pessimistic_estimate=True, value_discretization_interval=discretization
    )
    return PLDTradeOff(
        pld,
        f"DiscreteGaussian(σ={sg:.6g}, Δ={s})",
        ("dgaussian", sg, s, discretization),
        discretization,
    )


def _integer_sensitivity(sensitivity: int) -> int:
    if int(sensitivity) != sensitivity or sensitivity < 1:
        raise TesseraError(
            f"a discrete mechanism needs an integer sensitivity ≥ 1, got {sensitivity!r}"
        )
    return int(sensitivity)


MECHANISMS = {
    "laplace": laplace,
    "discrete_laplace": discrete_laplace,
    "gaussian": gaussian,
    "discrete_gaussian": discrete_gaussian,
}


# ---------------------------------------------------------------------------------------------
# Conversion and composition
# ---------------------------------------------------------------------------------------------


def to_pld(f: TradeOff, discretization: float = DEFAULT_DISCRETIZATION) -> PLDTradeOff:
    """A pessimistic PLD whose trade-off function is ≤ f (for composing f numerically).

    * G_μ: the Gaussian mechanism with σ = 1/μ, Δ = 1 (exactly G_μ before discretisation).
    * f_{ε,δ}: dp-accounting's PLD of an (ε,δ)-DP mechanism (losses ±ε, mass δ at +∞), whose
      profile is exactly that of f_{ε,δ}.
    * piecewise linear f: the finite pair (P, Q) with T(P, Q) = f (see
      :meth:`PiecewiseLinear.finite_pair`), both directions kept (max of the two δ's).
    """
    if isinstance(f, PLDTradeOff):
        if f.discretization != discretization:
            raise TesseraError(
                "PLDs with different discretisations cannot be composed",
                hint="build all mechanisms with the same `discretization`",
            )
        return f
    if isinstance(f, Identity):
        pld = pldlib.identity(discretization)
        return PLDTradeOff(pld, "Id", ("identity", discretization), discretization)
    if isinstance(f, GaussianDP):
        if f.mu == 0.0:
            return to_pld(Identity(), discretization)
        pld = pldlib.from_gaussian_mechanism(
            1.0 / f.mu,
            sensitivity=1.0,
            pessimistic_estimate=True,
            value_discretization_interval=discretization,
        )
        return PLDTradeOff(pld, f.describe(), ("gdp", f.mu, discretization), discretization)
    if isinstance(f, EpsDelta):
        pld = pldlib.from_privacy_parameters(
            DifferentialPrivacyParameters(f.eps, f.delta_),
            value_discretization_interval=discretization,
        )
        return PLDTradeOff(
            pld, f.describe(), ("epsdelta", f.eps, f.delta_, discretization), discretization
        )
    pl = f.to_piecewise_linear()
    p, q = pl.finite_pair()
    with np.errstate(divide="ignore"):
        logp = {i: float(v) for i, v in enumerate(np.log(p))}
        logq = {i: float(v) for i, v in enumerate(np.log(q))}
    # upper = Q, lower = P: δ_f(ε) = H_{e^ε}(Q ‖ P); symmetric=False adds H_{e^ε}(P ‖ Q).
    pld = pldlib.from_two_probability_mass_functions(
        logp,
        logq,
        pessimistic_estimate=True,
        value_discretization_interval=discretization,
        symmetric=False,
    )
    return PLDTradeOff(
        pld,
        f.describe(),
        ("pl", pl.alphas.tobytes(), pl.betas.tobytes(), discretization),
        discretization,
    )


def compose_plds(
    fs: Sequence[TradeOff],
    discretization: float = DEFAULT_DISCRETIZATION,
    grid: int = DEFAULT_GRID,
) -> PLDTradeOff:
    """⊗_i f_i through PLD convolution: a safe lower bound of the tensor product.

    Copies of the same mechanism (equal ``key``) are composed by one self-convolution."""
    if not fs:
        return to_pld(Identity(), discretization)
    plds = [to_pld(f, discretization) for f in fs]
    counts: dict[Hashable, list[PLDTradeOff | int]] = {}
    for p in plds:
        entry = counts.setdefault(p.key, [p, 0])
        entry[1] = int(entry[1]) + 1  # type: ignore[call-overload]
    result: PLD | None = None
    names: list[str] = []
    for proto, k in counts.values():
        assert isinstance(proto, PLDTradeOff) and isinstance(k, int)
        part = proto.pld if k == 1 else proto.pld.self_compose(k, TAIL_MASS_TRUNCATION)
        names.append(proto.name if k == 1 else f"{proto.name}^⊗{k}")
        result = part if result is None else result.compose(part, TAIL_MASS_TRUNCATION)
    assert result is not None
    key = ("composed", tuple(sorted(((k, int(v[1])) for k, v in counts.items()), key=repr)))
    return PLDTradeOff(result, " ⊗ ".join(names), key, discretization, grid)
