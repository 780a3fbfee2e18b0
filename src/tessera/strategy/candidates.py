r"""Candidate strategies for a workload W, from public inputs only (docs/theory.md §10).

A strategy is a workload of *counting queries* to measure (``measured``, its weights the
budget shares) and a reconstruction: generalised least squares from its noisy answers to
every query of W. Because the measured queries are counting queries, their noise is calibrated
exactly as a direct release is (Smith et al., Thm 6): from the strategy's own maximum weighted
overlap γ_w — exact or a proven upper bound, :func:`tessera.calibration.workload_cost` — and
the budget split in proportion to the shares, w_q ∝ √c_q (ρ-zCDP) or c_q (pure ε).

Candidates:

* ``direct`` — W itself, identical predicate queries measured once (:func:`merge_duplicates`);
* ``identity`` — marginal workloads: the marginals over W's maximal scopes; one-attribute
  workloads: the attribute's histogram;
* ``residual`` — marginal workloads: under ρ-zCDP and add/remove neighbours, every residual of
  W's downward closure measured alone through integer contrasts (:mod:`~.contrasts`:
  ResidualPlanner's mechanism and closed-form allocation with discrete noise); otherwise every
  marginal of the downward closure, allocation and GLS in the residual basis (:mod:`~.marginals`);
* ``hierarchical`` — one-attribute workloads (ranges, prefixes, hierarchies): the b-ary interval
  tree, b and the per-level allocation chosen by expected error (:mod:`~.intervals`); all
  rectangles (or 2-D prefixes) over two ordered attributes: the product of two 1-D trees,
  every level pair measured (:mod:`~.rectangles`, GLS by the Kronecker structure);
* ``identity`` of two ordered attributes: their 2-D histogram (:mod:`~.rectangles`).

Each candidate's expected variance of every query of W is computed in closed form with the
continuous model of the noise (σ² for the discrete Gaussian, 2b² for the discrete Laplace, both
upper bounds on the discrete variances); a release recomputes them exactly with the discrete
variances of the scales it used (:meth:`Strategy.estimate`).

(Over ~600 lines: every candidate builder beside the :class:`Strategy` record and the
reconstructions they share; the split optimisers they call live in their own modules —
:mod:`~.marginals`, :mod:`~.tree_allocation`, :mod:`~.contrasts`.)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from tessera.calibration.cost import workload_cost
from tessera.calibration.optimal import OPTIMAL_SECONDS, optimal_split, optimisable
from tessera.overlap import OverlapResult
from tessera.privacy import Definition, Neighbours
from tessera.schema.intervals import IntervalSet
from tessera.strategy.contrasts import ResidualContrasts
from tessera.strategy.intervals import (
    BRANCHINGS,
    MAX_CODES,
    IntervalDesign,
    Spans,
    level_costs,
    level_groups,
    tree_levels,
)
from tessera.strategy.marginals import (
    MarginalDesign,
    Scope,
    downward_closure,
    minimax_precisions,
    optimal_precisions,
)
from tessera.strategy.rectangles import (
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
#: Significant digits the shares are rounded to (the choice re-computes identically).
SHARE_DIGITS = 6
#: A measured marginal whose cost is below this fraction of the largest is dropped.
DROP_BELOW = 1e-4
#: Under ``max``, the other tree branchings (best first by their geometric split's worst query)
#: whose minimax level costs are tried beside the branching chosen for the total.
OTHER_BRANCHINGS = 1


class Reconstruction(Protocol):
    """GLS from the measured queries' noisy answers (expanded order) to W's queries."""

    name: str

    def variances(self, noise_variance: FloatArray) -> FloatArray: ...

    def answers(self, noisy: FloatArray, noise_variance: FloatArray) -> FloatArray: ...


@dataclass(frozen=True, eq=False)
class Strategy:
    """What to measure, its calibration and the expected error of every query of W.

    ``scales``: the noise scale of every measured query (b or σ) from ``overlap`` (γ_w of the
    measured queries with their shares); ``expected``: Var of every query of W (expanded
    order) under the continuous noise model; ``total``: Σ_q w_q ``expected[q]``."""

    name: str
    workload: Workload
    measured: Workload
    reconstruction: Reconstruction
    overlap: OverlapResult
    scales: FloatArray
    expected: FloatArray
    total: float
    #: residual contrasts (:mod:`~.contrasts`): the measured families are charged as marginals
    #: but their noise is added to these integer contrasts, σ_A = ``scales`` × Δ_A
    contrasts: ResidualContrasts | None = None
    #: how ``scales`` split the budget: ``shares`` (the measured workload's weights, set by the
    #: candidate's closed form) or ``optimal`` (direct: the least total variance,
    #: :mod:`tessera.calibration.optimal`)
    split: str = "shares"

    @property
    def rmse(self) -> float:
        """√(mean expected variance) over the released queries (weight > 0)."""
        released = self.workload.weight_array() > 0
        return math.sqrt(float(np.mean(self.expected[released])))

    def estimate(self, noisy: npt.ArrayLike, noise_variance: npt.ArrayLike
                 ) -> tuple[FloatArray, FloatArray]:
        """(answers, exact variances) of W's queries from the measured noisy answers and the
        exact variance of each measured query's noise."""
        v = np.asarray(noise_variance, dtype=np.float64)
        y = np.asarray(noisy, dtype=np.float64)
        return self.reconstruction.answers(y, v), self.reconstruction.variances(v)


# -- reconstructions --------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Copy:
    """Direct: query q of W is measured query ``index[q]`` (duplicates share one)."""

    index: IntArray
    name: str = "direct (each query's own noisy answer; duplicates measured once)"

    def variances(self, noise_variance: FloatArray) -> FloatArray:
        return noise_variance[self.index]

    def answers(self, noisy: FloatArray, noise_variance: FloatArray) -> FloatArray:
        return noisy[self.index]


@dataclass(frozen=True, eq=False)
class MarginalGLS:
    """GLS in the residual basis (:class:`~.marginals.MarginalDesign`): W's families are the
    targets (``target_of[f]`` = the design's target of family f)."""

    design: MarginalDesign
    starts: IntArray  # first measured index of each measured scope
    target_of: tuple[int, ...]
    name: str = "GLS, residual basis (ResidualPlanner closed form)"

    def _precisions(self, noise_variance: FloatArray) -> FloatArray:
        return 1.0 / noise_variance[self.starts]

    def variances(self, noise_variance: FloatArray) -> FloatArray:
        per_target = self.design.variances(self._precisions(noise_variance))
        return np.concatenate([np.full(self.design.cells(self.design.targets[t]),
                                       per_target[t]) for t in self.target_of])

    def answers(self, noisy: FloatArray, noise_variance: FloatArray) -> FloatArray:
        d = self.design
        bounds = list(self.starts) + [len(noisy)]
        y = {a: noisy[bounds[k]:bounds[k + 1]] for k, a in enumerate(d.measured)}
        u = dict(zip(d.measured, self._precisions(noise_variance)))
        est = d.reconstruct(y, u)
        return np.concatenate([est[d.targets[t]].ravel() for t in self.target_of])


@dataclass(frozen=True, eq=False)
class IntervalGLS:
    """GLS over one attribute's histogram (:class:`~.intervals.IntervalDesign`)."""

    design: IntervalDesign
    starts: IntArray  # first measured index of each level (its groups follow in order)
    spans: Spans
    name: str = "GLS over one attribute (dense n × n, tree levels)"

    def _split(self, noise_variance: FloatArray) -> FloatArray:
        return 1.0 / noise_variance[self.starts]

    def variances(self, noise_variance: FloatArray) -> FloatArray:
        return self.design.variances(self._split(noise_variance), self.spans)

    def answers(self, noisy: FloatArray, noise_variance: FloatArray) -> FloatArray:
        bounds = list(self.starts) + [len(noisy)]
        ys = [noisy[bounds[k]:bounds[k + 1]] for k in range(len(self.starts))]
        return self.design.reconstruct(ys, self._split(noise_variance), self.spans)


@dataclass(frozen=True, eq=False)
class ContrastGLS:
    """GLS from residual contrasts (:class:`~.contrasts.ResidualContrasts`): the measured
    workload is the tautology (∅) then one marginal family per residual scope, ``starts[k]``
    the first measured index of scope k; the noisy values are each scope's contrasts in turn;
    ``noise_variance[q]`` is the variance of the contrast noise of q's family. W's family f
    reads target ``target_of[f]`` (−1: weight 0, not released: NaN, variance ∞)."""

    contrasts: ResidualContrasts
    starts: IntArray
    target_of: tuple[int, ...]
    cells: tuple[int, ...]  # of every family of W
    name: str = ("GLS from residual contrasts (ResidualPlanner's mechanism, integer Helmert "
                 "contrasts, discrete Gaussian)")

    def _by_scope(self, noise_variance: FloatArray) -> dict[Scope, float]:
        return {s: float(noise_variance[k]) for s, k in zip(self.contrasts.scopes, self.starts)}

    def _expand(self, per_target: dict[Scope, FloatArray], fill: float) -> FloatArray:
        rc = self.contrasts
        return np.concatenate([per_target[rc.targets[t]].ravel() if t >= 0 else
                               np.full(n, fill) for t, n in zip(self.target_of, self.cells)])

    def variances(self, noise_variance: FloatArray) -> FloatArray:
        var = self.contrasts.variances(self._by_scope(noise_variance))
        return self._expand(var, np.inf)

    def answers(self, noisy: FloatArray, noise_variance: FloatArray) -> FloatArray:
        return self._expand(self.contrasts.reconstruct(self.contrasts.split(noisy)), np.nan)


# -- the continuous noise model ---------------------------------------------------------------
def model_variance(definition: Definition) -> Callable[[FloatArray], FloatArray]:
    """Var of the noise of scale s: σ² (Gaussian, ρ-zCDP) or 2b² (Laplace, pure ε); both
    bound the discrete mechanisms' variances from above."""
    if definition is Definition.PURE:
        return lambda s: 2.0 * s * s
    return lambda s: s * s


def shares_for(costs: FloatArray, definition: Definition) -> FloatArray:
    """Weights w with the budget split c_q ∝ h(w_q): w = √c (zCDP) or c (pure), normalised
    to max 1 and rounded to :data:`SHARE_DIGITS` significant digits."""
    w = np.sqrt(costs) if definition is not Definition.PURE else np.asarray(costs, float)
    w = w / w.max()
    return np.array([float(f"{x:.{SHARE_DIGITS}g}") for x in w])


# -- candidates -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Context:
    """The public inputs a candidate is calibrated with."""

    definition: Definition
    total: float
    neighbours: Neighbours
    time_limit: float | None = 60.0
    #: the error the split minimises (:func:`direct`): ``total`` or ``max``
    objective: str = "total"
    #: whether :func:`direct` may optimise its split (``False``: the weights as shares, as
    #: certificates made before the optimal split record it)
    optimise_direct: bool = True
    #: under ``max``, whether marginal and tree candidates take the minimax split (``False``:
    #: the better of the total-optimal and the equal split, as certificates made before the
    #: minimax record it)
    minimax: bool = True


def calibrate(ctx: Context, workload: Workload, measured: Workload,
               reconstruction: Reconstruction, name: str) -> Strategy:
    """The strategy measuring ``measured`` (its shares the budget split) for W: its own γ_w,
    the noise scales, and W's expected variances under the continuous model."""
    cost = workload_cost(measured, definition=ctx.definition, neighbours=ctx.neighbours,
                         time_limit=ctx.time_limit)
    scales = cost.scales(ctx.total)
    expected = reconstruction.variances(model_variance(ctx.definition)(scales))
    w = workload.weight_array()
    total = float(w[w > 0] @ expected[w > 0])  # (weight 0: not released, variance ∞)
    return Strategy(name, workload, measured, reconstruction, cost.weighted, scales, expected,
                    total)


def merge_duplicates(workload: Workload) -> tuple[Workload, IntArray]:
    """W with identical predicate queries kept once (the largest weight, the first name), and
    the measured index of every query of W (expanded order). W itself when nothing repeats
    (one lazy range family never repeats a query: :mod:`tessera.workload.ranges`)."""
    fams = workload.range_families
    if fams is not None and len(fams) == 1:
        return workload, np.arange(workload.n_queries, dtype=np.int64)
    first: dict[object, int] = {}
    index = np.empty(len(workload.queries), dtype=np.int64)
    keep: list[int] = []
    for i, q in enumerate(workload.queries):
        k = first.setdefault(q, len(keep))
        if k == len(keep):
            keep.append(i)
        index[i] = k
    cells = np.arange(len(keep), len(keep) + workload.n_cells, dtype=np.int64)
    if len(keep) == len(workload.queries):
        return workload, np.concatenate([index, cells])
    weights = [0.0] * len(keep)
    for i, k in enumerate(index):
        weights[k] = max(weights[k], workload.weights[i])
    measured = Workload(workload.domain, tuple(workload.queries[i] for i in keep),
                        tuple(workload.names[i] for i in keep), tuple(weights), None,
                        workload.partitions)
    return measured, np.concatenate([index, cells])


def direct(workload: Workload, ctx: Context) -> Strategy:
    """W itself, duplicates measured once. The split: ``total`` — the budget shares are W's
    weights (the plan's ``shares``, c_q ∝ w_q² under zCDP, ∝ w_q under pure ε); ``max`` — the
    shares are √w_q, which minimises max_q w_q Var_q exactly: any split with
    max_q w_q Var_q = t pays c_q ≥ w_q/(2t) (zCDP; Var = 1/(2c)) so γ(w)/(2t) ≤ ρ, and
    c_q = ρ w_q/γ(w) attains t = γ(w)/(2ρ) (pure ε alike with Var = 2/c², c ∝ √w).

    Under ``total``, predicate queries of one weight get the split of least total variance
    instead (:mod:`tessera.calibration.optimal`, cutting planes; kept only if better than the
    uniform one, which it is unless the optimiser found nothing better in its time)."""
    measured, index = merge_duplicates(workload)
    if ctx.objective == "max":
        measured = root_weights(measured)
    s = calibrate(ctx, workload, measured, Copy(index), "direct")
    if ctx.objective != "total" or not ctx.optimise_direct or not optimisable(measured):
        return s
    limit = OPTIMAL_SECONDS if ctx.time_limit is None else min(ctx.time_limit, OPTIMAL_SECONDS)
    split = optimal_split(measured, ctx.definition, ctx.total, ctx.neighbours, time_limit=limit)
    expected = s.reconstruction.variances(model_variance(ctx.definition)(split.scales))
    w = workload.weight_array()
    total = float(w[w > 0] @ expected[w > 0])
    if total >= s.total:
        return s
    return dataclasses.replace(s, scales=split.scales, expected=expected, total=total,
                               split="optimal")


def root_weights(workload: Workload) -> Workload:
    """The workload with every weight replaced by its square root (itself when all are 0/1)."""
    w = workload.weight_array()
    if np.all((w == 0) | (w == 1)):
        return workload
    families = tuple(dataclasses.replace(p, weight=math.sqrt(p.weight))
                     for p in workload.partitions)
    return Workload(workload.domain, workload.queries, workload.names,
                    tuple(math.sqrt(x) for x in workload.weights), workload.sources, families)


def marginal_scopes(workload: Workload) -> list[Scope] | None:
    """The scope of every family when W is marginals only (no predicates, no grouping)."""
    if workload.queries or not workload.partitions:
        return None
    if any(any(g is not None for g in p.groups) for p in workload.partitions):
        return None
    return [p.attributes for p in workload.partitions]


def marginal_strategy(workload: Workload, ctx: Context, kind: str) -> Strategy | None:
    """``identity`` (W's maximal scopes) or ``residual`` (the downward closure), the
    allocation error-optimal for the objective: Σ_q w_q Var_q (``total``,
    :func:`~.marginals.optimal_precisions`) or max_q w_q Var_q (``max``,
    :func:`~.marginals.minimax_precisions`: a target's weight is then the largest of its
    families', the worst cell being what counts)."""
    scopes = marginal_scopes(workload)
    if scopes is None:
        return None
    dom = workload.domain
    targets = tuple(dict.fromkeys(scopes))
    weights = np.zeros(len(targets))  # Σ of the families' weights: the total's terms
    largest = np.zeros(len(targets))  # the largest: what the worst cell counts
    for p, s in zip(workload.partitions, scopes):
        weights[targets.index(s)] += p.weight
        largest[targets.index(s)] = max(largest[targets.index(s)], p.weight)
    if kind == "identity":
        measured_scopes = tuple(s for s in targets
                                if not any(set(s) < set(t) for t in targets))
    else:
        measured_scopes = downward_closure(targets)
    sizes = {a: dom[a].size for a in dom.names}
    zcdp = ctx.definition is not Definition.PURE
    full = MarginalDesign(sizes, measured_scopes, targets)

    def dropped(costs: FloatArray) -> tuple[tuple[Scope, ...], FloatArray]:
        """The measured scopes and costs without those below :data:`DROP_BELOW` of the
        largest, when the targets stay covered."""
        keep = costs >= DROP_BELOW * costs.max()
        kept = tuple(s for s, k in zip(measured_scopes, keep) if k)
        if all(any(set(t) <= set(a) for a in kept) for t in targets):
            return kept, costs[keep]
        return measured_scopes, costs

    def measure(scopes_costs: tuple[tuple[Scope, ...], FloatArray]) -> Strategy:
        measured_at, costs = scopes_costs
        shares = shares_for(costs, ctx.definition)
        families = [Partition.marginal(dom, list(s), float(w),
                                       name=f"{kind}(" + ",".join(s) + ")")
                    for s, w in zip(measured_at, shares)]
        measured = Workload.of_families(dom, families)
        starts = measured.family_starts[:-1].astype(np.int64)
        design = full if measured_at == measured_scopes else MarginalDesign(
            sizes, measured_at, targets)
        recon = MarginalGLS(design, starts, tuple(targets.index(s) for s in scopes))
        return calibrate(ctx, workload, measured, recon, kind)

    optimal = dropped(optimal_precisions(full, weights, zcdp=zcdp, total=ctx.total))
    if ctx.objective != "max":
        return measure(optimal)
    # the exact minimax split, with the total-optimal and the equal split kept as fallbacks
    # (by the measured worst weighted cell, after the shares' rounding) so that under ``max``
    # the split is never worse than either (issue 18 item 2; docs/theory.md §10.4)
    splits = [optimal, (optimal[0], np.ones(len(optimal[0])))]
    if ctx.minimax:
        splits.insert(0, dropped(minimax_precisions(full, largest, zcdp=zcdp,
                                                    total=ctx.total)))
    best = measure(splits[0])
    for split in splits[1:]:
        s = measure(split)
        if worst_cell(s) < worst_cell(best):
            best = s
    return best


def worst_cell(s: Strategy) -> float:
    """max_q w_q Var_q over W's released queries: the ``max`` objective of a candidate."""
    w = s.workload.weight_array()
    return float(np.max(w[w > 0] * s.expected[w > 0]))


def contrast_layout(strategy: Strategy) -> tuple[ResidualContrasts, IntArray]:
    """(the residual contrasts, the first measured index of each residual's family) of a
    residual-contrast strategy (:func:`contrast_strategy`)."""
    recon = strategy.reconstruction
    if strategy.contrasts is None or not isinstance(recon, ContrastGLS):
        raise TypeError("not a residual-contrast strategy")
    return strategy.contrasts, recon.starts


def contrast_strategy(workload: Workload, ctx: Context) -> Strategy | None:
    """``residual`` through integer contrasts (:mod:`~.contrasts`), for marginal workloads under
    ρ-zCDP and add/remove neighbours: the closed-form optimal ρ_A per residual, charged as a
    marginal family per residual (the tautology for ∅) with shares w_A ∝ √ρ_A, so that the
    plan's per-row cost of family A is ρ_A and its σ per unit sensitivity 1/√(2ρ_A)."""
    scopes = marginal_scopes(workload)
    if (scopes is None or ctx.definition is Definition.PURE
            or ctx.neighbours is not Neighbours.ADD_REMOVE):
        return None
    dom = workload.domain
    weight: dict[Scope, float] = {}
    for p, s in zip(workload.partitions, scopes):
        weight[s] = weight.get(s, 0.0) + p.weight
    # a target of weight 0 is not released (its answers withheld): nothing is spent on it
    targets = tuple(s for s in weight if weight[s] > 0)
    if not targets:
        return None
    weights = np.array([weight[s] for s in targets])
    rc = ResidualContrasts({a: dom[a].size for a in dom.names}, targets)
    costs = (rc.minimax_costs(weights, ctx.total) if ctx.objective == "max"
             else rc.optimal_costs(weights, ctx.total))
    shares = shares_for(costs, ctx.definition)
    families = [Partition.marginal(dom, list(s), float(w), name="residual(" + ",".join(s) + ")")
                for s, w in zip(rc.scopes[1:], shares[1:])]
    measured = Workload.from_sql(["TRUE"], dom, names=["residual()"],
                                 weights=[float(shares[0])])
    measured = Workload(dom, measured.queries, measured.names, measured.weights, None,
                        tuple(families))
    starts = np.concatenate([[0], measured.family_starts[:-1]]).astype(np.int64)
    recon = ContrastGLS(rc, starts, tuple(targets.index(s) if s in targets else -1
                                          for s in scopes),
                        tuple(p.n_cells_in(dom) for p in workload.partitions))
    cost = workload_cost(measured, definition=ctx.definition, neighbours=ctx.neighbours,
                         time_limit=ctx.time_limit)
    scales = cost.scales(ctx.total)
    delta = np.ones(measured.n_queries)
    for k, s in enumerate(rc.scopes):
        end = starts[k + 1] if k + 1 < len(starts) else measured.n_queries
        delta[starts[k]:end] = math.sqrt(rc.sensitivity2(s))
    expected = recon.variances(model_variance(ctx.definition)(scales * delta))
    w = workload.weight_array()
    total = float(w[w > 0] @ expected[w > 0])
    return Strategy("residual", workload, measured, recon, cost.weighted, scales, expected,
                    total, rc)


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
    query instead), for one-attribute workloads."""
    found = one_attribute(workload)
    if found is None:
        return None
    a, spans = found
    dom = workload.domain
    n = dom[a].size
    zcdp = ctx.definition is not Definition.PURE
    w = workload.weight_array()
    options: list[tuple[list[list[tuple[int, int]]], FloatArray]] = []
    if kind == "identity":
        options.append(([[(c, c + 1) for c in range(n)]], np.array([ctx.total])))
    else:
        for b in BRANCHINGS:
            if b >= n:
                continue
            levels = tree_levels(n, b)
            for r in sorted({1.0, b ** (1 / 3), b ** 0.5}):
                options.append((levels, level_costs(len(levels), ctx.total, r)))
    best: tuple[float, list[list[tuple[int, int]]], FloatArray] | None = None
    gram = spans.gram(n, np.where(w > 0, w, 0.0))  # (weight 0: not released, not scored)
    for levels, costs in options:
        design = IntervalDesign(n, tuple(level_groups(levels, n)))
        u = 2.0 * costs if zcdp else 0.5 * costs * costs
        err = design.total(u, gram)
        if best is None or err < best[0]:
            best = (err, levels, costs)
    assert best is not None
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
        # split is never worse than either (issue 18 item 2; docs/theory.md §10.4)
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
    (:mod:`~.rectangles`); the total error is separable, so each axis is chosen alone."""
    fam = two_attributes(workload)
    if fam is None:
        return None
    axes = tuple(best_axis(n, fam.kind, kind, ctx.definition)[0] for n in fam.sizes)
    if kind == "hierarchical" and all(a.branching == 1 for a in axes):
        return None  # (no axis has a tree: the identity candidate is the same design)
    costs = ctx.total * np.multiply.outer(axes[0].fractions, axes[1].fractions).ravel()
    name = kind if kind == "identity" else (
        f"hierarchical(b={axes[0].branching}x{axes[1].branching})")
    measured = product_measured(workload, fam, axes, shares_for(costs, ctx.definition), kind)
    recon = KroneckerGLS(fam, (axes[0], axes[1]),
                         (precision_factors(axes[0].fractions, ctx.definition),
                          precision_factors(axes[1].fractions, ctx.definition)),
                         kappa(ctx.definition, ctx.total),
                         measured.family_starts[:-1].astype(np.int64))
    return calibrate(ctx, workload, measured, recon, name)
