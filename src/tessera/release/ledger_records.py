"""What the budget ledger (:mod:`tessera.release.ledger`) reports: the records it returns and
the errors it raises.

* :class:`Charge`: one committed charge, as recorded; :class:`LedgerEntry`: a charge with its
  workload and costs; :class:`LedgerSummary`: the total, the spent budget and every release.
* :class:`LedgerError` and :class:`LedgerBusy` come from the SQLite file
  (:mod:`tessera.release.ledger_store`) and from the fail-closed checks of the exact cost bound
  (:mod:`tessera.release.exact_costs`); :class:`BudgetExceeded` is a refusal by
  :meth:`tessera.release.ledger.Ledger.charge`, and carries the figures behind it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from tessera.errors import TesseraError
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.release.decimals import format_bound, format_budget, remaining_budget
from tessera.workload.aggregates import LinearQuery
from tessera.workload.sizes import counted
from tessera.workload.workload import Workload

__all__ = [
    "SYNTHESIS_PREFIX",
    "BudgetExceeded",
    "Charge",
    "LedgerBusy",
    "LedgerEntry",
    "LedgerError",
    "LedgerSummary",
    "Method",
    "Status",
    "charge_text",
]

Status = Literal["charged", "released", "aborted"]
Method = Literal["first", "union", "sequential"]


# -- errors ---------------------------------------------------------------------------------------


class LedgerError(TesseraError):
    """A ledger file that cannot be created, opened, read or written."""


class LedgerBusy(LedgerError):
    """Another process held the ledger's lock for longer than the timeout."""


class BudgetExceeded(TesseraError):
    """A release refused because the spent budget would exceed the total.

    ``spent`` is the (upper bound on the) budget spent before the release, ``cost`` what the
    release costs a row by itself, ``would_spend`` the bound on the spent budget with it,
    ``remaining`` = total − spent.
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        where: str | None = None,
        total: float = math.nan,
        spent: float = math.nan,
        cost: float = math.nan,
        would_spend: float = math.nan,
    ) -> None:
        super().__init__(message, hint=hint, where=where)
        self.total = total
        self.spent = spent
        self.cost = cost
        self.would_spend = would_spend

    @property
    def remaining(self) -> float:
        """total − spent, rounded down (see :func:`remaining_budget`)."""
        return remaining_budget(self.total, self.spent)

    def located(self, where: str) -> BudgetExceeded:
        inner = f"{self.where}: " if self.where else ""
        return BudgetExceeded(f"{inner}{self.message}", hint=self.hint, where=where,
                              total=self.total, spent=self.spent, cost=self.cost,
                              would_spend=self.would_spend)


# -- records --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Charge:
    """One committed charge (one release) as the ledger recorded it.

    * ``cost``: an upper bound on what the release alone costs a row, γ_c(Q_k);
    * ``spent_before`` / ``spent_after``: upper bounds on the spent budget S_{k−1}, S_k (the
      values the admission decision used); ``spent_lower`` ≤ S_k is what a witness row attains;
    * ``exact``: ``spent_after`` is S_k itself;
    * ``method``: ``first`` (no earlier release), ``union`` (maximum overlap of the union of
      all workloads) or ``sequential`` (spent_before + cost, rounded up);
    * ``status``: ``charged``, then ``released`` or ``aborted`` — the budget stays spent either
      way.
    """

    release_id: str
    seq: int
    created: str
    label: str
    mechanism: str
    n_queries: int
    cost: float
    spent_before: float
    spent_after: float
    spent_lower: float
    exact: bool
    method: Method
    status: Status


@dataclass(frozen=True)
class LedgerEntry:
    """A charge with its workload (re-parsed from the stored SQL) and its per-query costs.

    A release with sums of measures is charged as its linear queries
    (:meth:`~tessera.release.ledger.Ledger.charge_linear`): ``linear`` holds them, the
    workload their conditions q and the costs their c_q per unit of sensitivity (a sum's in
    units of its resolution); None for a release charged as counting queries."""

    charge: Charge
    workload: Workload
    costs: tuple[float, ...]
    linear: tuple[LinearQuery, ...] | None = None


@dataclass(frozen=True)
class LedgerSummary:
    """The state of a ledger: the total, the spent budget (an upper bound; ``exact`` when it is
    the maximum itself, ``spent_lower`` what a witness row attains) and every release."""

    path: str
    dataset: str
    definition: Definition
    neighbours: Neighbours
    total: float
    spent: float
    spent_lower: float
    exact: bool
    releases: tuple[Charge, ...]
    #: whose presence the budget protects: one row, or one person of at most K rows
    unit: PrivacyUnit = ONE_ROW

    @property
    def remaining(self) -> float:
        """total − spent, rounded down: a release costing at most this fits for sure."""
        return remaining_budget(self.total, self.spent)

    def describe(self) -> str:
        """A few lines for a terminal: figures to the 6th significant digit of the total, the
        spent ones rounded up and the remaining down (:func:`format_budget`); exact in JSON.

        Whether the spent budget is exact is said once, of the figure printed: "exact" when
        every value between the witness (``spent_lower``) and the bound (``spent``) prints as
        that figure — S lies between them, so the figure is S rounded up whichever path
        recorded it (an exact union solve, or a bound a rounding error above the witness);
        otherwise "≤ figure (an upper bound; at least … attained)"."""
        unit = "ρ" if self.definition is Definition.ZCDP else "ε"

        def up(x: float) -> str:
            return format_budget(x, self.total, up=True)

        spent = up(self.spent)
        if self.exact or up(self.spent_lower) == spent:
            shown = f"spent {spent} (exact)"
        else:
            shown = (f"spent ≤ {spent} (an upper bound; at least "
                     f"{format_budget(self.spent_lower, self.total, up=False)} attained)")
        lines = [
            f"ledger {self.path} (data set {self.dataset!r}): {self.definition.label}, "
            f"{self.unit.label(self.neighbours)}",
            f"total {unit} = {format_bound(self.total)}, {shown}, "
            f"remaining {format_budget(self.remaining, self.total, up=False)}; "
            f"{counted(len(self.releases), 'release')} (spent rounded up, remaining down)",
        ]
        for c in self.releases:
            lines.append(f"  #{c.seq} {c.created} {c.label!r}: {charge_text(c)}, {c.status}; "
                         f"alone {up(c.cost)}, spent after {up(c.spent_after)}")
        return "\n".join(lines)


#: How a synthesis run's charge names its mechanism: ``synthesis:<method>``, then what it was
#: fitted to in parentheses (:func:`tessera.synth.charge.synthesis_mechanism`).
SYNTHESIS_PREFIX = "synthesis:"


def charge_text(c: Charge) -> str:
    """What was charged, in words: ``33 queries (discrete_laplace)``, or for a synthesis run
    (charged as a stand-in workload every row pays in full, whose size says nothing to a
    person) ``synthesis (adaptive) of 66 marginals``."""
    if c.mechanism.startswith(SYNTHESIS_PREFIX):
        method, _, target = c.mechanism[len(SYNTHESIS_PREFIX):].partition(" (")
        return f"synthesis ({method})" + (f" of {target.rstrip(')')}" if target else "")
    return f"{counted(c.n_queries, 'query')} ({c.mechanism})"


# -- the ledger -----------------------------------------------------------------------------------
