"""Tessera: differential privacy for query workloads.

Architecture, lowest layer first; each layer uses only the layers below it (enforced by
import-linter: ``lint-imports``, contract in ``pyproject.toml``; docs/architecture.md walks a
release and a synthesis run through them module by module):

1. vocabulary: :mod:`tessera.errors`, :mod:`tessera.privacy` (neighbour relations, definitions)
   and :mod:`tessera.software` (the versions results record, the optional dependencies);
2. :mod:`tessera.schema`: the public schema (attribute kinds, interval sets, domains);
3. :mod:`tessera.workload`: predicate queries, Boolean clauses, value classes, structured
   families, the SQL parsers, workload files and the standard builders;
4. :mod:`tessera.data`: data sources behind one interface (DuckDB, Spark), validation against
   the schema, exact counts, schema drafts;
5. :mod:`tessera.engine`: tree decompositions, one dynamic program in two semirings;
6. :mod:`tessera.overlap` (maximum (weighted) overlap) and :mod:`tessera.accounting`
   (trade-off functions, f-DP composition, guarantees), independent of each other;
7. :mod:`tessera.calibration`: per-query scales, allocation, workload cost;
8. :mod:`tessera.mechanisms`: noise and selection over OpenDP;
9. :mod:`tessera.release` (answering, ledger, certificate, report) and :mod:`tessera.synth`
   (synthetic data), independent of each other;
10. :mod:`tessera.audit` (statistical privacy audits of the mechanisms), :mod:`tessera.demo`
    (both main jobs end to end on a made-up population) and :mod:`tessera.routes` (answers read
    from the adaptive synthesizer's fitted model), independent of each other;
11. the command line: :mod:`tessera.cli`.

The math is in ``docs/theory.md`` (the two papers, restated with the corrections an
implementation needs): Smith et al., "Making the Most of Parallel Composition in Differential
Privacy", PoPETs 2022 (arXiv:2109.09078), and Ghazi et al., "Fixed-Parameter Tractability of
Private Synthetic Data Generation" (arXiv:2606.11283).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

# The library logs to the "tessera" logger (each module to its own child,
# ``logging.getLogger(__name__)``) and leaves where the records go to the application: the
# command line's --verbose/--quiet, or the caller's own logging configuration.
logging.getLogger(__name__).addHandler(logging.NullHandler())

#: The distribution whose metadata holds the version (its one literal is in ``pyproject.toml``).
_DISTRIBUTION = "tessera-dp"

#: Public name -> defining module. Imported on first use (PEP 562), so ``import tessera`` and
#: the ``tessera`` command start fast; the heavy dependencies load only when needed.
_EXPORTS: dict[str, str] = {
    "Attribute": "tessera.schema.domain",
    "Budget": "tessera.release",
    "BudgetExceeded": "tessera.release",
    "Ledger": "tessera.release",
    "Release": "tessera.release",
    "answer": "tessera.release",
    "answer_adaptive": "tessera.routes.adaptive",
    "answer_aggregates": "tessera.release.aggregates",
    "exact_aggregates": "tessera.release.exact_aggregates",
    "read_aggregates": "tessera.workload.select",
    "verify_certificate": "tessera.release",
    "Binned": "tessera.schema.domain",
    "Boolean": "tessera.schema.domain",
    "BooleanClause": "tessera.workload.clause",
    "BooleanQuery": "tessera.engine",
    "Categorical": "tessera.schema.domain",
    "CountResult": "tessera.data.counts",
    "CsvOptions": "tessera.data.table",
    "DataError": "tessera.errors",
    "Definition": "tessera.privacy",
    "Domain": "tessera.schema.domain",
    "GibbsModel": "tessera.engine",
    "Guarantee": "tessera.accounting",
    "IntegerRange": "tessera.schema.domain",
    "IntervalSet": "tessera.schema.intervals",
    "NOT_PRIVATE": "tessera.data.counts",
    "Neighbours": "tessera.privacy",
    "OverlapResult": "tessera.overlap",
    "Predicate": "tessera.workload.query",
    "PrivacyUnit": "tessera.privacy",
    "Query": "tessera.workload.query",
    "QueryError": "tessera.errors",
    "ResourceError": "tessera.errors",
    "SchemaError": "tessera.errors",
    "SparkSource": "tessera.data.spark_source",
    "Synthesizer": "tessera.synth",
    "TesseraError": "tessera.errors",
    "TradeOff": "tessera.accounting",
    "TreeDecomposition": "tessera.engine",
    "Workload": "tessera.workload.workload",
    "WorkloadError": "tessera.workload.workload",
    "all_ranges": "tessera.workload.builders",
    "allocate": "tessera.calibration",
    "count": "tessera.data.counts",
    "disjoint": "tessera.workload.query",
    "encode": "tessera.data.source",
    "evaluate": "tessera.synth.evaluate",
    "gaussian_dp": "tessera.accounting",
    "identity": "tessera.workload.builders",
    "infer_domain": "tessera.data.infer",
    "joint_coverage": "tessera.workload.query",
    "jointly_overlap": "tessera.workload.query",
    "log_partition": "tessera.engine",
    "lower_convex_envelope": "tessera.accounting",
    "marginals": "tessera.workload.builders",
    "max_overlap": "tessera.overlap",
    "maximal_overlapping_sets": "tessera.overlap",
    "maximize": "tessera.engine",
    "overlap_composition": "tessera.accounting",
    "per_query_scales": "tessera.calibration",
    "parallel_composition": "tessera.accounting",
    "parse_query": "tessera.workload.parse",
    "prefixes": "tessera.workload.builders",
    "random_workload": "tessera.workload.builders",
    "tensor": "tessera.accounting",
    "treewidth": "tessera.engine",
    "witness": "tessera.workload.query",
    "workload_cost": "tessera.calibration",
}


def _version() -> str:
    """The version of the installed ``tessera-dp`` distribution (its metadata, written from
    ``pyproject.toml`` at install); in a source tree without metadata (``PYTHONPATH=src``,
    nothing installed), the ``version`` of the ``pyproject.toml`` beside ``src/``; else
    ``0+unknown``."""
    import importlib.metadata

    try:
        return importlib.metadata.version(_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pass
    import tomllib
    from pathlib import Path

    try:
        project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text(
            encoding="utf-8"))["project"]
        if project["name"] == _DISTRIBUTION:
            return str(project["version"])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError):
        pass
    return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":  # read on first use: package metadata costs an import or two
        value: Any = _version()
        globals()[name] = value
        return value
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tessera' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names only (not this module's own imports: ``importlib``, ``Any``, …)."""
    return sorted(__all__)


if TYPE_CHECKING:  # static type checkers and IDEs see the eager imports
    __version__: str

    from tessera.accounting import (
        Guarantee,
        TradeOff,
        gaussian_dp,
        lower_convex_envelope,
        overlap_composition,
        parallel_composition,
        tensor,
    )
    from tessera.calibration import allocate, per_query_scales, workload_cost
    from tessera.data.counts import NOT_PRIVATE, CountResult, count
    from tessera.data.infer import infer_domain
    from tessera.data.source import encode
    from tessera.data.spark_source import SparkSource
    from tessera.data.table import CsvOptions
    from tessera.engine import (
        BooleanQuery,
        GibbsModel,
        TreeDecomposition,
        log_partition,
        maximize,
        treewidth,
    )
    from tessera.errors import DataError, QueryError, ResourceError, SchemaError, TesseraError
    from tessera.overlap import OverlapResult, max_overlap, maximal_overlapping_sets
    from tessera.privacy import Definition, Neighbours
    from tessera.release import (
        Budget,
        BudgetExceeded,
        Ledger,
        Release,
        answer,
        verify_certificate,
    )
    from tessera.release.aggregates import answer_aggregates
    from tessera.release.exact_aggregates import exact_aggregates
    from tessera.routes.adaptive import answer_adaptive
    from tessera.schema.domain import Attribute, Binned, Boolean, Categorical, Domain, IntegerRange
    from tessera.schema.intervals import IntervalSet
    from tessera.synth import Synthesizer
    from tessera.synth.evaluate import evaluate
    from tessera.workload.builders import all_ranges, identity, marginals, prefixes, random_workload
    from tessera.workload.clause import BooleanClause
    from tessera.workload.files import WorkloadError
    from tessera.workload.parse import parse_query
    from tessera.workload.query import (
        Predicate,
        Query,
        disjoint,
        joint_coverage,
        jointly_overlap,
        witness,
    )
    from tessera.workload.select import read_aggregates
    from tessera.workload.workload import Workload

__all__ = [
    "Attribute",
    "Binned",
    "Boolean",
    "BooleanClause",
    "BooleanQuery",
    "Budget",
    "BudgetExceeded",
    "Categorical",
    "CountResult",
    "CsvOptions",
    "DataError",
    "Definition",
    "Domain",
    "GibbsModel",
    "Guarantee",
    "IntegerRange",
    "IntervalSet",
    "Ledger",
    "NOT_PRIVATE",
    "Neighbours",
    "OverlapResult",
    "Predicate",
    "PrivacyUnit",
    "Query",
    "QueryError",
    "Release",
    "ResourceError",
    "SchemaError",
    "SparkSource",
    "Synthesizer",
    "TesseraError",
    "TradeOff",
    "TreeDecomposition",
    "Workload",
    "WorkloadError",
    "__version__",
    "all_ranges",
    "allocate",
    "answer",
    "answer_adaptive",
    "answer_aggregates",
    "count",
    "disjoint",
    "encode",
    "evaluate",
    "exact_aggregates",
    "gaussian_dp",
    "identity",
    "infer_domain",
    "joint_coverage",
    "jointly_overlap",
    "log_partition",
    "lower_convex_envelope",
    "marginals",
    "max_overlap",
    "maximal_overlapping_sets",
    "maximize",
    "overlap_composition",
    "parallel_composition",
    "parse_query",
    "per_query_scales",
    "prefixes",
    "random_workload",
    "read_aggregates",
    "tensor",
    "treewidth",
    "verify_certificate",
    "witness",
    "workload_cost",
]
