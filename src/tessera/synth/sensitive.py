"""The sensitive input of a synthesis run: exact counts q_f(X) and the evaluator of f(x) on rows.

:class:`SensitiveCounts` holds the exact counts of every query and n (SENSITIVE, NOT PRIVATE:
only the private steps of :mod:`tessera.synth.rounds` read them, no record holds them);
:func:`sensitive_counts` makes them from data (one aggregation per scope through
:func:`tessera.data.counts.count`, or rows of codes); :class:`Evaluator` computes f(x) for every
query on rows of codes (a Boolean query's automaton compiled once), used on the synthetic side
(f(S_t) of sampled rows) and on rows of codes. :func:`query_functions` is the one place a
workload or a list of functions becomes the engine's functions and their names.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.data.counts import count
from tessera.data.source import encode
from tessera.data.table import ExtraColumns, OnInvalid
from tessera.engine.bdd import BooleanQuery
from tessera.engine.factors import Function
from tessera.engine.model import workload_functions
from tessera.errors import DataError, QueryError
from tessera.privacy import ONE_ROW, PrivacyUnit
from tessera.schema.domain import Domain
from tessera.workload.query import Query
from tessera.workload.workload import Workload

__all__ = [
    "Evaluator",
    "ROW_BLOCK",
    "SensitiveCounts",
    "check_codes",
    "query_functions",
    "sensitive_counts",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
#: Entries (rows × queries) of one block of :meth:`Evaluator.counts`'s all-queries product.
TABLE_ENTRIES = 1 << 23
#: Rows evaluated at once by :meth:`Evaluator.counts` for selected queries.
ROW_BLOCK = 1 << 16


# -- the sensitive input ------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class SensitiveCounts:
    """The exact counts q_f(X) of every query and the number of rows n: SENSITIVE, NOT PRIVATE.

    Only the private steps read them; no record ever holds them."""

    counts: IntArray
    n: int

    def __post_init__(self) -> None:
        c = np.asarray(self.counts)
        if c.ndim != 1 or not (np.issubdtype(c.dtype, np.integer) or c.size == 0):
            raise DataError("counts must be a vector of integers")
        if isinstance(self.n, bool) or int(self.n) != self.n or self.n < 1:
            raise DataError(f"the number of rows must be a positive integer, got {self.n!r}")
        if c.size and (c.min() < 0 or c.max() > self.n):
            raise DataError("a count lies outside [0, n]")
        object.__setattr__(self, "counts", np.ascontiguousarray(c, dtype=np.int64))
        object.__setattr__(self, "n", int(self.n))


def query_functions(domain: Domain, queries: Sequence[Function] | Workload,
               names: Sequence[str] | None = None,
               ) -> tuple[tuple[Function, ...], tuple[str, ...]]:
    if isinstance(queries, Workload):
        if queries.domain != domain:
            raise QueryError("the workload is over another domain")
        functions, own = workload_functions(queries)
    else:
        functions, own = tuple(queries), tuple(f"q{j}" for j in range(len(queries)))
    if not functions:
        raise QueryError("the workload has no queries")
    out = own if names is None else tuple(names)
    if len(out) != len(functions):
        raise QueryError(f"{len(out)} names for {len(functions)} queries")
    return functions, out


class Evaluator:
    """f(x) for every query on rows of codes, each query compiled once (a Boolean query's
    automaton is built once, not per call)."""

    def __init__(self, domain: Domain, functions: Sequence[Function]) -> None:
        self.domain = domain
        self.functions = tuple(functions)
        self._compiled = [self._compile(f) for f in self.functions]

    def _compile(self, f: Function) -> Callable[[np.ndarray], np.ndarray]:
        domain = self.domain
        if isinstance(f, BooleanQuery):
            order = f.scope
            if not order:
                value = f.node == f.manager.true
                return lambda codes: np.full(codes.shape[0], value, dtype=bool)
            layers = f.cofactor_layers(order, max_states=1 << 30)
            assert layers is not None
            transitions, accept = layers
            columns = [domain.index(n) for n in order]

            def run(codes: np.ndarray) -> np.ndarray:
                state = np.zeros(codes.shape[0], dtype=np.int64)
                for col, table in zip(columns, transitions, strict=True):
                    state = table[state, codes[:, col]]
                return accept[state]

            return run
        return lambda codes: np.asarray(f.evaluate(domain, codes), dtype=bool)

    @functools.cached_property
    def incidence(self) -> tuple[IntArray, npt.NDArray[np.bool_], IntArray, Any, IntArray,
                                 IntArray]:
        """The conjunctions' predicates, deduplicated: for D distinct (attribute, coverage)
        pairs their attributes and look-up tables (flattened, with offsets), the sparse D × Q
        incidence of predicates in queries, each query's number of predicates, and which
        queries these are (the rest: tautologies and other functions)."""
        import scipy.sparse as sp

        index: dict[tuple[int, Any], int] = {}
        attrs: list[int] = []
        tables: list[npt.NDArray[np.bool_]] = []
        rows: list[int] = []
        cols: list[int] = []
        queries: list[int] = []
        npred: list[int] = []
        for j, f in enumerate(self.functions):
            if not isinstance(f, Query) or not f.predicates:
                continue
            q = len(queries)
            queries.append(j)
            npred.append(len(f.predicates))
            for pred in f.predicates:
                i = self.domain.index(pred.attribute)
                key = (i, pred.coverage.spans)
                d = index.get(key)
                if d is None:
                    d = index[key] = len(attrs)
                    attrs.append(i)
                    tables.append(np.asarray(pred.coverage.contains_array(
                        np.arange(self.domain.sizes[i])), dtype=bool))
                rows.append(d)
                cols.append(q)
        sizes = [len(x) for x in tables]
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        flat = np.concatenate(tables) if tables else np.zeros(0, dtype=bool)
        inc = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)),
                            shape=(len(attrs), len(queries)))
        return (np.asarray(attrs, dtype=np.int64), flat, offsets, inc,
                np.asarray(npred, dtype=np.float32), np.asarray(queries, dtype=np.int64))

    def counts(self, codes: npt.ArrayLike, which: npt.ArrayLike | None = None) -> IntArray:
        """Σ_rows f(x) for every query (all at once: :meth:`_all_counts`) or for the queries
        ``which`` (one by one), in blocks of rows."""
        codes = np.asarray(codes)
        if which is None and self.functions:
            return self._all_counts(codes)
        idx = range(len(self.functions)) if which is None else np.atleast_1d(which)
        out = np.zeros(len(idx), dtype=np.int64)
        for lo in range(0, codes.shape[0], ROW_BLOCK):
            block = codes[lo: lo + ROW_BLOCK]
            for k, j in enumerate(idx):
                out[k] += int(np.count_nonzero(self._compiled[int(j)](block)))
        return out

    def _all_counts(self, codes: np.ndarray) -> IntArray:
        """Every query's count at once. A conjunction holds on a row iff all its predicates
        do: with M the rows × D matrix of the distinct predicates' values (table look-ups)
        and B their D × Q incidence in the queries, (M B)[r, q] is the number of q's
        predicates row r satisfies, and count_q = #{r : (M B)[r, q] = |q|} — one sparse
        product per block of rows instead of a look-up per (query, predicate). A query
        without predicates counts every row; other functions (clauses, BDDs) one by one."""
        attrs, flat, offsets, inc, npred, queries = self.incidence
        out = np.zeros(len(self.functions), dtype=np.int64)
        n = codes.shape[0]
        if len(queries):
            block = max(16, TABLE_ENTRIES // max(len(queries), 1))
            for lo in range(0, n, block):
                part = codes[lo: lo + block].astype(np.int64, copy=False)
                member = flat[offsets + part[:, attrs]].astype(np.float32)  # (rows, D)
                satisfied = np.asarray((inc.T @ member.T).T)  # (rows, Q), exact small ints
                out[queries] += (satisfied == npred).sum(axis=0, dtype=np.int64)
        done = np.zeros(len(self.functions), dtype=bool)
        done[queries] = True
        for j, f in enumerate(self.functions):
            if done[j]:
                continue
            if isinstance(f, Query):  # no predicate: the tautology
                out[j] = n
                continue
            for lo in range(0, n, ROW_BLOCK):
                out[j] += int(np.count_nonzero(self._compiled[j](codes[lo: lo + ROW_BLOCK])))
        return out

    def means(self, codes: npt.ArrayLike, which: npt.ArrayLike | None = None) -> FloatArray:
        """f(S) = (1/|S|) Σ_{x∈S} f(x) for every query (or ``which``)."""
        codes = np.asarray(codes)
        return self.counts(codes, which) / float(codes.shape[0])

    def matrix(self, codes: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """The |F| × rows table of f(x)."""
        codes = np.asarray(codes)
        return np.stack([g(codes) for g in self._compiled]) if self._compiled else \
            np.zeros((0, codes.shape[0]), dtype=bool)


def check_codes(domain: Domain, codes: np.ndarray) -> np.ndarray:
    if codes.ndim != 2 or codes.shape[1] != len(domain):
        raise DataError(f"rows of codes must have shape (n, {len(domain)}), got {codes.shape}")
    if not np.issubdtype(codes.dtype, np.integer):
        raise DataError(f"codes must be integers, got dtype {codes.dtype}")
    sizes = np.array(domain.sizes)
    bad = (codes < 0) | (codes >= sizes[None, :])
    if bad.any():
        i, j = map(int, np.argwhere(bad)[0])
        raise DataError(f"row {i}: code {int(codes[i, j])} outside attribute "
                        f"{domain.names[j]!r} (0..{sizes[j] - 1})")
    return codes


def sensitive_counts(
    domain: Domain,
    queries: Sequence[Function] | Workload,
    data: Any,
    *,
    on_invalid: OnInvalid = "error",
    unit: PrivacyUnit = ONE_ROW,
    extra_columns: ExtraColumns = "error",
) -> SensitiveCounts:
    """The exact counts of ``queries`` on ``data`` (NOT PRIVATE; only the private steps read them).
    ``unit``: one person's rows are bounded first (:func:`tessera.data.source.encode`); rows of
    codes carry no privacy id and are refused for a person.

    ``data``: a :class:`SensitiveCounts` (returned as is, after a length check), rows of codes
    (an integer array of shape (n, len(domain))), or anything :func:`tessera.data.source.encode`
    reads (a path, a DataFrame, an Arrow table, a DuckDB relation). A workload of predicate queries
    is counted by :func:`tessera.data.counts.count` (never row by row).
    """
    functions, _ = query_functions(domain, queries)
    if isinstance(data, SensitiveCounts):
        if data.counts.size != len(functions):
            raise DataError(f"{data.counts.size} counts for {len(functions)} queries")
        return data
    if isinstance(data, np.ndarray | list | tuple):
        if not unit.is_row:
            raise DataError("rows of codes carry no privacy id: they cannot be bounded per "
                            "person", hint="pass the table with its id column (a path or a "
                            "DataFrame)")
        codes = check_codes(domain, np.asarray(data))
    elif isinstance(queries, Workload):
        res = count(data, queries, on_invalid=on_invalid, unit=unit,
                    extra_columns=extra_columns)
        return SensitiveCounts(res.answers, res.n_rows)
    else:
        codes = encode(data, domain, on_invalid=on_invalid, unit=unit,
                       extra_columns=extra_columns).codes()
    if codes.shape[0] == 0:
        raise DataError("the data has no rows")
    return SensitiveCounts(Evaluator(domain, functions).counts(codes), codes.shape[0])


