"""Exact counts on the raw UCI Adult files equal a plain pandas evaluation (docs/theory.md §1–2)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tessera.data.counts import count
from tessera.errors import DataError
from tessera.schema.domain import Categorical, Domain, IntegerRange
from tessera.workload.builders import random_workload
from tessera.workload.query import Query
from tessera.workload.workload import Workload

from .conftest import ADULT_CSV, ADULT_TEST_CSV

# Every test here counts a random workload, whose builder names queries by their SQL: a repeated
# draw is renamed with a QueryWarning, which is not what these tests check.
pytestmark = pytest.mark.filterwarnings("ignore::tessera.errors.QueryWarning")


class PandasOracle:
    """q(D) evaluated on a pandas DataFrame in value space, attribute by attribute."""

    def __init__(self, frame: pd.DataFrame, domain: Domain) -> None:
        self.domain = domain
        self.n = len(frame)
        self.cols: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for attr in domain:
            col = frame[attr.name]
            isna = col.isna().to_numpy()
            if isinstance(attr, Categorical):
                cat = pd.Categorical(col, categories=list(attr.values))
                codes = np.asarray(cat.codes)
                assert ((codes == -1) == isna).all(), f"{attr.name}: value outside the schema"
                self.cols[attr.name] = (codes, isna)
            else:
                self.cols[attr.name] = (col.to_numpy(dtype=float, na_value=np.nan), isna)

    def answer(self, q: Query) -> int:
        mask = np.ones(self.n, dtype=bool)
        for p in q.predicates:
            attr = self.domain[p.attribute]
            values, isna = self.cols[attr.name]
            hit = np.zeros(self.n, dtype=bool)
            for lo, hi in p.coverage.spans:
                top = min(hi, attr.n_values)  # codes ≥ n_values: the missing code only
                if lo < top:
                    if isinstance(attr, IntegerRange):
                        hit |= (values >= attr.lo + lo) & (values <= attr.lo + top - 1)
                    else:
                        assert isinstance(attr, Categorical)
                        hit |= np.isin(values, np.arange(lo, top))
                if attr.missing_code is not None and lo <= attr.missing_code < hi:
                    hit |= isna
            mask &= hit
        return int(mask.sum())

    def answers(self, w: Workload) -> list[int]:
        return [self.answer(q) for q in w.queries]


@pytest.mark.parametrize(("kind", "seed"), [("range", 11), ("set", 12), ("mixed", 13)])
def test_adult_data_counts_equal_pandas(adult_domain, adult_data_path, adult_frame, kind, seed):  # type: ignore[no-untyped-def]
    w = random_workload(adult_domain, 1000, kind=kind, attributes_per_query=(1, 4), seed=seed)
    result = count(adult_data_path, w, csv=ADULT_CSV)
    assert result.n_rows == len(adult_frame) == 32561
    assert result.dropped == 0 and result.invalid == ()
    want = PandasOracle(adult_frame, adult_domain).answers(w)
    assert result.answers.tolist() == want
    assert max(want) > 1000 and min(want) == 0  # both empty and big answers were exercised
    frame = result.to_frame()
    assert list(frame.columns) == ["query", "answer"] and len(frame) == len(w)


def test_adult_missing_values_and_sql_workload(adult_domain, adult_data_path, adult_frame):  # type: ignore[no-untyped-def]
    clauses = [
        "workclass IS NULL",
        "occupation IS NULL AND native-country IS NULL",
        "workclass IS NOT NULL AND NOT workclass = 'Private'",
        "workclass <> 'Private'",
        "age BETWEEN 30 AND 39 AND sex = 'Female' AND income = '>50K'",
        "capital-gain > 0 OR capital-gain IS NULL",
        "education-num >= 13 AND hours-per-week > 40",
        "native-country NOT IN ('United-States', 'Mexico')",
        "TRUE",
    ]
    w = Workload.from_sql(clauses, adult_domain)
    got = count(adult_data_path, w, csv=ADULT_CSV).answers.tolist()
    f = adult_frame
    want = [
        f.workclass.isna().sum(),
        (f.occupation.isna() & f["native-country"].isna()).sum(),
        (f.workclass.notna() & (f.workclass != "Private")).sum(),
        (f.workclass.notna() & (f.workclass != "Private")).sum(),  # NULL <> x is not true
        (f.age.between(30, 39) & (f.sex == "Female") & (f.income == ">50K")).sum(),
        (f["capital-gain"] > 0).sum(),
        ((f["education-num"] >= 13) & (f["hours-per-week"] > 40)).sum(),
        (
            f["native-country"].notna() & ~f["native-country"].isin(["United-States", "Mexico"])
        ).sum(),
        len(f),
    ]
    assert got == [int(x) for x in want]
    assert got[0] == 1836  # the documented number of '?' workclass rows in adult.data


def test_adult_test_labels_outside_schema(adult_domain, adult_test_path, adult_test_frame):  # type: ignore[no-untyped-def]
    """adult.test labels end in '.', which the schema does not declare: a DataError says so."""
    w = random_workload(adult_domain, 50, seed=3)
    labels = adult_test_frame.income.value_counts()
    assert set(labels.index) == {"<=50K.", ">50K."}
    with pytest.raises(DataError) as e:
        count(adult_test_path, w, csv=ADULT_TEST_CSV)
    text = str(e.value)
    assert "'income'" in text
    for value, n in labels.items():
        assert f"{value!r} ({n} rows)" in text, text
    assert f"{len(adult_test_frame)} rows outside the domain" in text
    assert "drop" in (e.value.hint or "")
    # the explicit drop policy counts what it dropped
    result = count(adult_test_path, w, csv=ADULT_TEST_CSV, on_invalid="drop")
    assert result.dropped == len(adult_test_frame) == 16281 and result.n_rows == 0
    assert result.answers.tolist() == [0] * len(w)
    assert [iv.column for iv in result.invalid] == ["income"]
    assert dict(result.invalid[0].values) == labels.to_dict()


def test_adult_test_with_its_own_labels(adult_domain, adult_test_path, adult_test_frame):  # type: ignore[no-untyped-def]
    attrs = tuple(
        Categorical(name="income", values=("<=50K.", ">50K.")) if a.name == "income" else a
        for a in adult_domain
    )
    d = Domain(attrs)
    w = random_workload(d, 1000, kind="mixed", attributes_per_query=(1, 3), seed=21)
    result = count(adult_test_path, w, csv=ADULT_TEST_CSV)
    assert result.n_rows == 16281 and result.dropped == 0
    assert result.answers.tolist() == PandasOracle(adult_test_frame, d).answers(w)


def test_adult_drop_counts_and_keeps_the_rest(adult_domain, adult_data_path, adult_frame):  # type: ignore[no-untyped-def]
    """Ages above a narrower max are invalid; 'drop' removes exactly those rows."""
    d = Domain(tuple(dataclasses.replace(a, hi=80) if a.name == "age" else a for a in adult_domain))
    w = random_workload(d, 800, attributes_per_query=(1, 3), seed=5)
    n_old = int((adult_frame.age > 80).sum())
    with pytest.raises(DataError) as e:
        count(adult_data_path, w, csv=ADULT_CSV)
    assert "'age'" in str(e.value) and f"{n_old} rows outside the domain" in str(e.value)
    assert "90 (" in str(e.value)  # the offending values are shown with their row counts
    result = count(adult_data_path, w, csv=ADULT_CSV, on_invalid="drop")
    assert result.dropped == n_old and result.n_rows == len(adult_frame) - n_old
    kept = adult_frame[adult_frame.age <= 80]
    assert result.answers.tolist() == PandasOracle(kept, d).answers(w)


def test_adult_undeclared_missing_is_an_error_with_hint(adult_domain, adult_data_path):  # type: ignore[no-untyped-def]
    d = Domain(
        tuple(
            dataclasses.replace(a, missing=False) if a.name == "workclass" else a
            for a in adult_domain
        )
    )
    w = random_workload(d, 10, seed=0)
    with pytest.raises(DataError) as e:
        count(adult_data_path, w, csv=ADULT_CSV)
    assert "'workclass'" in str(e.value) and "None (1836 rows)" in str(e.value)
    assert "missing: true" in (e.value.hint or "")


def test_adult_every_input_type_gives_the_same_answers(  # type: ignore[no-untyped-def]
    adult_domain, adult_data_path, adult_frame, tmp_path: Path
):
    w = random_workload(adult_domain, 600, kind="mixed", attributes_per_query=(1, 3), seed=9)
    want = count(adult_data_path, w, csv=ADULT_CSV).answers.tolist()
    table = pa.Table.from_pandas(adult_frame, preserve_index=False)
    parquet = tmp_path / "adult.parquet"
    pq.write_table(table, parquet)
    con = duckdb.connect()
    sources = {
        "pandas": adult_frame,
        "polars": pl.from_pandas(adult_frame),
        "pyarrow": table,
        "parquet": parquet,
        "parquet-str": str(parquet),
        "duckdb": con.from_arrow(table),
    }
    for name, source in sources.items():
        result = count(source, w)
        assert result.answers.tolist() == want, name
        assert result.n_rows == 32561, name


def test_adult_csv_wrong_options_are_data_errors(adult_domain, adult_data_path):  # type: ignore[no-untyped-def]
    w = random_workload(adult_domain, 5, seed=0)
    with pytest.raises(DataError) as e:  # the header row would be a data row: named columns missing
        count(adult_data_path, w, csv=dataclasses.replace(ADULT_CSV, header=True))
    assert "column" in str(e.value)
    with pytest.raises(DataError):
        count(adult_data_path.with_name("nope.data"), w, csv=ADULT_CSV)
