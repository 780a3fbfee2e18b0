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

:class:`BooleanQuery`, :class:`Symmetric` and :func:`bdd_manager` are defined in
:mod:`tessera.workload.bdd` (a workload file holds BDD queries as text, below the engine) and
re-exported here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.errors import QueryError
from tessera.schema.domain import Boolean, Domain
from tessera.workload.bdd import (
    BooleanQuery,
    Symmetric,
    SymmetricOp,
    bdd_manager,
    symmetric_query,
)
from tessera.workload.query import Query

__all__ = ["BinaryEncoding", "BooleanQuery", "Symmetric", "SymmetricOp", "at_least",
           "bdd_manager", "conjunction", "disjunction", "from_expr", "lex_range", "parity"]


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


def disjunction(mgr: Any, literals: Mapping[str, int] | Sequence[str]) -> BooleanQuery:
    """∨_i ℓ_i: monotone for a list of names; a mapping name → value gives literals x = value."""
    return symmetric_query(mgr, Symmetric("or", _literals(literals)))


def conjunction(mgr: Any, literals: Mapping[str, int] | Sequence[str]) -> BooleanQuery:
    """∧_i ℓ_i(x_i): a marginal cell (x_i = value for every i)."""
    return symmetric_query(mgr, Symmetric("and", _literals(literals)))


def parity(mgr: Any, literals: Mapping[str, int] | Sequence[str]) -> BooleanQuery:
    """XOR of the literals."""
    return symmetric_query(mgr, Symmetric("xor", _literals(literals)))


def at_least(mgr: Any, literals: Mapping[str, int] | Sequence[str], t: int) -> BooleanQuery:
    """[#true literals ≥ t] (t ≥ 0; t = 0 is the tautology)."""
    lits = _literals(literals)
    if t <= 0:
        return BooleanQuery(mgr, mgr.true)
    if t > len(lits):
        return BooleanQuery(mgr, mgr.false)
    return symmetric_query(mgr, Symmetric("at_least", lits, int(t)))


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
