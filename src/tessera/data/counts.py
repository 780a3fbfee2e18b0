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

Boolean clauses (:class:`~tessera.workload.clause.BooleanClause`: OR / NOT across attributes) are
grouped by scope too; each scope's ``GROUP BY`` on the codes is coarsened to the value classes of
its clauses' atoms and every clause is evaluated on the class representatives, vectorised
(:func:`_count_clauses`).

BDD queries (:class:`~tessera.workload.bdd.BooleanQuery`) are answered on the ``GROUP BY`` of
their variables' codes by their own automaton (:mod:`tessera.data.bdd_counts`).

Structured families (:mod:`tessera.workload.families`: marginals, cube cells, hierarchy levels) are
never expanded: each is ONE aggregation over its attributes (:func:`count_families`) — a
``bincount`` of row-major cell indices built from the code columns in numpy, or a DuckDB
``GROUP BY`` on large tables — and families over the same attributes (the levels of a
hierarchy) or over subsets of a small one (a data cube) share it. The answers stay arrays: one
int64 vector in expanded order (predicate queries, then every family's cells) whose slices are
the per-family arrays (:attr:`CountResult.family_answers`), written as a long table
(``family, cell, answer``) or one wide table per family.

These are exact counts of the sensitive data: for testing, auditing and non-private use.
Everything printed from here is marked NOT PRIVATE.

Why this module is long (about 660 lines): it is one idea, exact answers of a workload on
data, and :class:`CountResult`, the form they are returned and written in (long and wide
tables, with the Arrow label machinery for the families' cells). The per-family aggregation
itself is :mod:`tessera.data.family_counts`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tessera.data.bdd_counts import count_bdd_queries
from tessera.data.family_counts import NUMPY_MAX_ROWS as NUMPY_MAX_ROWS  # re-exported
from tessera.data.family_counts import Method, count_families
from tessera.data.source import encode
from tessera.data.table import (
    CodedTable,
    CsvOptions,
    ExtraColumns,
    InvalidValues,
    OnInvalid,
    ScanProgress,
)
from tessera.errors import QueryError
from tessera.privacy import ONE_ROW, PrivacyUnit
from tessera.schema.domain import Domain
from tessera.workload.bdd import BooleanQuery
from tessera.workload.clause import BooleanClause
from tessera.workload.families import Partition, group_label
from tessera.workload.query import Query
from tessera.workload.value_classes import ValueClasses, value_classes, workload_value_classes
from tessera.workload.workload import Workload

#: Largest boolean block (queries × cells) evaluated at once.
_BLOCK = 1 << 24
#: Rows of the long table built at once (labels are made per batch, never for every cell).
_LONG_BATCH = 1 << 18

NOT_PRIVATE = "NOT PRIVATE: exact answers computed on the sensitive data"
#: The Parquet metadata key that carries :data:`NOT_PRIVATE` with the answers.
PRIVACY_KEY = "tessera.privacy"

#: Columns of the long table: the family's name ("" for a predicate query), the cell's label
#: (the query's name for a predicate query) and the exact answer.
LONG_SCHEMA = pa.schema([("family", pa.string()), ("cell", pa.string()), ("answer", pa.int64())])


@dataclass(frozen=True)
class CountResult:
    """Exact answers aligned with the workload in expanded order — its predicate queries, then
    every cell of every family in row-major order (:meth:`Workload.expanded`) — and what was
    dropped (if the policy allowed).

    ``answers`` is one int64 vector; :attr:`family_answers` are views of its slices shaped like
    the families. The writers stream family by family: :meth:`write_csv`, :meth:`write_parquet`
    (the long table ``family, cell, answer``) and :meth:`write_wide` (one table per family).
    """

    workload: Workload
    answers: np.ndarray
    n_rows: int
    dropped: int
    invalid: tuple[InvalidValues, ...]

    # -- arrays ---------------------------------------------------------------------------------
    @property
    def query_answers(self) -> np.ndarray:
        """The answers of the predicate queries (``workload.queries``)."""
        return self.answers[: len(self.workload)]

    @property
    def family_answers(self) -> tuple[np.ndarray, ...]:
        """One array per family of ``workload.partitions``, shaped ``shape_in(domain)``: entry
        ``[i, j, …]`` counts the rows in group i of the first attribute, j of the second, …
        (views of :attr:`answers`)."""
        d = self.workload.domain
        return tuple(self.answers[cells].reshape(p.shape_in(d))
                     for p, cells in self.workload.family_slices())

    # -- frames ---------------------------------------------------------------------------------
    def to_frame(self) -> pd.DataFrame:
        """``query, answer``: one row per query in expanded order, a cell named as in
        :meth:`Workload.expanded` (``family[attr=value, …]``). For families the long and wide
        frames (:meth:`to_long_frame`, :meth:`to_wide_frames`) are the handier views."""
        if not self.workload.partitions:
            return pd.DataFrame({"query": list(self.workload.names), "answer": self.answers})
        domain, cache = self.workload.domain, _LabelCache()
        names = [pa.array(self.workload.names, pa.string())]
        for p, _ in self.workload.family_slices():
            for lo, hi in _chunks(p.n_cells_in(domain)):
                labels = cache.cell_labels(domain, p, lo, hi)
                names.append(pc.binary_join_element_wise(p.name + "[", labels, "]", ""))
        query = pa.chunked_array(names, pa.string()).to_pandas()
        return pd.DataFrame({"query": query, "answer": self.answers})

    def long_batches(self) -> Iterator[pa.RecordBatch]:
        """The long table (:data:`LONG_SCHEMA`) a batch at a time: the predicate queries first
        (``family`` "", ``cell`` the query's name), then every family's cells in row-major
        order, ``cell`` its label (:meth:`Partition.cell_labels`: ``age=30, sex=F``)."""
        w, domain, cache = self.workload, self.workload.domain, _LabelCache()
        if len(w):
            n = len(w)
            yield pa.record_batch([_repeat("", n), pa.array(w.names, pa.string()),
                                   pa.array(self.query_answers)], schema=LONG_SCHEMA)
        for p, cells in w.family_slices():
            for lo, hi in _chunks(cells.stop - cells.start):
                yield pa.record_batch(
                    [_repeat(p.name, hi - lo), cache.cell_labels(domain, p, lo, hi),
                     pa.array(self.answers[cells.start + lo: cells.start + hi])],
                    schema=LONG_SCHEMA)

    def to_long_frame(self) -> pd.DataFrame:
        """``family, cell, answer``: every query, one row each (see :meth:`long_batches`);
        ``family`` is categorical."""
        table = pa.Table.from_batches(list(self.long_batches()), schema=LONG_SCHEMA)
        frame = table.to_pandas()
        frame["family"] = frame["family"].astype("category")
        return frame

    def to_wide_frames(self) -> tuple[pd.DataFrame, ...]:
        """One frame per family (aligned with ``workload.partitions``): a column per attribute
        holding the cell's group on it (its label, as in :meth:`Partition.cell_labels`) and
        ``answer`` (``answer_`` should an attribute be called ``answer``), one row per cell in
        row-major order. ``frame.attrs`` names the family and carries the NOT PRIVATE mark."""
        domain, cache = self.workload.domain, _LabelCache()
        frames = []
        for p, arr in zip(self.workload.partitions, self.family_answers):
            n = arr.size
            columns: dict[str, Any] = {
                a: cache.axis_values(domain, p, i).take(_axis_index(arr.shape, i, 0, n))
                .to_pandas()
                for i, a in enumerate(p.attributes)
            }
            columns[_answer_column(p)] = arr.reshape(-1)
            frame = pd.DataFrame(columns, index=pd.RangeIndex(n))
            frame.attrs.update(family=p.name, kind=p.kind, privacy=NOT_PRIVATE)
            frames.append(frame)
        return tuple(frames)

    # -- files ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the :data:`NOT_PRIVATE` marker, rows read and dropped, and the predicate
        queries' answers as ``{"query", "answer"}`` records in workload order (``tessera count
        --json``); with families, ``families``: per family its name, kind, attributes, shape
        and ``answers`` flat in row-major order."""
        doc: dict[str, Any] = {
            "privacy": NOT_PRIVATE,
            "rows": self.n_rows,
            "dropped_rows": self.dropped,
            "answers": [
                {"query": q, "answer": int(a)}
                for q, a in zip(self.workload.names, self.query_answers.tolist())
            ],
        }
        if self.workload.partitions:
            doc["families"] = [
                {"name": p.name, "kind": p.kind, "attributes": list(p.attributes),
                 "shape": list(arr.shape), "answers": arr.reshape(-1).tolist()}
                for p, arr in zip(self.workload.partitions, self.family_answers)
            ]
        return doc

    def write_csv(self, target: str | Path | IO[bytes]) -> None:
        """CSV to a path or a binary file: ``query,answer`` (:meth:`to_frame`) for predicate
        queries alone, else the long table ``family,cell,answer`` streamed family by family."""
        if not self.workload.partitions:
            data = self.to_frame().to_csv(index=False).encode()
            if isinstance(target, (str, Path)):
                Path(target).write_bytes(data)
            else:
                target.write(data)
            return
        import pyarrow.csv as pa_csv

        sink = open(target, "wb") if isinstance(target, (str, Path)) else target  # noqa: SIM115
        try:
            sink.write(b"family,cell,answer\n")
            with pa_csv.CSVWriter(sink, LONG_SCHEMA,
                                  write_options=pa_csv.WriteOptions(include_header=False)) as out:
                for batch in self.long_batches():
                    out.write_batch(batch)
        finally:
            if sink is not target:
                sink.close()

    def write_parquet(self, path: str | Path) -> None:
        """Parquet, marked NOT PRIVATE in the file's metadata (key :data:`PRIVACY_KEY`) so the
        mark travels with the answers: :meth:`to_frame` for predicate queries alone, else the
        long table, written family by family."""
        import pyarrow.parquet as pq

        if not self.workload.partitions:
            table = pa.Table.from_pandas(self.to_frame(), preserve_index=False)
            pq.write_table(table.replace_schema_metadata({PRIVACY_KEY: NOT_PRIVATE}), path)
            return
        schema = LONG_SCHEMA.with_metadata({PRIVACY_KEY: NOT_PRIVATE})
        with pq.ParquetWriter(path, schema, use_dictionary=["family"]) as out:
            for table in _row_groups(self.long_batches()):
                out.write_table(table)

    def write_wide(self, directory: str | Path, fmt: Literal["csv", "parquet"] = "csv") -> Path:
        """One table per family (:meth:`to_wide_frames`) in ``directory``, ``NNN-<family>.csv``
        (or ``.parquet``, marked NOT PRIVATE), the predicate queries' ``queries.csv``, and
        ``index.csv`` (``file, family, kind, attributes, cells``). Returns the index's path."""
        if fmt not in ("csv", "parquet"):
            raise ValueError(f"unknown format {fmt!r}: csv or parquet")
        import pyarrow.parquet as pq

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        rows = []
        if len(self.workload):
            predicates = pd.DataFrame({"query": list(self.workload.names),
                                       "answer": self.query_answers})
            name = "queries." + fmt
            _write_frame(predicates, d / name, fmt, pq)
            rows.append((name, "", "queries", "", len(self.workload)))
        width = len(str(max(len(self.workload.partitions) - 1, 0)))
        for j, (p, frame) in enumerate(zip(self.workload.partitions, self.to_wide_frames())):
            name = f"{j:0{width}d}-{_slug(p.name)}.{fmt}"
            _write_frame(frame, d / name, fmt, pq)
            rows.append((name, p.name, p.kind, " ".join(p.attributes), len(frame)))
        index = d / "index.csv"
        pd.DataFrame(rows, columns=["file", "family", "kind", "attributes", "cells"]).to_csv(
            index, index=False)
        return index


def _write_frame(frame: pd.DataFrame, path: Path, fmt: str, pq: Any) -> None:
    if fmt == "csv":
        frame.to_csv(path, index=False)
        return
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table.replace_schema_metadata({PRIVACY_KEY: NOT_PRIVATE}), path)


def _slug(name: str, limit: int = 80) -> str:
    """A family's name as a file name: ``marginal(age,sex)`` → ``marginal_age_sex``; a long
    one keeps its start and its end (a hierarchy's levels), ``index.csv`` its full name."""
    slug = re.sub(r"[^\w.=-]+", "_", name).strip("_") or "family"
    if len(slug) > limit:
        half = (limit - 2) // 2
        slug = slug[:half] + "__" + slug[-half:]
    return slug


def _answer_column(p: Partition) -> str:
    return "answer_" if "answer" in p.attributes else "answer"


def _row_groups(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """Batches gathered into tables of about :data:`_LONG_BATCH` rows (one Parquet row group
    each, rather than one per family)."""
    buffer: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        buffer.append(batch)
        rows += batch.num_rows
        if rows >= _LONG_BATCH:
            yield pa.Table.from_batches(buffer)
            buffer, rows = [], 0
    if buffer:
        yield pa.Table.from_batches(buffer)


def _chunks(n: int) -> Iterator[tuple[int, int]]:
    for lo in range(0, n, _LONG_BATCH):
        yield lo, min(lo + _LONG_BATCH, n)


def _repeat(text: str, n: int) -> pa.Array:
    """``text`` n times, without n Python objects."""
    return pa.array([text], pa.string()).take(np.zeros(n, dtype=np.int32))


def _axis_index(shape: Sequence[int], i: int, lo: int, hi: int) -> np.ndarray:
    """The group index on axis i of the cells lo..hi−1 (row-major order)."""
    stride = int(np.prod(shape[i + 1:], dtype=np.int64))
    return (np.arange(lo, hi, dtype=np.int64) // stride) % shape[i]


class _LabelCache:
    """Group labels per (attribute, groups), shared by the families that cut an attribute the
    same way (every marginal over ``age``)."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, Any], pa.Array] = {}
        self._prefixed: dict[tuple[str, Any], pa.Array] = {}

    def axis_values(self, domain: Domain, p: Partition, i: int) -> pa.Array:
        """The label of every group of attribute i
        (:func:`~tessera.workload.families.group_label`)."""
        key = (p.attributes[i], p.groups[i])
        if key not in self._values:
            a = p.attributes[i]
            self._values[key] = pa.array(
                [group_label(domain, a, g) for g in p.axis_groups(domain, i)], pa.string())
        return self._values[key]

    def cell_labels(self, domain: Domain, p: Partition, lo: int, hi: int) -> pa.Array:
        """The labels of cells lo..hi−1 of ``p``, as :meth:`Partition.cell_labels` spells
        them, built in Arrow: per axis the ``attr=value`` texts gathered, then joined."""
        shape = p.shape_in(domain)
        if not shape:
            return pa.array([""] * (hi - lo), pa.string())
        parts = []
        for i, a in enumerate(p.attributes):
            key = (a, p.groups[i])
            if key not in self._prefixed:
                self._prefixed[key] = pc.binary_join_element_wise(
                    a + "=", self.axis_values(domain, p, i), "")
            parts.append(self._prefixed[key].take(_axis_index(shape, i, lo, hi)))
        if len(parts) == 1:
            return parts[0]
        return pc.binary_join_element_wise(*parts, ", ")


def count(
    data: Any,
    workload: Workload,
    *,
    on_invalid: OnInvalid = "error",
    csv: CsvOptions = CsvOptions(),
    table: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    method: Method = "auto",
    scan_progress: ScanProgress | None = None,
    unit: PrivacyUnit = ONE_ROW,
    extra_columns: ExtraColumns = "error",
) -> CountResult:
    """Exact answers of ``workload`` on ``data`` (path, DataFrame, Arrow table, DuckDB relation;
    a Spark DataFrame or :class:`~tessera.data.spark_source.SparkSource` counts on Spark, only the
    aggregates leaving it): its predicate queries and every cell of its families
    (:func:`count_encoded`).

    ``progress(done, total)`` is called after each scope group of predicate queries and after
    each family; ``scan_progress(fraction)`` while the data are read and coded (DuckDB);
    ``method`` chooses how families are aggregated (:data:`Method`). ``on_invalid`` and
    ``extra_columns``: what to do with values outside the schema and with columns it does not
    declare (:func:`tessera.data.source.encode`); ``unit``: a person's rows are bounded first,
    as a release at that unit counts them.
    """
    encoded = encode(data, workload.domain, on_invalid=on_invalid, csv=csv, table=table,
                     scan_progress=scan_progress, unit=unit, extra_columns=extra_columns)
    answers = count_encoded(encoded, workload, progress=progress, method=method)
    return CountResult(workload, answers, encoded.n_rows, encoded.dropped, tuple(encoded.invalid))


def count_encoded(
    table: CodedTable,
    workload: Workload,
    *,
    max_cells: int = 1 << 19,
    progress: Callable[[int, int], None] | None = None,
    method: Method = "auto",
) -> np.ndarray:
    """Answers on an already encoded table (see :func:`tessera.data.source.encode`), one int64 per
    query in expanded order: the predicate queries, then every family's cells.

    ``max_cells`` bounds the rows one ``GROUP BY`` of predicate queries may return; scopes
    whose joint marginal fits are answered from one shared ``GROUP BY`` and projected in numpy.
    Families are counted by :func:`count_families` (``method``). A table encoded for a unit
    that counts people (its privacy ids kept) is counted per person instead, once per query
    (:func:`tessera.data.people_counts.count_people`).
    """
    if getattr(table, "person_ids", False):  # each person once per query (COUNT DISTINCT)
        from tessera.data.people_counts import count_people

        return count_people(table, workload)
    if workload.range_families is not None:
        return _count_ranges(table, workload, method)
    answers = np.zeros(workload.n_queries, dtype=np.int64)
    groups: dict[tuple[str, ...], list[int]] = {}  # predicate queries by scope
    clause_groups: dict[tuple[str, ...], list[int]] = {}  # Boolean clauses by scope
    bdds: list[int] = []  # BDD queries (tessera.data.bdd_counts)
    for scope, idx in workload.scopes().items():
        for i in idx:
            q = workload.queries[i]
            if isinstance(q, BooleanQuery):
                bdds.append(i)
            elif isinstance(q, BooleanClause):
                clause_groups.setdefault(scope, []).append(i)
            elif isinstance(q, Query):
                groups.setdefault(scope, []).append(i)
            else:
                raise QueryError(f"query {workload.names[i]!r} is a {type(q).__name__}, which "
                                 "cannot be counted",
                                 hint="a workload holds predicate queries, Boolean clauses "
                                      "and BDD queries")
    n_groups = len(groups) + len(clause_groups) + bool(bdds)
    total = n_groups + len(workload.partitions)
    report = progress if progress is not None else (lambda done, total: None)
    if groups:
        _count_queries(table, workload, groups, answers[: len(workload)], max_cells,
                       lambda done: report(done, total))
    if clause_groups:
        _count_clauses(table, workload, clause_groups, answers[: len(workload)],
                       lambda done: report(len(groups) + done, total))
    if bdds:
        count_bdd_queries(table, workload, bdds, answers[: len(workload)], max_cells=max_cells)
        report(n_groups, total)
    if workload.partitions:
        count_families(table, workload.partitions,
                       [answers[cells] for _, cells in workload.family_slices()],
                       method=method, progress=lambda done, _: report(n_groups + done, total))
    return answers


def _count_ranges(table: CodedTable, workload: Workload, method: Method) -> np.ndarray:
    """Lazy range families (:mod:`tessera.workload.ranges`): the histogram over each family's
    attributes (one marginal), then every range by prefix sums — no query objects."""
    fams = workload.range_families
    assert fams is not None
    marginals = [Partition.marginal(workload.domain, f.attributes) for f in fams]
    hists = [np.zeros(p.n_cells_in(workload.domain), dtype=np.int64) for p in marginals]
    count_families(table, marginals, hists, method=method)
    return np.concatenate([f.answers(h.reshape(f.sizes)) for f, h in zip(fams, hists)]
                          ).astype(np.int64)


def _count_clauses(
    table: CodedTable,
    workload: Workload,
    groups: dict[tuple[str, ...], list[int]],
    answers: np.ndarray,
    progress: Callable[[int], None],
) -> None:
    """The Boolean clauses' answers, one scope at a time: the scope's marginal (a ``GROUP BY``
    on the codes, at most one cell per row), its codes coarsened to the value classes of the
    scope's clauses (every atom is constant on a class) and the coinciding cells summed; then
    each clause is evaluated on the class representatives of every cell, vectorised, and its
    mask dotted with the counts. Exact: a clause's value at a code is its value at the code's
    class representative."""
    domain = workload.domain
    for done, (scope, idx) in enumerate(groups.items(), start=1):
        clauses = [workload.queries[i] for i in idx]
        if not scope:  # constant clauses
            answers[idx] = [table.n_rows if c.is_tautology() else 0 for c in clauses]
            progress(done)
            continue
        codes, counts = table.group_by(scope, "coded")
        lookups, columns, reps, shape = [], [], [], []
        for name, col in zip(scope, codes):
            covs = [p.coverage for c in clauses for p in c.atoms_on(name)]
            vc = value_classes(domain[name].size, covs)
            columns.append(vc.class_of(np.asarray(col, dtype=np.int64)))
            lookups.append(np.arange(vc.n_classes, dtype=np.int64))
            reps.append(vc.representative)
            shape.append(vc.n_classes)
        cells, summed = _project(lookups, columns, counts, shape)
        points = {name: rep[cell] for name, rep, cell in zip(scope, reps, cells)}
        weights = summed.astype(np.int64)
        for i, c in zip(idx, clauses):
            answers[i] = int(weights[c.evaluate_columns(points)].sum())
        progress(done)


def _count_queries(
    table: CodedTable,
    workload: Workload,
    groups: dict[tuple[str, ...], list[int]],
    answers: np.ndarray,
    max_cells: int,
    progress: Callable[[int], None],
) -> None:
    """The predicate queries' answers (module docstring, steps 1–3), written into ``answers``."""
    classes = segment_classes(workload)
    n_classes = {name: vc.n_classes for name, vc in classes.items()}
    batches = _pack(list(groups), n_classes, table.n_rows, max_cells)
    # When the GROUP BY on the codes themselves already fits, its codes are mapped to classes
    # in numpy (SegmentClasses.class_of, as in coarsen) instead of materialising a coarsened
    # copy of the table; _project sums the class tuples that coincide.
    kinds = ["coded" if _code_cells(table, union) <= max_cells else "classed"
             for union, _ in batches]
    if "classed" in kinds:  # once, shared by every large batch
        table.coarsen(
            {
                name: vc.class_of(table.present[workload.domain.index(name)])
                for name, vc in classes.items()
            }
        )
    done = 0
    # one GROUP BY per batch, fetched lazily (Spark runs several in one job)
    results = table.group_by_many([(union, kind) for (union, _), kind in zip(batches, kinds)])
    for (union, scopes), kind, (cells, counts) in zip(batches, kinds, results):
        if kind == "coded":
            cells = [classes[name].class_of(c) for name, c in zip(union, cells)]
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
            progress(done)


def _code_cells(table: CodedTable, names: Sequence[str]) -> float:
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
    of every query's predicate (built by :mod:`tessera.workload.value_classes`, one difference array
    over the span ends of the attribute's distinct predicates)."""
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
