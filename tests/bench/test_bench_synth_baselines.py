"""bench/bench_synth_baselines.py runs every AIM/MST process under a fixed ``PYTHONHASHSEED``
(AIM iterates Python sets of attribute-name tuples: under a random hash seed the same
``np.random.seed`` gives different runs in different processes). Checked without running AIM:
the subprocess call is intercepted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.bench.scripts import load_bench


@pytest.fixture(scope="module")
def baselines():  # noqa: ANN201
    return load_bench("bench_synth_baselines")


@pytest.mark.parametrize("method", ["aim", "mst"])
def test_the_baseline_subprocess_runs_under_a_fixed_hash_seed(
        baselines, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str) -> None:  # noqa: ANN001
    calls: list[tuple[list[str], dict[str, Any]]] = []

    def fake_run(cmd: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append((cmd, kwargs))
        return subprocess.CompletedProcess(cmd, 1)  # "failed": nothing is cached or read

    monkeypatch.setattr(baselines, "CACHE", tmp_path)
    monkeypatch.setattr(baselines.subprocess, "run", fake_run)
    monkeypatch.setenv("PYTHONHASHSEED", "random")  # the caller's own setting is overridden
    monkeypatch.setenv("TESSERA_TEST_MARKER", "kept")
    with pytest.raises(RuntimeError, match=f"{method} failed"):
        baselines.run_cached("nltcs", 3, method, 1.0, 0, tmp_path, reuse=False)
    [(cmd, kwargs)] = calls
    assert cmd[2:4] == ["run", "--dataset"] and method in cmd
    env = kwargs["env"]
    assert env["PYTHONHASHSEED"] == baselines.HASH_SEED == "0"
    assert env["TESSERA_TEST_MARKER"] == "kept"  # the rest of the environment is passed on


def test_the_hash_seed_is_recorded_in_the_summary(baselines) -> None:  # noqa: ANN001
    assert "python_hash_seed" in baselines.SUMMARY_FIELDS


def test_a_run_started_by_hand_reexecutes_itself_under_the_seed(
        baselines, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    seen: list[tuple[str, list[str], dict[str, str]]] = []
    monkeypatch.setattr(baselines.os, "execve",
                        lambda path, argv, env: seen.append((path, argv, env)))
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    baselines.ensure_hash_seed(["bench_synth_baselines.py", "run", "--method", "aim"])
    [(path, argv, env)] = seen
    assert path == sys.executable and argv[1:] == ["bench_synth_baselines.py", "run",
                                                   "--method", "aim"]
    assert env["PYTHONHASHSEED"] == "0"
    seen.clear()
    monkeypatch.setenv("PYTHONHASHSEED", "0")
    baselines.ensure_hash_seed(["bench_synth_baselines.py"])
    assert not seen  # already under it: no re-execution
