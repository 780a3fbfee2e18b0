"""SQL WHERE clauses → predicate queries, parsed with sqlglot (docs/theory.md §2).

Accepted: ``AND``, ``OR``, ``NOT``, parentheses; ``=``, ``<>``/``!=``, ``<``, ``<=``, ``>``,
``>=`` (literal on either side), ``BETWEEN``, ``IN``, ``IS [NOT] NULL``, ``TRUE``/``FALSE`` and a
bare boolean column. ``OR``/``NOT`` *within one attribute* is still one predicate; a conjunction
of predicates is a :class:`~tessera.workload.query.Query`. Any other Boolean combination (``a = 1 OR
b = 2``, ``NOT (a = 1 AND b = 2)``) is a :class:`~tessera.workload.clause.BooleanClause`.

SQL's three-valued logic is honoured so that counts equal what a SQL engine returns: a comparison
is *unknown* on the missing value, and ``NOT unknown`` is still not true. Each single-attribute
sub-expression therefore evaluates to a pair (T, U) of code sets, true and unknown; a query's
coverage is the T part. Across attributes, a sub-expression gives two formulas, where it is true
and where it is false (:meth:`_Parser.truth`), and a clause is the formula where the whole
WHERE clause is true (docs in :mod:`tessera.workload.clause`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from tessera.errors import QueryError, did_you_mean
from tessera.schema.domain import Attribute, Boolean, Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.clause import FALSE, TRUE, And, BooleanClause, Node, Or, clause_or_query
from tessera.workload.query import Predicate, Query

_PREFIX = "SELECT 1 WHERE "


@dataclass(frozen=True)
class _Tri:
    """True and unknown code sets of a single-attribute condition (three-valued logic)."""

    true: IntervalSet
    unknown: IntervalSet

    def negate(self, attr: Attribute) -> _Tri:
        return _Tri(attr.all_codes() - self.true - self.unknown, self.unknown)

    def and_(self, other: _Tri) -> _Tri:
        true = self.true & other.true
        return _Tri(true, ((self.true | self.unknown) & (other.true | other.unknown)) - true)

    def or_(self, other: _Tri) -> _Tri:
        true = self.true | other.true
        return _Tri(true, (self.unknown | other.unknown) - true)


# A conjunction under construction: attribute → (T, U); ``None`` stands for FALSE.
_Conj = dict[str, _Tri] | None


def quote_hyphenated(text: str, domain: Domain) -> str:
    """Quote attribute names that are not SQL identifiers (``education-num``) outside strings."""
    names = sorted((n for n in domain.names if not n.isidentifier()), key=len, reverse=True)
    if not names:
        return text
    pattern = re.compile(r'(?<![\w"-])(' + "|".join(re.escape(n) for n in names) + r')(?![\w"-])')
    # split on single-quoted literals ('' escapes included) and only touch the parts between
    pieces = re.split(r"('(?:[^']|'')*')", text)
    for i in range(0, len(pieces), 2):
        pieces[i] = pattern.sub(lambda m: '"' + m.group(1) + '"', pieces[i])
    return "".join(pieces)


def keyword_hint(text: str, domain: Domain) -> str | None:
    """The hint for a syntax error caused by an attribute named like an SQL keyword (``union``,
    ``date``, ``order``) written without double quotes, or None when no such name appears
    unquoted outside the string literals of ``text``."""
    from sqlglot.tokens import Tokenizer  # its keyword table: what the parser will not read

    names = [n for n in domain.names if n.upper() in Tokenizer.KEYWORDS]
    outside = " ".join(re.split(r"'(?:[^']|'')*'", text)[::2])
    found = [n for n in names
             if re.search(r'(?<![\w"])' + re.escape(n) + r'(?![\w"])', outside, re.IGNORECASE)]
    if not found:
        return None
    quoted = ", ".join(f'"{n}"' for n in found)
    named = ", ".join(repr(n) for n in found)
    if len(found) == 1:
        return f"{named} is an SQL keyword: write it in double quotes, {quoted}"
    return f"{named} are SQL keywords: write them in double quotes, {quoted}"


def parse_query(
    text: str, domain: Domain, warnings: list[str] | None = None
) -> Query | BooleanClause:
    """Parse one WHERE clause into a :class:`Query` over ``domain`` (a conjunction of
    predicates) or, for any other Boolean combination, a :class:`BooleanClause`.

    Raises :class:`QueryError` naming the offending part with a hint. Valid but suspicious
    literals (``Pclass IN (0, 7)`` on 1..3, ``Pclass = 1.5``: they match no value) are
    accepted; a note on each is appended to ``warnings`` when given
    (:meth:`~tessera.schema.domain.Attribute.literal_note`).
    """
    if not text.strip():
        raise QueryError("empty query", hint="write a WHERE clause such as: age >= 30")
    if re.match(r"\s*select\b", text, re.IGNORECASE):
        raise QueryError("an aggregate statement (SELECT …) where a WHERE clause is expected",
                         hint="workloads of SELECT statements are answered by tessera answer "
                              "and counted exactly by tessera count (docs/aggregates.md); "
                              "this command takes WHERE clauses")
    sql = _PREFIX + quote_hyphenated(text, domain)
    try:
        tree = sqlglot.parse_one(sql)
    except sqlglot.errors.ParseError as e:
        info = e.errors[0] if e.errors else {}
        col = max(1, int(info.get("col", 0)) - len(_PREFIX))
        desc = str(info.get("description", e)).split(". Line")[0]
        desc = _plain_syntax_error(desc)
        raise QueryError(
            f"syntax error near column {col}: {desc}",
            hint=keyword_hint(text, domain)
            or "write a SQL WHERE clause, e.g. age BETWEEN 30 AND 39 AND sex = 'Female'",
        ) from None
    except sqlglot.errors.SqlglotError as e:
        raise QueryError(f"syntax error: {e}") from None
    where = tree.args.get("where") if isinstance(tree, exp.Select) else None
    if where is None or tree.args.get("limit") or tree.args.get("group") or tree.args.get("order"):
        raise QueryError(
            "not a single WHERE clause", hint="one condition per line, no SQL keywords after it"
        )
    parser = _Parser(domain, warnings)
    conj = parser.conj(where.this)
    if conj is None:
        # FALSE: a contradiction on the first attribute
        first = domain.attributes[0].name
        return Query.conjunction(domain, {first: IntervalSet.empty()})
    if not parser.clauses:
        return Query.conjunction(domain, {a: t.true for a, t in conj.items()})
    # conjuncts across attributes: the clause is true where all of them are
    atoms = [Predicate(a, t.true) for a, t in conj.items()]
    return clause_or_query(domain, And((*atoms, *parser.clauses)))


_OPERATOR_NAMES = {
    "EQ": "=",
    "NEQ": "<>",
    "LT": "<",
    "LTE": "<=",
    "GT": ">",
    "GTE": ">=",
    "Between": "BETWEEN",
    "In": "IN",
    "And": "AND",
    "Or": "OR",
    "Not": "NOT",
    "Is": "IS",
}
_ROLE_NAMES = {
    "expression": "right-hand value",
    "this": "left-hand side",
    "high": "upper bound",
    "low": "lower bound",
}


def _plain_syntax_error(desc: str) -> str:
    """sqlglot's 'Required keyword: 'expression' missing for <class ...GTE>' in plain words."""
    m = re.match(r"Required keyword: '(\w+)' missing for <class 'sqlglot\.[\w.]*\.(\w+)'>", desc)
    if m:
        role, op = m.groups()
        return f"'{_OPERATOR_NAMES.get(op, op)}' is missing its {_ROLE_NAMES.get(role, role)}"
    return re.sub(r"<class 'sqlglot\.[\w.]*\.(\w+)'>", r"\1", desc)


class _Parser:
    def __init__(self, domain: Domain, warnings: list[str] | None = None) -> None:
        self.domain = domain
        self.warnings = warnings
        #: conjuncts that are Boolean combinations across attributes (where each is true)
        self.clauses: list[Node] = []

    # -- conjunctions -------------------------------------------------------------------------
    def conj(self, node: exp.Expression) -> _Conj:
        if isinstance(node, exp.Paren):
            return self.conj(node.this)
        if isinstance(node, exp.And):
            return _and(self.conj(node.this), self.conj(node.expression))
        if isinstance(node, exp.Boolean):
            return {} if node.this else None
        if isinstance(node, exp.Not) and isinstance(_unparen(node.this), exp.Boolean):
            return None if _unparen(node.this).this else {}
        if isinstance(node, (exp.Or, exp.Not)) and len(_columns(node)) > 1:
            self.clauses.append(self.truth(node)[0])
            return {}
        attr = self._single_attribute(node)
        return {attr.name: self.tri(node, attr)}

    # -- Boolean combinations across attributes -----------------------------------------------
    def truth(self, node: exp.Expression) -> tuple[Node, Node]:
        """(where ``node`` is true, where it is false) as formulas over predicates: SQL's
        three-valued logic, T(NOT e) = F(e), F(e AND e') = F(e) OR F(e'), … (module docstring).
        A sub-expression on one attribute is one predicate each (its (T, U) code sets)."""
        node = _unparen(node)
        if isinstance(node, exp.Boolean):
            return (TRUE, FALSE) if node.this else (FALSE, TRUE)
        if isinstance(node, exp.Not):
            true, false = self.truth(node.this)
            return false, true
        if isinstance(node, (exp.And, exp.Or)) and len(_columns(node)) != 1:
            t1, f1 = self.truth(node.this)
            t2, f2 = self.truth(node.expression)
            if isinstance(node, exp.And):
                return And((t1, t2)), Or((f1, f2))
            return Or((t1, t2)), And((f1, f2))
        attr = self._single_attribute(node)
        tri = self.tri(node, attr)
        false = attr.all_codes() - tri.true - tri.unknown
        return Predicate(attr.name, tri.true), Predicate(attr.name, false)

    def _single_attribute(self, node: exp.Expression) -> Attribute:
        cols = {c.name for c in node.find_all(exp.Column)}
        if not cols:
            raise QueryError(f"condition {node.sql()!r} names no attribute")
        strangers = sorted(c for c in cols if c not in self.domain)
        if strangers and len(cols) > 1:
            # `sex = "Male"` / `sex = Male`: a text literal written as an identifier
            raise QueryError(
                f"{strangers[0]!r} in {node.sql()!r} is not an attribute",
                hint=f"text literals take single quotes: '{strangers[0]}'",
            )
        if len(cols) > 1:
            raise QueryError(
                f"comparison across attributes {sorted(cols)} in {node.sql()!r} is not "
                "supported",
                hint="each condition compares one attribute with literals; combine conditions "
                "with AND, OR and NOT",
            )
        name = cols.pop()
        if name not in self.domain:
            raise QueryError(
                f"unknown attribute {name!r}",
                hint=did_you_mean(name, self.domain.names, 0.5)
                or f"the schema's attributes are {', '.join(self.domain.names)}",
            )
        return self.domain[name]

    # -- single attribute, three-valued -------------------------------------------------------
    def tri(self, node: exp.Expression, attr: Attribute) -> _Tri:
        unknown = (
            IntervalSet.points([attr.missing_code])
            if attr.missing_code is not None
            else IntervalSet()
        )
        if isinstance(node, exp.Paren):
            return self.tri(node.this, attr)
        if isinstance(node, exp.Not):
            return self.tri(node.this, attr).negate(attr)
        if isinstance(node, exp.And):
            return self.tri(node.this, attr).and_(self.tri(node.expression, attr))
        if isinstance(node, exp.Or):
            return self.tri(node.this, attr).or_(self.tri(node.expression, attr))
        if isinstance(node, exp.Column):
            if not isinstance(attr, Boolean):
                raise QueryError(
                    f"bare attribute {attr.name!r} is not a condition",
                    hint=f"{attr.name!r} is {attr.kind}; compare it, e.g. {attr.name} = ...",
                )
            return _Tri(attr.code_of(True), unknown)
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise QueryError(
                    f"unsupported IS in {node.sql()!r}", hint="use IS NULL or IS NOT NULL"
                )
            self._column(node.this, attr)
            codes = (
                IntervalSet.points([attr.missing_code])
                if attr.missing_code is not None
                else IntervalSet()
            )
            return _Tri(codes, IntervalSet())
        if isinstance(node, exp.In):
            self._column(node.this, attr)
            if node.args.get("query") is not None:
                raise QueryError("IN (SELECT ...) is not supported", hint="list the values")
            items = [item for item in node.expressions if not isinstance(item, exp.Null)]
            spans = [span for item in items for span in self._code(attr, item).spans]
            cov = IntervalSet.of(spans)
            if len(items) < len(node.expressions):
                # SQL: x IN (a, NULL) is true for a and *unknown* elsewhere, so its NOT is
                # never true
                return _Tri(cov, attr.all_codes() - cov)
            return _Tri(cov, unknown)
        if isinstance(node, exp.Between):
            self._column(node.this, attr)
            lo = attr.compare(">=", self._value(node.args["low"], attr))
            hi = attr.compare("<=", self._value(node.args["high"], attr))
            return _Tri(lo & hi, unknown)
        ops = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
        op = ops.get(type(node))
        if op is not None:
            left, right = node.this, node.expression
            if not isinstance(left, exp.Column) and isinstance(right, exp.Column):
                left, right = right, left
                op = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
            self._column(left, attr)
            if op == "=":
                return _Tri(self._code(attr, right), unknown)
            if op == "<>":
                return _Tri(self._code(attr, right), unknown).negate(attr)
            value = self._value(right, attr)
            return _Tri(attr.compare(op, value), unknown)  # type: ignore[arg-type]
        if isinstance(node, (exp.Sub, exp.Add, exp.Mul, exp.Div)):
            raise QueryError(
                f"arithmetic in {node.sql()!r} is not a predicate",
                hint='quote attribute names that contain "-" or spaces with double quotes',
            )
        raise QueryError(
            f"unsupported condition {node.sql()!r}",
            hint="use =, <>, <, <=, >, >=, BETWEEN, IN, IS NULL, combined with AND, OR, NOT",
        )

    def _code(self, attr: Attribute, node: exp.Expression) -> IntervalSet:
        """``attr.code_of`` of the literal ``node``, noting a literal that matches no value."""
        value = self._value(node, attr)
        cov = attr.code_of(value)
        if self.warnings is not None and not cov:
            note = attr.literal_note(value)
            if note is not None:
                self.warnings.append(note)
        return cov

    def _column(self, node: exp.Expression, attr: Attribute) -> None:
        if not isinstance(node, exp.Column):
            raise QueryError(
                f"expected the attribute {attr.name!r} in {node.sql()!r}",
                hint="conditions compare one attribute with literals",
            )

    def _value(self, node: exp.Expression, attr: Attribute) -> Any:
        if isinstance(node, exp.Paren):
            return self._value(node.this, attr)
        if isinstance(node, exp.Neg):
            v = self._value(node.this, attr)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return -v
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Literal):
            if node.is_string:
                return node.this
            text = node.this
            try:
                return int(text)
            except ValueError:
                return float(text)
        if isinstance(node, exp.Null):
            raise QueryError(
                f"NULL compared with {attr.name!r} is never true",
                hint=f"use {attr.name} IS NULL",
            )
        raise QueryError(f"expected a literal value, got {node.sql()!r}")


def _columns(node: exp.Expression) -> set[str]:
    return {c.name for c in node.find_all(exp.Column)}


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def _and(a: _Conj, b: _Conj) -> _Conj:
    if a is None or b is None:
        return None
    out = dict(a)
    for name, tri in b.items():
        out[name] = out[name].and_(tri) if name in out else tri
    return out
