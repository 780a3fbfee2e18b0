"""``SELECT`` statements → aggregate statements, and aggregate workload files
(docs/aggregates.md; the statements are :mod:`tessera.workload.aggregates`).

Accepted, one statement per line (an optional ``name:`` prefix, ``#`` comments, as WHERE
lines)::

    SELECT COUNT(*), SUM(income), AVG(CLAMP(hours, 0, 60)) AS h FROM t WHERE age < 30
        GROUP BY sex, region

* aggregates ``COUNT(*)``, ``COUNT(x)``, ``SUM(x)``, ``AVG(x)`` over integer attributes,
  ``x`` optionally ``CLAMP(x, lo, hi)`` with integer bounds (the default clamp is the schema's
  range); the GROUP BY columns may be repeated bare in the SELECT list;
* ``SUM(CLAMP(m, lo, hi))`` and ``AVG(CLAMP(m, lo, hi))`` of a **measure** ``m``: a numeric
  data column that is not in the schema (money, hours), its public bounds decimal numbers
  (:mod:`tessera.schema.measures`);
* one table (every statement of a file names the same one), no JOIN, subquery, DISTINCT,
  HAVING, ORDER BY or LIMIT;
* a bare WHERE clause is ``SELECT COUNT(*) FROM t WHERE …``.

Every error names the line and comes with a hint; all errors of a file are reported together.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

import sqlglot
from sqlglot import exp

from tessera.errors import QueryError, TesseraError, did_you_mean, read_text
from tessera.schema.attributes import IntegerRange
from tessera.schema.domain import Domain
from tessera.workload.aggregates import Aggregate, AggregateWorkload, Statement, expand
from tessera.workload.files import WorkloadError, split_line
from tessera.workload.parse import keyword_hint, parse_query, quote_hyphenated
from tessera.workload.query import Query

_SELECT = re.compile(r"^\s*select\b", re.IGNORECASE)
#: A line that may be a SELECT statement (after an optional name): a superset, checked exactly.
_MAYBE_SELECT = re.compile(r'^\s*(?:"(?:[^"]|"")*"\s*:|[^\W\d][\w.\-]*\s*:)?\s*select\b',
                           re.IGNORECASE | re.MULTILINE)
_KINDS = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg"}
_CLAUSES = {"joins": "JOIN", "having": "HAVING", "order": "ORDER BY", "limit": "LIMIT",
            "offset": "OFFSET", "distinct": "DISTINCT", "with_": "WITH", "qualify": "QUALIFY",
            "windows": "WINDOW"}


def is_select(text: str) -> bool:
    """Whether a workload line (its name prefix removed) is a SELECT statement."""
    return bool(_SELECT.match(text))


def is_aggregate_file(path: str | Path) -> bool:
    """Whether a text workload file holds at least one SELECT statement (YAML and JSON
    workloads never do)."""
    p = Path(path)
    if p.suffix.lower() in (".yaml", ".yml", ".json") or not p.is_file():
        return False
    text = read_text(p, "workload", QueryError)
    if not _MAYBE_SELECT.search(text):  # (one pass in C over a file of millions of lines)
        return False
    for raw in text.splitlines():
        parts = split_line(raw)
        if parts is not None and is_select(parts[1]):
            return True
    return False


def parse_statement(text: str, domain: Domain, name: str = "",
                    table: str | None = None) -> tuple[Statement, str]:
    """One SELECT statement (or bare WHERE clause) → (:class:`Statement`, its table name;
    ``""`` for a WHERE clause). ``table``: the table the file's other statements name."""
    if not is_select(text):
        count = Aggregate("count", None, label="COUNT(*)")
        return Statement(name or text, parse_query(text, domain), (count,)), ""
    try:
        tree = sqlglot.parse_one(quote_hyphenated(text, domain))
    except sqlglot.errors.SqlglotError as e:
        raise QueryError(f"syntax error: {str(e).splitlines()[0]}",
                         hint=keyword_hint(text, domain) or "write SELECT COUNT(*), SUM(x), "
                         "AVG(x) FROM t WHERE … GROUP BY …") from None
    if not isinstance(tree, exp.Select):
        raise QueryError("not a single SELECT statement",
                         hint="one SELECT … FROM t [WHERE …] [GROUP BY …] per line")
    for key, words in _CLAUSES.items():
        if tree.args.get(key):
            raise QueryError(f"{words} is not supported in an aggregate statement",
                             hint="one table, aggregates, WHERE and GROUP BY only "
                             "(a join's rows are not a public domain)")
    src = tree.args.get("from_") or tree.args.get("from")
    if src is None:
        raise QueryError("the statement has no FROM", hint="write SELECT … FROM t …")
    if not isinstance(src.this, exp.Table) or src.this.args.get("db"):
        raise QueryError("FROM must name one table, not a subquery or a qualified name",
                         hint="SELECT … FROM t WHERE … (the data given on the command line)")
    tname = src.this.name
    if table and tname.lower() != table.lower():
        raise QueryError(f"FROM {tname}: another table than the workload's {table!r}",
                         hint=f"every statement of a workload reads one table: FROM {table}")
    group = tuple(_group_column(c, domain) for c in
                  (tree.args["group"].expressions if tree.args.get("group") else ()))
    if len(set(group)) != len(group):
        raise QueryError("a GROUP BY column is repeated", hint="name each column once")
    aggregates = []
    for node in tree.expressions:
        agg = _aggregate(node, domain, group)
        if agg is not None:
            aggregates.append(agg)
    if not aggregates:
        raise QueryError("the statement has no aggregate",
                         hint="SELECT COUNT(*), SUM(x) or AVG(x)")
    where_node = tree.args.get("where")
    where = (parse_query(where_node.this.sql(), domain) if where_node is not None
             else Query.tautology())
    return Statement(name or text, where, tuple(aggregates), group), tname


def _column_name(node: exp.Expression, domain: Domain, what: str) -> str:
    if isinstance(node, exp.Paren):
        node = node.this
    if not isinstance(node, exp.Column) or node.table:
        raise QueryError(f"{what}: {node.sql()!r} is not a column of the schema",
                         hint="name a schema column (no expressions, no table prefix)")
    col = node.name
    if col not in domain:
        guess = did_you_mean(col, domain.names, 0.6)
        raise QueryError(f"{what}: unknown column {col!r}",
                         hint=guess or f"the schema's columns: {', '.join(domain.names)}")
    return col


def _group_column(node: exp.Expression, domain: Domain) -> str:
    return _column_name(node, domain, "GROUP BY")


def _aggregate(node: exp.Expression, domain: Domain, group: tuple[str, ...]) -> Aggregate | None:
    """One SELECT item: an aggregate, or a GROUP BY column repeated (None)."""
    alias = node.alias if isinstance(node, exp.Alias) else ""
    inner = node.this if isinstance(node, exp.Alias) else node
    if isinstance(inner, exp.Column):
        col = _column_name(inner, domain, "SELECT")
        if col not in group:
            raise QueryError(f"SELECT {col}: a bare column must be a GROUP BY column",
                             hint=f"GROUP BY {col}, or aggregate it: SUM({col})")
        return None
    kind = next((k for t, k in _KINDS.items() if type(inner) is t), None)
    if kind is None:
        what = inner.key.upper() if isinstance(inner, exp.Func) else repr(inner.sql())
        raise QueryError(f"unsupported aggregate {what}",
                         hint="COUNT(*), COUNT(x), SUM(x) and AVG(x) are supported "
                         "(x an integer column, optionally CLAMP(x, lo, hi))")
    arg = inner.this
    if isinstance(arg, exp.Distinct):
        raise QueryError(f"{kind.upper()}(DISTINCT …) is not supported",
                         hint="counts of distinct values are not linear queries")
    label = alias or inner.sql()
    if kind == "count" and isinstance(arg, exp.Star):
        return Aggregate("count", None, label=label)
    lo = hi = None
    if isinstance(arg, exp.Anonymous) and arg.name.upper() == "CLAMP":
        if kind == "count":
            raise QueryError("COUNT(CLAMP(…)): a count needs no clamp", hint="COUNT(x)")
        args = arg.expressions
        if len(args) != 3:
            raise QueryError(f"CLAMP takes (column, lo, hi), got {len(args)} arguments",
                             hint="e.g. SUM(CLAMP(income, 0, 100000))")
        arg, lo, hi = args[0], _number(args[1], "lo"), _number(args[2], "hi")
        if lo > hi:
            raise QueryError(f"CLAMP bounds lo {lo} > hi {hi}", hint="swap them")
    measure = _measure_name(arg, domain)
    if measure is not None:
        if kind == "count":
            raise QueryError(f"COUNT({measure}): {measure!r} is not a schema column",
                             hint="COUNT(*) counts the rows (a measure has no NULLs); "
                                  f"SUM(CLAMP({measure}, lo, hi)) sums it")
        if lo is None or hi is None:
            guess = did_you_mean(measure, domain.names, 0.6)
            raise QueryError(
                f"{kind.upper()}({measure}): {measure!r} is not a schema column; to sum a "
                "numeric data column outside the schema (a measure), state its public bounds",
                hint=(guess + "; or " if guess else "")
                + f"{kind.upper()}(CLAMP({measure}, lo, hi)), e.g. "
                     f"{kind.upper()}(CLAMP({measure}, 0, 500)): values outside are clamped "
                     "(or declare it in the schema to filter or group on it)")
        return Aggregate(kind, measure, label=label, written=(str(lo), str(hi)))
    col = _column_name(arg, domain, f"{kind.upper()}")
    attr = domain[col]
    if kind == "count":
        return Aggregate("count", col, label=label)
    if not isinstance(attr, IntegerRange):
        raise QueryError(
            f"{kind.upper()}({col}): {col!r} is a {attr.kind} attribute, not an integer one",
            hint="sums and averages are over integer attributes (type: integer, min, max), or "
                 f"over a numeric data column left out of the schema: "
                 f"{kind.upper()}(CLAMP(x, lo, hi)); count a categorical one by group: "
                 "SELECT COUNT(*) … GROUP BY " + col)
    if lo is None or hi is None:
        lo, hi = Decimal(attr.lo), Decimal(attr.hi)
    for b, what in ((lo, "lo"), (hi, "hi")):
        if b != b.to_integral_value():
            raise QueryError(f"CLAMP {what} {b} is not an integer: {col!r} is an integer "
                             "attribute", hint="round the bound (a tighter clamp is less noise)")
    return Aggregate(kind, col, int(lo), int(hi), label)  # type: ignore[arg-type]


def _measure_name(node: exp.Expression, domain: Domain) -> str | None:
    """The name of a column that is not in the schema (a measure), else None."""
    if isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column) and not node.table and node.name not in domain:
        return str(node.name)
    return None


def _number(node: exp.Expression, what: str) -> Decimal:
    neg = isinstance(node, exp.Neg)
    lit = node.this if neg else node
    if not isinstance(lit, exp.Literal) or lit.is_string:
        raise QueryError(f"CLAMP {what} {node.sql()!r} is not a number",
                         hint="CLAMP(x, lo, hi) with numbers as bounds, e.g. CLAMP(x, 0, 99.5)")
    try:
        v = Decimal(lit.this)
    except InvalidOperation:
        raise QueryError(f"CLAMP {what} {node.sql()} is not a number",
                         hint="write the bound in digits, e.g. 12.5") from None
    if not v.is_finite():
        raise QueryError(f"CLAMP {what} {node.sql()} is not finite", hint="bounds are numbers")
    return -v if neg else v


def _first_table(text: str, domain: Domain) -> str | None:
    """The table the file's first SELECT statement reads (every other one must read it)."""
    for raw in text.splitlines():
        parts = split_line(raw)
        if parts is None or not is_select(parts[1]):
            continue
        try:
            tree = sqlglot.parse_one(quote_hyphenated(parts[1], domain))
        except sqlglot.errors.SqlglotError:
            continue
        src = tree.args.get("from_") or tree.args.get("from")
        if src is not None and isinstance(src.this, exp.Table):
            return str(src.this.name)
    return None


def read_aggregates(path: str | Path, domain: Domain) -> AggregateWorkload:
    """A text workload of SELECT statements and WHERE lines (counts), every error of the file
    at once (a :class:`~tessera.workload.files.WorkloadError`), each naming ``file:line``."""
    p = Path(path)
    text = read_text(p, "workload", QueryError)
    statements: list[Statement] = []
    errors: list[TesseraError] = []
    table = _first_table(text, domain)
    for lineno, raw in enumerate(text.splitlines(), start=1):
        parts = split_line(raw)
        if parts is None:
            continue
        name, body = parts
        where = f"{p}:{lineno}"
        try:
            st, _ = parse_statement(body, domain, name, table)
        except QueryError as e:
            errors.append(e.located(where))
            continue
        statements.append(Statement(st.name, st.where, st.aggregates, st.group_by, st.weight,
                                    where))
    if errors:
        raise WorkloadError(errors)
    if not statements:
        raise QueryError("the workload has no statements", where=str(p),
                         hint="one SELECT … FROM t … or WHERE clause per line")
    names = [s.name for s in statements]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise QueryError(f"statement name {dup!r} is used twice", where=str(p),
                         hint="name each statement once: name: SELECT …")
    expand(domain, statements)  # the size guard, with the file's words
    return AggregateWorkload(domain, tuple(statements), table)
