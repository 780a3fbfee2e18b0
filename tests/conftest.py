"""Suite-wide fixtures: the shared real data sets, ``../shared/data`` beside the project root.

``TESSERA_SHARED_DATA`` overrides the location. Every test that reads the real data sets (Adult,
NLTCS) gets the directory through :func:`shared_data` (or a fixture built on it), which skips the
test with the path in the reason when the directory is absent, so the suite also runs outside
this workplace.
"""

from __future__ import annotations

import os

# One BLAS thread per process, set before numpy and scipy load their OpenBLAS (the variables are
# read once, at load; a value the caller set wins): the suite runs one process per core
# (``-n 2``), and the solvers it calls many thousand times on tiny problems (L-BFGS-B, SLSQP,
# small least squares) spend far more CPU in OpenBLAS's idle threads than in the work — 30×
# for scipy's L-BFGS-B on a five-variable problem. The answers are the same single-threaded.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
if "numpy" in __import__("sys").modules and os.environ["OPENBLAS_NUM_THREADS"] == "1":
    try:  # a plugin loaded numpy first: limit the pools it already started
        from threadpoolctl import threadpool_limits
    except ImportError:
        pass
    else:
        threadpool_limits(1)

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def shared_data_path() -> Path:
    """Where the shared data sets are expected (whether or not they are there)."""
    return Path(os.environ.get("TESSERA_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data directory; skips the test when it is absent."""
    path = shared_data_path()
    if not path.is_dir():
        pytest.skip(
            f"shared data not found at {path}: the real data sets (Adult, NLTCS) live in "
            "../shared/data beside the project root, or set TESSERA_SHARED_DATA"
        )
    return path


@pytest.fixture(scope="session")
def adult_domain_json(shared_data: Path) -> Path:
    """``adult-domain.json`` (attribute sizes of the preprocessed Adult data set)."""
    path = shared_data / "adult-domain.json"
    if not path.exists():
        pytest.skip(f"shared data file not found: {path}")
    return path


def skip_slow_unless_asked(config: pytest.Config, items: list[pytest.Item],
                           directory: Path) -> None:
    """Skip the tests marked ``slow`` under ``directory`` unless asked for: any ``-m``
    expression naming ``slow``, or ``TESSERA_RUN_SLOW=1`` (the long mode of a directory)."""
    if "slow" in (config.option.markexpr or "") or os.environ.get("TESSERA_RUN_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow: run with -m slow or TESSERA_RUN_SLOW=1")
    for item in items:
        if "slow" in item.keywords and directory in Path(str(item.path)).resolve().parents:
            item.add_marker(skip)
