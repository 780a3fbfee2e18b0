"""A fast path for the simple WHERE clauses that dominate large text workloads.

:func:`tessera.workload.parse.parse_query` builds a sqlglot tree per clause: exact and careful, but
about 5,000 clauses a second. Large text workloads (all 3-way marginals of a schema as text:
millions of lines) are almost all *simple conjunctions*::

    education = 0 AND age BETWEEN 20 AND 29 AND "income>50K" IN ('<=50K', '>50K')

:class:`FastParser` recognises a conjunction (``AND``) of terms of the forms

* ``attr <op> literal`` with ``=``, ``<>``, ``!=``, ``<``, ``<=``, ``>``, ``>=``;
* ``attr [NOT] BETWEEN literal AND literal``; ``attr [NOT] IN (literal, ...)``;
* ``attr IS [NOT] NULL``;
* ``(term OR term ...)`` on one attribute, as :meth:`~tessera.workload.query.Query.to_sql` writes a
  set of ranges (φ is the union: SQL's OR is true where one side is);

with ``attr`` a bare identifier, a bare hyphenated or dotted name of the domain
(``education-num``, as :func:`tessera.workload.parse.quote_hyphenated` quotes it) or a double-quoted
name, literals single-quoted strings (``''`` escapes), integers, decimals or ``TRUE``/``FALSE``,
keywords in any case, spaces or tabs between tokens. It evaluates each term with the attribute's
own :meth:`~tessera.schema.domain.Attribute.code_of` /
:meth:`~tessera.schema.domain.Attribute.compare` and the same three-valued rules and
:meth:`~tessera.workload.query.Query.conjunction` normalisation as the main parser, so the
:class:`~tessera.workload.query.Query` is equal to ``parse_query``'s.

Anything else -- ``OR`` across attributes, ``NOT (...)``, ``TRUE``/``FALSE`` terms, bare
booleans, functions, literals on the left, ``NULL`` in an ``IN`` list, a literal that does not fit
the attribute (``code_of`` raises), an unknown attribute, a double-quoted text value, a
backslash, a comment, a name that ``quote_hyphenated`` would rewrite in an unusual way -- makes
:meth:`FastParser.try_parse` return ``None``; :meth:`FastParser.parse` then calls
``parse_query``, so errors and hints are always the main parser's own.

Terms are memoised by their text and identical predicates are interned (one
:class:`~tessera.workload.query.Predicate` object per distinct predicate): a 3-way marginal workload
repeats a few hundred predicates millions of times.
"""

from __future__ import annotations

import re
from functools import partial
from operator import is_not, itemgetter
from typing import Any, NamedTuple

import sqlglot
from sqlglot import exp

from tessera.schema.domain import Attribute, Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.clause import BooleanClause
from tessera.workload.parse import parse_query, quote_hyphenated
from tessera.workload.query import Predicate, Query

#: Switch the fast path off (every clause then goes through sqlglot, predicates not interned):
#: the baseline of ``bench/bench_parse.py``.
ENABLED = True

#: Distinct term texts remembered per parser; beyond this the memo is cleared and refilled
#: (it only saves time: results never depend on it).
MAX_TERMS = 1 << 20

_SP = r"[ \t]"
_NUM = r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
_STR = r"'(?:[^'\\]|'')*'"
_LIT = rf"(?:{_NUM}|{_STR}|(?i:TRUE|FALSE)\b)"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
#: ``AND`` between two terms (or inside ``BETWEEN``): pieces are re-joined when needed.
_SEP = re.compile(rf"({_SP}+(?i:AND){_SP}+)")
_OR = re.compile(rf"({_SP}+(?i:OR){_SP}+)")
_MAX_JOIN = 64  # at most this many pieces (terms and separators) joined into one term
_ITEM = re.compile(rf"{_SP}*({_LIT}){_SP}*(?:,|$)")
#: Non-identifier names written bare must look like ``education-num`` / ``a.b``: a run of word
#: characters joined by ``-`` or ``.``. Other ones (``e f``, ``income>50K``) must be quoted.
_PLAIN_HYPHENATED = re.compile(rf"{_IDENT}(?:[.\-][A-Za-z0-9_]+)+")

_NOT_A_TERM = object()  # the text is not one term (maybe part of one: BETWEEN x AND y)
_INVALID = object()  # a term of the simple grammar that parse_query must judge (error or not)


class _Term(NamedTuple):
    """One evaluated term: attribute position and name, coverage clipped to the attribute's
    codes, and its interned predicate (``None`` for a tautology: Query.conjunction drops it)."""

    index: int
    name: str
    coverage: IntervalSet
    predicate: Predicate | None


_PREDICATE = itemgetter(3)
_IS_PREDICATE = partial(is_not, None)


#: Parentheses nested deeper than this are left to sqlglot: the careful parser recurses once a
#: level, and whether it runs out of stack would otherwise depend on the interpreter's
#: recursion limit at the time (which other code may have raised).
MAX_NESTING = 64


def nesting_depth(text: str) -> int:
    """The deepest nesting of parentheses in ``text`` (quotes not considered: an upper bound).

    >>> nesting_depth("((a = 1) OR b = 2)")
    2
    """
    depth = deepest = 0
    for ch in text:
        if ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return deepest


class FastParser:
    """Parses simple conjunctions over one domain; memoises terms and interns predicates."""

    def __init__(self, domain: Domain) -> None:
        self.domain = domain
        self._index = {a.name: i for i, a in enumerate(domain.attributes)}
        # per attribute: its codes, the missing code (unknown in SQL comparisons), its size
        self._all = [a.all_codes() for a in domain.attributes]
        self._null = [
            IntervalSet.points([a.missing_code]) if a.missing_code is not None else IntervalSet()
            for a in domain.attributes
        ]
        self._size = [a.size for a in domain.attributes]
        self._terms: dict[str, _Term] = {}  # term text -> its evaluation
        self._rejects: dict[str, object] = {}  # text -> _NOT_A_TERM or _INVALID
        self._literals: dict[tuple[Any, ...], IntervalSet] = {}  # see _literal
        # id(term) -> (term, its notes): terms with a literal that matches no value, warned
        # about on every line they occur in (parse_query's notes, in the same order); the
        # term is kept so that its id stays its own
        self._noted: dict[int, tuple[_Term, tuple[str, ...]]] = {}
        self._pending: list[str] = []  # notes of the term being evaluated
        # (attribute, spans) -> the shared Predicate (tuples hash in C; equal keys, equal
        # predicates)
        self._interned: dict[tuple[str, Any], Predicate] = {}
        self._name_ok: dict[str, str | None] = {}
        odd = [n for n in domain.names if not n.isidentifier()]
        plain = sorted(
            (n for n in odd if _PLAIN_HYPHENATED.fullmatch(n)), key=len, reverse=True
        )
        exotic = sorted((n for n in odd if n not in plain), key=len, reverse=True)
        # the same pattern as quote_hyphenated, for the names we accept bare ...
        bare = "".join(re.escape(n) + "|" for n in plain)
        name = rf'(?:"(?P<q>(?:[^"\\]|"")+)"|(?P<b>(?:{bare}{_IDENT})(?![\w"\-.])))'
        # ... and any other one anywhere in a clause makes the fast path decline (quote_hyphenated
        # would rewrite it: only the main parser knows what that means)
        self._exotic_names = tuple(exotic)
        self._exotic = re.compile(
            r'(?<![\w"-])(' + "|".join(re.escape(n) for n in exotic) + r')(?![\w"-])'
        )
        self._term_re = re.compile(
            rf"{name}(?:"
            rf"{_SP}*(?P<op><>|!=|<=|>=|=|<|>){_SP}*(?P<lit>{_LIT})"
            rf"|{_SP}+(?P<bnot>(?i:NOT){_SP}+)?(?i:BETWEEN){_SP}+(?P<lo>{_LIT})"
            rf"{_SP}+(?i:AND){_SP}+(?P<hi>{_LIT})"
            rf"|{_SP}+(?P<inot>(?i:NOT){_SP}+)?(?i:IN){_SP}*\((?P<items>(?:[^()']|{_STR})*)\)"
            rf"|{_SP}+(?i:IS){_SP}+(?P<isnot>(?i:NOT){_SP}+)?(?i:NULL)"
            r")"
        )

    # -- public -------------------------------------------------------------------------------
    def parse(self, text: str, warnings: list[str] | None = None) -> Query | BooleanClause:
        """``parse_query(text, domain, warnings)``, through the fast path when the clause is
        simple.

        Raises exactly what ``parse_query`` raises (declined clauses go there unchanged; a
        Boolean clause across attributes comes back from it as it is) and appends the same
        notes to ``warnings``.
        """
        q = self.try_parse(text, warnings)
        if q is not None:
            return q
        q = parse_query(text, self.domain, warnings)
        if isinstance(q, BooleanClause) or not ENABLED:
            return q
        return Query(tuple(self.intern(p) for p in q.predicates))

    def intern(self, predicate: Predicate) -> Predicate:
        """The one shared object equal to ``predicate``."""
        key = (predicate.attribute, predicate.coverage.spans)
        return self._interned.setdefault(key, predicate)

    def try_parse(self, text: str, warnings: list[str] | None = None) -> Query | None:
        """The query of a simple conjunction, or ``None`` when ``parse_query`` must decide
        (always ``None`` while :data:`ENABLED` is false). ``warnings`` gets ``parse_query``'s
        notes on literals that match no value."""
        clause = text.strip(" \t")
        if not clause or not ENABLED:
            return None
        for name in self._exotic_names:
            if name in clause and self._exotic.search(clause):
                return None
        # machine-written files: single spaces around an upper-case AND, every term seen before
        found = list(map(self._terms.get, clause.split(" AND ")))
        if None in found:
            if nesting_depth(clause) > MAX_NESTING:  # sqlglot's to judge (and to refuse)
                return None
            try:
                careful = self._careful(clause)
            except RecursionError:  # (deep nesting is declined above, whatever the stack)
                return None
            if careful is None:
                return None
            found = careful  # type: ignore[assignment]
        if self._noted and warnings is not None:
            for t in found:
                noted = self._noted.get(id(t))
                if noted is not None:
                    warnings.extend(noted[1])
        return self._assemble(found)  # type: ignore[arg-type]

    # -- internals ----------------------------------------------------------------------------
    def _careful(self, clause: str) -> list[_Term] | None:
        """Split on every ``AND``, re-joining pieces that only form a term together
        (``x BETWEEN 1 AND 2``, ``s = 'a AND b'``, ``(x = 1 OR x BETWEEN 3 AND 4)``).

        Joining left to right keeps the pieces aligned with SQL's own tokens: every accepted
        term is complete (its quotes balanced), so each separator kept is a real ``AND``.
        """
        return self._split(clause, _SEP)

    def _split(self, text: str, sep: re.Pattern[str]) -> list[_Term] | None:
        pieces = sep.split(text)
        out: list[_Term] = []
        i, n = 0, len(pieces)
        while i < n:
            j = i
            while True:
                term = self._term(pieces[i] if j == i else "".join(pieces[i : j + 1]), j == i)
                if term is _INVALID:
                    return None
                if term is not _NOT_A_TERM:
                    out.append(term)
                    break
                j += 2
                if j >= n or j - i > _MAX_JOIN:
                    return None
            i = j + 2
        return out

    def _term(self, text: str, remember_reject: bool = True) -> Any:
        term = self._terms.get(text) or self._rejects.get(text)
        if term is None:
            term = self._evaluate(text)
            if isinstance(term, _Term):
                memo: dict[str, Any] = self._terms
            elif remember_reject:
                memo = self._rejects
            else:
                return term
            if len(memo) >= MAX_TERMS:
                memo.clear()
            memo[text] = term
        return term

    def _assemble(self, found: list[_Term]) -> Query:
        last = -1
        for t in found:
            if t[0] <= last:
                return self._merge(found)
            last = t[0]
        return Query(tuple(filter(_IS_PREDICATE, map(_PREDICATE, found))))

    def _merge(self, found: list[_Term]) -> Query:
        """Terms out of domain order, or an attribute constrained twice: φ_a = ∩ of its terms."""
        by_index: dict[int, _Term] = {}
        for t in found:
            prev = by_index.get(t.index)
            if prev is None:
                by_index[t.index] = t
            else:
                by_index[t.index] = self._make(t.index, t.name, prev.coverage & t.coverage)
        preds = (by_index[i].predicate for i in sorted(by_index))
        return Query(tuple(p for p in preds if p is not None))

    def _make(self, index: int, name: str, coverage: IntervalSet) -> _Term:
        size = self._size[index]
        spans = coverage.spans
        if spans and (spans[0][0] < 0 or spans[-1][1] > size):
            coverage = coverage & self._all[index]  # as Query.conjunction clips
        if coverage.is_full(size):
            return _Term(index, name, coverage, None)
        pred = self._interned.get((name, coverage.spans))  # as intern(), without building one
        if pred is None:
            pred = self.intern(Predicate(name, coverage))
        return _Term(index, name, coverage, pred)

    def _evaluate(self, text: str) -> Any:
        if text[:1] == "(" and text[-1:] == ")":
            return self._group(text[1:-1].strip(" \t"))
        m = self._term_re.fullmatch(text)
        if m is None:
            return _NOT_A_TERM
        quoted, bare = m.group("q"), m.group("b")
        token = bare if bare is not None else f'"{quoted}"'
        name = self._name_ok.get(token, "")
        if name == "":
            name = self._name_ok[token] = self._check_name(token, quoted, bare)
        if name is None:
            return _INVALID
        index = self._index[name]
        self._pending.clear()
        try:
            cov = self._coverage(m, index)
        except Exception:  # noqa: BLE001 -- any complaint is parse_query's to make
            return _INVALID
        if cov is None:
            return _INVALID
        term = self._make(index, name, cov)
        if self._pending:
            self._noted[id(term)] = (term, tuple(self._pending))
        return term

    def _group(self, inner: str) -> Any:
        """``(t1 OR t2 OR ...)`` on one attribute: φ = the union of the terms' (SQL: the true
        part of an OR is the union of the true parts)."""
        terms = self._split(inner, _OR) if inner else None
        if not terms or any(t.index != terms[0].index for t in terms):
            return _NOT_A_TERM
        cov = IntervalSet.of([span for t in terms for span in t.coverage.spans])
        term = self._make(terms[0].index, terms[0].name, cov)
        notes = tuple(n for t in terms for n in self._noted.get(id(t), (t, ()))[1])
        if notes:
            self._noted[id(term)] = (term, notes)
        return term

    def _coverage(self, m: re.Match[str], index: int) -> IntervalSet | None:
        """The true part of the term in SQL three-valued logic (as
        tessera.workload.parse._Parser.tri: a negation is true where the term is neither true nor
        unknown, i.e. missing)."""
        op, lit, lo, hi, bnot, items, inot, isnot = m.group(
            "op", "lit", "lo", "hi", "bnot", "items", "inot", "isnot"
        )
        if op is not None:
            value = _value(lit)
            if op == "=":
                return self._literal(index, "=", value)
            if op == "<>" or op == "!=":
                return self._all[index] - self._literal(index, "=", value) - self._null[index]
            return self._literal(index, op, value)
        if lo is not None:
            cov = self._literal(index, ">=", _value(lo)) & self._literal(index, "<=", _value(hi))
            return self._all[index] - cov - self._null[index] if bnot else cov
        if items is not None:
            values = _items(items)
            if values is None:
                return None
            spans = [span for v in values for span in self._literal(index, "=", v).spans]
            cov = IntervalSet.of(spans)
            return self._all[index] - cov - self._null[index] if inot else cov
        # IS [NOT] NULL
        return self._all[index] - self._null[index] if isnot else self._null[index]

    def _literal(self, index: int, op: str, value: Any) -> IntervalSet:
        """``attr.code_of(value)`` for ``=``, else ``attr.compare(op, value)``, remembered
        (keyed by the value's type too: 1, 1.0 and TRUE are different literals)."""
        key = (index, op, value.__class__, value)
        cov = self._literals.get(key)
        if cov is None:
            attr: Attribute = self.domain.attributes[index]
            if op == "=":
                cov = attr.code_of(value)
            else:
                cov = attr.compare(op, value)  # type: ignore[arg-type]
            if len(self._literals) >= MAX_TERMS:
                self._literals.clear()
            self._literals[key] = cov
        if op == "=" and not cov:  # as parse_query: a literal that matches no value is noted
            note = self.domain.attributes[index].literal_note(value)
            if note is not None:
                self._pending.append(note)
        return cov

    def _check_name(self, token: str, quoted: str | None, bare: str | None) -> str | None:
        """The attribute a name token stands for, if the main parser reads it the same way in
        every form of the grammar (sqlglot keywords and functions such as ``current_user``
        are not columns; quote_hyphenated must leave it alone)."""
        name = quoted.replace('""', '"') if quoted is not None else bare
        if name not in self._index or "'" in token:
            return None  # quote_hyphenated reads a ' in a quoted name as a string's start
        if quoted is not None and quote_hyphenated(token, self.domain) != token:
            return None
        forms = (
            "= 1", "< 1", "<> 1", "IN (1)", "NOT IN (1)", "BETWEEN 1 AND 2",
            "NOT BETWEEN 1 AND 2", "IS NULL", "IS NOT NULL",
        )  # fmt: skip
        kinds = (
            exp.EQ, exp.LT, exp.NEQ, exp.In, exp.In, exp.Between, exp.Between, exp.Is, exp.Is,
        )  # fmt: skip
        sql = "SELECT 1 WHERE " + quote_hyphenated(
            " AND ".join(f"{token} {f}" for f in forms), self.domain
        )
        try:
            where = sqlglot.parse_one(sql).args.get("where")
        except sqlglot.errors.SqlglotError:
            return None
        if where is None:
            return None
        leaves = list(where.this.flatten()) if isinstance(where.this, exp.And) else []
        if len(leaves) != len(forms) or len(list(where.find_all(exp.Column))) != len(forms):
            return None
        for leaf, form, kind in zip(leaves, forms, kinds):
            if form.startswith("NOT") or form == "IS NOT NULL":
                if not isinstance(leaf, exp.Not):
                    return None
                leaf = leaf.this
            col = leaf.this if isinstance(leaf, kind) else None
            if not isinstance(col, exp.Column) or col.name != name or col.table:
                return None
        return name


def _value(text: str) -> Any:
    """The Python value parse_query reads from a literal (tessera.workload.parse._Parser._value)."""
    if text[0] == "'":
        return text[1:-1].replace("''", "'")
    upper = text.upper()
    if upper == "TRUE":
        return True
    if upper == "FALSE":
        return False
    # sqlglot reads "-5" as Neg(5): the magnitude first, then its negation
    negative = text[0] == "-"
    body = text[1:] if negative else text
    try:
        number: int | float = int(body)
    except ValueError:
        number = float(body)
    return -number if negative else number


def _items(text: str) -> list[Any] | None:
    """The literals of an ``IN (...)`` list, or ``None`` if it is not a plain list of them."""
    out: list[Any] = []
    pos, n = 0, len(text)
    if not text.strip(" \t"):
        return None
    while pos < n:
        m = _ITEM.match(text, pos)
        if m is None:
            return None
        out.append(_value(m.group(1)))
        pos = m.end()
        if text[pos - 1] == "," and pos >= n:
            return None  # a trailing comma
    return out
