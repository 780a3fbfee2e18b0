"""Predicate queries read from the adaptive synthesizer's fitted model through the marginal of
their scope, many at once (docs/theory.md §5, "the adaptive method"; §10.5, the adaptive route).

A query q (a predicate conjunction, a Boolean clause, a BDD query) depends on x only through
x_s, s = scope(q), so

    P_θ(q = 1) = Σ_{x_s} P_θ(x_s) · q(x_s)  =  ⟨P_θ(x_s), 1_q⟩,

the marginal of its scope against q's indicator over the product of s's domains. Every query
of one scope shares P_θ(x_s): the queries are **grouped by scope**, the marginal is read once
per scope (a measured scope's table, a clique of the junction tree, or the clique tree's
messages, :func:`tessera.estimation.tree_marginals.tree_marginal`: exact, no new compilation)
and the indicators of all the group's queries are evaluated at once on the scope's cells, in
chunks of :data:`CHUNK_CELLS` (one matrix–vector product per chunk). A workload of t queries
over S distinct scopes costs S tree reads — no engine pass, no engine plan: 1,000 random
conjunctions of 1–3 of Adult's 15 attributes have ≤ 575 scopes, read in seconds, where one
engine pass per group of queries added to the model at θ_q = 0
(:func:`tessera.estimation.maxent.added_query_probabilities`) compiled a Gibbs model of every
measured cell per group and planned each group, halving until it fit.

**Conjunctions past the messages' limits** (a 3-way scope of Adult beside a wide clique can ask
for a message of 10^7–10^8 cells): P_θ(q) = Σ_x P_θ(x) Π_a [x_a ∈ φ_a] is one evidence pass over
the clique tree — each predicate's indicator multiplied into a clique holding its attribute,
messages over separators only (:func:`~tessera.estimation.tree_marginals.tree_evidence`) —
batched over the scope's conjunctions (:func:`conjunction_probabilities`). So beside a model
without wide queries no conjunction needs an engine pass (:func:`evidence_feasible`: the widest
clique within ``numpy.einsum``'s letters).

**Which queries** (:func:`tree_readable`): those whose scope has at most
:data:`MAX_READ_CELLS` cells, from a model without wide
queries (the dense junction tree exists) whose clique tree reads the scope within its limits
(:func:`~tessera.estimation.tree_marginals.tree_feasible`). It is a function of the model's
structure, the domain and the scope only, so the answerability constraint
(:class:`tessera.synth.answerable.Answerable`) decides it for a structure before any table
exists; the others still need an engine pass.

Post-processing of the run's noisy measurements: no privacy cost.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tessera.engine.factors import Function
from tessera.estimation import tree_marginals
from tessera.estimation.maxent import FitResult, ScopeModel
from tessera.estimation.tree_marginals import holders, tree_evidence, tree_feasible, tree_marginal
from tessera.schema.domain import Domain
from tessera.synth.model_view import clique_index, from_cliques
from tessera.synth.sensitive import Evaluator
from tessera.workload.query import Query

__all__ = ["CHUNK_CELLS", "EVIDENCE_CELLS", "MAX_READ_CELLS", "ScopeReads",
           "conjunction_probabilities", "evidence_feasible", "readable_scopes", "readable_size",
           "scope_cells", "tree_readable"]

FloatArray = npt.NDArray[np.float64]
Scope = tuple[int, ...]
Tree = tuple[list[tuple[Scope, FloatArray]], list[int]]
#: Cells of a scope whose indicators are evaluated at once (the codes of a chunk take
#: CHUNK_CELLS × d × 8 bytes).
CHUNK_CELLS = 1 << 16
#: Evidence rows × clique cells of one batched pass of :func:`conjunction_probabilities`.
EVIDENCE_CELLS = 1 << 22
#: Largest scope (cells) whose queries are read through its marginal: the clique tree's own
#: message limit (:data:`~tessera.estimation.tree_marginals.MAX_MESSAGE_CELLS`, 2^24 cells).
MAX_READ_CELLS = 1 << 24


def scope_cells(domain: Domain, s: Sequence[int]) -> int:
    """|X_s|: the cells of the product of the scope's domains."""
    sizes = domain.sizes
    return math.prod(int(sizes[a]) for a in s)


def readable_size(domain: Domain, s: Sequence[int]) -> bool:
    """Whether the scope has at most :data:`MAX_READ_CELLS` cells (a marginal over it is read
    whole)."""
    return scope_cells(domain, s) <= MAX_READ_CELLS


def tree_readable(domain: Domain, s: Sequence[int],
                  cliques: Sequence[tuple[Scope, object]], parents: Sequence[int],
                  holder: dict[int, int] | None = None) -> bool:
    """Whether a query of scope ``s`` is read through P_θ(x_s) from the clique tree (module
    docs): at most :data:`MAX_READ_CELLS` cells and the tree's walk within its limits — a
    function of the cliques' variables and parents (tables not read)."""
    return (readable_size(domain, s)
            and tree_feasible(cliques, parents, domain.sizes, s, holder))


def readable_scopes(domain: Domain, scopes: Sequence[Scope],
                    cliques: Sequence[Sequence[int]], parents: Sequence[int]
                    ) -> npt.NDArray[np.bool_]:
    """For every scope, whether :class:`ScopeReads` reads it from a model without wide queries
    whose clique tree has these cliques (variables) and parents: it lies in a clique, or
    :func:`tree_readable`. Decided for all scopes at once (sparse incidence products), cheapest
    first: the containment test; a sufficient bound — every message of the tree's walk is over
    a separator S and scope variables, so max_S |X_{S ∪ s}| within the message limit (S = ∅:
    the last message, over s) and the widest clique's variables plus the scope's within the
    product's imply :func:`~tessera.estimation.tree_marginals.tree_feasible`; the walk itself
    only for the scopes the bound leaves undecided. The answerability constraint asks this of
    every structure it is offered (:meth:`tessera.synth.answerable.Answerable.pending`)."""
    import scipy.sparse as sp

    n = len(scopes)
    if n == 0:
        return np.zeros(0, dtype=bool)
    d = len(domain)
    log_size = np.log(np.asarray(domain.sizes, dtype=np.float64))

    def incidence(sets: Sequence[Sequence[int]]) -> sp.csr_matrix:
        rows = np.repeat(np.arange(len(sets)), [len(x) for x in sets])
        cols = np.fromiter((v for x in sets for v in x), dtype=np.int64, count=rows.size)
        return sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(len(sets), d))

    s_inc = incidence(scopes)
    s_len = np.asarray([len(x) for x in scopes])
    s_log = s_inc @ log_size
    out = np.zeros(n, dtype=bool)
    if cliques:  # in a clique: |s ∩ C| = |s|
        hits = (incidence(cliques) @ s_inc.T).tocsc()
        best = np.asarray(hits.max(axis=0).todense()).ravel()
        out |= best >= s_len
    sizes = [int(v) for v in domain.sizes]  # once: a property that walks every attribute
    fits = np.fromiter((math.prod(sizes[v] for v in x) <= MAX_READ_CELLS for x in scopes),
                       dtype=bool, count=n)
    # the bound in floating point, on the safe side: a scope within 10^-9 of it is walked
    slack = 1e-9 * max(1.0, math.log(tree_marginals.MAX_MESSAGE_CELLS))
    sets = [frozenset(c) for c in cliques]
    seps = [()] + [tuple(sorted(sets[k] & sets[p])) for k, p in enumerate(parents) if p >= 0]
    sep_inc = incidence(seps)
    sep_log = sep_inc @ log_size
    # log |X_{S ∪ s}| = log |X_S| + log |X_s| − log |X_{S ∩ s}|
    shared = (sep_inc.multiply(log_size[None, :]).tocsr() @ s_inc.T).toarray()
    union = sep_log[:, None] + s_log[None, :] - shared
    widest = max((len(c) for c in cliques), default=0)
    bound = ((union.max(axis=0) <= math.log(tree_marginals.MAX_MESSAGE_CELLS) - slack)
             & (widest + s_len <= tree_marginals.MAX_PRODUCT_VARIABLES))
    tree = [(tuple(c), None) for c in cliques]
    holder = holders(tree)  # type: ignore[arg-type]
    for j in np.flatnonzero(~out & fits):
        out[j] = bool(bound[j]) or tree_feasible(tree, parents, sizes, scopes[j], holder)
    return out


class ScopeReads:
    """P_θ(q = 1) of queries from the marginals of their scopes, one marginal per distinct
    scope (module docs), for one fitted model. ``tree``: the model's clique tree
    (:meth:`~tessera.estimation.maxent.ScopeModel.clique_tree`), None with wide queries (then
    only measured scopes are read)."""

    def __init__(self, model: ScopeModel, fitted: FitResult, tree: Tree | None) -> None:
        self.model = model
        self.fitted = fitted
        self.tree = tree
        self._holder = holders(tree[0]) if tree is not None else None
        self._index = clique_index(tree[0]) if tree is not None else None
        #: distinct scopes whose marginal was read, and scopes whose conjunctions were read by
        #: evidence passes (counts for tests and benchmarks)
        self.marginals_read = 0
        self.evidence_groups = 0

    def marginal(self, s: Scope) -> FloatArray | None:
        """P_θ(x_s) (flat, row-major, domain order), or None when the query needs an engine
        pass: from a measured scope, a clique, or the clique tree when :func:`tree_readable`."""
        p = self.model.project(self.fitted.marginals, s)
        if p is None and self.tree is not None:
            p = from_cliques(self.tree[0], s, self._index)
            if p is None and tree_readable(self.model.domain, s, self.tree[0], self.tree[1],
                                           self._holder):
                p = tree_marginal(self.tree[0], self.tree[1], self.model.domain.sizes, s,
                                  self._holder)
        if p is not None:
            self.marginals_read += 1
        return None if p is None else np.asarray(p, dtype=np.float64)

    def probabilities(self, functions: Sequence[Function], scopes: Sequence[Scope]
                      ) -> tuple[FloatArray, list[int]]:
        """(P_θ(q_j = 1) for every query, NaN where not read; the positions not read — the
        queries that need an engine pass), grouped by scope: one marginal and one evaluation of
        the group's indicators per distinct scope."""
        out = np.full(len(functions), np.nan)
        groups: dict[Scope, list[int]] = {}
        for j, s in enumerate(scopes):
            groups.setdefault(tuple(s), []).append(j)
        rest: list[int] = []
        for s, members in groups.items():
            p = self.marginal(s)
            if p is None:
                if self.tree is not None and evidence_feasible(self.tree[0]) and all(
                        isinstance(functions[j], Query) for j in members):
                    out[members] = conjunction_probabilities(
                        self.model.domain, [functions[j] for j in members],  # type: ignore[misc]
                        self.tree, self._holder)
                    self.evidence_groups += 1
                    continue
                rest.extend(members)
                continue
            out[members] = indicator_products(self.model.domain, [functions[j] for j in members],
                                              s, p)
        return out, sorted(rest)


def indicator_products(domain: Domain, functions: Sequence[Function], s: Scope,
                       p: FloatArray) -> FloatArray:
    """⟨p, 1_q⟩ for every query q of scope ⊆ ``s``: p = P(x_s) flat row-major over s's cells;
    the indicators evaluated on :data:`CHUNK_CELLS` cells at a time."""
    shape = tuple(int(domain.sizes[i]) for i in s)
    n = math.prod(shape)
    if p.size != n:
        raise ValueError(f"a marginal of {p.size} cells for a scope of {n}")
    evaluator = Evaluator(domain, list(functions))
    total = np.zeros(len(functions))
    for lo in range(0, n, CHUNK_CELLS):
        hi = min(n, lo + CHUNK_CELLS)
        codes = np.zeros((hi - lo, len(domain)), dtype=np.int64)
        if s:
            codes[:, list(s)] = np.stack(np.unravel_index(np.arange(lo, hi), shape), axis=1)
        hits = np.asarray(evaluator.matrix(codes), dtype=np.float64)
        total += hits @ p[lo:hi]
    return total


def evidence_feasible(cliques: Sequence[tuple[Sequence[int], object]]) -> bool:
    """Whether :func:`conjunction_probabilities` runs on this tree: its widest clique and the
    batch within ``numpy.einsum``'s letters (a function of the cliques' variables)."""
    widest = max((len(c[0]) for c in cliques), default=0)
    return widest + 1 <= tree_marginals.MAX_PRODUCT_VARIABLES


def conjunction_probabilities(domain: Domain, queries: Sequence[Query], tree: Tree,
                              holder: dict[int, int] | None = None) -> FloatArray:
    """P_θ(q = 1) of conjunctions of one scope from the clique tree by evidence passes
    (:func:`~tessera.estimation.tree_marginals.tree_evidence`: each predicate's indicator on
    its attribute, messages over separators only — no table over the scope), in batches of
    queries of at most :data:`EVIDENCE_CELLS` evidence rows × clique cells."""
    cliques, parents = tree
    largest = max((t.size for _, t in cliques), default=1)
    step = max(1, EVIDENCE_CELLS // max(1, largest))
    sizes = domain.sizes
    out = np.empty(len(queries))
    for lo in range(0, len(queries), step):
        block = queries[lo: lo + step]
        evidence: dict[int, FloatArray] = {}
        for b, q in enumerate(block):
            for pred in q.predicates:
                v = domain.index(pred.attribute)
                if v not in evidence:
                    evidence[v] = np.ones((len(block), int(sizes[v])))
                evidence[v][b] = pred.coverage.contains_array(np.arange(int(sizes[v])))
        out[lo: lo + len(block)] = tree_evidence(cliques, parents, sizes, evidence, holder) \
            if evidence else 1.0
    return out
