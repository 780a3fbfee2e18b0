"""Exact (NOT private) answers q(D) = Σ_{x∈D} q(x) of a workload on real data.

Strategy (never one SQL query per workload query):

1. **Value classes.** On each attribute, every predicate boundary of the workload cuts the codes
   into classes on which every predicate is constant (fnlwgt's ~20,000 distinct values in UCI
   Adult become the ~2,600 classes 10,000 random queries distinguish). When a ``GROUP BY`` on
   the codes already fits ``max_cells`` (small data) its cells are mapped to classes in numpy;
   otherwise the encoded table is coarsened to class indices once, inside DuckDB.
2. **Marginals by GROUP BY.** Queries are grouped by scope (their constrained attributes);
   scopes are packed into shared ``GROUP BY`` queries whose result stays under ``max_cells``
   cells (on small data one GROUP BY serves every scope), so the engine returns marginals, never
   rows.
3. **Evaluation in numpy.** Each scope's marginal is projected from its GROUP BY onto the
   classes its own queries distinguish, and every query of the scope is evaluated on it at once:
   per attribute the membership of each class, gathered per cell, AND-ed, dotted with the counts.

These are exact counts of the sensitive data: for testing, auditing and non-private use.
Everything printed from here is marked NOT PRIVATE.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tessera.data import CsvOptions, EncodedTable, InvalidValues, OnInvalid, encode
from tessera.value_classes import ValueClasses, workload_value_classes
from tessera.workload import Workload

#: Largest boolean block (queries × cells) evaluated at once.
_BLOCK = 1 << 24

NOT_PRIVATE = "NOT PRIVATE: exact answers computed on the sensitive data"


@dataclass(frozen=True)
class CountResult:
    """Exact answers aligned with the workload, and what was dropped (if the policy allowed)."""

    workload: Workload
    answers: np.ndarray
    n_rows: int
    dropped: int
    invalid: tuple[InvalidValues, ...]

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame({"query": list(self.workload.names), "answer": self.answers})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the :data:`NOT_PRIVATE` marker, rows read and dropped, and the answers as
        ``{"query", "answer"}`` records in workload order (``tessera count --json``)."""
        return {
            "privacy": NOT_PRIVATE,
            "rows": self.n_rows,
            "dropped_rows": self.dropped,
            "answers": [
                {"query": q, "answer": int(a)} for q, a in zip(self.workload.names, self.answers)
            ],
        }

    def write_parquet(self, path: str | Path) -> None:
        """Write :meth:`to_frame` as Parquet, marked NOT PRIVATE in the file's metadata
        (key ``tessera.privacy``) so the mark travels with the answers."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pandas(self.to_frame(), preserve_index=False)
        pq.write_table(table.replace_schema_metadata({"tessera.privacy": NOT_PRIVATE}), path)


def count(
    data: Any,
    workload: Workload,
    *,
    on_invalid: OnInvalid = "error",
    csv: CsvOptions = CsvOptions(),
    table: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> CountResult:
    """Exact answers of ``workload`` on ``data`` (path, DataFrame, Arrow table, DuckDB relation).

    ``progress(done, total)`` is called after each scope group.
    """
    encoded = encode(data, workload.domain, on_invalid=on_invalid, csv=csv, table=table)
    answers = count_encoded(encoded, workload, progress=progress)
    return CountResult(workload, answers, encoded.n_rows, encoded.dropped, tuple(encoded.invalid))


def count_encoded(
    table: EncodedTable,
    workload: Workload,
    *,
    max_cells: int = 1 << 19,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Answers on an already encoded table (see :func:`tessera.data.encode`).

    ``max_cells`` bounds the rows one ``GROUP BY`` may return; scopes whose joint marginal
    fits are answered from one shared ``GROUP BY`` and projected in numpy.
    """
    answers = np.zeros(len(workload), dtype=np.int64)
    groups = workload.scopes()
    classes = segment_classes(workload)
    n_classes = {name: vc.n_classes for name, vc in classes.items()}
    batches = _pack(list(groups), n_classes, table.n_rows, max_cells)
    coarsened = False
    done = 0
    for union, scopes in batches:
        if _code_cells(table, union) <= max_cells:
            # The GROUP BY on the codes themselves already fits: map codes to classes in numpy
            # (SegmentClasses.class_of, as in coarsen) instead of materialising
            # a coarsened copy of the table; _project sums the class tuples that coincide.
            codes, counts = table.group_by(union, "coded")
            cells = [classes[name].class_of(c) for name, c in zip(union, codes)]
        else:
            if not coarsened:  # once, shared by every large batch
                table.coarsen(
                    {
                        name: vc.class_of(table.present[workload.domain.index(name)])
                        for name, vc in classes.items()
                    }
                )
                coarsened = True
            cells, counts = table.group_by(union, "classed")
        # intp once per batch: every gather below would otherwise convert the indices again
        column = {name: np.asarray(c, dtype=np.intp) for name, c in zip(union, cells)}
        for scope in scopes:
            idx = np.asarray(groups[scope], dtype=np.int64)
            local = [classes[name].restrict(idx) for name in scope]
            sub_cells, sub_counts = _project(
                [lookup for lookup, _ in local],
                [column[name] for name in scope],
                counts,
                [member.shape[1] for _, member in local],
            )
            answers[idx] = answer_on_marginal(
                [member for _, member in local], sub_cells, sub_counts, len(idx)
            )
            done += 1
            if progress is not None:
                progress(done, len(groups))
    return answers


def _code_cells(table: EncodedTable, names: Sequence[str]) -> float:
    """Upper bound on the cells of a ``GROUP BY`` over the codes of ``names``:
    min(n_rows, ∏ occurring codes)."""
    sizes = [len(table.present[table.domain.index(n)]) for n in names]
    return min(float(table.n_rows), float(np.prod(sizes, dtype=float)))


def _pack(
    scopes: list[tuple[str, ...]], n_classes: dict[str, int], n_rows: int, max_cells: int
) -> list[tuple[tuple[str, ...], list[tuple[str, ...]]]]:
    """Greedily pack scopes into shared GROUP BYs whose marginal has ≤ max_cells cells.

    A marginal has at most min(n_rows, ∏ classes) cells; a scope too large alone gets its own.
    """

    def cells(attrs: set[str]) -> float:
        return min(float(n_rows), float(np.prod([n_classes[a] for a in attrs], dtype=float)))

    batches: list[tuple[set[str], list[tuple[str, ...]]]] = []
    for scope in sorted(scopes, key=len, reverse=True):
        for attrs, members in batches:
            if cells(attrs | set(scope)) <= max_cells:
                attrs.update(scope)
                members.append(scope)
                break
        else:
            batches.append((set(scope), [scope]))
    order = {name: i for i, name in enumerate(n_classes)}
    return [(tuple(sorted(a, key=order.__getitem__)), m) for a, m in batches]


def _project(
    lookups: list[np.ndarray], columns: list[np.ndarray], counts: np.ndarray, shape: list[int]
) -> tuple[list[np.ndarray], np.ndarray]:
    """The marginal on a scope: cell i has class ``lookups[a][columns[a][i]]`` on attribute a;
    cells that coincide are summed. Returns the occurring class tuples and their counts."""
    if not columns:
        return [], np.array([counts.sum()], dtype=np.int64)
    size = float(np.prod(np.asarray(shape, dtype=float)))
    if size >= 2.0**62:  # too many class tuples for one int64 key
        cells = np.stack([lk[col] for lk, col in zip(lookups, columns)], axis=1)
        rows, inverse = np.unique(cells, axis=0, return_inverse=True)
        summed = np.bincount(inverse.ravel(), weights=counts, minlength=len(rows))
        return list(rows.T), summed.astype(np.int64)
    # row-major key with the strides folded into the (small) lookup tables
    strides = np.cumprod([1, *shape[:0:-1]])[::-1]
    key = np.take(lookups[0] * strides[0], columns[0])
    for lk, col, st in zip(lookups[1:], columns[1:], strides[1:]):
        key += np.take(lk * st, col)
    if size <= max(4 * len(counts), 1 << 16):
        grid = np.bincount(key, weights=counts, minlength=int(size))
        keys = np.flatnonzero(grid)
        summed = grid[keys]
    else:
        keys, inverse = np.unique(key, return_inverse=True)
        summed = np.bincount(inverse.ravel(), weights=counts, minlength=len(keys))
    return list(np.unravel_index(keys, shape)), summed.astype(np.int64)


@dataclass(frozen=True)
class SegmentClasses:
    """The codes of one attribute cut at every predicate boundary of the workload.

    ``classes`` are the elementary segments between the breakpoints
    (:func:`~tessera.value_classes.value_classes` with ``merge=False``), so every predicate is
    constant on a class. They are deliberately not merged into the coarsest value classes:
    segments are adjacent in code order, so a scope's own queries coarsen them by merging
    neighbours (:meth:`restrict`, one comparison of adjacent columns), where merged classes
    would need a ``np.unique`` over the columns of every scope. ``row[i]`` is the row of
    ``classes.distinct_membership`` holding workload query i's predicate (-1 if it does not
    constrain the attribute).
    """

    classes: ValueClasses
    row: np.ndarray  # (workload size,) int

    @property
    def n_classes(self) -> int:
        return self.classes.n_classes

    def class_of(self, codes: np.ndarray) -> np.ndarray:
        """The class (segment) of each code."""
        return self.classes.class_of(codes)

    def restrict(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Coarser classes for a subset of queries: (global class -> local class, membership).

        Adjacent global classes that no query of the subset tells apart merge, so a scope's
        marginal has only the cells its own queries distinguish.
        """
        sub = self.classes.distinct_membership[self.row[queries]]
        change = np.any(sub[:, 1:] != sub[:, :-1], axis=0)
        lookup = np.concatenate(([0], np.cumsum(change)))
        firsts = np.flatnonzero(np.concatenate(([True], change)))
        return lookup, sub[:, firsts]


def segment_classes(workload: Workload) -> dict[str, SegmentClasses]:
    """The segment classes of every constrained attribute (domain order), with the membership
    of every query's predicate (built by :mod:`tessera.value_classes`, one difference array over
    the span ends of the attribute's distinct predicates)."""
    out = {}
    for a in workload_value_classes(workload.domain, workload.queries, merge=False):
        row = np.full(len(workload), -1, dtype=np.int64)
        row[a.queries] = a.classes.predicate_row
        out[a.name] = SegmentClasses(a.classes, row)
    return out


def answer_on_marginal(
    members: Sequence[np.ndarray],
    cells: Sequence[np.ndarray],
    counts: np.ndarray,
    n_queries: int,
) -> np.ndarray:
    """Σ_cells count · ∏_a member_a[q, class_a(cell)] for every query of one scope group."""
    if not members:
        return np.full(n_queries, int(counts.sum()), dtype=np.int64)
    out = np.empty(n_queries, dtype=np.int64)
    weights = counts.astype(np.float64)
    step = max(1, _BLOCK // max(1, len(weights)))
    for lo in range(0, n_queries, step):
        hi = min(lo + step, n_queries)
        mask = members[0][lo:hi, cells[0]]
        for member, cell in zip(members[1:], cells[1:]):
            mask &= member[lo:hi, cell]
        out[lo:hi] = np.rint(mask @ weights).astype(np.int64)
    return out
