"""The test suite's output carries no warning a user cannot act on, and hides nothing else: the
third-party warnings pyproject filters (PySpark's pandas-version notice, dd's finaliser
assertion) are each matched by their own text, category and module, while the same text from
elsewhere, another warning of the same library, and Tessera's own warnings still show."""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

import pytest
from _pytest.config import parse_warning_filter

from tessera.errors import QueryWarning

ROOT = Path(__file__).resolve().parents[2]
PANDAS = ("PySpark does not yet fully support pandas >= 3.0.0. Some features may not work "
          "correctly. It is recommended to use pandas < 3.0.0 for now.")
DD = ("Exception ignored in: <function BDD.__del__ at 0x7eff79054d60>\n\nTraceback (most recent "
      "call last):\n  File \".../dd/bdd.py\", line 280, in __del__\nAssertionError: There are "
      "nodes still referenced upon shutdown.")
UNRAISABLE = pytest.PytestUnraisableExceptionWarning


def _filters() -> list[str]:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(doc["tool"]["pytest"]["ini_options"].get("filterwarnings", []))


def _shown(message: str, category: type[Warning], module: str) -> bool:
    """Whether a warning passes the project's filters (as pytest applies the ini ones)."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for f in _filters():
            warnings.filterwarnings(*parse_warning_filter(f, escape=False))
        warnings.warn_explicit(message, category, f"{module.replace('.', '/')}.py", 1,
                               module=module)
    return bool(seen)


@pytest.mark.parametrize(("message", "category", "module", "shown"), [
    (PANDAS, FutureWarning, "pyspark.testing.utils", False),
    (PANDAS, FutureWarning, "pyspark.sql.pandas.conversion", False),
    (PANDAS, FutureWarning, "tessera.data.spark_source", True),     # not PySpark's: shown
    ("DataFrame.foo is deprecated", FutureWarning, "pyspark.pandas.frame", True),
    (DD, UNRAISABLE, "_pytest.unraisableexception", False),
    ("Exception ignored in: <function Other.__del__ at 0x1>", UNRAISABLE,
     "_pytest.unraisableexception", True),
    ("query name 'x' is already used", QueryWarning, "tessera.workload.workload", True),
], ids=["pyspark-utils", "pyspark-conversion", "same-text-elsewhere", "other-pyspark-warning",
        "dd-finaliser", "other-finaliser", "tessera-warning"])
def test_project_warning_filters_are_precise(message: str, category: type[Warning],
                                             module: str, shown: bool) -> None:
    assert _shown(message, category, module) is shown
