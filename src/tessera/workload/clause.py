"""Boolean WHERE clauses: any formula of AND, OR and NOT over predicates (docs/theory.md §2).

A predicate query (:class:`~tessera.workload.query.Query`) is a conjunction of one predicate per
attribute. A WHERE clause such as ``a = 1 OR b = 2`` or ``NOT (a = 1 AND b = 2)`` is not: it is a
*Boolean query*, f(x) = F(x_a ∈ φ_1, x_b ∈ φ_2, …) for a Boolean formula F over predicates
(:class:`~tessera.workload.query.Predicate`, the formula's atoms). :class:`BooleanClause` holds one.

**Two-valued form, SQL's three values already resolved.** SQL evaluates a WHERE clause in
three-valued (Kleene) logic: a comparison is *unknown* on a NULL, ``NOT unknown`` is unknown,
and a row counts iff the clause is *true*. :func:`tessera.workload.parse.parse_query` resolves that
while parsing: with T(e) and F(e) the codes (formulas) where e is true and false,

    T(NOT e) = F(e),  T(e ∧ e') = T(e) ∧ T(e'),  T(e ∨ e') = T(e) ∨ T(e'),
    F(NOT e) = T(e),  F(e ∧ e') = F(e) ∨ F(e'),  F(e ∨ e') = F(e) ∧ F(e'),

and on one attribute the (true, unknown) code sets of :mod:`tessera.workload.parse` give T and F as
predicates (F = all codes − true − unknown). The clause stored is T(where): a formula over
predicates with AND and OR only, evaluated in ordinary two-valued logic on codes (the missing
value is a code like any other). This is exact: "is true" commutes with Kleene's AND and OR, so
an AND/OR formula is true in SQL iff it is true with every unknown atom read as false, which is
what a predicate's coverage says. Hence :meth:`BooleanClause.to_sql` prints each atom as
:meth:`~tessera.workload.query.Query.to_sql` prints a predicate, joined by AND/OR, and DuckDB
selects exactly the rows the clause counts.

**Canonical form** (:meth:`BooleanClause.build`): NOT pushed to the atoms (De Morgan; ¬(x ∈ φ) is
x ∈ A − φ over the codes), nested ANDs (ORs) flattened, atoms of one attribute under one AND (OR)
merged into one predicate (∩, ∪), constants folded, duplicates dropped, children sorted. Equal
formulas in this form compare equal; ``parse_query(c.to_sql(domain))`` gives back ``c``.
:func:`clause_or_query` returns a plain :class:`~tessera.workload.query.Query` whenever the
canonical form is a conjunction, so conjunctions keep every predicate-query route.

**Reading a clause attribute by attribute** (:meth:`BooleanClause.layers`). After the values of
some attributes are known, what is left of the formula (its *residual*: read atoms replaced by
constants, then simplified) determines the rest. Reading the scope in an order, with one letter
per value class, gives a layered deterministic automaton whose states are the distinct
residuals: the form the engine's chain compilation takes (docs/theory.md §4.4), and the source of
:meth:`BooleanClause.disjoint_terms`, the clause as a sum of pairwise disjoint predicate queries
(each accepting path of the automaton a conjunction), which the overlap solvers take as it is.

Why this module is long (about 560 lines): it is one data type, the Boolean clause. The
formula nodes, their normalisation to a canonical form, and :class:`BooleanClause` with its
residual automaton (:meth:`BooleanClause.layers`) and disjoint terms all rest on the same
canonical node representation; the small helpers at the end (:func:`separates`,
:func:`atoms_of`) are how the rest of the library reads a clause.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.errors import QueryError, ResourceError
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Predicate, Query, predicate_sql
from tessera.workload.value_classes import ValueClasses, value_classes

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Residual states of one layer (:meth:`BooleanClause.layers`) before a clause is refused.
MAX_STATES = 1 << 16


@dataclass(frozen=True)
class _Junction:
    """A conjunction or disjunction of ``children``, its hash and attributes cached."""

    children: tuple[Node, ...]
    _hash: int = field(init=False, repr=False, compare=False)
    _attrs: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((type(self).__name__, self.children)))
        object.__setattr__(self, "_attrs", _union_attrs(self.children))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:  # the cached hash is per process: rebuild it
        return (type(self), (self.children,))


class And(_Junction):
    """The conjunction of ``children`` (``And(())`` is TRUE)."""


class Or(_Junction):
    """The disjunction of ``children`` (``Or(())`` is FALSE)."""


@dataclass(frozen=True)
class Not:
    """The negation of ``child`` (for building formulas: :meth:`BooleanClause.build` removes it)."""

    child: Formula


#: A canonical formula: atoms (predicates), AND, OR.
Node = Predicate | And | Or
#: Any formula accepted by :meth:`BooleanClause.build`.
Formula = Predicate | And | Or | Not

def _attrs_of(node: Node) -> frozenset[str]:
    return frozenset((node.attribute,)) if isinstance(node, Predicate) else node._attrs


def _union_attrs(children: tuple[Formula, ...]) -> frozenset[str]:
    out: set[str] = set()
    for c in children:
        if isinstance(c, Predicate):
            out.add(c.attribute)
        elif isinstance(c, (And, Or)):
            out |= c._attrs
    return frozenset(out)


TRUE = And(())
FALSE = Or(())


def _is_true(node: Formula) -> bool:
    return type(node) is And and not node.children


def _is_false(node: Formula) -> bool:
    return type(node) is Or and not node.children


# -- canonical form ---------------------------------------------------------------------------


def _normalise(node: Formula, domain: Domain, negate: bool = False) -> Node:
    """Canonical form of ``node`` (of its negation when ``negate``), see the module docstring."""
    if isinstance(node, Not):
        return _normalise(node.child, domain, not negate)
    if isinstance(node, Predicate):
        attr = domain[node.attribute]
        full = attr.all_codes()
        cov = node.coverage & full
        if negate:
            cov = full - cov
        return _atom(node.attribute, cov, attr.size)
    if not isinstance(node, (And, Or)):
        raise QueryError(f"not a Boolean formula: {node!r}",
                         hint="build clauses from Predicate, And, Or and Not")
    conjunctive = isinstance(node, And) != negate
    kids = [_normalise(c, domain, negate) for c in node.children]
    return _combine(conjunctive, kids, domain)


def _atom(name: str, cov: IntervalSet, size: int) -> Node:
    if not cov:
        return FALSE
    if cov.is_full(size):
        return TRUE
    return Predicate(name, cov)


def _combine(conjunctive: bool, kids: Sequence[Node], domain: Domain) -> Node:
    """AND (``conjunctive``) or OR of canonical ``kids``, in canonical form."""
    kind = And if conjunctive else Or
    flat: list[Node] = []
    for k in kids:
        if type(k) is kind:
            flat.extend(k.children)  # type: ignore[union-attr]
        else:
            flat.append(k)
    merged: dict[str, IntervalSet] = {}
    rest: set[Node] = set()
    for k in flat:
        if isinstance(k, Predicate):
            prev = merged.get(k.attribute)
            merged[k.attribute] = k.coverage if prev is None else (
                prev & k.coverage if conjunctive else prev | k.coverage)
        elif (_is_false(k) if conjunctive else _is_true(k)):
            return k  # absorbing
        elif not (_is_true(k) if conjunctive else _is_false(k)):
            rest.add(k)
    out: list[Node] = []
    for name, cov in merged.items():
        atom = _atom(name, cov, domain[name].size)
        if (_is_false(atom) if conjunctive else _is_true(atom)):
            return atom
        if isinstance(atom, Predicate):
            out.append(atom)
    out.extend(rest)
    if len(out) == 1:
        return out[0]
    out.sort(key=lambda n: _sort_key(n, domain))
    return kind(tuple(out))


def _sort_key(node: Node, domain: Domain) -> tuple:  # type: ignore[type-arg]
    if isinstance(node, Predicate):
        return (0, domain.index(node.attribute), node.coverage.spans)
    return (1 if isinstance(node, And) else 2, len(node.children),
            tuple(_sort_key(c, domain) for c in node.children))


# -- the clause -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BooleanClause:
    """A Boolean query f(x) = F(predicates of x): ``root`` in canonical form over the attributes
    ``scope`` (domain order) whose numbers of codes are ``sizes``.

    Build with :meth:`build` (any formula) or :func:`clause_or_query` /
    :func:`tessera.workload.parse.parse_query` (which return a
    :class:`~tessera.workload.query.Query` for a conjunction). A clause is self-contained: it knows
    the sizes of its attributes, so its value classes, automaton and constancy need no domain.
    """

    root: Node
    scope: tuple[str, ...]
    sizes: tuple[int, ...]

    @staticmethod
    def build(domain: Domain, formula: Formula) -> BooleanClause:
        """The clause of ``formula`` over ``domain`` (canonical form; coverages clipped)."""
        root = _normalise(formula, domain)
        names = sorted(_attrs_of(root), key=domain.index)
        return BooleanClause(root, tuple(names), tuple(domain[n].size for n in names))

    # -- structure ----------------------------------------------------------------------------
    def atoms(self) -> tuple[Predicate, ...]:
        """The distinct predicates of the formula (in order of first appearance)."""
        return self._atom_tuple

    @cached_property
    def _atom_tuple(self) -> tuple[Predicate, ...]:
        return tuple(dict.fromkeys(_atoms(self.root)))

    @cached_property
    def _class_cache(self) -> dict[str, ValueClasses]:
        return {}

    def atoms_on(self, name: str) -> tuple[Predicate, ...]:
        return tuple(p for p in self.atoms() if p.attribute == name)

    @property
    def n_nodes(self) -> int:
        """Size of the formula (atoms and connectives)."""
        return _count(self.root)

    def is_constant_form(self) -> bool:
        """The canonical form is TRUE or FALSE (no atom left)."""
        return not self.scope

    def as_query(self) -> Query | None:
        """The same query as a predicate conjunction, when the canonical form is one."""
        root = self.root
        if _is_true(root):
            return Query.tautology()
        if isinstance(root, Predicate):
            return Query((root,))
        if isinstance(root, And) and all(isinstance(c, Predicate) for c in root.children):
            order = {n: i for i, n in enumerate(self.scope)}
            preds = sorted(root.children, key=lambda p: order[p.attribute])  # type: ignore[union-attr]
            return Query(tuple(preds))  # type: ignore[arg-type]
        return None

    def size_of(self, name: str) -> int:
        return self.sizes[self.scope.index(name)]

    def classes(self, name: str) -> ValueClasses:
        """The value classes of attribute ``name`` for the clause's own atoms on it."""
        cache = self._class_cache
        if name not in cache:
            cache[name] = value_classes(self.size_of(name),
                                        [p.coverage for p in self.atoms_on(name)])
        return cache[name]

    # -- evaluation ---------------------------------------------------------------------------
    def evaluate_columns(self, columns: Mapping[str, npt.ArrayLike]) -> BoolArray:
        """f for rows given as one code column per scope attribute (vectorised)."""
        cols = {n: np.asarray(columns[n]) for n in self.scope}
        n = len(next(iter(cols.values()))) if cols else None
        memo: dict[Predicate, BoolArray] = {}
        out = _eval(self.root, cols, memo)
        if isinstance(out, bool):
            if n is None:
                raise QueryError("evaluate_columns of a constant clause needs the number of rows",
                                 hint="use evaluate(domain, codes)")
            return np.full(n, out)
        return out

    def evaluate(self, domain: Domain, codes: npt.NDArray[np.integer]) -> BoolArray:
        """f(x) for rows of codes, shape (n, len(domain))."""
        codes = np.asarray(codes)
        if not self.scope:
            return np.full(codes.shape[0], _is_true(self.root))
        return self.evaluate_columns({n: codes[:, domain.index(n)] for n in self.scope})

    def __call__(self, domain: Domain, x: Sequence[int]) -> bool:
        """f(x) for one domain point given as codes."""
        return _eval_point(self.root, {n: int(x[domain.index(n)]) for n in self.scope})

    # -- printing -----------------------------------------------------------------------------
    def to_sql(self, domain: Domain) -> str:
        """A WHERE clause with this clause's SQL meaning; ``parse_query`` maps it back to it."""
        return _sql(self.root, domain)

    # -- the automaton ------------------------------------------------------------------------
    def layers(
        self, order: Sequence[str], letters: Sequence[npt.ArrayLike], *,
        max_states: int = MAX_STATES,
    ) -> tuple[list[IntArray], BoolArray] | None:
        """The layered automaton of f reading ``order`` (every scope attribute, maybe others).

        ``letters[i]`` holds one code per letter of attribute ``order[i]`` (e.g. the
        representatives of its value classes: every atom must be constant on each class).
        Returns (transitions, accept): ``transitions[i][s, c]`` is the state after letter c in
        state s of layer i (layer 0 has the single state f); ``accept[s]`` for the last layer's
        states, all constant. ``None`` when a layer would exceed ``max_states`` states.
        """
        states: list[Node] = [self.root]
        transitions: list[IntArray] = []
        for name, codes in zip(order, letters, strict=True):
            codes = np.asarray(codes, dtype=np.int64)
            index: dict[Node, int] = {}
            table = np.empty((len(states), len(codes)), dtype=np.int64)
            for i, state in enumerate(states):
                children, inverse = _step(state, name, codes)
                ids = np.array([index.setdefault(c, len(index)) for c in children], np.int64)
                table[i] = ids[inverse]
            if len(index) > max_states:
                return None
            transitions.append(table)
            states = list(index)
        if not all(_is_true(s) or _is_false(s) for s in states):
            raise ValueError("the order does not cover the scope of the clause")
        return transitions, np.array([_is_true(s) for s in states], dtype=bool)

    def _own_layers(self) -> tuple[list[IntArray], BoolArray]:
        reps = [self.classes(n).representative for n in self.scope]
        out = self.layers(self.scope, reps)
        if out is None:
            raise ResourceError(f"the clause has more than {MAX_STATES:,} residual states on "
                                "one attribute", hint="split the clause into smaller ones")
        return out

    @cached_property
    def _reachable(self) -> tuple[bool, bool]:
        """(some point satisfies f, some point does not): exact, from the automaton."""
        if not self.scope:
            return _is_true(self.root), _is_false(self.root)
        _, accept = self._own_layers()
        return bool(accept.any()), bool((~accept).any())

    def is_contradiction(self) -> bool:
        """No point of the domain satisfies the clause (exact)."""
        return not self._reachable[0]

    def is_tautology(self) -> bool:
        """Every point of the domain satisfies the clause (exact)."""
        return not self._reachable[1]

    def disjoint_terms(self, max_terms: int = 4096) -> tuple[tuple[Query, ...], bool]:
        """f as pairwise disjoint predicate queries: (terms, exact).

        Exact (f(x) = Σ_terms q(x) for every x) when the accepting paths of the automaton over
        the clause's value classes (scope in domain order; letters leading to the same state
        grouped into one predicate) number at most ``max_terms``. Beyond, the expansion stops at
        the last attribute that kept it within the limit and every open path becomes a term (its
        box contains the points of f below it): still disjoint, with f(x) ≤ Σ_terms q(x), and
        ``exact`` is False. At worst that is the one term TRUE. (Remembered per ``max_terms``.)
        """
        cache = self._terms_cache
        if max_terms not in cache:
            cache[max_terms] = self._disjoint_terms(max_terms)
        return cache[max_terms]

    @cached_property
    def _terms_cache(self) -> dict[int, tuple[tuple[Query, ...], bool]]:
        return {}

    def _disjoint_terms(self, max_terms: int) -> tuple[tuple[Query, ...], bool]:
        if not self.scope:
            return ((Query.tautology(),) if _is_true(self.root) else ()), True
        terms: list[tuple[tuple[str, IntervalSet], ...]] = []
        frontier: list[tuple[Node, tuple[tuple[str, IntervalSet], ...]]] = [(self.root, ())]
        exact = True
        for name in self.scope:
            vc = self.classes(name)
            new_terms: list[tuple[tuple[str, IntervalSet], ...]] = []
            new_frontier: list[tuple[Node, tuple[tuple[str, IntervalSet], ...]]] = []
            for state, prefix in frontier:
                if name not in _attrs_of(state):
                    new_frontier.append((state, prefix))
                    continue
                children, inverse = _step(state, name, vc.representative)
                for k, child in enumerate(children):
                    if _is_false(child):
                        continue
                    cov = _classes_codes(vc, np.flatnonzero(inverse == k))
                    path = prefix if cov.is_full(vc.size) else prefix + ((name, cov),)
                    if _is_true(child):
                        new_terms.append(path)
                    else:
                        new_frontier.append((child, path))
            if len(terms) + len(new_terms) + len(new_frontier) > max_terms:
                exact = False
                terms.extend(prefix for _, prefix in frontier)
                frontier = []
                break
            terms.extend(new_terms)
            frontier = new_frontier
        assert not frontier, "the automaton ends in constant states"
        return tuple(Query(tuple(Predicate(n, c) for n, c in t)) for t in terms), exact

    def __repr__(self) -> str:
        return f"BooleanClause({_text(self.root)})"


def clause_or_query(domain: Domain, formula: Formula) -> Query | BooleanClause:
    """``formula`` as a :class:`~tessera.workload.query.Query` when its canonical form is a
    conjunction (TRUE, FALSE and a single predicate included), else as a :class:`BooleanClause`."""
    clause = BooleanClause.build(domain, formula)
    if _is_false(clause.root):
        return Query.conjunction(domain, {domain.attributes[0].name: IntervalSet.empty()})
    q = clause.as_query()
    return clause if q is None else q


def atoms_of(q: Query | BooleanClause) -> tuple[Predicate, ...]:
    """The predicates a query is built from: a conjunction's, or a clause's atoms."""
    return q.atoms() if isinstance(q, BooleanClause) else q.predicates


def is_clause(q: object) -> bool:
    return isinstance(q, BooleanClause)


def separates(q: Query | BooleanClause) -> bool:
    """Whether the query can take different values at two rows (False for the tautology and for
    contradictions: a row replaced never changes their counts)."""
    if isinstance(q, BooleanClause):
        return not (q.is_contradiction() or q.is_tautology())
    return bool(q.predicates) and not q.is_contradiction()


# -- internals --------------------------------------------------------------------------------


def _atoms(node: Node) -> list[Predicate]:
    if isinstance(node, Predicate):
        return [node]
    return [p for c in node.children for p in _atoms(c)]


def _count(node: Node) -> int:
    if isinstance(node, Predicate):
        return 1
    return 1 + sum(_count(c) for c in node.children)


def _eval(node: Node, cols: Mapping[str, npt.NDArray], memo: dict[Predicate, BoolArray]
          ) -> BoolArray | bool:
    if isinstance(node, Predicate):
        hit = memo.get(node)
        if hit is None:
            hit = memo[node] = node.coverage.contains_array(cols[node.attribute])
        return hit
    if not node.children:
        return isinstance(node, And)
    parts = [_eval(c, cols, memo) for c in node.children]
    reduce = np.logical_and.reduce if isinstance(node, And) else np.logical_or.reduce
    return np.asarray(reduce(parts), dtype=bool)


def _eval_point(node: Node, x: Mapping[str, int]) -> bool:
    if isinstance(node, Predicate):
        return x[node.attribute] in node.coverage
    if isinstance(node, And):
        return all(_eval_point(c, x) for c in node.children)
    return any(_eval_point(c, x) for c in node.children)


def _restrict(node: Node, name: str, values: Mapping[Predicate, bool]) -> Node:
    """``node`` with the atoms on ``name`` replaced by ``values`` and constants folded."""
    if isinstance(node, Predicate):
        if node.attribute != name:
            return node
        return TRUE if values[node] else FALSE
    if name not in node._attrs:
        return node
    conjunctive = isinstance(node, And)
    kids: list[Node] = []
    for c in node.children:
        r = _restrict(c, name, values)
        if _is_false(r) if conjunctive else _is_true(r):
            return r
        if _is_true(r) if conjunctive else _is_false(r):
            continue
        if type(r) is type(node):
            kids.extend(r.children)  # type: ignore[union-attr]
        else:
            kids.append(r)
    if len(kids) == 1:
        return kids[0]
    return And(tuple(kids)) if conjunctive else Or(tuple(kids))


def _step(state: Node, name: str, codes: IntArray) -> tuple[list[Node], IntArray]:
    """The distinct residuals of ``state`` after reading each code of ``codes`` on ``name``, and
    the residual of each code (an index into them)."""
    if name not in _attrs_of(state):
        return [state], np.zeros(len(codes), dtype=np.int64)
    preds = [p for p in dict.fromkeys(_atoms(state)) if p.attribute == name]
    member = np.stack([p.coverage.contains_array(codes) for p in preds], axis=1)  # (n, k)
    keys, first, inverse = np.unique(member, axis=0, return_index=True, return_inverse=True)
    children = [_restrict(state, name, dict(zip(preds, row.tolist(), strict=True)))
                for row in keys]
    # equal residuals from different atom values are one state
    index: dict[Node, int] = {}
    remap = np.array([index.setdefault(c, len(index)) for c in children], dtype=np.int64)
    return list(index), remap[np.asarray(inverse).ravel()]


def _classes_codes(vc: ValueClasses, classes: npt.NDArray[np.integer]) -> IntervalSet:
    """The codes of the given value classes, as one interval set."""
    wanted = np.zeros(vc.n_classes, dtype=bool)
    wanted[classes] = True
    seg = np.flatnonzero(wanted[vc.class_of_segment])
    return IntervalSet.of(zip(vc.starts[seg].tolist(), vc.starts[seg + 1].tolist(), strict=True))


def _sql(node: Node, domain: Domain) -> str:
    if isinstance(node, Predicate):
        return predicate_sql(domain[node.attribute], node.coverage)
    if not node.children:
        return "TRUE" if isinstance(node, And) else "FALSE"
    conjunctive = isinstance(node, And)
    parts = []
    for c in node.children:
        text = _sql(c, domain)
        parts.append(f"({text})" if isinstance(c, (And, Or)) else text)
    return (" AND " if conjunctive else " OR ").join(parts)


def _text(node: Node) -> str:
    if isinstance(node, Predicate):
        return f"{node.attribute} ∈ {node.coverage!r}"
    if not node.children:
        return "TRUE" if isinstance(node, And) else "FALSE"
    sep = " ∧ " if isinstance(node, And) else " ∨ "
    return "(" + sep.join(_text(c) for c in node.children) + ")"
