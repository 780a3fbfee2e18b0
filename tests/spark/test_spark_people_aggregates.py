"""Aggregate statements counting people give the same answers on Spark as on DuckDB (docs/
theory.md §3.14, "Aggregates counting people"): the same kept rows, each person's total in a
group summed and clamped once inside the engine — counts, sums and averages of schema
attributes and of a measure, with integer and text ids; only the sums leave Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tessera.data.source import encode
from tessera.data.spark_source import SparkSource
from tessera.privacy import PrivacyUnit
from tessera.release.aggregates import answer_aggregates, exact_linear
from tessera.release.budget import Budget
from tests.aggregates.test_people_engine import DOMAIN, by_pandas, table, workload

pytestmark = pytest.mark.xdist_group("spark")


@pytest.mark.parametrize("k,ids", [(2, "int"), (50, "text")])
def test_spark_sums_the_totals_duckdb_sums(tmp_path: Path, spark: Any, k: int, ids: str) -> None:
    frame = table()
    if ids == "text":
        frame["pid"] = "p" + frame["pid"].astype(str)
    path = tmp_path / "people.csv"
    frame.to_csv(path, index=False)
    w = workload()
    unit = PrivacyUnit("pid", k, "people")
    measures = tuple(w.measures)
    duck = exact_linear(DOMAIN, w.linear, encode(str(path), DOMAIN, unit=unit,
                                                 measures=measures)).tolist()
    on_spark = exact_linear(DOMAIN, w.linear, encode(SparkSource(str(path)), DOMAIN, unit=unit,
                                                     measures=measures)).tolist()
    assert on_spark == duck
    if k == 50:  # every row kept: pandas' per-person totals
        assert duck == by_pandas(w, frame)


def test_spark_release_answers_as_duckdb(tmp_path: Path, spark: Any) -> None:
    """The same seeded release (counts, sums, averages per person) on both engines."""
    path = tmp_path / "people.csv"
    table().to_csv(path, index=False)
    w = workload()
    unit = PrivacyUnit("pid", 3, "people")
    runs = [answer_aggregates(src, w, Budget.of(rho=0.5), unit=unit, seed=7).frame
            for src in (str(path), SparkSource(str(path)))]
    assert runs[0]["answer"].fillna(-1).tolist() == runs[1]["answer"].fillna(-1).tolist()


@pytest.mark.parametrize("count", ["rows", "people"])
def test_spark_exact_aggregates_as_duckdb(tmp_path: Path, spark: Any, count: str) -> None:
    """``tessera count`` on SELECT statements (:func:`exact_aggregates`): the same exact rows
    on both engines, after the same bounding."""
    from tessera.release.exact_aggregates import exact_aggregates

    path = tmp_path / "people.csv"
    table().to_csv(path, index=False)
    w = workload()
    unit = PrivacyUnit("pid", 2, count)
    runs = [exact_aggregates(src, w, unit=unit)
            for src in (str(path), SparkSource(str(path)))]
    assert runs[0].n_rows == runs[1].n_rows
    assert runs[0].frame.fillna(-1).equals(runs[1].frame.fillna(-1))
