"""Lower convex envelope of a set of trade-off functions (docs/theory.md §3).

lce(g) is the largest convex function ≤ g, and lce{f_1, …, f_k} := lce(min_i f_i); it is a
trade-off function (Smith et al., Lemma for Thm 5). It is the guarantee of parallel composition.

Exact algorithm for piecewise-linear inputs: min_i f_i is piecewise linear; its graph has
convex kinks only at breakpoints of the f_i (where two f_i cross, the min has a *concave* kink,
which can never be a vertex of the lower convex hull). Hence

    lce{f_i} = lower convex hull of the points (a, min_i f_i(a)), a ∈ ∪_i breakpoints(f_i),

computed by the monotone-chain algorithm. Smooth inputs (G_μ, PLD-based) are first replaced by
their PL lower bounds; lce is monotone (f ≤ f' ⇒ lce ≤ lce'), so the result is a safe lower
bound. Closed-form shortcuts: if one f_j is ≤ all the others, lce = f_j (e.g. G_{max μ_i} for
GDP, f_{max ε_i, 0} for pure DP).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tessera.accounting.tradeoff import (
    DEFAULT_GRID,
    EpsDelta,
    Exactness,
    FloatArray,
    GaussianDP,
    Identity,
    PiecewiseLinear,
    TradeOff,
)
from tessera.errors import TesseraError


def lower_convex_hull(xs: FloatArray, ys: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Vertices of the lower convex hull of points sorted by x (distinct x), monotone chain."""
    hx: list[float] = []
    hy: list[float] = []
    for x, y in zip(xs.tolist(), ys.tolist(), strict=True):
        # Pop while the last two hull points and (x, y) do not make a strict left turn.
        while (
            len(hx) >= 2
            and (hx[-1] - hx[-2]) * (y - hy[-2]) - (hy[-1] - hy[-2]) * (x - hx[-2]) <= 0.0
        ):
            hx.pop()
            hy.pop()
        hx.append(x)
        hy.append(y)
    return np.array(hx), np.array(hy)


def _smallest(fs: Sequence[TradeOff]) -> TradeOff | None:
    """A member that is ≤ every other, when decidable in closed form (same family)."""
    rest = [f for f in fs if not isinstance(f, Identity)]
    if not rest:
        return fs[0]
    if all(isinstance(f, GaussianDP) for f in rest):
        return max(rest, key=lambda f: f.mu)  # type: ignore[attr-defined]
    if all(isinstance(f, EpsDelta) for f in rest):
        eds: list[EpsDelta] = rest  # type: ignore[assignment]
        top = max(eds, key=lambda f: (f.eps, f.delta_))
        if all(f.eps <= top.eps and f.delta_ <= top.delta_ for f in eds):
            return top
    return None


def lower_convex_envelope(fs: Sequence[TradeOff], grid: int = DEFAULT_GRID) -> TradeOff:
    """lce{f_1, …, f_k}: exact for PL / closed-form-ordered inputs, else a safe lower bound."""
    if not fs:
        raise TesseraError("the lower convex envelope of an empty set is undefined")
    if len(fs) == 1:
        return fs[0]
    best = _smallest(fs)
    if best is not None:
        return best
    pls = [f.to_piecewise_linear(grid) for f in fs]
    exactness = Exactness.EXACT
    for f, pl in zip(fs, pls, strict=True):
        exactness = exactness.combine(f.exactness).combine(pl.exactness)
    xs = np.unique(np.concatenate([pl.alphas for pl in pls]))
    ys = np.min(np.stack([pl(xs) for pl in pls]), axis=0)
    hx, hy = lower_convex_hull(xs, ys)
    return PiecewiseLinear(hx, hy, exactness)
