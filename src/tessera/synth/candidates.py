"""What the adaptive synthesizer may measure: candidate groups, their exact counts, and the size
of a model (docs/theory.md §5, "the adaptive method").

A **candidate** is a group of counting queries measured together by one noisy vector:

* a **marginal** over a set of attributes S (every cell of the product of S's domains): it
  answers every workload query whose scope lies inside S, and one row changes it by 1 in L1 and
  L2 under add/remove, by 2 in L1 and √2 in L2 under substitution — whatever the number of
  workload queries it answers;
* a **query** of the workload whose scope is too large for a dense marginal (a wide predicate,
  a Boolean clause or a BDD query over many attributes): it is measured on its own, as a single
  count, and enters the model as a feature θ_q·q(x) that the engine handles through its own
  decomposition.

The candidate set is AIM's (McKenna, Mullins, Sheldon, Miklau, "AIM: An Adaptive and Iterative
Mechanism for Differentially Private Synthetic Data", VLDB 2022, §4): the *downward closure* of
the workload's scopes (every non-empty subset of a scope is a candidate: a cheap low-order
measurement is often the best use of a small budget), with weight

    w_r = Σ_{s ∈ W} |r ∩ s|,

the number of attributes r shares with the workload's scopes (each distinct scope once), so that
selection prefers candidates relevant to many workload queries.

The **size** of a model is that of the tables its junction tree holds: the bags of a min-fill
elimination of the attribute graph whose edges join the attributes of each measured scope,
Σ_bags Π_{a ∈ bag} |a| entries of 8 bytes. A candidate that would push the size past the memory
guard is never offered to the selection (it is excluded before selection, from public
information only: the scopes already chosen and the domain).

>>> from tessera.schema.domain import Domain
>>> dom = Domain.from_dict({"a": 2, "b": 3, "c": 4})
>>> sorted(downward_closure([(0, 1), (1, 2)]))
[(0,), (0, 1), (1,), (1, 2), (2,)]
>>> model_size(dom.sizes, [(0, 1), (1, 2)])  # bags {a, b}, {b, c}: 6 + 12 entries
144
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np
import numpy.typing as npt

from tessera.engine.decomposition import eliminate, elimination_order
from tessera.engine.factors import Function, scope
from tessera.errors import TesseraError
from tessera.schema.domain import Domain
from tessera.synth.sensitive import SensitiveCounts
from tessera.workload.families import Partition
from tessera.workload.workload import Workload

__all__ = [
    "DEFAULT_MAX_CELLS",
    "Candidate",
    "CandidateCounts",
    "candidate_workload",
    "candidates",
    "downward_closure",
    "eligible",
    "grown_size",
    "model_size",
    "outside_attributes",
    "split_counts",
    "workload_scopes",
]

#: Largest marginal (number of cells) measured as one dense vector; a query whose scope is
#: larger is measured on its own.
DEFAULT_MAX_CELLS = 1 << 20

Scope = tuple[int, ...]


@dataclass(frozen=True)
class Candidate:
    """A group measured by one noisy vector: a marginal over ``scope`` (``query`` is None) or
    the single workload query number ``query`` (expanded order) over ``scope``."""

    scope: Scope
    cells: int
    weight: float
    query: int | None = None
    #: a one-way marginal of an attribute no workload query or family mentions (weight 0):
    #: measured so that the model keeps the column's distribution, never selected
    outside: bool = False

    @property
    def is_marginal(self) -> bool:
        return self.query is None

    def label(self, domain: Domain) -> str:
        names = ", ".join(domain.names[i] for i in self.scope)
        return f"marginal({names})" if self.query is None else f"query #{self.query} ({names})"


def workload_scopes(workload: Workload, max_cells: int = DEFAULT_MAX_CELLS
                    ) -> tuple[list[Scope], list[tuple[int, Function]]]:
    """The distinct scopes of the workload's families and queries, and the queries whose own
    scope has more than ``max_cells`` cells (index in expanded order, function).

    Families (marginals, cube faces, hierarchy levels, grids) contribute their attributes: the
    marginal over them answers every cell."""
    dom = workload.domain
    scopes: dict[Scope, None] = {}
    wide: list[tuple[int, Function]] = []
    for j, q in enumerate(workload.queries):
        s = scope(dom, q)
        if not s:
            continue
        if _cells(dom, s) > max_cells:
            wide.append((j, q))
        else:
            scopes.setdefault(s)
    for p in workload.partitions:
        s = tuple(sorted(dom.index(a) for a in p.attributes))
        if s:
            scopes.setdefault(s)
    return list(scopes), wide


def downward_closure(scopes: Iterable[Scope]) -> set[Scope]:
    """Every non-empty subset of every scope."""
    out: set[Scope] = set()
    for s in scopes:
        for k in range(1, len(s) + 1):
            out.update(itertools.combinations(s, k))
    return out


def _cells(domain: Domain, s: Scope) -> int:
    return math.prod(domain.sizes[i] for i in s)


def outside_attributes(workload: Workload) -> tuple[int, ...]:
    """The attributes (indices) that no query and no family of the workload mentions: a
    model fitted to the workload alone leaves them uniformly random."""
    dom = workload.domain
    mentioned = {a for q in workload.queries for a in scope(dom, q)}
    mentioned.update(dom.index(a) for p in workload.partitions for a in p.attributes)
    return tuple(a for a in range(len(dom)) if a not in mentioned)


def candidates(workload: Workload, max_cells: int = DEFAULT_MAX_CELLS,
               columns: bool = False) -> list[Candidate]:
    """The candidate groups of a workload (module docstring): marginals over the downward
    closure of its scopes (at most ``max_cells`` cells each) and the one-way marginals of the
    attributes of its wide queries, then the wide queries one by one; weights
    w_r = Σ_{s ∈ W} |r ∩ s| (at least 1). With ``columns``, last, the one-way marginal of
    every attribute outside the workload (:func:`outside_attributes`), weight 0 and marked
    ``outside``; refused when one has more than ``max_cells`` values."""
    dom = workload.domain
    scopes, wide = workload_scopes(workload, max_cells)
    degree = [0] * len(dom)  # |r ∩ s| summed over s is Σ_{a ∈ r} #{s : a ∈ s}
    for s in scopes:
        for a in s:
            degree[a] += 1
    out: list[Candidate] = []
    singles = {(a,) for _, q in wide for a in scope(dom, q)}  # a wide query's attributes
    for r in sorted(downward_closure(scopes) | singles, key=lambda s: (len(s), s)):
        cells = _cells(dom, r)
        if cells > max_cells:
            continue
        weight = float(max(1, sum(degree[a] for a in r)))
        out.append(Candidate(r, cells, weight))
    for j, q in wide:
        out.append(Candidate(scope(dom, q), 1, 1.0, query=j))
    if columns:
        for a in outside_attributes(workload):
            if dom.sizes[a] > max_cells:
                raise TesseraError(
                    f"attribute {dom.names[a]!r} is outside the workload and has "
                    f"{dom.sizes[a]:,} values, more than max_cells = {max_cells:,}: its "
                    "one-way marginal cannot be measured",
                    hint="add it to the workload, raise max_cells, or leave it uniformly "
                         "random (uniform_columns=True, --uniform-columns)")
            out.append(Candidate((a,), dom.sizes[a], 0.0, outside=True))
    return out


def candidate_workload(workload: Workload, max_cells: int = DEFAULT_MAX_CELLS,
                       columns: bool = False) -> Workload:
    """The workload whose exact counts the adaptive method reads: the candidates' wide queries
    (as predicate queries) and one marginal family per candidate scope (``columns``: also the
    outside attributes' one-way marginals, :func:`candidates`). Public: built from the
    workload and the schema only."""
    dom = workload.domain
    cands = candidates(workload, max_cells, columns)
    wide = [c for c in cands if not c.is_marginal]
    parts = [Partition(f"m{k}", tuple(dom.names[i] for i in c.scope), (None,) * len(c.scope))
             for k, c in enumerate(cands) if c.is_marginal]
    queries = [workload.queries[c.query] for c in wide if c.query is not None]
    return Workload.of(dom, queries, names=[f"w{c.query}" for c in wide], partitions=parts)


@dataclass(frozen=True, eq=False)
class CandidateCounts:
    """Exact counts per candidate, in the candidates' order (SENSITIVE: only the private steps
    read them), and the exact number of rows."""

    counts: tuple[npt.NDArray[np.int64], ...]
    n: int


def split_counts(cands: Sequence[Candidate], counts: SensitiveCounts) -> CandidateCounts:
    """The exact counts of :func:`candidate_workload` (wide queries first, then the marginal
    families' cells) cut into one array per candidate."""
    wide = [c for c in cands if not c.is_marginal]
    at = len(wide)
    out_wide = {c.query: counts.counts[k: k + 1] for k, c in enumerate(wide)}
    per: list[npt.NDArray[np.int64]] = []
    for c in cands:
        if c.is_marginal:
            per.append(counts.counts[at: at + c.cells])
            at += c.cells
        else:
            per.append(out_wide[c.query])
    if at != counts.counts.size:
        raise TesseraError("the counts do not match the candidate workload")
    return CandidateCounts(tuple(per), counts.n)


def model_size(sizes: Sequence[int], scopes: Iterable[Scope]) -> int:
    """Bytes of the junction tree of ``scopes`` (module docstring): 8 Σ_bags Π_{a∈bag} |a| over
    the maximal bags of a min-fill elimination of the attributes the scopes mention."""
    g = nx.Graph()
    for s in scopes:
        g.add_nodes_from(s)
        g.add_edges_from(itertools.combinations(s, 2))
    if g.number_of_nodes() == 0:
        return 0
    order = elimination_order(g, "min-fill", lambda v: math.log(sizes[v]))
    bags, _ = eliminate(g, order)
    cliques: list[frozenset[int]] = []  # the maximal bags: the junction tree's cliques
    for bag in sorted((frozenset(b) for b in bags), key=len, reverse=True):
        if not any(bag <= c for c in cliques):
            cliques.append(bag)
    return 8 * sum(math.prod(sizes[v] for v in c) for c in cliques)


def eligible(sizes: Sequence[int], cands: Sequence[Candidate],
             scopes: Sequence[tuple[int, ...]], limit: float,
             current: int | None = None) -> list[int]:
    """The candidates whose measurement keeps the model within ``limit`` bytes (public).

    Shortcuts before the full junction-tree size: a candidate inside a measured scope adds
    nothing; if one bag of every attribute fits, anything fits; a candidate whose attributes lie
    in pairwise different connected components of the measured scopes' graph joins them by one
    new clique (no fill-in), so the size grows by at most its own table (exactly, unless it
    absorbs a measured sub-scope). ``current``: the size of ``scopes`` (or an upper bound:
    the filter is then conservative) when the caller knows it."""
    inside = downward_closure(scopes)
    union = frozenset(a for sc in scopes for a in sc)
    everything = 8 * math.prod(sizes[a] for a in union)  # one bag of all measured attributes
    component = _components(scopes)
    out = []
    for i, c in enumerate(cands):
        if not c.is_marginal or c.scope in inside or everything * math.prod(
                sizes[a] for a in c.scope if a not in union) <= limit:  # one bag of all fits
            out.append(i)
            continue
        own = [component.get(a, ("new", a)) for a in c.scope]
        if len(set(own)) == len(own):  # joins separate components: no fill-in
            if current is None:
                current = model_size(sizes, scopes)
            grows = 8 * math.prod(sizes[a] for a in c.scope)
            if current + grows <= limit:
                out.append(i)
            continue
        if model_size(sizes, [*scopes, c.scope]) <= limit:
            out.append(i)
    return out


def grown_size(sizes: Sequence[int], scopes: Sequence[tuple[int, ...]], current: int | None,
               scope: tuple[int, ...]) -> int | None:
    """An upper bound on the size of ``scopes`` + ``scope`` from ``current`` (the size of
    ``scopes``, or an upper bound on it) without a new elimination when it is cheap to say (a
    scope inside a measured one adds nothing; one joining separate components adds at most its
    table: :func:`eligible`); None otherwise."""
    if current is None:
        return None
    if scope in downward_closure(scopes):
        return current
    component = _components(scopes)
    own = [component.get(a, ("new", a)) for a in scope]
    if len(set(own)) == len(own):
        return current + 8 * math.prod(sizes[a] for a in scope)
    return None


def _components(scopes: Sequence[tuple[int, ...]]) -> dict[int, int]:
    """The connected component of every attribute of the measured scopes' graph."""
    graph = nx.Graph()
    for sc in scopes:
        graph.add_nodes_from(sc)
        graph.add_edges_from(itertools.combinations(sc, 2))
    return {a: k for k, comp in enumerate(nx.connected_components(graph)) for a in comp}
