"""Shared fixtures: the UCI Adult files (through ``shared_data``: skipped when it is absent).

Tests marked ``slow`` in this directory (the 10⁶-line workload parsed in a child process whose
peak memory is asserted) run only with ``-m slow`` or ``TESSERA_RUN_SLOW=1``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tessera.data.table import CsvOptions
from tessera.schema.domain import Domain
from tests.conftest import skip_slow_unless_asked

REPO = Path(__file__).resolve().parents[2]
ADULT_SCHEMA = REPO / "examples" / "adult" / "schema.yaml"
#: How the raw Adult files are written: no header, ", " between fields, "?" for missing.
ADULT_CSV = CsvOptions(header=False, delimiter=", ", na_values=("?",))
ADULT_TEST_CSV = CsvOptions(header=False, delimiter=", ", na_values=("?",), skip_rows=1)
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_slow_unless_asked(config, items, HERE)


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared data missing: {path} (the Adult tests need the UCI files)")
    return path


@pytest.fixture(scope="session")
def adult_domain() -> Domain:
    return Domain.load(_need(ADULT_SCHEMA))


@pytest.fixture(scope="session")
def adult_raw(shared_data: Path) -> Path:
    """The raw UCI Adult files' directory in the shared data."""
    return shared_data / "adult-raw"


@pytest.fixture(scope="session")
def adult_data_path(adult_raw: Path) -> Path:
    return _need(adult_raw / "adult.data")


@pytest.fixture(scope="session")
def adult_test_path(adult_raw: Path) -> Path:
    return _need(adult_raw / "adult.test")


def read_adult_pandas(path: Path, domain: Domain, skip_rows: int = 0) -> pd.DataFrame:
    """The raw file read by pandas alone (the oracle's view of the data)."""
    return pd.read_csv(
        path,
        header=None,
        names=list(domain.names),
        sep=",",
        skipinitialspace=True,
        na_values=["?"],
        keep_default_na=False,
        skiprows=skip_rows,
    )


@pytest.fixture(scope="session")
def adult_frame(adult_data_path: Path, adult_domain: Domain) -> pd.DataFrame:
    return read_adult_pandas(adult_data_path, adult_domain)


@pytest.fixture(scope="session")
def adult_test_frame(adult_test_path: Path, adult_domain: Domain) -> pd.DataFrame:
    return read_adult_pandas(adult_test_path, adult_domain, skip_rows=1)
