"""Spark and DuckDB give the same exact sums of a measure (a real-valued column outside the
schema), per person bounded: the same kept rows, the same rounding to units."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tessera.data.source import encode
from tessera.data.spark_source import SparkSource
from tessera.errors import DataError
from tessera.privacy import PrivacyUnit
from tessera.release.aggregates import exact_linear
from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload
from tessera.workload.select import parse_statement

pytestmark = pytest.mark.xdist_group("spark")

DOMAIN = Domain.from_dict({"attributes": {
    "b": {"type": "categorical", "values": ["x", "y", "z"]},
}})
STATEMENTS = ["SELECT COUNT(*), SUM(CLAMP(amount, 0, 80.5)), AVG(CLAMP(amount, -10, 50)) "
              "FROM t GROUP BY b",
              "SELECT SUM(CLAMP(amount, -5.25, 100)) FROM t WHERE b <> 'z'"]


def test_same_measure_sums_on_spark_and_duckdb(tmp_path: Path, spark: Any) -> None:
    rng = np.random.default_rng(7)
    n = 200
    frame = pd.DataFrame({"b": rng.choice(["x", "y", "z"], n),
                          "amount": np.round(rng.normal(30, 40, n), 2),
                          "pid": rng.integers(0, 30, n)})
    frame.loc[:5, "pid"] = 3  # one person with many rows whose codes tie
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    w = AggregateWorkload(DOMAIN, tuple(parse_statement(s, DOMAIN)[0] for s in STATEMENTS))
    unit = PrivacyUnit("pid", 2)
    duck = exact_linear(DOMAIN, w.linear, encode(str(path), DOMAIN, measures=("amount",),
                                                 unit=unit))
    on_spark = exact_linear(DOMAIN, w.linear, encode(SparkSource(str(path)), DOMAIN,
                                                     measures=("amount",), unit=unit))
    assert duck.tolist() == on_spark.tolist()
    assert w.measures == {"amount": -4}  # the largest bound 100: units of 10^-4


def test_spark_refuses_a_missing_amount(tmp_path: Path, spark: Any) -> None:
    path = tmp_path / "d.csv"
    path.write_text("b,amount\nx,1.5\ny,\nz,abc\n")
    with pytest.raises(DataError, match="amount"):
        encode(SparkSource(str(path)), DOMAIN, measures=("amount",))


PAIRS = Domain.from_dict({"attributes": {
    "b": {"type": "categorical", "values": ["x", "y", "z"]},
    "c": {"type": "categorical", "values": ["u", "v"]},
}})
SUMS = ["SELECT b, SUM(CLAMP(amount, 0, 80.5)) FROM t GROUP BY b",
        "SELECT c, SUM(CLAMP(amount, 0, 80.5)) FROM t GROUP BY c",
        "SELECT b, c, SUM(CLAMP(amount, 0, 80.5)) FROM t GROUP BY b, c"]


def test_a_strategy_s_measured_sums_are_the_same_on_spark(tmp_path: Path, spark: Any) -> None:
    """The sums a strategy measures (SUM(u) over its counting queries: docs/theory.md §3.15,
    "Strategies for sums") are computed by the same engine code as the direct ones: Spark and
    DuckDB give the same integers, per person bounded, and a seeded release gives the same
    answers on both."""
    from tessera.release.aggregates import answer_aggregates
    from tessera.release.budget import Budget
    from tessera.release.sum_strategy import sum_strategy_plan

    rng = np.random.default_rng(11)
    n = 300
    frame = pd.DataFrame({"b": rng.choice(["x", "y", "z"], n), "c": rng.choice(["u", "v"], n),
                          "amount": np.round(rng.uniform(-5, 120, n), 2),
                          "pid": rng.integers(0, 40, n)})
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    w = AggregateWorkload(PAIRS, tuple(parse_statement(s, PAIRS)[0] for s in SUMS))
    unit = PrivacyUnit("pid", 3)
    plan = sum_strategy_plan(w, Budget.of(epsilon=1.0), unit=unit, strategy="auto")
    assert plan is not None and plan.families[0].name != "direct"  # a strategy was chosen
    duck = exact_linear(PAIRS, plan.measured, encode(str(path), PAIRS, measures=("amount",),
                                                     unit=unit))
    on_spark = exact_linear(PAIRS, plan.measured, encode(SparkSource(str(path)), PAIRS,
                                                         measures=("amount",), unit=unit))
    assert duck.tolist() == on_spark.tolist()
    releases = [answer_aggregates(source, w, Budget.of(epsilon=1.0), unit=unit, seed=5,
                                  strategy="auto", extra_columns="ignore")
                for source in (str(path), SparkSource(str(path)))]
    pd.testing.assert_frame_equal(releases[0].frame, releases[1].frame)
