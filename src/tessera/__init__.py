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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> defining module. Imported on first use (PEP 562), so ``import tessera`` and
#: the ``tessera`` command start fast; the heavy dependencies load only when needed.
_EXPORTS: dict[str, str] = {
    "Attribute": "tessera.domain",
    "Binned": "tessera.domain",
    "Boolean": "tessera.domain",
    "BooleanQuery": "tessera.engine",
    "Categorical": "tessera.domain",
    "CountResult": "tessera.counts",
    "CsvOptions": "tessera.data",
    "DataError": "tessera.errors",
    "Domain": "tessera.domain",
    "GibbsModel": "tessera.engine",
    "Guarantee": "tessera.accounting",
    "IntegerRange": "tessera.domain",
    "IntervalSet": "tessera.intervals",
    "NOT_PRIVATE": "tessera.counts",
    "OverlapResult": "tessera.overlap",
    "Predicate": "tessera.query",
    "Query": "tessera.query",
    "QueryError": "tessera.errors",
    "ResourceError": "tessera.errors",
    "SchemaError": "tessera.errors",
    "TesseraError": "tessera.errors",
    "TradeOff": "tessera.accounting",
    "TreeDecomposition": "tessera.engine",
    "Workload": "tessera.workload",
    "WorkloadError": "tessera.workload",
    "all_ranges": "tessera.builders",
    "count": "tessera.counts",
    "disjoint": "tessera.query",
    "encode": "tessera.data",
    "gaussian_dp": "tessera.accounting",
    "identity": "tessera.builders",
    "infer_domain": "tessera.infer",
    "joint_coverage": "tessera.query",
    "jointly_overlap": "tessera.query",
    "log_partition": "tessera.engine",
    "lower_convex_envelope": "tessera.accounting",
    "marginals": "tessera.builders",
    "max_overlap": "tessera.overlap",
    "maximal_overlapping_sets": "tessera.overlap",
    "maximize": "tessera.engine",
    "maximum_overlap": "tessera.accounting",
    "parallel_composition": "tessera.accounting",
    "parse_query": "tessera.parse",
    "prefixes": "tessera.builders",
    "random_workload": "tessera.builders",
    "tensor": "tessera.accounting",
    "treewidth": "tessera.engine",
    "witness": "tessera.query",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tessera' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_EXPORTS))


if TYPE_CHECKING:  # static type checkers and IDEs see the eager imports
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
