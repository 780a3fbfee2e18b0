"""Boolean (BDD) queries over binary attributes, and their text (docs/theory.md §2; Ghazi et
al. §2; docs/guide.md "Workload files").

A :class:`BooleanQuery` is any f: {0,1}^scope → {0,1} given as a node of a ``dd`` BDD manager
whose variable names are attribute names of a binary domain (attributes of size 2: ``Boolean``
or ``IntegerRange`` 0..1). ``scope(f)`` is the BDD support: the variables labelling its internal
nodes. The engine reads it as a layered automaton (:mod:`tessera.engine.bdd` holds the builders
and the binary encoding of categorical attributes; :mod:`tessera.engine.factors` the automata).

**Text.** :meth:`BooleanQuery.canonical_text` names f for hashing: ``BDD[order](expr)`` — the
manager's variable order and the reduced ordered BDD as dd's nested ``ite`` expression (canonical
for a fixed order), with `` symmetric(op, literals, threshold)`` appended for a query built as a
symmetric function (:class:`Symmetric`, which the engine compiles combinatorially in any order).
:func:`parse_bdd` reads that text back — the same function, the same order, the same symmetric
form, so the same canonical text and workload hash — which is how a workload file holds a BDD
query (one line, or a ``where:`` of a YAML/JSON entry) and how ``tessera verify`` checks the
certificate of a release whose workload has BDD queries. The symmetric form of a text is checked
against its BDD (the two must be the same function), so a file cannot make the engine count one
function and the hash name another.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tessera.errors import QueryError
from tessera.schema.domain import Domain

__all__ = ["BDD_PREFIX", "BooleanQuery", "Symmetric", "SymmetricOp", "bdd_manager",
           "is_bdd_text", "parse_bdd", "symmetric_query"]

SymmetricOp = Literal["or", "and", "xor", "at_least"]

#: How the text of a BDD query starts (:meth:`BooleanQuery.canonical_text`).
BDD_PREFIX = "BDD["


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


def symmetric_query(mgr: Any, sym: Symmetric) -> BooleanQuery:
    """The BDD of a symmetric function, built bottom-up (O(k · states) ``ite`` calls)."""
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


_TEXT = re.compile(r"BDD\[(?P<order>[^\]]*)\]\((?P<expr>.*?)\)"
                   r"(?: symmetric\((?P<op>\w+), (?P<lits>\[.*\]), (?P<t>\d+)\))?", re.S)


def is_bdd_text(text: str) -> bool:
    """Whether a query's text is a BDD query's (starts with ``BDD[``)."""
    return text.lstrip().startswith(BDD_PREFIX)


def parse_bdd(text: str, domain: Domain, managers: dict[str, Any] | None = None
              ) -> BooleanQuery:
    """The BDD query of ``text`` (:meth:`BooleanQuery.canonical_text`'s form) over ``domain``:
    its variables must be attributes of two values; queries of one variable order share a
    manager through ``managers`` (order → manager). Raises :class:`~tessera.errors.QueryError`
    naming what is wrong, with a hint."""
    hint = ("a BDD query is written as tessera writes it: BDD[a,b,c](ite(a, TRUE, c)), "
            "optionally followed by ' symmetric(or, [('a', 1), ('c', 1)], 1)'")
    m = _TEXT.fullmatch(text.strip())
    if m is None:
        raise QueryError(f"cannot read the BDD query {text.strip()[:80]!r}", hint=hint)
    order = [v.strip() for v in m.group("order").split(",") if v.strip()]
    for v in order:
        if v not in domain.names:
            raise QueryError(f"BDD variable {v!r} is not an attribute of the schema",
                             hint="a BDD query's variables are attributes of two values")
        if domain[v].size != 2:
            raise QueryError(f"BDD variable {v!r} has {domain[v].size} values, not 2",
                             hint="encode it in bits (tessera.engine.bdd.BinaryEncoding)")
    if len(set(order)) != len(order):
        raise QueryError(f"a BDD variable appears twice in the order {order}", hint=hint)
    key = ",".join(order)
    pool = {} if managers is None else managers
    mgr = pool.get(key)
    if mgr is None:
        mgr = pool[key] = bdd_manager(order)
    try:
        node = mgr.add_expr(m.group("expr"))
    except Exception as e:  # dd's parser raises several types on a malformed expression
        raise QueryError(f"cannot read the BDD expression {m.group('expr')[:80]!r}: {e}",
                         hint=hint) from None
    if m.group("op") is None:
        return BooleanQuery(mgr, node)
    op = m.group("op")
    try:
        lits = tuple((str(a), int(b)) for a, b in ast.literal_eval(m.group("lits")))
    except (ValueError, SyntaxError, TypeError):
        raise QueryError(f"cannot read the symmetric literals {m.group('lits')[:80]!r}",
                         hint=hint) from None
    if op not in ("or", "and", "xor", "at_least") or any(a not in order or b not in (0, 1)
                                                         for a, b in lits):
        raise QueryError(f"cannot read the symmetric form {op}({m.group('lits')[:80]})",
                         hint="op one of or, and, xor, at_least over the order's variables, "
                              "values 0 or 1")
    sym = Symmetric(op, lits, int(m.group("t")))  # type: ignore[arg-type]
    if symmetric_query(mgr, sym).node != node:
        raise QueryError("the symmetric form of the BDD query is another function than its "
                         "BDD", hint="write the query as tessera writes it (Workload.save)")
    return BooleanQuery(mgr, node, sym)
