"""Validation of data against the public domain, shared by every engine (docs/theory.md §1).

The data are never trusted to define the domain: every value of every schema column is checked
against its declared attribute, encoded once by :meth:`Attribute.encode` (the single rule for
every value), and values outside the domain are an error naming the column, the values and how
many rows hold them — unless the caller chose the explicit ``drop`` policy. An engine groups each
column's distinct values its own way (DuckDB, Spark) and hands them to :func:`column_codes`, so
every engine reports the same errors in the same order and applies the same policies.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tessera.data.table import CsvOptions, InvalidValues
from tessera.errors import DataError, did_you_mean
from tessera.schema.domain import INVALID, Attribute, Domain


def check_columns(columns: list[str], domain: Domain, source: Any, csv: CsvOptions) -> None:
    """Step 2 of :func:`encode`: every schema attribute must be a column of the data.

    Without a header the columns are matched to the attributes by position, so their numbers
    must agree. A missing column is named with its closest spelling in the data, or, when no
    attribute matches but the counts agree, with the hint that the file has no header row.
    """
    if csv.header is False and len(columns) != len(domain):
        raise DataError(
            f"the data have {len(columns)} columns but the schema declares {len(domain)}",
            hint="without a header the columns are matched to the schema's attributes in order",
        )
    absent = [name for name in domain.names if name not in columns]
    if absent:
        headerless = (
            isinstance(source, (str, Path))
            and csv.header is not False
            and len(absent) == len(domain)
            and len(columns) == len(domain)
        )
        raise DataError(
            f"column {absent[0]!r} of the schema is not in the data"
            + (f" ({len(absent) - 1} more missing)" if len(absent) > 1 else ""),
            hint="the file seems to have no header row: pass --no-header (CsvOptions(header=False))"
            if headerless
            else did_you_mean(absent[0], columns, 0.5) or f"the data have columns {columns}",
        )



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


def invalid_values_error(invalid: list[InvalidValues], domain: Domain) -> DataError:
    """Step 4 of :func:`encode` under ``on_invalid='error'``: one error naming every column with
    values outside its attribute, with a hint for the most likely cause of the first one
    (undeclared NULLs, or a ``', '`` separator that left spaces around the values)."""
    lines = [iv.describe() for iv in invalid]
    first = invalid[0]
    attr = domain[first.column]
    hint = (
        "extend the schema to cover these values, declare missing: true for NULLs, "
        "or pass --on-invalid drop to drop those rows (reported)"
    )
    if any(v is None for v, _ in first.values) and not attr.missing:
        hint = f"declare {first.column!r} with missing: true, or pass --on-invalid drop"
    padded = [v for v, _ in first.values if isinstance(v, str) and v != v.strip()]
    if padded and (attr.encode([v.strip() for v in padded]) != INVALID).all():
        hint = (
            f"values of {first.column!r} carry surrounding spaces ({padded[0]!r}): "
            "is the separator ', '? pass --delimiter ', ' (CsvOptions(delimiter=', '))"
        )
    return DataError("; ".join(lines), hint=hint)

