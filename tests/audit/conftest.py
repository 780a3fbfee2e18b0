"""Tests marked ``slow`` in this directory run only when asked for (the long audit mode).

``python -m pytest -m slow tests/audit`` (any ``-m`` expression naming ``slow``) or
``TESSERA_RUN_SLOW=1 python -m pytest tests/audit`` runs them: the audits through OpenDP's
secure sampler, the synthesizers called end to end once per trial, and the audits repeated over
many seeds. Otherwise they are skipped, so the default run of this directory stays fast (a few
seconds of audits with ``-n 2``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import skip_slow_unless_asked

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_slow_unless_asked(config, items, HERE)
