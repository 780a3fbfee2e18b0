"""IntervalSet algebra against Python sets (docs/theory.md §2: coverages φ ⊆ A as code sets)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tessera.schema.intervals import IntervalSet
from tests.oracles.foundation import FAST

UNIVERSE = 24
small_sets = st.frozensets(st.integers(0, UNIVERSE - 1), max_size=UNIVERSE)
raw_spans = st.lists(
    st.tuples(st.integers(-3, UNIVERSE + 3), st.integers(-3, UNIVERSE + 3)), max_size=8
)


def as_set(s: IntervalSet) -> set[int]:
    """Codes of ``s`` read off its spans (not via __iter__, which is also under test)."""
    out: set[int] = set()
    for lo, hi in s.spans:
        out.update(range(lo, hi))
    return out


def assert_normal(s: IntervalSet) -> None:
    """lo < hi, sorted, neither overlapping nor adjacent: one representation per set."""
    for lo, hi in s.spans:
        assert lo < hi
        assert isinstance(lo, int) and isinstance(hi, int)
    for (_, h1), (l2, _) in zip(s.spans, s.spans[1:]):
        assert h1 < l2


@FAST
@given(small_sets)
def test_points_normal_form_and_len(a: frozenset[int]) -> None:
    s = IntervalSet.points(a)
    assert_normal(s)
    assert as_set(s) == set(a)
    assert len(s) == len(a)
    assert bool(s) == bool(a)
    assert set(s) == set(a)
    assert list(s) == sorted(a)
    if a:
        assert s.min() == min(a) and s.max() == max(a)
    assert s.is_interval() == (not a or max(a) - min(a) + 1 == len(a))
    # equal sets, equal representations, whatever order the points came in
    assert IntervalSet.points(sorted(a, reverse=True)) == s
    assert hash(IntervalSet.points(list(a) + list(a))) == hash(s)


@FAST
@given(raw_spans)
def test_of_normalises_arbitrary_spans(spans: list[tuple[int, int]]) -> None:
    s = IntervalSet.of(spans)
    assert_normal(s)
    expected = set().union(*(range(lo, hi) for lo, hi in spans)) if spans else set()
    assert as_set(s) == expected


@FAST
@given(small_sets, small_sets)
def test_binary_algebra_matches_python_sets(a: frozenset[int], b: frozenset[int]) -> None:
    sa, sb = IntervalSet.points(a), IntervalSet.points(b)
    for got, want in ((sa & sb, a & b), (sa | sb, a | b), (sa - sb, a - b), (sb - sa, b - a)):
        assert_normal(got)
        assert as_set(got) == set(want)
        assert got == IntervalSet.points(want)
    assert sa.isdisjoint(sb) == a.isdisjoint(b)


@FAST
@given(small_sets, st.integers(0, UNIVERSE + 4))
def test_complement_and_indicator(a: frozenset[int], size: int) -> None:
    s = IntervalSet.points(a)
    c = s.complement(size)
    assert_normal(c)
    assert as_set(c) == set(range(size)) - a
    ind = s.indicator(size)
    assert ind.shape == (size,)
    assert set(np.flatnonzero(ind).tolist()) == {x for x in a if x < size}
    assert s.is_full(size) == (set(a) == set(range(size)) and size > 0)


@FAST
@given(small_sets, st.lists(st.integers(-5, UNIVERSE + 5), max_size=40))
def test_contains_array_and_contains(a: frozenset[int], codes: list[int]) -> None:
    s = IntervalSet.points(a)
    arr = np.asarray(codes, dtype=np.int64)
    got = s.contains_array(arr)
    assert got.dtype == bool and got.shape == arr.shape
    assert got.tolist() == [c in a for c in codes]
    assert [c in s for c in codes] == [c in a for c in codes]
    assert [np.int64(c) in s for c in codes] == [c in a for c in codes]
    # 2-D input keeps its shape
    grid = arr.reshape(1, -1)
    assert s.contains_array(grid).shape == grid.shape


def test_range_empty_and_degenerate() -> None:
    assert IntervalSet.range(3, 3) == IntervalSet.empty()
    assert IntervalSet.range(5, 2) == IntervalSet.empty()
    assert len(IntervalSet.range(2, 7)) == 5
    assert IntervalSet.empty() - IntervalSet.range(0, 4) == IntervalSet.empty()
    assert IntervalSet.range(0, 4) - IntervalSet.empty() == IntervalSet.range(0, 4)
    assert IntervalSet.empty().complement(0) == IntervalSet.empty()
    assert IntervalSet.empty().contains_array(np.array([0, 1])).tolist() == [False, False]
    assert "x" not in IntervalSet.range(0, 4)  # non-integers are never members
    assert 1.0 not in IntervalSet.range(0, 4)


def test_huge_attribute_costs_spans_not_values() -> None:
    """A 10^12-value range: the algebra works on spans (this would not finish by enumeration)."""
    n = 10**12
    a = IntervalSet.range(0, n // 2) | IntervalSet.range(n // 2 + 10, n)
    assert len(a) == n - 10
    assert a.complement(n) == IntervalSet.range(n // 2, n // 2 + 10)
    assert (a - IntervalSet.range(5, n - 5)) == IntervalSet.of([(0, 5), (n - 5, n)])
    assert a.contains_array(np.array([0, n // 2, n // 2 + 10, n - 1, n])).tolist() == [
        True,
        False,
        True,
        True,
        False,
    ]


@pytest.mark.parametrize("seed", range(5))
def test_seeded_random_algebra_laws(seed: int) -> None:
    """De Morgan, distributivity and difference identities on random sets."""
    rng = np.random.default_rng(seed)
    n = 30
    for _ in range(200):
        a, b, c = (
            IntervalSet.points(np.flatnonzero(rng.random(n) < 0.5).tolist()) for _ in range(3)
        )
        assert (a | b).complement(n) == a.complement(n) & b.complement(n)
        assert (a & b).complement(n) == a.complement(n) | b.complement(n)
        assert a & (b | c) == (a & b) | (a & c)
        assert a - b == a & b.complement(n)
        assert (a - b) | (a & b) == a
        assert a.complement(n).complement(n) == a
