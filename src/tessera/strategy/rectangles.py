r"""Two ordered attributes: product (Kronecker) strategies for all rectangles (docs/theory.md
§10.7; Hay et al. 2010 and Qardaji, Yang, Li 2013 in 1-D; McKenna et al.'s HDMM uses the same
Kronecker structure for products of 1-D strategies).

Setting. W is one lazy 2-D :class:`~tessera.workload.ranges.RangeFamily` over attributes x
(n₁ codes) and y (n₂ codes): every rectangle [lo₁, hi₁] × [lo₂, hi₂] (or every 2-D prefix),
each query the product of an x-span and a y-span. A *product strategy* takes one 1-D design
per axis — levels G_{1,l} (a b₁-ary interval tree, or the identity) and G_{2,m} — and measures
every level pair (l, m): the partition of the grid into the cells g × h (g a group of level l,
h of level m), with cost c_{lm} = c · α_l β_m (Σα = Σβ = 1, c the total ρ or ε). A row meets
one cell of every pair, so γ_w = Σ_{l,m} c_{lm} = c exactly (the partition bound).

Information. The noise precision of pair (l, m) is u_{lm} = κ a_l b_m with κ = 2ρ, a = α,
b = β under ρ-zCDP (u = 2ρ_{lm}) and κ = ε²/2, a = α², b = β² under ε-DP (Laplace variance
2/ε_{lm}²). Hence I = Σ u_{lm} (G_{1,l}ᵀG_{1,l}) ⊗ (G_{2,m}ᵀG_{2,m}) = κ I₁(a) ⊗ I₂(b) with the
1-D information matrices of :mod:`~.intervals`, I⁻¹ = κ⁻¹ I₁(a)⁻¹ ⊗ I₂(b)⁻¹, and a rectangle
r₁ × r₂ has GLS variance

    Var(r₁ × r₂) = κ⁻¹ · V₁(r₁) · V₂(r₂),    V_i = the 1-D GLS variance of the span r_i,

so the total error Σ_rect w Var = w κ⁻¹ (Σ_{r₁} V₁)(Σ_{r₂} V₂) is separable: each axis's
branching and level costs (the best of ∝ r^l, then optimised level by level, as in 1-D) are
chosen independently by expected error, and nothing of size n₁n₂ × n₁n₂ is ever built. The
estimate is X̂ = κ⁻¹ C₁ (Σ_{l,m} u_{lm} G_{1,l}ᵀ Y_{lm} G_{2,m}) C₂ (C_i = I_i⁻¹ by the tree
recursion), the rectangles read off its 2-D prefix sums.

Released variances. The measured noises are discrete, with exact variances v_{lm} that are at
most the continuous model's 1/u_{lm} (σ², 2b²) but not exactly in product form. The estimator
above is unbiased for any weights, and its exact covariance
K⁻¹(Σ u_{lm}² v_{lm} G_{lm}ᵀG_{lm})K⁻¹ ⪯ t · K⁻¹ with t = max_{lm} u_{lm} v_{lm} ≤ 1 (K = I above),
so t κ⁻¹ V₁V₂ is a proven upper bound on each rectangle's variance — equal to it under the
model (t = 1): what the chooser uses, and what a release reports (labelled as a bound).
Checked against explicit dense GLS by hypothesis (``tests/strategy/test_rectangles.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.privacy import Definition
from tessera.schema.intervals import IntervalSet
from tessera.strategy.intervals import (
    BRANCHINGS,
    MAX_CODES,
    IntervalDesign,
    Spans,
    level_costs,
    level_groups,
    tree_levels,
)
from tessera.strategy.tree_allocation import family_quadratic, optimal_level_costs
from tessera.workload.families import Partition
from tessera.workload.ranges import RangeFamily, axis_bounds
from tessera.workload.workload import Workload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Levels = list[list[tuple[int, int]]]


@dataclass(frozen=True, eq=False)
class AxisOption:
    """One axis's design: its levels (spans, root first), the cost fractions α (Σ = 1) and
    ``branching`` (1: the identity)."""

    levels: Levels
    fractions: FloatArray
    branching: int

    def design(self, n: int) -> IntervalDesign:
        return IntervalDesign(n, tuple(level_groups(self.levels, n)))


def axis_options(n: int, kind: str) -> list[AxisOption]:
    """The identity (``kind='identity'``) or every tree b ∈ BRANCHINGS, b < n, with level
    costs ∝ r^l, r ∈ {1, b^{1/3}, b^{1/2}} (as the 1-D candidate)."""
    if kind == "identity" or n < 3:
        return [AxisOption([[(c, c + 1) for c in range(n)]], np.ones(1), 1)]
    out = []
    for b in BRANCHINGS:
        if b >= n:
            continue
        levels = tree_levels(n, b)
        for r in sorted({1.0, b ** (1 / 3), b ** 0.5}):
            out.append(AxisOption(levels, level_costs(len(levels), 1.0, r), b))
    return out


def precision_factors(fractions: FloatArray, definition: Definition) -> FloatArray:
    """a_l with u_{lm} = κ a_l b_m: α (ρ-zCDP) or α² (ε-DP)."""
    return fractions if definition is not Definition.PURE else fractions * fractions


def kappa(definition: Definition, total: float) -> float:
    """κ: 2ρ (zCDP: u = 2ρ_q) or ε²/2 (pure: Laplace variance 2/ε_q²)."""
    return 2.0 * total if definition is not Definition.PURE else 0.5 * total * total


def best_axis(n: int, family: str, kind: str, definition: Definition
              ) -> tuple[AxisOption, FloatArray]:
    """The axis option with the least Σ_spans V (the separable total error) over the axis's
    spans (``family``: all ranges or all prefixes), and its V; for a tree, the best geometric
    split is then optimised level by level (:mod:`~.tree_allocation`: the axis factor is the
    1-D total error of the same family)."""
    spans = Spans.ranges(*axis_bounds(n, family))
    best: tuple[float, AxisOption] | None = None
    for opt in axis_options(n, kind):
        total = float(opt.design(n).variances(precision_factors(opt.fractions, definition),
                                              spans).sum())
        if best is None or total < best[0]:
            best = (total, opt)
    assert best is not None
    opt = best[1]
    if opt.branching > 1:
        zcdp = definition is not Definition.PURE
        quad = family_quadratic(family, 1.0)
        gram = spans.gram(n, np.ones(spans.n_queries))
        fractions, _ = optimal_level_costs(opt.design(n), opt.levels, opt.fractions, 1.0, zcdp,
                                           gram, quad)
        opt = AxisOption(opt.levels, fractions / fractions.sum(), opt.branching)
    v = opt.design(n).variances(precision_factors(opt.fractions, definition), spans)
    return opt, v


@dataclass(frozen=True, eq=False)
class KroneckerGLS:
    """GLS for a 2-D range family from a product strategy (module docs). ``starts[k]``: the
    first measured index of level pair k = l·|levels₂| + m (its cells follow, row-major)."""

    family: RangeFamily
    axes: tuple[AxisOption, AxisOption]
    factors: tuple[FloatArray, FloatArray]  # a, b (precision factors)
    kappa: float
    starts: IntArray
    name: str = ("GLS over two attributes (Kronecker product of 1-D designs); variances are "
                 "proven upper bounds (equal under the continuous noise model)")

    def _designs(self) -> tuple[IntervalDesign, IntervalDesign]:
        return (self.axes[0].design(self.family.sizes[0]),
                self.axes[1].design(self.family.sizes[1]))

    def estimator_weights(self) -> FloatArray:
        """u_{lm} of every level pair (row-major)."""
        return self.kappa * np.multiply.outer(*self.factors).ravel()

    def _t(self, noise_variance: FloatArray) -> float:
        return float(np.max(self.estimator_weights() * noise_variance[self.starts]))

    def variances(self, noise_variance: FloatArray) -> FloatArray:
        d1, d2 = self._designs()
        v1 = d1.variances(self.factors[0], Spans.ranges(*self.family.bounds(0)))
        v2 = d2.variances(self.factors[1], Spans.ranges(*self.family.bounds(1)))
        return (self._t(noise_variance) / self.kappa) * np.multiply.outer(v1, v2).ravel()

    def answers(self, noisy: FloatArray, noise_variance: FloatArray) -> FloatArray:
        d1, d2 = self._designs()
        g1, g2 = d1.groups, d2.groups
        rhs = np.zeros(self.family.sizes)
        u = self.estimator_weights().reshape(len(g1), len(g2))
        bounds = list(self.starts) + [len(noisy)]
        k = 0
        for lv, gl in enumerate(g1):
            for m, gm in enumerate(g2):
                y = noisy[bounds[k]:bounds[k + 1]].reshape(int(gl.max()) + 1, int(gm.max()) + 1)
                rhs += u[lv, m] * y[np.ix_(gl, gm)]
                k += 1
        c1 = d1.covariance(self.factors[0])
        c2 = d2.covariance(self.factors[1])
        xhat = (c1 @ rhs @ c2) / self.kappa
        return self.family.answers(xhat)


def two_attributes(workload: Workload) -> RangeFamily | None:
    """The family when W is one lazy range family over two attributes of ≤ MAX_CODES codes."""
    fams = workload.range_families
    if fams is None or len(fams) != 1 or len(fams[0].attributes) != 2:
        return None
    return fams[0] if max(fams[0].sizes) <= MAX_CODES else None


def product_measured(workload: Workload, family: RangeFamily,
                     axes: Sequence[AxisOption], shares: FloatArray, kind: str) -> Workload:
    """The measured workload: one grid family per level pair (row-major), weight = share."""
    (x, y), dom = family.attributes, workload.domain
    families = []
    k = 0
    for lv, lev1 in enumerate(axes[0].levels):
        for m, lev2 in enumerate(axes[1].levels):
            groups = {x: [IntervalSet.range(s, e) for s, e in lev1],
                      y: [IntervalSet.range(s, e) for s, e in lev2]}
            families.append(Partition.grid(dom, groups, float(shares[k]),
                                           f"{kind}({x},{y})[{lv},{m}]", "hierarchy"))
            k += 1
    return Workload.of_families(dom, families)
