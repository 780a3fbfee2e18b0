"""Exact answers of the adaptive synthesizer's fitted model for any workload over its schema
(docs/theory.md §5, "the adaptive method"; §10.5, the adaptive route).

The adaptive method ends with P_θ, the maximum-entropy model fitted to every noisy measurement,
and N̂, its total (the noisy total under add/remove, n under substitution). A query q of a
workload is answered as N̂ · P_θ(q), computed by the engine — never from sampled rows:

* a **family** (a :class:`~tessera.workload.families.Partition` over attributes s, each axis
  one group per code or disjoint groups of codes): the marginal P_θ(x_s) is read
  (1) from a measured scope's table that contains s (μ of the fit), else (2) from a clique of
  the junction tree that contains s, else (3) by summing the product of the clique marginals
  over the subtree that joins s's variables (:mod:`tessera.estimation.tree_marginals`), else
  (with wide queries, or a message too large) (4) from the model with s added as one more
  scope at θ_s = 0 — the same distribution (exp(0) = 1 on every cell), whose junction tree
  contains s: one compilation, one upward and one downward pass. The cells are then the sums
  of P_θ(x_s) over each axis's groups (one tensor contraction per grouped axis);
* any other query (a predicate conjunction, a Boolean clause, a BDD query):
  :meth:`tessera.synth.adaptive_record.AdaptiveResult.answers` (the marginal of the query's scope
  read once per distinct scope, or evidence passes for conjunctions:
  :mod:`tessera.synth.query_reads`; else one engine pass with the query added at weight 0).

Post-processing of the run's noisy measurements: no privacy cost. These answers are the
model's; the model is biased (it fills unmeasured interactions with maximum entropy), so no
interval is proven for them.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from tessera.engine.decomposition import DEFAULT_MEMORY_LIMIT
from tessera.estimation.maxent import FitResult, ScopeModel, cell_by_cell, cell_by_cell_error
from tessera.estimation.tree_marginals import tree_marginal
from tessera.schema.domain import Domain
from tessera.synth.model_view import from_cliques
from tessera.workload.families import Partition

__all__ = ["family_probabilities", "scope_marginal"]

FloatArray = npt.NDArray[np.float64]
Scope = tuple[int, ...]


def scope_marginal(model: ScopeModel, fitted: FitResult, scope: Scope,
                   tree: tuple[list[tuple[Scope, FloatArray]], list[int]] | None = None,
                   *, memory_limit: int = DEFAULT_MEMORY_LIMIT) -> FloatArray:
    """P_θ(x_scope) (``scope`` in domain order) of ``model`` at ``fitted.theta``, flat in
    row-major order of the scope: from a measured scope, a clique or the clique tree
    (``tree``: :meth:`~tessera.estimation.maxent.ScopeModel.clique_tree`), else the model with
    ``scope`` added at θ = 0 (module docs) — refused (:class:`~tessera.errors.ResourceError`)
    by its memory guard, or, with wide queries, without a plan when a marginal of the grown model
    would be compiled cell by cell (:func:`~tessera.estimation.maxent.cell_by_cell`)."""
    theta = fitted.theta
    p = model.project(fitted.marginals, scope)
    if p is None and tree is not None:
        p = from_cliques(tree[0], scope)
        if p is None:
            p = tree_marginal(tree[0], tree[1], model.domain.sizes, scope)
    if p is None:
        big = cell_by_cell(model.domain, [*model.scopes, scope]) if model.queries else None
        if big is not None:
            raise cell_by_cell_error(model.domain, big, "its marginal")
        grown = ScopeModel(model.domain, [*model.scopes, scope], model.queries,
                           memory_limit=memory_limit)
        p = grown.project(grown.marginals(grown.extend(theta, model)), scope)
        assert p is not None  # the grown model has ``scope`` as a scope
    return np.asarray(p, dtype=np.float64)


def family_probabilities(domain: Domain, family: Partition, marginal: FloatArray,
                         scope: Scope) -> FloatArray:
    """The family's cells (row-major, its attributes' order) from P(x_scope): each axis's codes
    summed into its groups (codes in no group dropped)."""
    names = domain.names
    table = marginal.reshape(tuple(domain.sizes[i] for i in scope))
    order = [scope.index(names.index(a)) for a in family.attributes]
    table = np.transpose(table, order)
    for i in range(len(family.attributes)):
        if family.groups[i] is None:
            continue
        g = family.code_to_group(domain, i)
        member = np.zeros((family.axis_size(domain, i), g.size))
        ok = g >= 0
        member[g[ok], np.flatnonzero(ok)] = 1.0
        table = np.moveaxis(np.tensordot(member, table, axes=([1], [i])), 0, i)
    return np.asarray(table, dtype=np.float64).ravel()
