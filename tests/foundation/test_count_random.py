"""Exact counts on small random tables equal brute force, whatever the GROUP BY packing."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tessera.data.counts import count, count_encoded
from tessera.data.source import encode
from tessera.errors import DataError
from tessera.schema.domain import Categorical, Domain, IntegerRange
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Query
from tessera.workload.workload import Workload
from tests.oracles.foundation import (
    SLOWEX,
    Draw,
    HypDraw,
    RngDraw,
    brute_count,
    gen_domain,
    gen_set_query,
    gen_table,
    numbered,
)


def _check(r: Draw, n_queries: int) -> None:
    domain = gen_domain(r, (1, 4))
    frame, codes = gen_table(r, domain, r.int(0, 80))
    sqs = [gen_set_query(r, domain, p_constrain=r.int(0, 3)) for _ in range(n_queries)]
    # numbered: random queries may repeat, and their SQL would name two queries alike
    w = Workload.of(domain, [s.to_query(domain) for s in sqs], numbered(sqs))
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
    w = Workload.from_sql(["x >= 0", "c = 'a'", "x <= 1 AND c = 'a'"], d)
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
    w = Workload.from_sql(["age > 1"], d)
    with pytest.raises(DataError) as e:
        count(pd.DataFrame({"agee": [1], "n": [1]}), w)
    assert "'age'" in str(e.value) and "did you mean 'agee'?" in str(e.value)
    with pytest.raises(DataError, match="cannot read data"):
        count([1, 2, 3], w)


def test_dataframe_column_typo_hint_is_not_about_headers() -> None:
    """A DataFrame has no header row to forget: a renamed column should get 'did you mean'."""
    d = Domain((IntegerRange(name="age", lo=0, hi=3),))
    with pytest.raises(DataError) as e:
        count(pd.DataFrame({"agee": [1]}), Workload.from_sql(["age > 1"], d))
    assert "did you mean 'agee'?" in str(e.value), str(e.value)


def test_big_integer_data_count_exactly() -> None:
    lo = 2**60
    d = Domain((IntegerRange(name="t", lo=lo, hi=lo + 5),))
    frame = pd.DataFrame({"t": np.array([lo, lo + 1, lo + 1, lo + 5], dtype=np.int64)})
    w = Workload.of(d, [Query.conjunction(d, {"t": IntervalSet.points([c])}) for c in range(6)])
    assert count(frame, w).answers.tolist() == [1, 2, 0, 0, 0, 1]


@pytest.mark.parametrize("seed", range(2))
def test_csv_files_count_like_brute_force(tmp_path: Path, seed: int) -> None:
    """The same random tables written as CSV (header, empty field = NULL) and read back."""
    r = RngDraw(np.random.default_rng(400 + seed))
    for i in range(8):
        domain = gen_domain(r, (1, 4))
        frame, codes = gen_table(r, domain, r.int(1, 60))
        path = tmp_path / f"t{i}.csv"
        frame.to_csv(path, index=False)
        sqs = [gen_set_query(r, domain) for _ in range(20)]
        w = Workload.of(domain, [s.to_query(domain) for s in sqs], numbered(sqs))
        got = count(path, w).answers.tolist()
        assert got == [brute_count(s, codes) for s in sqs], (domain, path.read_text()[:300])


@pytest.mark.parametrize(
    "values",
    [
        ("True", "False"),  # DuckDB's sniffer would read these as BOOLEAN
        ("1.10", "1.2"),  # ... as DOUBLE (1.1)
        ("10:30", "11:00"),  # ... as TIME (10:30:00)
        ("007", "042"),  # ... leading zeros
        ("1", "2", "10"),  # ... as BIGINT (harmless: '1' is canonical)
    ],
)
def test_csv_categorical_values_match_as_written(tmp_path: Path, values: tuple[str, ...]) -> None:
    """A categorical column is text: the file's spelling must match the schema's spelling."""
    d = Domain((Categorical(name="c", values=values), IntegerRange(name="n", lo=0, hi=3)))
    path = tmp_path / "c.csv"
    path.write_text("c,n\n" + "".join(f"{v},1\n" for v in values) + f"{values[0]},2\n")
    w = Workload.from_sql([f"c = '{v}'" for v in values], d)
    assert count(path, w).answers.tolist() == [2] + [1] * (len(values) - 1)


def _category_frames(values: list[str | None]) -> dict[str, object]:
    import polars as pl

    base = pd.DataFrame({"c": values, "n": [1, 2, 3, 0][: len(values)]})
    cat = base.assign(c=pd.Categorical(values))
    return {
        "pandas-object": base,
        "pandas-category": cat,
        "polars-categorical": pl.from_pandas(base).with_columns(pl.col("c").cast(pl.Categorical)),
        "arrow-dictionary": pa.Table.from_pandas(cat, preserve_index=False),
    }


def test_dictionary_encoded_columns_keep_their_nulls() -> None:
    """pandas 'category' / Arrow dictionary columns: a NULL is the missing code, never lost."""
    d = Domain(
        (
            Categorical(name="c", values=("a", "b"), missing=True),
            IntegerRange(name="n", lo=0, hi=3),
        )
    )
    w = Workload.from_sql(["c = 'a'", "c IS NULL", "n >= 1", "c = 'b' OR c IS NULL"], d)
    for name, frame in _category_frames(["a", "b", None, "a"]).items():
        result = count(frame, w)
        assert result.answers.tolist() == [2, 1, 3, 2], name
        assert result.n_rows == 4 and result.dropped == 0, name


def test_dictionary_encoded_null_without_missing_is_an_error() -> None:
    """Nothing is dropped silently: an undeclared NULL in a category column is a DataError."""
    d = Domain((Categorical(name="c", values=("a", "b")), IntegerRange(name="n", lo=0, hi=3)))
    w = Workload.from_sql(["c = 'a'", "n >= 0"], d)
    for name, frame in _category_frames(["a", "b", None, "a"]).items():
        with pytest.raises(DataError) as e:
            count(frame, w)
        assert "'c'" in str(e.value) and "None (1 rows)" in str(e.value), name


def test_values_with_stray_spaces_get_a_delimiter_hint(tmp_path: Path) -> None:
    """'a, b' files read with ',' give ' Male': the hint should point at the spaces/delimiter."""
    d = Domain(
        (IntegerRange(name="n", lo=0, hi=9), Categorical(name="sex", values=("Female", "Male")))
    )
    path = tmp_path / "s.csv"
    path.write_text("n,sex\n1, Male\n2, Female\n")
    with pytest.raises(DataError) as e:
        count(path, Workload.from_sql(["sex = 'Male'"], d))
    assert "' Male'" in str(e.value)
    hint = (e.value.hint or "").lower()
    assert "space" in hint or "delimiter" in hint, str(e.value)
