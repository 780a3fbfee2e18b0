"""Tree decompositions: elimination heuristics, nice form, width and the memory guard
(docs/theory.md §4).

A tree decomposition (T, {X_t}) of a graph G has a bag per node such that every vertex and every
edge lies in some bag and the bags holding a vertex form a subtree; its width is max|X_t| − 1.
An elimination order π gives one: eliminating v makes its remaining neighbours N⁺(v) a clique,
X_v = {v} ∪ N⁺(v), and the parent of X_v is the bag of the first-eliminated vertex of N⁺(v).
The dynamic program (:mod:`tessera.engine.program`) runs on exactly these bags ("buckets");
one elimination step is a nice decomposition's introduce nodes + join of the child messages +
forget v, batched into one numpy operation. :meth:`TreeDecomposition.nice` produces the explicit
nice form (leaf / introduce / forget / join, empty root) for inspection and tests.

Heuristics: min-fill (fewest fill edges, ties by smallest table) and min-degree, with fill
counts and bag costs maintained incrementally and lazy priority updates (only the neighbours of
the eliminated vertex, and the common neighbours of the fill edges, change key), simplicial
vertices first, and a cost cap that stops a candidate order at its first oversized bag, before
its fill-in is built (:func:`greedy_elimination`). On sparse graphs a step costs O(bag²) plus
set intersections, so incidence graphs with tens of thousands of query vertices decompose in
seconds. :func:`exact_treewidth` solves small graphs exactly (≤ 16 vertices).

Guard: before the program allocates a table, :func:`memory_plan` estimates every bucket's size
from the variable sizes, and :func:`check_memory` raises :class:`~tessera.errors.ResourceError`
naming the width, the estimate and what sits in the largest bag. The elimination itself is
capped too, so an order whose single table would exceed the limit astronomically is abandoned
before its clique is built (:func:`refuse_bag`).

Why this module is long (about 570 lines): it is one algorithm with its numerics, elimination
orders and the decompositions they induce. The greedy heuristics keep fill counts and bag costs
incrementally and stop at a cost cap; :class:`TreeDecomposition` and its nice form are built from
the same elimination; :func:`exact_treewidth` checks the heuristics on small graphs; and the
memory guard prices the bags they produce in the same terms (log-sizes, entries, bytes).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import networkx as nx

from tessera.errors import ResourceError

Heuristic = Literal["min-fill", "min-degree"]
HEURISTICS: tuple[str, ...] = ("min-fill", "min-degree")
DEFAULT_MEMORY_LIMIT = 2 << 30  # 2 GiB


@dataclass(frozen=True)
class Elimination:
    """A greedy elimination order with the cost of each bag.

    ``costs[t]`` = Σ_{u ∈ X_t} log_size(u) for the bag X_t = {π_t} ∪ N⁺(π_t) (log2 of its table
    size when log_size is log2 of the variable sizes, |X_t| when every vertex costs 1).
    """

    order: tuple[Hashable, ...]
    costs: tuple[float, ...]

    @property
    def max_cost(self) -> float:
        return max(self.costs, default=0.0)

    @property
    def total_cost(self) -> float:
        """log2 Σ_t 2^costs[t] (overflow-free)."""
        if not self.costs:
            return 0.0
        m = self.max_cost
        return m + math.log2(math.fsum(2.0 ** (c - m) for c in self.costs))

    def score(self) -> tuple[float, float]:
        return (self.max_cost, self.total_cost)


@dataclass(frozen=True)
class Aborted:
    """A greedy elimination stopped because bag ``bag`` (vertices) costs ``cost`` > the cap."""

    bag: tuple[Hashable, ...]
    cost: float
    step: int


def greedy_elimination(
    graph: nx.Graph,
    heuristic: str = "min-fill",
    log_size: Callable[[Hashable], float] | None = None,
    first: Iterable[Hashable] | None = None,
    cap: float = math.inf,
) -> Elimination | Aborted:
    """Greedy min-fill / min-degree elimination with incremental keys and a cost cap.

    Keys are maintained incrementally, so a step costs O(bag² + Σ set intersections) rather
    than recomputing fill-in from scratch: for every vertex u we keep

    * fill(u) = number of non-adjacent pairs in N(u), updated when a neighbour disappears
      (−|N(a) ∖ N[u]| for each a ∈ N(u)) and when a fill edge {a, b} is added (+|N(a) ∖ N(b)|
      for a, +|N(b) ∖ N(a)| for b, −1 for every common neighbour), and
    * weight(u) = log_size(u) + Σ_{a ∈ N(u)} log_size(a), the cost of u's bag,

    and re-push (lazy priority queue) only the vertices whose key changed. Reduction rule: a
    simplicial vertex (fill 0; this includes every vertex of degree ≤ 1) is always eliminated
    first, in any phase; that never increases the width, since its bag N[u] is already a clique.
    Degree-2 vertices (two-attribute queries in G(F)) have fill ≤ 1 and cost O(1) per update.

    With ``first``, those vertices are eliminated before all others (each phase greedy). As soon
    as the cheapest remaining vertex's bag costs more than ``cap`` the elimination stops
    *before* building that bag's fill-in, returning :class:`Aborted`: a candidate order that is
    already worse than the best one found (or than the memory limit) costs no more than the
    steps it took to find out.
    """
    return _greedy(_Prepared.of(graph, log_size), heuristic, first, cap)


@dataclass(frozen=True)
class _Prepared:
    """Adjacency, bag weights and fill counts of a graph, shared by several candidate orders."""

    nodes: list[Hashable]
    index: dict[Hashable, int]
    adj: list[set[int]]
    lsz: list[float]
    weight: list[float]
    fill: list[int]

    @staticmethod
    def of(graph: nx.Graph, log_size: Callable[[Hashable], float] | None) -> _Prepared:
        nodes = list(graph.nodes)
        index = {n: i for i, n in enumerate(nodes)}
        adj: list[set[int]] = [set() for _ in nodes]
        for a, b in graph.edges:
            if a != b:
                adj[index[a]].add(index[b])
                adj[index[b]].add(index[a])
        lsz = [float(log_size(n)) if log_size else 1.0 for n in nodes]
        weight = [lsz[u] + math.fsum(lsz[a] for a in adj[u]) for u in range(len(nodes))]
        # fill(u) = C(d, 2) − (edges inside N(u)); the inner count is Σ_a |N(a) ∩ N(u)| / 2,
        # one C-level set intersection per edge (iterating over the smaller set)
        fill = [0] * len(nodes)
        for u, nb in enumerate(adj):
            d = len(nb)
            fill[u] = d * (d - 1) // 2 - sum(len(adj[a] & nb) for a in nb) // 2
        return _Prepared(nodes, index, adj, lsz, weight, fill)


def _greedy(
    prep: _Prepared, heuristic: str, first: Iterable[Hashable] | None, cap: float
) -> Elimination | Aborted:
    if heuristic not in HEURISTICS:
        raise ValueError(f"unknown heuristic {heuristic!r}; one of {HEURISTICS}")
    nodes, lsz = prep.nodes, prep.lsz
    # this candidate's elimination graph: copy-on-write per vertex, so a candidate that stops
    # early costs nothing like a full copy
    adj = list(prep.adj)
    owned = [False] * len(nodes)

    def own(a: int) -> set[int]:
        if not owned[a]:
            adj[a] = set(adj[a])
            owned[a] = True
        return adj[a]

    weight, fill = list(prep.weight), list(prep.fill)
    early = {prep.index[n] for n in first} if first is not None else set()
    phase = [0 if u in early else 1 for u in range(len(nodes))]
    by_degree = heuristic == "min-degree"

    def key(u: int) -> tuple[int, float, float]:
        f = fill[u]
        return (phase[u] if f else -1, len(adj[u]) if by_degree else f, weight[u])

    version = [0] * len(nodes)
    heap = [(key(u), 0, u) for u in range(len(nodes))]
    heapq.heapify(heap)
    done = [False] * len(nodes)
    order: list[Hashable] = []
    costs: list[float] = []
    while heap:
        _, ver, u = heapq.heappop(heap)
        if done[u] or ver != version[u]:
            continue
        nb = adj[u]
        if weight[u] > cap + 1e-9:  # (float sums: equal costs must not abort)
            return Aborted(tuple(nodes[v] for v in (u, *nb)), weight[u], len(order))
        done[u] = True
        order.append(nodes[u])
        costs.append(weight[u])
        changed = set(nb)
        for a in nb:  # u leaves N(a): the pairs (u, c), c ∈ N(a) ∖ N[u], were non-adjacent
            na = own(a)
            na.discard(u)
            weight[a] -= lsz[u]
            fill[a] -= len(na) - len(na & nb)
        lst = list(nb)
        for i, a in enumerate(lst):
            na = adj[a]  # owned already (it lost u above)
            for b in lst[i + 1 :]:
                if b in na:
                    continue
                nbb = adj[b]
                common = na & nbb
                for w in common:  # the pair {a, b} of N(w) becomes adjacent
                    fill[w] -= 1
                fill[a] += len(na) - len(common)  # new pairs (b, c), c ∈ N(a) ∖ N(b)
                fill[b] += len(nbb) - len(common)
                na.add(b)
                nbb.add(a)
                weight[a] += lsz[b]
                weight[b] += lsz[a]
                changed |= common
        adj[u] = set()
        for a in changed:
            if not done[a]:
                version[a] += 1
                heapq.heappush(heap, (key(a), version[a], a))
    return Elimination(tuple(order), tuple(costs))


def elimination_order(
    graph: nx.Graph,
    heuristic: str = "min-fill",
    log_size: Callable[[Hashable], float] | None = None,
    first: Iterable[Hashable] | None = None,
) -> list[Hashable]:
    """A greedy elimination order of ``graph`` (min-fill or min-degree; ties: smaller table).

    With ``first``, those vertices are eliminated before all others (each phase greedy).
    See :func:`greedy_elimination`.
    """
    result = greedy_elimination(graph, heuristic, log_size, first)
    assert isinstance(result, Elimination)  # no cap, never aborted
    return list(result.order)


@dataclass(frozen=True)
class TreeDecomposition:
    """Bags ``bags[t]`` with ``parent[t]`` (−1 for a root); a forest when G is disconnected."""

    bags: tuple[frozenset, ...]
    parent: tuple[int, ...]

    @property
    def width(self) -> int:
        return max((len(b) for b in self.bags), default=0) - 1

    @staticmethod
    def from_elimination_order(graph: nx.Graph, order: Sequence[Hashable]) -> TreeDecomposition:
        bags, parents = eliminate(graph, order)
        return TreeDecomposition(tuple(frozenset(b) for b in bags), tuple(parents))

    def children(self) -> list[list[int]]:
        ch: list[list[int]] = [[] for _ in self.bags]
        for t, p in enumerate(self.parent):
            if p >= 0:
                ch[p].append(t)
        return ch

    def validate(self, graph: nx.Graph) -> None:
        """Raise AssertionError unless this is a tree decomposition of ``graph``."""
        where: dict[Hashable, list[int]] = {}
        for t, b in enumerate(self.bags):
            for v in b:
                where.setdefault(v, []).append(t)
        assert set(where) >= set(graph.nodes), "a vertex lies in no bag"
        for a, b in graph.edges:
            assert set(where[a]) & set(where[b]), f"edge {a}-{b} lies in no bag"
        for v, ts in where.items():  # bags of v connected: exactly one has a parent without v
            tops = [t for t in ts if self.parent[t] < 0 or v not in self.bags[self.parent[t]]]
            assert len(tops) == 1, f"bags of {v} are not connected"

    def nice(self) -> NiceTreeDecomposition:
        """Nice form: leaves with empty bags, introduce/forget one vertex, binary joins."""
        kinds: list[str] = []
        bags: list[frozenset] = []
        vertex: list[Hashable | None] = []
        children: list[tuple[int, ...]] = []

        def node(kind: str, bag: frozenset, v: Hashable | None, ch: tuple[int, ...]) -> int:
            kinds.append(kind)
            bags.append(bag)
            vertex.append(v)
            children.append(ch)
            return len(kinds) - 1

        def path(below: int, src: frozenset, dst: frozenset) -> int:
            """Forget src \\ dst, then introduce dst \\ src, on top of node ``below``."""
            cur, bag = below, src
            for v in sorted(src - dst, key=repr):
                bag = bag - {v}
                cur = node("forget", bag, v, (cur,))
            for v in sorted(dst - src, key=repr):
                bag = bag | {v}
                cur = node("introduce", bag, v, (cur,))
            return cur

        ch = self.children()
        built: dict[int, int] = {}
        post: list[int] = []
        roots = [t for t, p in enumerate(self.parent) if p < 0]
        stack = [(t, False) for t in roots]
        while stack:  # iterative post-order (decompositions can be thousands deep)
            t, expanded = stack.pop()
            if expanded:
                post.append(t)
                continue
            stack.append((t, True))
            stack.extend((c, False) for c in ch[t])
        for t in post:
            bag = self.bags[t]
            if not ch[t]:
                top = path(node("leaf", frozenset(), None, ()), frozenset(), bag)
            else:
                tops = [path(built[c], self.bags[c], bag) for c in ch[t]]
                top = tops[0]
                for other in tops[1:]:
                    top = node("join", bag, None, (top, other))
            built[t] = top
        root_tops = [path(built[r], self.bags[r], frozenset()) for r in roots]
        top = root_tops[0] if root_tops else node("leaf", frozenset(), None, ())
        for other in root_tops[1:]:
            top = node("join", frozenset(), None, (top, other))
        return NiceTreeDecomposition(tuple(kinds), tuple(bags), tuple(vertex), tuple(children),
                                     top)


@dataclass(frozen=True)
class NiceTreeDecomposition:
    """Nodes in post-order: ``kinds[t]`` ∈ leaf / introduce / forget / join; ``root`` is empty."""

    kinds: tuple[str, ...]
    bags: tuple[frozenset, ...]
    vertex: tuple[Hashable | None, ...]
    children: tuple[tuple[int, ...], ...]
    root: int

    @property
    def width(self) -> int:
        return max((len(b) for b in self.bags), default=0) - 1

    def validate(self) -> None:
        """Check the local rules of a nice decomposition."""
        assert not self.bags[self.root]
        rows = zip(self.kinds, self.bags, self.vertex, self.children, strict=True)
        for kind, bag, v, ch in rows:
            if kind == "leaf":
                assert not ch and not bag
            elif kind == "introduce":
                assert len(ch) == 1 and v in bag and self.bags[ch[0]] == bag - {v}
                assert v not in self.bags[ch[0]]
            elif kind == "forget":
                assert len(ch) == 1 and v not in bag and self.bags[ch[0]] == bag | {v}
            else:
                assert kind == "join" and len(ch) == 2
                assert self.bags[ch[0]] == bag == self.bags[ch[1]]


def eliminate(graph: nx.Graph, order: Sequence[Hashable]) -> tuple[list[list], list[int]]:
    """Bags X_v = [v] + N⁺(v) (N⁺ sorted by elimination position) and parents, per step."""
    position = {v: i for i, v in enumerate(order)}
    if set(position) != set(graph.nodes):
        raise ValueError("the order must list every vertex exactly once")
    adj = {v: set(graph.neighbors(v)) - {v} for v in graph.nodes}
    bags: list[list] = []
    parents: list[int] = []
    for v in order:
        nb = sorted(adj[v], key=position.__getitem__)
        for a in nb:
            adj[a].discard(v)
            adj[a].update(b for b in nb if b != a)
        bags.append([v, *nb])
        parents.append(position[nb[0]] if nb else -1)
    return bags, parents


def best_elimination_order(
    graph: nx.Graph,
    heuristic: str = "min-fill",
    log_size: Callable[[Hashable], float] | None = None,
    phases: Sequence[Iterable[Hashable]] = (),
    cap: float = math.inf,
) -> Elimination | Aborted:
    """The best of the greedy order and the two-phase orders (each set of ``phases`` first).

    Greedy heuristics are myopic: on an incidence graph (variables + functions) min-fill
    prefers the cheap function nodes first and can end one above the optimum (laminar
    disjunctions); eliminating all variables first fixes that case and is terrible for others
    (tree marginals, or any workload whose attributes each touch hundreds of queries: the
    first variable's bag would hold all of them). We keep whichever gives the smallest largest
    bag, then the smallest total, and run every later candidate with the best largest bag so
    far as its cap, so a hopeless candidate stops at its first oversized bag, before the
    fill-in is built. If every candidate exceeds ``cap``, the first candidate's
    :class:`Aborted` is returned (it names the offending bag).
    """
    best: Elimination | None = None
    first_abort: Aborted | None = None
    prep = _Prepared.of(graph, log_size)
    for first in [None, *phases]:
        limit = cap if best is None else min(cap, best.max_cost)
        result = _greedy(prep, heuristic, first, limit)
        if isinstance(result, Aborted):
            first_abort = first_abort or result
            continue
        if best is None or result.score() < best.score():
            best = result
    if best is None:
        assert first_abort is not None
        return first_abort
    return best


def treewidth(graph: nx.Graph, heuristic: str = "min-fill") -> tuple[int, TreeDecomposition]:
    """An upper bound on tw(G) with its decomposition (heuristic elimination).

    For an incidence graph (nodes ``("x", i)`` / ``("f", j)``), the variables-first and
    functions-first two-phase orders are tried as well (:func:`best_elimination_order`).
    """
    kinds: dict[Hashable, list[Hashable]] = {}
    for n in graph.nodes:
        if isinstance(n, tuple) and n and n[0] in ("x", "f"):
            kinds.setdefault(n[0], []).append(n)
    result = best_elimination_order(graph, heuristic, phases=list(kinds.values()))
    assert isinstance(result, Elimination)  # no cap, never aborted
    td = TreeDecomposition.from_elimination_order(graph, result.order)
    return td.width, td


def exact_treewidth(graph: nx.Graph) -> int:
    """tw(G) exactly by the O*(2^n) elimination-set recursion (Bodlaender et al.), n ≤ 16.

    TW(S) = min_{v∈S} max(TW(S∖v), |Q(S∖v, v)|), Q(S, v) = vertices outside S ∪ {v} reachable
    from v through S.
    """
    nodes = list(graph.nodes)
    n = len(nodes)
    if n > 16:
        raise ValueError("exact_treewidth is for graphs with at most 16 vertices")
    if n == 0:
        return -1
    idx = {v: i for i, v in enumerate(nodes)}
    nbr = [0] * n
    for a, b in graph.edges:
        nbr[idx[a]] |= 1 << idx[b]
        nbr[idx[b]] |= 1 << idx[a]

    def q(s: int, v: int) -> int:
        seen, frontier, out = 1 << v, 1 << v, 0
        while frontier:
            u = (frontier & -frontier).bit_length() - 1
            frontier &= frontier - 1
            new = nbr[u] & ~seen
            seen |= new
            out |= new & ~s
            frontier |= new & s
        return bin(out & ~(1 << v)).count("1")

    full = (1 << n) - 1
    tw = [math.inf] * (1 << n)
    tw[0] = -1
    for s in range(1, full + 1):
        best = math.inf
        rest = s
        while rest:
            v = (rest & -rest).bit_length() - 1
            rest &= rest - 1
            prev = s & ~(1 << v)
            if tw[prev] < best:
                best = min(best, max(tw[prev], q(prev, v)))
        tw[s] = best
    return int(tw[full])


# -- memory guard ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryPlan:
    """Sizes of the program's tables before any is allocated."""

    width: int  # max bag size − 1 over compiled variables
    largest_entries: int  # entries of the largest bucket table
    largest_bag: int  # index (elimination step) of the largest bucket
    total_entries: int  # Σ bucket entries
    bytes_estimate: int  # float64 tables kept by the program (forward, beliefs, samplers)
    #: peak bytes of compiling its junction tree (the index maps, beyond the tables;
    #: tessera.engine.junction.compile_bytes), when the plan priced it (else 0)
    compile_bytes: int = 0

    def describe(self) -> str:
        return (f"width {self.width}, largest table {self.largest_entries:,} entries, "
                f"memory estimate {format_bytes(self.bytes_estimate)}")


#: float64 arrays the program keeps per bucket entry: forward table, downward belief, sampler
TABLES_PER_ENTRY = 3


#: the elimination stops (and the guard refuses) as soon as one bag's table would exceed the
#: memory limit 2^16 times over: such a bag is never even built as an elimination-graph clique
REFUSE_MARGIN_BITS = 16


def memory_plan(
    sizes: Sequence[int], bags: Sequence[Sequence[int]], factor_bytes: int = 0
) -> MemoryPlan:
    """Bucket table sizes of the program; ``factor_bytes`` adds the factor tables' storage."""
    entries = [math.prod(sizes[v] for v in b) for b in bags]
    largest = max(range(len(bags)), key=entries.__getitem__, default=-1)
    total = sum(entries)
    return MemoryPlan(
        width=max((len(b) for b in bags), default=0) - 1,
        largest_entries=entries[largest] if bags else 0,
        largest_bag=largest,
        total_entries=total,
        bytes_estimate=8 * TABLES_PER_ENTRY * total + factor_bytes,
    )


def check_memory(plan: MemoryPlan, limit: int, culprits: Callable[[], str]) -> None:
    """Raise ResourceError if the plan exceeds ``limit`` bytes; ``culprits()`` names the bag."""
    if plan.bytes_estimate <= limit and 8 * plan.largest_entries <= limit:
        return
    shown = culprits()
    raise ResourceError(
        f"the dynamic program needs {format_bytes(plan.bytes_estimate)} "
        f"(limit {format_bytes(limit)}): decomposition width {plan.width}, largest table "
        f"{plan.largest_entries:,} entries; its bag holds {shown}",
        hint="these queries interact through shared attributes; drop or coarsen some of them, "
        "try --heuristic min-degree, or raise the memory limit",
    )


def refuse_bag(sizes: Sequence[int], limit: int, culprits: Callable[[], str]) -> None:
    """Raise ResourceError for an elimination stopped at a bag with variable ``sizes``.

    The bag's table alone exceeds ``limit`` by more than 2^REFUSE_MARGIN_BITS, so no plan
    through this decomposition fits; its exact total is not computed (that would mean building
    the clique the cap exists to avoid).
    """
    entries = math.prod(sizes)
    raise ResourceError(
        f"the dynamic program needs more than {format_bytes(8 * entries)} "
        f"(limit {format_bytes(limit)}): decomposition width at least {len(sizes) - 1}, one "
        f"table of {_count(entries)} entries; its bag holds {culprits()}",
        hint="these queries interact through shared attributes; drop or coarsen some of them, "
        "try --heuristic min-degree, or raise the memory limit",
    )


def _count(n: int) -> str:
    """12,345 below 10^12, else 1.2e+15 (a bag's table can be astronomically large)."""
    return f"{n:,}" if n < 10**12 else f"{float(n):.1e}"


def summarize(kind: str, names: Sequence[str], shown: int = 8) -> str:
    """'attributes 'a', 'b', … (30 in all)'."""
    if not names:
        return f"no {kind}"
    head = ", ".join(repr(n) for n in names[:shown])
    return f"{kind} {head}" + (f", … ({len(names)} in all)" if len(names) > shown else "")


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def parse_bytes(text: str) -> int:
    """'2GiB', '512 MiB', '1e9' → bytes."""
    t = text.strip().replace(" ", "")
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
             "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "b": 1}
    for u, mult in units.items():
        if t.lower().endswith(u):
            return int(float(t[: -len(u)]) * mult)
    return int(float(t))
