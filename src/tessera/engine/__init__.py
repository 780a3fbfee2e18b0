"""The engine of Tessera (docs/theory.md §4): one dynamic program over a tree decomposition for

* max-plus: max_x Σ_f θ_f f(x) with an argmax (LP pricing, weighted maximum overlap γ_w),
* log-sum-product: log Z = log Σ_x exp(Σ_f θ_f f(x)), exact expectations E[f],
* perfect i.i.d. sampling from P[x] ∝ exp(Σ_f θ_f f(x)),
* for an iterative fit over fixed factor scopes: :func:`junction_tree` compiles the junction
  tree once; its :class:`JunctionTree` gives log Z and every factor's marginal for new
  log-potential tables in a fixed number of vectorised numpy calls per tree level,

for predicate queries, Boolean WHERE clauses (:class:`~tessera.workload.clause.BooleanClause`) and
Boolean (BDD) queries, exponential only in the decomposition width. See ``docs/engine.md``.
"""

from tessera.engine.bdd import (
    BinaryEncoding,
    BooleanQuery,
    at_least,
    bdd_manager,
    conjunction,
    disjunction,
    from_expr,
    lex_range,
    parity,
)
from tessera.engine.decomposition import (
    DEFAULT_MEMORY_LIMIT,
    MemoryPlan,
    NiceTreeDecomposition,
    TreeDecomposition,
    elimination_order,
    exact_treewidth,
    treewidth,
)
from tessera.engine.factors import incidence_graph, scope
from tessera.engine.junction import JunctionTree, junction_tree
from tessera.engine.model import (
    GibbsModel,
    log_partition,
    maximize,
    workload_functions,
    workload_incidence_graph,
)
from tessera.engine.semiring import LOG_SUM_PRODUCT, MAX_PLUS, Semiring

__all__ = [
    "DEFAULT_MEMORY_LIMIT",
    "LOG_SUM_PRODUCT",
    "MAX_PLUS",
    "BinaryEncoding",
    "BooleanQuery",
    "GibbsModel",
    "JunctionTree",
    "MemoryPlan",
    "NiceTreeDecomposition",
    "Semiring",
    "TreeDecomposition",
    "at_least",
    "bdd_manager",
    "conjunction",
    "disjunction",
    "elimination_order",
    "exact_treewidth",
    "from_expr",
    "incidence_graph",
    "junction_tree",
    "lex_range",
    "log_partition",
    "maximize",
    "parity",
    "scope",
    "treewidth",
    "workload_functions",
    "workload_incidence_graph",
]
