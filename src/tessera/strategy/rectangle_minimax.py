r"""``--objective max`` for all rectangles (or 2-D prefixes) over two ordered attributes: the
minimax split of a product of trees (docs/theory.md §10.4, §10.7).

Setting (:mod:`~.rectangles`). A product strategy measures every level pair (l, m) of a tree on
x and one on y at cost c·α_l β_m (Σα = Σβ = 1; each pair a partition of the grid, so γ_w = c
exactly). The pair's noise precision is u_{lm} = κ a_l b_m with a = α, b = β, κ = 2ρ under ρ-zCDP
(u = 2ρ_{lm}) and a = α², b = β², κ = ε²/2 under ε-DP (Laplace variance 2/ε_{lm}², ε_{lm} = ε
α_l β_m: the privacy constraint Σ_{lm} ε_{lm} = ε (Σα)(Σβ) is again Σα = Σβ = 1). Then
I = κ I₁(a) ⊗ I₂(b) and the rectangle r₁ × r₂ has GLS variance κ⁻¹ V₁(r₁; α) V₂(r₂; β), V_i the
1-D variance with precision factors a (resp. b).

Separation. The family is every product r₁ × r₂ of an x-span and a y-span (all ranges or all
prefixes of each axis) with **one** weight w (a lazy family has one weight; per-rectangle
weights cannot reach this candidate: a workload of explicit rectangle queries is not a lazy
family, and only ``direct`` applies to it), and every V > 0, so

    max_{r₁, r₂} w Var(r₁ × r₂) = w κ⁻¹ (max_{r₁} V₁(r₁; α)) · (max_{r₂} V₂(r₂; β)),

and over product splits (α, β) ∈ Δ × Δ the minimum of a product of two positive functions of
separate variables is the product of their minima: **the minimax within the product family is
the 1-D minimax of each axis alone** (:func:`minimax_axis`; the same under pure ε, whose 1-D
program is not convex). The unrestricted optimum over every level-pair cost vector c_{lm}
(not of product form) can be lower; it is not searched (the Kronecker structure, which keeps
GLS at O(n²) per axis, is what a product buys; ``tests/strategy/test_rectangle_minimax.py``
compares the two by a generic numerical minimax on tiny grids, docs/theory.md §10.7).

Per axis, as in 1-D (:func:`~.interval_candidates.interval_strategy`): the tree chosen for the
total (its level costs optimised for the total), the same branching with equal level costs, the
minimax level costs of that branching from the better of the two
(:func:`~.tree_allocation.minimax_level_costs`) and of the best other branching by the worst
query of its best geometric split; the least max V is kept (the total's on ties), so the
product is never worse than the total's or the equal split's in the worst rectangle.

Certificate (ρ-zCDP). V_q(α) = 1_qᵀ I₁(α)⁻¹ 1_q is convex in α (matrix-fractional, I₁ linear
in α), so the Frank–Wolfe bound (:func:`~.epigraph.frank_wolfe_bound`, over the
:data:`BOUND_QUERIES` worst spans with the exact gradient ∂V_q/∂α_l = −Σ_{g∈l} (1_gᵀ I⁻¹ 1_q)²)
is a lower bound L_i ≤ min_α max V_i over that axis's tree, and κ⁻¹ w L₁ L₂ bounds the worst
rectangle of every product split of the two chosen trees (:func:`product_bound`). Under pure ε
the 1-D program is not convex: no bound (None).

All level-pair splits (ρ-zCDP). Over every split c_{lm} ≥ 0, Σ c_{lm} = 1 of the level pairs of
the same two trees (not only products), f_r(c) = 1_rᵀ(Σ c_{lm} G_lᵀG_l ⊗ H_mᵀH_m)⁻¹1_r is
convex in c and homogeneous of degree −1. At a product c' = α ⊗ β, f_{r₁r₂} = V₁V₂ and
∂f_{r₁r₂}/∂c_{lm} = −d₁(r₁)_l d₂(r₂)_m with d_i = −∂V_i/∂α (I⁻¹1_r is a Kronecker product). So
the Frank–Wolfe bound with the product weights λ₁ ⊗ λ₂ of the two axes' bounds is
h + min ∂h − ∇h·c' = H₁H₂ − M₁M₂ + G₁G₂ (H_i = λ_i·V_i, D_i = λ_i·d_i, M_i = max_l D_{i,l},
G_i = D_i·α_i), a lower bound on the worst rectangle of every split (:func:`split_bound`).
By homogeneity G_i = H_i, the axis bound is 2H_i − M_i, and at a tight axis optimum
H_i = M_i = max V_i (complementary slackness), so then the split bound is max V₁ max V₂:
**under ρ-zCDP the product minimax is the minimax over all level-pair splits of the two
trees** (the 1-D KKT conditions multiply; D_i ≥ 0, so min_{lm} −D_{1,l}D_{2,m} = −M₁M₂).
Under pure ε (cost linear in ε_{lm}, precision quadratic) it is not: on 3×3 to 6×6 grids a
generic local search over all level-pair splits finds worst rectangles 1.26–1.59× lower than the
product minimax (``tests/strategy/test_rectangle_minimax.py``, docs/theory.md §10.7) — there
the claim is "the minimax within the product family".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.privacy import Definition
from tessera.strategy.epigraph import frank_wolfe_dual
from tessera.strategy.intervals import Spans, level_costs
from tessera.strategy.rectangles import AxisOption, axis_options, kappa, precision_factors
from tessera.strategy.tree_allocation import minimax_level_costs
from tessera.workload.ranges import axis_bounds

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Other branchings (best first by their geometric split's worst span) whose minimax level costs
#: are tried beside the branching chosen for the total (as :data:`~.candidates.OTHER_BRANCHINGS`).
OTHER_BRANCHINGS = 1
#: An axis level whose minimax fraction is below this share of the largest is not measured (the
#: rest renormalised; never the finest level, which keeps I invertible): under pure ε the
#: minimax drives levels to the SLSQP floor (10⁻¹²), and a level pair of two such levels would
#: get a noise scale ~10²⁴ times the others' — past what the samplers take (2⁵²).
DROP_BELOW = 1e-4
#: Worst spans the Frank–Wolfe bound is taken over (any subset gives a valid bound; the active
#: ones at the optimum are among the worst).
BOUND_QUERIES = 512


@dataclass(frozen=True, eq=False)
class AxisMinimax:
    """One axis under ``max``: its design (levels and fractions α, Σ = 1), ``worst`` =
    max_q V_q(α) in precision-factor units (V with precisions a_l, module docs) and ``bound``
    ≤ min_α max_q V_q(α) over the level costs of the same tree (a tree under ρ-zCDP; the
    identity, which has one split, also under pure ε; None for a tree under pure ε).
    ``dual`` = (H, M, G): the bound's λ-average of the worst spans' V, H = Σ λ_q V_q, the
    largest level derivative M = max_l D_l, D_l = Σ_q λ_q (−∂V_q/∂α_l), and G = D·α (= H by
    homogeneity; bound = H − M + G; the identity: H = M = G = worst), for
    :func:`split_bound`."""

    option: AxisOption
    worst: float
    bound: float | None
    dual: tuple[float, float, float] | None = None


def axis_variances(option: AxisOption, spans: Spans, definition: Definition) -> FloatArray:
    """V_q(α) of every span (precision factors a = α or α²)."""
    n = option.levels[-1][-1][1]
    return option.design(n).variances(precision_factors(option.fractions, definition), spans)


def axis_jacobian(option: AxisOption, spans: Spans, queries: IntArray) -> FloatArray:
    """∂V_q/∂α_l under ρ-zCDP (a = α) for the single-span ``queries``: −Σ_{g∈l} (1_gᵀ I⁻¹ 1_q)²,
    from the prefix sums of I⁻¹E (E the spans' indicators)."""
    n = option.levels[-1][-1][1]
    cov = option.design(n).covariance(option.fractions)
    e = np.zeros((n, len(queries)))
    for j, q in enumerate(queries.tolist()):
        e[spans.lo[q]:spans.hi[q], j] = 1.0
    s = np.zeros((n + 1, len(queries)))
    np.cumsum(cov @ e, axis=0, out=s[1:])
    out = np.empty((len(queries), len(option.levels)))
    for lv, level in enumerate(option.levels):
        lo = np.array([a for a, _ in level], dtype=np.int64)
        hi = np.array([b for _, b in level], dtype=np.int64)
        out[:, lv] = -((s[hi] - s[lo]) ** 2).sum(axis=0)
    return out


def axis_bound(option: AxisOption, spans: Spans
               ) -> tuple[float, tuple[float, float, float]]:
    """The Frank–Wolfe lower bound (ρ-zCDP) on min_α max_q V_q(α) over ``option``'s tree, at
    its fractions α', over the :data:`BOUND_QUERIES` worst spans (module docs), and its
    (H, M, G) (:class:`AxisMinimax`). The bound is evaluated from the linear program's λ
    (clipped at 0, normalised to Σ = 1: any λ ∈ Δ gives a valid bound), not taken from its
    objective value, which carries the solver's feasibility tolerance."""
    v = axis_variances(option, spans, Definition.ZCDP)
    top = np.argsort(v, kind="stable")[::-1][:BOUND_QUERIES].astype(np.int64)
    jac = axis_jacobian(option, spans, top)
    _, lam = frank_wolfe_dual(v[top], jac, option.fractions, 1.0)
    lam = lam / lam.sum()
    d = -(lam @ jac)
    h, m, g = float(lam @ v[top]), float(np.max(d)), float(d @ option.fractions)
    return max(h - m + g, 0.0), (h, m, g)


def minimax_axis(n: int, family: str, definition: Definition, chosen: AxisOption
                 ) -> AxisMinimax:
    """The axis design with the least worst span under ``max`` (module docs): among the tree
    ``chosen`` for the total, its branching with equal level costs, the minimax level costs of
    that branching and of the best other one; ``chosen`` on ties. The identity (one level) has
    one split: its worst is its own bound."""
    spans = Spans.ranges(*axis_bounds(n, family))
    zcdp = definition is not Definition.PURE

    def worst(opt: AxisOption) -> float:
        return float(axis_variances(opt, spans, definition).max())

    if len(chosen.levels) == 1:
        w = worst(chosen)
        return AxisMinimax(chosen, w, w, (w, w, w))
    even = AxisOption(chosen.levels, level_costs(len(chosen.levels), 1.0, 1.0),
                      chosen.branching)
    scored = [(worst(chosen), chosen), (worst(even), even)]
    start = min(scored, key=lambda t: t[0])[1]
    ones = np.ones(spans.n_queries)
    for opt in [start] + other_branchings(n, chosen.branching, spans, definition):
        costs, _, _ = minimax_level_costs(opt.design(n), opt.levels, opt.fractions, 1.0,
                                          zcdp, spans, ones)
        found = without_small_levels(AxisOption(opt.levels, costs / costs.sum(),
                                                opt.branching))
        scored.append((worst(found), found))
    best_worst, best = min(scored, key=lambda t: t[0])  # (the first on ties: the total's)
    if not zcdp:
        return AxisMinimax(best, best_worst, None)
    return AxisMinimax(best, best_worst, *axis_bound(best, spans))


def without_small_levels(option: AxisOption) -> AxisOption:
    """``option`` without the levels below :data:`DROP_BELOW` of the largest fraction (never
    the finest), the other fractions renormalised to Σ = 1 (a subset of nested levels ending
    in single codes is again such a tree)."""
    keep = option.fractions >= DROP_BELOW * option.fractions.max()
    keep[-1] = True
    if keep.all():
        return option
    kept = option.fractions[keep]
    return AxisOption([lv for lv, k in zip(option.levels, keep.tolist()) if k],
                      kept / kept.sum(), option.branching)


def other_branchings(n: int, branching: int, spans: Spans, definition: Definition
                     ) -> list[AxisOption]:
    """The :data:`OTHER_BRANCHINGS` tree options of other branchings with the least worst span,
    each branching by its best geometric split (:func:`~.rectangles.axis_options`)."""
    best: dict[int, tuple[float, AxisOption]] = {}
    for opt in axis_options(n, "hierarchical"):
        if opt.branching in (1, branching):
            continue
        w = float(axis_variances(opt, spans, definition).max())
        if opt.branching not in best or w < best[opt.branching][0]:
            best[opt.branching] = (w, opt)
    ranked = sorted(best.values(), key=lambda t: t[0])
    return [opt for _, opt in ranked[:OTHER_BRANCHINGS]]


def product_worst(axes: tuple[AxisMinimax, AxisMinimax], definition: Definition,
                  total: float, weight: float) -> float:
    """w κ⁻¹ max V₁ · max V₂: the worst rectangle's expected variance (continuous model)."""
    return weight * axes[0].worst * axes[1].worst / kappa(definition, total)


def product_bound(axes: tuple[AxisMinimax, AxisMinimax], definition: Definition,
                  total: float, weight: float) -> float | None:
    """w κ⁻¹ L₁ L₂ ≤ the worst rectangle of every product split of the two trees (ρ-zCDP;
    None under pure ε)."""
    if axes[0].bound is None or axes[1].bound is None:
        return None
    return weight * axes[0].bound * axes[1].bound / kappa(definition, total)


def split_bound(axes: tuple[AxisMinimax, AxisMinimax], definition: Definition,
                total: float, weight: float) -> float | None:
    """w κ⁻¹ (H₁H₂ − M₁M₂ + G₁G₂) ≤ the worst rectangle of **every** split c_{lm} of the level
    pairs of the two trees, product or not (ρ-zCDP; None under pure ε): module docs, "All
    level-pair splits" — equal to :func:`product_bound` when both axis bounds are tight."""
    if definition is Definition.PURE or axes[0].dual is None or axes[1].dual is None:
        return None
    (h1, m1, g1), (h2, m2, g2) = axes[0].dual, axes[1].dual
    return weight * max(h1 * h2 - m1 * m2 + g1 * g2, 0.0) / kappa(definition, total)
