"""One SparkSession for the Spark tests: local mode, two cores, two shuffle partitions, no UI.

The tests run in CI (``.ci/run`` installs the ``spark`` extra and Java 17). Without PySpark or
Java they are skipped locally, and fail under ``CI=true`` so CI cannot silently skip them.
Tests marked ``slow`` (a multi-executor ``local-cluster`` run) only with ``-m slow`` or
``TESSERA_RUN_SLOW=1``.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import skip_slow_unless_asked

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_slow_unless_asked(config, items, HERE)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"the Spark tests must run in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local SparkSession (``local[2]``, ``spark.sql.shuffle.partitions=2``, no UI), shared by
    every Spark test of this worker and stopped at the end."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        _unavailable('PySpark is not installed: pip install ".[dev,spark]"')
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        _unavailable("Java (17+) is not installed: Spark needs it (java -version)")
    sigint = signal.getsignal(signal.SIGINT)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("tessera-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.driver.memory", "1g")
        # the client JIT only and one GC thread: the tests' queries are tiny, and the JVM
        # otherwise spends most of its CPU compiling Spark's own code with C2
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    # PySpark's SIGINT handler outlives the context and fails on the interrupt xdist sends its
    # workers at shutdown (a PytestUnraisableExceptionWarning): put back the one it replaced
    if sigint is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, sigint)
