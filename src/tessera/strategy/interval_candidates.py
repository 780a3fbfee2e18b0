"""Candidates over ordered attributes (docs/theory.md §10.5): one attribute — its histogram
(``identity``) or the b-ary interval tree (``hierarchical``, branching and per-level allocation
chosen by expected error, :mod:`~.intervals`, :mod:`~.tree_allocation`) — and all rectangles or
2-D prefixes of two attributes (the product of two 1-D trees or the 2-D histogram,
:mod:`~.rectangles`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tessera.errors import TesseraError
from tessera.privacy import Definition
from tessera.schema.intervals import IntervalSet
from tessera.strategy.context import Context, calibrate, shares_for
from tessera.strategy.intervals import (
    BRANCHINGS,
    MAX_CODES,
    IntervalDesign,
    Spans,
    level_costs,
    level_groups,
    tree_levels,
)
from tessera.strategy.reconstruction import IntervalGLS, Strategy, worst_cell
from tessera.strategy.rectangle_minimax import minimax_axis
from tessera.strategy.rectangles import (
    AxisOption,
    KroneckerGLS,
    best_axis,
    kappa,
    precision_factors,
    product_measured,
    two_attributes,
)
from tessera.strategy.tree_allocation import (
    Quadratic,
    family_quadratic,
    minimax_level_costs,
    optimal_level_costs,
)
from tessera.workload.families import Partition
from tessera.workload.query import Query
from tessera.workload.workload import Workload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


#: Under ``max``, the other tree branchings (best first by their geometric split's worst query)
#: whose minimax level costs are tried beside the branching chosen for the total.
OTHER_BRANCHINGS = 1


def one_attribute(workload: Workload) -> tuple[str, Spans] | None:
    """(attribute, spans of every query of W) when every query of W constrains at most one
    and the same attribute (predicate conjunctions, and families over that attribute)."""
    dom = workload.domain
    fams = workload.range_families
    if fams is not None:  # lazy range families: their spans, no query objects
        if len({f.attributes for f in fams}) != 1 or len(fams[0].attributes) != 1:
            return None
        if fams[0].sizes[0] > MAX_CODES:
            return None
        bounds = [f.bounds(0) for f in fams]
        lo_all = np.concatenate([lo for lo, _ in bounds])
        return fams[0].attributes[0], Spans.ranges(lo_all,
                                                    np.concatenate([hi for _, hi in bounds]))
    attrs = {a for q in workload.queries if isinstance(q, Query) for a in q.scope}
    attrs |= {a for p in workload.partitions for a in p.attributes}
    if len(attrs) != 1 or any(not isinstance(q, Query) for q in workload.queries):
        return None
    if any(len(p.attributes) != 1 for p in workload.partitions):
        return None
    (a,) = attrs
    n = dom[a].size
    if n > MAX_CODES:
        return None
    lo: list[int] = []
    hi: list[int] = []
    owner: list[int] = []
    k = 0
    for q in workload.queries:
        assert isinstance(q, Query)
        cov = q.predicate(a)
        for s, e in ((0, n),) if cov is None else cov.spans:
            lo.append(s)
            hi.append(e)
            owner.append(k)
        k += 1
    for p in workload.partitions:
        for g in p.axis_groups(dom, 0):
            for s, e in g.spans:
                lo.append(s)
                hi.append(e)
                owner.append(k)
            k += 1
    return a, Spans(np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64),
                    np.array(owner, dtype=np.int64), k)


def interval_strategy(workload: Workload, ctx: Context, kind: str) -> Strategy | None:
    """``identity`` (the attribute's histogram) or ``hierarchical`` (the best branching in
    :data:`~.intervals.BRANCHINGS` with per-level costs ∝ r^l, r ∈ {1, b^{1/3}, b^{1/2}}, then
    for a lazy range or prefix family its per-level costs optimised for the total error,
    :mod:`~.tree_allocation`; under ``max`` that tree's level costs minimise the worst weighted
    query instead), for one-attribute workloads. None also for ``hierarchical`` when no
    branching of :data:`~.intervals.BRANCHINGS` is below the attribute's size n (n ≤ 2: a
    tree would be the root and the leaves, the identity candidate plus the total): the
    candidate is then not offered (:func:`no_tree_reason`)."""
    found = one_attribute(workload)
    if found is None:
        return None
    a, spans = found
    dom = workload.domain
    n = dom[a].size
    if kind == "hierarchical" and not tree_branchings(n):
        return None
    zcdp = ctx.definition is not Definition.PURE
    w = workload.weight_array()
    options: list[tuple[list[list[tuple[int, int]]], FloatArray]] = []
    if kind == "identity":
        options.append(([[(c, c + 1) for c in range(n)]], np.array([ctx.total])))
    else:
        for b in tree_branchings(n):
            levels = tree_levels(n, b)
            for r in sorted({1.0, b ** (1 / 3), b ** 0.5}):
                options.append((levels, level_costs(len(levels), ctx.total, r)))
        if not options:  # every branching b ≥ n (n = 2): a tree would be the histogram itself
            return None
    best: tuple[float, list[list[tuple[int, int]]], FloatArray] | None = None
    gram = spans.gram(n, np.where(w > 0, w, 0.0))  # (weight 0: not released, not scored)
    for levels, costs in options:
        design = IntervalDesign(n, tuple(level_groups(levels, n)))
        u = 2.0 * costs if zcdp else 0.5 * costs * costs
        err = design.total(u, gram)
        if best is None or err < best[0]:
            best = (err, levels, costs)
    if best is None:  # (not reached: identity has one option, a tree at least one branching)
        raise TesseraError(f"internal error: no {kind} design over {a!r} ({n} values)")
    err, levels, costs = best
    quad = _quadratic(workload)
    if kind == "hierarchical" and quad is not None:  # the best branching's costs, optimised
        design = IntervalDesign(n, tuple(level_groups(levels, n)))
        costs, _ = optimal_level_costs(design, levels, costs, ctx.total, zcdp, gram, quad)
    design = IntervalDesign(n, tuple(level_groups(levels, n)))

    def measure(costs: FloatArray, levels: list[list[tuple[int, int]]] = levels,
                design: IntervalDesign = design) -> Strategy:
        shares = shares_for(costs, ctx.definition)
        b = len(levels[1]) if len(levels) > 1 else 2
        if kind == "identity":
            families = [Partition.marginal(dom, [a], 1.0, name=f"identity({a})")]
        else:
            families = [Partition.grid(dom, {a: [IntervalSet.range(s, e) for s, e in level]},
                                       float(wt), f"tree{b}({a})[{lvl}]", "hierarchy")
                        for lvl, (level, wt) in enumerate(zip(levels, shares))]
        measured = Workload.of_families(dom, families)
        recon = IntervalGLS(design, measured.family_starts[:-1].astype(np.int64), spans)
        return calibrate(ctx, workload, measured, recon,
                         kind if kind == "identity" else f"hierarchical(b={b})")

    best = measure(costs)
    if ctx.objective == "max" and kind != "identity":
        # the branching is chosen for the total; under ``max`` its level costs minimise the
        # worst weighted query (:func:`~.tree_allocation.minimax_level_costs`, from the better
        # of the total-optimal and the equal split), those two kept as fallbacks so that the
        # split is never worse than either (docs/theory.md §10.4)
        even = measure(level_costs(len(levels), ctx.total, 1.0))
        start = costs if worst_cell(best) <= worst_cell(even) else level_costs(
            len(levels), ctx.total, 1.0)
        if worst_cell(even) < worst_cell(best):
            best = even
        if ctx.minimax:
            # and the branching: also the best other branching by the worst query of its best
            # geometric split (the minimax can reorder them: prefixes over 1,024 values,
            # b = 2 beats the total's b = 3 by 10% under zCDP; docs/benchmarks.md)
            weights = np.where(w > 0, w, 0.0)
            tries = [(design, levels, start)]
            tries += other_branchings(options, levels, spans, weights, zcdp)[:OTHER_BRANCHINGS]
            for design_o, levels_o, start_o in tries:
                minimax, _, _ = minimax_level_costs(design_o, levels_o, start_o, ctx.total,
                                                    zcdp, spans, weights)
                s = measure(minimax, levels_o, design_o)
                if worst_cell(s) < worst_cell(best):
                    best = s
    return best


def tree_branchings(n: int) -> tuple[int, ...]:
    """The branchings of :data:`~.intervals.BRANCHINGS` a tree over n codes can have (b < n:
    a level strictly between the root and the leaves' parents)."""
    return tuple(b for b in BRANCHINGS if b < n)


def no_tree_reason(workload: Workload) -> str | None:
    """Why ``hierarchical`` is not offered for a one-attribute workload (None: it is, or W is
    not over one attribute): its attribute has too few values for any branching."""
    found = one_attribute(workload)
    if found is None:
        return None
    n = workload.domain[found[0]].size
    if tree_branchings(n):
        return None
    return (f"attribute {found[0]!r} has {n} value{'s' if n != 1 else ''}: an interval tree "
            f"needs a branching b < n (b ≥ {min(BRANCHINGS)}), i.e. at least "
            f"{min(BRANCHINGS) + 1} values")


def other_branchings(options: list[tuple[list[list[tuple[int, int]]], FloatArray]],
                     chosen: list[list[tuple[int, int]]], spans: Spans, weights: FloatArray,
                     zcdp: bool) -> list[tuple[IntervalDesign, list[list[tuple[int, int]]],
                                               FloatArray]]:
    """(design, levels, costs) of every tree option other than ``chosen``: each branching's
    geometric split with the least worst weighted query, those branchings in increasing order
    of it (one vectorised pass over every query per option)."""
    best: dict[int, tuple[float, IntervalDesign, list[list[tuple[int, int]]], FloatArray]] = {}
    for levels, costs in options:
        if levels is chosen:
            continue
        n = levels[-1][-1][1]
        design = IntervalDesign(n, tuple(level_groups(levels, n)))
        worst = float(np.max(weights * design.variances(
            2.0 * costs if zcdp else 0.5 * costs * costs, spans)))
        if id(levels) not in best or worst < best[id(levels)][0]:
            best[id(levels)] = (worst, design, levels, costs)
    return [(d, lv, c) for _, d, lv, c in sorted(best.values(), key=lambda t: t[0])]


def _quadratic(workload: Workload) -> Quadratic | None:
    """x ↦ xᵀMx column-wise for the tree optimiser (:mod:`~.tree_allocation`), for one lazy
    range or prefix family (closed form, O(n²)); None otherwise: other one-attribute workloads
    keep the geometric splits (their optimum tends to collapse onto one level, e.g. the leaves
    for point queries — the identity candidate — and the audit's planted-γ case relies on a
    tree that spends on several levels)."""
    fams = workload.range_families
    if fams is not None and len(fams) == 1:
        return family_quadratic(fams[0].kind, fams[0].weight)
    return None


def rectangle_strategy(workload: Workload, ctx: Context, kind: str) -> Strategy | None:
    """``identity`` (the 2-D histogram) or ``hierarchical`` (the product of the best 1-D tree
    of each axis, costs c·α_l β_m over the level pairs) for one lazy 2-D range family
    (:mod:`~.rectangles`); the total error is separable, so each axis is chosen alone. Under
    ``max`` (``ctx.minimax_rectangles``) the worst rectangle is separable too: each axis takes
    its 1-D minimax design (:mod:`~.rectangle_minimax`), kept when its calibrated worst
    rectangle is below the total's split's."""
    fam = two_attributes(workload)
    if fam is None:
        return None
    axes = tuple(best_axis(n, fam.kind, kind, ctx.definition)[0] for n in fam.sizes)
    if kind == "hierarchical" and all(a.branching == 1 for a in axes):
        return None  # (no axis has a tree: the identity candidate is the same design)

    def measure(axes: tuple[AxisOption, ...]) -> Strategy:
        costs = ctx.total * np.multiply.outer(axes[0].fractions, axes[1].fractions).ravel()
        name = kind if kind == "identity" else (
            f"hierarchical(b={axes[0].branching}x{axes[1].branching})")
        measured = product_measured(workload, fam, axes, shares_for(costs, ctx.definition),
                                    kind)
        recon = KroneckerGLS(fam, (axes[0], axes[1]),
                             (precision_factors(axes[0].fractions, ctx.definition),
                              precision_factors(axes[1].fractions, ctx.definition)),
                             kappa(ctx.definition, ctx.total),
                             measured.family_starts[:-1].astype(np.int64))
        return calibrate(ctx, workload, measured, recon, name)

    best = measure(axes)
    if (ctx.objective == "max" and ctx.minimax and ctx.minimax_rectangles
            and kind == "hierarchical"):
        minimax = tuple(minimax_axis(n, fam.kind, ctx.definition, a).option
                        for n, a in zip(fam.sizes, axes))
        if any(m is not a for m, a in zip(minimax, axes)):
            s = measure(minimax)
            if worst_cell(s) < worst_cell(best):
                best = s
    return best
