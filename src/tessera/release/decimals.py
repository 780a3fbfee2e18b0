"""Budget figures as the decimals their floats print as, and back, rounded the safe way.

The ledger (:mod:`tessera.release.ledger`) reads every number — cost, total, bound — as the
decimal its float prints as (``repr``, which is also what its JSON record stores): 0.1 is one
tenth, so 0.3 + 0.7 and ten releases of 0.1 use a total of 1 exactly. Exact values are
:class:`~fractions.Fraction`; turning one back into a float rounds *up* for an upper bound
(:func:`float_up`) and *down* for a lower bound or what remains (:func:`float_down`,
:func:`remaining_budget`), and :func:`format_bound` prints a bound so that the printed number is
still a bound; :func:`format_budget` prints a ledger's figures to the precision of its total
(spent rounded up, remaining down), so spending exactly 3 of 3 leaves "0", not 2.57e-12.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

__all__ = ["decimal_value", "float_down", "float_up", "format_bound", "format_budget",
           "remaining_budget"]


def decimal_value(x: float) -> Fraction:
    """The decimal a float prints as, exactly (``repr``: the shortest that reads back as it)."""
    return Fraction(repr(float(x)))


def float_up(value: Fraction) -> float:
    """The least float whose decimal (:func:`decimal_value`) is ≥ ``value``."""
    f = float(value)
    while decimal_value(f) < value:
        f = math.nextafter(f, math.inf)
    return f


def float_down(value: Fraction) -> float:
    """The greatest float whose decimal (:func:`decimal_value`) is ≤ ``value``."""
    f = float(value)
    while decimal_value(f) > value:
        f = math.nextafter(f, -math.inf)
    return f


def remaining_budget(total: float, spent: float) -> float:
    """total − spent in exact decimals, rounded down to 12 significant digits (0 if negative):
    a release whose own cost is at most this always fits, since spent + cost bounds the new
    spent budget (and a short decimal is a cost the ledger sums without rounding)."""
    left = decimal_value(total) - decimal_value(spent)
    if left <= 0:
        return 0.0
    ctx = decimal.Context(prec=12, rounding=decimal.ROUND_FLOOR)
    down = ctx.divide(decimal.Decimal(left.numerator), decimal.Decimal(left.denominator))
    return float_down(Fraction(down))


def format_bound(x: float, *, up: bool = True) -> str:
    """x to 6 significant digits, rounded up (an upper bound) or down (what remains), so that
    a printed bound is still one; short decimals print as they are."""
    text = repr(float(x))
    if len(text) <= 12 or not math.isfinite(x):
        return text
    near = decimal.Context(prec=6).create_decimal(text)
    if abs(Fraction(near) - decimal_value(x)) <= abs(decimal_value(x)) / 10**12:
        return text  # a hair off a short decimal (1.0000000000000004): the digits matter
    ctx = decimal.Context(prec=6, rounding=decimal.ROUND_CEILING if up else decimal.ROUND_FLOOR)
    return str(ctx.create_decimal(text).normalize(ctx))



#: Significant digits of a ledger's total that its printed figures keep (:func:`format_budget`).
BUDGET_DIGITS = 6


def format_budget(x: float, total: float, *, up: bool) -> str:
    """x rounded to a multiple of q = 10^(⌊log10 total⌋ − 5) — the 6th significant digit of
    the ledger's ``total`` — up (spent: still an upper bound) or down (remaining: still fits),
    printed without exponent or trailing zeros. 2.99999999999685 spent of 3 prints 3, the
    2.57e-12 remaining 0. A non-positive or non-finite total falls back to :func:`format_bound`."""
    if not (math.isfinite(x) and math.isfinite(total)) or total <= 0:
        return format_bound(x, up=up)
    exponent = math.floor(math.log10(total)) - (BUDGET_DIGITS - 1)
    steps = decimal_value(x) / Fraction(10) ** exponent
    n = math.ceil(steps) if up else math.floor(steps)
    return format(decimal.Decimal(n).scaleb(exponent).normalize(), "f")
