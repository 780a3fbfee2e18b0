"""Draft a schema from data, for a human to review and edit.

**An inferred domain is not private** (docs/theory.md §1): the observed minima, maxima and category
lists
are functions of the sensitive data. Use the draft only as a starting point: replace observed
bounds by public ones (legal ranges, code books) before any private release.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb

from tessera.data.duckdb_source import relation
from tessera.data.table import CsvOptions
from tessera.schema.domain import Attribute, Binned, Boolean, Categorical, Domain, IntegerRange

NOT_PRIVATE_HEADER = """\
# DRAFT SCHEMA INFERRED FROM DATA - NOT PRIVATE.
# The bounds and value lists below were read off the sensitive data and leak it.
# Replace them with public knowledge (code books, legal ranges) before any private release.
"""

_BOOL_TEXT = {"true", "false", "t", "f", "yes", "no", "y", "n", "0", "1"}


def _nice_edges(lo: float, hi: float, bins: int) -> list[float]:
    """Round, equally spaced edges covering [lo, hi]."""
    if hi <= lo:
        return [lo, lo + 1.0]
    step = (hi - lo) / bins
    mag = 10 ** math.floor(math.log10(step))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= step), default=10 * mag)
    start = math.floor(lo / step) * step
    n = math.ceil((hi - start) / step)
    edges = [start + i * step for i in range(n + 1)]
    if edges[-1] <= hi:  # bins are closed on the left: the maximum needs room above
        edges.append(edges[-1] + step)
    return [float(f"{e:.12g}") for e in edges]


def infer_domain(
    source: Any,
    *,
    csv: CsvOptions = CsvOptions(),
    max_categories: int = 100,
    max_integer_range: int = 10_000,
    bins: int = 10,
) -> Domain:
    """A draft :class:`Domain` from observed values (see the module warning).

    Text columns become categorical (up to ``max_categories`` values), integer columns integer
    ranges (up to ``max_integer_range`` values, else bins), other numbers ``bins`` equal-width
    bins, and columns of true/false values booleans. NULLs make the attribute ``missing: true``.
    """
    con = duckdb.connect()
    rel = relation(con, source, csv=csv)
    con.register("rel", rel)
    attrs: list[Attribute] = []
    for name, dtype in zip(rel.columns, rel.types):
        col = '"' + name.replace('"', '""') + '"'
        stats = con.sql(
            f"SELECT count(*) - count({col}), count(DISTINCT {col}) FROM rel"
        ).fetchall()[0]
        missing = bool(stats[0])
        n_distinct = int(stats[1])
        kind = str(dtype).upper()
        if kind == "BOOLEAN":
            attrs.append(Boolean(name=name, missing=missing))
        elif any(t in kind for t in ("INT", "DECIMAL", "DOUBLE", "FLOAT", "REAL", "NUMERIC")):
            lo, hi = con.sql(f"SELECT min({col}), max({col}) FROM rel").fetchall()[0]
            is_int = "INT" in kind and "INTERVAL" not in kind
            if lo is None:
                attrs.append(Boolean(name=name, missing=True))
            elif is_int and hi - lo + 1 <= max_integer_range:
                attrs.append(IntegerRange(name=name, lo=int(lo), hi=int(hi), missing=missing))
            else:
                attrs.append(
                    Binned(
                        name=name,
                        edges=tuple(_nice_edges(float(lo), float(hi), bins)),
                        missing=missing,
                    )
                )
        else:
            values = [
                r[0]
                for r in con.sql(
                    f"SELECT {col} FROM rel WHERE {col} IS NOT NULL GROUP BY ALL "
                    "ORDER BY count(*) DESC "
                    f"LIMIT {max_categories + 1}"
                ).fetchall()
            ]
            text = {str(v).strip().lower() for v in values}
            if values and text <= _BOOL_TEXT and len(text) <= 2:
                attrs.append(Boolean(name=name, missing=missing))
            elif n_distinct > max_categories:
                raise_too_many(name, n_distinct, max_categories)
            else:
                attrs.append(
                    Categorical(
                        name=name, values=tuple(sorted(str(v) for v in values)), missing=missing
                    )
                )
    return Domain(tuple(attrs))


def raise_too_many(name: str, n: int, limit: int) -> None:
    from tessera.errors import SchemaError

    raise SchemaError(
        f"column {name!r} has {n} distinct values, more than --max-categories {limit}",
        hint="raise --max-categories, or drop/recode the column "
        "(an identifier is not an attribute)",
    )


def summarize(domain: Domain) -> list[tuple[str, str, int, str]]:
    """(name, kind, size, detail) rows for printing."""
    rows = []
    for a in domain:
        if isinstance(a, Categorical):
            detail = ", ".join(a.values[:5]) + (" …" if a.n_values > 5 else "")
        elif isinstance(a, IntegerRange):
            detail = f"{a.lo}..{a.hi}"
        elif isinstance(a, Binned):
            detail = f"{a.n_values} bins, edges {a.edges[0]:g}..{a.edges[-1]:g}"
        else:
            detail = "false, true"
        rows.append((a.name, a.kind + (" +NULL" if a.missing else ""), a.size, detail))
    return rows
