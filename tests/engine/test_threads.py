"""One BLAS thread inside the fits (tessera.engine.threads): the limit holds inside every fit
the synthesizer and the GLS route run, and the caller's setting comes back afterwards."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import tessera.estimation.maxent as maxent
from tessera.engine import threads
from tessera.estimation.maxent import GroupMeasurement, ScopeModel
from tessera.estimation.prior import posterior_mode
from tessera.schema.domain import Domain


def blas_thread_counts() -> set[int]:
    return {int(p["num_threads"]) for p in threadpool_info() if p["user_api"] == "blas"}


requires_blas = pytest.mark.skipif(not blas_thread_counts(), reason="no BLAS library loaded")


@requires_blas
def test_the_limit_holds_inside_and_the_callers_setting_comes_back() -> None:
    seen: list[set[int]] = []

    @threads.one_blas_thread
    def work() -> None:
        seen.append(blas_thread_counts())

    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_thread_counts()
        work()
        assert blas_thread_counts() == before
    assert seen == [{1}]


@requires_blas
def test_no_limit_leaves_the_library_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(threads, "FIT_BLAS_THREADS", None)
    with threadpool_limits(limits=2, user_api="blas"):
        seen: list[set[int]] = []
        threads.one_blas_thread(lambda: seen.append(blas_thread_counts()))()
        assert seen == [{2}]


def small_problem() -> tuple[ScopeModel, list[GroupMeasurement]]:
    dom = Domain.from_dict({"a": 2, "b": 3, "c": 2})
    model = ScopeModel(dom, [(0, 1), (1, 2)])
    rng = np.random.default_rng(0)  # not-privacy-noise: made-up measurements
    ms = [GroupMeasurement(s, rng.uniform(10, 60, int(np.prod([dom.sizes[a] for a in s]))), 5.0)
          for s in ((0, 1), (1, 2))]
    return model, ms


@requires_blas
@pytest.mark.parametrize("run", ["mirror descent", "posterior mode"])
def test_the_fits_run_with_one_thread(run: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every evaluation of the loss inside the fit sees one BLAS thread (a fit left undecorated
    sees the caller's two)."""
    model, ms = small_problem()
    seen: list[set[int]] = []
    loss = maxent.GaussianLoss.__call__

    def spy(self: maxent.GaussianLoss, mu: np.ndarray) -> tuple[float, np.ndarray]:
        seen.append(blas_thread_counts())
        return loss(self, mu)

    monkeypatch.setattr(maxent.GaussianLoss, "__call__", spy)
    with threadpool_limits(limits=2, user_api="blas"):
        if run == "mirror descent":
            maxent.fit(model, ms, 200.0, iterations=5)
        else:
            posterior_mode(model, ms, 200.0, iterations=5)
    assert seen and all(s == {1} for s in seen)
