"""What a workload costs: γ(Q) and γ_w(Q) under one definition and neighbour relation, and the
per-query noise scales for a budget (docs/theory.md §3).

This is what ``tessera overlap`` prints, as a value: :func:`workload_cost` runs the solves
(γ_w first, since it calibrates; γ for reference when the weights are not all 1) within one
time limit, and :meth:`WorkloadCost.scales` calibrates a budget from γ_w.

>>> from tessera.schema.domain import Domain
>>> from tessera.workload.workload import Workload
>>> dom = Domain.from_dict({"attributes": {"age": {"type": "integer", "min": 0, "max": 9}}})
>>> wl = Workload.from_sql(["age < 5", "age >= 5", "age BETWEEN 3 AND 6"], dom)
>>> cost = workload_cost(wl)
>>> cost.weighted.bound, cost.weighted.exact, cost.weighted.sequential
(2.0, True, 3.0)
>>> [round(float(b), 6) for b in cost.scales(1.0)]
[2.0, 2.0, 2.0]
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.calibration.scales import per_query_scales
from tessera.errors import QueryError
from tessera.overlap import OverlapResult, max_overlap
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.workload.files import require_at_most
from tessera.workload.workload import Workload

#: Share of the time limit that γ_w gets when γ is solved too (γ_w calibrates; γ informs).
WEIGHTED_SHARE = 0.75
#: :meth:`WorkloadCost.to_dict` lists per-query scales by name up to this many queries (a JSON
#: entry is ~100 bytes; 131,761,493 cells of Adult's 4-way marginals would be ~13 GB).
SCALES_MAX_QUERIES = 1_000_000

#: How each composable definition composes, as ``tessera overlap`` names it.
COMPOSITION_LABEL = {
    Definition.PURE: "pure ε-DP (Laplace, basic composition)",
    Definition.GDP: "μ-GDP (Gaussian differential privacy)",
    Definition.ZCDP: "ρ-zCDP (zero-concentrated DP)",
}
#: The symbol of each composable definition's budget, and the noise scale it calibrates.
BUDGET_SYMBOL = {Definition.PURE: "ε", Definition.GDP: "μ", Definition.ZCDP: "ρ"}
# GDP is proven for the continuous Gaussian; a discrete Gaussian is calibrated through zCDP
SCALE_NAME = {
    Definition.PURE: "Laplace b",
    Definition.GDP: "continuous Gaussian σ",
    Definition.ZCDP: "Gaussian σ (continuous or discrete)",
}


@dataclass(frozen=True)
class WorkloadCost:
    """γ_w (``weighted``, the calibration value) and γ (``unweighted``) of ``workload``.

    Both are exact or proven upper bounds (``.exact`` says which); ``weighted.bound`` is the
    only number that calibrates noise.
    """

    workload: Workload
    definition: Definition
    neighbours: Neighbours
    weighted: OverlapResult
    unweighted: OverlapResult
    #: whose presence γ bounds: one row, or one person of at most K rows (docs/theory.md §3.13)
    unit: PrivacyUnit = ONE_ROW

    @property
    def guarantee_label(self) -> str:
        """E.g. ``'pure ε-DP (Laplace, basic composition), add-remove neighbours'``."""
        if not self.unit.is_row:
            return f"{COMPOSITION_LABEL[self.definition]}, {self.unit.label(self.neighbours)}"
        return f"{COMPOSITION_LABEL[self.definition]}, {self.neighbours.value} neighbours"

    @property
    def status(self) -> str:
        """``'exact'`` or ``'upper bound'`` for the calibration value."""
        return "exact" if self.weighted.exact else "upper bound"

    def scales(self, budget: float) -> npt.NDArray[np.float64]:
        """Per-query noise scale for a total ``budget`` (ε, μ or ρ): Laplace b or Gaussian σ;
        ∞ for a query of weight 0 (not released)."""
        if not (np.isfinite(budget) and budget > 0):
            raise QueryError(f"budget {budget} must be a finite number > 0")
        return per_query_scales(self.weighted, self.workload.weight_array(), budget)

    def witness_row(self, substituted: bool = False) -> dict[str, str] | None:
        """The witness row of γ_w as ``{attribute: value label}``; ``substituted``: the row it
        is replaced by (substitute neighbours). None when there is no such row."""
        witness = self.weighted.witness
        codes = None if witness is None else (witness.y if substituted else witness.x)
        if codes is None:
            return None
        return {a.name: a.label(c) for a, c in zip(self.workload.domain, codes)}

    def witness_queries(self) -> list[str]:
        """Names of the queries the witness of γ_w touches (none without a witness)."""
        witness = self.weighted.witness
        return [] if witness is None else [self.workload.name_of(i) for i in witness.queries]

    def to_dict(self, budget: float | None = None) -> dict[str, Any]:
        """JSON-ready (``tessera overlap --json``): the guarantee, definition and neighbours,
        both overlap results, the witness decoded (when there is one) and, for a ``budget``,
        the per-query scales by query name (None for a query that is not released)."""
        doc: dict[str, Any] = {
            "guarantee": self.guarantee_label,
            "definition": self.definition.value,
            "neighbours": self.neighbours.value,
            **({} if self.unit.is_row else {"privacy_unit": self.unit.to_dict()}),
            "unweighted": self.unweighted.to_dict(),
            "weighted": self.weighted.to_dict(),
        }
        if self.weighted.witness is not None:
            doc["witness_values"] = self.witness_row()
            doc["witness_queries"] = self.witness_queries()
        if budget is not None:
            require_at_most(self.workload.n_queries, SCALES_MAX_QUERIES,
                            "per-query scales by name would list",
                            "drop --budget (the scales follow from γ_w and the weights), or "
                            "answer the workload (tessera answer writes them with the answers)")
            doc["budget"] = budget
            doc["scales"] = {
                name: (float(v) if math.isfinite(v) else None)
                for name, v in zip(self.workload.all_names(), self.scales(budget))
            }
        return doc


def workload_cost(
    workload: Workload,
    *,
    definition: Definition | str = Definition.PURE,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    time_limit: float | None = 60.0,
    method: str = "auto",
    unit: PrivacyUnit = ONE_ROW,
) -> WorkloadCost:
    """γ_w(Q) with the workload's weights and γ(Q) with unit weights (one solve when the
    weights are all 1), sharing ``time_limit`` seconds (γ_w gets :data:`WEIGHTED_SHARE` of it
    when there are two solves). Per person (``unit``): both are a person's, K·γ under pure ε
    (:func:`tessera.overlap.max_overlap`), so every scale calibrated from them grows by K."""
    definition = Definition.parse(definition)
    neighbours = Neighbours.parse(neighbours)
    if time_limit is not None and not time_limit >= 0:
        raise QueryError(f"time limit {time_limit} must be ≥ 0 seconds")
    common = {"comp": definition, "neighbours": neighbours, "method": method, "unit": unit}
    two = not workload.unit_weights  # (from the families: no per-cell weights built)
    start = time.monotonic()
    first = time_limit if (time_limit is None or not two) else WEIGHTED_SHARE * time_limit
    weighted = max_overlap(workload, time_limit=first, **common)  # type: ignore[arg-type]
    if not two:
        unweighted = weighted
    else:
        left = None if time_limit is None else max(0.0, time_limit - (time.monotonic() - start))
        unweighted = max_overlap(
            workload, np.ones(workload.n_queries), time_limit=left,
            **common,  # type: ignore[arg-type]
        )
    return WorkloadCost(workload, definition, neighbours, weighted, unweighted, unit)
