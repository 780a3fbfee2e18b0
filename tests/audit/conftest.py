"""Tests marked ``slow`` in this directory run only when asked for (the long audit mode).

``python -m pytest -m slow tests/audit`` (any ``-m`` expression naming ``slow``) or
``TESSERA_RUN_SLOW=1 python -m pytest tests/audit`` runs them: the audits through OpenDP's
secure sampler, the synthesizers called end to end once per trial, and the audits repeated over
many seeds. Otherwise they are skipped, so the default run of this directory stays fast (a few
seconds of audits with ``-n 2``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "slow" in (config.option.markexpr or "") or os.environ.get("TESSERA_RUN_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or TESSERA_RUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords and HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(skip)
