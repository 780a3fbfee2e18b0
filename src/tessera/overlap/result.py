"""Values of the maximum-overlap computation (docs/theory.md §3).

The one number that may calibrate noise is :attr:`OverlapResult.bound`: an exact value of
γ_w(Q) or a proven upper bound on it. :attr:`OverlapResult.achieved` is what the witness attains,
a lower bound; it is there for reporting and must never calibrate noise.

Composition functions comp (docs/theory.md §3) have the form comp(Q') = g(Σ_{q∈Q'} h(w_q)):

=========  ===================  ==========  =====
``comp``   definition           h(w)        g(s)
=========  ===================  ==========  =====
``pure``   ε-DP, Σ ε_i          w           s
``gdp``    μ-GDP, √Σ μ_i²       w²          √s
``zcdp``   ρ-zCDP, Σ ρ_i        w²          s
=========  ===================  ==========  =====

so γ_w = g(S) with S = max_x Σ_{q: q(x)=1} h(w_q), the *score*. Solvers work on scores.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from tessera.errors import QueryError
from tessera.privacy import COMPOSABLE, ONE_ROW, Definition, Neighbours, PrivacyUnit


def composable(comp: Definition | str) -> Definition:
    """``comp`` as a :class:`~tessera.privacy.Definition` with a composition function
    g(Σ h(w)); a :class:`~tessera.errors.QueryError` naming the choices otherwise."""
    d = Definition.parse(comp)
    if d not in COMPOSABLE:
        raise QueryError(
            f"maximum overlap has no composition function for {d.label}",
            hint="use one of " + ", ".join(c.value for c in COMPOSABLE)
            + " ((ε,δ) and f-DP targets are calibrated through gdp or zcdp)",
        )
    return d


def h(comp: Definition, weights: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The per-query score h(w) of ``comp``."""
    w = np.asarray(weights, dtype=np.float64)
    if comp == "pure":
        return w.copy()
    if comp in ("gdp", "zcdp"):
        return w * w
    raise ValueError(f"unknown comp {comp!r}")


def g(comp: Definition, score: float) -> float:
    """The outer function g of ``comp`` (monotone, so upper bounds map to upper bounds)."""
    if comp == "gdp":
        return math.sqrt(max(score, 0.0))
    if comp in ("pure", "zcdp"):
        return float(score)
    raise ValueError(f"unknown comp {comp!r}")


@dataclass(frozen=True)
class Witness:
    """A domain point ``x`` (one code per attribute) and the queries it touches, I(x).

    Under substitution neighbours ``y`` is the second row and ``queries`` is I(x) Δ I(y). A
    person counted once per query (docs/theory.md §3.14): ``others`` are the person's further
    rows and ``queries`` the queries the rows cover together, ∪ I(r).
    """

    x: tuple[int, ...]
    queries: tuple[int, ...]
    y: tuple[int, ...] | None = None
    others: tuple[tuple[int, ...], ...] = ()

    @property
    def rows(self) -> tuple[tuple[int, ...], ...]:
        """Every row of the witness person: ``x`` and ``others``."""
        return (self.x, *self.others)


@dataclass(frozen=True)
class OverlapResult:
    """γ_w(Q) for one composition function and neighbour relation.

    * ``score_bound`` ≥ max score (always; equal when ``exact``), ``bound`` = g(score_bound):
      **the calibration value**.
    * ``score_achieved`` = score of the witness ≤ the maximum; ``achieved`` = g(score_achieved).
    * ``total_score`` = Σ_q h(w_q): sequential composition, for the utility gain.
    * ``unit``: whose presence the scores bound — one row, or one person of at most K rows, whose
      scores are K (pure) or K² (gdp, zcdp) times the row's (:func:`per_unit`); the witness is
      then one row of the person (of K identical ones).
    """

    comp: Definition
    neighbours: Neighbours
    score_bound: float
    score_achieved: float
    exact: bool
    method: str
    witness: Witness | None
    n_queries: int
    total_score: float
    notes: tuple[str, ...] = field(default=())
    unit: PrivacyUnit = ONE_ROW

    def __post_init__(self) -> None:
        if self.score_bound < self.score_achieved:
            raise ValueError("an upper bound below the achieved value: a solver bug")

    @property
    def bound(self) -> float:
        """γ_w(Q), exact or a proven upper bound: the only value to calibrate noise with."""
        return g(self.comp, self.score_bound)

    @property
    def achieved(self) -> float:
        """What the witness attains (a lower bound; never for calibration)."""
        return g(self.comp, self.score_achieved)

    @property
    def sequential(self) -> float:
        """comp(Q): the cost under basic sequential composition of every query."""
        # each counting query changes by at most 1 under either neighbour relation
        return g(self.comp, self.total_score)

    @property
    def utility_gain(self) -> float:
        """U = 1 − (noise scale calibrated to γ_w) / (noise scale under sequential composition)
        (docs/theory.md §3), with the calibration value γ_w = ``bound``.

        The scale is ∝ 1/ε_q (pure) or 1/μ_q (GDP), so U = 1 − γ_w/comp(Q) there; under zCDP
        σ ∝ ρ_q^{−1/2}, so U = 1 − √(γ_w/comp(Q)).
        """
        seq = self.sequential
        if seq <= 0:
            return 0.0
        ratio = self.bound / seq
        return 1.0 - (math.sqrt(ratio) if self.comp is Definition.ZCDP else ratio)

    def to_dict(self) -> dict[str, object]:
        return {
            "comp": self.comp,
            "neighbours": self.neighbours,
            "bound": self.bound,
            "achieved": self.achieved,
            "exact": self.exact,
            "score_bound": self.score_bound,
            "score_achieved": self.score_achieved,
            "method": self.method,
            "n_queries": self.n_queries,
            **({} if self.unit.is_row else {"privacy_unit": self.unit.to_dict()}),
            "sequential": self.sequential,
            "utility_gain": self.utility_gain,
            "witness": None
            if self.witness is None
            else {
                "x": list(self.witness.x),
                "y": None if self.witness.y is None else list(self.witness.y),
                "queries": list(self.witness.queries),
                **({"rows": [list(r) for r in self.witness.rows]} if self.witness.others
                   else {}),
            },
            "notes": list(self.notes),
        }


def per_unit(results: Sequence[OverlapResult], unit: PrivacyUnit, neighbours: Neighbours,
             factor: int) -> OverlapResult:
    """The maximum overlap per privacy unit (docs/theory.md §3.13) from the row-level results,
    one per relation of ``unit.row_relations(neighbours)``: score = ``factor`` × the largest
    row score (``factor`` = ``unit.factor(comp)``: K for ε, K² for μ² and ρ). The bound is
    rounded up and the witness's score down, so the bound stays an upper bound and the witness
    (K copies of the best row, or of the best pair) a lower one; exact when every solve was.

    >>> a = OverlapResult(Definition.PURE, Neighbours.ADD_REMOVE, 2.0, 2.0, True, "m", None, 3,
    ...                   3.0)
    >>> per_unit([a], PrivacyUnit("pid", 4), Neighbours.ADD_REMOVE, 4).bound
    8.0
    """
    bound = max(results, key=lambda r: r.score_bound)
    best = max(results, key=lambda r: r.score_achieved)
    exact = all(r.exact for r in results)
    k = unit.max_rows
    rows = "row" if k == 1 else "rows"
    which = " and ".join(r.neighbours.value for r in results)
    return OverlapResult(
        bound.comp, neighbours, _times(factor, bound.score_bound, up=True),
        _times(factor, best.score_achieved, up=False), exact,
        f"{factor} × the row score ({which}; {k} {rows} per person): {bound.method}",
        best.witness, bound.n_queries,
        _times(factor, max(r.total_score for r in results), up=True),
        tuple(n for r in results for n in r.notes), unit)


def _times(factor: int, x: float, *, up: bool) -> float:
    """factor × x as a float rounded up (``up``) or down: exact when representable."""
    y = factor * x
    if not math.isfinite(y) or Fraction(y) == factor * Fraction(x):
        return y
    return math.nextafter(y, math.inf if up else -math.inf)
