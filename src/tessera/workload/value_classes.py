"""Value classes: the codes of one attribute that no predicate of a workload tells apart.

An attribute with codes 0..size-1 is constrained by predicates φ_1..φ_k ⊆ {0..size-1}, each an
:class:`~tessera.schema.intervals.IntervalSet` of half-open spans. Two codes are *equivalent* when
they lie in exactly the same predicates (u ∈ φ_i ⇔ v ∈ φ_i for every i); the equivalence classes are
the attribute's **value classes** (the "atoms" of docs/theory.md §2–§4). Every predicate φ_i is
constant on each class, so it is the union of the classes it contains, and two predicates on the
attribute intersect iff they share a class.

**Construction** (cost grows with the number of spans, never with ``size``):

1. breakpoints b_0 = 0 < b_1 < … < b_E = size: {0, size} ∪ every span end (clipped to [0, size]);
2. no span starts or ends strictly inside an *elementary segment* [b_e, b_{e+1}), so its
   membership column m_e ∈ {0,1}^k, m_e[i] = [[b_e, b_{e+1}) ⊆ φ_i], is well defined; all
   columns come at once from a difference array over the span ends (+1 where a span starts,
   −1 where it ends, running sum), a batch of distinct predicates at a time;
3. segments whose columns agree are merged into one class (set predicates make non-adjacent
   segments equivalent, e.g. all the codes no predicate mentions). Classes are numbered by
   their first segment, so class c's smallest code ``representative[c]`` increases with c.

With ``merge=False`` the segments themselves are the classes: finer, but adjacent in code order,
so a subset of the predicates coarsens them by merging neighbours (what
:mod:`tessera.data.counts` does per scope). With ``split_all=True`` every code is its own class (the
alphabet of a BDD variable).

**Why classes are exact.** Every query is q(x) = ∏_a [x_a ∈ φ_{q,a}], so with the other
coordinates fixed, q(x) depends on x_a only through the class of x_a. Hence, with one
representative r(c) and the size n_codes(c) of each class c,

    max_x Σ_q y_q q(x)    = max over (c_a)_a of Σ_q y_q q(r(c))                 (max-plus),
    Σ_x exp(θ·f(x))       = Σ over (c_a)_a of ∏_a n_codes(c_a) · exp(θ·f(r(c)))  (sum-product),

i.e. each attribute becomes a variable over its classes, with weight n_codes (log n_codes in
log space) in sums and none in maxima. A sample or argmax over classes maps back to codes:
uniform within the class (:meth:`ValueClasses.expand`), or its representative.

Example: two predicates on 10 codes, a range and a set.

>>> from tessera.schema.intervals import IntervalSet
>>> vc = value_classes(10, [IntervalSet.range(2, 5), IntervalSet.points([0, 3, 8])])
>>> vc.starts.tolist()  # breakpoints: 8 elementary segments
[0, 1, 2, 3, 4, 5, 8, 9, 10]
>>> vc.class_of_segment.tolist()  # {0, 8} | {1, 5..7, 9} | {2, 4} | {3}
[0, 1, 2, 3, 2, 1, 0, 1]
>>> vc.n_codes.tolist(), vc.representative.tolist()
([2, 5, 2, 1], [0, 1, 2, 3])
>>> vc.membership.astype(int).tolist()  # class × predicate
[[0, 1], [0, 0], [1, 0], [1, 1]]
>>> vc.class_of([0, 4, 7, 9]).tolist()
[0, 2, 1, 1]
>>> value_classes(10, [IntervalSet.points([2, 7])], merge=False).n_classes  # 2 | 7: not merged
5
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain

import numpy as np
import numpy.typing as npt

from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Query

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: Largest difference array (distinct predicates × segments, int8) built in one batch.
BATCH_CELLS = 1 << 24


@dataclass(frozen=True, eq=False)
class ValueClasses:
    """The value classes of one attribute for the predicates that built them.

    Elementary segments ``[starts[e], starts[e+1])`` partition the codes 0..size-1 (in code
    order); ``class_of_segment[e]`` is the class of segment e. Class c has ``n_codes[c]`` codes,
    the smallest being ``representative[c]`` (increasing in c, so the class of code 0 is 0).
    The predicates that built the classes are identified up to equality: ``predicate_row[i]``
    is the row of predicate i in :attr:`distinct_membership`. Arrays are read-only. Build with
    :func:`value_classes`.
    """

    size: int
    starts: IntArray  # (n_segments + 1,), starts[0] == 0, starts[-1] == size
    class_of_segment: IntArray  # (n_segments,)
    n_codes: IntArray  # (n_classes,)
    representative: IntArray  # (n_classes,)
    predicate_row: IntArray  # (n_predicates,)
    _spans: IntArray  # (n_spans, 2) the distinct predicates' spans, clipped, non-empty
    _span_row: IntArray  # (n_spans,) their distinct predicate, non-decreasing
    _n_distinct: int

    @property
    def n_classes(self) -> int:
        return len(self.n_codes)

    @property
    def n_segments(self) -> int:
        return len(self.class_of_segment)

    @property
    def n_predicates(self) -> int:
        return len(self.predicate_row)

    def class_of(self, codes: npt.ArrayLike) -> IntArray:
        """The class of each code (vectorised)."""
        seg = np.searchsorted(self.starts, np.asarray(codes), side="right") - 1
        return self.class_of_segment[seg]

    def contains(self, coverage: IntervalSet) -> BoolArray:
        """Whether each class lies in ``coverage``, a set constant on every class (e.g. one of
        the predicates that built them): tested at the representatives."""
        return coverage.contains_array(self.representative)

    @cached_property
    def distinct_membership(self) -> BoolArray:
        """(distinct predicates, n_classes): ``[r, c]`` iff class c ⊆ the r-th distinct predicate.

        Built on first use (the engine never needs it), from the segment membership at each
        class's first segment.
        """
        first = (None if self.n_classes == self.n_segments  # every segment is a class
                 else _first_segments(self.class_of_segment, self.n_classes))
        return _read_only(_membership(self.starts, self._spans, self._span_row,
                                      self._n_distinct, first))

    @cached_property
    def membership(self) -> BoolArray:
        """(n_classes, n_predicates): ``[c, i]`` iff class c ⊆ predicate i (C-contiguous)."""
        return _read_only(np.ascontiguousarray(self.distinct_membership[self.predicate_row].T))

    def expand(self, classes: npt.ArrayLike, rng: np.random.Generator) -> IntArray:
        """One uniform code within each of the given classes (vectorised)."""
        classes = np.asarray(classes, dtype=np.int64)
        if self.n_classes == self.size:  # one code per class
            return self.representative[classes]
        order = np.lexsort((self.starts[:-1], self.class_of_segment))  # segments by class
        lengths = np.diff(self.starts)[order]
        cum = np.concatenate([[0], np.cumsum(lengths)])
        base = np.concatenate([[0], np.cumsum(self.n_codes)])[:-1]
        key = base[classes] + rng.integers(0, self.n_codes[classes])
        e = np.searchsorted(cum, key, side="right") - 1
        return self.starts[:-1][order][e] + (key - cum[e])


def value_classes(
    size: int, coverages: Sequence[IntervalSet], *, split_all: bool = False, merge: bool = True
) -> ValueClasses:
    """The value classes of an attribute of ``size`` codes for the predicates ``coverages``.

    ``merge=False``: the elementary segments are the classes (adjacent in code order);
    ``split_all=True``: every code is a class. Spans outside [0, size) are clipped.
    """
    # distinct predicates (the cells of a marginal repeat each value's predicate once per value
    # of the other attributes) and every span of each, flat: (row, lo, hi)
    keys = [cov.spans for cov in coverages]
    index = dict.fromkeys(keys, 0)
    for r, key in enumerate(index):
        index[key] = r
    predicate_row = np.fromiter(map(index.__getitem__, keys), dtype=np.int64, count=len(keys))
    distinct = list(index)
    n_spans = np.fromiter(map(len, distinct), dtype=np.int64, count=len(distinct))
    spans = np.fromiter(chain.from_iterable(chain.from_iterable(distinct)), dtype=np.int64,
                        count=2 * int(n_spans.sum())).reshape(-1, 2)
    span_row = np.repeat(np.arange(len(distinct), dtype=np.int64), n_spans)
    spans = np.minimum(np.maximum(spans, 0), size)
    keep = spans[:, 0] < spans[:, 1]
    spans, span_row = spans[keep], span_row[keep]

    if split_all:
        starts = np.arange(size + 1, dtype=np.int64)
    else:
        starts = np.unique(np.concatenate([np.array([0, size], dtype=np.int64), spans.ravel()]))
    n_seg = len(starts) - 1
    known: BoolArray | None = None  # membership at the classes, when it comes for free
    if split_all or not merge:
        class_of_segment = first = np.arange(n_seg, dtype=np.int64)
    elif not distinct:
        class_of_segment, first = np.zeros(n_seg, dtype=np.int64), np.zeros(1, dtype=np.int64)
    else:
        class_of_segment, first, known = _merge_segments(starts, spans, span_row, len(distinct))
    n_classes = len(first)
    n_codes = np.bincount(class_of_segment, weights=starts[1:] - starts[:-1],
                          minlength=n_classes)
    out = ValueClasses(
        int(size), _read_only(starts), _read_only(class_of_segment),
        _read_only(n_codes.astype(np.int64)), _read_only(starts[first]),
        _read_only(predicate_row), spans, span_row, len(distinct),
    )
    if known is not None:  # fill the cache (cached_property stores in the instance dict)
        out.__dict__["distinct_membership"] = _read_only(known)
    return out


@dataclass(frozen=True, eq=False)
class ConstrainedAttribute:
    """The value classes of one attribute of a workload and the queries constraining it.

    Column i of ``classes.membership`` is query ``queries[i]`` (an index into the workload).
    """

    name: str
    position: int  # index of the attribute in the domain
    queries: IntArray
    classes: ValueClasses


def workload_value_classes(
    domain: Domain, queries: Iterable[object], *, merge: bool = True
) -> tuple[ConstrainedAttribute, ...]:
    """Value classes of every attribute some query constrains, in domain order.

    Only predicate conjunctions (:class:`~tessera.workload.query.Query`) count; other functions
    (e.g. Boolean queries) are skipped but keep their index.
    """
    by_attr: dict[str, tuple[list[IntervalSet], list[int]]] = {}
    for i, q in enumerate(queries):
        if isinstance(q, Query):
            for p in q.predicates:
                covs, idx = by_attr.setdefault(p.attribute, ([], []))
                covs.append(p.coverage)
                idx.append(i)
    out = []
    for name in sorted(by_attr, key=domain.index):
        covs, idx = by_attr[name]
        out.append(ConstrainedAttribute(
            name, domain.index(name), _read_only(np.asarray(idx, dtype=np.int64)),
            value_classes(domain[name].size, covs, merge=merge)))
    return tuple(out)


# -- the arithmetic ---------------------------------------------------------------------------


def _membership(
    starts: IntArray, spans: IntArray, span_row: IntArray, n_rows: int,
    segments: IntArray | None = None,
) -> BoolArray:
    """(n_rows, len(segments)): whether each segment lies in each (distinct) predicate;
    ``segments``: the columns to keep (all if None). Batches of predicates bound the memory."""
    n_seg = len(starts) - 1
    out = np.empty((n_rows, n_seg if segments is None else len(segments)), dtype=bool)
    for r0, r1, sel in _row_batches(span_row, n_rows, n_seg):
        if segments is None:
            _fill_membership(starts, spans[sel], span_row[sel] - r0, out[r0:r1])
        else:
            member = np.empty((r1 - r0, n_seg), dtype=bool)
            _fill_membership(starts, spans[sel], span_row[sel] - r0, member)
            out[r0:r1] = member[:, segments]
    return out


def _row_batches(span_row: IntArray, n_rows: int, n_seg: int) -> Iterator[tuple[int, int, slice]]:
    """Batches of rows (r0, r1) of at most BATCH_CELLS segment cells, with their spans' slice
    (``span_row`` is non-decreasing)."""
    step = max(1, BATCH_CELLS // (n_seg + 1))
    bounds = np.searchsorted(span_row, np.arange(0, n_rows + step, step))
    for b, r0 in enumerate(range(0, n_rows, step)):
        yield r0, min(r0 + step, n_rows), slice(int(bounds[b]), int(bounds[b + 1]))


def _fill_membership(starts: IntArray, spans: IntArray, rows: IntArray, out: BoolArray) -> None:
    """out[r, e] = [segment e ⊆ predicate r] for the spans of predicates ``rows``.

    A difference array: +1 at a span's first segment, −1 after its last, running sum. The spans
    of one predicate are disjoint and non-adjacent (the :class:`IntervalSet` invariant, kept by
    clipping), so within a row no two of these positions coincide (plain assignment, int8), and
    the running sum is 0 or 1: it *is* the membership, written straight into ``out``.
    """
    n_rows, n_seg = out.shape
    diff = np.zeros((n_rows, n_seg + 1), dtype=np.int8)
    diff[rows, np.searchsorted(starts, spans[:, 0])] = 1
    diff[rows, np.searchsorted(starts, spans[:, 1])] = -1
    np.cumsum(diff[:, :n_seg], axis=1, dtype=np.int8, out=out.view(np.int8))


def _merge_segments(
    starts: IntArray, spans: IntArray, span_row: IntArray, n_rows: int
) -> tuple[IntArray, IntArray, BoolArray | None]:
    """Class of each segment (numbered by first segment) and the first segment of each class:
    exact partition refinement, one batch of distinct predicates at a time, by ``np.unique``
    over rows of (current label, the batch's membership bits). Also the (n_rows, n_classes)
    membership when there was a single batch."""
    n_seg = len(starts) - 1
    labels: IntArray | None = None
    member = np.zeros((0, n_seg), dtype=bool)
    first = np.zeros(0, dtype=np.int64)
    batches = 0
    for r0, r1, sel in _row_batches(span_row, n_rows, n_seg):
        member = np.empty((r1 - r0, n_seg), dtype=bool)
        _fill_membership(starts, spans[sel], span_row[sel] - r0, member)
        rows = np.packbits(member, axis=0).T  # (n_seg, bytes): one row of bits per segment
        if labels is not None:
            rows = np.concatenate([labels[:, None].view(np.uint8).reshape(n_seg, 8), rows],
                                  axis=1)
        first, labels = _unique_rows(rows)
        batches += 1
    assert labels is not None
    order = np.argsort(first)
    rank = np.empty(len(first), dtype=np.int64)
    rank[order] = np.arange(len(first))
    first_seg = first[order]
    return rank[labels], first_seg, (member[:, first_seg] if batches == 1 else None)


def _unique_rows(rows: npt.NDArray[np.uint8]) -> tuple[IntArray, IntArray]:
    """(first index, inverse) of the distinct rows of a byte matrix, in some order; rows of at
    most 8 bytes are compared as one uint64 (a 1-D ``np.unique``, much cheaper)."""
    n, width = rows.shape
    if width <= 8:
        key = np.zeros((n, 8), dtype=np.uint8)
        key[:, :width] = rows
        _, first, inverse = np.unique(key.view(np.uint64).ravel(), return_index=True,
                                      return_inverse=True)
    else:
        _, first, inverse = np.unique(np.ascontiguousarray(rows), axis=0, return_index=True,
                                      return_inverse=True)
    return first.astype(np.int64), inverse.ravel().astype(np.int64)


def _first_segments(class_of_segment: IntArray, n_classes: int) -> IntArray:
    """The first segment of each class: classes are numbered by first segment, so a segment is
    the first of its class iff its class exceeds every class before it."""
    seen = np.maximum.accumulate(np.concatenate([[-1], class_of_segment[:-1]]))
    first = np.flatnonzero(class_of_segment > seen)
    assert len(first) == n_classes
    return first


def _read_only(a: npt.NDArray) -> npt.NDArray:
    a.setflags(write=False)
    return a
