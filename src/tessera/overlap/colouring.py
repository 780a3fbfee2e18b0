"""Overlap graph and colouring upper bounds (docs/theory.md §3).

Overlap graph G_Q: one vertex per query, an edge when two queries overlap (C_q ∩ C_q' ≠ ∅, i.e.
on every attribute both constrain, their predicates share an atom). Every I(x) is a clique of G_Q,
and a clique meets each colour class of a proper colouring at most once, so

    max_x Σ_{q∈I(x)} s_q ≤ Σ_j max_{q∈C_j} s_q        (C_1, …, C_k: the colour classes)

is a valid upper bound on the score (with unit scores: γ ≤ ω ≤ χ ≤ k). Greedy and DSatur colourings
are heuristics for *making* the bound small; every proper colouring gives a valid bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from tessera.errors import ResourceError
from tessera.overlap.atoms import workload_atoms
from tessera.schema.domain import Domain
from tessera.workload.query import Query

MAX_GRAPH_QUERIES = 40_000


def overlap_graph(domain: Domain, queries: Sequence[Query]) -> npt.NDArray[np.bool_]:
    """Dense adjacency matrix of G_Q (no self loops); contradictions are isolated."""
    t = len(queries)
    if t > MAX_GRAPH_QUERIES:
        raise ResourceError(
            f"overlap graph of {t} queries is too large (limit {MAX_GRAPH_QUERIES})")
    adj = np.ones((t, t), dtype=bool)
    for at in workload_atoms(domain, queries):
        m = at.membership.astype(np.float32)  # (atoms, k)
        # predicates of the same attribute intersect iff they share an atom
        share = (m.T @ m) > 0
        idx = at.queries
        adj[np.ix_(idx, idx)] &= share
    dead = np.fromiter((q.is_contradiction() for q in queries), dtype=bool, count=t)
    adj[dead, :] = False
    adj[:, dead] = False
    np.fill_diagonal(adj, False)
    return adj


def first_fit(adj: npt.NDArray[np.bool_], order: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Sequential greedy colouring of the vertices ``order`` (in that order; colour per entry).

    Vertex-by-vertex first fit gives v the smallest colour no earlier neighbour has. Built here one
    colour class at a time, which gives the same colouring: class c takes, in order, every
    uncoloured vertex not adjacent to a vertex already in c. Each step filters the candidates
    by one adjacency row, so on dense graphs (few candidates survive) it costs ≈ t·χ element
    operations and t Python steps instead of t² of both. ``adj`` is indexed by vertex id, so a
    subgraph is coloured without copying it.
    """
    order = np.asarray(order, dtype=np.int64)
    colour = np.full(len(order), -1, dtype=np.int64)
    pos = np.empty(int(order.max(initial=-1)) + 1, dtype=np.int64)
    pos[order] = np.arange(len(order))
    remaining = order
    c = 0
    while len(remaining):
        cand = remaining
        members = []
        while len(cand):
            v = int(cand[0])
            members.append(v)
            rest = cand[1:]
            cand = rest[~adj[v, rest]]
        colour[pos[members]] = c
        remaining = remaining[colour[pos[remaining]] < 0]
        c += 1
    return colour


def greedy_colouring(
    adj: npt.NDArray[np.bool_], scores: npt.ArrayLike,
    strategy: Literal["greedy", "dsatur"] = "dsatur",
) -> npt.NDArray[np.int64]:
    """A proper colouring (colour per vertex). ``greedy``: heaviest (then highest degree) first;
    ``dsatur``: most distinct neighbour colours first, ties by score then degree."""
    t = adj.shape[0]
    colour = np.full(t, -1, dtype=np.int64)
    if t == 0:
        return colour
    s = np.asarray(scores, dtype=np.float64)
    degree = adj.sum(axis=1)
    forbidden = np.zeros((t, t + 1), dtype=bool)  # forbidden[v, c]: a neighbour of v has colour c
    saturation = np.zeros(t, dtype=np.int64)
    static = np.lexsort((-degree, -s))
    if strategy == "greedy":
        colour[static] = first_fit(adj, static)
        return colour
    uncoloured = np.ones(t, dtype=bool)
    for step in range(t):
        if strategy == "greedy":
            v = int(static[step])
        else:
            key = np.where(uncoloured, saturation, -1)
            cand = np.flatnonzero(key == key.max())
            v = int(cand[np.lexsort((-degree[cand], -s[cand]))[0]])
        c = int(np.argmin(forbidden[v]))  # smallest colour not used by a neighbour
        colour[v] = c
        uncoloured[v] = False
        nb = adj[v]
        newly = nb & ~forbidden[:, c]
        saturation[newly] += 1
        forbidden[nb, c] = True
    return colour


def colour_class_bound(colour: npt.ArrayLike, scores: npt.ArrayLike) -> float:
    """Σ_j max_{q∈C_j} s_q: an upper bound on the max score when ``colour`` is proper."""
    colour = np.asarray(colour, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    if len(colour) == 0:
        return 0.0
    best = np.zeros(int(colour.max()) + 1)
    np.maximum.at(best, colour, s)
    return float(np.sort(best).sum())  # summed in increasing order: smaller rounding error


def colouring_bound(
    domain: Domain,
    queries: Sequence[Query],
    scores: npt.ArrayLike,
    strategy: Literal["greedy", "dsatur", "best"] = "best",
) -> tuple[float, int]:
    """(Σ_j max_{q∈C_j} s_q, number of colours) for a greedy/DSatur colouring of G_Q
    (``best``: the smaller bound of the two).

    Queries with score 0 or a contradiction cannot raise the maximum and are left out.
    """
    s = np.asarray(scores, dtype=np.float64)
    keep = [i for i, q in enumerate(queries) if s[i] > 0 and not q.is_contradiction()]
    if not keep:
        return 0.0, 0
    adj = overlap_graph(domain, [queries[i] for i in keep])
    options = ("greedy", "dsatur") if strategy == "best" else (strategy,)
    results = []
    for strat in options:
        colour = greedy_colouring(adj, s[keep], strat)  # type: ignore[arg-type]
        results.append((colour_class_bound(colour, s[keep]), int(colour.max()) + 1))
    return min(results)
