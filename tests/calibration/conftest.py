"""Tests marked ``slow`` in this directory run only when asked for.

``python -m pytest -m slow tests/calibration`` (any ``-m`` expression naming ``slow``) or
``TESSERA_RUN_SLOW=1`` runs them (the default split's reproducibility at 200 Adult queries,
about 40 s); otherwise they are skipped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import skip_slow_unless_asked

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_slow_unless_asked(config, items, HERE)
