r"""The default split of a predicate workload: the least total variance the overlap allows
(docs/theory.md §10.4).

For t predicate queries measured with per-query costs c_q (ε_q, or ρ_q under zCDP), a split is
feasible iff every row pays Σ_{q∈I(x)} c_q ≤ B (add/remove; §3.11 for substitution). The
uniform split c_q = B/γ prices every query by the most loaded row of the whole domain; the
**optimal** split solves

    min_c Σ_q Var_q(c_q)   s.t.   Σ_{q∈I(x)} c_q ≤ B  for every row x,

Var = 1/(2ρ_q) (discrete Gaussian, continuous model σ²) or 2/ε_q² (discrete Laplace, 2b²):
the importance-weighted allocation of §3.11 with unit importances, solved by cutting planes
(:func:`~.allocation.allocate`) in at most :data:`OPTIMAL_ROUNDS` rounds (deterministic, so
that a split is reproducible unless the clock, :data:`GUARD` × :data:`OPTIMAL_SECONDS`, which is
only a guard, stopped it; ``tessera verify`` does not re-run it for the split that was
measured: docs/certificate.md): a local search over value classes proposes the
cuts, the overlap solver certifies (docs/theory.md §10.4).
:func:`~.allocation.allocate` keeps the best of the cutting plane's split, the Lagrange
shape and the uniform split (all rescaled by the oracle's proven bound); the release plan
(:func:`tessera.release.plan.noise_plan`) and the strategy chooser then keep the uniform
split calibrated to γ itself unless this one has a smaller total variance — whose
oracle may be looser than γ under a time limit — so what is measured is **never worse than
uniform**, converged or not.

Privacy never rests on the optimiser: the scales are a shape, rescaled by the oracle's proven
upper bound, widened for rounding, and the release plan re-checks their costs exactly
(:func:`tessera.release.plan.recheck_spent`) — which is also all ``tessera verify`` does with
them (it re-proves the stated scales rather than re-running an optimiser under a time limit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from tessera.accounting.guarantee import Guarantee
from tessera.calibration.allocation import allocate
from tessera.calibration.oracles import overlap_from_workload
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.workload.query import Query
from tessera.workload.workload import Workload

__all__ = ["GUARD", "OPTIMAL_MAX_QUERIES", "OPTIMAL_ROUNDS", "OPTIMAL_SECONDS", "OptimalSplit",
           "optimal_split", "optimisable", "widened"]

#: The default split's nominal time in seconds: the exact solver's limit per call, and × GUARD
#: the wall-clock guard of the whole optimisation (the loop stops by rounds).
OPTIMAL_SECONDS = 15.0
#: Cutting-plane rounds of the default split: the loop stops after this many (or when
#: converged), not at a wall-clock time, so that a recomputation (``tessera verify`` of a
#: ``direct`` candidate that was not chosen) meets the same point on a machine of any speed or
#: load unless the guard stopped it (the rounds are
#: deterministic: seeded local search, deterministic masters; an exact solve that finishes
#: is exact). 40 rounds take 6–13 s at 200 random Adult queries (docs/benchmarks.md).
OPTIMAL_ROUNDS = 40
#: The wall clock is only a guard: the loop and the proofs stop at this multiple of the time
#: limit (then the split is still certified, but a recomputation may stop elsewhere).
GUARD = 4.0
#: Most predicate queries the default split is optimised for; larger workloads keep the
#: uniform split unless ``--weights optimal`` is asked for. The cuts come from a local search
#: in milliseconds (:mod:`tessera.overlap.local_search`); what limits the size is the exact
#: proof of the final non-uniform load: about 2 s at 200 random Adult queries, out of reach
#: in 15-40 s at 1,000 (docs/benchmarks.md, "The default split of predicate queries";
#: docs/theory.md §10.4).
OPTIMAL_MAX_QUERIES = 200


@dataclass(frozen=True)
class OptimalSplit:
    """Per-query noise scales (b or σ; widened for rounding: :func:`widened`) and how the
    optimiser ended (``method``)."""

    scales: npt.NDArray[np.float64]
    method: str


def optimisable(workload: Workload) -> bool:
    """Whether the default split of W is optimised: predicate queries only (families take
    closed-form shares), one weight for all, at least two and at most
    :data:`OPTIMAL_MAX_QUERIES`."""
    w = workload.weight_array()
    return (not workload.is_structured and 2 <= workload.n_queries <= OPTIMAL_MAX_QUERIES
            and bool(np.all(w == w[0])) and w[0] > 0
            and all(isinstance(q, Query) for q in workload.queries))


def widened(scales: npt.NDArray[np.float64], t: int) -> npt.NDArray[np.float64]:
    """Scales × (1 + 1e-12 + 8 t ulp): rounding in the conversion to scales and in the sums can
    put Σ c_q a few ulps per query above the total; the exact re-check then certifies them
    (and the release widens them further when the re-check's own rounding of costs needs a
    larger margin: :func:`tessera.release.plan.certify`)."""
    return scales * (1.0 + 1e-12 + 8.0 * t * np.finfo(np.float64).eps)


def optimal_split(
    workload: Workload,
    definition: Definition,
    total: float,
    neighbours: Neighbours,
    *,
    importance: npt.ArrayLike | None = None,
    time_limit: float | None = OPTIMAL_SECONDS,
    unit: PrivacyUnit = ONE_ROW,
) -> OptimalSplit:
    """The least Σ_q w_q Var_q split of ``total`` (ε or ρ) over W's queries (w = 1 unless
    ``importance`` is given), discrete Laplace under pure ε, discrete Gaussian under ρ-zCDP.

    Per person (``unit``, docs/theory.md §3.13) a row may spend total / factor (K or K²,
    rounded down): the split is optimised for that at the row level, and under substitution
    the allocation's model min(2·L, Σ) bounds the row's add/remove load L as well, the
    larger of which a person substituted pays K-fold. The release's re-check proves it."""
    t = workload.n_queries
    if not unit.is_row:
        share = Fraction(total) / unit.factor(definition)
        total = float(share)
        while Fraction(total) > share:
            total = math.nextafter(total, 0.0)
    if definition is Definition.PURE:
        target, mechanism = Guarantee.pure(total, neighbours), "discrete_laplace"
    else:
        target, mechanism = Guarantee.zcdp(total, neighbours), "discrete_gaussian"
    w = np.ones(t) if importance is None else np.asarray(importance, dtype=np.float64)
    guard = None if time_limit is None else GUARD * time_limit
    alloc = allocate(t, target, importance=w,
                     overlap=overlap_from_workload(workload, time_limit=time_limit),
                     mechanism=mechanism, time_limit=guard, max_rounds=OPTIMAL_ROUNDS)
    method = alloc.method
    if importance is None:
        method = "least total variance " + method.removeprefix("weighted ")
    return OptimalSplit(widened(np.asarray(alloc.noise_scales, dtype=np.float64), t), method)
