"""Maximum overlap γ(Q), γ_w(Q) of a workload, exact or a proven upper bound (docs/theory.md §3)."""

from tessera.overlap.branch_bound import PointSolution, max_point, split_bound
from tessera.overlap.colouring import colouring_bound, greedy_colouring, overlap_graph
from tessera.overlap.mini_bucket import mbe_point
from tessera.overlap.result import OverlapResult, Witness
from tessera.overlap.routes import touched
from tessera.overlap.solve import max_overlap, maximal_overlapping_sets
from tessera.overlap.wcsp import PairSolution, wcsp_point, wcsp_substitution

__all__ = [
    "OverlapResult",
    "PairSolution",
    "PointSolution",
    "Witness",
    "colouring_bound",
    "greedy_colouring",
    "max_overlap",
    "max_point",
    "mbe_point",
    "maximal_overlapping_sets",
    "overlap_graph",
    "split_bound",
    "touched",
    "wcsp_point",
    "wcsp_substitution",
]
