"""Ghazi et al.'s parameters of IPMWU and MWEM (T, β, m, rows) and their theory (docs/theory.md §5).

**Parameters** (:func:`default_parameters`, each overridable), Ghazi et al. §4.1 with L = ln|𝔻| (the
log of the number of points the constraints allow), N the normaliser, |F| the number of queries:

* pure ε:  α(T) = (L · ln(|F|T) / (N ε))^{1/3};
* ρ-zCDP:  α(T) = (√L · ln(|F|T) / (2 N √ρ))^{1/2} (the (ε,δ) rate of §4.1 with ε ≈ 2√(ρ ln(1/δ)));
* T = ⌈L/α(T)²⌉ (the smallest integer fixed point: the multiplicative-weights term √(L/T) equals
  the noise term), β = √(L/T), m = ⌈ln(|F|T)/α²⌉;
* rows = N, the data's own size (n, or the noisy n̂ under add/remove), like every method of
  :class:`~tessera.synth.synthesizer.Synthesizer` (the paper outputs m rows: ``rows=m``);

up to the constants the paper leaves out: α is an approximation, never a guarantee. Default T is
capped at :data:`MAX_DEFAULT_ROUNDS` and m at :data:`MAX_DEFAULT_SAMPLE` (the record says so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from tessera.errors import TesseraError
from tessera.privacy import Definition

__all__ = [
    "Expectations",
    "MAX_DEFAULT_ROUNDS",
    "MAX_DEFAULT_SAMPLE",
    "Parameters",
    "Update",
    "default_parameters",
    "positive_int",
    "with_alpha",
]

Expectations = Literal["sample", "exact"]
Update = Literal["unit", "mwem"]

#: Cap on the default number of rounds (the theory's T grows like (nε)^{2/3}).
MAX_DEFAULT_ROUNDS = 10_000
#: Cap on the default sample size m (and hence on the default number of output rows).
MAX_DEFAULT_SAMPLE = 1_000_000


# -- parameters ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Parameters:
    """T, β, m and the output size of a run, with the theory they came from.

    ``alpha`` is Ghazi et al.'s accuracy scale at these T (§4.1, up to constants and logarithmic
    factors): an approximation, not a guarantee. ``defaulted`` names the parameters that were
    derived (with ``" (capped)"`` when a cap bit)."""

    rounds: int
    step: float
    sample_size: int
    rows: int
    expectations: str
    update: str
    alpha: float
    log_domain_size: float
    n_queries: int
    normaliser: float
    defaulted: tuple[str, ...] = ()


def _alpha(rounds: int, log_domain: float, n_queries: int, normaliser: float,
           definition: Definition, value: float) -> float:
    lf = math.log(max(n_queries * rounds, 2))
    if definition is Definition.PURE:
        return (log_domain * lf / (normaliser * value)) ** (1.0 / 3.0)
    return (math.sqrt(log_domain) * lf / (2.0 * normaliser * math.sqrt(value))) ** 0.5


def default_parameters(
    *,
    log_domain_size: float,
    n_queries: int,
    normaliser: float,
    definition: Definition,
    value: float,
    rounds: int | None = None,
    step: float | None = None,
    sample_size: int | None = None,
    rows: int | None = None,
    expectations: Expectations = "sample",
    update: Update = "unit",
) -> Parameters:
    """Ghazi et al.'s parameters (module docstring) for a budget ``value`` (ε or ρ, what the rounds
    may spend) and normaliser N; any given value is kept as it is."""
    if expectations not in ("sample", "exact"):
        raise TesseraError(f"unknown expectations {expectations!r}", hint="'sample' or 'exact'")
    if update not in ("unit", "mwem"):
        raise TesseraError(f"unknown update {update!r}", hint="'unit' or 'mwem'")
    L = max(float(log_domain_size), 0.0)
    defaulted: list[str] = []

    def alpha(t: int) -> float:
        return _alpha(t, L, n_queries, normaliser, definition, value) if L > 0 else 0.0

    if rounds is None:
        def too_few(t: int) -> bool:  # is t below its own theoretical count ⌈L/α(t)²⌉?
            a = alpha(t)
            return a > 0 and math.ceil(L / (a * a)) > t

        lo, hi = 1, MAX_DEFAULT_ROUNDS
        if not too_few(lo) or too_few(hi):
            rounds = lo if not too_few(lo) else hi
        else:
            while hi - lo > 1:  # too_few is monotone: α(t) grows with t
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if too_few(mid) else (lo, mid)
            rounds = hi
        defaulted.append("rounds (capped)" if rounds == MAX_DEFAULT_ROUNDS else "rounds")
    positive_int(rounds, "rounds")
    a = alpha(int(rounds))
    if step is None:
        step = math.sqrt(L / rounds)
        defaulted.append("step")
    if not (math.isfinite(step) and step >= 0):
        raise TesseraError(f"the step β must be finite and ≥ 0, got {step!r}")
    if sample_size is None:
        lf = math.log(max(n_queries * rounds, 2))
        raw = lf / (a * a) if a > 0 else 1.0
        sample_size = int(min(MAX_DEFAULT_SAMPLE, max(1, math.ceil(raw))))
        defaulted.append("sample_size (capped)" if sample_size == MAX_DEFAULT_SAMPLE
                         else "sample_size")
    positive_int(sample_size, "sample_size")
    if rows is None:  # N rows, like the data (n, or n̂ under add/remove); the paper outputs m
        rows = int(min(MAX_DEFAULT_SAMPLE, max(1, round(normaliser))))
        defaulted.append("rows (capped)" if rows == MAX_DEFAULT_SAMPLE else "rows")
    if isinstance(rows, bool) or int(rows) != rows or rows < 0:
        raise TesseraError(f"rows must be an integer ≥ 0, got {rows!r}")
    return Parameters(int(rounds), float(step), int(sample_size), int(rows), expectations, update,
                      a, L, n_queries, float(normaliser), tuple(defaulted))


def positive_int(value: Any, name: str) -> None:
    """Refuse anything but an integer ≥ 1 (booleans too)."""
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise TesseraError(f"{name} must be a positive integer, got {value!r}")


def with_alpha(p: Parameters, alpha: float) -> Parameters:
    """``p`` with its accuracy scale α replaced (a replay keeps the original run's)."""
    return Parameters(p.rounds, p.step, p.sample_size, p.rows, p.expectations, p.update, alpha,
                      p.log_domain_size, p.n_queries, p.normaliser, p.defaulted)


