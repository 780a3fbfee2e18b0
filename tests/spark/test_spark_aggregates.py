"""Spark and DuckDB give the same exact counts and clamped sums of an aggregate workload, per
person bounded (tessera.release.aggregates.exact_linear reads the pieces' counts from the
engine that holds the data)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tessera.data.source import encode
from tessera.data.spark_source import SparkSource
from tessera.privacy import PrivacyUnit
from tessera.release.aggregates import exact_linear
from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload
from tessera.workload.select import parse_statement

pytestmark = pytest.mark.xdist_group("spark")

DOMAIN = Domain.from_dict({"attributes": {
    "a": {"type": "integer", "min": -3, "max": 9},
    "b": {"type": "categorical", "values": ["x", "y", "z"]},
}})
STATEMENTS = ["SELECT COUNT(*), SUM(a), AVG(CLAMP(a, 0, 5)) FROM t GROUP BY b",
              "SELECT SUM(CLAMP(a, -1, 2)) FROM t WHERE b <> 'z'"]


@pytest.mark.parametrize("k", [1, 3])
def test_same_sums_on_spark_and_duckdb(tmp_path: Path, spark: Any, k: int) -> None:
    rng = np.random.default_rng(5)
    n = 300
    frame = pd.DataFrame({"a": rng.integers(-3, 10, n), "b": rng.choice(["x", "y", "z"], n),
                          "pid": rng.integers(0, 40, n)})
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    w = AggregateWorkload(DOMAIN, tuple(parse_statement(s, DOMAIN)[0] for s in STATEMENTS))
    unit = PrivacyUnit("pid", k)
    duck = exact_linear(DOMAIN, w.linear, encode(str(path), DOMAIN, unit=unit))
    on_spark = exact_linear(DOMAIN, w.linear, encode(SparkSource(str(path)), DOMAIN, unit=unit))
    assert duck.tolist() == on_spark.tolist()
    # the groups' counts (count, sum, AVG's sum and count per group): ≤ K rows of 40 people
    assert duck[0] + duck[4] + duck[8] <= 40 * k
    # without bounding, the sums are pandas' clamped sums
    with pytest.warns(UserWarning, match="pid"):
        raw = exact_linear(DOMAIN, w.linear, encode(str(path), DOMAIN,
                                                    extra_columns="ignore"))
    by_b = frame.groupby("b")["a"]
    assert raw[1] == by_b.sum()["x"]
    assert raw[2] == frame[frame.b == "x"]["a"].clip(0, 5).sum()
    assert raw[-1] == frame[frame.b != "z"]["a"].clip(-1, 2).sum()
