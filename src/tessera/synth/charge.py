"""What a synthesis run is calibrated in and what a ledger is charged for it (docs/theory.md §9).

**Budgets** (the target the user states, as :class:`tessera.Budget` states it):

===========  =====================================  ========================================
target       the run                                proven
===========  =====================================  ========================================
ε            pure ε (basic composition)             ε-DP; ρ-zCDP and (ε, δ) from its steps
ρ            ρ-zCDP                                 ρ-zCDP; (ε, δ) by the CKS20 conversion
(ε, δ)       the largest ρ with ρ-zCDP ⇒ (ε, δ)     ρ-zCDP, hence (ε, δ)
μ            ρ = μ²/2                               ρ-zCDP; μ-GDP is **not** proven (the
                                                    mechanisms are discrete)
===========  =====================================  ========================================

**Ledger charge.** A synthesis run reads every row in every round, so it is charged as a
workload every row pays its whole cost ``c`` (ε or ρ: the run's budget, which bounds what it
spends) for:

* add/remove neighbours: ONE query every row satisfies, the tautology ``TRUE``, cost ``c``;
* substitute neighbours: the tautology costs nothing there (replacing a row never changes its
  count), so the charge is the identity family — the marginal over every attribute, whose cells
  are the points of the domain — at ``c/2`` per cell: any two different rows lie in two
  different cells and pay ``c/2 + c/2 = c``. One cost per cell is stored compactly, but the
  ledger takes the costs as an array, so this is refused beyond :data:`IDENTITY_MAX_CELLS`
  points (use add/remove neighbours and an add/remove ledger there).

**A person** (a privacy id and at most K rows each, docs/theory.md §3.13): a person ledger adds
up K (ε) or K² (ρ) times what a row is charged, so a run that may spend B per person is
charged B/K (B/K²) per row (:func:`person_shares`), and is calibrated to exactly K (K²) times
that charge's decimal — B up to its 15th significant digit — so that the ledger's figure and
the run's proof are one number.

A ledger is an opened :class:`tessera.Ledger` used through its methods (:class:`LedgerLike`):
this layer never imports the release layer at run time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from tessera.errors import ResourceError, TesseraError
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.schema.domain import Domain
from tessera.synth.accounting import Budget as RunBudget
from tessera.workload.families import Partition
from tessera.workload.sizes import workload_size
from tessera.workload.workload import Workload

if TYPE_CHECKING:  # the release layer is a sibling of synth: no runtime import (lint-imports)
    from tessera.release.budget import Budget as ReleaseBudget

__all__ = [
    "IDENTITY_MAX_CELLS",
    "REPORTED_DELTAS",
    "LedgerLike",
    "Target",
    "check_ledger",
    "ledger_charge",
    "opened_ledger",
    "person_shares",
    "synthesis_mechanism",
]

#: δ values at which the run record states (ε, δ)-DP (as release certificates do).
REPORTED_DELTAS = (1e-5, 1e-6, 1e-9)
#: Largest domain (points) a substitute-neighbour ledger is charged over: the identity family
#: takes one cost per point (module docs).
IDENTITY_MAX_CELLS = 1 << 22


class LedgerLike(Protocol):
    """What :meth:`Synthesizer.fit` uses of a :class:`tessera.Ledger`."""

    definition: Definition
    neighbours: Neighbours
    unit: PrivacyUnit

    def charge(self, workload: Workload, costs: npt.ArrayLike, *, label: str,
               mechanism: str, unit: PrivacyUnit) -> Any: ...

    def check_unit(self, unit: PrivacyUnit) -> None: ...

    def mark_released(self, release_id: str) -> None: ...

    def mark_aborted(self, release_id: str) -> None: ...


# -- the budget --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A budget as the user asked for it and what the run is calibrated in.

    ``definition`` is PURE (``value`` = ε) or ZCDP (``value`` = ρ); ``notes`` say what the
    mapping means (a μ-GDP target is not proven); ``deltas`` are where (ε, δ) is reported."""

    asked: dict[str, Any]
    definition: Definition
    value: float
    notes: tuple[str, ...] = ()
    deltas: tuple[float, ...] = REPORTED_DELTAS

    @staticmethod
    def of(budget: ReleaseBudget | RunBudget) -> Target:
        """From a :class:`tessera.Budget` (ε, ρ, μ or (ε, δ)) or a
        :class:`tessera.synth.accounting.Budget` (ε or ρ), read through their fields."""
        definition = getattr(budget, "definition", None)
        if not isinstance(definition, Definition):
            raise TesseraError(f"not a budget: {budget!r}",
                               hint="tessera.Budget.of(epsilon=...) (or rho=, mu=, delta=)")
        if hasattr(budget, "value"):  # tessera.synth.accounting.Budget: ε or ρ as the run has it
            value = float(budget.value)
            key = "epsilon" if definition is Definition.PURE else "rho"
            return Target({"definition": definition.value, key: value}, definition, value)
        asked = dict(budget.to_dict()) if hasattr(budget, "to_dict") else {
            "definition": definition.value}
        run, total = budget.calibration, float(budget.total)
        notes: list[str] = []
        deltas = REPORTED_DELTAS
        if definition is Definition.GDP:
            notes.append(f"μ-GDP target μ = {budget.mu:g}: the run is calibrated as "
                         f"ρ = μ²/2 = {total:.6g}-zCDP; μ-GDP is NOT proven (the mechanisms "
                         "are discrete: the exponential mechanism and the discrete Gaussian)")
        elif definition is Definition.APPROX:
            notes.append(f"(ε, δ) target ({budget.epsilon:g}, {budget.delta:g}): the run is "
                         f"calibrated as ρ = {total:.6g}-zCDP, the largest ρ whose CKS20 "
                         "conversion gives it")
            deltas = tuple(sorted({*REPORTED_DELTAS, float(budget.delta)}, reverse=True))
        return Target(asked, run, total, tuple(notes), deltas)

    def kwargs(self) -> dict[str, float]:
        """The budget argument of :func:`~tessera.synth.ipmwu.ipmwu`."""
        return {"epsilon" if self.definition is Definition.PURE else "rho": self.value}


# -- the ledger --------------------------------------------------------------------------------


def ledger_charge(domain: Domain, cost: float,
                  neighbours: Neighbours | str) -> tuple[Workload, npt.NDArray[np.float64]]:
    """The workload and per-query costs that charge a synthesis run of cost ``cost`` (ε or ρ)
    to a ledger: the tautology at ``cost`` (add/remove) or the identity family at ``cost/2``
    per point (substitute; module docs)."""
    rel = Neighbours.parse(neighbours)
    if rel is Neighbours.ADD_REMOVE:
        return (Workload.from_sql(["TRUE"], domain, names=["synthetic data (every row)"]),
                np.array([float(cost)]))
    if domain.size > IDENTITY_MAX_CELLS:
        raise ResourceError(
            f"a substitute-neighbour ledger charges a synthesis run as the identity workload "
            f"(one cost per point of the domain): the domain has {domain.size:,} points, above "
            f"{IDENTITY_MAX_CELLS:,}",
            hint="use add/remove neighbours (--neighbours add-remove) with an add/remove "
                 "ledger: the run is then charged as one query, the tautology")
    family = Partition.marginal(domain, domain.names, name="synthetic data (every point)")
    w = Workload.of_families(domain, [family])
    return w, np.full(w.n_queries, float(cost) / 2.0)


def synthesis_mechanism(method: str, workload: Workload) -> str:
    """The mechanism a ledger records for a synthesis run: ``synthesis:<method> (<what it was
    fitted to>)``, e.g. ``synthesis:adaptive (66 marginals)`` — the charged stand-in
    (:func:`ledger_charge`) says nothing of the run, so this does (``tessera ledger show``
    prints it as ``synthesis (adaptive) of 66 marginals``)."""
    return f"synthesis:{method} ({workload_size(workload)})"


def person_shares(value: float, definition: Definition, unit: PrivacyUnit
                  ) -> tuple[float, float]:
    """(what the run is calibrated to, what a ledger charges a row) for a budget ``value`` (ε or
    ρ) of ``unit`` (module docs): ``(value, value)`` for a row; for a person the charge c is
    the 15-significant-digit decimal at most value/factor and the run gets the largest float at
    most factor × c (factor = K for ε, K² for ρ), so a person ledger's figure factor × c is at
    least what the run spends and at most ``value``."""
    if unit.is_row:
        return value, value
    factor = unit.factor(definition)
    share = Fraction(repr(value)) / factor
    charge = float(f"{float(share):.15g}")
    while Fraction(repr(charge)) > share:
        charge = math.nextafter(charge, 0.0)
    run_exact = Fraction(repr(charge)) * factor
    run = float(run_exact)
    while Fraction(run) > run_exact:
        run = math.nextafter(run, 0.0)
    if not (run > 0 and charge > 0):
        raise TesseraError(f"the budget {value!r} per person rounds to 0 per row",
                           hint="a larger budget, or a smaller --max-rows")
    return run, charge


def check_ledger(book: LedgerLike, definition: Definition, neighbours: Neighbours,
                 unit: PrivacyUnit = ONE_ROW) -> None:
    """Refuse a ledger of another definition, neighbour relation or unit of privacy than the
    run's (before any charge)."""
    if book.definition is not definition:
        raise TesseraError(
            f"the ledger counts {book.definition.label}, this run is calibrated in "
            f"{definition.label}",
            hint="use a ledger of the same definition (tessera ledger init --definition ...)")
    if book.neighbours is not neighbours:
        raise TesseraError(
            f"the ledger is for {book.neighbours.label} neighbours, this run for "
            f"{neighbours.label}: a ledger adds up spends under one relation only",
            hint=f"run with the ledger's relation (--neighbours {book.neighbours.value}), or "
                 f"use a ledger made for {neighbours.value} (tessera ledger init --neighbours "
                 f"{neighbours.value})")
    book.check_unit(unit)


def opened_ledger(ledger: Any) -> LedgerLike | None:
    """``ledger`` if it is an opened ledger (or None); a path or anything else is refused."""
    if ledger is None:
        return None
    if isinstance(ledger, (str, Path)):
        raise TesseraError(
            "pass an opened ledger: tessera.Ledger.open(path)",
            hint="tessera.synth does not open ledger files itself (it is a sibling layer of "
                 "tessera.release)")
    for name in ("charge", "mark_released", "mark_aborted", "definition", "neighbours", "unit",
                 "check_unit"):
        if not hasattr(ledger, name):
            raise TesseraError(f"not a ledger: {ledger!r} has no {name!r}")
    return ledger  # type: ignore[no-any-return]


