"""Spark and DuckDB return identical exact counts on UCI Adult (docs/spark.md): random
predicate workloads, Boolean clauses and marginal families, counted from the same encoded
tables, and end to end through :func:`tessera.count` with a Spark DataFrame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera as ts
from tessera.data.counts import count_encoded
from tessera.data.duckdb_source import EncodedTable
from tessera.data.source import encode
from tessera.data.spark_source import SparkEncodedTable, SparkSource
from tessera.errors import DataError
from tessera.schema.domain import Domain
from tessera.workload.builders import marginal_families, random_workload
from tessera.workload.workload import Workload

#: one JVM for the Spark tests when run with --dist loadgroup
pytestmark = pytest.mark.xdist_group("spark")

SETTINGS = settings(max_examples=5, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def adult(shared_data: Path, spark: Any) -> tuple[Domain, EncodedTable, SparkEncodedTable]:
    """Adult encoded once by each engine, from the same CSV file."""
    csv, schema = shared_data / "adult.csv", shared_data / "adult-domain.json"
    if not csv.exists() or not schema.exists():
        pytest.skip(f"shared data file not found: {csv}")
    domain = Domain.load(schema)
    duck = encode(str(csv), domain)
    on_spark = encode(SparkSource(str(csv)), domain)
    assert isinstance(duck, EncodedTable) and isinstance(on_spark, SparkEncodedTable)
    return domain, duck, on_spark


def test_validation_agrees(adult: tuple[Domain, EncodedTable, SparkEncodedTable]) -> None:
    domain, duck, on_spark = adult
    assert (on_spark.n_rows, on_spark.dropped) == (duck.n_rows, duck.dropped) == (48842, 0)
    for p, q in zip(duck.present, on_spark.present):
        assert np.array_equal(p, q)


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 40),
       kind=st.sampled_from(["range", "set", "mixed"]),
       max_cells=st.sampled_from([1 << 19, 2048]))
def test_predicate_counts_identical(
    adult: tuple[Domain, EncodedTable, SparkEncodedTable], seed: int, n: int, kind: str,
    max_cells: int,
) -> None:
    """``max_cells`` 2048 forces the coarsened route (values mapped to classes inside Spark)."""
    domain, duck, on_spark = adult
    w = random_workload(domain, n, kind=kind, seed=seed)  # type: ignore[arg-type]
    expected = count_encoded(duck, w, max_cells=max_cells)
    assert np.array_equal(count_encoded(on_spark, w, max_cells=max_cells), expected)


@SETTINGS
@given(data=st.data())
def test_clause_counts_identical(
    adult: tuple[Domain, EncodedTable, SparkEncodedTable], data: st.DataObject
) -> None:
    domain, duck, on_spark = adult
    names = list(domain.names)
    clauses = []
    for _ in range(data.draw(st.integers(1, 6))):
        a, b = data.draw(st.lists(st.sampled_from(names), min_size=2, max_size=2, unique=True))
        x = data.draw(st.integers(0, domain[a].size - 1))
        y = data.draw(st.integers(0, domain[b].size - 1))
        clauses.append(f"\"{a}\" <= {x} OR NOT \"{b}\" = {y}")
    w = Workload.from_sql(clauses, domain)
    assert np.array_equal(count_encoded(on_spark, w), count_encoded(duck, w))


@SETTINGS
@given(data=st.data())
def test_marginal_counts_identical(
    adult: tuple[Domain, EncodedTable, SparkEncodedTable], data: st.DataObject
) -> None:
    domain, duck, on_spark = adult
    k = data.draw(st.integers(1, 3))
    attrs = data.draw(st.lists(st.sampled_from(list(domain.names)), min_size=k,
                               max_size=k + 1, unique=True))
    w = marginal_families(domain, k, [a for a in domain.names if a in attrs])
    expected = count_encoded(duck, w)
    assert expected.sum() == len(w.partitions) * duck.n_rows
    assert np.array_equal(count_encoded(on_spark, w), expected)


def test_count_api_with_a_spark_dataframe(shared_data: Path, spark: Any) -> None:
    """``tessera.count(spark_df, w)``: the same CountResult as on the pandas frame."""
    domain = Domain.load(shared_data / "adult-domain.json")
    frame = pd.read_csv(shared_data / "adult.csv").sample(5000, random_state=3)
    w = random_workload(domain, 40, seed=5)
    w = Workload.of(domain, w.queries, w.names, w.weights, partitions=marginal_families(
        domain, 2, ["age", "race", "sex"]).partitions)
    on_spark = ts.count(spark.createDataFrame(frame), w)
    local = ts.count(frame, w)
    assert (on_spark.n_rows, on_spark.dropped) == (local.n_rows, local.dropped) == (5000, 0)
    assert np.array_equal(on_spark.answers, local.answers)


def test_rows_never_leave_spark(adult: tuple[Domain, EncodedTable, SparkEncodedTable]) -> None:
    _, _, on_spark = adult
    with pytest.raises(DataError, match="never collects rows"):
        on_spark.codes()
    # families are counted by GROUP BY on Spark even when numpy is asked for
    w = marginal_families(adult[0], 1, ["sex"])
    assert count_encoded(on_spark, w, method="numpy").sum() == on_spark.n_rows
