"""Vectorised noise: validate integer answers and per-answer parameters, group by parameter.

OpenDP builds one measurement per noise parameter, and building plus invoking one through the
Python bindings costs ~0.1–0.2 ms whatever its length, while sampling costs a few µs per value. So
the samplers call OpenDP once per *distinct* parameter on the sub-vector of answers that use it
(docs/theory.md §7): 10^5 answers with a handful of scales cost a handful of calls.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from tessera.errors import TesseraError

__all__ = ["MAX_ABS_VALUE", "MAX_PARAMETER", "as_integer_values", "as_parameters", "by_parameter"]

#: Largest |true answer| accepted. OpenDP adds noise in i64 and *saturates* on overflow
#: (observed in 0.16), so answers keep a margin of 2^62 below the i64 limits.
MAX_ABS_VALUE = 2**62
#: Largest noise parameter accepted (scale b or σ): noise beyond 2^62 then has probability
#: below exp(-2^10), so saturation never happens in practice.
MAX_PARAMETER = 2.0**52


def as_integer_values(values: np.ndarray | list[int] | int) -> np.ndarray:
    """The true answers as a flat C-contiguous int64 array (an error for non-integers)."""
    arr = np.asarray(values)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TesseraError(
            f"the discrete mechanisms add noise to integer answers, got dtype {arr.dtype}",
            hint="round or count first; noise for real-valued answers is not provided here",
        )
    if arr.size and (int(arr.max()) > MAX_ABS_VALUE or int(arr.min()) < -MAX_ABS_VALUE):
        raise TesseraError("an answer exceeds ±2^62 (OpenDP adds noise in 64-bit integers)")
    return np.ascontiguousarray(arr.reshape(-1), dtype=np.int64)


def as_parameters(parameters: np.ndarray | float, n: int, name: str) -> np.ndarray:
    """Per-answer noise parameters as float64, broadcast to length ``n``; each in (0, 2^52]."""
    arr = np.asarray(parameters, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    else:
        arr = arr.reshape(-1)
        if arr.size != n:
            raise TesseraError(f"{arr.size} values of {name} for {n} answers")
    bad = ~(np.isfinite(arr) & (arr > 0) & (arr <= MAX_PARAMETER))
    if bad.any():
        raise TesseraError(
            f"{name} must be finite, positive and at most 2^52; got {arr[bad][0]!r}",
            where=f"answer {int(np.flatnonzero(bad)[0])}",
        )
    return arr


def by_parameter(parameters: np.ndarray) -> Iterator[tuple[float, np.ndarray]]:
    """``(parameter, positions)`` for each distinct parameter, positions in increasing order."""
    distinct, inverse = np.unique(parameters, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    ends = np.cumsum(np.bincount(inverse, minlength=distinct.size))
    start = 0
    for value, end in zip(distinct.tolist(), ends.tolist()):
        yield float(value), order[start:end]
        start = end
