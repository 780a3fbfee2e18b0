"""Exact (NOT private) answers q(D) = Σ_{x∈D} q(x) of a workload on real data.

Strategy (never one SQL query per workload query):

1. **Value classes.** On each attribute, every predicate boundary of the workload cuts the codes
   into classes on which every predicate is constant (an integer column with 20,000 distinct
   values becomes the few hundred classes the workload distinguishes). The encoded table is
   coarsened to class indices once, inside DuckDB.
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
from typing import Any

import numpy as np
import pandas as pd

from tessera.data import CsvOptions, EncodedTable, InvalidValues, OnInvalid, encode
from tessera.query import Query
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
    global_bp = breakpoints(workload.queries)
    table.coarsen(
        {
            name: np.searchsorted(bp, table.present[workload.domain.index(name)], side="right")
            for name, bp in global_bp.items()
        }
    )
    n_classes = {name: len(bp) + 1 for name, bp in global_bp.items()}
    batches = _pack(list(groups), n_classes, table.n_rows, max_cells)
    done = 0
    for union, scopes in batches:
        cells, counts = table.group_by(union, "classed")
        column = dict(zip(union, cells))
        for scope in scopes:
            idx = groups[scope]
            queries = [workload.queries[i] for i in idx]
            local = [value_classes(queries, name) for name in scope]
            # Global class j starts at code global_bp[j-1]; no local boundary falls inside it.
            starts = {name: np.concatenate([[-1], global_bp[name]]) for name in scope}
            lookups = [
                np.searchsorted(vc.breakpoints, starts[name], side="right")
                for name, vc in zip(scope, local)
            ]
            sub_cells, sub_counts = _project(
                lookups, [column[name] for name in scope], counts, [vc.n_classes for vc in local]
            )
            answers[idx] = answer_on_marginal(local, sub_cells, sub_counts, len(queries))
            done += 1
            if progress is not None:
                progress(done, len(groups))
    return answers


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
    key = (lookups[0] * strides[0])[columns[0]]
    for lk, col, st in zip(lookups[1:], columns[1:], strides[1:]):
        key += (lk * st)[col]
    if size <= max(4 * len(counts), 1 << 16):
        grid = np.bincount(key, weights=counts, minlength=int(size))
        keys = np.flatnonzero(grid)
        summed = grid[keys]
    else:
        keys, inverse = np.unique(key, return_inverse=True)
        summed = np.bincount(inverse.ravel(), weights=counts, minlength=len(keys))
    return list(np.unravel_index(keys, shape)), summed.astype(np.int64)


@dataclass(frozen=True)
class ValueClasses:
    """The codes of one attribute cut at every predicate boundary of a group of queries.

    Class j holds the codes in [breakpoints[j-1], breakpoints[j]) (class 0: below the first
    breakpoint), so every query's predicate is constant on a class: ``member[q, j]`` says
    whether query q's predicate contains class j.
    """

    breakpoints: np.ndarray
    member: np.ndarray  # (n_queries, n_classes) bool

    @property
    def n_classes(self) -> int:
        return len(self.breakpoints) + 1


def value_classes(queries: Sequence[Query], name: str) -> ValueClasses:
    """Value classes of attribute ``name`` for ``queries`` (all constraining ``name``).

    A span [lo, hi) of a predicate covers exactly the classes between its two boundaries, so
    the membership matrix is built from all spans at once with a difference array.
    """
    q_of_span, spans = [], []
    for qi, q in enumerate(queries):
        cov = q.predicate(name)
        if cov is None:
            raise ValueError(f"query {qi} does not constrain {name!r}")
        spans.extend(cov.spans)
        q_of_span.extend([qi] * cov.n_spans)
    span_arr = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    bp = np.unique(span_arr)
    # class j+1 starts at bp[j]: a span covers classes pos(lo)+1 .. pos(hi)
    first = np.searchsorted(bp, span_arr[:, 0]) + 1
    last = np.searchsorted(bp, span_arr[:, 1]) + 1
    width = len(bp) + 2
    rows = np.asarray(q_of_span, dtype=np.int64) * width
    size = len(queries) * width
    diff = np.bincount(rows + first, minlength=size) - np.bincount(rows + last, minlength=size)
    member = np.cumsum(diff.reshape(len(queries), width), axis=1)[:, : len(bp) + 1] > 0
    return ValueClasses(bp, member)


def breakpoints(queries: Sequence[Query]) -> dict[str, np.ndarray]:
    """Global value classes: every predicate boundary on each constrained attribute (sorted)."""
    bounds: dict[str, list[tuple[int, int]]] = {}
    for q in queries:
        for p in q.predicates:
            bounds.setdefault(p.attribute, []).extend(p.coverage.spans)
    return {name: np.unique(np.asarray(b, dtype=np.int64)) for name, b in bounds.items()}


def answer_on_marginal(
    classes: Sequence[ValueClasses],
    cells: Sequence[np.ndarray],
    counts: np.ndarray,
    n_queries: int,
) -> np.ndarray:
    """Σ_cells count · ∏_a member_a[q, class_a(cell)] for every query of one scope group."""
    if not classes:
        return np.full(n_queries, int(counts.sum()), dtype=np.int64)
    out = np.empty(n_queries, dtype=np.int64)
    weights = counts.astype(np.float64)
    step = max(1, _BLOCK // max(1, len(weights)))
    for lo in range(0, n_queries, step):
        hi = min(lo + step, n_queries)
        mask = classes[0].member[lo:hi, cells[0]]
        for vc, cell in zip(classes[1:], cells[1:]):
            mask &= vc.member[lo:hi, cell]
        out[lo:hi] = np.rint(mask @ weights).astype(np.int64)
    return out
