"""Keep a workload's queries answerable from the adaptive synthesizer's model: the public
constraint on its selection that the adaptive route sets (docs/theory.md §10.5).

:meth:`tessera.synth.adaptive.AdaptiveResult.answers` reads a query q of W (a predicate
conjunction, a Boolean clause, a BDD query) from the fitted model P_θ: from a measured scope
that contains q's scope, else from a clique of the model's junction tree (when the model has no
wide query), else by one more engine pass over the model with q added at θ_q = 0, in the
groups of :func:`tessera.estimation.maxent.added_query_groups` (all such queries in one pass
when its plan fits the engine's memory guard, else halves, down to single queries). That pass
is refused only when one query alone does not fit beside the model. Which queries need it and
whether their groups fit are functions of the model's **structure** alone — its maximal
measured marginal scopes and its measured wide queries, in order of first measurement
(:func:`tessera.synth.model_view.model_structure`) — and of the domain and W.

:class:`Answerable` decides it for a structure by the same computation, without a table:
the same test for a measured scope (:meth:`tessera.estimation.maxent.ScopeModel.container`'s),
the junction tree's bags (:func:`tessera.engine.junction.junction_bags`: a set of attributes
lies in a clique iff it lies in a bag), and the very grouping function the pass calls
(:func:`~tessera.estimation.maxent.added_query_groups`, with the engine's own plan and guard).
The adaptive method, given ``answer_memory``, offers the selection of every round only the
candidates r whose measurement leaves a structure for which this holds
(:meth:`Answerable.offered`); the model the run ends with is the structure of its last
selection, so the answer pass cannot be refused (the run checks it once more and raises an
internal error if it were).

**Privacy.** The structure at round t is a function of the selections made before it (outputs
of the run's mechanisms) and the candidates (public: the workload and the schema); the filter
is a deterministic function of these and of the public workload and memory limit. Restricting
the exponential mechanism's range by a function of public inputs and past outputs is allowed
by adaptive composition (the mechanism of round t is ε-bounded-range on whichever range it is
given): the run's guarantee is unchanged.

**Cost.** Per distinct grown structure (memoised) the pass's plans: one (~10 ms on Adult with
a few predicates) when the pending queries fit in one pass, up to 2k − 1 when they must be
halved — on Adult with 10 wide conjunctions tied through their automata, the run was more than
35× slower than without the constraint (docs/benchmarks.md, "the answerability constraint": a
known cost). A structure whose queries all lie in measured scopes or cliques costs one
elimination of the attribute graph. A run without ``answer_memory`` builds nothing of this.
"""

from __future__ import annotations

from collections.abc import Sequence

from tessera.engine.factors import Function, scope
from tessera.engine.junction import junction_bags
from tessera.errors import ResourceError, TesseraError
from tessera.estimation.maxent import added_query_groups
from tessera.synth.candidates import DEFAULT_MAX_CELLS, Candidate, candidates
from tessera.synth.model_view import model_structure
from tessera.synth.sensitive import query_functions
from tessera.workload.workload import Workload

__all__ = ["Answerable", "Structure", "least_structure"]

Scope = tuple[int, ...]
#: A model's structure: its maximal marginal scopes and its wide queries' numbers, in order.
Structure = tuple[tuple[Scope, ...], tuple[int, ...]]
Key = tuple[Scope, int | None]


class Answerable:
    """Whether a model structure leaves every query of ``workload`` answerable within the
    engine's ``memory_limit`` (module docstring), memoised per structure.

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
        self._cells: dict[Scope, tuple[Function, ...]] = {}
        self._refusal: dict[Structure, ResourceError | None] = {}

    @property
    def active(self) -> bool:
        """Whether any query could need a pass (a workload of families only never does)."""
        return bool(self.functions)

    def pending(self, structure: Structure) -> list[int]:
        """The queries the answers read by an engine pass beside a model of this structure:
        those whose scope lies in no measured scope and — when the model has no wide query —
        in no clique of its junction tree."""
        scopes, queries = structure
        sets = [frozenset(s) for s in scopes]
        out = [j for j, s in enumerate(self.scopes) if not any(frozenset(s) <= t for t in sets)]
        if out and not queries:
            bags = junction_bags(self.workload.domain.sizes, scopes)
            out = [j for j in out if not any(frozenset(self.scopes[j]) <= b for b in bags)]
        return out

    def refusal(self, structure: Structure) -> ResourceError | None:
        """None when the answers beside a model of this structure fit the memory guard; else
        the engine's refusal, naming the first query that does not fit alone."""
        if structure not in self._refusal:
            scopes, queries = structure
            wl = self.workload
            refused = None
            try:  # the model's own tree is refused only far past the selection's size cap
                rest = self.pending(structure)
                added_query_groups(wl.domain, scopes, [(j, wl.queries[j]) for j in queries],
                                   [self.functions[j] for j in rest],
                                   [self.names[j] for j in rest],
                                   memory_limit=self.memory_limit, cells=self._cells)
            except ResourceError as e:
                refused = e
            self._refusal[structure] = refused
        return self._refusal[structure]

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
