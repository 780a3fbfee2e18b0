"""Counting people on Spark gives DuckDB's distinct counts (docs/theory.md §3.14): the same kept
rows, each person counted once per query — predicate queries, an OR clause and a marginal's
cells, with integer and text ids; only the counts leave Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tessera.data.counts import count
from tessera.data.spark_source import SparkSource
from tessera.privacy import PrivacyUnit
from tessera.workload.families import Partition
from tessera.workload.workload import Workload

from .test_spark_bounding import DOMAIN, frame

pytestmark = pytest.mark.xdist_group("spark")

SQL = ["a <= 2", "b = 'x' AND c", "a = 5 OR b = 'y'", "TRUE"]


@pytest.mark.parametrize("ids", ["int", "text"])
def test_spark_counts_the_people_duckdb_counts(tmp_path: Path, spark: Any, ids: str) -> None:
    path = tmp_path / "people.csv"
    frame(11, ids).to_csv(path, index=False)
    unit = PrivacyUnit("pid", 2, "people")
    wl = Workload.of(DOMAIN, list(Workload.from_sql(SQL, DOMAIN).queries),
                     partitions=[Partition.marginal(DOMAIN, ["a", "b"])])
    duck = count(str(path), wl, unit=unit).answers
    on_spark = count(SparkSource(str(path)), wl, unit=unit).answers
    assert list(on_spark) == list(duck)
    assert duck[3] == 30  # TRUE: every person once
    rows = count(str(path), wl, unit=PrivacyUnit("pid", 2)).answers
    assert all(p <= r for p, r in zip(duck, rows)) and list(duck) != list(rows)
