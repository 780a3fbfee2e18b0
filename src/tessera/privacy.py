"""The privacy vocabulary every layer shares: neighbour relations and privacy definitions.

This module depends on nothing but the standard library, so that the schema layer, the overlap
solvers, the accounting, the mechanisms and the CLI all speak of the *same* objects (see
``docs/theory.md`` §1 and §3).

Both are string enums: ``Neighbours.ADD_REMOVE == "add-remove"`` and
``Definition.PURE == "pure"`` hold, so values read from JSON, YAML or a command line compare
equal to the members, and a member serialises as its short token.

>>> Neighbours.parse("add/remove") is Neighbours.ADD_REMOVE
True
>>> Neighbours.SUBSTITUTE.label
'substitute one row'
>>> Definition.parse("rho-zcdp") is Definition.ZCDP
True
>>> Definition.GDP.label
'μ-GDP'
"""

from __future__ import annotations

import enum
import math

from tessera.errors import TesseraError

__all__ = ["BUDGET_RANGES", "COMPOSABLE", "DEFAULT_NEIGHBOURS", "Definition", "Neighbours",
           "check_budget"]


class Neighbours(enum.StrEnum):
    """Which data sets are neighbours (docs/theory.md §1).

    * ``ADD_REMOVE``: D' = D plus or minus one row (Smith et al.; "unbounded" DP). A counting query
      changes by at most 1.
    * ``SUBSTITUTE``: D' = D with one row replaced (Ghazi et al.; "bounded" DP). A row moving from x
      to y changes the queries in I(x) Δ I(y), so a partition costs 2, not 1.
    """

    ADD_REMOVE = "add-remove"
    SUBSTITUTE = "substitute"

    @property
    def label(self) -> str:
        """The relation in words, as every printed guarantee names it."""
        return _NEIGHBOUR_LABELS[self]

    @staticmethod
    def parse(text: str | Neighbours) -> Neighbours:
        """Read a relation from any of its usual spellings; a clear error otherwise."""
        if isinstance(text, Neighbours):
            return text
        t = str(text).strip().lower().replace("_", "-").replace(" ", "-")
        if t in {"add/remove", "add-remove", "addremove", "add-or-remove", "unbounded",
                 "add/remove-one-row"}:
            return Neighbours.ADD_REMOVE
        if t in {"substitute", "substitution", "replace", "bounded", "substitute-one-row"}:
            return Neighbours.SUBSTITUTE
        raise TesseraError(
            f"unknown neighbour relation {text!r}", hint="use 'add-remove' or 'substitute'"
        )


_NEIGHBOUR_LABELS = {
    Neighbours.ADD_REMOVE: "add/remove one row",
    Neighbours.SUBSTITUTE: "substitute one row",
}

#: The neighbour relation of the whole tool when none is given (answers, ledgers, synthesis,
#: the CLI): add/remove one row, under which n itself stays private.
DEFAULT_NEIGHBOURS = Neighbours.ADD_REMOVE


class Definition(enum.StrEnum):
    """A privacy definition (docs/theory.md §3).

    ``PURE`` ε-DP, ``APPROX`` (ε,δ)-DP, ``GDP`` μ-Gaussian DP, ``ZCDP`` ρ-zero-concentrated DP,
    ``FDP`` f-DP for a trade-off function f. The first three composable ones (:data:`COMPOSABLE`)
    have a composition function comp(Q') = g(Σ_{q∈Q'} h(w_q)) that the maximum-overlap solvers
    optimise: Σ w (pure), √Σ w² (GDP), Σ w² (zCDP).
    """

    PURE = "pure"
    APPROX = "approx"
    GDP = "gdp"
    ZCDP = "zcdp"
    FDP = "fdp"

    @property
    def label(self) -> str:
        """The definition in words, e.g. ``'ρ-zCDP'``."""
        return _DEFINITION_LABELS[self]

    @staticmethod
    def parse(text: str | Definition) -> Definition:
        """Read a definition from any of its usual spellings; a clear error otherwise."""
        if isinstance(text, Definition):
            return text
        t = str(text).strip().lower().replace("_", "-").replace(" ", "-")
        t = {"pure-dp": "pure", "epsilon": "pure", "eps": "pure", "ε-dp": "pure",
             "pure-ε-dp": "pure", "(ε,δ)-dp": "approx", "eps-delta": "approx",
             "epsilon-delta": "approx", "approximate": "approx", "mu-gdp": "gdp",
             "μ-gdp": "gdp", "rho-zcdp": "zcdp", "ρ-zcdp": "zcdp", "f-dp": "fdp"}.get(t, t)
        try:
            return Definition(t)
        except ValueError:
            raise TesseraError(
                f"unknown privacy definition {text!r}",
                hint="use one of: " + ", ".join(d.value for d in Definition),
            ) from None


_DEFINITION_LABELS = {
    Definition.PURE: "pure ε-DP",
    Definition.APPROX: "(ε,δ)-DP",
    Definition.GDP: "μ-GDP",
    Definition.ZCDP: "ρ-zCDP",
    Definition.FDP: "f-DP",
}

#: The definitions whose composition over a set of queries is g(Σ h(w)) (maximum overlap).
COMPOSABLE: tuple[Definition, ...] = (Definition.PURE, Definition.GDP, Definition.ZCDP)


# -- the budgets Tessera accepts -------------------------------------------------------------

#: The range of each budget parameter a release or a synthesis run accepts (docs/guide.md,
#: "Budgets"); anything outside it is refused at once, before any data is read. Below the lower
#: end the noise of one count is beyond any use (a standard deviation of millions at γ_w = 1)
#: and the exact calibration works with integers and sums of that size (minutes, or overflow);
#: above the upper end the guarantee says nothing (e^ε > 10^43) and its conversions overflow.
#: δ may be anything in (0, 1) (all of it is handled exactly).
BUDGET_RANGES: dict[str, tuple[float, float]] = {
    "ε": (1e-6, 100.0),
    "ρ": (1e-13, 1e4),
    "μ": (1e-6, 100.0),
}


def check_budget(symbol: str, value: object) -> float:
    """``value`` as a float if it is a number in :data:`BUDGET_RANGES` [``symbol``]; else a
    :class:`TesseraError` naming the value, the range and why."""
    low, high = BUDGET_RANGES[symbol]
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TesseraError(f"{symbol} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(v) or v <= 0:
        raise TesseraError(f"{symbol} must be a finite number > 0, got {value!r}",
                           hint=f"use {symbol} between {low:g} and {high:g} (docs/guide.md, "
                           "Budgets)")
    if v < low:
        raise TesseraError(
            f"{symbol} = {v:g} is below the smallest budget Tessera accepts, {low:g}: the noise "
            "would be millions of times any count (useless), and calibrating it exactly would "
            "take minutes or overflow",
            hint=f"use {symbol} between {low:g} and {high:g} (docs/guide.md, Budgets)")
    if v > high:
        raise TesseraError(
            f"{symbol} = {v:g} is above the largest budget Tessera accepts, {high:g}: such a "
            "guarantee protects nothing (the likelihood ratio may reach e^100) and its "
            "conversions overflow",
            hint=f"use {symbol} between {low:g} and {high:g} (docs/guide.md, Budgets)")
    return v
