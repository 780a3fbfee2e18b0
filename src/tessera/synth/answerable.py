"""Keep a workload's queries and families answerable from the adaptive synthesizer's model:
the public constraint on its selection that the adaptive route sets (docs/theory.md §10.5).

**Queries.** :meth:`tessera.synth.adaptive_record.AdaptiveResult.answers` reads a query q of W (a
predicate conjunction, a Boolean clause, a BDD query) from the fitted model P_θ: from a measured
scope that contains q's scope, else from a clique of the model's junction tree or the clique
tree's messages (when the model has no wide query; :mod:`tessera.synth.query_reads`, within
:func:`~tessera.synth.query_reads.tree_readable`'s limits), else by one more engine pass over
the model with q added at θ_q = 0, in the
groups of :func:`tessera.estimation.maxent.added_query_groups` (all such queries in one pass
when its plan fits the engine's memory guard, else halves, down to single queries; refused
without a plan when a measured marginal would be compiled cell by cell,
:func:`~tessera.estimation.maxent.cell_by_cell`).

**Families.** :func:`tessera.synth.model_answers.scope_marginal` reads a family's marginal
P_θ(x_s) from (1) a measured scope containing s, (2) a clique of the junction tree containing
s, (3) the clique tree's messages (:func:`tessera.estimation.tree_marginals.tree_marginal`,
within its own limits: :func:`~tessera.estimation.tree_marginals.tree_feasible`), else (4) the
model grown by s at θ_s = 0 — a junction tree (no wide query) or a Gibbs model (with them) that
the engine's memory guard can refuse. (2) and (3) exist only without wide queries.

Which reads need a pass and whether they fit are functions of the model's **structure** alone —
its maximal measured marginal scopes and its measured wide queries, in order of first
measurement (:func:`tessera.synth.model_view.model_structure`) — and of the domain and W.
:class:`Answerable` decides it for a structure by the same computations, without a table or a
fitted model: the same container test, the junction tree's bags and cliques
(:func:`tessera.engine.junction.junction_cliques`, :func:`~tessera.engine.junction.junction_tree`),
the very grouping function the query pass calls, the tree's structural limits, and the grown
model's own guard (:func:`~tessera.engine.junction.check_junction` of the grown scopes, or
:meth:`~tessera.engine.model.GibbsModel.plan_of` of its functions: each raises exactly when
the constructor would). The adaptive method, given ``answer_memory``, offers the selection of
every round only the candidates r whose measurement leaves a structure for which all of this
holds (:meth:`Answerable.offered`); the model the run ends with is the structure of its last
selection, so the answers cannot be refused (the run checks it once more and raises an
internal error if they were).

**Privacy.** The structure at round t is a function of the selections made before it (outputs
of the run's mechanisms) and the candidates (public: the workload and the schema); the filter
is a deterministic function of these and of the public workload and memory limit. Restricting
the exponential mechanism's range by a function of public inputs and past outputs is allowed
by adaptive composition (the mechanism of round t is ε-bounded-range on whichever range it is
given): the run's guarantee is unchanged. The order in which the plans are tried (a hint kept
from earlier structures, public too) changes the time, never the verdict.

**Cost.** Memoised per structure; short-circuits at the first refusal. The query verdict is
D(g) = fits(g) or (|g| > 1 and D(first half) and D(second half)) — exactly when the pass does
not refuse — evaluated halves-first for a group whose plan was refused before (:meth:`_passes`);
a family's cases cheapest first (:meth:`_tree_family_refusal`). A structure whose queries and
families all lie in measured scopes or cliques costs one elimination of the attribute graph; a
pending query costs engine plans (~40–60 ms each on Adult: the layout of every cell of the
model); a marginal of more than 65,536 cells beside a pending query costs nothing (refused
without a plan: such a plan alone took 60–95 s on Adult); a family outside the measured scopes
and cliques usually costs a bound from the largest bag, past it an elimination of the grown
graph, or one plan once a wide query is measured. Measured on Adult with 15 2-way families and
P wide conjunctions (docs/benchmarks.md, "the answerability constraint"): P = 0, 1.07× the run
without the constraint; P = 4, 1.37×; P = 10, 5.1× (> 38× before) — every distinct grown
structure needs at least one plan; W1 (105 families, no predicate) 1.22×. A run without
``answer_memory`` builds nothing of this.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tessera.engine.factors import Function, scope
from tessera.engine.junction import check_junction, junction_cliques
from tessera.engine.model import GibbsModel
from tessera.errors import ResourceError, TesseraError
from tessera.estimation import tree_marginals
from tessera.estimation.maxent import (
    added_query_groups,
    cell_by_cell,
    cell_by_cell_error,
    gibbs_functions,
)
from tessera.estimation.tree_marginals import tree_feasible
from tessera.synth.candidates import DEFAULT_MAX_CELLS, Candidate, candidates
from tessera.synth.model_view import model_structure
from tessera.synth.query_reads import evidence_feasible, readable_scopes
from tessera.synth.sensitive import query_functions
from tessera.workload.query import Query
from tessera.workload.workload import Workload

__all__ = ["Answerable", "Structure", "least_structure"]

Scope = tuple[int, ...]
#: A model's structure: its maximal marginal scopes and its wide queries' numbers, in order.
Structure = tuple[tuple[Scope, ...], tuple[int, ...]]
Key = tuple[Scope, int | None]


class Answerable:
    """Whether a model structure leaves every query and family of ``workload`` answerable
    within the engine's ``memory_limit`` (module docstring), memoised per structure.

    Public inputs only: the workload, its schema and the limit; a stateful helper (its caches
    fill as structures are asked about), not a value."""

    def __init__(self, workload: Workload, memory_limit: int) -> None:
        if isinstance(memory_limit, bool) or int(memory_limit) != memory_limit \
                or memory_limit < 1:
            raise ValueError(f"memory_limit must be a positive integer, got {memory_limit!r}")
        self.workload = workload
        self.memory_limit = int(memory_limit)
        dom = workload.domain
        if workload.queries:  # as AdaptiveResult.answers reads them
            plain = Workload.of(dom, list(workload.queries), names=list(workload.names))
            functions, names = query_functions(dom, plain)
        else:
            functions, names = (), ()
        self.functions: tuple[Function, ...] = tuple(functions)
        self.names: tuple[str, ...] = tuple(repr(n) for n in names)
        self.scopes: tuple[Scope, ...] = tuple(scope(dom, f) for f in functions)
        families: dict[Scope, str] = {}  # each distinct scope once, named by its first family
        for p in workload.partitions:
            families.setdefault(tuple(sorted(dom.index(a) for a in p.attributes)), p.name)
        #: The families' distinct scopes (domain order) and the first family's name of each.
        self.families: tuple[tuple[Scope, str], ...] = tuple(families.items())
        self._cells: dict[Scope, tuple[Function, ...]] = {}
        self._refusal: dict[Structure, ResourceError | None] = {}
        self._fitted: dict[tuple[int, ...], bool] = {}  # a group's last plan: an order hint
        self._last_tree: tuple[tuple[Scope, ...], tuple[list[Scope], list[int]]] | None = None
        distinct = {s: k for k, s in enumerate(dict.fromkeys(self.scopes))}
        #: the queries' distinct scopes, and each query's position among them
        self._distinct: tuple[Scope, ...] = tuple(distinct)
        self._scope_of: tuple[int, ...] = tuple(distinct[s] for s in self.scopes)
        self._conjunction: tuple[bool, ...] = tuple(isinstance(f, Query) for f in self.functions)

    @property
    def active(self) -> bool:
        """Whether W has anything to read from the model (a query or a family)."""
        return bool(self.functions or self.families)

    def pending(self, structure: Structure) -> list[int]:
        """The queries the answers read by an engine pass beside a model of this structure:
        with a wide query, those whose scope lies in no measured scope; without, those whose
        scope lies in no clique of the model's junction tree (a measured scope lies in one) and
        is not read from the clique tree's messages — decided per distinct scope, all at once
        (:func:`~tessera.synth.query_reads.readable_scopes`) — and is not a conjunction (read
        by evidence passes when :func:`~tessera.synth.query_reads.evidence_feasible`), as
        :class:`~tessera.synth.query_reads.ScopeReads` reads them."""
        scopes, queries = structure
        if not self.functions:
            return []
        if queries:
            sets = [frozenset(s) for s in scopes]
            return [j for j, s in enumerate(self.scopes)
                    if not any(frozenset(s) <= t for t in sets)]
        cliques, parents = self._tree(scopes)
        by_evidence = evidence_feasible([(c, None) for c in cliques])
        todo = [j for j in range(len(self.functions))
                if not (by_evidence and self._conjunction[j])]
        if not todo:  # every query a conjunction: read by the tree, nothing more to decide
            return []
        ks = sorted({self._scope_of[j] for j in todo})
        ok = dict(zip(ks, readable_scopes(self.workload.domain, [self._distinct[k] for k in ks],
                                          cliques, parents)))
        return [j for j in todo if not ok[self._scope_of[j]]]

    def _tree(self, scopes: tuple[Scope, ...]) -> tuple[list[Scope], list[int]]:
        """The cliques (variables) and parents of the model's junction tree
        (:func:`~tessera.engine.junction.junction_cliques`: no table), memoised for the
        structure last asked about (its queries and families share them)."""
        if self._last_tree is None or self._last_tree[0] != scopes:
            self._last_tree = (scopes, junction_cliques(self.workload.domain.sizes, scopes))
        return self._last_tree[1]

    def _bags(self, scopes: tuple[Scope, ...]) -> list[frozenset[int]]:
        """The maximal bags of the model's junction tree — its cliques (a set lies in a clique
        iff in a bag of the elimination)."""
        return [frozenset(c) for c in self._tree(scopes)[0]]

    def refusal(self, structure: Structure) -> ResourceError | None:
        """None when the answers beside a model of this structure fit the memory guard; else
        the refusal the answers would meet first: the query pass's (naming the query), else
        the first family's that cannot be read (naming it)."""
        if structure not in self._refusal:
            refused = self._query_refusal(structure)
            if refused is None:
                refused = self._family_refusal(structure)
            self._refusal[structure] = refused
        return self._refusal[structure]

    def _query_refusal(self, structure: Structure) -> ResourceError | None:
        """:func:`~tessera.estimation.maxent.added_query_groups`'s refusal for the pending
        queries (the call the answers make), or None — decided by the same plans, in an order
        that needs fewer of them (:meth:`_passes`); the refusal itself comes from the call."""
        scopes, queries = structure
        wl = self.workload
        rest = self.pending(structure) if self.functions else []
        if not rest:
            return None
        if cell_by_cell(wl.domain, scopes) is None and self._passes(structure, tuple(rest)):
            return None
        try:
            added_query_groups(wl.domain, scopes, [(j, wl.queries[j]) for j in queries],
                               [self.functions[j] for j in rest], [self.names[j] for j in rest],
                               memory_limit=self.memory_limit, cells=self._cells)
        except ResourceError as e:
            return e
        raise TesseraError("internal error: the answerability test and the answer pass "
                           "disagree")  # pragma: no cover - _passes decides as the pass does

    def _passes(self, structure: Structure, group: tuple[int, ...]) -> bool:
        """Whether :func:`~tessera.estimation.maxent.added_query_groups` answers the queries
        ``group`` (pending, in order) without refusing: D(g) = fits(g) or (|g| > 1 and
        D(first half) and D(second half)), fits(g) the engine's plan of the model with g added
        (the halves as the pass splits them). Either operand of the "or" may be evaluated first
        without changing D: a group whose plan was refused the last time it was asked (beside
        another structure) tries its halves first — late in a run the pending queries rarely
        fit in one pass, and that refused plan (the largest) is then usually not needed."""
        scopes, queries = structure
        dom = self.workload.domain
        wide = [(j, self.workload.queries[j]) for j in queries]

        def fits(g: tuple[int, ...]) -> bool:
            added = [(-1 - i, self.functions[j]) for i, j in enumerate(g)]
            try:
                GibbsModel.plan_of(dom, gibbs_functions(dom, scopes, [*wide, *added],
                                                        self._cells),
                                   memory_limit=self.memory_limit, compile_guard=True)
            except ResourceError:
                self._fitted[g] = False
                return False
            self._fitted[g] = True
            return True

        def passes(g: tuple[int, ...]) -> bool:
            if len(g) == 1:
                return fits(g)
            mid = len(g) // 2
            if self._fitted.get(g, True):
                return fits(g) or (passes(g[:mid]) and passes(g[mid:]))
            return (passes(g[:mid]) and passes(g[mid:])) or fits(g)

        return passes(group)

    def _family_refusal(self, structure: Structure) -> ResourceError | None:
        """The first family (in W's order) that :func:`~tessera.synth.model_answers.
        scope_marginal` could not read beside a model of this structure — the same four cases,
        decided on the structure — as a :class:`ResourceError` naming it, or None."""
        scopes, queries = structure
        sets = [frozenset(t) for t in scopes]
        todo = [(s, n) for s, n in self.families if not any(frozenset(s) <= t for t in sets)]
        if not todo:
            return None  # (1) every family lies in a measured scope
        if not queries:
            return self._tree_family_refusal(scopes, todo)
        dom = self.workload.domain
        wide = [(j, self.workload.queries[j]) for j in queries]
        for s, name in todo:  # with wide queries, only (4): the grown Gibbs model's own plan
            grown = [*scopes, s]
            try:
                big = cell_by_cell(dom, grown)
                if big is not None:
                    raise cell_by_cell_error(dom, big, "its marginal")
                GibbsModel.plan_of(dom, gibbs_functions(dom, grown, wide, self._cells),
                                   memory_limit=self.memory_limit, compile_guard=True)
            except ResourceError as e:
                return ResourceError(f"family {name!r}: {e.message}", hint=e.hint)
        return None

    def _tree_family_refusal(self, scopes: tuple[Scope, ...],
                             todo: list[tuple[Scope, str]]) -> ResourceError | None:
        """:meth:`_family_refusal` for a model without wide queries: a family is read when it
        lies in a clique (2), or the clique tree's messages are within their limits (3), or the
        tree grown by its scope passes the guard (4) — decided in the cheapest order (the
        cases are alternatives: the verdict is their "or"): the bags; a bound that implies (3)
        (the largest bag's cells times the scope's within the message limit, its size plus the
        scope's within the product's: every message of the walk is over a separator and scope
        variables, every product over a clique and scope variables, and a clique is a bag);
        the grown tree's guard, tables and compilation
        (:func:`~tessera.engine.junction.check_junction`); and only
        for a family the grown tree refuses, the compiled clique tree's walk
        (:func:`~tessera.estimation.tree_marginals.tree_feasible`)."""
        sizes = self.workload.domain.sizes
        bags = self._bags(scopes)
        # (3) without the tree: every message of tree_marginal is over a clique's separator and
        # the scope, every product over a clique and the scope (tree_feasible's walk), and a
        # clique is a bag — so the largest bag bounds them
        widest = max((len(b) for b in bags), default=0)
        largest = max((math.prod(sizes[v] for v in b) for b in bags), default=1)
        refused: list[tuple[Scope, str, ResourceError]] = []
        for s, name in todo:
            if any(frozenset(s) <= b for b in bags):
                continue
            if (largest * math.prod(sizes[v] for v in s) <= tree_marginals.MAX_MESSAGE_CELLS
                    and widest + len(s) <= tree_marginals.MAX_PRODUCT_VARIABLES):
                continue
            try:
                check_junction(sizes, [*scopes, s], memory_limit=self.memory_limit)
            except ResourceError as e:
                refused.append((s, name, e))
        if not refused:
            return None
        variables, parents = self._tree(scopes)  # the model's own tree's
        cliques = [(c, None) for c in variables]
        for s, name, e in refused:
            if not tree_feasible(cliques, parents, sizes, s):
                return ResourceError(f"family {name!r}: {e.message}", hint=e.hint)
        return None

    def keeps(self, keys: Sequence[Key], candidate: Candidate) -> bool:
        """Whether measuring ``candidate`` after measurements with these (scope, query) keys
        (in order) leaves the queries answerable."""
        grown = model_structure([*keys, (candidate.scope, candidate.query)])
        return self.refusal(grown) is None

    def confirm(self, keys: Sequence[Key], built: Structure | None = None) -> None:
        """Raise an internal error if the model of measurements with these keys (or the model
        ``built``, which must have their structure) leaves a query unanswerable — which the
        selection's constraint excludes by construction (module docstring)."""
        structure = model_structure(keys)
        if built is not None and built != structure:
            raise TesseraError("internal error: the fitted model's structure is not the one "
                               "the answerability constraint checked")
        refused = self.refusal(structure)
        if refused is not None:
            raise TesseraError("internal error: the model the selection built leaves a query "
                               "unanswerable despite the answerability constraint: "
                               f"{refused.message}")

    def offered(self, offered: Sequence[int], cands: Sequence[Candidate],
                keys: Sequence[Key]) -> list[int]:
        """The candidates of ``offered`` (indices into ``cands``) that :meth:`keeps`."""
        return [i for i in offered if self.keeps(keys, cands[i])]


def least_structure(workload: Workload, max_cells: int = DEFAULT_MAX_CELLS) -> Structure:
    """The structure of the least model any adaptive run ends with: the one-way marginals of
    every attribute the candidates mention (the initialisation measures them, in this order;
    the selection only adds to them)."""
    ones = sorted({c.scope[0] for c in candidates(workload, max_cells)
                   if c.is_marginal and len(c.scope) == 1})
    return model_structure([((a,), None) for a in ones])
