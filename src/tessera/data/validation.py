"""Validation of data against the public domain, shared by every engine (docs/theory.md §1).

The data are never trusted to define the domain: every value of every schema column is checked
against its declared attribute, encoded once by :meth:`Attribute.encode` (the single rule for
every value), and values outside the domain are an error naming the column, the values and how
many rows hold them — unless the caller chose the explicit ``drop`` policy. An engine groups each
column's distinct values its own way (DuckDB, Spark) and hands them to :func:`column_codes`, so
every engine reports the same errors in the same order and applies the same policies.

Nothing is skipped silently either: a column the schema does not declare is an error unless the
caller chose ``extra_columns='ignore'`` (then it is named in a warning). Each error's hint names
the likely cause — a wrong delimiter (values padded by ``', '``, a file that does not split), a
missing-value marker such as ``'?'`` not passed as ``--na`` — before the generic remedies.
"""

from __future__ import annotations

import gzip
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tessera.data.table import CSV_SUFFIXES, CsvOptions, ExtraColumns, InvalidValues
from tessera.errors import DataError, DataWarning, did_you_mean
from tessera.schema.domain import INVALID, Attribute, Domain


def check_columns(columns: list[str], domain: Domain, source: Any, csv: CsvOptions,
                  extra_columns: ExtraColumns = "error") -> None:
    """Step 2 of :func:`encode`: every schema attribute must be a column of the data, and every
    column of the data an attribute, unless ``extra_columns='ignore'``.

    Without a header the columns are matched to the attributes by position, so their numbers
    must agree. A missing column is named with its closest spelling in the data, or, when no
    attribute matches but the counts agree, with the hint that the file has no header row; a
    text file read as one column points at the delimiter. Columns the schema does not declare
    are refused by default — the user may believe a column is read that is not — and, under
    ``extra_columns='ignore'``, named in a :class:`~tessera.errors.DataWarning` (the CLI's
    ``warning:`` line) and never read.
    """
    if extra_columns not in ("error", "ignore"):
        raise DataError(f"unknown extra_columns policy {extra_columns!r}",
                        hint="'error' or 'ignore'")
    if csv.header is False and len(columns) != len(domain):
        one = len(columns) == 1 and len(domain) > 1 and is_text_file(source)
        raise DataError(
            f"the data have {len(columns)} columns but the schema declares {len(domain)}",
            hint=delimiter_hint("every row was read as one column", source, csv)
            if one else
            "without a header the columns are matched to the schema's attributes in order",
        )
    absent = [name for name in domain.names if name not in columns]
    if absent:
        headerless = (
            isinstance(source, (str, Path))
            and csv.header is not False
            and len(absent) == len(domain)
            and len(columns) == len(domain)
        )
        one = len(columns) == 1 and len(domain) > 1 and is_text_file(source)
        if headerless:
            hint = ("the file seems to have no header row: pass --no-header "
                    "(CsvOptions(header=False))")
        elif one:
            hint = delimiter_hint(f"the header was read as one column {columns[0]!r}", source, csv)
        else:
            hint = did_you_mean(absent[0], columns, 0.5) or f"the data have columns {columns}"
        raise DataError(
            f"column {absent[0]!r} of the schema is not in the data"
            + (f" ({len(absent) - 1} more missing)" if len(absent) > 1 else ""),
            hint=hint,
        )
    declared = set(domain.names)
    extra = list(dict.fromkeys(c for c in columns if c not in declared))
    if not extra:
        return
    named = ", ".join(repr(c) for c in extra[:8]) + (
        f" and {len(extra) - 8} more" if len(extra) > 8 else "")
    if extra_columns == "ignore":
        warnings.warn(DataWarning(
            f"ignored {len(extra)} column{'' if len(extra) == 1 else 's'} of the data that the "
            f"schema does not declare (--extra-columns ignore): {named}"), stacklevel=2)
        return
    it = "it" if len(extra) == 1 else "them"
    raise DataError(
        f"the data have {len(extra)} column{'' if len(extra) == 1 else 's'} that the schema "
        f"does not declare: {named}",
        hint=f"declare {it} in the schema, remove {it} from the data, or pass --extra-columns "
        "ignore (extra_columns='ignore') to read only the schema's columns",
    )


def is_text_file(source: Any) -> bool:
    """Whether ``source`` is a path read as delimited text (where a delimiter can be wrong)."""
    if not isinstance(source, (str, Path)):
        return False
    return Path(str(source)).suffix.lower() in CSV_SUFFIXES | {""}


#: Separators a text file may use, most specific first (a comma followed by a space is UCI's).
_DELIMITERS = (", ", "; ", "\t", ";", "|", ",")


def first_line(source: Any, csv: CsvOptions) -> str | None:
    """The first line of a local text file after ``csv.skip_rows`` (``None`` if unreadable):
    what a delimiter is guessed from."""
    if not is_text_file(source):
        return None
    p = Path(str(source))
    opener: Any = gzip.open if p.suffix.lower() == ".gz" else open
    try:
        with opener(p, "rt", encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f):
                if n >= csv.skip_rows:
                    return line.rstrip("\r\n")
    except OSError:
        return None
    return None


def guess_delimiter(line: str, exclude: str | None = None) -> str | None:
    """The separator of :data:`_DELIMITERS` that occurs most often in ``line`` (ties: the more
    specific first), other than ``exclude``; ``None`` if none occurs."""
    counts = {d: line.count(d) for d in _DELIMITERS if d != exclude}
    best = max(counts, key=lambda d: (counts[d], -_DELIMITERS.index(d)), default=None)
    return best if best is not None and counts[best] > 0 else None


def delimiter_hint(what: str, source: Any, csv: CsvOptions) -> str:
    """A hint pointing at ``--delimiter``: ``what`` went wrong, and the separator the file's
    first line suggests, if any."""
    line = first_line(source, csv)
    guess = None if line is None else guess_delimiter(line, csv.delimiter)
    if guess is None:
        return f"{what}: the delimiter may be wrong — check --delimiter"
    return (f"{what}: the delimiter may be {guess!r} — try --delimiter {guess!r} "
            f"(CsvOptions(delimiter={guess!r}))")

# -- the privacy id (docs/theory.md §3.13) -----------------------------------------------------

#: How every engine bounds a person's rows (:class:`tessera.privacy.PrivacyUnit`): the rule
#: reads that person's rows alone, so adding, removing or replacing one person changes the kept
#: rows of that person only — the property the person-level guarantee rests on.
BOUNDING_RULE = (
    "each person's rows are ordered by md5(id | code_1 | … | code_m) (the id as text, then the "
    "domain code of every schema column, '|'-joined), ties by the codes, and the first K kept")
#: The id column's type names each engine accepts (integers and text read the same on every
#: engine; a float or a timestamp prints differently on DuckDB and Spark, so it would order a
#: person's rows differently).
ID_TYPES = ("integer", "text")


def check_privacy_id(columns: list[str], id_column: str, domain: Domain, source: Any,
                     csv: CsvOptions) -> None:
    """The privacy id must be a column of the data (it need not be in the schema); without a
    header only a schema column can be named."""
    if id_column in columns:
        return
    if csv.header is False and id_column not in domain.names:
        raise DataError(f"the privacy id column {id_column!r} cannot be named in a file "
                        "without a header", where=str(source) if isinstance(source, (str, Path))
                        else None,
                        hint="give the file a header row, or make the id a schema attribute")
    raise DataError(f"the privacy id column {id_column!r} is not in the data",
                    hint=did_you_mean(id_column, columns, 0.5)
                    or f"the data have columns {columns}")


def id_type_error(id_column: str, type_name: str) -> DataError:
    """A privacy id of a type whose text differs between engines (a float, a date)."""
    return DataError(f"the privacy id column {id_column!r} has type {type_name}; an id must be "
                     "an integer or text",
                     hint=f"cast it to text (e.g. CAST({id_column} AS VARCHAR)) or to an integer")


def missing_ids_error(id_column: str, rows: int) -> DataError:
    """Rows without a privacy id belong to no person: refused, never dropped silently."""
    return DataError(f"{rows} row{'s' if rows != 1 else ''} of the data "
                     f"{'have' if rows != 1 else 'has'} no privacy id (column {id_column!r} is "
                     "empty there)", hint="give every row the id of its person (a row alone "
                     "can get an id of its own), or drop those rows before the release")


@dataclass(frozen=True)
class ColumnCodes:
    """One attribute's distinct values in ``src`` and the code each gets in ``coded``."""

    values: pa.Array  # the distinct values, as DuckDB grouped them (NULL included)
    code: np.ndarray  # int32 code per distinct value; -1 marks the rows to drop
    present: np.ndarray  # sorted valid codes that occur: a superset of those left after drops
    invalid: InvalidValues | None  # the values outside the attribute, if any
    rows: int  # rows of ``src``



def column_codes(attr: Attribute, values: pa.Array | pa.ChunkedArray,
                 counts: np.ndarray) -> ColumnCodes:
    """One attribute's distinct ``values`` (with their row ``counts``, as an engine grouped
    them) each encoded once by :meth:`Attribute.encode` (the single rule for every value),
    shared by the DuckDB and Spark engines.

    Values outside the attribute are collected — most frequent first, ties by value, so every
    engine names them in the same order — for the error or the drop report; NULL gets the
    attribute's missing code if it declares one, else is dropped like an invalid value.
    """
    column = values
    if pa.types.is_dictionary(column.type):  # ENUM / pandas category: decode, keep NULLs
        column = column.cast(column.type.value_type)
    counts = np.asarray(counts, dtype=np.int64)
    try:
        order = pc.sort_indices(
            pa.table({"n": counts, "v": column}),
            sort_keys=[("n", "descending"), ("v", "ascending")])
    except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
        order = pa.array(np.argsort(-counts, kind="stable"))
    column, counts = column.take(order), counts[order.to_numpy()]
    codes = attr.encode(column.to_numpy(zero_copy_only=False))
    bad = codes == INVALID
    invalid = None
    if bad.any():
        idx = np.flatnonzero(bad)
        invalid = InvalidValues(
            attr.name,
            tuple((column[int(j)].as_py(), int(counts[j])) for j in idx),
            int(counts[idx].sum()),
        )
    # the code each distinct value gets in ``coded``: NULL is the missing code (if
    # declared); -1 marks the rows to drop (invalid values, undeclared NULLs)
    code = np.where(bad, -1, codes).astype(np.int32)
    null = ~column.is_valid().to_numpy(zero_copy_only=False)
    code[null] = -1 if attr.missing_code is None else attr.missing_code
    return ColumnCodes(
        values=column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column,
        code=code,
        # a superset of the codes left after dropping: the coarsening join must miss none
        present=np.unique(codes[~bad]),
        invalid=invalid,
        rows=int(counts.sum()),
    )


#: Texts that often mark a missing value in exported data (suggested for ``--na``, never
#: assumed: a marker is missing only if the user says so).
MISSING_MARKERS = frozenset({"?", "NA", "N/A", "n/a", "na", "NaN", "nan", "NULL", "null", "None",
                             "none", "-", ".", "#N/A", "missing", ""})


def invalid_values_error(invalid: list[InvalidValues], domain: Domain, source: Any = None,
                         csv: CsvOptions = CsvOptions()) -> DataError:
    """Step 4 of :func:`encode` under ``on_invalid='error'``: one error naming every column with
    values outside its attribute, with a hint for the most likely cause, in this order:

    1. values with surrounding spaces that are in the domain once stripped: the file's
       separator is ``', '`` (UCI Adult) and the delimiter was read as ``','`` — the fix is
       ``--delimiter ', '``, never ``--on-invalid drop`` (which would drop every row);
    2. a text that usually marks a missing value (``'?'``, ``'NA'``): the fix is ``--na``
       (with ``missing: true`` if the attribute does not declare it yet);
    3. NULLs in an attribute without a missing code: declare ``missing: true``;
    4. else: extend the schema, or drop the rows (``--on-invalid drop``, reported).

    ``source`` and ``csv`` say whether the data are a text file (``--delimiter`` and ``--na``
    apply) or something else (a frame, Parquet: strip or replace the values there).
    """
    lines = [iv.describe() for iv in invalid]
    text = is_text_file(source)
    hint = _padding_hint(invalid, domain, source, csv, text) or _marker_hint(invalid, domain, text)
    if hint is None:
        first = invalid[0]
        if any(v is None for v, _ in first.values) and not domain[first.column].missing:
            hint = f"declare {first.column!r} with missing: true, or pass --on-invalid drop"
        else:
            hint = ("extend the schema to cover these values, or pass --on-invalid drop to "
                    "drop those rows (reported)")
    return DataError("; ".join(lines), hint=hint)


def _padding_hint(invalid: list[InvalidValues], domain: Domain, source: Any, csv: CsvOptions,
                  text: bool) -> str | None:
    """Hint 1 of :func:`invalid_values_error`: the first column whose values carry surrounding
    spaces and are in the domain once stripped (other padded values, like ``' ?'``, may not be),
    pointing at the delimiter for a text file."""
    for iv in invalid:
        attr = domain[iv.column]
        padded = [v for v, _ in iv.values if isinstance(v, str) and v != v.strip()]
        if not padded:
            continue
        fixed = [v for v, c in zip(padded, attr.encode([v.strip() for v in padded]))
                 if c != INVALID]
        if not fixed:
            continue
        leading = fixed[0][:1].isspace()
        where = f"{'leading' if leading else 'trailing'} spaces ({fixed[0]!r} in {iv.column!r})"
        if not text:
            return (f"values have {where}: strip them before reading (e.g. "
                    "df[col].str.strip())")
        line = first_line(source, csv) or ""
        spaced = [d for d in _DELIMITERS if d.endswith(" ") and d in line]
        guess = spaced[0] if spaced else (
            f"{csv.delimiter} " if csv.delimiter and len(csv.delimiter) == 1 else ", ")
        if not leading:
            return (f"values have {where}: check --delimiter, or strip the spaces from the "
                    "file")
        return (f"values have {where}: the delimiter may be {guess!r} — try --delimiter "
                f"{guess!r} (CsvOptions(delimiter={guess!r})); --on-invalid drop would drop "
                "those rows")
    return None


def _marker_hint(invalid: list[InvalidValues], domain: Domain, text: bool) -> str | None:
    """Hint 2 of :func:`invalid_values_error`: the first invalid value that usually marks a
    missing value, and how to read it as missing (``--na``; ``missing: true`` if undeclared)."""
    for iv in invalid:
        marker = next((v for v, _ in iv.values if isinstance(v, str)
                       and v.strip() in MISSING_MARKERS), None)
        if marker is None:
            continue
        attr = domain[iv.column]
        declare = "" if attr.missing else f" and declare {iv.column!r} with missing: true"
        if text:
            return (f"{marker!r} is not a declared missing marker; if it means missing, pass "
                    f"--na {marker!r} (CsvOptions(na_values=({marker!r},))){declare}")
        return (f"{marker!r} is not a missing value; if it means missing, replace it with "
                f"None (NULL) in the data{declare}")
    return None


#: How a measure value becomes integer units (docs/aggregates.md "Measures"), the same SQL on
#: every engine: x (a DOUBLE) scaled by 10^-e, clamped to [lo, hi] (in units), rounded half
#: away from zero; every engine computes it in IEEE doubles, so all give the same integers.
MEASURE_RULE = ("u(x) = round(clamp(x · 10^-e, lo, hi)), half away from zero, in doubles; a "
                "NULL, NaN, infinite or non-numeric value is refused")


def measure_units_sql(column: str, lo: int, hi: int, exponent: int) -> str:
    """The SQL of :data:`MEASURE_RULE` on the DOUBLE column expression ``column``: an exact
    integer in [lo, hi] (round(clamp(y, lo, hi)) = clamp(round(y), lo, hi) for integer
    bounds)."""
    scaled = (f"({column} * CAST({float(10 ** -exponent)!r} AS DOUBLE))" if exponent <= 0
              else f"({column} / CAST({float(10 ** exponent)!r} AS DOUBLE))")
    return f"CAST(ROUND(LEAST(GREATEST({scaled}, {int(lo)}), {int(hi)})) AS BIGINT)"


#: A row's value of a measure when a person's total is summed (counting people, docs/theory.md
#: §3.14): x·10^-e rounded half away from zero, unclamped (the person's total is clamped),
#: taken as ±2^62 beyond that (in doubles), so that totals of K ≤ 10^6 rows stay exact integers.
PERSON_MEASURE_RULE = ("v(x) = round(clamp(x · 10^-e, -2^62, 2^62)), half away from zero, in "
                       "doubles; a person's term is clamp(Σ v(x), lo, hi) over their kept rows")


def person_units_sql(column: str, exponent: int) -> str:
    """The SQL of :data:`PERSON_MEASURE_RULE`'s v(x) on the DOUBLE column expression
    ``column``: an exact BIGINT (DuckDB and Spark evaluate it alike)."""
    scaled = (f"({column} * CAST({float(10 ** -exponent)!r} AS DOUBLE))" if exponent <= 0
              else f"({column} / CAST({float(10 ** exponent)!r} AS DOUBLE))")
    top = 2**62
    return f"CAST(ROUND(LEAST(GREATEST({scaled}, {-top}), {top})) AS BIGINT)"


def check_measure_columns(columns: list[str], measures: tuple[str, ...], source: Any) -> None:
    """Every measure a workload sums must be a column of the data."""
    for m in measures:
        if m not in columns:
            raise DataError(
                f"SUM/AVG of {m!r}: no column {m!r} in the data (a measure is a data column "
                "outside the schema)",
                where=str(source) if isinstance(source, (str, Path)) else None,
                hint=did_you_mean(m, columns, 0.5) or f"the data have columns {columns}")


def bad_measure_error(column: str, nulls: int, bad: list[tuple[Any, int]],
                      source: Any) -> DataError:
    """A measure column with missing or non-numeric values: refused, never read as 0."""
    where = str(source) if isinstance(source, (str, Path)) else None
    if bad:
        shown = ", ".join(f"{v!r} ({n} rows)" for v, n in bad[:5])
        return DataError(f"measure column {column!r}: values that are not finite numbers: "
                         f"{shown}", where=where,
                         hint="write plain decimal numbers (12.37, a point as the decimal "
                              "separator); fix or remove those rows")
    return DataError(f"measure column {column!r}: {nulls} rows have no value (NULL or empty)",
                     where=where,
                     hint="a missing amount is not silently 0: fill it (e.g. with 0, if that "
                          "is what it means) or drop those rows before answering")
