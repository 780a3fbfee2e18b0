"""Coverage sets of one attribute, as unions of half-open code intervals.

Every attribute of a :class:`~tessera.schema.domain.Domain` is encoded as codes ``0..k-1``
(docs/theory.md §1). A predicate's coverage φ ⊆ A (docs/theory.md §2) is stored as a sorted tuple
of disjoint,
non-adjacent half-open intervals ``[lo, hi)`` of codes. One representation serves value sets
(many unit intervals), ranges (one interval) and their complements, and every operation costs
time linear in the number of intervals, never in the attribute's size: an integer attribute with
a million values is as cheap as a boolean one.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: Sorts after every span end: (code, _AFTER_ANY) > (code, hi) for any span starting at ``code``.
_AFTER_ANY = float("inf")


@dataclass(frozen=True, slots=True)
class IntervalSet:
    """A finite set of non-negative integers as ``((lo, hi), ...)``, each ``[lo, hi)``.

    Invariant (enforced by :meth:`of`): ``lo < hi``, sorted, and ``hi_i < lo_{i+1}``
    (no overlap, no adjacency), so two equal sets have equal representations.
    """

    spans: tuple[tuple[int, int], ...] = ()

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def of(spans: Iterable[tuple[int, int]]) -> IntervalSet:
        """Normalise arbitrary (possibly overlapping, empty or unsorted) spans."""
        cleaned = sorted((int(lo), int(hi)) for lo, hi in spans if hi > lo)
        merged: list[list[int]] = []
        for lo, hi in cleaned:
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        return IntervalSet(tuple((lo, hi) for lo, hi in merged))

    @staticmethod
    def range(lo: int, hi: int) -> IntervalSet:
        """The interval ``[lo, hi)`` (empty when ``hi <= lo``)."""
        return IntervalSet.of([(lo, hi)])

    @staticmethod
    def points(codes: Iterable[int]) -> IntervalSet:
        return IntervalSet.of((c, c + 1) for c in codes)

    @staticmethod
    def empty() -> IntervalSet:
        return IntervalSet(())

    # -- queries ----------------------------------------------------------------------------
    def __len__(self) -> int:
        """Number of codes covered."""
        return sum(hi - lo for lo, hi in self.spans)

    def __bool__(self) -> bool:
        return bool(self.spans)

    def __contains__(self, code: object) -> bool:
        if not isinstance(code, (int, np.integer)):
            return False
        # the last span starting at or before ``code`` is the only one that can hold it
        i = bisect_right(self.spans, (int(code), _AFTER_ANY))
        return i > 0 and code < self.spans[i - 1][1]

    def __iter__(self):  # type: ignore[no-untyped-def]
        """Iterate over the covered codes (only for small sets: this enumerates)."""
        for lo, hi in self.spans:
            yield from range(lo, hi)

    @property
    def n_spans(self) -> int:
        return len(self.spans)

    def is_full(self, size: int) -> bool:
        return self.spans == ((0, size),)

    def is_interval(self) -> bool:
        """True for a single contiguous range (or the empty set)."""
        return len(self.spans) <= 1

    def min(self) -> int:
        return self.spans[0][0]

    def max(self) -> int:
        return self.spans[-1][1] - 1

    def contains_array(self, codes: npt.NDArray[np.integer]) -> npt.NDArray[np.bool_]:
        """Vectorised membership test for an array of codes."""
        codes = np.asarray(codes)
        if not self.spans:
            return np.zeros(codes.shape, dtype=bool)
        bounds = np.asarray(self.spans, dtype=np.int64)
        # index of the last span starting at or before each code
        idx = np.searchsorted(bounds[:, 0], codes, side="right") - 1
        safe = np.clip(idx, 0, len(bounds) - 1)
        return (idx >= 0) & (codes < bounds[safe, 1])

    def indicator(self, size: int) -> npt.NDArray[np.bool_]:
        """Dense 0/1 vector over codes ``0..size-1`` (enumerates: small attributes only)."""
        out = np.zeros(size, dtype=bool)
        for lo, hi in self.spans:
            out[max(lo, 0) : min(hi, size)] = True
        return out

    # -- algebra ----------------------------------------------------------------------------
    def __and__(self, other: IntervalSet) -> IntervalSet:
        out: list[tuple[int, int]] = []
        a, b = self.spans, other.spans
        i = j = 0
        while i < len(a) and j < len(b):
            lo = max(a[i][0], b[j][0])
            hi = min(a[i][1], b[j][1])
            if lo < hi:
                out.append((lo, hi))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return IntervalSet(tuple(out))  # already normalised

    def __or__(self, other: IntervalSet) -> IntervalSet:
        return IntervalSet.of(self.spans + other.spans)

    def __sub__(self, other: IntervalSet) -> IntervalSet:
        if not self.spans:
            return self
        universe_hi = max(self.spans[-1][1], other.spans[-1][1] if other.spans else 0)
        return self & other.complement(universe_hi)

    def complement(self, size: int) -> IntervalSet:
        """``{0..size-1} \\ self``."""
        out: list[tuple[int, int]] = []
        prev = 0
        for lo, hi in self.spans:
            if lo > prev:
                out.append((prev, min(lo, size)))
            prev = max(prev, hi)
        if prev < size:
            out.append((prev, size))
        return IntervalSet.of(out)

    def isdisjoint(self, other: IntervalSet) -> bool:
        return not (self & other)

    def __repr__(self) -> str:
        inner = ", ".join(f"{lo}" if hi == lo + 1 else f"{lo}..{hi - 1}" for lo, hi in self.spans)
        return f"IntervalSet({{{inner}}})"
