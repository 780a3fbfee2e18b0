"""Exact, anytime branch and bound for the max-weight point problem (docs/theory.md §3).

Problem: S = max_{x∈𝔻} Σ_q s_q q(x) with s_q = h(w_q) ≥ 0 and predicate queries q. It never
enumerates 𝔻: per attribute only the value classes (atoms, :mod:`tessera.overlap.atoms`) matter,
dominated atoms are dropped, and attributes that never meet in a query split the problem into
independent components whose maxima add up.

Within a component, attributes are branched on in a fixed order (most-constrained first). At a node
with attributes a_1..a_d fixed, a query is *alive* if its fixed predicates contain the chosen atoms
and *resolved* once all its attributes are fixed. Each unresolved query is owned by its last
attribute in the order, k(q). Since q(x) ≤ [x_{k(q)} ∈ φ_{q,k(q)}],

    bound(node) = Σ_{resolved alive q} s_q + Σ_{k unfixed} max_{atom c of k} Σ_{alive q owned by k,
                  c ∈ φ_{q,k}} s_q

is a valid upper bound on every completion of the node. It is exact when every alive query has
one unfixed attribute left (the subproblem is separable); such nodes are solved on the spot.

Colour classes (docs/theory.md §3): the queries a row meets form a clique of the overlap graph G_Q,
so for
any proper colouring C_1..C_k of G_Q restricted to the alive unresolved queries,

    bound_col(node) = Σ_{resolved alive q} s_q + Σ_j max_{q ∈ C_j alive, unresolved} s_q

is a second valid bound; each node uses the smaller. A colouring of G_Q stays proper on any
subset of queries, so children inherit their parent's colouring; once the alive queries have
shrunk to ``RECOLOUR_SHRINK`` of the last coloured set, the induced subgraph is recoloured (first
fit, :func:`~tessera.overlap.colouring.first_fit`), which tightens the bound where it matters.
G_Q costs Θ(t²) memory, so this is on up to ``COLOURING_QUERIES`` queries.

Search is best-first (largest bound first; ties deepest first, so a plateau of equal bounds is
dived depth-first) from an incumbent found by coordinate ascent, and stops as soon as the best
open bound is no better than the incumbent.

Anytime: when the deadline passes, the open nodes' bounds, with the incumbent, give the valid
upper bound max(incumbent, max_open bound) — with best-first order that is the top of the heap,
and it only decreases over time; ``exact`` says whether the search finished.

Numerics: with integral scores all sums are exact in float64 (checked: total < 2^53). Otherwise a
node is pruned only when its bound is ≤ incumbent + τ (τ = 4(n+1)·eps·Σ s) and the reported upper
bound is incumbent + 2τ, so rounding can never push it below the true maximum.

Why this module is long (about 540 lines): it is one algorithm with its numerics. The split into
independent components, the two node bounds (owner and colour classes), the coordinate-ascent
incumbent, the best-first search with its anytime bound and the rounding margin τ rely on one
another's invariants (a node bound is valid only for the ownership and colouring the search
maintains); :func:`split_bound`, a Lagrangian bound on the same :func:`active_part`, is the
cheap bound at sizes the search cannot reach.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from tessera.overlap.atoms import AttributeAtoms, undominated, workload_atoms
from tessera.overlap.colouring import first_fit, greedy_colouring, overlap_graph
from tessera.schema.domain import Domain
from tessera.workload.query import Query


class NodeHeuristic(Protocol):
    """An admissible heuristic for the search's nodes (:mod:`.mini_bucket` compiles one): an
    upper bound on what the unassigned atoms can still add, from the root and step by step."""

    root: float
    n_tables: int

    def step(
        self, h: float, x: npt.NDArray[np.int64], p: int, n_atoms: int
    ) -> npt.NDArray[np.float64]: ...


#: Compiles a :class:`NodeHeuristic` for a component before a deadline (``None``: out of time),
#: e.g. :func:`tessera.overlap.mini_bucket.mini_bucket_heuristic`; passed in, so this module
#: does not import the heuristics built on it.
HeuristicCompiler = Callable[["Component", float], "NodeHeuristic | None"]


_EPS = float(np.finfo(np.float64).eps)
#: Colour the overlap graph (Θ(t²) memory and time) for node bounds up to this many queries.
COLOURING_QUERIES = 20_000
#: Recolour a node's alive queries once they are at most this fraction of the last colouring.
RECOLOUR_SHRINK = 0.7


def graph_seconds(n_queries: int) -> float:
    """Rough time to build and colour the overlap graph of ``n_queries`` queries (Θ(t²)): 1 s at
    t = 10,000, a conservative figure (bench_overlap.py's greedy-colouring column: 0.4–1 s there).
    Only decides whether colour-class bounds fit in the time limit; no bound depends on it."""
    return 1.0 * (n_queries / 10_000) ** 2


@dataclass(frozen=True)
class PointSolution:
    """max_x Σ s_q q(x): ``lower`` (attained by ``x``) ≤ max ≤ ``upper``; equal when ``exact``."""

    lower: float
    upper: float
    exact: bool
    x: tuple[int, ...]
    nodes: int


@dataclass(eq=False)
class Component:
    """One independent block: attributes (in branching order) and the queries over them."""

    atoms: list[AttributeAtoms]  # reduced to undominated atoms, branching order
    member: list[npt.NDArray[np.bool_]]  # member[j]: (atoms_j, n) with True off-scope
    scope: npt.NDArray[np.bool_]  # (n, m): q constrains the attribute at position j
    scope_after: npt.NDArray[np.int16]  # (n, m): #scope attributes strictly after position j
    last: npt.NDArray[np.int64]  # (n,) position of the owning (last) attribute
    s: npt.NDArray[np.float64]  # (n,) scores, columns sorted by ``last``
    own: list[npt.NDArray[np.float64]]  # own[k]: member[k][:, last == k] as float
    own_start: npt.NDArray[np.int64]  # columns with last == k are own_start[k]:own_start[k+1]
    colour: npt.NDArray[np.int64] | None = None  # (n,) a proper colouring of G_Q, or None
    n_colours: int = 0
    adj: npt.NDArray[np.bool_] | None = None  # overlap graph of all queries (shared, not copied)
    adj_ids: npt.NDArray[np.int64] | None = None  # (n,) row of ``adj`` for each column
    degree: npt.NDArray[np.int64] | None = None  # (n,) degrees in ``adj``


def _components(
    atoms: Sequence[AttributeAtoms], n_queries: int, scopes: Sequence[Sequence[int]]
) -> list[list[int]]:
    """Attribute indices (into ``atoms``) grouped by connectivity through common queries."""
    parent = list(range(len(atoms)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for sc in scopes:
        for a in sc[1:]:
            ra, rb = find(sc[0]), find(a)
            if ra != rb:
                parent[ra] = rb
    groups: dict[int, list[int]] = {}
    for a in range(len(atoms)):
        groups.setdefault(find(a), []).append(a)
    return list(groups.values())


def independent_parts(
    atoms: Sequence[AttributeAtoms], n_queries: int, scopes: Sequence[Sequence[int]]
) -> Iterator[tuple[npt.NDArray[np.int64], list[AttributeAtoms]]]:
    """Groups of attributes no query links (solved separately; their maxima add up), each with
    its query indices ``cols`` and its atoms re-indexed to queries 0..len(cols)-1 so the
    group's arrays stay small."""
    for group in _components(atoms, n_queries, scopes):
        sub_atoms = [atoms[a] for a in group]
        cols = np.unique(np.concatenate([a.queries for a in sub_atoms]))
        remap = np.full(n_queries, -1, dtype=np.int64)
        remap[cols] = np.arange(len(cols))
        yield cols, [a.with_queries(remap[a.queries]) for a in sub_atoms]


def build_component(
    atoms: Sequence[AttributeAtoms], columns: npt.NDArray[np.int64], s_all: npt.NDArray[np.float64],
    colour: npt.NDArray[np.int64] | None = None,
    adj: npt.NDArray[np.bool_] | None = None,
    adj_ids: npt.NDArray[np.int64] | None = None,
) -> Component:
    """The :class:`Component` of the queries ``columns`` (indices into ``s_all``) over the
    attributes ``atoms``: atoms reduced to the undominated ones, attributes in branching order
    (heaviest first), queries sorted by their last attribute. ``colour`` (a proper colouring of
    all queries), ``adj`` and ``adj_ids`` (the overlap graph and each column's row in it) feed
    the colour-class bounds; all optional."""
    n = len(columns)
    col_of = np.full(int(columns.max(initial=-1)) + 1, -1, dtype=np.int64)
    col_of[columns] = np.arange(n)
    # most constrained attribute first: fixing it early kills or resolves the most queries
    order = sorted(range(len(atoms)), key=lambda a: -float(s_all[atoms[a].queries].sum()))
    reduced: list[AttributeAtoms] = []
    member: list[npt.NDArray[np.bool_]] = []
    scope = np.zeros((n, len(order)), dtype=bool)
    for pos, a in enumerate(order):
        at = atoms[a]
        at = at.subset(undominated(at))
        cols = col_of[at.queries]
        full = np.ones((at.n_atoms, n), dtype=bool)
        full[:, cols] = at.membership
        scope[cols, pos] = True
        reduced.append(at)
        member.append(full)
    m = len(order)
    last = (m - 1 - np.argmax(scope[:, ::-1], axis=1)).astype(np.int64)
    perm = np.argsort(last, kind="stable")
    scope, last = scope[perm], last[perm]
    member = [mm[:, perm] for mm in member]
    # scope_after[q, j] = #scope positions > j
    after = np.cumsum(scope[:, ::-1], axis=1)[:, ::-1]
    scope_after = np.zeros_like(after)
    scope_after[:, :-1] = after[:, 1:]
    own_start = np.searchsorted(last, np.arange(m + 1)).astype(np.int64)
    own = [member[k][:, own_start[k] : own_start[k + 1]].astype(np.float64) for k in range(m)]
    col = None if colour is None else np.unique(colour[columns][perm], return_inverse=True)[1]
    ids = None
    if adj is not None:
        ids = (np.arange(len(adj)) if adj_ids is None else adj_ids)[columns[perm]]
    return Component(
        reduced, member, scope, scope_after.astype(np.int16), last, s_all[columns][perm], own,
        own_start, None if col is None else col.astype(np.int64),
        0 if col is None or len(col) == 0 else int(col.max()) + 1, adj, ids,
        None if adj is None or ids is None else adj.sum(axis=1)[ids].astype(np.int64),
    )


def owner_bound(comp: Component) -> float:
    """Σ_k max_c Σ_{q owned by k, c ∈ φ_{q,k}} s_q: each query relaxed to its last attribute's
    predicate (q(x) ≤ [x_k ∈ φ_{q,k}]), a valid upper bound that costs one pass over the
    membership matrices."""
    return sum(
        float((comp.own[k] @ comp.s[comp.own_start[k] : comp.own_start[k + 1]]).max())
        for k in range(len(comp.atoms))
        if comp.own_start[k + 1] > comp.own_start[k]
    )


def ascent(comp: Component, x: npt.NDArray[np.int64]) -> tuple[float, npt.NDArray[np.int64]]:
    """Coordinate ascent from atom choice ``x``: re-pick each attribute's best atom given the
    rest."""
    m = len(comp.atoms)
    sat = np.stack([comp.member[j][x[j]] for j in range(m)], axis=1)  # (n, m)
    nsat = sat.sum(axis=1)
    value = float(comp.s[nsat == m].sum())
    improved = True
    while improved:
        improved = False
        for j in range(m):
            others = (nsat - sat[:, j]) == m - 1
            scores = comp.member[j][:, others].astype(np.float64) @ comp.s[others]
            c = int(np.argmax(scores))
            if scores[c] > value + 1e-12 * max(1.0, value) and c != x[j]:
                x[j] = c
                nsat -= sat[:, j]
                sat[:, j] = comp.member[j][c]
                nsat += sat[:, j]
                value = float(scores[c])
                improved = True
    return value, x


def incumbent(comp: Component, restarts: int, seed: int) -> tuple[float, npt.NDArray[np.int64]]:
    """The best (score, atom choice) of :func:`ascent` from the per-attribute best atoms, from
    inside the ``restarts`` heaviest queries and from ``restarts // 2`` random starts (``seed``):
    a row that attains its score, the starting lower bound of a search."""
    m = len(comp.atoms)
    starts = [np.array([int(np.argmax(comp.member[j].astype(np.float64) @ comp.s))
                        for j in range(m)])]
    rng = np.random.default_rng(seed)  # search heuristic only: not privacy randomness
    heavy = np.argsort(-comp.s)[:restarts]
    for q in heavy:  # start inside the heaviest queries' coverage
        starts.append(np.array([int(np.argmax(comp.member[j][:, q])) for j in range(m)]))
    for _ in range(restarts // 2):
        starts.append(np.array([rng.integers(a.n_atoms) for a in comp.atoms]))
    best, best_x = -1.0, starts[0]
    for x0 in starts:
        value, x = ascent(comp, x0.astype(np.int64))
        if value > best:
            best, best_x = value, x.copy()
    return best, best_x


def _class_bound(
    colour: npt.NDArray[np.int64], s: npt.NDArray[np.float64], alive: npt.NDArray[np.bool_]
) -> npt.NDArray[np.float64]:
    """Per row r of ``alive`` (rows × len(s)): Σ_j max_{q alive in r, colour q = j} s_q."""
    rows, cols = np.nonzero(alive)
    per_class = np.zeros((alive.shape[0], int(colour.max(initial=-1)) + 1))
    np.maximum.at(per_class, (rows, colour[cols]), s[cols])
    return np.sort(per_class, axis=1).sum(axis=1)


def _recolour(
    comp: Component, idx: npt.NDArray[np.int64], colour: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """A fresh greedy colouring of the overlap graph induced by the queries ``idx``."""
    assert comp.adj is not None and comp.adj_ids is not None and comp.degree is not None
    order = idx[np.lexsort((-comp.degree[idx], -comp.s[idx]))]  # heaviest, then busiest first
    new = colour.copy()
    new[order] = first_fit(comp.adj, comp.adj_ids[order])
    return new


def _child_bounds(
    comp: Component, j: int, idx: npt.NDArray[np.int64], const: float,
    colour: npt.NDArray[np.int64] | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], list[npt.NDArray[np.float64]],
           npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """For each atom c of attribute j: resolved value, bound, per-k atom scores, alive mask."""
    alive = comp.member[j][:, idx]  # (nc, n')
    last = comp.last[idx]
    weighted = alive * comp.s[idx]  # (nc, n')
    lo = np.searchsorted(last, j, side="left")
    hi = np.searchsorted(last, j, side="right")
    resolved = const + weighted[:, lo:hi].sum(axis=1)
    bound = resolved.copy()
    per_k: list[npt.NDArray[np.float64]] = []
    start = hi
    while start < len(idx):
        k = int(last[start])
        end = int(np.searchsorted(last, k, side="right"))
        cols = idx[start:end] - comp.own_start[k]
        scores = comp.own[k][:, cols] @ weighted[:, start:end].T  # (atoms_k, nc)
        bound += scores.max(axis=0)
        per_k.append(scores)
        start = end
    if colour is not None and hi < len(idx):
        # a row meets each colour class at most once: Σ_j max over the alive unresolved
        # queries of class j (a proper colouring stays proper on any subset of queries)
        by_class = _class_bound(colour[idx[hi:]], comp.s[idx[hi:]], alive[:, hi:])
        return resolved, bound, per_k, alive, np.minimum(bound, resolved + by_class)
    return resolved, bound, per_k, alive, bound


def _solve_component(
    comp: Component, deadline: float, restarts: int, seed: int,
    heuristic: NodeHeuristic | None = None,
) -> tuple[float, float, bool, npt.NDArray[np.int64], int]:
    m = len(comp.atoms)
    total = float(comp.s.sum())
    integral = bool(np.all(comp.s == np.round(comp.s))) and total < 2.0**52
    # a float sum of n terms is off by at most ≈ n·eps·Σ: τ covers it with room to spare (the
    # mini-bucket tables add K more sums of values ≤ Σ)
    n_terms = len(comp.s) + 1 + (0 if heuristic is None else heuristic.n_tables)
    tol = 0.5 if integral else 4.0 * n_terms * _EPS * max(total, 1e-300)
    best, best_x = incumbent(comp, restarts, seed)
    # stack entries: (bound, depth, const, idx, partial atom choice)
    root_idx = np.arange(len(comp.s), dtype=np.int64)
    root_bound = owner_bound(comp)
    if comp.colour is not None and len(comp.s):
        whole = _class_bound(comp.colour, comp.s, np.ones((1, len(comp.s)), dtype=bool))
        root_bound = min(root_bound, float(whole[0]))
    if heuristic is not None:
        root_bound = min(root_bound, heuristic.root)
    # open nodes, best bound first (ties: deepest first, so equal-bound plateaus are dived
    # depth-first): the anytime bound max(incumbent, top of the heap) only ever decreases.
    # payload: (depth, const, idx, partial atom choice, colouring, #coloured, mini-bucket h)
    heap: list[tuple[float, int, int, tuple]] = [  # type: ignore[type-arg]
        (-root_bound, 0, 0, (0, 0.0, root_idx, np.zeros(m, dtype=np.int64), comp.colour,
                             len(comp.s), 0.0 if heuristic is None else heuristic.root))
    ]
    counter = 1
    nodes = 0
    while heap:
        if time.monotonic() > deadline:
            upper = max(best, -heap[0][0])
            return best, upper + (0.0 if integral else 2 * tol), False, best_x, nodes
        neg_bound, _, _, (j, const, idx, x, colour, n_coloured, h_mb) = heapq.heappop(heap)
        if -neg_bound <= best + tol:
            break  # every other open node has a bound at most this one
        nodes += 1
        if colour is not None and comp.adj is not None and len(idx) > 1 and \
                len(idx) <= RECOLOUR_SHRINK * n_coloured:
            # the alive queries are a much smaller graph now: its own colouring is tighter
            colour, n_coloured = _recolour(comp, idx, colour), len(idx)
            mine = const + float(_class_bound(colour[idx], comp.s[idx],
                                              np.ones((1, len(idx)), dtype=bool))[0])
            if mine <= best + tol:
                continue
            if mine < -neg_bound and heap and -heap[0][0] > mine:
                # no longer the best open node: put it back with its tighter bound
                heapq.heappush(heap, (-mine, -j, counter,
                                      (j, const, idx, x, colour, n_coloured, h_mb)))
                counter += 1
                continue
        # attributes no alive query constrains are free: skip them
        while j < m and len(idx) and not comp.scope[idx, j].any():
            if heuristic is not None:
                # the node's value does not depend on a free attribute, so h at any of its
                # atoms bounds it: take the least
                h_free = heuristic.step(h_mb, x, j, comp.atoms[j].n_atoms)
                x = x.copy()
                x[j] = int(np.argmin(h_free))
                h_mb = float(h_free[x[j]])
            j += 1
        if len(idx) == 0 or j >= m:
            if const > best:
                best, best_x = const, x.copy()
            continue
        resolved, exact_sep, per_k, alive, bound = _child_bounds(comp, j, idx, const, colour)
        h_child = None
        if heuristic is not None:
            # g + h: the resolved alive queries plus the mini-bucket heuristic (admissible)
            h_child = heuristic.step(h_mb, x, j, comp.atoms[j].n_atoms)
            bound = np.minimum(bound, resolved + h_child)
        # a child is separable when its alive queries have ≤ 1 unfixed attribute: bound is exact
        after = comp.scope_after[idx, j].astype(np.int64)
        separable = ~((alive & (after[None, :] > 1)).any(axis=1))
        order = np.argsort(-bound, kind="stable")
        for c in order:
            b = float(bound[c])
            if b <= best + tol:
                continue
            if separable[c]:
                b = float(exact_sep[c])  # the owner bound is the exact value here
                if b > best:
                    best = b
                    best_x = x.copy()
                    best_x[j] = c
                    ks = np.unique(comp.last[idx[comp.last[idx] > j]])
                    for k, scores in zip(ks, per_k):
                        best_x[k] = int(np.argmax(scores[:, c]))
                continue
            keep = alive[c] & (after > 0)
            child_x = x.copy()
            child_x[j] = c
            heapq.heappush(heap, (-b, -(j + 1), counter,
                                  (j + 1, float(resolved[c]), idx[keep], child_x, colour,
                                   n_coloured, 0.0 if h_child is None else float(h_child[c]))))
            counter += 1
    upper = best + (0.0 if integral else 2 * tol)
    return best, upper, True, best_x, nodes


@dataclass(frozen=True)
class ActivePart:
    """The queries a point search must consider: positive score, constrained, satisfiable.

    Tautologies (no predicate) hold at every point, so their scores add a ``constant``;
    contradictions and zero scores never contribute. ``scopes`` index into ``atoms``.
    """

    scores: npt.NDArray[np.float64]
    active: list[int]
    constant: float
    atoms: list[AttributeAtoms]
    scopes: list[list[int]]


def active_part(domain: Domain, queries: Sequence[Query], scores: npt.ArrayLike) -> ActivePart:
    """Split max_x Σ_q s_q q(x) into a constant and the part that depends on x."""
    s_all = np.asarray(scores, dtype=np.float64)
    if s_all.shape != (len(queries),) or (s_all < 0).any() or not np.isfinite(s_all).all():
        raise ValueError("scores must be finite, non-negative, one per query")
    active = [
        i for i, q in enumerate(queries)
        if s_all[i] > 0 and q.predicates and not q.is_contradiction()
    ]
    constant = math.fsum(
        float(s_all[i]) for i, q in enumerate(queries) if s_all[i] > 0 and not q.predicates
    )
    act_queries = [queries[i] for i in active]
    atoms = workload_atoms(domain, act_queries)
    pos_of = {a.name: i for i, a in enumerate(atoms)}
    scopes = [[pos_of[n] for n in q.scope] for q in act_queries]
    return ActivePart(s_all, active, constant, list(atoms), scopes)


def max_point(
    domain: Domain,
    queries: Sequence[Query],
    scores: npt.ArrayLike,
    *,
    time_limit: float | None = None,
    restarts: int = 8,
    seed: int = 0,
    colouring: bool | None = None,
    heuristic: HeuristicCompiler | None = None,
    part: ActivePart | None = None,
) -> PointSolution:
    """max_x Σ_q s_q q(x) (s ≥ 0): exact unless ``time_limit`` (seconds) runs out first.

    ``heuristic`` adds a third node bound, g + h with h the heuristic it compiles for each
    component (e.g. :func:`tessera.overlap.mini_bucket.mini_bucket_heuristic`). ``part`` is
    :func:`active_part` of the same arguments, when the caller already has it. The time limit
    covers the set-up too: colour-class bounds are skipped when the overlap graph would not be
    ready in time (:func:`graph_seconds`).
    """
    deadline = time.monotonic() + (math.inf if time_limit is None else float(time_limit))
    part = active_part(domain, queries, scores) if part is None else part
    constant, atoms, scopes = part.constant, part.atoms, part.scopes
    act_queries = [queries[i] for i in part.active]
    act_s = part.scores[part.active]
    x_codes = [0] * len(domain)
    colour, adj = None, None
    if colouring is None:
        colouring = len(act_queries) <= COLOURING_QUERIES and (
            graph_seconds(len(act_queries)) <= 0.5 * (deadline - time.monotonic()))
    if colouring and act_queries:
        adj = overlap_graph(domain, act_queries)
        colour = greedy_colouring(adj, act_s, "greedy")
    lower, upper, exact, nodes = constant, constant, True, 0
    for cols, local in independent_parts(atoms, len(act_queries), scopes):
        comp = build_component(local, np.arange(len(cols), dtype=np.int64), act_s[cols],
                                None if colour is None else colour[cols],
                                adj, cols)
        heur = None if heuristic is None else heuristic(comp, deadline)
        lo, up, ex, xa, nn = _solve_component(comp, deadline, restarts, seed, heur)
        lower += lo
        upper += up
        exact = exact and ex
        nodes += nn
        for j, at in enumerate(comp.atoms):
            x_codes[at.position] = int(at.representative[xa[j]])
    return PointSolution(lower, max(upper, lower), exact, tuple(x_codes), nodes)


def split_bound(
    domain: Domain, queries: Sequence[Query], scores: npt.ArrayLike, *, iterations: int = 150,
    time_limit: float | None = None, part: ActivePart | None = None,
) -> float:
    """A Lagrangian upper bound on max_x Σ_q s_q q(x), cheap at any size (docs/theory.md §3).

    Split each score over the query's attributes, s_q = Σ_{a∈scope(q)} λ_{q,a} with λ ≥ 0. Since
    q(x) ≤ [x_a ∈ φ_{q,a}] for every a, Σ_q s_q q(x) ≤ Σ_a max_c Σ_q λ_{q,a} [c ∈ φ_{q,a}] for
    every split. Subgradient steps move weight off the attributes whose maximising atom the query
    contains; the smallest bound seen is returned, inflated by a rounding margin. ``part``: as in
    :func:`max_point`.
    """
    part = active_part(domain, queries, scores) if part is None else part
    constant, atoms = part.constant, part.atoms
    if not part.active:
        return constant * (1.0 + 1e-12)
    s = part.scores[part.active]
    mats = [a.membership.astype(np.float64) for a in atoms]
    starts = np.cumsum([0] + [len(a.queries) for a in atoms])
    e_q = np.concatenate([a.queries for a in atoms])
    r = np.bincount(e_q, minlength=len(s)).astype(np.float64)
    lam = s[e_q] / r[e_q]
    best = math.inf
    stop = math.inf if time_limit is None else time.monotonic() + float(time_limit)
    for it in range(iterations):
        if it > 0 and time.monotonic() > stop:
            break  # every iterate gives a valid bound: keep the least so far
        total = 0.0
        g = np.empty_like(lam)
        for k, m in enumerate(mats):
            part = lam[starts[k] : starts[k + 1]]
            sc = m @ part
            c = int(np.argmax(sc))
            total += float(sc[c])
            g[starts[k] : starts[k + 1]] = m[c]
        best = min(best, total)
        mean = np.bincount(e_q, weights=g, minlength=len(s)) / r
        step = 0.5 / math.sqrt(1.0 + it)
        lam = np.maximum(lam - step * (s[e_q] / r[e_q]) * (g - mean[e_q]), 0.0)
        sums = np.bincount(e_q, weights=lam, minlength=len(s))
        lam = np.where(sums[e_q] > 0, lam * s[e_q] / np.where(sums > 0, sums, 1.0)[e_q],
                       s[e_q] / r[e_q])
    # Σ_a λ_{q,a} equals s_q only up to rounding: add a margin that covers it
    return (constant + best) * (1.0 + 1e-9) + 1e-12 * float(s.sum())
