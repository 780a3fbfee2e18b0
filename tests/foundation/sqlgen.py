"""Random WHERE clauses that Tessera must accept, for checking its SQL semantics against DuckDB.

Each attribute gets a random expression tree over its own column (comparisons, BETWEEN, IN,
IS NULL, bare booleans; combined with NOT / AND / OR), and the attributes' trees are joined with
AND. Binned attributes only get bounds that fall on bin boundaries (others are refused by
design; see :func:`aligned_bounds`).
"""

from __future__ import annotations

from tessera.schema.domain import Attribute, Binned, Boolean, Categorical, Domain, IntegerRange
from tests.oracles.foundation import Draw, choice, coin, quote

CMP = ("=", "<>", "!=", "<", "<=", ">", ">=")
FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "<>": "<>", "!=": "!="}


def sql_literal(attr: Attribute, value: object) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def integer_literal(r: Draw, attr: IntegerRange) -> object:
    v = r.int(attr.lo - 1, attr.hi + 1)
    return v + 0.5 if coin(r, 1, 5) else v


def aligned_bounds(attr: Binned) -> list[tuple[str, float]]:
    """(op, v) with ``x op v`` a union of whole bins, worked out from the bin definition.

    Closed-left bins [a, b): ``x < e`` and ``x >= e`` never split a bin, for any edge e;
    ``x <= v`` / ``x > v`` split [a, b) iff a <= v < b, so only the last edge without an
    ``above`` bin qualifies (and symmetrically for closed-right bins).
    """
    e = attr.edges
    if attr.closed == "left":
        out = [(op, x) for x in e for op in ("<", ">=")]
        if not attr.above:
            out += [("<=", e[-1]), (">", e[-1])]
    else:
        out = [(op, x) for x in e for op in ("<=", ">")]
        if not attr.below:
            out += [("<", e[0]), (">=", e[0])]
    return out


def leaf(r: Draw, attr: Attribute) -> str:
    col = quote(attr.name)
    if coin(r, 1, 8):
        return f"{col} IS {'NOT ' if coin(r) else ''}NULL"
    if isinstance(attr, Boolean):
        form = r.int(0, 4)
        if form == 0:
            return col
        if form == 1:
            return f"NOT {col}"
        v = sql_literal(attr, coin(r))
        if form == 2:
            return f"{col} {choice(r, ('=', '<>', '!='))} {v}"
        if form == 3:
            return f"{v} = {col}"
        return f"{col} IN ({v})"
    if isinstance(attr, Binned):
        op, v = choice(r, aligned_bounds(attr))
        return f"{col} {op} {v!r}" if coin(r) else f"{v!r} {FLIP[op]} {col}"
    if isinstance(attr, IntegerRange):
        lit = lambda: sql_literal(attr, integer_literal(r, attr))  # noqa: E731
    else:
        assert isinstance(attr, Categorical)
        lit = lambda: sql_literal(attr, choice(r, attr.values))  # noqa: E731
    ordered = attr.ordered
    form = r.int(0, 4 if ordered else 2)
    if form == 0:
        op = choice(r, CMP if ordered else ("=", "<>", "!="))
        return f"{col} {op} {lit()}" if coin(r) else f"{lit()} {FLIP[op]} {col}"
    if form == 1:
        items = ", ".join(lit() for _ in range(r.int(1, 3)))
        return f"{col} {'NOT ' if coin(r) else ''}IN ({items})"
    if form == 2:
        return f"{col} = {lit()}"
    if form == 3:
        return f"{col} {'NOT ' if coin(r, 1, 3) else ''}BETWEEN {lit()} AND {lit()}"
    return f"{col} {choice(r, ('<', '<=', '>', '>='))} {lit()}"


def expression(r: Draw, attr: Attribute, depth: int = 2) -> str:
    """A random single-attribute condition (three-valued: NULL makes comparisons unknown)."""
    if depth == 0 or coin(r):
        return leaf(r, attr)
    form = r.int(0, 2)
    if form == 0:
        return f"NOT ({expression(r, attr, depth - 1)})"
    op = "AND" if form == 1 else "OR"
    return f"({expression(r, attr, depth - 1)} {op} {expression(r, attr, depth - 1)})"


def where_clause(r: Draw, domain: Domain) -> str:
    """AND of single-attribute conditions (an attribute may appear more than once)."""
    terms = []
    for _ in range(r.int(1, len(domain) + 1)):
        if coin(r, 1, 12):
            terms.append(choice(r, ("TRUE", "FALSE")))
        else:
            terms.append(expression(r, domain.attributes[r.int(0, len(domain) - 1)]))
    return " AND ".join(terms)
