"""Queries as factors: atoms, layered automata, dense and chain factors (SPEC §2, §4).

A workload F is a list of functions f: 𝔻 → {0,1}, each a predicate conjunction
(:class:`~tessera.query.Query`) or a Boolean query (:class:`~tessera.engine.bdd.BooleanQuery`);
the model is exp(Σ_f θ_f f(x)). This module turns F into *factors over small tables* without
ever over-counting (the trap of SPEC §4).

**The exact scheme: chain compilation.** Every function is read as a layered deterministic
automaton over its scope in a chosen order v_1..v_k: state s_0 is fixed, s_i = δ_i(s_{i-1}, x_{v_i})
and f(x) = accept(s_k). For a BDD the state is the cofactor of f by the values read so far; for a
predicate conjunction (AND-type) it is the running AND; for symmetric functions (OR, AND, XOR,
thresholds) the running count, capped. The automaton becomes

* hard factors [s_1 = δ_1(x_{v_1})], [s_i = δ_i(s_{i-1}, x_{v_i})] (log-potential 0 or −∞) over
  *auxiliary state variables* s_1..s_{k-1}, and
* one soft factor θ_f · accept(δ_k(s_{k-1}, x_{v_k})) over (s_{k-1}, x_{v_k}): its *evaluation
  factor*, also used for the expectation E[f].

Because every x determines every s_i, Σ over the auxiliary variables adds exactly one term per
x: the compiled model has the same Z, maximum and distribution as the original one, in every
semiring — unlike one guessed bit per function. Why this scheme rather than running bits with
OR-convolution at joins: it is one mechanism for every function `dd` can express (ranges are not
AND/OR-type, thresholds need counts, XOR a parity), hard factors are just −∞ entries in all three
semirings, the dynamic program stays an ordinary variable elimination (sampling and the
up-and-down pass come for free), and the chain's order is ours to choose: we read each scope in
the order of a first elimination order π0 of the (hybrid) incidence graph, so for commutative
functions the chain follows the elimination and the width grows by O(1).

**Dense factors.** A function whose scope table is small is simply tabulated over its scope;
functions sharing a scope (the 2^k cells of a marginal) share one table. That is what a junction
tree does and is optimal for small scopes; the choice is per scope group (:func:`compile_model`).

**Atoms.** A predicate query only sees whether x_a ∈ φ_a; codes of attribute a with the same
membership in every predicate on a form an *atom*. Each attribute becomes a variable over its
atoms with multiplicity |atom| (a unary factor log|atom| in sum-product, nothing in max-plus).
Samples and argmaxes are expanded back to codes (uniform within the atom; its smallest code).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import networkx as nx
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tessera.domain import Domain
from tessera.engine.bdd import BooleanQuery
from tessera.errors import QueryError
from tessera.query import Query

Function = Query | BooleanQuery
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: a scope group is tabulated densely when its table has at most this many entries (or at most
#: 2^(number of functions sharing it) entries: then a dense table is cheaper than their chains)
DENSE_LIMIT = 64
#: never tabulate more than this many entries for one scope group
DENSE_MAX = 1 << 16


def scope(domain: Domain, f: Function) -> tuple[int, ...]:
    """scope(f) as sorted attribute indices (SPEC §2)."""
    if isinstance(f, Query):
        return tuple(sorted(domain.index(a) for a in f.scope))
    if isinstance(f, BooleanQuery):
        return tuple(sorted(domain.index(a) for a in f.scope))
    raise TypeError(f"not a query: {f!r}")


def incidence_graph(domain: Domain, functions: Sequence[Function]) -> nx.Graph:
    """G(F): variables ``("x", i)`` on one side, functions ``("f", j)`` on the other (SPEC §2)."""
    g = nx.Graph()
    g.add_nodes_from(("x", i) for i in range(len(domain)))
    for j, f in enumerate(functions):
        g.add_node(("f", j))
        g.add_edges_from((("x", i), ("f", j)) for i in scope(domain, f))
    return g


def evaluate(domain: Domain, f: Function, codes: npt.NDArray[np.integer]) -> npt.NDArray[np.bool_]:
    """f(x) for rows of codes."""
    return np.asarray(f.evaluate(domain, codes), dtype=bool)


def validate(domain: Domain, functions: Sequence[Function]) -> None:
    """Boolean queries must live on binary attributes of ``domain`` (raises QueryError)."""
    for j, f in enumerate(functions):
        if isinstance(f, BooleanQuery):
            for name in f.scope:
                if name not in domain:
                    raise QueryError(
                        f"Boolean query #{j}: variable {name!r} is not an attribute",
                        hint="BDD variable names must be the attribute names of the domain",
                    )
                if domain[name].size != 2:
                    raise QueryError(
                        f"Boolean query #{j}: attribute {name!r} has {domain[name].size} codes",
                        hint="BDDs are over binary attributes; use BinaryEncoding for others",
                    )
        elif isinstance(f, Query):
            for name in f.scope:
                domain.index(name)
        else:
            raise QueryError(f"query #{j} is a {type(f).__name__}, not a Query or BooleanQuery")


# -- atoms ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Atoms:
    """The atoms of one attribute: codes with identical membership in every predicate.

    Elementary intervals ``[starts[e], starts[e+1])`` partition ``0..size-1``; ``atom_of[e]``
    is the atom of interval e; atoms are numbered by first appearance (so atom of code 0 is 0).
    """

    size: int
    starts: IntArray  # (E + 1,), starts[-1] == size
    atom_of: IntArray  # (E,)
    multiplicity: IntArray  # (n_atoms,) number of codes

    @property
    def n(self) -> int:
        return len(self.multiplicity)

    @staticmethod
    def of(size: int, coverages: Sequence, split_all: bool = False) -> Atoms:
        if split_all:
            starts = np.arange(size + 1, dtype=np.int64)
        else:
            points = {0, size}
            for cov in coverages:
                for lo, hi in cov.spans:
                    points.update((min(max(lo, 0), size), min(max(hi, 0), size)))
            starts = np.array(sorted(points), dtype=np.int64)
        elem = starts[:-1]
        if coverages and not split_all:
            atom_of = _membership_classes(starts, size, coverages)
        else:
            atom_of = np.arange(len(elem), dtype=np.int64) if split_all else np.zeros(
                len(elem), dtype=np.int64
            )
        lengths = np.diff(starts)
        mult = np.bincount(atom_of, weights=lengths, minlength=int(atom_of.max()) + 1)
        return Atoms(size, starts, atom_of, mult.astype(np.int64))

    def atom_of_codes(self, codes: npt.NDArray[np.integer]) -> IntArray:
        return self.atom_of[np.searchsorted(self.starts, codes, side="right") - 1]

    @cached_property
    def _representatives(self) -> IntArray:
        # elementary intervals are in code order, so an atom's first interval holds its
        # smallest code (atoms are numbered by first appearance: np.unique's first indices)
        _, first = np.unique(self.atom_of, return_index=True)
        rep = self.starts[first].astype(np.int64)
        rep.setflags(write=False)
        return rep

    def representatives(self) -> IntArray:
        """Smallest code of each atom."""
        return self._representatives.copy()

    def member(self, cov) -> npt.NDArray[np.bool_]:  # noqa: ANN001 (IntervalSet)
        """Whether each atom lies in the coverage (atoms never straddle a predicate)."""
        return cov.contains_array(self._representatives)

    def expand(self, atoms: IntArray, rng: np.random.Generator) -> IntArray:
        """Uniform codes within the given atoms (vectorised)."""
        if self.n == len(self.atom_of) and np.all(np.diff(self.starts) == 1):
            return self.representatives()[atoms]  # one code per atom
        order = np.lexsort((self.starts[:-1], self.atom_of))  # elementary intervals by atom
        lengths = np.diff(self.starts)[order]
        cum = np.concatenate([[0], np.cumsum(lengths)])
        base = np.concatenate([[0], np.cumsum(self.multiplicity)])[:-1]
        offset = rng.integers(0, self.multiplicity[atoms])
        key = base[atoms] + offset
        e = np.searchsorted(cum, key, side="right") - 1
        return self.starts[:-1][order][e] + (key - cum[e])


#: coverages per batch in :func:`_membership_classes` (a batch's matrix is E × this, in bits)
_BATCH = 1024


def _membership_classes(starts: IntArray, size: int, coverages: Sequence) -> IntArray:
    """Class of each elementary interval by its membership in every coverage, numbered by
    first appearance: exact partition refinement, one batch of distinct coverages at a time.

    Identical coverages are merged first (the cells of a marginal repeat each value's predicate
    once per other attribute's value); a batch's membership matrix comes from span endpoints
    by a difference array (no per-coverage scan of the domain), is bit-packed, and refines the
    current labels with one ``np.unique`` over (label, bits) rows. Memory O(E · batch / 8).
    """
    n_elem = len(starts) - 1
    distinct = list(dict.fromkeys(tuple(cov.spans) for cov in coverages))
    labels = np.zeros(n_elem, dtype=np.int64)
    for b in range(0, len(distinct), _BATCH):
        batch = distinct[b : b + _BATCH]
        cols, lo, hi = [], [], []
        for k, spans in enumerate(batch):
            for a, z in spans:
                cols.append(k)
                lo.append(min(max(a, 0), size))
                hi.append(min(max(z, 0), size))
        diff = np.zeros((n_elem + 1, len(batch)), dtype=np.int32)
        cols_a = np.asarray(cols, dtype=np.int64)
        np.add.at(diff, (np.searchsorted(starts, np.asarray(lo, dtype=np.int64)), cols_a), 1)
        np.add.at(diff, (np.searchsorted(starts, np.asarray(hi, dtype=np.int64)), cols_a), -1)
        member = np.cumsum(diff, axis=0)[:-1] > 0
        rows = np.concatenate([labels[:, None].view(np.uint8).reshape(n_elem, 8),
                               np.packbits(member, axis=1)], axis=1)
        _, inverse = np.unique(rows, axis=0, return_inverse=True)
        labels = inverse.ravel().astype(np.int64)
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[inverse.ravel()]


def attribute_atoms(domain: Domain, functions: Sequence[Function]) -> tuple[Atoms, ...]:
    coverages: dict[int, list] = defaultdict(list)
    split: set[int] = set()
    for f in functions:
        if isinstance(f, Query):
            for p in f.predicates:
                coverages[domain.index(p.attribute)].append(p.coverage)
        else:
            split.update(domain.index(a) for a in f.scope)
    return tuple(
        Atoms.of(a.size, coverages.get(i, []), split_all=i in split) for i, a in enumerate(domain)
    )


# -- automata -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Automaton:
    """f read in ``order``: ``transitions[i][s, a]`` = state after atom a of ``order[i]``."""

    order: tuple[int, ...]
    transitions: tuple[IntArray, ...]
    accept: npt.NDArray[np.bool_]

    def tabulate(self, shape: Sequence[int]) -> npt.NDArray[np.bool_]:
        """f over the full grid of atoms of ``order`` (axes in ``order``), for dense factors."""
        state = np.zeros((), dtype=np.int64)
        for i, (t, n) in enumerate(zip(self.transitions, shape, strict=True)):
            state = t[state[..., None], np.arange(n).reshape((1,) * i + (n,))]
        return self.accept[state]


def automaton(
    domain: Domain, f: Function, order: Sequence[int], atoms: Sequence[Atoms]
) -> Automaton:
    """The layered automaton of f reading its scope in ``order`` (attribute indices)."""
    order = tuple(order)
    if isinstance(f, Query):
        member = {domain.index(p.attribute): atoms[domain.index(p.attribute)].member(p.coverage)
                  for p in f.predicates}
        trans = []
        for i, v in enumerate(order):
            m = member[v].astype(np.int64)  # 1 = still alive
            trans.append(m[None, :] if i == 0 else np.stack([np.zeros_like(m), m]))
        return Automaton(order, tuple(trans), np.array([False, True]))
    if f.symmetric is not None:
        layers = f.cofactor_layers([domain.names[v] for v in order])
    else:
        # a general BDD: its own variable order is always available; the elimination-following
        # order is used when it is not wider (cofactor widths depend on the order)
        natural = tuple(domain.index(n) for n in f.scope)
        layers = f.cofactor_layers(list(f.scope), max_states=1 << 30)
        if order != natural and len(order) <= 64:
            assert layers is not None
            other = f.cofactor_layers([domain.names[v] for v in order],
                                      max_states=_max_width(layers[0]))
            if other is not None and _max_width(other[0]) < _max_width(layers[0]):
                layers, natural = other, order
        order = natural
    assert layers is not None
    trans, accept = layers
    # atoms of a BDD variable are its codes 0, 1 (split_all), so the alphabet is already atoms
    return Automaton(order, tuple(trans), accept)


def _max_width(trans: Sequence[IntArray]) -> int:
    return max((t.shape[0] for t in trans), default=1)


# -- the compiled model ---------------------------------------------------------------------

#: a group's indicator matrix (functions × table entries) is stored sparse (CSR) above this
#: many entries: the 2^k cells of a marginal share one table and each cell is one entry of it,
#: so a dense matrix would be quadratic in the table (74 × 99 cells: 430 MB instead of 90 kB)
SPARSE_ABOVE = 1 << 16

Indicators = FloatArray | sp.csr_array


@dataclass(frozen=True)
class FactorGroup:
    """Log-potential table over ``scope`` (compiled variable ids, axes in this order).

    log φ(x_scope) = Σ_j θ_{functions[j]} · indicators[j] + hard (0 / −∞) + log multiplicity
    (sum-product only). ``indicators`` rows are f over the table, flattened in C order (a dense
    array, or CSR when large).
    """

    scope: tuple[int, ...]
    shape: tuple[int, ...]
    functions: IntArray
    indicators: Indicators  # (len(functions), prod(shape))
    hard: FloatArray | None = None
    log_multiplicity: FloatArray | None = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def log_table(self, theta: FloatArray, counts_multiplicity: bool) -> FloatArray:
        t = (np.asarray(theta[self.functions] @ self.indicators, dtype=np.float64)
             if len(self.functions) else np.zeros(self.size))
        if self.hard is not None:
            t = t + self.hard
        if counts_multiplicity and self.log_multiplicity is not None:
            t = t + self.log_multiplicity
        return t.reshape(self.shape)

    def expectations(self, p: FloatArray) -> FloatArray:
        """Σ_entries f(entry) p(entry) for each function of the group (p flattened)."""
        return np.asarray(self.indicators @ p, dtype=np.float64)

    def values_at(self, flat: int) -> npt.NDArray[np.bool_]:
        """f(entry) for each function of the group, at one flattened entry."""
        column = self.indicators[:, [flat]]
        if sp.issparse(column):
            column = column.toarray()
        return np.asarray(column).ravel() > 0.5


@dataclass(frozen=True)
class CompiledModel:
    """Variables (attributes as atoms, then chain states) and factor groups.

    ``constant[j]`` is f_j's value when its scope is empty (else −1). Constraint functions
    (``hard`` in :func:`compile_model`) appear only as −∞ entries, never with a θ.
    """

    domain: Domain
    atoms: tuple[Atoms, ...]
    sizes: tuple[int, ...]
    labels: tuple[str, ...]  # a human name per compiled variable (for resource errors)
    owner: tuple[int, ...]  # function owning a chain state, −1 for attributes
    groups: tuple[FactorGroup, ...]
    eval_group: tuple[int, ...]  # per function, group holding its evaluation factor (−1 none)
    constant: tuple[int, ...]
    n_functions: int
    first_order: tuple[int, ...]  # π0 over attributes (and chain functions), for the record


@dataclass(frozen=True)
class GroupSpec:
    """A factor group before tabulation: its scope and how its table will be filled.

    ``kind``: "multiplicity" (log|atom| of one attribute), "dense" (the functions tabulated
    over their common scope), "transition" (hard [s_{i+1} = δ_i(s_i, x_v)] of layer ``layer``
    of ``automaton``) or "evaluation" (θ_f · accept(δ_k(s_{k-1}, x_v)), the last layer).
    """

    scope: tuple[int, ...]
    kind: str
    functions: tuple[int, ...] = ()
    automaton: Automaton | None = None
    layer: int = 0


@dataclass(frozen=True, eq=False)
class Layout:
    """Everything about the compiled model except its tables: variables, sizes, group scopes.

    Built first, so that the elimination order and the memory plan are known (and the guard
    can refuse) before any table is allocated; :func:`tabulate` then fills the tables.
    """

    domain: Domain
    functions: tuple[Function, ...]
    hard: tuple[bool, ...]
    atoms: tuple[Atoms, ...]
    sizes: tuple[int, ...]
    labels: tuple[str, ...]
    owner: tuple[int, ...]
    specs: tuple[GroupSpec, ...]
    eval_group: tuple[int, ...]
    constant: tuple[int, ...]
    first_order: tuple[int, ...]

    @property
    def scopes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(g.scope for g in self.specs)

    def factor_bytes(self) -> int:
        """Upper bound on the bytes the factor tables and indicator matrices take."""
        total = 0
        for g in self.specs:
            size = math.prod(self.sizes[v] for v in g.scope)
            total += 2 * 8 * size  # the log table of a pass and a hard / multiplicity table
            soft = [j for j in g.functions if not self.hard[j]]
            if len(soft) * size <= SPARSE_ABOVE:
                total += 8 * len(soft) * size
            else:  # CSR: float64 value + int32 index per non-zero, plus row pointers
                total += 12 * sum(self._nonzero_bound(j, g.scope) for j in soft) + 8 * len(soft)
        return total

    def _nonzero_bound(self, j: int, scope_: tuple[int, ...]) -> int:
        f = self.functions[j]
        if isinstance(f, Query):  # f is a product of per-attribute memberships
            d = self.domain
            return math.prod(int(self.atoms[d.index(p.attribute)].member(p.coverage).sum())
                             for p in f.predicates)
        return math.prod(self.sizes[v] for v in scope_)


def _hybrid_graph(
    n_attr: int, dense_scopes: Sequence[tuple[int, ...]], chain_scopes: dict[int, tuple[int, ...]]
) -> nx.Graph:
    """Primal graph of dense groups plus one node per chained function (its incidence star)."""
    g = nx.Graph()
    g.add_nodes_from(range(n_attr))
    for s in dense_scopes:
        g.add_edges_from((a, b) for i, a in enumerate(s) for b in s[i + 1 :])
    for j, s in chain_scopes.items():
        g.add_edges_from((("f", j), v) for v in s)
    return g


def layout_model(
    domain: Domain,
    functions: Sequence[Function],
    names: Sequence[str],
    hard: Sequence[bool] | None = None,
    *,
    dense_limit: int = DENSE_LIMIT,
    heuristic: str = "min-fill",
    cap: float = math.inf,
) -> Layout:
    """Atoms, scope groups (dense) and chains (auxiliary states) for F, without any table.

    π0, the order in which chains read their scopes, is a greedy elimination order of the
    hybrid graph; it only shapes the chains, so when it would build a bag of more than ``cap``
    vertices it is completed cheaply (remaining vertices by degree) instead of by fill-in.
    """
    from tessera.engine.decomposition import Aborted, greedy_elimination

    validate(domain, functions)
    functions = tuple(functions)
    hard = tuple(hard) if hard is not None else (False,) * len(functions)
    atoms = attribute_atoms(domain, functions)
    n_attr = len(domain)
    scopes = [scope(domain, f) for f in functions]
    constant = [-1] * len(functions)
    by_scope: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for j, s in enumerate(scopes):
        if not s:
            constant[j] = int(f_const(functions[j]))
        else:
            by_scope[s].append(j)

    dense: dict[tuple[int, ...], list[int]] = {}
    chained: dict[int, tuple[int, ...]] = {}
    for s, js in by_scope.items():
        size = math.prod(atoms[v].n for v in s)
        if len(s) == 1 or size <= min(DENSE_MAX, max(dense_limit, 2 ** min(len(js), 30))):
            dense[s] = js
        else:
            chained.update((j, s) for j in js)

    hybrid = _hybrid_graph(n_attr, list(dense), chained)
    result = greedy_elimination(hybrid, heuristic, cap=cap)
    if isinstance(result, Aborted):  # a wide model: the guard will decide; keep π0 cheap
        pi0 = sorted(hybrid.nodes, key=lambda v: (hybrid.degree(v), repr(v)))
    else:
        pi0 = list(result.order)
    position = {node: i for i, node in enumerate(pi0)}

    sizes = [a.n for a in atoms]
    labels = list(domain.names)
    owner = [-1] * n_attr
    specs: list[GroupSpec] = [GroupSpec((v,), "multiplicity") for v in range(n_attr)]
    eval_group = [-1] * len(functions)
    for s, js in dense.items():
        specs.append(GroupSpec(s, "dense", tuple(js)))
        for j in js:
            eval_group[j] = len(specs) - 1
    for j, s in chained.items():
        aut = automaton(domain, functions[j], tuple(sorted(s, key=position.__getitem__)), atoms)
        prev: int | None = None  # compiled id of s_i
        k = len(aut.order)
        for i, v in enumerate(aut.order):
            if i == k - 1:  # evaluation factor over (s_{k-1}, x_v)
                sc = (v,) if prev is None else (prev, v)
                specs.append(GroupSpec(sc, "evaluation", (j,), aut, i))
                eval_group[j] = len(specs) - 1
                break
            state = len(sizes)
            sizes.append(aut.transitions[i + 1].shape[0])
            labels.append(f"state {i + 1} of {names[j]}")
            owner.append(j)
            sc = (v, state) if prev is None else (prev, v, state)
            specs.append(GroupSpec(sc, "transition", (), aut, i))
            prev = state

    return Layout(domain, functions, hard, atoms, tuple(sizes), tuple(labels), tuple(owner),
                  tuple(specs), tuple(eval_group), tuple(constant),
                  tuple(v for v in pi0 if isinstance(v, int)))


def tabulate(layout: Layout) -> CompiledModel:
    """Fill the tables of every group of ``layout`` (call after the memory guard)."""
    sizes, hard, atoms = layout.sizes, layout.hard, layout.atoms
    groups: list[FactorGroup] = []
    for spec in layout.specs:
        sc = spec.scope
        shape = tuple(sizes[v] for v in sc)
        size = math.prod(shape)
        if spec.kind == "multiplicity":
            v = sc[0]
            groups.append(FactorGroup(sc, shape, np.zeros(0, np.int64), np.zeros((0, size)), None,
                                      np.log(atoms[v].multiplicity.astype(np.float64))))
        elif spec.kind == "transition":  # hard factor [s_{i+1} = t[s_i, x_v]]
            aut = spec.automaton
            assert aut is not None
            t = aut.transitions[spec.layer]
            onehot = t[..., None] == np.arange(sizes[sc[-1]])
            with np.errstate(divide="ignore"):
                logh = np.log(onehot.astype(np.float64))
            arr = logh[0] if len(sc) == 2 else logh
            groups.append(FactorGroup(sc, shape, np.zeros(0, np.int64), np.zeros((0, size)),
                                      arr.ravel()))
        elif spec.kind == "evaluation":
            aut = spec.automaton
            assert aut is not None
            ind = aut.accept[aut.transitions[spec.layer]]  # (n_prev, atoms)
            row = ind.reshape(1, -1) if len(sc) == 2 else ind[0][None]
            groups.append(_soft_group(sc, shape, list(spec.functions), [row[0]], hard))
        else:
            rows = [automaton(layout.domain, layout.functions[j], sc, atoms).tabulate(shape).ravel()
                    for j in spec.functions]
            groups.append(_soft_group(sc, shape, list(spec.functions), rows, hard))
    c = layout
    return CompiledModel(c.domain, c.atoms, c.sizes, c.labels, c.owner, tuple(groups),
                         c.eval_group, c.constant, len(c.functions), c.first_order)


def _soft_group(
    sc: tuple[int, ...], shape: tuple[int, ...], fs: list[int],
    rows: list[npt.NDArray[np.bool_]], hard: Sequence[bool],
) -> FactorGroup:
    """θ-linear group of functions ``fs`` (f over the table in ``rows``); hard ones become −∞."""
    size = math.prod(shape)
    h = None
    hard_rows = [r for j, r in zip(fs, rows, strict=True) if hard[j]]
    if hard_rows:
        ok = np.logical_and.reduce(hard_rows)
        with np.errstate(divide="ignore"):
            h = np.log(ok.astype(np.float64))
    soft = [(j, r) for j, r in zip(fs, rows, strict=True) if not hard[j]]
    ind: Indicators
    if len(soft) * size <= SPARSE_ABOVE:
        ind = (np.stack([r for _, r in soft]).astype(np.float64) if soft
               else np.zeros((0, size)))
    else:
        cols = [np.flatnonzero(r) for _, r in soft]
        indptr = np.concatenate([[0], np.cumsum([len(c) for c in cols])])
        idx = np.concatenate(cols) if cols else np.zeros(0, np.int64)
        ind = sp.csr_array((np.ones(len(idx)), idx.astype(np.int32), indptr),
                           shape=(len(soft), size))
    return FactorGroup(sc, shape, np.asarray([j for j, _ in soft], dtype=np.int64), ind, h)


def compile_model(
    domain: Domain,
    functions: Sequence[Function],
    names: Sequence[str],
    hard: Sequence[bool] | None = None,
    *,
    dense_limit: int = DENSE_LIMIT,
    heuristic: str = "min-fill",
) -> CompiledModel:
    """Atoms, scope groups (dense) and chains (auxiliary states) for F; exact by construction."""
    return tabulate(layout_model(domain, functions, names, hard, dense_limit=dense_limit,
                                 heuristic=heuristic))


def f_const(f: Function) -> bool:
    """Value of a function with empty scope."""
    if isinstance(f, Query):
        return not f.is_contradiction()
    return bool(f.node == f.manager.true)
