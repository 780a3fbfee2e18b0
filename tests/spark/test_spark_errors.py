"""Bad data give Spark and DuckDB the same errors, and the same drops under ``drop``: values
outside the domain, values of the wrong type, NULLs, missing or misspelt columns — read from
the same Parquet or CSV file by both engines, under each ``on_invalid`` policy."""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera.data.spark_source as spark_data
from tessera.data.counts import count_encoded
from tessera.data.source import encode
from tessera.data.spark_source import SparkSource
from tessera.errors import DataError, DataWarning, QueryWarning
from tessera.schema.domain import Domain
from tessera.workload.builders import marginal_families, random_workload
from tessera.workload.workload import Workload

#: one JVM for the Spark tests when run with --dist loadgroup
pytestmark = pytest.mark.xdist_group("spark")

SETTINGS = settings(max_examples=8, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
#: A small schema of every kind, and clean rows for it.
DOMAIN = Domain.from_dict({"attributes": {
    "age": {"type": "integer", "min": 0, "max": 20},
    "job": {"type": "categorical", "values": ["a", "b", "c"]},
    "pay": {"type": "binned", "edges": [0, 10, 20, 40]},
    "ok": {"type": "integer", "min": 0, "max": 1, "missing": True},
}})


def _clean(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)  # not-privacy-noise: test data
    return pd.DataFrame({
        "age": rng.integers(0, 21, n),
        "job": rng.choice(["a", "b", "c"], n),
        "pay": rng.uniform(0, 40, n).round(2),
        "ok": rng.integers(0, 2, n),
    })


@st.composite
def bad_frames(draw: st.DrawFn) -> pd.DataFrame:
    """A clean frame with one to three faults injected."""
    frame = _clean(draw(st.integers(20, 60)), draw(st.integers(0, 1000)))
    n = len(frame)
    rows = st.lists(st.integers(0, n - 1), min_size=1, max_size=5, unique=True)
    for fault in draw(st.lists(st.sampled_from(
            ["age_out", "job_out", "pay_out", "age_text", "ok_null", "age_null", "missing",
             "misspelt"]), min_size=1, max_size=3, unique=True)):
        at = draw(rows)
        if fault == "age_out":
            frame.loc[at, "age"] = draw(st.sampled_from([-1, 21, 99]))
        elif fault == "job_out":
            frame.loc[at, "job"] = draw(st.sampled_from(["z", "A", " a", ""]))
        elif fault == "pay_out":
            frame.loc[at, "pay"] = draw(st.sampled_from([-0.5, 40.0, 1e6]))
        elif fault == "age_text":  # the wrong type: a text column with words among numbers
            frame["age"] = frame["age"].astype(str)
            frame.loc[at, "age"] = draw(st.sampled_from(["abc", "1x", "twelve"]))
        elif fault == "ok_null":  # declared missing: fine
            frame["ok"] = frame["ok"].astype("Int64")
            frame.loc[at, "ok"] = None
        elif fault == "age_null":  # not declared missing: invalid
            frame["age"] = frame["age"].astype(object)
            frame.loc[at, "age"] = None
        elif fault == "missing":
            frame = frame.drop(columns=[draw(st.sampled_from(list(frame.columns)))])
        elif fault == "misspelt" and "pay" in frame.columns:
            frame = frame.rename(columns={"pay": "Pay"})
    return frame


def _outcome(source: Any, policy: str, workload: Workload) -> tuple[Any, ...]:
    """The error's text, or what was kept and dropped with the counts."""
    try:
        enc = encode(source, DOMAIN, on_invalid=policy)  # type: ignore[arg-type]
    except DataError as e:
        return ("error", str(e))
    return ("ok", enc.n_rows, enc.dropped, [(iv.column, iv.values, iv.rows)
                                            for iv in enc.invalid],
            count_encoded(enc, workload).tolist())


with warnings.catch_warnings():  # seed 2 draws "job = 'b'" twice: renamed with a QueryWarning,
    warnings.simplefilter("ignore", QueryWarning)  # which is not what this file checks
    WORKLOAD = Workload.of(DOMAIN, random_workload(DOMAIN, 25, seed=2).queries, partitions=
                           marginal_families(DOMAIN, 2).partitions)


@SETTINGS
@given(frame=bad_frames(), policy=st.sampled_from(["error", "drop"]),
       fmt=st.sampled_from(["parquet", "csv"]))
def test_same_errors_and_drops(spark: Any, frame: pd.DataFrame, policy: str, fmt: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"bad.{fmt}"
        if fmt == "parquet":
            frame.to_parquet(path, index=False)
        else:
            frame.to_csv(path, index=False)
        duck = _outcome(str(path), policy, WORKLOAD)
        on_spark = _outcome(SparkSource(str(path)), policy, WORKLOAD)
    assert on_spark == duck


def test_policies_on_a_spark_dataframe(spark: Any) -> None:
    """A Spark DataFrame (not a path) under both policies: the error names the values; drop
    keeps the same rows as DuckDB on the pandas frame."""
    frame = _clean(50, 7)
    frame.loc[[3, 9], "age"] = 30
    frame.loc[[9, 11], "job"] = "zz"
    df = spark.createDataFrame(frame)
    assert _outcome(df, "error", WORKLOAD) == _outcome(frame, "error", WORKLOAD)
    kept = _outcome(df, "drop", WORKLOAD)
    assert kept == _outcome(frame, "drop", WORKLOAD)
    assert kept[1:3] == (47, 3)


def _columns_outcome(source: Any, policy: str) -> tuple[Any, ...]:
    """The error's text, or the warning's text with the counts, under ``extra_columns``."""
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        try:
            enc = encode(source, DOMAIN, extra_columns=policy)  # type: ignore[arg-type]
        except DataError as e:
            return ("error", str(e))
    said = [str(w.message) for w in heard if issubclass(w.category, DataWarning)]
    return ("ok", said, enc.n_rows, count_encoded(enc, WORKLOAD).tolist())


@pytest.mark.parametrize("fmt", ["parquet", "csv", "dataframe"])
def test_extra_columns_are_refused_or_ignored_as_on_duckdb(spark: Any, tmp_path: Path,
                                                            fmt: str) -> None:
    """Columns the schema does not declare: the same refusal naming them, and under
    ``ignore`` the same warning naming them and the same counts, on both engines."""
    frame = _clean(40, 5).assign(salary=1.5, zip="x")
    if fmt == "dataframe":
        duck_source: Any = frame
        spark_source: Any = spark.createDataFrame(frame)
    else:
        path = tmp_path / f"extra.{fmt}"
        if fmt == "parquet":
            frame.to_parquet(path, index=False)
        else:
            frame.to_csv(path, index=False)
        duck_source, spark_source = str(path), SparkSource(str(path))
    refused = _columns_outcome(spark_source, "error")
    assert refused == _columns_outcome(duck_source, "error")
    assert "2 columns that the schema does not declare: 'salary', 'zip'" in refused[1]
    ignored = _columns_outcome(spark_source, "ignore")
    assert ignored == _columns_outcome(duck_source, "ignore")
    assert ignored[1] == ["ignored 2 columns of the data that the schema does not declare "
                          "(--extra-columns ignore): 'salary', 'zip'"]
    assert ignored[2] == 40


def test_missing_pyspark_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pyspark.sql", None)  # import fails
    with pytest.raises(DataError, match=r"needs PySpark.*pip install"):
        spark_data.spark_session("local[1]")
