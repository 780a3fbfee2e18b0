"""One BLAS thread inside the iterative fits: :func:`one_blas_thread`.

The fits (the maximum-entropy descent, the posterior mode's L-BFGS, the non-negative least squares
from GLS) run thousands of iterations whose linear algebra is level 1: dot products, norms and
L-BFGS's two-loop recursion on vectors of 10⁴–10⁶ entries. OpenBLAS splits a vector over its
threads above a size threshold; for a level-1 operation the hand-off costs more than the
arithmetic, and on a machine whose cores are busy the waiting threads spin, burning CPU time
that no result needs. Measured on 2 cores at load 13 (``bench/bench_blas_threads.py``, seeded
fits of the adaptive synthesizer on the panel's tables): movielens took 220 s of CPU with
OpenBLAS's default two threads and 21 s with one (mean 2-way errors 0.1965 and 0.1977: the
summation order differs, so the fit and the rows differ slightly); quakes, arrests and
health_insurance 0.13–0.46× the CPU, the same rows. L-BFGS-B alone on a quadratic in 63,000
variables: 1.61 s against 0.07 s. Nothing in the fits is level 3, where threads pay.

The limit is set with ``threadpoolctl`` around the fit and restored after it, so a caller's own
BLAS work keeps its threads.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from threadpoolctl import threadpool_limits

__all__ = ["FIT_BLAS_THREADS", "blas_threads", "one_blas_thread"]

P = ParamSpec("P")
R = TypeVar("R")

#: BLAS threads inside a fit; ``None`` leaves the library's own setting (the benchmark's
#: baseline arm, ``bench/bench_blas_threads.py``).
FIT_BLAS_THREADS: int | None = 1


@contextmanager
def blas_threads(limit: int | None) -> Iterator[None]:
    """At most ``limit`` BLAS threads inside the ``with`` block (``None``: unchanged)."""
    if limit is None:
        yield
        return
    with threadpool_limits(limits=limit, user_api="blas"):
        yield


def one_blas_thread(fit: Callable[P, R]) -> Callable[P, R]:
    """Run ``fit`` with :data:`FIT_BLAS_THREADS` BLAS threads (read at each call)."""

    @functools.wraps(fit)
    def limited(*args: P.args, **kwargs: P.kwargs) -> R:
        with blas_threads(FIT_BLAS_THREADS):
            return fit(*args, **kwargs)

    return limited
