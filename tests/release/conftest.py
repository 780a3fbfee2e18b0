"""Tests marked ``slow`` in this directory run only when asked for.

``python -m pytest -m slow tests/release`` (any ``-m`` expression naming ``slow``) or
``TESSERA_RUN_SLOW=1`` runs them (the Adult two-way marginals, the reported 200-query release
and 400 random releases verified: several minutes); otherwise they are skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import skip_slow_unless_asked

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_slow_unless_asked(config, items, HERE)
