"""Exact counts on small random tables equal brute force, whatever the GROUP BY packing."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tessera.count import count, count_encoded
from tessera.data import encode
from tessera.domain import Categorical, Domain, IntegerRange
from tessera.errors import DataError
from tessera.intervals import IntervalSet
from tessera.query import Query
from tessera.workload import Workload

from .oracles import (
    SLOWEX,
    Draw,
    HypDraw,
    RngDraw,
    brute_count,
    gen_domain,
    gen_set_query,
    gen_table,
)


def _check(r: Draw, n_queries: int) -> None:
    domain = gen_domain(r, (1, 4))
    frame, codes = gen_table(r, domain, r.int(0, 80))
    sqs = [gen_set_query(r, domain, p_constrain=r.int(0, 3)) for _ in range(n_queries)]
    w = Workload.of(domain, [s.to_query(domain) for s in sqs])
    want = [brute_count(s, codes) for s in sqs]
    table = encode(frame, domain)
    assert table.n_rows == len(frame) and table.dropped == 0
    # the encoded rows are the generated codes (as a multiset: SQL has no row order)
    assert sorted(map(tuple, table.codes().tolist())) == sorted(map(tuple, codes.tolist()))
    for max_cells in (1, 3, 1 << 19):
        got = count_encoded(table, w, max_cells=max_cells).tolist()
        assert got == want, (max_cells, domain, sqs)
    assert count(frame, w).answers.tolist() == want


@SLOWEX
@given(st.data())
def test_count_matches_brute_force(data: st.DataObject) -> None:
    _check(HypDraw(data), 12)


@pytest.mark.parametrize("seed", range(3))
def test_count_matches_brute_force_seeded(seed: int) -> None:
    r = RngDraw(np.random.default_rng(300 + seed))
    for _ in range(10):
        _check(r, 30)


def test_invalid_values_error_or_drop() -> None:
    d = Domain((IntegerRange(name="x", lo=0, hi=3), Categorical(name="c", values=("a", "b"))))
    frame = pd.DataFrame({"x": [0, 1, 7, 2, 9, 9, None], "c": ["a", "b", "a", "z", "b", "a", "a"]})
    w = Workload.from_sql(d, ["x >= 0", "c = 'a'", "x <= 1 AND c = 'a'"])
    with pytest.raises(DataError) as e:
        count(frame, w)
    text = str(e.value)
    assert "column 'x': 4 rows outside the domain" in text
    # pandas stores this column as float (it has a NULL): 9 may print as 9.0
    assert re.search(r"\b9(\.0)? \(2 rows\)", text) and re.search(r"\b7(\.0)? \(1 rows\)", text)
    assert "None (1 rows)" in text
    assert "column 'c': 1 rows outside the domain: 'z' (1 rows)" in text
    result = count(frame, w, on_invalid="drop")
    assert result.dropped == 5 and result.n_rows == 2  # rows 0 and 1 are valid on both columns
    assert result.answers.tolist() == [2, 1, 1]
    with pytest.raises(DataError, match="on_invalid"):
        count(frame, w, on_invalid="clamp")  # type: ignore[arg-type]


def test_missing_schema_column_has_hint() -> None:
    d = Domain((IntegerRange(name="age", lo=0, hi=3), IntegerRange(name="n", lo=0, hi=3)))
    w = Workload.from_sql(d, ["age > 1"])
    with pytest.raises(DataError) as e:
        count(pd.DataFrame({"agee": [1], "n": [1]}), w)
    assert "'age'" in str(e.value) and "did you mean 'agee'?" in str(e.value)
    with pytest.raises(DataError, match="cannot read data"):
        count([1, 2, 3], w)


def test_dataframe_column_typo_hint_is_not_about_headers() -> None:
    """A DataFrame has no header row to forget: a renamed column should get 'did you mean'."""
    d = Domain((IntegerRange(name="age", lo=0, hi=3),))
    with pytest.raises(DataError) as e:
        count(pd.DataFrame({"agee": [1]}), Workload.from_sql(d, ["age > 1"]))
    assert "did you mean 'agee'?" in str(e.value), str(e.value)


def test_big_integer_data_count_exactly() -> None:
    lo = 2**60
    d = Domain((IntegerRange(name="t", lo=lo, hi=lo + 5),))
    frame = pd.DataFrame({"t": np.array([lo, lo + 1, lo + 1, lo + 5], dtype=np.int64)})
    w = Workload.of(d, [Query.conjunction(d, {"t": IntervalSet.points([c])}) for c in range(6)])
    assert count(frame, w).answers.tolist() == [1, 2, 0, 0, 0, 1]
