"""Workload families with bounded treewidth (docs/theory.md §8, Ghazi et al. §7).

Each builder returns a :class:`Family`: a binary domain x_0..x_{d-1} (codes 0/1), the queries,
their names and the paper's bound on tw(G(F)), the treewidth of the incidence graph.

* :func:`hierarchical_disjunctions`: monotone disjunctions over the sets of a laminar family (a
  balanced tree over the variables, Census-TopDown-like geography); tw ≤ depth, |F| ≤ 2d − 1.
* :func:`partitioned_marginals`: d/k blocks of k bits, all 2^k cell indicators per block; tw = k.
* :func:`tree_marginals`: one-way marginals x_i = 1 plus the four 2-way cells of each edge of a
  tree (a Chow–Liu tree); tw = 2.
* :func:`grid_marginals`: the four 2-way cells of every pair of lattice neighbours of an r × c
  grid; tw = min(r, c) (∝ the smaller side).

Marginal cells are predicate conjunctions (:class:`~tessera.workload.query.Query`) by default, or
Boolean queries (``boolean=True``); disjunctions are always Boolean queries.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tessera.engine.bdd import bdd_manager, conjunction, disjunction
from tessera.engine.factors import Function
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Query


@dataclass(frozen=True, eq=False)
class Family:
    """A workload over a binary domain with the paper's treewidth bound."""

    name: str
    domain: Domain
    queries: tuple[Function, ...]
    names: tuple[str, ...]
    width_bound: int


def binary_domain(d: int, prefix: str = "x") -> Domain:
    """d binary attributes ``x0..x{d-1}`` with codes 0/1 (a Private-PGM style domain)."""
    return Domain.from_dict({f"{prefix}{i}": 2 for i in range(d)})


def _cell(domain: Domain, mgr, values: dict[str, int], boolean: bool) -> Function:  # noqa: ANN001
    if boolean:
        return conjunction(mgr, values)
    return Query.conjunction(domain, {a: IntervalSet.points([v]) for a, v in values.items()})


def hierarchical_disjunctions(d: int, branching: int = 2) -> Family:
    """OR over every node of a balanced ``branching``-ary laminar tree on d variables.

    The leaves are the single variables; each internal node is the union of its children.
    The bound is the depth of the laminar tree (edges from the root to the deepest leaf).
    """
    domain = binary_domain(d)
    mgr = bdd_manager(domain.names)
    level: list[tuple[int, ...]] = [(i,) for i in range(d)]
    sets: list[tuple[int, ...]] = list(level)
    depth = 0
    while len(level) > 1:
        level = [tuple(itertools.chain(*level[i : i + branching]))
                 for i in range(0, len(level), branching)]
        sets.extend(level)
        depth += 1
    queries = tuple(disjunction(mgr, [domain.names[i] for i in s]) for s in sets)
    names = tuple(f"or[{s[0]}..{s[-1]}]" for s in sets)
    return Family(f"hierarchical(d={d}, b={branching})", domain, queries, names, max(depth, 1))


def partitioned_marginals(d: int, k: int, boolean: bool = False) -> Family:
    """All 2^k cells of the marginal of each block of k consecutive bits (d divisible by k)."""
    if d % k:
        raise ValueError("d must be a multiple of k")
    domain = binary_domain(d)
    mgr = bdd_manager(domain.names) if boolean else None
    queries, names = [], []
    for b in range(d // k):
        block = domain.names[b * k : (b + 1) * k]
        for cell in itertools.product((0, 1), repeat=k):
            queries.append(_cell(domain, mgr, dict(zip(block, cell, strict=True)), boolean))
            names.append(f"block{b}[{''.join(map(str, cell))}]")
    return Family(f"partitioned(d={d}, k={k})", domain, tuple(queries), tuple(names), k)


def random_tree(d: int, seed: int = 0) -> list[tuple[int, int]]:
    """Edges of a random recursive tree on 0..d−1 (node i attaches to a uniform j < i)."""
    rng = np.random.default_rng(seed)
    return [(int(rng.integers(0, i)), i) for i in range(1, d)]


def tree_marginals(
    d: int, edges: Sequence[tuple[int, int]] | None = None, seed: int = 0, boolean: bool = False
) -> Family:
    """One-way marginals x_i = 1 and the four cells of every tree edge (Chow–Liu); tw = 2."""
    edges = list(edges) if edges is not None else random_tree(d, seed)
    domain = binary_domain(d)
    mgr = bdd_manager(domain.names) if boolean else None
    n = domain.names
    queries: list[Function] = [_cell(domain, mgr, {n[i]: 1}, boolean) for i in range(d)]
    names = [f"{n[i]}=1" for i in range(d)]
    for i, j in edges:
        for a, b in itertools.product((0, 1), repeat=2):
            queries.append(_cell(domain, mgr, {n[i]: a, n[j]: b}, boolean))
            names.append(f"{n[i]}={a},{n[j]}={b}")
    return Family(f"tree(d={d})", domain, tuple(queries), tuple(names), 2 if d > 2 else 1)


def grid_marginals(rows: int, cols: int, boolean: bool = False) -> Family:
    """The four cells of each pair of horizontal/vertical neighbours; tw = min(rows, cols)."""
    domain = binary_domain(rows * cols)
    mgr = bdd_manager(domain.names) if boolean else None
    n = domain.names
    queries: list[Function] = []
    names: list[str] = []
    for r in range(rows):
        for c in range(cols):
            u = r * cols + c
            for v in ([u + 1] if c + 1 < cols else []) + ([u + cols] if r + 1 < rows else []):
                for a, b in itertools.product((0, 1), repeat=2):
                    queries.append(_cell(domain, mgr, {n[u]: a, n[v]: b}, boolean))
                    names.append(f"{n[u]}={a},{n[v]}={b}")
    bound = max(min(rows, cols), 2) if rows * cols > 2 else 1
    return Family(f"grid({rows}x{cols})", domain, tuple(queries), tuple(names), bound)
