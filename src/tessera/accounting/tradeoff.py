"""Trade-off functions (docs/theory.md §3, Dong–Roth–Su f-DP).

A trade-off function f: [0,1] → [0,1] is convex, continuous, non-increasing and f(α) ≤ 1 − α;
a mechanism is f-DP if T(M(D), M(D')) ≥ f for all neighbours D, D'. *Larger is more private*,
so a representation that is allowed to err must err **downwards**: every non-exact value here
is a lower bound of the true f, which only ever makes a mechanism look *less* private.

Objects (all frozen values):

* :class:`Identity` — Id(α) = 1 − α (no information). Exact.
* :class:`GaussianDP` — G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) (μ-GDP). Exact closed form, exact privacy
  profile δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2).
* :class:`EpsDelta` — f_{ε,δ}(α) = max{0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)}. Exact.
* :class:`PiecewiseLinear` — a convex piecewise-linear function given by its breakpoints; either
  exact (e.g. the trade-off function of two finite distributions) or a *safe lower bound* of a
  convex function built from supporting lines (never from chords: a chord of a convex function
  lies above it).

Every object carries an :class:`Exactness` flag. Conversions (docs/theory.md §3):

* f → privacy profile: M f-DP ⇒ (ε, δ_f(ε))-DP with δ_f(ε) = 1 + f*(−e^ε)
  = sup_α (1 − e^ε α − f(α)) (both orderings of a neighbouring pair are bounded by f, so no
  symmetrisation is needed). A lower bound of f gives an upper bound of δ: safe.
* f → ε at δ: the smallest ε ≥ 0 with δ_f(ε) ≤ δ (rounded up).
* profile → f: (ε_k, δ_k)-DP for all k ⇒ f_{ε_k,δ_k}-DP for all k ⇒ (max_k f_{ε_k,δ_k})-DP.
  A max of lines: exactly safe for any finite grid whenever each δ_k is an upper bound; tight for
  symmetric f as the grid refines (Dong–Roth–Su, Prop. 2.12).

Why this module is long (about 580 lines): it is one abstraction, the trade-off function, with
its four representations, and each carries the same numerics — evaluation, the privacy profile
δ(ε), ε at δ rounded up, the conversion to a piecewise-linear lower bound — under one rounding
convention (err downwards in f: :data:`FLOAT_SLACK`, :func:`round_up`). Kept together, that
convention is stated once and checked in one place (:func:`check_axioms`, :func:`dominates`).
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy import optimize, special, stats

from tessera.errors import TesseraError

ArrayLike = npt.ArrayLike
FloatArray = npt.NDArray[np.float64]

#: Absolute amount subtracted from every value of a numerically built lower bound, so that
#: floating-point rounding in the envelope computation (≈1e-16 per operation) can only move
#: values down. Also used as the tolerance of the axiom checks.
FLOAT_SLACK: float = 1e-12

#: Default number of ε grid points when a smooth trade-off function is replaced by the
#: max of its supporting lines f_{ε_k, δ(ε_k)}.
DEFAULT_GRID: int = 2049


class Exactness(enum.Enum):
    """How a value relates to the true trade-off function (or privacy parameter)."""

    EXACT = "exact"
    LOWER_BOUND = "safe lower bound"  # of f; equivalently an upper bound of δ(ε) and of ε(δ)
    APPROXIMATION = "approximation (NOT a privacy guarantee)"

    def combine(self, other: Exactness) -> Exactness:
        """The weaker of two flags (an approximation poisons everything)."""
        order = [Exactness.EXACT, Exactness.LOWER_BOUND, Exactness.APPROXIMATION]
        return order[max(order.index(self), order.index(other))]


def _alpha(alpha: ArrayLike) -> FloatArray:
    a = np.asarray(alpha, dtype=np.float64)
    if np.any(~np.isfinite(a)) or np.any(a < 0.0) or np.any(a > 1.0):
        raise TesseraError(
            "a trade-off function is evaluated at α in [0, 1]",
            hint="α is a type-I error probability",
        )
    return a


def round_up(x: float) -> float:
    """x nudged up by a relative 1e-12: an ε or μ reported from a floating-point computation."""
    if not math.isfinite(x) or x == 0.0:
        return x
    return x + 1e-12 * max(1.0, abs(x))


class TradeOff(ABC):
    """A trade-off function f (or a safe lower bound of one, see :attr:`exactness`)."""

    exactness: Exactness

    @abstractmethod
    def __call__(self, alpha: ArrayLike) -> FloatArray:
        """f(α), vectorised. For a lower-bound representation, a value ≤ the true f(α)."""

    @abstractmethod
    def delta(self, epsilon: ArrayLike) -> FloatArray:
        """Privacy profile δ_f(ε) = sup_α (1 − e^ε α − f(α)) for ε ≥ 0 (an upper bound if the
        representation is a lower bound)."""

    def epsilon(self, delta: float) -> float:
        """Smallest ε ≥ 0 with δ_f(ε) ≤ δ (math.inf if none), rounded up."""
        check_delta(delta)
        return _epsilon_by_bisection(self.delta, delta)

    @abstractmethod
    def describe(self) -> str:
        """Short human-readable name, e.g. ``G_0.5`` or ``f_{1,1e-06}``."""

    def to_piecewise_linear(self, grid: int = DEFAULT_GRID) -> PiecewiseLinear:
        """A convex piecewise-linear lower bound (exact when the function already is PL).

        Default: max over an ε grid of the supporting lines of f_{ε, δ_f(ε)} (safe)."""
        eps_max = self.epsilon(1e-15)
        if not math.isfinite(eps_max):
            eps_max = 50.0
        eps = np.linspace(0.0, max(eps_max, 1e-9), grid)
        return PiecewiseLinear.from_profile(eps, self.delta(eps))


def check_delta(delta: float) -> None:
    """A clear error unless 0 ≤ δ < 1 (every ε(δ) and δ-level conversion takes this)."""
    if not (0.0 <= delta < 1.0) or not math.isfinite(delta):
        raise TesseraError(f"δ must be in [0, 1), got {delta!r}")


def _epsilon_by_bisection(profile: object, delta: float) -> float:
    """Smallest ε ≥ 0 with profile(ε) ≤ δ, for a non-increasing profile; returns the *upper*
    end of the final bracket, so profile(result) ≤ δ always holds (safe)."""
    prof = profile  # Callable[[ArrayLike], FloatArray]

    def d(e: float) -> float:
        return float(np.asarray(prof(np.array([e])))[0])  # type: ignore[operator]

    if d(0.0) <= delta:
        return 0.0
    hi = 1.0
    while d(hi) > delta:
        hi *= 2.0
        if hi > 1e4:
            return math.inf
    lo = hi / 2.0 if hi > 1.0 else 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if d(mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


# ---------------------------------------------------------------------------------------------
# Closed forms
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Identity(TradeOff):
    """Id(α) = 1 − α: the trade-off of identical distributions (perfect privacy)."""

    exactness: Exactness = field(default=Exactness.EXACT, init=False)

    def __call__(self, alpha: ArrayLike) -> FloatArray:
        return 1.0 - _alpha(alpha)

    def delta(self, epsilon: ArrayLike) -> FloatArray:
        return np.zeros_like(np.asarray(epsilon, dtype=np.float64))

    def epsilon(self, delta: float) -> float:
        check_delta(delta)
        return 0.0

    def describe(self) -> str:
        return "Id"

    def to_piecewise_linear(self, grid: int = DEFAULT_GRID) -> PiecewiseLinear:
        return PiecewiseLinear(np.array([0.0, 1.0]), np.array([1.0, 0.0]), Exactness.EXACT)


@dataclass(frozen=True)
class GaussianDP(TradeOff):
    """G_μ(α) = Φ(Φ⁻¹(1 − α) − μ): μ-GDP (docs/theory.md §3). μ = Δ₂/σ for the Gaussian
    mechanism."""

    mu: float
    exactness: Exactness = field(default=Exactness.EXACT, init=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.mu) and self.mu >= 0.0):
            raise TesseraError(f"μ of μ-GDP must be finite and ≥ 0, got {self.mu!r}")

    def __call__(self, alpha: ArrayLike) -> FloatArray:
        a = _alpha(alpha)
        # Φ(Φ⁻¹(1−α) − μ) with isf for accuracy near α → 0.
        return np.asarray(stats.norm.cdf(stats.norm.isf(a) - self.mu), dtype=np.float64)

    def delta(self, epsilon: ArrayLike) -> FloatArray:
        """δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2) (Dong–Roth–Su Cor. 2.13), exact."""
        e = np.asarray(epsilon, dtype=np.float64)
        if self.mu == 0.0:
            return np.zeros_like(e)
        a = special.log_ndtr(-e / self.mu + self.mu / 2.0)
        b = e + special.log_ndtr(-e / self.mu - self.mu / 2.0)
        # exp(a) − exp(b) = exp(a)·(−expm1(b − a)); a ≥ b always, this avoids cancellation.
        out = np.exp(a) * -np.expm1(np.minimum(b - a, 0.0))
        return np.maximum(out, 0.0)

    def epsilon(self, delta: float) -> float:
        check_delta(delta)
        if self.mu == 0.0 or float(self.delta(0.0)) <= delta:
            return 0.0
        if delta == 0.0:
            return math.inf
        hi = 1.0
        while float(self.delta(hi)) > delta:
            hi *= 2.0
        root = optimize.brentq(lambda e: float(self.delta(e)) - delta, 0.0, hi, xtol=1e-14)
        # brentq's root may sit on either side, and δ(ε) in floating point is off by up to
        # ~1e-11 relative for a small μ (Φ(a) − e^ε Φ(b) cancels): step up, by a step that
        # doubles from one ulp, until even the largest δ the rounding allows is ≤ δ (safe).
        eps = float(root)
        step = math.ulp(eps)
        while self._delta_upper(eps) > delta:
            eps += step
            step *= 2.0
        return eps

    def _delta_upper(self, e: float) -> float:
        """δ(e) plus a bound on its floating-point error: ≥ the true δ(e).

        δ = exp(a)·(−expm1(b − a)) with a = log Φ(x_a), b = e + log Φ(x_b); each log Φ is off by
        a few ulps of itself plus x² ulps from rounding x (d log Φ/dx ≈ |x| in the tail), so
        b − a is off by ``err`` absolute and δ by about exp(a)·err; a factor 8 covers the
        constants."""
        mu = self.mu
        xa, xb = -e / mu + mu / 2.0, -e / mu - mu / 2.0
        a = float(special.log_ndtr(xa))
        b = e + float(special.log_ndtr(xb))
        value = math.exp(a) * -math.expm1(min(b - a, 0.0))
        err = (abs(a) + abs(b) + e + xa * xa + xb * xb + 4.0) * 2.0**-52
        return max(value, 0.0) + 8.0 * err * math.exp(a)

    def describe(self) -> str:
        return f"G_{self.mu:.6g}"


def gaussian_dp(mu: float) -> GaussianDP:
    """μ-GDP trade-off function G_μ."""
    return GaussianDP(float(mu))


@dataclass(frozen=True)
class EpsDelta(TradeOff):
    """f_{ε,δ}: M is (ε,δ)-DP iff it is f_{ε,δ}-DP (docs/theory.md §3). Pure DP when δ = 0."""

    eps: float
    delta_: float = 0.0
    exactness: Exactness = field(default=Exactness.EXACT, init=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.eps) and self.eps >= 0.0):
            raise TesseraError(f"ε must be finite and ≥ 0, got {self.eps!r}")
        if not (0.0 <= self.delta_ <= 1.0):
            raise TesseraError(f"δ must be in [0, 1], got {self.delta_!r}")

    def __call__(self, alpha: ArrayLike) -> FloatArray:
        a = _alpha(alpha)
        one = 1.0 - self.delta_
        return np.maximum.reduce(
            [np.zeros_like(a), one - math.exp(self.eps) * a, math.exp(-self.eps) * (one - a)]
        )

    def delta(self, epsilon: ArrayLike) -> FloatArray:
        """δ(ε') = δ + (1 − δ)(e^ε − e^{ε'})₊/(1 + e^ε), exact."""
        e = np.asarray(epsilon, dtype=np.float64)
        gap = np.maximum(math.exp(self.eps) - np.exp(np.minimum(e, self.eps)), 0.0)
        return self.delta_ + (1.0 - self.delta_) * gap / (1.0 + math.exp(self.eps))

    def epsilon(self, delta: float) -> float:
        """Closed form: δ(ε') ≤ δ' ⇔ e^{ε'} ≥ e^ε − (δ' − δ)(1 + e^ε)/(1 − δ); ∞ if δ' < δ."""
        check_delta(delta)
        if delta < self.delta_:
            return math.inf
        if self.delta_ >= 1.0:
            return 0.0
        target = math.exp(self.eps) - (delta - self.delta_) * (1.0 + math.exp(self.eps)) / (
            1.0 - self.delta_
        )
        if target <= 1.0:
            return 0.0
        return min(round_up(math.log(target)), self.eps)

    def describe(self) -> str:
        if self.delta_ == 0.0:
            return f"f_{{{self.eps:.6g},0}}"
        return f"f_{{{self.eps:.6g},{self.delta_:.3g}}}"

    def to_piecewise_linear(self, grid: int = DEFAULT_GRID) -> PiecewiseLinear:
        one = 1.0 - self.delta_
        if 1.0 - one > self.delta_:
            # 1 − δ rounded down: its jump 1 − f(0) would exceed δ, so ε(δ) would be ∞. The
            # next float up has 1 − f(0) ≤ δ exactly (Sterbenz: 1 − x is exact near 1): f(0)
            # is then off by < 2⁻⁵³, far inside the 1e-12 that every ε is rounded up by.
            one = math.nextafter(one, 2.0)
        if one <= 0.0:
            return PiecewiseLinear(np.array([0.0, 1.0]), np.array([0.0, 0.0]), Exactness.EXACT)
        a_star = one / (1.0 + math.exp(self.eps))
        alphas = [0.0, a_star, one] + ([1.0] if one < 1.0 else [])
        betas = [one, math.exp(-self.eps) * (one - a_star), 0.0] + ([0.0] if one < 1.0 else [])
        return PiecewiseLinear(np.array(alphas), np.array(betas), Exactness.EXACT)


def eps_delta(eps: float, delta: float = 0.0) -> EpsDelta:
    """f_{ε,δ}."""
    return EpsDelta(float(eps), float(delta))


def pure_dp(eps: float) -> EpsDelta:
    """f_{ε,0} (pure ε-DP)."""
    return EpsDelta(float(eps), 0.0)


# ---------------------------------------------------------------------------------------------
# Piecewise linear
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PiecewiseLinear(TradeOff):
    """A convex, non-increasing piecewise-linear function on [0, 1] given by breakpoints
    (α_0 = 0 < α_1 < … < α_n = 1, β_i = f(α_i)), evaluated by linear interpolation.

    Values between breakpoints are the chord, which equals f exactly *because f is linear
    there*; the representation is only a lower bound when it was built as one (from supporting
    lines, see :meth:`from_lines`), as its :attr:`exactness` says.
    """

    alphas: FloatArray
    betas: FloatArray
    exactness: Exactness = Exactness.EXACT

    def __post_init__(self) -> None:
        a = np.asarray(self.alphas, dtype=np.float64)
        b = np.asarray(self.betas, dtype=np.float64)
        if a.ndim != 1 or a.shape != b.shape or a.size < 2:
            raise TesseraError("breakpoints must be two 1-D arrays of equal length ≥ 2")
        if a[0] != 0.0 or a[-1] != 1.0 or np.any(np.diff(a) <= 0.0):
            raise TesseraError("breakpoint α's must increase strictly from 0 to 1")
        a.setflags(write=False)
        b.setflags(write=False)
        object.__setattr__(self, "alphas", a)
        object.__setattr__(self, "betas", b)

    # -- construction ---------------------------------------------------------------------

    @staticmethod
    def from_points(
        alphas: ArrayLike, betas: ArrayLike, exactness: Exactness = Exactness.EXACT
    ) -> PiecewiseLinear:
        """From points of the graph; duplicates in α keep the smallest β (the infimum)."""
        a = np.asarray(alphas, dtype=np.float64)
        b = np.asarray(betas, dtype=np.float64)
        order = np.lexsort((b, a))
        a, b = a[order], b[order]
        keep = np.ones(a.size, dtype=bool)
        keep[1:] = a[1:] != a[:-1]
        return PiecewiseLinear(a[keep], b[keep], exactness)

    @staticmethod
    def from_lines(
        intercepts: ArrayLike,
        slopes: ArrayLike,
        exactness: Exactness = Exactness.LOWER_BOUND,
        slack: float = FLOAT_SLACK,
    ) -> PiecewiseLinear:
        """max(0, max_j (c_j + s_j α)) on [0, 1], as breakpoints, lowered by ``slack``.

        A max of lines that each lie below a convex f is a convex lower bound of f. The upper
        envelope is computed by the convex-hull trick; ``slack`` absorbs floating-point rounding
        in the intersection points so the stored values never exceed the true max of lines.
        """
        c = np.append(np.asarray(intercepts, dtype=np.float64), 0.0)
        s = np.append(np.asarray(slopes, dtype=np.float64), 0.0)
        ok = np.isfinite(c) & np.isfinite(s)
        c, s = c[ok], s[ok]
        # Sort by slope, ties by intercept; keep the largest intercept per slope.
        order = np.lexsort((c, s))
        c, s = c[order], s[order]
        last = np.ones(s.size, dtype=bool)
        last[:-1] = s[:-1] != s[1:]
        c, s = c[last], s[last]
        # Line with the largest value at α = 0 comes first (among steepest-in-front order):
        # we need the envelope on [0, 1] only, so drop lines that never win there.
        hull_c: list[float] = []
        hull_s: list[float] = []
        hull_x: list[float] = []  # x where hull line k starts to win
        for cj, sj in zip(c.tolist(), s.tolist(), strict=True):
            while hull_c:
                # Intersection of the new line with the last hull line.
                x = (hull_c[-1] - cj) / (sj - hull_s[-1])
                if x <= hull_x[-1]:
                    hull_c.pop()
                    hull_s.pop()
                    hull_x.pop()
                else:
                    hull_c.append(cj)
                    hull_s.append(sj)
                    hull_x.append(x)
                    break
            else:
                hull_c.append(cj)
                hull_s.append(sj)
                hull_x.append(-math.inf)
        xs = np.array(hull_x[1:], dtype=np.float64)
        inside = (xs > 0.0) & (xs < 1.0)
        pts = np.concatenate([[0.0], xs[inside], [1.0]])
        cs = np.array(hull_c)
        ss = np.array(hull_s)
        vals = np.max(cs[None, :] + ss[None, :] * pts[:, None], axis=1)
        vals = np.clip(vals - slack, 0.0, 1.0 - pts)
        # Where the envelope reaches 0 the slack cannot lower the value (clipped at 0), so a
        # rounding error in that crossing point could lift the segment before it: move the
        # first zero breakpoint left by a relative 1e-9 (a steeper segment is lower: safe).
        zero = np.flatnonzero(vals[1:] == 0.0)
        if zero.size:
            i = int(zero[0]) + 1
            moved = pts[i] * (1.0 - 1e-9)
            if i < pts.size - 1 and moved > pts[i - 1]:
                pts = pts.copy()
                pts[i] = moved
        return PiecewiseLinear.from_points(pts, vals, exactness)

    @staticmethod
    def from_profile(
        epsilons: ArrayLike,
        deltas: ArrayLike,
        exactness: Exactness = Exactness.LOWER_BOUND,
    ) -> PiecewiseLinear:
        """max_k f_{ε_k, δ_k}: the f-DP guarantee implied by (ε_k, δ_k)-DP for every k.

        Safe whenever every δ_k is an upper bound of the true δ(ε_k)."""
        e = np.asarray(epsilons, dtype=np.float64)
        d = np.asarray(deltas, dtype=np.float64)
        if e.shape != d.shape or np.any(e < 0) or np.any(d < 0):
            raise TesseraError("a privacy profile is a list of pairs (ε ≥ 0, δ ≥ 0)")
        one = 1.0 - np.minimum(d, 1.0)
        # f_{ε,δ}: 1 − δ − e^ε α  and  e^{−ε}(1 − δ) − e^{−ε} α.
        intercepts = np.concatenate([one, np.exp(-e) * one])
        slopes = np.concatenate([-np.exp(e), -np.exp(-e)])
        return PiecewiseLinear.from_lines(intercepts, slopes, exactness)

    # -- evaluation -----------------------------------------------------------------------

    def __call__(self, alpha: ArrayLike) -> FloatArray:
        return np.asarray(np.interp(_alpha(alpha), self.alphas, self.betas), dtype=np.float64)

    @property
    def slopes(self) -> FloatArray:
        return np.diff(self.betas) / np.diff(self.alphas)

    def delta(self, epsilon: ArrayLike) -> FloatArray:
        """δ_f(ε) = max(0, max_i (1 − e^ε α_i − β_i)): a linear function minus a convex PL one
        is concave and PL, so its sup is attained at a breakpoint. Exact for this f."""
        e = np.asarray(epsilon, dtype=np.float64)
        flat = np.atleast_1d(e).ravel()
        out = np.empty(flat.size)
        chunk = max(1, 4_000_000 // self.alphas.size)
        for i in range(0, flat.size, chunk):
            ee = np.exp(flat[i : i + chunk])
            v = 1.0 - ee[:, None] * self.alphas[None, :] - self.betas[None, :]
            out[i : i + chunk] = np.maximum(v.max(axis=1), 0.0)
        return out.reshape(e.shape) if e.ndim else np.asarray(out[0])

    def epsilon(self, delta: float) -> float:
        """Closed form: δ_f(ε) ≤ δ ⇔ e^ε α_i ≥ 1 − β_i − δ for all i, so
        ε = max(0, max_i ln((1 − β_i − δ)/α_i)); ∞ if some α_i = 0 needs it. Rounded up."""
        check_delta(delta)
        need = 1.0 - self.betas - delta
        pos = need > 0.0
        if not np.any(pos):
            return 0.0
        if np.any(pos & (self.alphas == 0.0)):
            return math.inf
        eps = float(np.max(np.log(need[pos] / self.alphas[pos])))
        return round_up(max(0.0, eps))

    def describe(self) -> str:
        return f"PL[{self.alphas.size} breakpoints, {self.exactness.value}]"

    def to_piecewise_linear(self, grid: int = DEFAULT_GRID) -> PiecewiseLinear:
        return self

    def finite_pair(self) -> tuple[FloatArray, FloatArray]:
        """Two finite distributions (P, Q) with T(P, Q) = f exactly.

        Outcome per segment i: P = α_i − α_{i−1}, Q = β_{i−1} − β_i (likelihood ratio = −slope);
        one extra outcome with P = 0, Q = 1 − f(0) (the jump at α = 0)."""
        p = np.concatenate([[0.0], np.diff(self.alphas)])
        q = np.concatenate([[1.0 - self.betas[0]], -np.diff(self.betas)])
        return p, np.maximum(q, 0.0)


def tradeoff_of_pair(
    p: ArrayLike, q: ArrayLike, exactness: Exactness = Exactness.EXACT
) -> PiecewiseLinear:
    """T(P, Q) for finite distributions (Neyman–Pearson): reject outcomes in decreasing order of
    likelihood ratio Q/P; α = cumulative P, β = 1 − cumulative Q."""
    pp = np.asarray(p, dtype=np.float64)
    qq = np.asarray(q, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(pp > 0, qq / np.where(pp > 0, pp, 1.0), np.inf)
    ratio = np.where((pp == 0) & (qq == 0), -np.inf, ratio)  # empty outcomes: irrelevant
    order = np.argsort(-ratio, kind="stable")
    a = np.concatenate([[0.0], np.cumsum(pp[order])])
    b = 1.0 - np.concatenate([[0.0], np.cumsum(qq[order])])
    if not (abs(a[-1] - 1.0) < 1e-9 and abs(b[-1]) < 1e-9):
        raise TesseraError("P and Q must be probability distributions (total mass 1)")
    # Total masses are 1 up to rounding: pin the end point, clip into the valid region
    # (clipping β down to 1 − α only lowers f: the safe direction).
    a = np.clip(a, 0.0, 1.0)
    a[-1] = 1.0
    b = np.clip(b, 0.0, 1.0 - a)
    return PiecewiseLinear.from_points(a, b, exactness)


# ---------------------------------------------------------------------------------------------
# Axioms
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AxiomReport:
    """Result of :func:`check_axioms`: the violated trade-off axioms (empty if none)."""

    violations: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.violations


def check_axioms(f: TradeOff, grid: int = 2001, tol: float = 1e-9) -> AxiomReport:
    """Check f is a trade-off function: values in [0, 1], f(α) ≤ 1 − α, non-increasing, convex.

    Exact on the breakpoints of a :class:`PiecewiseLinear`; on an α grid otherwise (a grid
    check can miss a violation between grid points, never report a false one beyond ``tol``).
    Continuity on [0, 1) follows from convexity and boundedness; at α = 1 it needs f(1) = 0,
    which f ≤ 1 − α forces.
    """
    if isinstance(f, PiecewiseLinear):
        a, b = f.alphas, f.betas
    else:
        a = np.linspace(0.0, 1.0, grid)
        b = f(a)
    bad: list[str] = []
    if np.any(b < -tol) or np.any(b > 1.0 + tol) or np.any(~np.isfinite(b)):
        bad.append("values outside [0, 1]")
    if np.any(b > 1.0 - a + tol):
        bad.append("f(α) > 1 − α somewhere")
    if np.any(np.diff(b) > tol):
        bad.append("not non-increasing")
    slopes = np.diff(b) / np.diff(a)
    # Convexity: slopes non-decreasing; compare with a tolerance scaled to the grid spacing.
    if np.any(np.diff(slopes) < -tol / max(float(np.min(np.diff(a))), 1e-300)):
        bad.append("not convex")
    return AxiomReport(tuple(bad))


def is_tradeoff(f: TradeOff, grid: int = 2001, tol: float = 1e-9) -> bool:
    return check_axioms(f, grid, tol).ok


def dominates(f: TradeOff, g: TradeOff, grid: Sequence[float] | None = None) -> bool:
    """f ≥ g pointwise (f is at least as private). Exact for same-family closed forms, else
    checked on a grid (and on both functions' PL breakpoints)."""
    if isinstance(g, Identity):
        return isinstance(f, Identity)
    if isinstance(f, Identity):
        return True
    if isinstance(f, GaussianDP) and isinstance(g, GaussianDP):
        return f.mu <= g.mu
    if isinstance(f, EpsDelta) and isinstance(g, EpsDelta):
        if f.eps <= g.eps and f.delta_ <= g.delta_:
            return True
    pts = np.linspace(0.0, 1.0, 4097) if grid is None else np.asarray(grid, dtype=np.float64)
    for h in (f, g):
        if isinstance(h, PiecewiseLinear):
            pts = np.union1d(pts, h.alphas)
    return bool(np.all(f(pts) >= g(pts) - 1e-15))
