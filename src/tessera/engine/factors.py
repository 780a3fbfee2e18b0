"""Queries as factors: value classes, layered automata, dense and chain factors (docs/theory.md §2,
§4).

A workload F is a list of functions f: 𝔻 → {0,1}, each a predicate conjunction
(:class:`~tessera.workload.query.Query`), a Boolean query
(:class:`~tessera.engine.bdd.BooleanQuery`) or a Boolean WHERE clause
(:class:`~tessera.workload.clause.BooleanClause`); the model is exp(Σ_f θ_f f(x)). This module turns
F into *factors over small tables* without ever over-counting (the trap of docs/theory.md §4).

**The exact scheme: chain compilation.** Every function is read as a layered deterministic
automaton over its scope in a chosen order v_1..v_k: state s_0 is fixed, s_i = δ_i(s_{i-1}, x_{v_i})
and f(x) = accept(s_k). For a BDD the state is the cofactor of f by the values read so far; for a
predicate conjunction (AND-type) it is the running AND; for symmetric functions (OR, AND, XOR,
thresholds) the running count, capped; for a Boolean clause the residual formula (atoms of the
attributes read replaced by their values, constants folded: :meth:`BooleanClause.layers`). The
automaton becomes

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

**Value classes (atoms).** A predicate query only sees whether x_a ∈ φ_a; codes of attribute a
with the same membership in every predicate on a form a value class
(:mod:`tessera.workload.value_classes`, which also gives the exactness argument). Each attribute
becomes a variable over its classes with multiplicity n_codes (a unary factor log n_codes in
sum-product, nothing in max-plus); the variables of Boolean queries are split into single codes.
Samples and argmaxes are expanded back to codes (uniform within the class; its smallest code).

Why this module is long (about 550 lines, forty of them this argument): it is one scheme, the
compilation of a workload into factors without over-counting. Value classes, automata, the
dense-or-chain choice per scope group and the tabulation are the steps of that one argument, and
they share the layout (:class:`ModelLayout`) that records which compiled variable belongs to
which attribute or chain; apart, the argument would be separated from the code it justifies.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tessera.engine.bdd import BooleanQuery
from tessera.errors import QueryError, ResourceError
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.clause import BooleanClause
from tessera.workload.query import Query
from tessera.workload.value_classes import ValueClasses, value_classes, workload_value_classes

Function = Query | BooleanQuery | BooleanClause
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: a scope group is tabulated densely when its table has at most this many entries (or at most
#: 2^(number of functions sharing it) entries: then a dense table is cheaper than their chains)
DENSE_LIMIT = 64
#: never tabulate more than this many entries for one scope group
DENSE_MAX = 1 << 16


def scope(domain: Domain, f: Function) -> tuple[int, ...]:
    """scope(f) as sorted attribute indices (docs/theory.md §2)."""
    if isinstance(f, Query):
        return tuple(sorted(domain.index(a) for a in f.scope))
    if isinstance(f, (BooleanQuery, BooleanClause)):
        return tuple(sorted(domain.index(a) for a in f.scope))
    raise TypeError(f"not a query: {f!r}")


def incidence_graph(domain: Domain, functions: Sequence[Function]) -> nx.Graph:
    """G(F): variables ``("x", i)`` on one side, functions ``("f", j)`` on the other
    (docs/theory.md §2)."""
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
        elif isinstance(f, BooleanClause):
            for name, size in zip(f.scope, f.sizes, strict=True):
                if name not in domain or domain[name].size != size:
                    raise QueryError(f"Boolean clause #{j}: attribute {name!r} is not an "
                                     f"attribute of {size} codes of the domain",
                                     hint="build the clause over the model's domain")
        else:
            raise QueryError(f"query #{j} is a {type(f).__name__}, not a Query, BooleanQuery "
                             "or BooleanClause")


# -- value classes --------------------------------------------------------------------------


def attribute_classes(domain: Domain, functions: Sequence[Function]) -> tuple[ValueClasses, ...]:
    """The alphabet of each attribute variable, in domain order: its value classes for the
    predicate queries and the atoms of Boolean clauses; one class per code for the variables of
    Boolean (BDD) queries (their automata read codes); a single class for attributes no function
    mentions."""
    split = {name for f in functions if isinstance(f, BooleanQuery) for name in f.scope}
    atoms: dict[str, list[IntervalSet]] = {}
    for f in functions:
        if isinstance(f, BooleanClause):
            for p in f.atoms():
                atoms.setdefault(p.attribute, []).append(p.coverage)
    if not atoms:
        constrained = {a.name: a.classes for a in workload_value_classes(domain, functions)}
    else:  # every predicate and every atom on an attribute is a union of its classes
        covs: dict[str, list[IntervalSet]] = {}
        for f in functions:
            if isinstance(f, Query):
                for p in f.predicates:
                    covs.setdefault(p.attribute, []).append(p.coverage)
        for name, extra in atoms.items():
            covs.setdefault(name, []).extend(extra)
        constrained = {name: value_classes(domain[name].size, c) for name, c in covs.items()}
    return tuple(
        value_classes(a.size, (), split_all=True) if a.name in split
        else constrained[a.name] if a.name in constrained
        else value_classes(a.size, ())
        for a in domain
    )


# -- automata -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Automaton:
    """f read in ``order``: ``transitions[i][s, a]`` = state after atom a of ``order[i]``."""

    order: tuple[int, ...]
    transitions: tuple[IntArray, ...]
    accept: npt.NDArray[np.bool_]

    def tabulate(self, shape: Sequence[int]) -> npt.NDArray[np.bool_]:
        """f over the full grid of classes of ``order`` (axes in ``order``), for dense factors."""
        state = np.zeros((), dtype=np.int64)
        for i, (t, n) in enumerate(zip(self.transitions, shape, strict=True)):
            state = t[state[..., None], np.arange(n).reshape((1,) * i + (n,))]
        return self.accept[state]


def automaton(
    domain: Domain, f: Function, order: Sequence[int], classes: Sequence[ValueClasses]
) -> Automaton:
    """The layered automaton of f reading its scope in ``order`` (attribute indices)."""
    order = tuple(order)
    if isinstance(f, Query):
        member = {domain.index(p.attribute): classes[domain.index(p.attribute)].contains(p.coverage)
                  for p in f.predicates}
        trans = []
        for i, v in enumerate(order):
            m = member[v].astype(np.int64)  # 1 = still alive
            trans.append(m[None, :] if i == 0 else np.stack([np.zeros_like(m), m]))
        return Automaton(order, tuple(trans), np.array([False, True]))
    if isinstance(f, BooleanClause):
        # letters: the classes of each attribute (every atom is constant on them)
        clause_layers = f.layers([domain.names[v] for v in order],
                                 [classes[v].representative for v in order])
        if clause_layers is None:
            raise ResourceError(f"a Boolean clause has too many residual states in the order "
                                f"{[domain.names[v] for v in order]}",
                                hint="split the clause into smaller ones")
        return Automaton(order, tuple(clause_layers[0]), clause_layers[1])
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
    # the classes of a BDD variable are its codes 0, 1 (split_all): the alphabet is the classes
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
    """Variables (attributes over their value classes, then chain states) and factor groups.

    ``constant[j]`` is f_j's value when its scope is empty (else −1). Constraint functions
    (``hard`` in :func:`compile_model`) appear only as −∞ entries, never with a θ.
    """

    domain: Domain
    classes: tuple[ValueClasses, ...]  # per attribute: its values as a compiled variable
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

    ``kind``: "multiplicity" (log n_codes of one attribute's classes), "dense" (the functions
    tabulated over their common scope), "transition" (hard [s_{i+1} = δ_i(s_i, x_v)] of layer
    ``layer`` of ``automaton``) or "evaluation" (θ_f · accept(δ_k(s_{k-1}, x_v)), the last
    layer).
    """

    scope: tuple[int, ...]
    kind: str
    functions: tuple[int, ...] = ()
    automaton: Automaton | None = None
    layer: int = 0


@dataclass(frozen=True, eq=False)
class ModelLayout:
    """Everything about the compiled model except its tables: variables, sizes, group scopes.

    Built first, so that the elimination order and the memory plan are known (and the guard
    can refuse) before any table is allocated; :func:`tabulate` then fills the tables.
    """

    domain: Domain
    functions: tuple[Function, ...]
    hard: tuple[bool, ...]
    classes: tuple[ValueClasses, ...]
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
        members: dict[tuple[str, object], int] = {}  # (attribute, coverage) → classes inside
        for g in self.specs:
            size = math.prod(self.sizes[v] for v in g.scope)
            total += 2 * 8 * size  # the log table of a pass and a hard / multiplicity table
            soft = [j for j in g.functions if not self.hard[j]]
            if len(soft) * size <= SPARSE_ABOVE:
                total += 8 * len(soft) * size
            else:  # CSR: float64 value + int32 index per non-zero, plus row pointers
                total += 12 * sum(self._nonzero_bound(j, g.scope, members)
                                  for j in soft) + 8 * len(soft)
        return total

    def _nonzero_bound(self, j: int, scope_: tuple[int, ...],
                       members: dict[tuple[str, object], int]) -> int:
        f = self.functions[j]
        if isinstance(f, Query):  # f is a product of per-attribute memberships
            d = self.domain
            out = 1
            for p in f.predicates:  # the cells of a scope share their predicates: memoised
                key = (p.attribute, p.coverage)
                if key not in members:
                    members[key] = int(self.classes[d.index(p.attribute)]
                                       .contains(p.coverage).sum())
                out *= members[key]
            return out
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
) -> ModelLayout:
    """Value classes, scope groups (dense) and chains (auxiliary states) for F, without any table.

    π0, the order in which chains read their scopes, is a greedy elimination order of the
    hybrid graph; it only shapes the chains, so when it would build a bag of more than ``cap``
    vertices it is completed cheaply (remaining vertices by degree) instead of by fill-in.
    """
    from tessera.engine.decomposition import Aborted, greedy_elimination

    validate(domain, functions)
    functions = tuple(functions)
    hard = tuple(hard) if hard is not None else (False,) * len(functions)
    classes = attribute_classes(domain, functions)
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
        size = math.prod(classes[v].n_classes for v in s)
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

    sizes = [c.n_classes for c in classes]
    labels = list(domain.names)
    owner = [-1] * n_attr
    specs: list[GroupSpec] = [GroupSpec((v,), "multiplicity") for v in range(n_attr)]
    eval_group = [-1] * len(functions)
    for s, js in dense.items():
        specs.append(GroupSpec(s, "dense", tuple(js)))
        for j in js:
            eval_group[j] = len(specs) - 1
    for j, s in chained.items():
        aut = automaton(domain, functions[j], tuple(sorted(s, key=position.__getitem__)), classes)
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

    return ModelLayout(domain, functions, hard, classes, tuple(sizes), tuple(labels),
                       tuple(owner), tuple(specs), tuple(eval_group), tuple(constant),
                       tuple(v for v in pi0 if isinstance(v, int)))


def tabulate(layout: ModelLayout) -> CompiledModel:
    """Fill the tables of every group of ``layout`` (call after the memory guard)."""
    sizes, hard, classes = layout.sizes, layout.hard, layout.classes
    groups: list[FactorGroup] = []
    for spec in layout.specs:
        sc = spec.scope
        shape = tuple(sizes[v] for v in sc)
        size = math.prod(shape)
        if spec.kind == "multiplicity":
            v = sc[0]
            groups.append(FactorGroup(sc, shape, np.zeros(0, np.int64), np.zeros((0, size)), None,
                                      np.log(classes[v].n_codes.astype(np.float64))))
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
            ind = aut.accept[aut.transitions[spec.layer]]  # (n_prev, classes)
            row = ind.reshape(1, -1) if len(sc) == 2 else ind[0][None]
            groups.append(_soft_group(sc, shape, list(spec.functions), [row[0]], hard))
        else:
            rows = [automaton(layout.domain, layout.functions[j], sc, classes)
                    .tabulate(shape).ravel() for j in spec.functions]
            groups.append(_soft_group(sc, shape, list(spec.functions), rows, hard))
    c = layout
    return CompiledModel(c.domain, c.classes, c.sizes, c.labels, c.owner, tuple(groups),
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
    """Value classes, scope groups (dense) and chains (auxiliary states) for F; exact by
    construction."""
    return tabulate(layout_model(domain, functions, names, hard, dense_limit=dense_limit,
                                 heuristic=heuristic))


def f_const(f: Function) -> bool:
    """Value of a function with empty scope."""
    if isinstance(f, Query):
        return not f.is_contradiction()
    if isinstance(f, BooleanClause):
        return f.is_tautology()
    return bool(f.node == f.manager.true)


@dataclass(frozen=True, eq=False)
class FlatFactors:
    """All factor tables of a :class:`CompiledModel` as one flat vector (groups in order, each
    in C order: the parameter layout of :class:`~tessera.engine.junction.JunctionTree`).

    log φ = ``weights`` θ + ``base`` (sum-product: hard 0/−∞ entries and log multiplicities),
    and E[f_j] = (``indicators`` p)_j for the flat factor marginals p: one sparse product each
    way instead of a loop over groups (docs/theory.md §4.7).
    """

    indicators: sp.csr_array  # (n_functions, entries): f_j over its evaluation table
    weights: sp.csr_array  # its transpose, (entries, n_functions)
    base: FloatArray  # (entries,)


def flat_factors(compiled: CompiledModel) -> FlatFactors:
    """The block layout of every group's indicators, hard entries and multiplicities."""
    rows, cols, data, base = [], [], [], []
    offset = 0
    for g in compiled.groups:
        if len(g.functions):
            coo = sp.coo_array(g.indicators)
            rows.append(np.asarray(g.functions, dtype=np.int64)[coo.row])
            cols.append(offset + coo.col.astype(np.int64))
            data.append(coo.data.astype(np.float64))
        b = np.zeros(g.size)
        if g.hard is not None:
            b = b + g.hard
        if g.log_multiplicity is not None:
            b = b + g.log_multiplicity
        base.append(b)
        offset += g.size

    def cat(parts: list[npt.NDArray], dt: type[np.generic]) -> npt.NDArray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dt)

    a = sp.coo_array((cat(data, np.float64), (cat(rows, np.int64), cat(cols, np.int64))),
                     shape=(compiled.n_functions, offset)).tocsr()
    return FlatFactors(a, a.T.tocsr(), cat(base, np.float64))
