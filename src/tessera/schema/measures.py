"""Measures: numeric data columns that are summed, never grouped on (docs/aggregates.md
"Measures", docs/theory.md §3.15).

A *measure* is a column of the data that is not a domain attribute — money with cents, hours,
a salary with millions of distinct values — named in ``SUM(CLAMP(x, lo, hi))`` or
``AVG(CLAMP(x, lo, hi))`` with public bounds. Two public objects describe it:

* its **resolution** 10^e: every value is clamped to [lo, hi] and rounded to a multiple of
  10^e, so a row adds the integer u(x) = round(clamp(x, lo, hi)/10^e) *units*; e is the
  largest exponent with every bound a multiple of 10^e and max|bound|/10^e ≤ 10^7 (seven
  significant digits of the largest bound: :func:`resolution_exponent`). The sums are integers
  of units, exact on every engine, and the discrete mechanisms apply unchanged.
* its **grid** (:class:`MeasureGrid`), a virtual ordered attribute of the *cost* domain whose
  values are the breakpoints of the clamps in units (every clamp bound of the workload, and 0
  when it lies between them). Every term c_q·|q(x)·clamp_q(u)|^p is, in u between two
  consecutive breakpoints, |affine|^p with the affine part of one sign, hence convex, so a
  record's cost (and a pair's, jointly convex) is largest at breakpoints (docs/theory.md
  §3.15, "Measures"): the grid keeps the weighted overlap exact.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, ClassVar

import numpy as np

from tessera.errors import QueryError
from tessera.schema.attributes import Attribute, Codes, Comparison, IntegerRange
from tessera.schema.intervals import IntervalSet

#: At most this many units in the largest |bound| of a measure (seven significant digits): the
#: cost factors |g|^2, doubled, stay below 2^53, exact in floating point.
MAX_UNITS = 10**7


def resolution_exponent(bounds: list[Decimal]) -> int:
    """e of the resolution 10^e (module docstring): the largest e ≤ floor(log10 max|b|) − 6
    with every bound an exact multiple of 10^e. Refused when the bounds' decimals would need
    more than :data:`MAX_UNITS` units."""
    top = max(abs(b) for b in bounds)
    e = (top.adjusted() - 6) if top != 0 else 0
    for b in bounds:
        if b != 0:
            e = min(e, int(b.normalize().as_tuple().exponent))
    if top / Decimal(10) ** e > MAX_UNITS:
        raise QueryError(
            f"the CLAMP bounds {', '.join(str(b) for b in bounds)} need more than "
            f"{MAX_UNITS:,} units of 10^{e} (too many significant digits)",
            hint="round the bounds to at most seven significant digits of the largest")
    return e


def to_units(bound: Decimal, e: int) -> int:
    """bound / 10^e, an integer by the choice of e."""
    q = bound.scaleb(-e)
    assert q == q.to_integral_value(), (bound, e)
    return int(q)


@dataclass(frozen=True, kw_only=True)
class MeasureGrid(Attribute):
    """The breakpoints of a measure's clamps, in units (increasing integers): code i stands for
    the value ``points[i]``. Virtual: it lives in the cost domain only; data are never coded on
    it."""

    points: tuple[int, ...]
    exponent: int = 0
    kind: ClassVar[str] = "measure"

    def __post_init__(self) -> None:
        if not self.points or list(self.points) != sorted(set(self.points)):
            raise ValueError(f"measure grid {self.name!r}: points must increase")

    @property
    def n_values(self) -> int:
        return len(self.points)

    def _encode_present(self, values: np.ndarray) -> Codes:
        raise QueryError(f"{self.name!r} is a measure: its values are summed, not coded")

    def value(self, code: int) -> Any:
        return self.points[code]

    def code_of(self, literal: Any) -> IntervalSet:
        raise QueryError(f"{self.name!r} is a measure: it can be summed, not compared",
                         hint="declare it as a schema attribute to filter or group on it")

    def compare(self, op: Comparison, literal: Any) -> IntervalSet:
        return self.code_of(literal)

    def _fields(self) -> dict[str, Any]:
        return {"points": list(self.points), "exponent": self.exponent}


def numeric_value(attr: Attribute, code: int) -> int:
    """The integer value of a present code of a summable attribute (an integer range or a
    measure grid)."""
    if isinstance(attr, IntegerRange):
        return attr.lo + code
    if isinstance(attr, MeasureGrid):
        return attr.points[code]
    raise TypeError(f"{attr.name!r} ({attr.kind}) is not summable")


def value_code(attr: Attribute, v: int) -> int:
    """The first code whose value is ≥ v (n_values when none): where a cell starts."""
    if isinstance(attr, IntegerRange):
        return min(max(v - attr.lo, 0), attr.n_values)
    if isinstance(attr, MeasureGrid):
        return bisect.bisect_left(attr.points, v)
    raise TypeError(f"{attr.name!r} ({attr.kind}) is not summable")


def grid_points(bounds: list[tuple[int, int]]) -> tuple[int, ...]:
    """The breakpoints of clamps [lo_i, hi_i] (in units): every bound, and 0 when it lies
    within [min lo, max hi] (module docstring)."""
    pts = {b for pair in bounds for b in pair}
    lo, hi = min(pts), max(pts)
    if lo < 0 < hi:
        pts.add(0)
    return tuple(sorted(pts))


def unit_size(e: int) -> Decimal:
    """10^e, exactly."""
    return Decimal(1).scaleb(e)


def is_summable(attr: Attribute) -> bool:
    return isinstance(attr, (IntegerRange, MeasureGrid))


__all__ = ["MAX_UNITS", "MeasureGrid", "grid_points", "is_summable", "numeric_value",
           "resolution_exponent", "to_units", "unit_size", "value_code"]
