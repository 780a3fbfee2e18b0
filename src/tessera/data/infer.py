"""Draft a schema from data, for a human to review and edit.

**An inferred domain is not private** (docs/theory.md §1): the observed minima, maxima and category
lists
are functions of the sensitive data. Use the draft only as a starting point: replace observed
bounds by public ones (legal ranges, code books) before any private release.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
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

#: A text column (or a dense whole-number one) with at least this many values, all distinct,
#: is a row key (a row number, a record id), not an attribute: the draft leaves it out.
KEY_MIN_ROWS = 20


@dataclass(frozen=True)
class Draft:
    """A draft schema (:func:`draft_schema`): the domain, and the columns left out of it —
    text columns of too many values (``wide``), and row keys: text columns whose every value
    is distinct, and whole-number ones whose distinct values are also dense (span at most twice
    their number: a row number, a record id). A key has as many values as rows: as an
    attribute every marginal over it would be a list of single rows, and the synthesizer
    would model it as noise."""

    domain: Domain
    keys: tuple[str, ...] = ()
    #: text columns left out for having more distinct values than ``max_categories``
    #: (name, number of distinct values)
    wide: tuple[tuple[str, int], ...] = ()

    def header(self) -> str:
        """The YAML's comment header: not private, and the columns left out."""
        lines = [f"# {part}" for note in self.notes() for part in textwrap.wrap(note, 90)]
        return NOT_PRIVATE_HEADER + "".join(f"{line}\n" for line in lines)

    def notes(self) -> list[str]:
        """One sentence per kind of column left out, with what to do (empty: none)."""
        out = []
        if self.keys:
            names = ", ".join(repr(k) for k in self.keys)
            out.append(f"Left out as row keys (every value distinct, not attributes): {names}. "
                       "Read the data with --extra-columns ignore, or drop them; a key that "
                       "several rows of one person share is a --privacy-id.")
        if self.wide:
            names = ", ".join(f"{n!r} ({k:,} values)" for n, k in self.wide)
            out.append(f"Left out, more distinct text values than --max-categories: {names}. "
                       "Recode them into fewer categories (or raise --max-categories) and "
                       "declare them, or read the data with --extra-columns ignore.")
        return out


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
    """A draft :class:`Domain` from observed values (see the module warning):
    :func:`draft_schema`'s domain, without the row keys it leaves out; a text column of more
    than ``max_categories`` values is refused (:class:`~tessera.errors.SchemaError`), where
    the draft leaves it out and says so."""
    draft = draft_schema(source, csv=csv, max_categories=max_categories,
                         max_integer_range=max_integer_range, bins=bins)
    if draft.wide:
        name, n = draft.wide[0]
        raise_too_many(name, n, max_categories)
    return draft.domain


def draft_schema(
    source: Any,
    *,
    csv: CsvOptions = CsvOptions(),
    max_categories: int = 100,
    max_integer_range: int = 10_000,
    bins: int = 10,
) -> Draft:
    """A draft schema from observed values (see the module warning).

    Text columns become categorical (up to ``max_categories`` values; a text column with more
    is left out, :attr:`Draft.wide`, for the user to recode), integer columns integer
    ranges (up to ``max_integer_range`` values, else bins), other numbers ``bins`` equal-width
    bins, and columns of true/false values booleans. NULLs make the attribute ``missing: true``.
    A text column of at least :data:`KEY_MIN_ROWS` values, all distinct, is a row key and is
    left out (:attr:`Draft.keys`), and so is a whole-number one whose distinct values span at
    most twice their number; fractional numbers, and whole numbers spread wider (a measure such
    as an income), are all distinct too, and are binned.
    """
    con = duckdb.connect()
    rel = relation(con, source, csv=csv)
    con.register("rel", rel)
    attrs: list[Attribute] = []
    keys: list[str] = []
    wide: list[tuple[str, int]] = []
    for name, dtype in zip(rel.columns, rel.types):
        col = '"' + name.replace('"', '""') + '"'
        stats = con.sql(
            f"SELECT count(*) - count({col}), count(DISTINCT {col}), count({col}) FROM rel"
        ).fetchall()[0]
        missing = bool(stats[0])
        n_distinct = int(stats[1])
        kind = str(dtype).upper()
        whole = "INT" in kind and "INTERVAL" not in kind
        text = not any(t in kind for t in ("BOOLEAN", "DECIMAL", "DOUBLE", "FLOAT", "REAL",
                                           "NUMERIC", "INT", "DATE", "TIME"))
        if n_distinct == int(stats[2]) >= KEY_MIN_ROWS and (text or whole and _dense(
                con, col, n_distinct)):
            keys.append(name)  # a row key (Draft)
            continue
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
                wide.append((name, n_distinct))  # left out (Draft.wide)
            else:
                attrs.append(
                    Categorical(
                        name=name, values=tuple(sorted(str(v) for v in values)), missing=missing
                    )
                )
    if not attrs:
        from tessera.errors import SchemaError

        if wide and not keys:
            name, n = wide[0]
            raise_too_many(name, n, max_categories)
        raise SchemaError(f"no column can be an attribute: row keys (all values distinct) "
                          f"{keys}, too many text values {[n for n, _ in wide]}",
                          hint="a schema needs at least one column whose values repeat")
    return Draft(Domain(tuple(attrs)), tuple(keys), tuple(wide))


def _dense(con: Any, col: str, n: int) -> bool:
    """Whether n distinct whole numbers span at most 2n values: numbered rows or records (a
    measure whose values all differ, a population or an income, spans far more)."""
    lo, hi = con.sql(f"SELECT min({col}), max({col}) FROM rel").fetchall()[0]
    return hi - lo + 1 <= 2 * n


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
