"""What an adaptive run leaves behind: its rounds, parameters, record (the spend re-proved from
the steps alone, :func:`tessera.synth.accounting.prove`) and the fitted result with its exact
answers (docs/theory.md §5, "the adaptive method"; :func:`tessera.synth.adaptive.adaptive` makes
them)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.accounting.guarantee import Guarantee
from tessera.engine.decomposition import DEFAULT_MEMORY_LIMIT
from tessera.engine.factors import scope
from tessera.errors import QueryError, ResourceError
from tessera.estimation.maxent import (
    FitResult,
    GroupMeasurement,
    ScopeModel,
    added_query_probabilities,
)
from tessera.privacy import Definition, Neighbours
from tessera.synth.accounting import Step, prove
from tessera.synth.model_answers import family_probabilities, scope_marginal
from tessera.synth.query_reads import ScopeReads
from tessera.synth.rounds import Timings
from tessera.synth.schedule import MEASURE_FRACTION
from tessera.synth.sensitive import query_functions
from tessera.workload.workload import Workload

__all__ = [
    "AdaptiveParameters",
    "AdaptiveProgress",
    "AdaptiveRecord",
    "AdaptiveResult",
    "AdaptiveRound",
    "AdaptiveTimings",
    "model_counts",
]

FloatArray = npt.NDArray[np.float64]

@dataclass(frozen=True)
class AdaptiveRound:
    """One round (DP outputs and post-processing only: safe to show)."""

    round: int
    candidate: str
    cells: int
    noise: float  # σ (zCDP) or b (pure) of the measurement
    selection_epsilon: float
    spent: float
    annealed: bool
    width: int
    model_bytes: int
    eligible: int
    seconds: float
    withheld: int = 0  # eligible candidates the answerability constraint removed


@dataclass(frozen=True)
class AdaptiveProgress:
    """A round's own record, the ``detail`` of its
    :class:`~tessera.synth.progress.ProgressEvent` (the CLI's progress bar)."""

    round: int
    #: the rounds of the run: exact in the final round, before it an upper bound (the run stops
    #: when the budget is spent; :func:`tessera.synth.progress.rounds_left`)
    rounds: int
    spent: float
    budget: float
    error: float  # ‖y_r − N μ̂_r‖₁ / (N cells_r) of the measurement just made: noisy, indicative

    @property
    def remaining(self) -> float:
        return max(self.budget - self.spent, 0.0)


@dataclass(frozen=True)
class AdaptiveParameters:
    """The settings of a run (``defaulted``: those derived rather than given)."""

    rounds: int
    rows: int
    measure_fraction: float
    max_model_size: int
    max_cells: int
    iterations: int
    final_iterations: int
    sample_size: int
    candidates: int
    normaliser: float
    batch: int = 1
    accelerated: bool = True
    defaulted: tuple[str, ...] = ()
    polish_passes: int = 0
    exact_work: int = 0
    initial_rounds: int = 0  # the T of the one-way initialisation (AIM's 16·d by default)
    cell_sigmas: float = 0.0  # the start's rule (0: AIM's T throughout)
    coarsen_sigmas: float = 0.0  # the coarsening's threshold τ / σ (0: every cell measured)
    answer_memory: int | None = None  # the answerability constraint's memory limit (None: off)
    answerable: int = 0  # the workload's queries it keeps answerable
    anneal: float = 2.0  # the annealing step (noise divided by it): AIM's 2; zCDP default √2
    prior_scale: float = 0.0  # the final estimate's prior on interactions (0: maximum likelihood)
    #: noise sd the average workload cell stood out at the rounds' first noise (None: no
    #: marginal in the workload); the prior runs below PRIOR_CELL_SIGMAS
    clarity: float | None = None
    #: the attributes outside the workload whose one-way marginals were measured at the
    #: initialisation (so the rows keep their distributions), and the share of the budget
    #: those measurements cost (exact sum of their costs / budget)
    columns: tuple[str, ...] = ()
    columns_share: float = 0.0
    #: the attributes outside the workload left uniformly random (``uniform_columns``)
    uniform_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class AdaptiveTimings(Timings):
    """:class:`~tessera.synth.rounds.Timings` (setup: candidates, initial measurements and fit;
    each round; output: the final fit and the rows) and ``fit``: the share of the total spent
    in the maximum-entropy fits."""

    fit: float = 0.0


@dataclass(frozen=True, eq=False)
class AdaptiveRecord:
    """What a run did (the same reading interface as :class:`tessera.synth.rounds.RunRecord`):
    budget, spend (equal to :func:`~tessera.synth.accounting.prove` of ``steps``), every
    mechanism, the rounds, parameters, timings, the final model's width."""

    algorithm: str
    budget: Guarantee
    spent: Guarantee
    steps: tuple[Step, ...]
    history: tuple[AdaptiveRound, ...]
    parameters: AdaptiveParameters
    timings: AdaptiveTimings
    width: int
    model_bytes: int
    source: str

    @property
    def neighbours(self) -> Neighbours:
        return self.spent.neighbours

    @property
    def private(self) -> bool:
        return bool(self.steps) and all(s.mechanism.private for s in self.steps)

    @property
    def withheld(self) -> int:
        """Eligible candidates the answerability constraint removed, summed over the
        selections (each round's count once)."""
        return sum({h.round: h.withheld for h in self.history}.values())

    def proved(self, definition: Definition | None = None) -> Guarantee:
        """The proof from the recorded steps alone, in the run's definition or ``definition``."""
        return prove(self.steps, definition or self.spent.definition, self.spent.neighbours,
                     self.spent.unit)

    def describe(self) -> str:
        p, t = self.parameters, self.timings
        measured = sum(1 for s in self.steps if s.role == "measurement")
        annealed = sum(1 for h in self.history if h.annealed)
        return "\n".join([
            self.algorithm,
            f"budget: {self.budget.text()}",
            f"spent:  {self.spent.text()} over {len(self.steps)} mechanisms",
            f"{len(self.history)} rounds ({annealed} with the noise divided by "
            f"{p.anneal:.4g}), {measured} groups "
            f"measured of {p.candidates} candidates; N = {p.normaliser:.6g}, rows = {p.rows}",
            f"start: T = {p.rounds}, measurement share {p.measure_fraction:g} of each round"
            + (f" ({MEASURE_FRACTION:g} at the one-way initialisation)"
               if p.measure_fraction != MEASURE_FRACTION and "measure_fraction" in p.defaulted
               else "")
            + (
                f" (AIM's {p.initial_rounds} at the one-way initialisation; the average "
                f"workload cell under {p.cell_sigmas:g} noise sd there, so the one-way "
                "marginals were measured again)" if p.initial_rounds > p.rounds else ""),
            f"model: width {self.width}, {self.model_bytes:,} bytes of junction-tree tables "
            f"(cap {p.max_model_size:,})",
            "final estimate: " + (f"posterior mode, Cauchy(0, {p.prior_scale:g}) prior on the "
                                  "model's interactions" if p.prior_scale > 0
                                  else "maximum likelihood (AIM's)")
            + ("" if p.clarity is None else
               f" (the average workload cell {p.clarity:.3g} noise sd out at the rounds' "
               "first noise)"),
            *([f"columns outside the workload: one-way marginals of {', '.join(p.columns)} "
               f"measured at the initialisation ({p.columns_share:.3g} of the budget)"]
              if p.columns else []),
            *([f"columns outside the workload left UNIFORMLY RANDOM (uniform_columns): "
               f"{', '.join(p.uniform_columns)}"] if p.uniform_columns else []),
            *([f"selection kept the workload's {p.answerable} queries and its families "
               f"answerable within {p.answer_memory:,} bytes (withheld {self.withheld:,} "
               "eligible offers over the rounds)"] if p.answer_memory is not None else []),
            f"time: {t.total:.3g} s ({t.fit:.3g} s fitting)",
        ])


@dataclass(frozen=True, eq=False)
class AdaptiveResult:
    """A finished run: the fitted model and its parameters, the measurements, the record and
    the rows (codes)."""

    model: ScopeModel
    fit: FitResult
    measurements: tuple[GroupMeasurement, ...]
    record: AdaptiveRecord
    rows: npt.NDArray[np.int64]
    workload: Workload

    @property
    def private(self) -> bool:
        return self.record.private

    @property
    def width(self) -> int:
        return self.model.width

    @property
    def total(self) -> float:
        return self.record.parameters.normaliser

    def sample(self, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """n fresh rows of the fitted model (post-processing)."""
        return self.model.sample(self.fit.theta, n, rng)

    def answers(self, workload: Workload, *,
                memory_limit: int = DEFAULT_MEMORY_LIMIT) -> FloatArray:
        """Exact answers (fractions) of the fitted model for a workload over its schema, in its
        expanded order (predicate queries, then every family's cells row-major).

        A **family** is read from its marginal P_θ(x_s), once per scope s
        (:func:`tessera.synth.model_answers.scope_marginal`: a measured scope, a clique, the
        clique tree's messages, else the model grown by s at θ_s = 0 under the engine's memory
        guard), its cells the sums over each axis's groups — never cell by cell: as engine
        features, a family's cells are one automaton each, and 28,699 cells of 45 two-way
        scopes outside the tree's cliques (Adult, 12 attributes) asked the junction tree's
        compilation for > 23 GiB. Any other query: from the marginal of its scope, read once
        per distinct scope from a measured scope, a clique or the clique tree's messages
        (:mod:`tessera.synth.query_reads`), else from a model with the query added at weight 0
        (engine passes in groups that fit ``memory_limit``:
        :func:`tessera.estimation.maxent.added_query_probabilities`).
        A read that does not fit ``memory_limit`` raises :class:`~tessera.errors.ResourceError`
        naming the query or family, before anything of its size is allocated."""
        if workload.domain != self.model.domain:
            raise QueryError("the workload is over another schema than the fitted model")
        if not workload.queries and not workload.partitions:
            raise QueryError("the workload has no queries")
        dom = workload.domain
        parts: list[FloatArray] = []
        if workload.queries:
            plain = Workload.of(dom, list(workload.queries), names=list(workload.names))
            parts.append(_query_answers(self.model, self.fit, plain, memory_limit))
        tree = self.model.clique_tree(self.fit.theta) if workload.partitions else None
        cache: dict[tuple[int, ...], FloatArray] = {}
        for family in workload.partitions:
            s = tuple(sorted(dom.index(a) for a in family.attributes))
            if s not in cache:
                try:
                    cache[s] = scope_marginal(self.model, self.fit, s, tree,
                                              memory_limit=memory_limit)
                except ResourceError as e:
                    raise ResourceError(f"family {family.name!r}: {e.message}", hint=e.hint) \
                        from None
            parts.append(family_probabilities(dom, family, cache[s], s))
        return np.concatenate(parts)


def _query_answers(model: ScopeModel, fit: FitResult, workload: Workload,
                   memory_limit: int) -> FloatArray:
    """P_θ(q = 1) of a workload's predicate queries (no families):
    :meth:`AdaptiveResult.answers` — grouped by scope, one marginal per distinct scope
    (:class:`tessera.synth.query_reads.ScopeReads`), the rest by engine passes."""
    functions, names = query_functions(workload.domain, workload)
    scopes = [scope(workload.domain, f) for f in functions]
    reads = ScopeReads(model, fit, model.clique_tree(fit.theta))
    out, rest = reads.probabilities(functions, scopes)
    if rest:  # in groups that fit the engine's memory guard, one pass per group
        out[rest] = added_query_probabilities(model, fit.theta, [functions[j] for j in rest],
                                              [names[j] for j in rest],
                                              memory_limit=memory_limit)
    return out


def model_counts(result: AdaptiveResult, workload: Workload, *,
                 memory_limit: int = DEFAULT_MEMORY_LIMIT) -> FloatArray:
    """N̂ · P_θ(q) for every query of ``workload`` in its expanded order (predicate queries
    first, then every family's cells), exact from the fitted model
    (:meth:`AdaptiveResult.answers`; :mod:`tessera.synth.model_answers`);
    ``memory_limit``: the engine's guard for the passes that read them."""
    if workload.domain != result.model.domain:
        raise ValueError("the workload is over another schema than the fitted model")
    if not workload.queries and not workload.partitions:
        return np.zeros(0)
    return result.total * result.answers(workload, memory_limit=memory_limit)
