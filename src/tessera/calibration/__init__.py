"""Calibration: from a workload's overlap and a privacy target to per-query noise
(docs/theory.md §3, §7).

This layer sits above :mod:`tessera.overlap` (maximum overlap γ_w, the separation oracle) and
:mod:`tessera.accounting` (trade-off functions, guarantees, PLDs) and uses both:

* :mod:`~tessera.calibration.scales`: per-query scales from γ_w for a budget split in proportion
  to the weights;
* :mod:`~tessera.calibration.allocation`: uniform and importance-weighted allocation (cutting
  planes over :mod:`~.oracles`, :mod:`~.master`, :mod:`~.cutting_plane`, :mod:`~.regimes`);
* :mod:`~tessera.calibration.cost`: what a workload costs (γ and γ_w in one call);
* :mod:`~tessera.calibration.comparison`: overlap vs sequential composition curves.
"""

from tessera.calibration.allocation import Allocation, UtilityGain, allocate, utility_gain
from tessera.calibration.comparison import (
    CompositionComparison,
    OverlapCounts,
    compare_composition,
    overlap_counts,
)
from tessera.calibration.cost import WorkloadCost, workload_cost
from tessera.calibration.cutting_plane import CuttingPlane, cutting_plane
from tessera.calibration.master import MasterSolution, dual_bound, solve_master
from tessera.calibration.oracles import (
    Cut,
    CutOracle,
    Overlap,
    WorkloadOracle,
    overlap_from_gamma,
    overlap_from_sets,
    overlap_from_workload,
    sequential_overlap,
)
from tessera.calibration.regimes import gdp_mu_for
from tessera.calibration.scales import normalised_weights, per_query_scales

__all__ = [
    "Allocation",
    "CompositionComparison",
    "Cut",
    "CutOracle",
    "CuttingPlane",
    "MasterSolution",
    "Overlap",
    "OverlapCounts",
    "UtilityGain",
    "WorkloadCost",
    "WorkloadOracle",
    "allocate",
    "compare_composition",
    "cutting_plane",
    "dual_bound",
    "gdp_mu_for",
    "normalised_weights",
    "overlap_counts",
    "overlap_from_gamma",
    "overlap_from_sets",
    "overlap_from_workload",
    "per_query_scales",
    "sequential_overlap",
    "solve_master",
    "utility_gain",
    "workload_cost",
]
