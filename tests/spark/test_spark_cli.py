"""``--engine spark`` on the commands that read data gives DuckDB's output: ``count`` (exact
answers), ``answer`` with ``--seed`` (the same exact counts under the same seeded noise), and
the library's evaluation of synthetic data (what ``tessera evaluate`` calls)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.data.spark_source import SparkSource
from tessera.errors import DataError
from tessera.schema.domain import Domain
from tessera.synth.evaluate import evaluate
from tessera.workload.workload import Workload

#: one JVM for the Spark tests when run with --dist loadgroup
pytestmark = pytest.mark.xdist_group("spark")

SCHEMA = """attributes:
  age: {type: integer, min: 0, max: 20}
  job: {type: categorical, values: [a, b, c]}
  pay: {type: binned, edges: [0, 10, 20, 40]}
"""
WORKLOAD = """age BETWEEN 3 AND 12
job IN ('a', 'c') AND pay < 20
TRUE
"""


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(5)  # not-privacy-noise: test data
    n = 400
    frame = pd.DataFrame({"age": rng.integers(0, 21, n), "job": rng.choice(["a", "b", "c"], n),
                          "pay": rng.uniform(0, 40, n).round(1)})
    frame.to_parquet(tmp_path / "data.parquet", index=False)
    frame.to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text(WORKLOAD)
    return {"parquet": tmp_path / "data.parquet", "csv": tmp_path / "data.csv",
            "schema": tmp_path / "schema.yaml", "workload": tmp_path / "w.sql"}


def _run(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_count_engine_spark(spark: Any, files: dict[str, Path], fmt: str) -> None:
    common = ["count", str(files[fmt]), str(files["workload"]), "--schema", str(files["schema"])]
    duck = _run(*common)
    assert _run(*common, "--engine", "spark", "--spark-master", "local[2]") == duck
    assert duck.splitlines()[-1].endswith(",400")  # TRUE counts every row


def test_answer_engine_spark(spark: Any, files: dict[str, Path]) -> None:
    common = ["answer", str(files["parquet"]), str(files["workload"]), "--schema",
              str(files["schema"]), "--rho", "0.5", "--seed", "3"]
    assert _run(*common, "--engine", "spark") == _run(*common)


def test_unknown_engine_is_a_one_line_error(files: dict[str, Path]) -> None:
    res = CliRunner().invoke(app, ["count", str(files["csv"]), str(files["workload"]),
                                   "--schema", str(files["schema"]), "--engine", "hive"])
    assert res.exit_code == 2 and "--engine 'hive': use 'duckdb' or 'spark'" in res.output


def test_evaluate_reads_a_spark_source(spark: Any, files: dict[str, Path]) -> None:
    domain = Domain.load(files["schema"])
    w = Workload.load(files["workload"], domain)
    synthetic = pd.read_parquet(files["parquet"]).sample(100, random_state=1)
    on_spark = evaluate(SparkSource(str(files["parquet"])), synthetic, w)
    local = evaluate(str(files["parquet"]), synthetic, w)
    assert np.array_equal(on_spark.real, local.real) and on_spark.real_rows == 400


def test_spark_refuses_what_it_cannot_read(spark: Any, files: dict[str, Path]) -> None:
    domain = Domain.load(files["schema"])
    w = Workload.load(files["workload"], domain)
    from tessera.data.counts import count
    from tessera.data.table import CsvOptions

    with pytest.raises(DataError, match="skip-rows"):
        count(SparkSource(str(files["csv"])), w, csv=CsvOptions(skip_rows=1))
    with pytest.raises(DataError, match="no such file"):
        count(SparkSource(str(files["csv"]) + ".missing"), w)


def test_synth_and_evaluate_engine_spark(spark: Any, files: dict[str, Path],
                                         tmp_path: Path) -> None:
    """``tessera synth --engine spark`` reads the same counts as DuckDB: the same seeded run
    writes the same rows; ``tessera evaluate --engine spark`` prints the same errors."""
    outs = {}
    for engine in ("duckdb", "spark"):
        out = tmp_path / f"synth-{engine}.csv"
        _run("synth", str(files["parquet"]), str(files["workload"]), "--schema",
             str(files["schema"]), "--rho", "1", "--rounds", "6", "--seed", "2", "-o", str(out),
             "--engine", engine, "--spark-master", "local[2]")
        outs[engine] = out.read_text()
    assert outs["spark"] == outs["duckdb"]
    common = ["evaluate", str(files["parquet"]), str(tmp_path / "synth-duckdb.csv"),
              str(files["workload"]), "--schema", str(files["schema"]), "--json"]
    assert _run(*common, "--engine", "spark", "--spark-master", "local[2]") == _run(*common)
