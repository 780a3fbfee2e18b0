"""The public engine API: a Gibbs model over a workload (docs/theory.md §4, §5, §6).

``GibbsModel(domain, queries, theta)`` is P[x] ∝ exp(Σ_f θ_f f(x)) over the finite domain, for
predicate queries (:class:`~tessera.workload.query.Query`), Boolean WHERE clauses
(:class:`~tessera.workload.clause.BooleanClause`) and Boolean queries
(:class:`~tessera.engine.bdd.BooleanQuery`), with optional hard ``constraints`` (functions that
must be 1, e.g. the validity of a binary encoding). It answers

* :meth:`~GibbsModel.log_partition`: log Z = log Σ_x exp(Σ_f θ_f f(x));
* :meth:`~GibbsModel.max_assignment`: (max_x Σ_f θ_f f(x), an argmax as codes);
* :meth:`~GibbsModel.expectations`: E_P[f] for every query, exactly (one up-and-down pass);
  log Z and E_P[f] run on the compiled junction tree of the factor groups (docs/theory.md
  §4.7, :mod:`tessera.engine.junction`), built once per structure on the same elimination
  order, so a weight update costs one sparse product θ → tables, one vectorised pass and one
  sparse product marginals → E[f]; max-plus and sampling run on the bucket program;
* :meth:`~GibbsModel.sample`: m i.i.d. rows from P (codes), vectorised, injectable generator;

in time and memory exponential only in the width of the decomposition. The structure (value
classes, chains, elimination order, bags: everything but θ) is built once;
:meth:`~GibbsModel.with_theta` returns a model with new weights that shares it (a weight update
never rebuilds the decomposition). :func:`maximize` is the function-level max-plus entry point
used for LP pricing and the weighted maximum overlap γ_w = max_x Σ_q w_q q(x).
:func:`treewidth_report` describes the decomposition a workload's model would run on, without
running it (``tessera treewidth``).

Structured workloads (:class:`~tessera.workload.workload.Workload` with marginals, cubes,
hierarchies) are taken wherever queries are: their families' cells become queries in expanded order,
under the size guards of :func:`workload_functions` (a clear :class:`~tessera.errors.ResourceError`
beyond them); the incidence width is found from the family scopes (one vertex per family).

Why this module is long (about 580 lines): it is the engine's one public entry point.
:class:`Structure` (everything θ-independent: layout, elimination order, memory plan, program),
the :class:`GibbsModel` that shares it across weight updates, and :func:`treewidth_report`, which
builds the same structure without running it, must agree on how a workload becomes functions and
how the structure is built; kept together, that is one code path.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np
import numpy.typing as npt

from tessera.engine.decomposition import (
    DEFAULT_MEMORY_LIMIT,
    HEURISTICS,
    REFUSE_MARGIN_BITS,
    Aborted,
    MemoryPlan,
    TreeDecomposition,
    best_elimination_order,
    check_memory,
    eliminate,
    memory_plan,
    parse_bytes,
    refuse_bag,
    summarize,
    treewidth,
)
from tessera.engine.factors import (
    DENSE_LIMIT,
    CompiledModel,
    FlatFactors,
    Function,
    ModelLayout,
    flat_factors,
    incidence_graph,
    layout_model,
    scope,
    tabulate,
)
from tessera.engine.junction import (
    JunctionTree,
    check_compile,
    junction_compile_bytes,
    junction_compile_entries,
    junction_tree,
)
from tessera.engine.program import Forward, Program, Sampler
from tessera.engine.semiring import LOG_SUM_PRODUCT, MAX_PLUS
from tessera.errors import QueryError, ResourceError, TesseraError
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload

IntArray = npt.NDArray[np.int64]

#: A structured workload (:attr:`~tessera.workload.workload.Workload.partitions`) reaches the engine
#: with its families' cells as queries (expanded order): at most this many queries in all ...
STRUCTURED_MAX_QUERIES = 200_000
#: ... and at most this many cells in one family (a family's cells share one factor table, and
#: compiling tabulates every cell over it: (cells)² entries, ~2.4 s and 100 MB at 10,000 cells).
STRUCTURED_MAX_FAMILY_CELLS = 16_384


def workload_functions(
    workload: Workload, *, max_queries: int | None = None, max_family_cells: int | None = None,
) -> tuple[tuple[Function, ...], tuple[str, ...]]:
    """The workload's queries and names for the engine: predicate queries, then every family's
    cells row-major (:meth:`~tessera.workload.workload.Workload.expanded` order, the order of θ and
    of :meth:`~tessera.workload.workload.Workload.all_weights`). Refused with a
    :class:`~tessera.errors.ResourceError` beyond the guards, before anything is built."""
    if workload.partitions:
        max_queries = STRUCTURED_MAX_QUERIES if max_queries is None else max_queries
        max_family_cells = (STRUCTURED_MAX_FAMILY_CELLS if max_family_cells is None
                            else max_family_cells)
        domain = workload.domain
        big = max(workload.partitions, key=lambda p: p.n_cells_in(domain))
        if big.n_cells_in(domain) > max_family_cells:
            raise ResourceError(
                f"family {big.name!r} has {big.n_cells_in(domain):,} cells: the engine takes "
                f"families of at most {max_family_cells:,} cells (it tabulates each cell over "
                "the family's table)",
                hint="tessera overlap and tessera count take the structured form as it is")
        if workload.n_queries > max_queries:
            raise ResourceError(
                f"the structured workload has {workload.n_queries:,} queries with its cells: "
                f"the engine takes at most {max_queries:,}",
                hint="tessera overlap and tessera count take the structured form as it is; "
                "tessera treewidth reports its width from the family scopes")
        workload = workload.expanded(max_queries=max_queries)
    return tuple(workload.queries), tuple(workload.names)


def _functions(
    domain: Domain, queries: Sequence[Function] | Workload, names: Sequence[str] | None
) -> tuple[tuple[Function, ...], tuple[str, ...] | None]:
    """``queries`` as engine functions: a :class:`~tessera.workload.workload.Workload` (structured
    or not, over ``domain``) gives its queries and cells (:func:`workload_functions`)."""
    if not isinstance(queries, Workload):
        return tuple(queries), None if names is None else tuple(names)
    if queries.domain != domain:
        raise QueryError("the workload is over another domain than the model")
    functions, own = workload_functions(queries)
    return functions, own if names is None else tuple(names)


def _named(domain: Domain, queries: Sequence[Function] | Workload,
           names: Sequence[str] | None) -> tuple[tuple[Function, ...], tuple[str, ...]]:
    """The engine functions of ``queries`` and their names (``q0``, ``q1``, … by default)."""
    functions, own = _functions(domain, queries, names)
    own = own if own is not None else tuple(f"q{j}" for j in range(len(functions)))
    if len(own) != len(functions):
        raise QueryError(f"{len(own)} names for {len(functions)} queries")
    return functions, own


@dataclass(frozen=True, eq=False)
class Structure:
    """Everything θ-independent: compiled factors, elimination order, bags, memory plan."""

    domain: Domain
    functions: tuple[Function, ...]
    names: tuple[str, ...]
    n_queries: int  # functions[:n_queries] are queries, the rest constraints
    compiled: CompiledModel
    graph: nx.Graph  # primal graph of the compiled variables
    order: tuple[int, ...]
    bags: tuple[tuple[int, ...], ...]
    parents: tuple[int, ...]
    plan: MemoryPlan
    program: Program
    heuristic: str
    memory_limit: int = DEFAULT_MEMORY_LIMIT
    compile_guard: bool = False

    @staticmethod
    def build(
        domain: Domain,
        queries: Sequence[Function],
        names: Sequence[str],
        constraints: Sequence[Function],
        *,
        heuristic: str,
        memory_limit: int,
        dense_limit: int,
        compile_guard: bool = False,
    ) -> Structure:
        functions, all_names, layout, graph, order, bags, parents, plan = Structure.planned(
            domain, queries, names, constraints, heuristic=heuristic,
            memory_limit=memory_limit, dense_limit=dense_limit, compile_guard=compile_guard)
        compiled = tabulate(layout)  # only now are tables allocated
        program = Program.build(layout.sizes, [g.scope for g in compiled.groups], order, bags,
                                parents)
        return Structure(domain, functions, all_names, len(queries), compiled, graph,
                         tuple(order), tuple(tuple(b) for b in bags), tuple(parents), plan,
                         program, heuristic, memory_limit, compile_guard)

    @staticmethod
    def planned(
        domain: Domain,
        queries: Sequence[Function],
        names: Sequence[str],
        constraints: Sequence[Function],
        *,
        heuristic: str,
        memory_limit: int,
        dense_limit: int,
        compile_guard: bool = False,
    ) -> tuple[tuple[Function, ...], tuple[str, ...], ModelLayout, nx.Graph, list[int],
               list[list[int]], list[int], MemoryPlan]:
        """Everything :meth:`build` decides before a table is allocated: the layout, the
        elimination order, its bags and the memory plan, refused by the memory guard
        (:class:`~tessera.errors.ResourceError`) exactly as :meth:`build` refuses it.
        ``compile_guard``: the plan also prices the compilation of its junction tree
        (:attr:`~tessera.engine.decomposition.MemoryPlan.compile_bytes`: one index entry per
        entry of each factor group's host clique, :func:`tessera.engine.junction.
        junction_compile_bytes`) and the guard refuses it beyond ``memory_limit``."""
        functions = tuple(queries) + tuple(constraints)
        all_names = tuple(names) + tuple(f"constraint #{i}" for i in range(len(constraints)))
        hard = [False] * len(queries) + [True] * len(constraints)
        # a bag whose single table exceeds the limit by this factor is never built, not even as
        # an elimination-graph clique: the candidate order stops there (fast refusal)
        cap = math.log2(max(memory_limit, 8) / 8) + REFUSE_MARGIN_BITS
        layout = layout_model(domain, functions, all_names, hard, dense_limit=dense_limit,
                              heuristic=heuristic, cap=cap)
        graph = nx.Graph()
        graph.add_nodes_from(range(len(layout.sizes)))
        for sc in layout.scopes:
            graph.add_edges_from((a, b) for i, a in enumerate(sc) for b in sc[i + 1 :])
        sizes = layout.sizes
        attributes = range(len(domain))
        states = range(len(domain), len(sizes))
        result = best_elimination_order(
            graph, heuristic, lambda v: math.log2(max(sizes[v], 1)),
            phases=[attributes, states] if len(states) else [], cap=cap,
        )
        if isinstance(result, Aborted):
            refuse_bag([sizes[v] for v in result.bag], memory_limit,
                       lambda: _culprits(layout, functions, all_names, result.bag))
            raise AssertionError("refuse_bag always raises")  # pragma: no cover
        order = list(result.order)
        bags, parents = eliminate(graph, order)
        plan = memory_plan(sizes, bags, factor_bytes=layout.factor_bytes())
        check_memory(plan, memory_limit, lambda: _culprits(layout, functions, all_names,
                                                           bags[plan.largest_bag]))
        if compile_guard:
            need = junction_compile_bytes(sizes, layout.scopes, order=order,
                                          memory_limit=memory_limit)
            plan = dataclasses.replace(plan, compile_bytes=need)
            if need > memory_limit:
                try:
                    entries, sparse_entries, _ = junction_compile_entries(
                        sizes, layout.scopes, order=order, memory_limit=memory_limit)
                    check_compile(entries, plan.largest_entries, memory_limit, sparse_entries)
                except ResourceError as e:
                    raise ResourceError(
                        f"{e.message}; the model has {len(layout.scopes):,} factor groups for "
                        f"{len(functions):,} queries", hint=e.hint) from None
        return functions, all_names, layout, graph, order, bags, parents, plan

    @cached_property
    def junction(self) -> JunctionTree:
        """The compiled junction tree of the factor groups on the same elimination order (same
        width): log Z and the exact marginals for any θ (docs/theory.md §4.7)."""
        c = self.compiled
        # with compile_guard, the plan priced (and the guard passed) the compilation already
        return junction_tree(c.sizes, [g.scope for g in c.groups], order=self.order,
                             compile_guard=False)

    @cached_property
    def flat(self) -> FlatFactors:
        """Every group's table as one flat vector: θ ↦ log-potentials, marginals ↦ E[f]."""
        return flat_factors(self.compiled)


def _culprits(
    compiled: CompiledModel | ModelLayout,
    functions: Sequence[Function],
    names: Sequence[str],
    bag: Sequence[int],
) -> str:
    """Attributes in the bag, and the queries that tie ≥ 2 of them together or own a state."""
    attrs = {v for v in bag if compiled.owner[v] < 0}
    owners = {compiled.owner[v] for v in bag if compiled.owner[v] >= 0}
    culprits = [names[j] for j, f in enumerate(functions)
                if j in owners or len(set(scope(compiled.domain, f)) & attrs) >= 2]
    return (summarize("attributes", [compiled.labels[v] for v in sorted(attrs)])
            + "; queries tying them: " + summarize("", culprits).strip())


@dataclass(frozen=True)
class IncidenceWidth:
    """The incidence graph G(F) of a workload (attributes and queries as vertices) and the width
    of the decomposition an elimination heuristic finds for it: an upper bound on tw(F)."""

    vertices: int
    edges: int
    width: int
    bags: int
    families: int = 0  # vertices that stand for a whole family of cells


@dataclass(frozen=True)
class PlanSummary:
    """The decomposition the engine would run on (:class:`Structure`), before any table is
    allocated: its width over the compiled variables, its bags and its memory estimate."""

    width: int
    variables: int  # compiled variables: the attributes (as value classes), then chain states
    attributes: int
    chain_states: int
    dense_tables: int  # dense factor tables over two or more attributes
    bags: int
    largest_entries: int
    largest_bag: tuple[tuple[str, int], ...]  # (label, number of values) per variable
    bytes_estimate: int
    memory_limit: int


@dataclass(frozen=True, eq=False)
class TreewidthReport:
    """What ``tessera treewidth`` prints: :attr:`incidence` at once, :attr:`plan` on first
    access (it may raise :class:`~tessera.errors.ResourceError`, naming the queries that make
    the plan too large, so a caller can show the incidence width first)."""

    domain: Domain
    functions: tuple[Function, ...]
    names: tuple[str, ...]
    heuristic: str
    memory_limit: int
    incidence: IncidenceWidth
    #: a structured workload: its families are expanded (under the engine's guards) only when
    #: :attr:`plan` is asked for; ``functions`` are then its predicate queries alone
    workload: Workload | None = None

    @cached_property
    def plan(self) -> PlanSummary:
        """Lay out and decompose the model as :class:`GibbsModel` would; nothing is run. For a
        structured workload the families' cells become queries (:func:`workload_functions`:
        a :class:`~tessera.errors.ResourceError` beyond its guards)."""
        functions, names = ((self.functions, self.names) if self.workload is None
                            else workload_functions(self.workload))
        s = Structure.build(self.domain, functions, names, (),
                            heuristic=self.heuristic, memory_limit=self.memory_limit,
                            dense_limit=DENSE_LIMIT)
        c = s.compiled
        dense = sum(1 for g in c.groups if len(g.functions) and
                    all(c.owner[v] < 0 for v in g.scope) and len(g.scope) > 1)
        return PlanSummary(
            width=s.plan.width,
            variables=len(c.sizes),
            attributes=len(self.domain),
            chain_states=len(c.sizes) - len(self.domain),
            dense_tables=dense,
            bags=len(s.bags),
            largest_entries=s.plan.largest_entries,
            largest_bag=tuple((c.labels[v], c.sizes[v]) for v in s.bags[s.plan.largest_bag]),
            bytes_estimate=s.plan.bytes_estimate,
            memory_limit=self.memory_limit,
        )


def treewidth_report(
    workload: Workload,
    *,
    heuristic: str = "min-fill",
    memory_limit: int | str = DEFAULT_MEMORY_LIMIT,
) -> TreewidthReport:
    """The width of ``workload``'s incidence graph and the engine's plan for it (docs/theory.md §4).

    A structured workload's incidence graph has one vertex per family, joined to the attributes
    its cells constrain (:func:`workload_incidence_graph`): its width is found from the scopes,
    never from the cells.

    ``memory_limit``: bytes, or text such as ``'2GiB'``, ``'512MiB'``, ``'1e9'``. Raises
    :class:`~tessera.errors.TesseraError` for an unknown heuristic or an unreadable limit, before
    any work; the plan is refused (on access) when it exceeds the limit.
    """
    if heuristic not in HEURISTICS:
        raise TesseraError(f"unknown heuristic {heuristic!r}", hint=f"one of {list(HEURISTICS)}")
    if isinstance(memory_limit, str):
        try:
            memory_limit = parse_bytes(memory_limit)
        except ValueError:
            raise TesseraError(f"cannot read memory limit {memory_limit!r}",
                               hint="e.g. 2GiB, 512MiB, 1e9") from None
    domain = workload.domain
    graph = workload_incidence_graph(workload)
    width, td = treewidth(graph, heuristic)
    incidence = IncidenceWidth(graph.number_of_nodes(), graph.number_of_edges(), width,
                               len(td.bags), len(workload.partitions))
    return TreewidthReport(domain, tuple(workload.queries), tuple(workload.names), heuristic,
                           memory_limit, incidence, workload if workload.partitions else None)


def family_scope(domain: Domain, family: Any) -> tuple[int, ...]:
    """The attributes (indices) a family's cells constrain: all of its attributes but those cut
    into one group holding every code (level 0 of a hierarchy, a one-code attribute)."""
    out = []
    for i, a in enumerate(family.attributes):
        groups = family.groups[i]
        size = domain[a].size
        whole = (size <= 1) if groups is None else (len(groups) == 1 and len(groups[0]) == size)
        if not whole:
            out.append(domain.index(a))
    return tuple(out)


def workload_incidence_graph(workload: Workload) -> nx.Graph:
    """G(F) of a workload: attributes ``("x", i)``, predicate queries ``("f", j)`` and one vertex
    ``("P", k)`` per family joined to :func:`family_scope` (its cells are twins: they would add
    vertices with the same neighbours, not width)."""
    domain = workload.domain
    graph = incidence_graph(domain, workload.queries)
    for k, p in enumerate(workload.partitions):
        graph.add_node(("P", k))
        graph.add_edges_from((("x", i), ("P", k)) for i in family_scope(domain, p))
    return graph


class GibbsModel:
    """P[x] ∝ exp(Σ_f θ_f f(x)) · ∏_c [c(x) = 1] over ``domain`` (docs/theory.md §4).

    ``theta`` is indexed like ``queries`` (default all 0: the uniform distribution);
    ``constraints`` are hard (functions that must be 1). ``queries`` may be a
    :class:`~tessera.workload.workload.Workload`; a structured one brings its families' cells as
    queries (expanded order, so θ is indexed like
    :meth:`~tessera.workload.workload.Workload.all_weights`), refused beyond the guards of
    :func:`workload_functions`. The model is immutable: weights change through :meth:`with_theta` /
    :meth:`with_weight`, which share the compiled structure.
    """

    def __init__(
        self,
        domain: Domain,
        queries: Sequence[Function] | Workload,
        theta: Sequence[float] | npt.ArrayLike | None = None,
        *,
        names: Sequence[str] | None = None,
        constraints: Sequence[Function] = (),
        heuristic: str = "min-fill",
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        dense_limit: int = DENSE_LIMIT,
        compile_guard: bool = False,
    ) -> None:
        queries, names = _named(domain, queries, names)
        self.structure = Structure.build(
            domain, queries, names, tuple(constraints), heuristic=heuristic,
            memory_limit=memory_limit, dense_limit=dense_limit, compile_guard=compile_guard,
        )
        self.theta = _theta(theta, len(queries))
        self._cache: dict[str, object] = {}

    @staticmethod
    def plan_of(
        domain: Domain,
        queries: Sequence[Function] | Workload,
        *,
        names: Sequence[str] | None = None,
        constraints: Sequence[Function] = (),
        heuristic: str = "min-fill",
        memory_limit: int = DEFAULT_MEMORY_LIMIT,
        dense_limit: int = DENSE_LIMIT,
        compile_guard: bool = False,
    ) -> MemoryPlan:
        """The memory plan of the model the constructor would build with these arguments,
        without allocating a table: the same layout, elimination and guard
        (:meth:`Structure.planned`), so it raises the constructor's
        :class:`~tessera.errors.ResourceError` exactly when the constructor would."""
        queries, names = _named(domain, queries, names)
        return Structure.planned(domain, queries, names, tuple(constraints), heuristic=heuristic,
                                 memory_limit=memory_limit, dense_limit=dense_limit,
                                 compile_guard=compile_guard)[-1]

    @staticmethod
    def from_workload(workload: Workload, theta: Sequence[float] | npt.ArrayLike | None = None,
                      **options: Any) -> GibbsModel:
        """The model of a workload (structured or not) over its own domain; θ in expanded
        order (default: 0)."""
        return GibbsModel(workload.domain, workload, theta, **options)

    @staticmethod
    def _share(structure: Structure, theta: npt.NDArray[np.float64]) -> GibbsModel:
        model = object.__new__(GibbsModel)
        model.structure = structure
        model.theta = theta
        model._cache = {}
        return model

    def with_theta(self, theta: Sequence[float] | npt.ArrayLike) -> GibbsModel:
        """The same model with new weights; the decomposition is reused, not rebuilt."""
        return GibbsModel._share(self.structure, _theta(theta, self.structure.n_queries))

    def with_weight(self, j: int, value: float) -> GibbsModel:
        """θ_j ← value (one query's weight), sharing the structure."""
        theta = self.theta.copy()
        theta[j] = value
        return self.with_theta(theta)

    # -- structure ---------------------------------------------------------------------------
    @property
    def domain(self) -> Domain:
        return self.structure.domain

    @property
    def queries(self) -> tuple[Function, ...]:
        return self.structure.functions[: self.structure.n_queries]

    @property
    def width(self) -> int:
        """Width of the decomposition the program runs on (compiled variables)."""
        return self.structure.plan.width

    @property
    def plan(self) -> MemoryPlan:
        return self.structure.plan

    @cached_property
    def incidence_width(self) -> int:
        """Width of a min-fill decomposition of the incidence graph G(F) (an upper bound on tw)."""
        return treewidth(incidence_graph(self.domain, self.structure.functions),
                         self.structure.heuristic)[0]

    def decomposition(self) -> TreeDecomposition:
        """The tree decomposition (bags of compiled variables) the program runs on."""
        s = self.structure
        return TreeDecomposition(tuple(frozenset(b) for b in s.bags), s.parents)

    # -- passes (cached per model; θ is immutable) ------------------------------------------
    def _full_theta(self) -> npt.NDArray[np.float64]:
        n = self.structure.compiled.n_functions
        out = np.zeros(n)
        out[: len(self.theta)] = self.theta
        return out

    def _forward(self, semiring_name: str) -> Forward:
        if semiring_name not in self._cache:
            semiring = MAX_PLUS if semiring_name == "max" else LOG_SUM_PRODUCT
            theta = self._full_theta()
            tables = [g.log_table(theta, semiring.counts_multiplicity)
                      for g in self.structure.compiled.groups]
            self._cache[semiring_name] = self.structure.program.forward(tables, semiring)
        return self._cache[semiring_name]

    def _log_potentials(self) -> npt.NDArray[np.float64]:
        """The flat sum-product log-potentials of every factor group (one sparse product)."""
        flat = self.structure.flat
        return np.asarray(flat.weights @ self._full_theta()) + flat.base

    def _calibrated(self) -> tuple[float, npt.NDArray[np.float64]]:
        """(log Z of the compiled factors, flat factor marginals) from the junction tree."""
        if "junction" not in self._cache:
            try:
                self._cache["junction"] = self.structure.junction.infer(self._log_potentials())
            except QueryError:
                raise QueryError("the constraints exclude every point of the domain") from None
        return self._cache["junction"]  # type: ignore[return-value]

    def _constant_offset(self) -> float:
        c = self.structure.compiled.constant
        return math.fsum(self.theta[j] * c[j] for j in range(len(self.theta)) if c[j] >= 0)

    def _constant_feasible(self) -> bool:
        s = self.structure
        return all(s.compiled.constant[j] != 0 for j in range(s.n_queries, len(s.functions)))

    # -- answers -----------------------------------------------------------------------------
    def log_partition(self) -> float:
        """log Z = log Σ_x exp(Σ_f θ_f f(x)) (−∞ if the constraints exclude every point)."""
        if not self._constant_feasible():
            return -math.inf
        if "sum" in self._cache:  # a sampler's forward pass is there already
            return self._forward("sum").total + self._constant_offset()
        if "junction" in self._cache:
            return self._calibrated()[0] + self._constant_offset()
        log_z = self.structure.junction.log_partition(self._log_potentials())
        return log_z + self._constant_offset()

    def max_assignment(self) -> tuple[float, IntArray]:
        """(max_x Σ_f θ_f f(x), argmax x as codes). The value is Σ θ_f f(x*) evaluated at x*."""
        if not self._constant_feasible():
            raise QueryError("the constraints exclude every point of the domain")
        fwd = self._forward("max")
        if not math.isfinite(fwd.total):
            raise QueryError("the constraints exclude every point of the domain")
        xc = self.structure.program.argmax(fwd)
        codes = np.array([c.representative[xc[i]] for i, c in
                          enumerate(self.structure.compiled.classes)], dtype=np.int64)
        values = self._function_values_compiled(xc)
        value = math.fsum(self.theta[j] for j in range(len(self.theta)) if values[j])
        return value, codes

    def expectations(self) -> npt.NDArray[np.float64]:
        """E_P[f] for every query f (exact marginals from the up-and-down pass)."""
        if "expect" not in self._cache:
            s = self.structure
            if not self._constant_feasible():
                raise QueryError("the constraints exclude every point of the domain")
            marginals = self._calibrated()[1]
            out = np.asarray(s.flat.indicators @ marginals)[: len(self.theta)]
            constant = np.asarray(s.compiled.constant[: len(self.theta)])
            out = np.where(constant >= 0, constant, out).astype(np.float64)
            self._cache["expect"] = out
        return self._cache["expect"].copy()

    def sampler(self) -> Sampler:
        if "sampler" not in self._cache:
            if not self._constant_feasible():
                raise QueryError("the constraints exclude every point of the domain")
            self._cache["sampler"] = self.structure.program.sampler(self._forward("sum"))
        return self._cache["sampler"]

    def sample(self, m: int, rng: np.random.Generator, dtype: npt.DTypeLike = None) -> npt.NDArray:
        """m i.i.d. rows from P as codes, shape (m, len(domain)).

        The integer dtype defaults to the smallest signed type holding every code (int8 for a
        binary domain; 100,000 rows × 4096 bits stay at 400 MB). Sampling synthetic rows is
        post-processing, not privacy noise: a numpy Generator is fine here.
        """
        s = self.structure
        xc = self.sampler().sample(int(m), rng)
        sizes = s.domain.sizes
        if dtype is None:
            dtype = np.int64
            for dt in (np.int8, np.int16, np.int32):
                if max(sizes, default=1) <= np.iinfo(dt).max + 1:
                    dtype = dt
                    break
        out = np.empty((len(sizes), int(m)), dtype=dtype)
        for i, classes in enumerate(s.compiled.classes):
            out[i] = classes.expand(xc[i].astype(np.int64), rng)
        return out.T

    # -- pointwise ---------------------------------------------------------------------------
    def _function_values_compiled(self, xc: IntArray) -> npt.NDArray[np.bool_]:
        """f_j(x) for a full assignment of compiled variables, from the evaluation factors."""
        c = self.structure.compiled
        values = np.zeros(c.n_functions, dtype=bool)
        for g in c.groups:
            if len(g.functions):
                flat = np.ravel_multi_index(tuple(int(xc[v]) for v in g.scope), g.shape)
                values[g.functions] = g.values_at(int(flat))
        for j, k in enumerate(c.constant):
            if k >= 0:
                values[j] = bool(k)
        return values

    def score(self, codes: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Σ_f θ_f f(x) for rows of codes (evaluates every query on every row)."""
        codes = np.atleast_2d(np.asarray(codes))
        total = np.zeros(codes.shape[0])
        for j, f in enumerate(self.queries):
            if self.theta[j] != 0:
                total += self.theta[j] * f.evaluate(self.domain, codes)
        return total

    def log_probability(self, codes: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """log P[x] for rows of codes (−∞ where a constraint fails)."""
        codes = np.atleast_2d(np.asarray(codes))
        out = self.score(codes) - self.log_partition()
        for c in self.structure.functions[self.structure.n_queries :]:
            out[~c.evaluate(self.domain, codes)] = -np.inf
        return out


def _theta(theta: Sequence[float] | npt.ArrayLike | None, n: int) -> npt.NDArray[np.float64]:
    arr = np.zeros(n) if theta is None else np.array(theta, dtype=np.float64).reshape(-1)
    if arr.shape != (n,):
        raise QueryError(f"theta has {arr.size} entries for {n} queries")
    if not np.all(np.isfinite(arr)):
        raise QueryError("theta must be finite", hint="use constraints= for hard conditions")
    arr.setflags(write=False)
    return arr


def maximize(
    domain: Domain,
    queries: Sequence[Function] | Workload,
    weights: Sequence[float] | npt.ArrayLike,
    *,
    constraints: Sequence[Function] = (),
    heuristic: str = "min-fill",
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
) -> tuple[float, IntArray]:
    """max_x Σ_q w_q q(x) and an argmax (codes): LP pricing (any signs) and γ_w (w ≥ 0)."""
    model = GibbsModel(domain, queries, weights, constraints=constraints,
                          heuristic=heuristic, memory_limit=memory_limit)
    return model.max_assignment()


def log_partition(
    domain: Domain,
    queries: Sequence[Function] | Workload,
    theta: Sequence[float] | npt.ArrayLike,
    *,
    constraints: Sequence[Function] = (),
    heuristic: str = "min-fill",
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
) -> float:
    """log Σ_x exp(Σ_f θ_f f(x))."""
    model = GibbsModel(domain, queries, theta, constraints=constraints,
                          heuristic=heuristic, memory_limit=memory_limit)
    return model.log_partition()
