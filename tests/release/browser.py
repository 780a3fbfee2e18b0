"""Headless Chromium for tests that must see a page as a browser renders it.

:func:`chromium` finds the browser: in CI (``CI`` set to true) a missing browser FAILS the test,
since ``.ci/run`` installs it; elsewhere the test is skipped with the reason. :func:`screenshot`
and :func:`dump_dom` run one headless instance each with a throw-away profile, no network
services and a hard timeout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

#: Flags of every run: headless, no sandbox (CI runs as root), no GPU, no background traffic.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
TIMEOUT = 120.0


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def chromium() -> str:
    """The Chromium executable; fails under CI and skips elsewhere when it is missing."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        reason = ("chromium is not installed: the HTML report test needs a real browser "
                  "(apt-get install chromium; .ci/run installs it)")
        if in_ci():
            pytest.fail(reason + " — required in CI")
        pytest.skip(reason)
    return exe


def _run(args: list[str], profile: Path) -> subprocess.CompletedProcess[str]:
    cmd = [chromium(), *FLAGS, f"--user-data-dir={profile}", *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chromium did not finish within {TIMEOUT:.0f} s: {' '.join(cmd)}")
    if done.returncode != 0:
        pytest.fail(f"chromium exited with {done.returncode}: {done.stderr[-2000:]}")
    return done


def screenshot(page: Path, png: Path, width: int = 1200, height: int = 3000) -> Path:
    """A PNG of ``page`` (a local file) at the given window size."""
    _run([f"--screenshot={png}", f"--window-size={width},{height}", page.resolve().as_uri()],
         png.parent / f"profile-{png.stem}")
    if not png.exists():
        pytest.fail(f"chromium wrote no screenshot at {png}")
    return png


def dump_dom(page: Path, width: int = 1200, height: int = 3000,
             virtual_time_ms: int = 5000) -> str:
    """The DOM of ``page`` after load (scripts in the page have run) as serialised HTML."""
    done = _run([f"--window-size={width},{height}", f"--virtual-time-budget={virtual_time_ms}",
                 "--dump-dom", page.resolve().as_uri()],
                page.parent / f"profile-dom-{page.stem}")
    return done.stdout
