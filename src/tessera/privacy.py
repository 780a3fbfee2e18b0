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
>>> PrivacyUnit("pid", 3).factor(Definition.ZCDP)
9
>>> PrivacyUnit("pid", 3).label(Neighbours.ADD_REMOVE)
"add/remove one person (privacy id 'pid', at most 3 rows each)"
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

from tessera.errors import TesseraError

__all__ = ["BUDGET_RANGES", "COMPOSABLE", "COUNTS", "DEFAULT_NEIGHBOURS", "MAX_ROWS_LIMIT",
           "ONE_ROW", "Definition", "Neighbours", "PrivacyUnit", "check_budget"]


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


# -- the unit of privacy -----------------------------------------------------------------------

#: What a counting query counts with a privacy unit: ``rows`` (every kept row, ``COUNT(*)``) or
#: ``people`` (every person with a kept row in the query, once: ``COUNT(DISTINCT id)``).
COUNTS = ("rows", "people")

#: The largest number of rows per person Tessera bounds to (a K past it protects nothing the
#: noise could still resolve: K² = 10^12 times a row's ρ).
MAX_ROWS_LIMIT = 1_000_000


@dataclass(frozen=True)
class PrivacyUnit:
    """Whose presence a guarantee protects (docs/theory.md §3.13): one row (the default,
    ``id_column=None``), or one *person* — every row sharing a value of ``id_column`` — of
    whom at most ``max_rows`` = K rows are kept before anything is counted (*bounding*: a
    person's rows are ordered by an MD5 hash of their contents and the first K kept, a rule
    that reads that person's rows alone, :mod:`tessera.data`). The id column is read only to
    group rows; it is never counted or released.

    **What a person costs.** Let a release add independent noise to linear queries
    f(D) = Σ_{x∈D} v(x) (counts: v_q(x) = q(x) ∈ {0, 1}) with per-query costs c_q (ε_q = 1/b_q,
    or ρ_q = 1/(2σ_q²), per unit of sensitivity), and let S = max_x Σ_q c_q v_q(x) be the row
    score (the maximum weighted overlap γ_w, docs/theory.md §3.8). A person's bounded rows
    r_1, …, r_k (k ≤ K) change f by Δ = Σ_i v(r_i). Then

    * pure ε: Σ_q c_q |Δ_q| ≤ Σ_i Σ_q c_q v_q(r_i) ≤ K·S (triangle inequality);
    * ρ-zCDP: Σ_q c_q Δ_q² ≤ Σ_q c_q k Σ_i v_q(r_i)² ≤ K·K·S (Cauchy–Schwarz, v² = v);

    and K copies of the row x* attaining S attain both (Δ = K v(x*)). So the person's cost is
    exactly :meth:`factor` × S: K·γ_w in L1 (ε) and K²·γ_w(c) in squared L2 (ρ), i.e. an ℓ2
    sensitivity K·√γ_w(c). The same factor is group privacy for any mechanism (Dwork–Roth
    Thm 2.2 for ε; Bun–Steinke 2016 Prop. 1.9 for ρ), which is how the synthesizer's
    exponential mechanism and count noise are scaled (their sensitivities times K).

    *Substitution of one person* (its ≤ K rows, possibly none, replaced by ≤ K other rows,
    possibly none): pair the old and new rows up; each pair is a row substitution and each
    unpaired row a row added or removed, J ≤ K changes u_1 … u_J in all with Δ = Σ_j u_j. As
    above Σ_q c_q |Δ_q| ≤ J·max(S_sub, S_ar) and Σ_q c_q Δ_q² ≤ J²·max(S_sub, S_ar) (u ∈ {−1,0,1}),
    attained by K copies of the worst pair, or of the worst row against none. S_ar ≤ S_sub does
    **not** hold in general (the tautology: S_ar = 1, S_sub = 0), so the row score is the
    larger of the two (:meth:`row_relations`). The number of rows is then not public.

    **Counting people** (``count="people"``, ``COUNT(DISTINCT id)``; docs/theory.md §3.14): each
    query counts the persons with at least one kept row in it, so one person moves it by 0 or 1
    — by [some kept row lies in q] — and costs the maximum weighted *coverage* of K records,
    C_K = max_{|R| ≤ K} Σ_q c_q [R ∩ q ≠ ∅], in ε and in ρ alike (|Δ_q| = Δ_q² ∈ {0, 1}); no
    factor applies (:meth:`factor` refuses), the overlap layer computes C_K
    (:mod:`tessera.overlap.coverage`). C_1 = S ≤ C_K ≤ min(K·S, Σ_q c_q).

    ``PrivacyUnit()`` (:data:`ONE_ROW`) is Tessera's unit when none is given: the relations of
    :class:`Neighbours` as they are.
    """

    id_column: str | None = None
    max_rows: int = 1
    count: str = "rows"

    def __post_init__(self) -> None:
        k = self.max_rows
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_ROWS_LIMIT:
            raise TesseraError(f"max_rows must be an integer from 1 to {MAX_ROWS_LIMIT:,}, got "
                               f"{k!r}", hint="the most rows of one person a release keeps "
                               "(--max-rows K)")
        if self.count not in COUNTS:
            raise TesseraError(f"unknown count {self.count!r}",
                               hint="--count rows (every kept row) or --count people (each "
                                    "person once per query)")
        if self.id_column is None:
            if self.count != "rows":
                raise TesseraError("--count people needs a privacy id column: it counts each "
                                   "person once per query",
                                   hint="--privacy-id COLUMN --max-rows K --count people")
            if k != 1:
                raise TesseraError(f"max_rows = {k} needs a privacy id column: without one the "
                                   "unit of privacy is one row",
                                   hint="give the column that identifies a person "
                                        "(--privacy-id COLUMN)")
            return
        if not isinstance(self.id_column, str) or not self.id_column.strip():
            raise TesseraError(f"the privacy id column must be a column name, got "
                               f"{self.id_column!r}", hint="--privacy-id COLUMN")

    @staticmethod
    def of(id_column: str | None = None, max_rows: int | None = None,
           count: str | None = None) -> PrivacyUnit:
        """The unit of a command line's ``--privacy-id``, ``--max-rows`` and ``--count``: the
        first two both or neither (there is no default K: it sets the noise, and every kept row
        beyond what a person needs is a choice of the curator); ``--count`` (rows, the default,
        or people) only with them."""
        if count is not None and count not in COUNTS:
            raise TesseraError(f"unknown --count {count!r}",
                               hint="rows (every kept row) or people (each person once per "
                                    "query: COUNT(DISTINCT id))")
        if id_column is None and max_rows is None:
            if count == "people":
                raise TesseraError("--count people needs --privacy-id and --max-rows: it "
                                   "counts each person once per query",
                                   hint="--privacy-id COLUMN --max-rows K --count people")
            return ONE_ROW
        if id_column is None:
            raise TesseraError("--max-rows needs --privacy-id: K bounds the rows of one person",
                               hint="--privacy-id COLUMN --max-rows K (or neither: one row)")
        if max_rows is None:
            raise TesseraError("--privacy-id needs --max-rows K: the most rows of one person "
                               "kept (each person's extra rows are dropped before counting)",
                               hint="--privacy-id COLUMN --max-rows K")
        return PrivacyUnit(id_column, max_rows, count or "rows")

    @property
    def is_row(self) -> bool:
        """Whether the unit is one row (no privacy id)."""
        return self.id_column is None

    @property
    def counts_people(self) -> bool:
        """Whether each query counts persons, once each (``count="people"``), not rows."""
        return self.count == "people"

    def factor(self, definition: Definition | str) -> int:
        """What one person pays in ``definition``'s additive currency, in multiples of the
        row score S (class docs): K for ε (pure), K² for ρ (zCDP) and for the squared μ of
        GDP (whose γ = √S then grows by K)."""
        d = Definition.parse(definition)
        k = self.max_rows
        if self.counts_people:
            raise TesseraError("a person counted once per query pays the maximum coverage of "
                               "K rows, not a multiple of a row's score",
                               hint="tessera.overlap.max_overlap(..., unit=) computes it "
                                    "(docs/theory.md §3.14)")
        if d is Definition.PURE:
            return k
        if d in (Definition.ZCDP, Definition.GDP):
            return k * k
        raise TesseraError(f"{d.label} has no additive per-row cost to scale by K",
                           hint="calibrate (ε, δ) and f-DP targets through ρ-zCDP")

    def row_relations(self, neighbours: Neighbours | str) -> tuple[Neighbours, ...]:
        """The row-level relations whose larger score a person pays K-fold (class docs): the
        relation itself for one row; add/remove for a person under add/remove; both under
        substitution of a person (rows replaced, added or removed)."""
        rel = Neighbours.parse(neighbours)
        if self.is_row or rel is Neighbours.ADD_REMOVE:
            return (rel,)
        return (Neighbours.ADD_REMOVE, Neighbours.SUBSTITUTE)

    @property
    def text(self) -> str:
        """E.g. ``'one person (privacy id 'pid', at most 3 rows each)'``."""
        if self.is_row:
            return "one row"
        rows = "row" if self.max_rows == 1 else "rows"
        once = ", counted once per query" if self.counts_people else ""
        return (f"one person (privacy id {self.id_column!r}, at most {self.max_rows} "
                f"{rows} each{once})")

    def label(self, neighbours: Neighbours | str) -> str:
        """The neighbour relation over this unit in words, as every printed guarantee names it
        (``'add/remove one row'``, ``'substitute one person (…)'``)."""
        rel = Neighbours.parse(neighbours)
        if self.is_row:
            return rel.label
        verb = "add/remove" if rel is Neighbours.ADD_REMOVE else "substitute"
        return f"{verb} {self.text}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"id_column": …, "max_rows": K}``, with ``"count": "people"`` when
        each person counts once per query (absent: rows, as before it could be chosen)."""
        out: dict[str, Any] = {"id_column": self.id_column, "max_rows": self.max_rows}
        if self.counts_people:
            out["count"] = self.count
        return out

    @staticmethod
    def from_dict(doc: Any) -> PrivacyUnit:
        """The unit a certificate, run record or ledger states (None: one row) from its
        ``id_column`` and ``max_rows`` (other, descriptive keys are the caller's to check); a
        clear error for anything else."""
        if doc is None:
            return ONE_ROW
        if not isinstance(doc, dict) or "id_column" not in doc or "max_rows" not in doc:
            raise TesseraError(f"not a privacy unit: {doc!r}",
                               hint='{"id_column": "pid", "max_rows": 3}')
        return PrivacyUnit(doc["id_column"], doc["max_rows"], doc.get("count", "rows"))


#: One row: the unit of privacy when no privacy id is given.
ONE_ROW = PrivacyUnit()


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
