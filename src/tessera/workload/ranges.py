r"""Lazy range families: every range (or prefix) over one or two ordered attributes, never
materialised as query objects (docs/theory.md §2, §10.3, §10.7).

A :class:`RangeFamily` over ordered attributes a (n codes) — and b (m codes) for 2-D — is

* ``ranges``: every interval [lo, hi] of codes, lo ≤ hi: n(n+1)/2 queries ``lo ≤ a ≤ hi``
  in row-major order of (lo, hi); over two attributes every axis-aligned rectangle, the
  product of the two lists (a's range outer): n(n+1)/2 · m(m+1)/2 queries;
* ``prefixes``: every a ≤ v (1-D prefix sums), or a ≤ v ∧ b ≤ u (2-D dominance), in
  row-major order of the codes.

Everything a release needs is computed from the compact description with array work:

**Containment counts (γ in closed form).** Code v lies in range [lo, hi] iff lo ≤ v ≤ hi:
lo ∈ {0, …, v} (v + 1 choices) and hi ∈ {v, …, n−1} (n − v choices), independently, so v
lies in exactly c(v) = (v + 1)(n − v) ranges; and in n − v prefixes (those with bound
≥ v). Two codes x ≤ y lie together in (x + 1)(n − y) ranges and n − y prefixes. A 2-D query is
the product of its two axis conditions, so a cell (v, u) lies in c_a(v)·c_b(u) of them (and in
c_a(x, y)·c_b(x', y') together with a second cell). With one weight w for the family, a row's
score is h(w)·c(x): γ_w = g(h(w) max_x c(x)) exactly (checked against brute force by
hypothesis, ``tests/workload/test_ranges.py``; used by :mod:`tessera.overlap.range_overlap`).

**Answers by prefix sums.** With S the (2-D) cumulative histogram (S[0] = 0), range
[lo, hi] counts S[hi + 1] − S[lo]; a rectangle takes the four corners.

**Names** are generated vectorised (``range(a in [lo, hi])``, ``prefix(a<=v)``,
``range(a in [lo, hi] AND b in [lo', hi'])``), labels from the schema.

:class:`RangeQueries` is the lazy sequence a :class:`~tessera.workload.workload.Workload` holds
in place of its query tuple: indexing it builds one :class:`~tessera.workload.query.Query`
(so every consumer that does not know the family still sees correct queries), and the fast
paths (γ, counts, strategies, the hash) read :attr:`RangeQueries.families` instead.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from tessera.errors import QueryError
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Predicate, Query

__all__ = ["MAX_RANGE_QUERIES", "FamilyWeights", "RangeFamily", "RangeNames", "RangeQueries",
           "axis_bounds", "axis_counts", "axis_joint"]

IntArray = npt.NDArray[np.int64]
#: Most queries one lazy range family may hold: 5·10⁶ (all ranges over 3,161 codes; all
#: rectangles of 64 × 64); each query still costs a few float64 entries in a release.
MAX_RANGE_QUERIES = 5_000_000
KINDS = ("ranges", "prefixes")


def axis_bounds(n: int, kind: str) -> tuple[IntArray, IntArray]:
    """The half-open code spans [lo, hi) of one axis, in the family's order."""
    if kind == "ranges":
        i, j = np.triu_indices(n)
        return i.astype(np.int64), (j + 1).astype(np.int64)
    return np.zeros(n, dtype=np.int64), np.arange(1, n + 1, dtype=np.int64)


def axis_counts(n: int, kind: str) -> IntArray:
    """c(v): how many of the axis's spans hold code v — (v+1)(n−v) ranges, n−v prefixes."""
    v = np.arange(n, dtype=np.int64)
    return (v + 1) * (n - v) if kind == "ranges" else n - v


def axis_joint(n: int, kind: str) -> IntArray:
    """c(x, y): how many spans hold both codes x and y (n × n): (min+1)(n−max) ranges,
    n − max prefixes."""
    v = np.arange(n, dtype=np.int64)
    lo = np.minimum(v[:, None], v[None, :])
    hi = np.maximum(v[:, None], v[None, :])
    return (lo + 1) * (n - hi) if kind == "ranges" else np.broadcast_to(n - hi, (n, n)).copy()


@dataclass(frozen=True)
class RangeFamily:
    """All ranges (``kind='ranges'``) or prefixes over 1 or 2 ordered ``attributes`` (domain
    order) with ``sizes`` codes each, every query of weight ``weight`` (module docs)."""

    attributes: tuple[str, ...]
    sizes: tuple[int, ...]
    kind: str = "ranges"
    weight: float = 1.0

    @staticmethod
    def of(domain: Domain, attributes: Sequence[str], kind: str = "ranges",
           weight: float = 1.0) -> RangeFamily:
        """The family over ``attributes`` of ``domain``; a clear error (naming the attribute,
        with a hint) for an unknown, unordered or repeated attribute, more than two, or more
        than :data:`MAX_RANGE_QUERIES` queries."""
        if kind not in KINDS:
            raise QueryError(f"unknown range family {kind!r}", hint="ranges or prefixes")
        attrs = list(attributes)
        if not 1 <= len(attrs) <= 2 or len(set(attrs)) != len(attrs):
            raise QueryError(f"{kind} take one or two distinct ordered attributes, not {attrs}",
                             hint=f"{kind}: [{{attributes: [age]}}] or "
                                  f"[{{attributes: [age, hours]}}]")
        ordered = [x.name for x in domain if x.ordered]
        for a in attrs:
            if a not in domain.names:
                raise QueryError(f"unknown attribute {a!r} in {kind}",
                                 hint="ordered attributes of the schema: "
                                      + (", ".join(ordered) or "none"))
            if not domain[a].ordered:
                raise QueryError(f"{kind} need ordered attributes; {a!r} is not ordered",
                                 hint="declare the attribute ordered (ordered: true), or use a "
                                      "hierarchy")
        names = tuple(sorted(attrs, key=domain.index))
        if not (math.isfinite(weight) and weight >= 0):
            raise QueryError(f"weight {weight!r} is not a number ≥ 0",
                             hint="an importance weight: a finite number ≥ 0 (default 1)")
        fam = RangeFamily(names, tuple(domain[a].size for a in names), kind, float(weight))
        if fam.n_queries > MAX_RANGE_QUERIES:
            shape = " × ".join(f"{a} ({domain[a].size:,} codes)" for a in names)
            raise QueryError(f"all {kind} over {shape} are {fam.n_queries:,} queries, above "
                             f"{MAX_RANGE_QUERIES:,}",
                             hint="coarsen the attribute (bins), or use a hierarchy (a few "
                                  "levels of ranges)")
        return fam

    # -- shape ------------------------------------------------------------------------------
    @property
    def axis_lengths(self) -> tuple[int, ...]:
        return tuple(n * (n + 1) // 2 if self.kind == "ranges" else n for n in self.sizes)

    @property
    def n_queries(self) -> int:
        return math.prod(self.axis_lengths)

    def bounds(self, axis: int) -> tuple[IntArray, IntArray]:
        """Half-open spans [lo, hi) of axis ``axis`` (the family is their product)."""
        return axis_bounds(self.sizes[axis], self.kind)

    def counts(self) -> IntArray:
        """c(x) for every cell x of the family's attributes (shape ``sizes``): how many of
        its queries hold x (module docs)."""
        out = axis_counts(self.sizes[0], self.kind)
        for n in self.sizes[1:]:
            out = np.multiply.outer(out, axis_counts(n, self.kind))
        return out

    def containing(self, cell: Sequence[int]) -> IntArray:
        """Indices (family order) of the queries that hold ``cell`` (one code per attribute)."""
        mask = np.ones(1, dtype=bool)
        for axis, v in enumerate(cell):
            lo, hi = self.bounds(axis)
            mask = np.multiply.outer(mask, (lo <= v) & (v < hi)).ravel()
        return np.flatnonzero(mask)

    # -- queries and names ------------------------------------------------------------------
    def query(self, domain: Domain, i: int) -> Query:
        """Query ``i`` (family order) as a predicate conjunction."""
        index = np.unravel_index(int(i), self.axis_lengths)
        preds = []
        for axis, (a, j) in enumerate(zip(self.attributes, index)):
            lo, hi = self.bounds(axis)
            s, e = int(lo[j]), int(hi[j])
            if (s, e) != (0, self.sizes[axis]):
                preds.append(Predicate(a, IntervalSet(((s, e),))))
        return Query(tuple(preds))

    def names(self, domain: Domain) -> npt.NDArray[np.object_]:
        """Every query's name, vectorised (object array, family order)."""
        parts = []
        for axis, a in enumerate(self.attributes):
            labels = np.array([domain[a].label(c) for c in range(self.sizes[axis])],
                              dtype=object)
            lo, hi = self.bounds(axis)
            if self.kind == "ranges":
                parts.append(f"{a} in [" + labels[lo] + ", " + labels[hi - 1] + "]")
            else:
                parts.append(f"{a}<=" + labels[hi - 1])
        out = parts[0]
        for p in parts[1:]:
            out = np.add.outer(out + " AND ", p).ravel()
        head = "range(" if self.kind == "ranges" else "prefix("
        return np.asarray(head + out + ")", dtype=object)

    # -- answers ----------------------------------------------------------------------------
    def answers(self, histogram: npt.ArrayLike) -> npt.NDArray[Any]:
        """Every query's count from the histogram over the family's attributes (shape
        ``sizes``), by (2-D) prefix sums; exact in the histogram's dtype."""
        h = np.asarray(histogram)
        if h.shape != self.sizes:
            raise ValueError(f"histogram of shape {h.shape}, expected {self.sizes}")
        s = np.zeros(tuple(n + 1 for n in self.sizes), dtype=h.dtype)
        s[tuple(slice(1, None) for _ in self.sizes)] = h
        for axis in range(len(self.sizes)):
            s = np.cumsum(s, axis=axis)
        if len(self.sizes) == 1:
            lo, hi = self.bounds(0)
            return s[hi] - s[lo]
        (lo1, hi1), (lo2, hi2) = self.bounds(0), self.bounds(1)
        out = (s[np.ix_(hi1, hi2)] - s[np.ix_(lo1, hi2)] - s[np.ix_(hi1, lo2)]
               + s[np.ix_(lo1, lo2)])
        return out.ravel()

    # -- files ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The compact description: what the workload hash and ``save`` write."""
        doc: dict[str, Any] = {"attributes": list(self.attributes)}
        if self.weight != 1.0:
            doc["weight"] = self.weight
        return doc


class FamilyWeights(tuple[float, ...]):
    """The weights of lazy range families (each family's one weight, repeated), with
    :attr:`array` the same as one read-only float64 array — built without a pass over 10⁶
    Python floats. Any other weights tuple is an ordinary one (read generically)."""

    array: npt.NDArray[np.float64]
    families: tuple[RangeFamily, ...]

    def __new__(cls, families: Sequence[RangeFamily]) -> FamilyWeights:
        out = tuple.__new__(cls, [w for f in families for w in (f.weight,) * f.n_queries])
        arr = np.concatenate([np.full(f.n_queries, f.weight) for f in families])
        arr.setflags(write=False)
        out.array, out.families = arr, tuple(families)
        return out

    def __reduce__(self) -> tuple[Any, ...]:  # (pickled as its families)
        return FamilyWeights, (self.families,)


class RangeNames(Sequence[str]):
    """The names of lazy range families, generated vectorised once on first use."""

    def __init__(self, domain: Domain, families: tuple[RangeFamily, ...]) -> None:
        self._domain, self._families = domain, families

    @functools.cached_property
    def array(self) -> npt.NDArray[np.object_]:
        """Every name, one object array (what the answer writers take)."""
        return np.concatenate([f.names(self._domain) for f in self._families])

    @functools.cached_property
    def _all(self) -> tuple[str, ...]:
        return tuple(self.array.tolist())

    def __len__(self) -> int:
        return sum(f.n_queries for f in self._families)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        return self._all[i]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RangeNames):
            return self._families == other._families and self._domain == other._domain
        return tuple(self) == other if isinstance(other, tuple) else NotImplemented

    def __hash__(self) -> int:
        return hash(("RangeNames", self._families))


class RangeQueries(Sequence[Query]):
    """The queries of lazy range families (concatenated in order), built one at a time on
    access: consumers without a fast path see ordinary :class:`Query` objects."""

    def __init__(self, domain: Domain, families: Sequence[RangeFamily]) -> None:
        self.domain = domain
        self.families = tuple(families)
        self._starts = np.cumsum([0] + [f.n_queries for f in self.families])

    def __len__(self) -> int:
        return int(self._starts[-1])

    @overload
    def __getitem__(self, i: int) -> Query: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Query]: ...
    def __getitem__(self, i: int | slice) -> Query | Sequence[Query]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        k = int(i) + len(self) if int(i) < 0 else int(i)
        if not 0 <= k < len(self):
            raise IndexError(i)
        f = int(np.searchsorted(self._starts, k, side="right")) - 1
        return self.families[f].query(self.domain, k - int(self._starts[f]))

    def __iter__(self) -> Iterator[Query]:
        for f in self.families:
            for k in range(f.n_queries):
                yield f.query(self.domain, k)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RangeQueries):
            return self.families == other.families and self.domain == other.domain
        return tuple(self) == other if isinstance(other, tuple) else NotImplemented

    def __hash__(self) -> int:
        return hash(("RangeQueries", self.families))

    def __repr__(self) -> str:
        return f"RangeQueries({list(self.families)!r})"
