"""Boolean queries over binary variables, as reduced ordered BDDs (docs/theory.md §2; Ghazi et
al. §2).

A :class:`BooleanQuery` is any f: {0,1}^scope → {0,1} given as a node of a ``dd`` BDD manager
whose variable names are attribute names of a binary domain (attributes of size 2: ``Boolean``
or ``IntegerRange`` 0..1). ``scope(f)`` is the BDD support: the variables labelling its internal
nodes.

The engine never evaluates a BDD node by node on the domain. It reads a query as a *layered
automaton* (see :mod:`tessera.engine.factors`): after reading the values of the first i scope
variables in some order, the state is the cofactor of f by those values (a BDD node). The number
of distinct cofactors at a layer is the width of the OBDD of f in that order; it is small for the
families of docs/theory.md §2 in their natural order, and for *symmetric* functions (OR, AND, XOR,
thresholds: functions of the number of true literals) in **every** order. Builders of symmetric
queries therefore record their :class:`Symmetric` form, from which the engine builds the
automaton combinatorially in whatever order follows the elimination order (docs/theory.md §4:
"order the chain to follow the elimination order so the width grows by O(1)").

Builders: :func:`disjunction` (monotone or with negated literals), :func:`conjunction` (a marginal
cell, conjunction of literals), :func:`parity` (XOR), :func:`at_least` (threshold),
:func:`lex_range` ([a ≤ x ≤ b] on a binary number), :func:`from_expr` (any ``dd`` expression).

:class:`BinaryEncoding` maps a domain with categorical attributes to ⌈log2 k⌉ bits per attribute
(most significant bit first), translates predicate queries into BDDs over the bits and provides
the validity constraints ``code < k`` that exclude invalid codes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tessera.errors import QueryError
from tessera.schema.domain import Boolean, Domain
from tessera.workload.query import Query

SymmetricOp = Literal["or", "and", "xor", "at_least"]


def bdd_manager(names: Iterable[str]) -> Any:
    """A fresh ``dd.autoref.BDD`` with ``names`` declared in this order (levels 0, 1, …).

    Its node table is a :func:`_quiet_table`: queries kept alive until the program exits are
    collected with their manager (in a reference cycle, or at interpreter shutdown) in any order,
    and ``dd``'s own finaliser, run first, asserts that no node is referenced any more -- an
    ``AssertionError`` whose report itself fails (``KeyError: '__main__'`` from ``inspect``),
    printed as "Exception ignored in BDD.__del__"."""
    from dd.autoref import BDD

    mgr = BDD()
    mgr._bdd.__class__ = _quiet_table()
    mgr.declare(*names)
    return mgr


_QUIET: list[type] = []


def _quiet_table() -> type:
    """``dd.bdd.BDD`` without its finaliser: a table that is going away frees nothing and need
    not check that its nodes are unreferenced (the ``Function`` objects that still hold them are
    being collected with it; their own ``__del__`` only decrements counts in it)."""
    if not _QUIET:
        from dd.bdd import BDD as Table

        class QuietTable(Table):  # type: ignore[misc]
            def __del__(self) -> None:
                pass

        _QUIET.append(QuietTable)
    return _QUIET[0]


@dataclass(frozen=True)
class Symmetric:
    """f(x) = accept(c) with c = #{v : x_v = polarity_v} (a symmetric function of literals).

    ``or``: c ≥ 1; ``and``: c = k; ``xor``: c odd; ``at_least``: c ≥ threshold.
    """

    op: SymmetricOp
    literals: tuple[tuple[str, int], ...]
    threshold: int = 1

    def n_states(self) -> int:
        """States of the running aggregate (count capped where the answer is decided)."""
        return self.threshold + 1 if self.op == "at_least" else 2

    def step(self, state: npt.NDArray[np.int64], literal_true: npt.NDArray[np.bool_]) -> Any:
        """Next aggregate state after one more literal (vectorised)."""
        lit = literal_true.astype(np.int64)
        if self.op == "or":
            return np.maximum(state, lit)
        if self.op == "and":  # state 1 = every literal so far true (initial state 1)
            return np.minimum(state, lit)
        if self.op == "xor":
            return state ^ lit
        return np.minimum(state + lit, self.threshold)

    def initial(self) -> int:
        return 1 if self.op == "and" else 0

    def accepting(self) -> npt.NDArray[np.bool_]:
        acc = np.zeros(self.n_states(), dtype=bool)
        acc[-1] = True  # or: 1, and: 1, xor: 1 (odd), at_least: threshold
        return acc


@dataclass(frozen=True, eq=False)
class BooleanQuery:
    """A Boolean query f given by a BDD node ``node`` of ``manager`` (variables = attributes)."""

    manager: Any
    node: Any
    symmetric: Symmetric | None = field(default=None)

    @property
    def scope(self) -> tuple[str, ...]:
        """scope(f): the support of the BDD, in the manager's level order."""
        levels = self.manager.var_levels
        return tuple(sorted(self.manager.support(self.node), key=levels.__getitem__))

    def cofactor_layers(
        self, order: Sequence[str], max_states: int = 1 << 14
    ) -> tuple[list[npt.NDArray[np.int64]], npt.NDArray[np.bool_]] | None:
        """The layered automaton of f reading ``order`` (a permutation of the scope).

        Returns (transitions, accept): ``transitions[i][s, b]`` is the state after reading
        value b of ``order[i]`` in state s (state 0 of layer 0 is f itself); ``accept[s]`` for
        the final (constant) states. ``None`` if a layer would exceed ``max_states`` states.
        """
        if self.symmetric is not None:
            return _symmetric_layers(self.symmetric, order)
        mgr = self.manager
        states: list[Any] = [self.node]
        transitions: list[npt.NDArray[np.int64]] = []
        for name in order:
            index: dict[Any, int] = {}
            table = np.empty((len(states), 2), dtype=np.int64)
            for i, node in enumerate(states):
                for b in (0, 1):
                    child = mgr.let({name: bool(b)}, node)
                    table[i, b] = index.setdefault(child, len(index))
            if len(index) > max_states:
                return None
            transitions.append(table)
            states = list(index)
        if not all(s == mgr.true or s == mgr.false for s in states):
            raise ValueError("order does not cover the scope of the query")
        return transitions, np.array([s == mgr.true for s in states], dtype=bool)

    def evaluate(self, domain: Domain, codes: npt.NDArray[np.integer]) -> npt.NDArray[np.bool_]:
        """f(x) for rows of codes, shape (n, len(domain)) (vectorised over rows)."""
        codes = np.asarray(codes)
        order = self.scope
        layers = self.cofactor_layers(order, max_states=1 << 30)
        assert layers is not None
        transitions, accept = layers
        state = np.zeros(codes.shape[0], dtype=np.int64)
        for name, table in zip(order, transitions, strict=True):
            state = table[state, codes[:, domain.index(name)]]
        if not order:
            return np.full(codes.shape[0], self.node == self.manager.true)
        return accept[state]

    def __call__(self, domain: Domain, x: Sequence[int]) -> bool:
        return bool(self.evaluate(domain, np.asarray([x]))[0])

    def canonical_text(self) -> str:
        """A text that names f for hashing (:func:`tessera.workload.canonical.workload_hash`):
        the manager's variable order and the BDD as nested ``ite`` (dd's ``to_expr``) — reduced
        ordered BDDs are canonical for a fixed order, so equal functions under one order give
        one text; a symmetric query adds its aggregate. Not SQL: BDD queries have no file
        syntax."""
        levels = self.manager.var_levels
        order = ",".join(sorted(levels, key=levels.__getitem__))
        text = f"BDD[{order}]({self.manager.to_expr(self.node)})"
        if self.symmetric is not None:
            s = self.symmetric
            text += f" symmetric({s.op}, {list(s.literals)}, {s.threshold})"
        return text


def _symmetric_layers(
    sym: Symmetric, order: Sequence[str]
) -> tuple[list[npt.NDArray[np.int64]], npt.NDArray[np.bool_]]:
    polarity = dict(sym.literals)
    n = sym.n_states()
    states = np.arange(n)
    transitions = []
    for i, name in enumerate(order):
        table = np.stack(
            [sym.step(states, np.full(n, b == polarity[name])) for b in (0, 1)], axis=1
        )
        if i == 0:  # layer 0 has the single initial state
            table = table[[sym.initial()]]
        transitions.append(table)
    if not order:
        return [], np.array([bool(sym.accepting()[sym.initial()])])
    return transitions, sym.accepting()


# -- builders -------------------------------------------------------------------------------


def _literals(literals: Mapping[str, int] | Sequence[str]) -> tuple[tuple[str, int], ...]:
    if isinstance(literals, Mapping):
        items = tuple((str(k), int(v)) for k, v in literals.items())
    else:
        items = tuple((str(k), 1) for k in literals)
    if len({k for k, _ in items}) != len(items):
        raise QueryError("a variable appears twice in a Boolean query")
    if any(v not in (0, 1) for _, v in items):
        raise QueryError("literal values must be 0 or 1")
    return items


def _symmetric(mgr: Any, sym: Symmetric) -> BooleanQuery:
    """Build the BDD of a symmetric function bottom-up (O(k · states) ``ite`` calls)."""
    lits = sorted(sym.literals, key=lambda kv: mgr.var_levels[kv[0]])
    n = sym.n_states()
    accept = sym.accepting()
    # nodes[c] = function of the literals below, given aggregate state c above
    nodes = [mgr.true if accept[c] else mgr.false for c in range(n)]
    for name, pol in reversed(lits):
        var = mgr.var(name)
        nxt = []
        for c in range(n):
            hit = nodes[int(sym.step(np.array([c]), np.array([True]))[0])]
            miss = nodes[int(sym.step(np.array([c]), np.array([False]))[0])]
            nxt.append(mgr.ite(var, hit, miss) if pol == 1 else mgr.ite(var, miss, hit))
        nodes = nxt
    return BooleanQuery(mgr, nodes[sym.initial()], sym)


def disjunction(mgr: Any, literals: Mapping[str, int] | Sequence[str]) -> BooleanQuery:
    """∨_i ℓ_i: monotone for a list of names; a mapping name → value gives literals x = value."""
    return _symmetric(mgr, Symmetric("or", _literals(literals)))


def conjunction(mgr: Any, literals: Mapping[str, int] | Sequence[str]) -> BooleanQuery:
    """∧_i ℓ_i(x_i): a marginal cell (x_i = value for every i)."""
    return _symmetric(mgr, Symmetric("and", _literals(literals)))


def parity(mgr: Any, literals: Mapping[str, int] | Sequence[str]) -> BooleanQuery:
    """XOR of the literals."""
    return _symmetric(mgr, Symmetric("xor", _literals(literals)))


def at_least(mgr: Any, literals: Mapping[str, int] | Sequence[str], t: int) -> BooleanQuery:
    """[#true literals ≥ t] (t ≥ 0; t = 0 is the tautology)."""
    lits = _literals(literals)
    if t <= 0:
        return BooleanQuery(mgr, mgr.true)
    if t > len(lits):
        return BooleanQuery(mgr, mgr.false)
    return _symmetric(mgr, Symmetric("at_least", lits, int(t)))


def lex_range(mgr: Any, names: Sequence[str], a: int, b: int) -> BooleanQuery:
    """[a ≤ x ≤ b] for x = Σ_i x_{names[i]} 2^{k-1-i} (``names[0]`` is the most significant)."""
    k = len(names)
    a, b = max(int(a), 0), min(int(b), (1 << k) - 1)
    if a > b:
        return BooleanQuery(mgr, mgr.false)
    ge, le = mgr.true, mgr.true
    for i in reversed(range(k)):
        x = mgr.var(names[i])
        bit_a, bit_b = (a >> (k - 1 - i)) & 1, (b >> (k - 1 - i)) & 1
        ge = (x & ge) if bit_a else (x | ge)
        le = (~x | le) if bit_b else (~x & le)
    return BooleanQuery(mgr, ge & le)


def from_expr(mgr: Any, expr: str) -> BooleanQuery:
    """Any ``dd`` expression, e.g. ``r"(x /\\ ~y) \\/ (z ^ w)"``."""
    return BooleanQuery(mgr, mgr.add_expr(expr))


# -- binary encoding of categorical attributes ----------------------------------------------


@dataclass(frozen=True, eq=False)
class BinaryEncoding:
    """Each attribute of size k as ⌈log2 k⌉ bits ``f"{name}__{j}"`` (j = 0 most significant).

    ``binary`` is the domain of the bits (Boolean attributes), ``manager`` a BDD manager over
    them (attribute after attribute, most significant bit first). A point of the original domain
    is valid iff every attribute's code is < k: :meth:`validity` returns those constraints.
    """

    domain: Domain
    binary: Domain
    manager: Any
    bits: tuple[tuple[str, ...], ...]

    @staticmethod
    def of(domain: Domain) -> BinaryEncoding:
        bits = tuple(
            tuple(f"{a.name}__{j}" for j in range(max(0, math.ceil(math.log2(a.size)))))
            for a in domain
        )
        flat = [b for group in bits for b in group]
        binary = Domain(tuple(Boolean(name=b) for b in flat))
        return BinaryEncoding(domain, binary, bdd_manager(flat), bits)

    def validity(self) -> tuple[BooleanQuery, ...]:
        """One constraint [code_a ≤ k_a − 1] per attribute whose size is not a power of 2."""
        out = []
        for a, names in zip(self.domain, self.bits, strict=True):
            if a.size < (1 << len(names)):
                out.append(lex_range(self.manager, names, 0, a.size - 1))
        return tuple(out)

    def encode(self, codes: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
        """Rows of codes (n, len(domain)) → rows of bits (n, len(binary))."""
        codes = np.asarray(codes, dtype=np.int64)
        cols = []
        for i, names in enumerate(self.bits):
            k = len(names)
            for j in range(k):
                cols.append((codes[:, i] >> (k - 1 - j)) & 1)
        return np.stack(cols, axis=1) if cols else np.zeros((codes.shape[0], 0), np.int64)

    def decode(self, bits: npt.NDArray[np.integer]) -> npt.NDArray[np.int64]:
        """Rows of bits → rows of codes (codes ≥ k mean the row violated :meth:`validity`)."""
        bits = np.asarray(bits, dtype=np.int64)
        out = np.zeros((bits.shape[0], len(self.bits)), dtype=np.int64)
        col = 0
        for i, names in enumerate(self.bits):
            for _ in names:
                out[:, i] = (out[:, i] << 1) | bits[:, col]
                col += 1
        return out

    def query(self, q: Query) -> BooleanQuery:
        """The predicate conjunction q as a BDD over the bits (each coverage span a lex range)."""
        mgr = self.manager
        node = mgr.true
        for p in q.predicates:
            names = self.bits[self.domain.index(p.attribute)]
            cover = mgr.false
            for lo, hi in p.coverage.spans:
                cover = cover | lex_range(mgr, names, lo, hi - 1).node
            node = node & cover
        return BooleanQuery(mgr, node)
