"""Spark and DuckDB keep the same rows of every person (docs/theory.md §3.13): the bounding rule
(md5 of the id and the row's domain codes, the first K per person) computed by each engine
gives identical kept rows — compared through the full joint marginal — from the same CSV and
from the same table held by each engine, with integer and text ids."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tessera.data.source import encode
from tessera.data.spark_source import SparkSource
from tessera.errors import DataError
from tessera.privacy import PrivacyUnit
from tessera.schema.domain import Domain

pytestmark = pytest.mark.xdist_group("spark")

DOMAIN = Domain.from_dict({"attributes": {
    "a": {"type": "integer", "min": 0, "max": 5},
    "b": {"type": "categorical", "values": ["x", "y", "z"]},
    "c": {"type": "boolean"},
}})


def frame(seed: int, ids: str) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 400
    pid = rng.integers(0, 30, n)
    return pd.DataFrame({
        "a": rng.integers(0, 6, n), "b": rng.choice(["x", "y", "z"], n),
        "c": rng.choice(["true", "false"], n),
        "pid": pid if ids == "int" else np.array([f"u{p:03d}" for p in pid]),
    })


def joint(table: Any) -> Counter[tuple[int, ...]]:
    cells, counts = table.group_by(list(DOMAIN.names))
    return Counter({tuple(int(c[i]) for c in cells): int(n) for i, n in enumerate(counts)})


@pytest.mark.parametrize("ids", ["int", "text"])
@pytest.mark.parametrize("k", [1, 3])
def test_same_rows_kept_from_a_csv(tmp_path: Path, spark: Any, ids: str, k: int) -> None:
    path = tmp_path / "people.csv"
    frame(7, ids).to_csv(path, index=False)
    unit = PrivacyUnit("pid", k)
    duck = encode(str(path), DOMAIN, unit=unit)
    on_spark = encode(SparkSource(str(path)), DOMAIN, unit=unit)
    assert on_spark.n_rows == duck.n_rows < 400
    assert joint(on_spark) == joint(duck)
    assert on_spark.dropped == duck.dropped == 0


@pytest.mark.parametrize("ids", ["int", "text"])
def test_same_rows_kept_from_frames(spark: Any, ids: str) -> None:
    f = frame(8, ids)
    unit = PrivacyUnit("pid", 2)
    duck = encode(f, DOMAIN, unit=unit)
    on_spark = encode(spark.createDataFrame(f), DOMAIN, unit=unit)
    assert joint(on_spark) == joint(duck)
    assert on_spark.n_rows == int(np.minimum(f.groupby("pid").size(), 2).sum())


def test_spark_refuses_what_duckdb_refuses(spark: Any) -> None:
    f = frame(9, "int")
    with pytest.raises(DataError, match="not in the data"):
        encode(spark.createDataFrame(f.drop(columns="pid")), DOMAIN,
               unit=PrivacyUnit("pid", 2))
    with pytest.raises(DataError, match="integer or text"):
        encode(spark.createDataFrame(f.assign(pid=f["pid"] * 0.5)), DOMAIN,
               unit=PrivacyUnit("pid", 2))
