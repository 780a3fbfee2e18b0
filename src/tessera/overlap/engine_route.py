"""Exact γ_w through the max-plus engine when the workload has small width (docs/theory.md §3, §4).

S = max_x Σ_q s_q q(x) is problem (7) of docs/theory.md §4 in the max-plus semiring with y_q = s_q
≥ 0:
``tessera.engine`` solves it exactly in time and memory exponential only in the width of a tree
decomposition. Before building the engine's model we estimate what it would cost from the
*primal attribute graph* (attributes adjacent when some query constrains both): a heuristic
decomposition of it (``tessera.engine.treewidth``) and, per bag, the product of the attributes'
value-class (atom) counts. Range workloads over a few attributes, marginals over a few
attributes and tree/hierarchical families pass; random conjunctions over all of Adult (a
complete graph on 15 attributes, ~10^15 entries) do not, and stay with the branch and bound.

The engine then checks its own memory plan (it raises :class:`ResourceError` beyond
``memory_limit``), so the estimate only decides whether trying is worthwhile.

Boolean (BDD) queries (``tessera.engine.BooleanQuery``) are answered here only: the other
solvers work on predicate conjunctions. Boolean WHERE clauses
(:class:`~tessera.workload.clause.BooleanClause`) come here first when the estimate passes (their
atoms refine the value classes, their scopes are cliques of the attribute graph), else they go to
the other solvers as disjoint predicate terms (:mod:`.clauses`).

Rounding: the engine adds floats in its own order. With integral scores below 2^53 the sum is
exact; otherwise the returned upper bound is inflated by the relative margin 4(t+1)·eps, which
covers the rounding of any order of summation of non-negative terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import numpy.typing as npt

from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.clause import BooleanClause
from tessera.workload.query import Query
from tessera.workload.value_classes import value_classes, workload_value_classes

#: Try the engine when its largest table (estimated on the attribute graph) has at most this many
#: entries (8 bytes each; the engine keeps a few tables per bucket).
ENGINE_MAX_ENTRIES = 1 << 22
#: Memory the engine may plan for before it refuses (ResourceError, then the fallback runs).
ENGINE_MEMORY = 1 << 30

_EPS = float(np.finfo(np.float64).eps)


@dataclass(frozen=True)
class EngineEstimate:
    """Width and largest table of a decomposition of the primal attribute graph (the table size
    may be a lower bound when that already exceeds the limit)."""

    width: int
    largest_entries: int
    n_attributes: int

    @property
    def feasible(self) -> bool:
        return self.largest_entries <= ENGINE_MAX_ENTRIES


def is_boolean(f: object) -> bool:
    """True for engine Boolean (BDD) queries, False for predicate conjunctions and Boolean
    clauses."""
    if isinstance(f, (Query, BooleanClause)):
        return False
    from tessera.engine import BooleanQuery

    return isinstance(f, BooleanQuery)


def estimate(domain: Domain, queries: Sequence[Any]) -> EngineEstimate:
    """Width and largest bag table of the primal attribute graph, bags weighted by atom counts.

    Atoms cost a pass over every predicate, so a cheap lower bound decides first: each predicate
    is a union of atoms, so k distinct coverages on an attribute need ≥ ⌈log2 k⌉ atoms; when even
    that bound makes some bag too large, the atoms are never computed.
    """
    from tessera.engine import treewidth

    graph = nx.Graph()
    coverages: dict[str, set[tuple[tuple[int, int], ...]]] = {}
    atoms: dict[str, set[tuple[tuple[int, int], ...]]] = {}  # of Boolean clauses
    scopes = set()  # distinct scopes: far fewer than queries, and all the graph needs
    for q in queries:
        scopes.add(q.scope)
        if isinstance(q, Query):
            for p in q.predicates:
                coverages.setdefault(p.attribute, set()).add(p.coverage.spans)
        elif isinstance(q, BooleanClause):
            for p in q.atoms():
                atoms.setdefault(p.attribute, set()).add(p.coverage.spans)
    for name, spans in atoms.items():
        coverages.setdefault(name, set()).update(spans)
    for scope in scopes:
        names = sorted(scope, key=domain.index)
        graph.add_nodes_from(names)
        graph.add_edges_from((a, b) for i, a in enumerate(names) for b in names[i + 1 :])
    if graph.number_of_nodes() == 0:
        return EngineEstimate(0, 1, 0)
    width, td = treewidth(graph)
    # a Boolean query's variable is a binary attribute: 2 classes
    lower = {n: min(domain[n].size, max(2, math.ceil(math.log2(len(coverages.get(n, ())) + 1))))
             for n in graph.nodes}
    cheap = max(math.prod(lower[v] for v in bag) for bag in td.bags)
    if cheap > ENGINE_MAX_ENTRIES:
        return EngineEstimate(width, int(cheap), graph.number_of_nodes())
    classes = {n: min(2, domain[n].size) for n in graph.nodes}
    # only the class counts: no membership matrix (Boolean queries are skipped)
    classes.update({a.name: a.classes.n_classes for a in workload_value_classes(domain, queries)})
    for name in atoms:  # predicates and clause atoms together
        classes[name] = value_classes(domain[name].size,
                                      [IntervalSet(sp) for sp in coverages[name]]).n_classes
    largest = max(math.prod(classes[v] for v in bag) for bag in td.bags)
    return EngineEstimate(width, int(largest), graph.number_of_nodes())


def engine_point(
    domain: Domain,
    queries: Sequence[Any],
    scores: npt.NDArray[np.float64],
    *,
    memory_limit: int = ENGINE_MEMORY,
) -> tuple[float, float, tuple[int, ...], str]:
    """(upper, claimed, x, note): S exactly (up to the rounding margin in ``upper``), an argmax
    ``x`` (codes) whose score the solver claims to be ``claimed``. Raises ResourceError when the
    engine's memory plan exceeds ``memory_limit``."""
    from tessera.engine import GibbsModel

    model = GibbsModel(domain, list(queries), np.asarray(scores, dtype=np.float64),
                       memory_limit=memory_limit)
    value, x = model.max_assignment()
    total = float(np.sum(scores))
    integral = bool(np.all(scores == np.round(scores))) and total < 2.0**52
    # every table entry is a float sum of ≤ t + 1 non-negative terms: each candidate's computed
    # score is within a relative (t+1)·eps of its true score, so the true maximum is at most
    # value·(1 + 4(t+1)·eps) (and 0 stays 0)
    upper = float(value) if integral else float(value) * (1.0 + 4.0 * (len(scores) + 1) * _EPS)
    note = f"max-plus engine: {model.plan.describe()}"
    return upper, float(value), tuple(int(c) for c in x), note
