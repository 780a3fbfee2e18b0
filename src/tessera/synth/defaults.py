"""What :class:`tessera.Synthesizer` fills in when given only a schema and a budget.

The constructor form ``Synthesizer(epsilon=1.0, domain=dom).fit_sample(df)`` (as SmartNoise,
SDV and synthcity are called) needs two things the explicit form ``fit(data, workload,
budget)`` is given:

* **the budget, stated as keywords** (:func:`stated_budget`): ``epsilon`` (pure ε-DP),
  ``rho`` (ρ-zCDP) or ``epsilon`` with ``delta`` ((ε, δ)-DP, calibrated as the largest ρ whose
  CKS20 conversion gives it, as :class:`tessera.Budget` does: docs/theory.md §3);
* **a default workload** (:func:`default_workload`): every 2-way marginal of the schema
  (AIM's and MST's usual target, McKenna et al. 2021, 2022) when it fits the engine's limits,
  else every 1-way marginal. The choice reads only public information (the schema, the options
  and the memory limit), never the data, and the run record says which was used and why.

Both are decided before any data is read or any budget is charged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tessera.accounting.zcdp import rho_for_epsilon_delta
from tessera.errors import ResourceError, TesseraError
from tessera.privacy import DEFAULT_NEIGHBOURS, Definition, check_budget
from tessera.schema.domain import Domain
from tessera.synth.accounting import Budget as RunBudget
from tessera.workload.builders import DEFAULT_MAX_CELLS, marginal_families
from tessera.workload.workload import Workload

__all__ = ["ApproxBudget", "BYTES_PER_COUNT", "DEFAULT_NOTE", "DefaultWorkload",
           "default_notes", "default_workload", "stated_budget"]

#: The exact count of one marginal cell is read as one 8-byte integer.
BYTES_PER_COUNT = 8

#: How the run record's note on a default workload starts.
DEFAULT_NOTE = "default workload: "


@dataclass(frozen=True)
class ApproxBudget:
    """An (ε, δ)-DP target read through the fields :class:`tessera.synth.charge.Target` reads
    (those of :class:`tessera.Budget`, which this layer does not import): the run is calibrated
    as ρ-zCDP with ρ the largest value whose CKS20 conversion gives (ε, δ)
    (:func:`tessera.accounting.zcdp.rho_for_epsilon_delta`)."""

    epsilon: float
    delta: float
    definition: Definition = Definition.APPROX

    @property
    def calibration(self) -> Definition:
        return Definition.ZCDP

    @property
    def total(self) -> float:
        return rho_for_epsilon_delta(self.epsilon, self.delta)

    def to_dict(self) -> dict[str, object]:
        return {"definition": self.definition.value, "epsilon": self.epsilon,
                "delta": self.delta}


def stated_budget(epsilon: float | None = None, delta: float | None = None,
                  rho: float | None = None) -> RunBudget | ApproxBudget | None:
    """The budget the keywords state: None when none is given; ``epsilon`` alone (or with
    ``delta`` = 0) pure ε-DP; ``epsilon`` with ``delta`` in (0, 1) (ε, δ)-DP; ``rho`` ρ-zCDP.
    Anything else is refused with the forms that are accepted."""
    if epsilon is None and rho is None:
        if delta is not None:
            raise TesseraError("delta= goes with epsilon=: (ε, δ)-DP")
        return None
    if epsilon is not None and rho is not None:
        raise TesseraError("give one budget: epsilon= (pure DP, or with delta= (ε, δ)-DP) or "
                           "rho= (zCDP), not both")
    if delta is not None and rho is not None:
        raise TesseraError("delta= goes with epsilon=: (ε, δ)-DP, not with rho=")
    if epsilon is not None and delta:
        if isinstance(delta, bool) or not 0.0 < delta < 1.0:
            raise TesseraError(f"δ must be in (0, 1), got {delta!r}")
        return ApproxBudget(check_budget("ε", epsilon), float(delta))
    return RunBudget.of(epsilon=epsilon, rho=rho, neighbours=DEFAULT_NEIGHBOURS)


@dataclass(frozen=True)
class DefaultWorkload:
    """The workload chosen for the user and the record's note saying which and why."""

    workload: Workload
    note: str


def default_workload(domain: Domain, check: Callable[[Workload], None],
                     memory_limit: int) -> DefaultWorkload:
    """Every 2-way marginal of ``domain`` (:func:`~tessera.workload.builders.marginal_families`)
    when its exact counts fit ``memory_limit`` (8 bytes a cell, the cells capped as the builder
    caps them) and ``check`` — the method's preflight, with its memory guards — accepts it;
    otherwise every 1-way marginal (also checked: a refusal of those reaches the caller). A
    schema of one attribute has only its 1-way marginal. ``check`` raises
    :class:`~tessera.errors.ResourceError` to refuse; any other error reaches the caller."""
    d = len(domain.names)
    if d >= 2:
        sizes = [a.size for a in domain]
        cells = (sum(sizes) ** 2 - sum(s * s for s in sizes)) // 2  # Σ_{a<b} |a|·|b|
        try:
            if cells * BYTES_PER_COUNT > memory_limit:
                raise ResourceError(f"their {cells:,} exact counts need "
                                    f"{cells * BYTES_PER_COUNT:,} bytes, over the memory limit "
                                    f"of {memory_limit:,}")
            two = marginal_families(domain, 2, max_cells=DEFAULT_MAX_CELLS)
            check(two)
        except ResourceError as e:
            reason = e.message
        else:
            return DefaultWorkload(two, f"{DEFAULT_NOTE}all {d * (d - 1) // 2} 2-way "
                                        f"marginals of the schema's {d} attributes (no "
                                        "workload was given)")
    else:
        reason = "the schema has one attribute"
    one = marginal_families(domain, 1)
    check(one)
    return DefaultWorkload(one, f"{DEFAULT_NOTE}all {d} 1-way marginals (no workload was "
                                f"given; the 2-way marginals were refused: {reason})")


def default_notes(notes: tuple[str, ...]) -> tuple[str, ...]:
    """The notes of a run (:attr:`tessera.synth.fitted.FittedSynthesizer.notes`) that say a
    default workload was fitted, which and why (none when the workload was given)."""
    return tuple(n for n in notes if n.startswith(DEFAULT_NOTE))
