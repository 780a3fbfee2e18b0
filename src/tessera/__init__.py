"""Tessera: differential privacy for query workloads.

Architecture (each layer uses only the ones above it):

* domain and queries: :mod:`tessera.intervals`, :mod:`tessera.domain`, :mod:`tessera.query`,
  :mod:`tessera.parse`, :mod:`tessera.workload`, :mod:`tessera.builders`;
* data and exact counts: :mod:`tessera.data` (DuckDB), :mod:`tessera.counts`, :mod:`tessera.infer`;
* engine: :mod:`tessera.engine` (tree decompositions, one dynamic program in two semirings);
* accounting: :mod:`tessera.accounting` (trade-off functions, f-DP composition under overlap),
  :mod:`tessera.overlap` (maximum (weighted) overlap of a workload);
* CLI: :mod:`tessera.cli`.

The math follows ``SPEC.md`` (the two papers, restated and corrected).
"""

from tessera.accounting import (
    Guarantee,
    TradeOff,
    gaussian_dp,
    lower_convex_envelope,
    maximum_overlap,
    parallel_composition,
    tensor,
)
from tessera.builders import all_ranges, identity, marginals, prefixes, random_workload
from tessera.counts import NOT_PRIVATE, CountResult, count
from tessera.data import CsvOptions, encode
from tessera.domain import Attribute, Binned, Boolean, Categorical, Domain, IntegerRange
from tessera.engine import (
    BooleanQuery,
    GibbsModel,
    TreeDecomposition,
    log_partition,
    maximize,
    treewidth,
)
from tessera.errors import DataError, QueryError, ResourceError, SchemaError, TesseraError
from tessera.infer import infer_domain
from tessera.intervals import IntervalSet
from tessera.overlap import OverlapResult, max_overlap, maximal_overlapping_sets
from tessera.parse import parse_query
from tessera.query import Predicate, Query, disjoint, joint_coverage, jointly_overlap, witness
from tessera.workload import Workload, WorkloadError

__version__ = "0.1.0"

__all__ = [
    "maximal_overlapping_sets",
    "max_overlap",
    "OverlapResult",
    "treewidth",
    "maximize",
    "log_partition",
    "TreeDecomposition",
    "GibbsModel",
    "BooleanQuery",
    "NOT_PRIVATE",
    "Attribute",
    "Binned",
    "Boolean",
    "Categorical",
    "CountResult",
    "CsvOptions",
    "DataError",
    "Domain",
    "Guarantee",
    "IntegerRange",
    "IntervalSet",
    "Predicate",
    "Query",
    "QueryError",
    "ResourceError",
    "SchemaError",
    "TesseraError",
    "TradeOff",
    "Workload",
    "WorkloadError",
    "all_ranges",
    "count",
    "disjoint",
    "encode",
    "gaussian_dp",
    "identity",
    "infer_domain",
    "joint_coverage",
    "jointly_overlap",
    "lower_convex_envelope",
    "marginals",
    "maximum_overlap",
    "parallel_composition",
    "parse_query",
    "prefixes",
    "random_workload",
    "tensor",
    "witness",
]
