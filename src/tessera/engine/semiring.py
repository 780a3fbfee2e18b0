"""The two commutative semirings of the dynamic program (docs/theory.md §4, problem (7)).

Both are "log-domain" semirings over ℝ ∪ {−∞}: the product ⊗ is ``+`` (log-potentials add)
and the unit ``1̄`` is 0; the zero ``0̄`` is −∞ (an impossible assignment, a hard factor). They
differ only in the sum ⊕ used to forget a variable:

* max-plus: ``a ⊕ b = max(a, b)`` — max_x Σ_f θ_f f(x) (LP pricing, weighted overlap γ_w);
* log-sum-product: ``a ⊕ b = log(e^a + e^b)`` — log Σ_x exp(Σ_f θ_f f(x)) = log Z.

Only ``logaddexp``-style reductions are ever used, never ``e^a − e^b`` (docs/theory.md §4 numerics).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def logsumexp(a: FloatArray, axis: int | tuple[int, ...]) -> FloatArray:
    """log Σ exp(a) along ``axis``; an all −∞ slice gives −∞ (no warning, no NaN)."""
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis)


def _max(a: FloatArray, axis: int | tuple[int, ...]) -> FloatArray:
    return np.max(a, axis=axis)


@dataclass(frozen=True)
class Semiring:
    """(⊕, ⊗ = +, 0̄ = −∞, 1̄ = 0) on log-potentials; ``reduce`` is ⊕ along axes."""

    name: str
    reduce: Callable[[FloatArray, int | tuple[int, ...]], FloatArray]
    #: whether atom multiplicities count (sum-product) or not (max-plus: every code of an
    #: atom has the same value, so the max is attained by any of them)
    counts_multiplicity: bool


MAX_PLUS = Semiring("max-plus", _max, counts_multiplicity=False)
LOG_SUM_PRODUCT = Semiring("log-sum-product", logsumexp, counts_multiplicity=True)
