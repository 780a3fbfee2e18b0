"""The adaptive synthesizer's view of its current model (docs/theory.md §5, "the adaptive
method"): the model built from the measured groups, its estimate of every candidate, and the
normaliser N. Everything here is post-processing of the noisy measurements.

* :func:`build_model`: P_θ over the maximal measured scopes and the measured wide queries
  (:class:`tessera.estimation.maxent.ScopeModel`);
* :class:`ModelView`: N μ̂_r for candidates r — exact when r lies in a measured scope or in a
  clique of the junction tree, or when the whole domain has no more points than the sample
  would have rows (then from P_θ over the domain,
  :meth:`~tessera.estimation.maxent.ScopeModel.joint`), else from i.i.d. samples of the model
  (their distinct rows with multiplicities: :func:`compress`);
* :func:`noisy_total`: N̂ under add/remove, the inverse-variance weighted mean of the noisy
  marginals' sums.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from tessera.estimation.maxent import FitResult, GroupMeasurement, ScopeModel
from tessera.estimation.tree_marginals import holders, tree_cost, tree_marginal
from tessera.schema.domain import Domain
from tessera.synth.candidates import Candidate
from tessera.synth.sensitive import Evaluator
from tessera.workload.workload import Workload

__all__ = [
    "ModelView",
    "build_model",
    "clique_index",
    "compress",
    "from_cliques",
    "joint_marginals",
    "maximal_scopes",
    "model_scopes",
    "model_structure",
    "noisy_total",
]

FloatArray = npt.NDArray[np.float64]


class ModelView:
    """The current model's marginals of every candidate: exact from a measured scope or a
    clique that contains it, or from P_θ over a domain of at most ``sample_size`` points; else
    from a sample of the model (post-processing)."""

    def __init__(self, domain: Domain, cands: Sequence[Candidate], workload: Workload,
                 sample_size: int, rng: np.random.Generator, exact_work: int = 0) -> None:
        self.domain = domain
        self.exact_work = exact_work
        self.sizes = tuple(domain.sizes)
        self.cands = cands
        self.sample_size = sample_size
        self.rng = rng
        wide = [c for c in cands if not c.is_marginal]
        self._wide_eval = Evaluator(domain, [workload.queries[c.query] for c in wide]) \
            if wide else None
        self._wide_pos = {c.query: k for k, c in enumerate(wide)}

    def estimates(self, model: ScopeModel, fitted: FitResult, which: Sequence[int],
                  total: float) -> list[FloatArray]:
        mu = fitted.marginals
        tree: tuple[list[tuple[tuple[int, ...], FloatArray]], list[int]] | None = None
        index: dict[int, list[int]] = {}
        need_sample = []
        out: dict[int, FloatArray] = {}
        for i in which:
            c = self.cands[i]
            if c.is_marginal:
                p = model.project(mu, c.scope)
                if p is None:
                    if tree is None:  # one pass over the junction tree, if needed
                        tree = model.clique_tree(fitted.theta) or ([], [])
                        index = clique_index(tree[0])
                    p = from_cliques(tree[0], c.scope, index)
                if p is not None:
                    out[i] = total * p
                    continue
            elif c.query in model.query_position:
                out[i] = np.array([total * mu[model.query_position[c.query]]])
                continue
            need_sample.append(i)
        joint = model.joint(fitted.theta, self.sample_size) if need_sample else None
        if joint is not None:  # a domain no larger than the sample: exact marginals
            marg = [i for i in need_sample if self.cands[i].is_marginal]
            sums = joint_marginals(joint, [self.cands[i].scope for i in marg])
            for i in marg:
                out[i] = total * sums[self.cands[i].scope].ravel()
            need_sample = [i for i in need_sample if i not in out]
        if need_sample and tree is not None and tree[0] and self.exact_work > 0:
            exact = self._tree_marginals(tree, need_sample)
            if exact is not None:
                out.update((i, total * p) for i, p in exact.items())
                need_sample = [i for i in need_sample if i not in out]
        if need_sample:
            columns, weights = compress(
                model.sample(fitted.theta, self.sample_size, self.rng, method="iid",
                             columns=True), self.sizes)
            for i in need_sample:
                c = self.cands[i]
                if c.is_marginal:
                    idx = np.ravel_multi_index(tuple(columns[a] for a in c.scope),
                                               tuple(self.sizes[a] for a in c.scope))
                    h = np.bincount(idx, weights=weights, minlength=c.cells)
                else:
                    assert self._wide_eval is not None
                    hit = self._wide_eval.matrix(columns.T)[self._wide_pos[c.query]]
                    h = np.array([float(weights[hit].sum())])
                out[i] = total * h / float(self.sample_size)
        return [out[i] for i in which]

    def _tree_marginals(self, tree: tuple[list[tuple[tuple[int, ...], FloatArray]], list[int]],
                        which: Sequence[int]) -> dict[int, FloatArray] | None:
        """P_θ(x_r) of every marginal in ``which`` from the clique tree
        (:func:`~tessera.estimation.tree_marginals.tree_marginal`), or None — the sample is
        then drawn for all of them — when their work
        (:func:`~tessera.estimation.tree_marginals.tree_cost`, public) exceeds
        ``exact_work`` cells, when a wide query needs the sample anyway, or a message is too
        large."""
        if any(not self.cands[i].is_marginal for i in which):
            return None
        cliques, parents = tree
        holder = holders(cliques)
        work = 0
        for i in which:
            work += tree_cost(cliques, parents, self.sizes, self.cands[i].scope, holder)
            if work > self.exact_work:
                return None
        out: dict[int, FloatArray] = {}
        for i in which:
            p = tree_marginal(cliques, parents, self.sizes, self.cands[i].scope, holder)
            if p is None:
                return None
            out[i] = p
        return out


def from_cliques(cliques: Sequence[tuple[tuple[int, ...], FloatArray]],
                  scope: tuple[int, ...],
                  index: dict[int, list[int]] | None = None) -> FloatArray | None:
    """P(x_scope) from a clique of the junction tree that contains ``scope`` (axes in the
    clique's own order, transposed to domain order), or None. ``index``
    (:func:`clique_index` of ``cliques``): only the cliques holding the scope's first attribute
    are tried — the same (smallest, then first) clique."""
    want = set(scope)
    pool = (cliques if index is None or not scope
            else [cliques[k] for k in index.get(scope[0], [])])
    best = min((c for c in pool if want <= set(c[0])), key=lambda c: c[1].size, default=None)
    if best is None:
        return None
    variables, table = best
    axes = tuple(i for i, v in enumerate(variables) if v not in scope)
    kept = [v for v in variables if v in scope]
    p = table.sum(axis=axes) if axes else table
    return np.transpose(p, [kept.index(v) for v in scope]).ravel()


def clique_index(cliques: Sequence[tuple[tuple[int, ...], FloatArray]]
                 ) -> dict[int, list[int]]:
    """Attribute → the positions of the cliques holding it (in order)."""
    out: dict[int, list[int]] = {}
    for k, (variables, _) in enumerate(cliques):
        for v in variables:
            out.setdefault(v, []).append(k)
    return out


def compress(columns: npt.NDArray, sizes: Sequence[int]) -> tuple[npt.NDArray, FloatArray]:
    """The sample's distinct rows (attribute-major, shape (attributes, k)) and multiplicities:
    one int64 key per row when the domain has fewer than 2^62 points (a 1-D sort); above, rows
    are almost surely distinct and are kept as they are."""
    if math.prod(int(n) for n in sizes) >= 2**62:
        return columns, np.ones(columns.shape[1])
    keys = np.ravel_multi_index(tuple(columns), tuple(sizes))
    uniq, counts = np.unique(keys, return_counts=True)
    return np.stack(np.unravel_index(uniq, tuple(sizes))), counts.astype(np.float64)


def noisy_total(measurements: Sequence[GroupMeasurement]) -> float:
    """N̂ = the inverse-variance weighted mean of the noisy sums of the marginal measurements."""
    num = den = 0.0
    for m in measurements:
        if m.query is not None:
            continue
        var = float(np.sum(np.broadcast_to(np.square(m.sd), np.shape(m.y))))
        num += float(m.y.sum()) / var
        den += 1.0 / var
    return max(1.0, num / den)


def model_scopes(measurements: Sequence[GroupMeasurement]) -> list[tuple[int, ...]]:
    """The distinct measured scopes, in order of first measurement."""
    return list(dict.fromkeys(m.scope for m in measurements))


def model_structure(keys: Iterable[tuple[tuple[int, ...], int | None]]
                    ) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """The structure of the model fitted to measurements with these (scope, query) keys, in
    order of measurement: its maximal measured marginal scopes and its measured wide queries
    (their numbers), each in order of first measurement — what :func:`build_model` builds."""
    keys = list(keys)
    marginal_scopes = list(dict.fromkeys(s for s, q in keys if q is None))
    queries = tuple(dict.fromkeys(q for _, q in keys if q is not None))
    return tuple(maximal_scopes(marginal_scopes)), queries


def build_model(dom: Domain, measurements: Sequence[GroupMeasurement],
                workload: Workload) -> ScopeModel:
    """P_θ over the maximal measured marginal scopes and the measured wide queries
    (:func:`model_structure`)."""
    scopes, queries = model_structure((m.scope, m.query) for m in measurements)
    return ScopeModel(dom, scopes, [(j, workload.queries[j]) for j in queries])


def joint_marginals(joint: FloatArray, scopes: Sequence[tuple[int, ...]]
                    ) -> dict[tuple[int, ...], FloatArray]:
    """The marginal of ``joint`` (one axis per attribute) over every scope (increasing
    attribute indices), sharing the partial sums: the marginal over a set K is its parent's
    (K ∪ {x}, x the smallest attribute outside K) summed over x, memoised, so scopes that agree
    above some attribute share every sum down to it. NLTCS's 700 candidate scopes of d ≤ 3 on
    2^16 points: ~10× fewer additions than one full sum per scope."""
    d = joint.ndim
    cache: dict[tuple[int, ...], FloatArray] = {tuple(range(d)): joint}

    def get(keep: tuple[int, ...]) -> FloatArray:
        found = cache.get(keep)
        if found is None:
            x = next(a for a in range(d) if a not in keep)
            parent = tuple(sorted((*keep, x)))
            found = cache[keep] = get(parent).sum(axis=parent.index(x))
        return found

    return {tuple(s): get(tuple(s)) for s in scopes}


def maximal_scopes(scopes: Sequence[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Scopes not contained in another (a sub-scope's table adds nothing to the family), in
    their order. A strict superset of s holds each of s's attributes: only the scopes holding
    its rarest attribute are tried (d = 1,024: ~2,000 scopes, no 4·10^6 set comparisons)."""
    sets = [frozenset(s) for s in scopes]
    holding: dict[int, list[int]] = {}
    for k, t in enumerate(sets):
        for a in t:
            holding.setdefault(a, []).append(k)
    out = []
    for s, ss in zip(scopes, sets, strict=True):
        pool = min((holding[a] for a in ss), key=len) if ss else range(len(sets))
        if not any(ss < sets[k] for k in pool):
            out.append(s)
    return out
