"""Predicates and predicate (counting) queries (docs/theory.md §2).

A predicate on attribute A is its coverage φ ⊆ A; a query q = (φ_1, …, φ_m) is a conjunction,
q(x) = ∏_i [x_i ∈ φ_i], with coverage C_q = φ_1 × … × φ_m. A :class:`Query` stores only its
*constrained* attributes (φ_i ≠ A_i); the others are tautologies. Contradictions (φ_i = ∅) are
kept: they are valid queries whose answer is always 0.

Everything here is polynomial in the number of predicates and intervals, never in |𝔻|:

* q_1, q_2 are disjoint iff some attribute has disjoint predicates;
* a set Q overlaps jointly (C_Q ≠ ∅) iff on every attribute all its predicates share a value.
  Pairwise overlap does not imply joint overlap for set predicates (it does for intervals: Helly).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from sqlglot.tokens import Tokenizer

from tessera.schema.domain import Attribute, Binned, Domain
from tessera.schema.intervals import IntervalSet


@dataclass(frozen=True, slots=True)
class Predicate:
    """φ ⊆ A for one attribute, as a set of codes."""

    attribute: str
    coverage: IntervalSet

    def is_contradiction(self) -> bool:
        return not self.coverage


@dataclass(frozen=True, slots=True)
class Query:
    """A conjunction of predicates, in domain order, tautologies omitted.

    Build with :meth:`Query.conjunction` (normalises) or :func:`tessera.workload.parse.parse_query`.
    Two queries with the same coverage compare equal, except that contradictions compare by
    their (empty) predicates; use :meth:`is_contradiction` for semantics.
    """

    predicates: tuple[Predicate, ...] = ()

    @staticmethod
    def conjunction(domain: Domain, coverages: Mapping[str, IntervalSet]) -> Query:
        """q with φ_a = coverages[a] (clipped to A's codes); tautologies are dropped."""
        preds = []
        for name in sorted(coverages, key=domain.index):
            attr = domain[name]
            cov = coverages[name] & attr.all_codes()
            if not cov.is_full(attr.size):
                preds.append(Predicate(name, cov))
        return Query(tuple(preds))

    @staticmethod
    def tautology() -> Query:
        """The query counting every row."""
        return Query(())

    # -- structure ----------------------------------------------------------------------------
    @property
    def scope(self) -> tuple[str, ...]:
        """Constrained attributes (scope(q), docs/theory.md §2)."""
        return tuple(p.attribute for p in self.predicates)

    def predicate(self, name: str) -> IntervalSet | None:
        """φ_name, or ``None`` for a tautology."""
        for p in self.predicates:
            if p.attribute == name:
                return p.coverage
        return None

    def coverage_of(self, attr: Attribute) -> IntervalSet:
        cov = self.predicate(attr.name)
        return attr.all_codes() if cov is None else cov

    def is_contradiction(self) -> bool:
        return any(p.is_contradiction() for p in self.predicates)

    def is_range(self, domain: Domain) -> bool:
        """Every constrained predicate is one interval of an ordered attribute."""
        return all(
            domain[p.attribute].ordered and p.coverage.is_interval() for p in self.predicates
        )

    def coverage_size(self, domain: Domain) -> int:
        """|C_q| as an exact integer."""
        size = 1
        for attr in domain:
            size *= len(self.coverage_of(attr))
        return size

    # -- evaluation ---------------------------------------------------------------------------
    def evaluate(self, domain: Domain, codes: npt.NDArray[np.integer]) -> npt.NDArray[np.bool_]:
        """q(x) for rows of codes, shape (n, len(domain))."""
        codes = np.asarray(codes)
        out = np.ones(codes.shape[0], dtype=bool)
        for p in self.predicates:
            out &= p.coverage.contains_array(codes[:, domain.index(p.attribute)])
        return out

    def __call__(self, domain: Domain, x: Sequence[int]) -> bool:
        """q(x) for one domain point given as codes."""
        return all(x[domain.index(p.attribute)] in p.coverage for p in self.predicates)

    # -- printing -----------------------------------------------------------------------------
    def to_sql(self, domain: Domain, memo: dict[int, str] | None = None) -> str:
        """A WHERE clause that :func:`tessera.workload.parse.parse_query` maps back to this query.

        ``memo`` (by predicate object) saves re-printing the predicates that many queries of a
        large workload share."""
        if not self.predicates:
            return "TRUE"
        if memo is None:
            return " AND ".join(
                predicate_sql(domain[p.attribute], p.coverage) for p in self.predicates
            )
        parts = []
        for p in self.predicates:
            text = memo.get(id(p))
            if text is None:
                text = memo[id(p)] = predicate_sql(domain[p.attribute], p.coverage)
            parts.append(text)
        return " AND ".join(parts)


# -- set relations (docs/theory.md §2) --------------------------------------------------------


def disjoint(q1: Query, q2: Query) -> bool:
    """C_{q1} ∩ C_{q2} = ∅: some attribute has disjoint predicates (or a contradiction)."""
    if q1.is_contradiction() or q2.is_contradiction():
        return True
    by_attr = {p.attribute: p.coverage for p in q1.predicates}
    return any(
        p.attribute in by_attr and by_attr[p.attribute].isdisjoint(p.coverage)
        for p in q2.predicates
    )


def joint_coverage(domain: Domain, queries: Iterable[Query]) -> dict[str, IntervalSet]:
    """C_Q = ∩_q C_q, per constrained attribute (unlisted attributes are unconstrained)."""
    joint: dict[str, IntervalSet] = {}
    for q in queries:
        for p in q.predicates:
            joint[p.attribute] = (
                joint[p.attribute] & p.coverage if p.attribute in joint else p.coverage
            )
    return dict(sorted(joint.items(), key=lambda kv: domain.index(kv[0])))


def jointly_overlap(domain: Domain, queries: Iterable[Query]) -> bool:
    """C_Q ≠ ∅: on every attribute the predicates share a value."""
    return all(bool(c) for c in joint_coverage(domain, queries).values())


def witness(domain: Domain, queries: Iterable[Query]) -> tuple[int, ...] | None:
    """A point of C_Q (codes), or ``None`` if C_Q = ∅. Unconstrained attributes take code 0."""
    joint = joint_coverage(domain, queries)
    if not all(joint.values()):
        return None
    return tuple(joint[a.name].min() if a.name in joint else 0 for a in domain)


# -- SQL printing -----------------------------------------------------------------------------

_SQL_KEYWORDS = frozenset(k.upper() for k in Tokenizer.KEYWORDS) | {
    "TRUE",
    "FALSE",
    "NULL",
    "CURRENT_DATE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "ANY",
    "ALL",
}


def _quote_name(name: str) -> str:
    """Bare when it is a plain identifier and no SQL keyword (``from``, ``null``, ``true``)."""
    if name.isidentifier() and name.isascii() and name.upper() not in _SQL_KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def _literal(attr: Attribute, code: int) -> str:
    value = attr.value(code)
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)) and not isinstance(attr, Binned):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def predicate_sql(attr: Attribute, cov: IntervalSet) -> str:
    """The SQL condition of one predicate (``FALSE`` when empty), as parse_query reads it."""
    col = _quote_name(attr.name)
    if not cov:
        return "FALSE"
    present = cov & attr.present()
    has_null = attr.missing_code is not None and attr.missing_code in cov
    parts: list[str] = []
    if present and attr.ordered and not isinstance(attr, Binned):
        n = attr.n_values
        for lo, hi in present.spans:
            hi -= 1
            if lo == hi:
                parts.append(f"{col} = {_literal(attr, lo)}")
            elif lo == 0:
                parts.append(f"{col} <= {_literal(attr, hi)}")
            elif hi == n - 1:
                parts.append(f"{col} >= {_literal(attr, lo)}")
            else:
                parts.append(f"{col} BETWEEN {_literal(attr, lo)} AND {_literal(attr, hi)}")
    elif len(present) == 1:
        parts.append(f"{col} = {_literal(attr, present.min())}")
    elif present:
        parts.append(f"{col} IN ({', '.join(_literal(attr, c) for c in present)})")
    if has_null:
        parts.append(f"{col} IS NULL")
    return parts[0] if len(parts) == 1 else "(" + " OR ".join(parts) + ")"
