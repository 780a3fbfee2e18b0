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

import networkx as nx
import numpy as np
import numpy.typing as npt

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
            member = np.stack([cov.contains_array(elem) for cov in coverages], axis=1)
            _, first, inverse = np.unique(member, axis=0, return_index=True, return_inverse=True)
            rank = np.empty(len(first), dtype=np.int64)
            rank[np.argsort(first)] = np.arange(len(first))
            atom_of = rank[inverse.ravel()]
        else:
            atom_of = np.arange(len(elem), dtype=np.int64) if split_all else np.zeros(
                len(elem), dtype=np.int64
            )
        lengths = np.diff(starts)
        mult = np.bincount(atom_of, weights=lengths, minlength=int(atom_of.max()) + 1)
        return Atoms(size, starts, atom_of, mult.astype(np.int64))

    def atom_of_codes(self, codes: npt.NDArray[np.integer]) -> IntArray:
        return self.atom_of[np.searchsorted(self.starts, codes, side="right") - 1]

    def representatives(self) -> IntArray:
        """Smallest code of each atom."""
        rep = np.full(self.n, -1, dtype=np.int64)
        for e in range(len(self.atom_of) - 1, -1, -1):
            rep[self.atom_of[e]] = self.starts[e]
        return rep

    def member(self, cov) -> npt.NDArray[np.bool_]:  # noqa: ANN001 (IntervalSet)
        """Whether each atom lies in the coverage (atoms never straddle a predicate)."""
        rep = self.representatives()
        return cov.contains_array(rep)

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

    def layer_sizes(self) -> tuple[int, ...]:
        """States after reading 1, 2, …, k variables."""
        return tuple(int(t.max()) + 1 if t.size else 1 for t in self.transitions)

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


@dataclass(frozen=True)
class FactorGroup:
    """Log-potential table over ``scope`` (compiled variable ids, axes in this order).

    log φ(x_scope) = Σ_j θ_{functions[j]} · indicators[j] + hard (0 / −∞) + log multiplicity
    (sum-product only). ``indicators`` rows are f over the table, flattened in C order.
    """

    scope: tuple[int, ...]
    shape: tuple[int, ...]
    functions: IntArray
    indicators: FloatArray  # (len(functions), prod(shape))
    hard: FloatArray | None = None
    log_multiplicity: FloatArray | None = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def log_table(self, theta: FloatArray, counts_multiplicity: bool) -> FloatArray:
        t = theta[self.functions] @ self.indicators if len(self.functions) else np.zeros(self.size)
        if self.hard is not None:
            t = t + self.hard
        if counts_multiplicity and self.log_multiplicity is not None:
            t = t + self.log_multiplicity
        return t.reshape(self.shape)


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
    from tessera.engine.decomposition import elimination_order

    validate(domain, functions)
    hard = list(hard) if hard is not None else [False] * len(functions)
    atoms = attribute_atoms(domain, functions)
    n_attr = len(domain)
    scopes = [scope(domain, f) for f in functions]
    constant = [-1] * len(functions)
    by_scope: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for j, s in enumerate(scopes):
        if not s:
            c = f_const(functions[j])
            constant[j] = int(c)
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

    pi0 = elimination_order(_hybrid_graph(n_attr, list(dense), chained), heuristic=heuristic)
    position = {node: i for i, node in enumerate(pi0)}

    sizes = [a.n for a in atoms]
    labels = list(domain.names)
    owner = [-1] * n_attr
    groups: list[FactorGroup] = []
    eval_group = [-1] * len(functions)

    def add_group(scope_: tuple[int, ...], fs: list[int], table: npt.NDArray, hard_mask) -> int:  # noqa: ANN001
        shape = tuple(sizes[v] for v in scope_)
        soft = [j for j in fs if not hard[j]]
        ind = np.asarray(table, dtype=np.float64).reshape(len(fs), -1) if fs else np.zeros((0, 0))
        hard_rows = [i for i, j in enumerate(fs) if hard[j]]
        h = hard_mask
        if hard_rows:
            ok = ind[hard_rows].min(axis=0)
            with np.errstate(divide="ignore"):
                extra = np.log(ok)
            h = extra if h is None else h + extra
        keep = [i for i, j in enumerate(fs) if not hard[j]]
        groups.append(
            FactorGroup(
                scope_, shape, np.asarray(soft, dtype=np.int64),
                ind[keep] if keep else np.zeros((0, math.prod(shape))), h,
            )
        )
        for j in fs:
            eval_group[j] = len(groups) - 1
        return len(groups) - 1

    # unary multiplicity factors (log |atom|), one per attribute
    for v in range(n_attr):
        shape = (sizes[v],)
        groups.append(
            FactorGroup((v,), shape, np.zeros(0, np.int64), np.zeros((0, sizes[v])), None,
                        np.log(atoms[v].multiplicity.astype(np.float64)))
        )

    for s, js in dense.items():
        shape = tuple(sizes[v] for v in s)
        tables = np.stack([automaton(domain, functions[j], s, atoms).tabulate(shape) for j in js])
        add_group(s, js, tables, None)

    for j, s in chained.items():
        order = tuple(sorted(s, key=position.__getitem__))
        aut = automaton(domain, functions[j], order, atoms)
        prev: int | None = None  # compiled id of s_{i}
        k = len(aut.order)
        for i, (v, t) in enumerate(zip(aut.order, aut.transitions, strict=True)):
            if i == k - 1:  # evaluation factor over (s_{k-1}, x_v)
                ind = aut.accept[t]  # (n_prev, atoms)
                sc = (v,) if prev is None else (prev, v)
                add_group(sc, [j], ind[None].reshape(1, -1) if prev is not None else ind[0][None],
                          None)
                break
            n_next = aut.transitions[i + 1].shape[0]
            state = len(sizes)
            sizes.append(n_next)
            labels.append(f"state {i + 1} of {names[j]}")
            owner.append(j)
            # hard factor [s_{i+1} = t[s_i, x_v]]
            onehot = t[..., None] == np.arange(n_next)
            with np.errstate(divide="ignore"):
                logh = np.log(onehot.astype(np.float64))
            if prev is None:
                sc, arr = (v, state), logh[0]
            else:
                sc, arr = (prev, v, state), logh
            groups.append(FactorGroup(sc, tuple(sizes[u] for u in sc), np.zeros(0, np.int64),
                                      np.zeros((0, arr.size)), arr.ravel()))
            prev = state

    return CompiledModel(
        domain=domain,
        atoms=atoms,
        sizes=tuple(sizes),
        labels=tuple(labels),
        owner=tuple(owner),
        groups=tuple(groups),
        eval_group=tuple(eval_group),
        constant=tuple(constant),
        n_functions=len(functions),
        first_order=tuple(v for v in pi0 if isinstance(v, int)),
    )


def f_const(f: Function) -> bool:
    """Value of a function with empty scope."""
    if isinstance(f, Query):
        return not f.is_contradiction()
    return bool(f.node == f.manager.true)
