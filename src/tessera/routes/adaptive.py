"""``tessera answer --estimate adaptive``: answer a workload from the adaptive synthesizer's
fitted model (docs/theory.md §5 "the adaptive method", §9, §10.5).

Measuring a fixed strategy and reconstructing (``--estimate gls|model``) spends the budget on
every marginal of the strategy at once; on Adult's 105 two-way marginals its best estimates
(GReM-LNN, Mullins et al., NeurIPS 2024) stay at 2.6× the error of the adaptive synthesizer at
the same ρ (docs/benchmarks.md, "``--estimate adaptive``"). The adaptive route spends the
release's budget on the synthesizer's **select–measure–fit** loop instead — AIM's selection and
annealing schedule (McKenna, Mullins, Sheldon, Miklau, VLDB 2022, Algorithm 1), the
maximum-entropy fit P_θ of Private-PGM (McKenna, Sheldon, Miklau, ICML 2019) —
and answers every query q of W as

    â(q) = N̂ · P_θ(q),

computed exactly by the engine (:func:`tessera.synth.adaptive_record.model_counts`: a measured
scope's table, a clique of the junction tree, or one more inference pass; never sampled rows).
N̂ is the run's total: the inverse-variance weighted sum of its noisy one-way marginals under
add/remove, n under substitution.

**Privacy.** Exactly the adaptive synthesizer's (:func:`tessera.synth.adaptive.adaptive`, run
through :meth:`tessera.synth.synthesizer.Synthesizer.fit` unchanged): the exponential mechanism
and the discrete Gaussian (zCDP) or discrete Laplace (pure DP) from OpenDP, composed
adaptively; its run record lists every mechanism that ran and
:func:`tessera.synth.accounting.prove` re-proves the spend from them. The answers are
post-processing of those outputs. The ledger is charged as a synthesis run (the tautology at
the run's budget under add/remove; :mod:`tessera.synth.charge`).

**Order** (as :func:`tessera.release.answering.answer`): the requested files are checked writable
and the workload is checked (:func:`check_workload`: every family's marginal fits
:data:`MAX_SCOPE_CELLS`; every query the model cannot read from a table fits the engine's
memory guard with the least model any run ends with) before anything else; the data is read
and validated; the ledger is charged in a committed transaction; the run (its selection keeps
every query answerable: below); the answers; the files are written all or none
(:func:`tessera.data.outputs.staged`); only then is the charge marked ``released``. A failure
after the charge marks it ``aborted`` and keeps the budget spent (docs/theory.md §9.6).

**Predicate queries** are read from the marginal of their scope, once per distinct scope (a
measured scope, a clique, or the clique tree's messages), conjunctions past the messages' limits
by batched evidence passes over the clique tree (:mod:`tessera.synth.query_reads`): 1,000 random
conjunctions of Adult cost about what the synthesizer's run costs. **Cost estimate**
(:func:`route_cost`, public inputs): before the data is read the route says how many queries it
reads how; a workload with more than :data:`MAX_ENGINE_QUERIES` queries that need an engine pass
(their scopes too large for any read above) is refused with the estimate and ``--estimate gls``
as the cheaper route unless ``accept_cost``.

**No query's or family's memory failure happens after the charge** (docs/theory.md §10.5). A
predicate, Boolean or BDD query that none of these reads reaches is answered by one more engine
pass over the model with the query added at weight 0;
several such queries over shared attributes tie the decomposition through their automata (30
conjunctions of 8 of Adult's attributes: > 70 PiB in one pass, ~10^5 bytes each alone), so the
pass runs them in groups that fit (:func:`tessera.estimation.maxent.added_query_groups`: halved
until they fit, down to one query; refused without a plan beside a measured marginal of more
than 65,536 cells, which the engine would compile cell by cell). A family whose marginal lies in
no measured scope and no clique is read from the clique tree's messages, or past their limits
from the model grown by its scope, whose construction the memory guard can refuse. Whether all
of this fits depends only on the model's structure (its measured scopes and wide queries), and
:class:`tessera.synth.answerable.Answerable` decides it by the same computations without a
table. :func:`check_workload` applies it before the charge to the least model any run ends with
(the one-way marginals of every attribute the candidates mention), and the run applies it to
every selection: the adaptive method's ``answer_memory`` (set here to ``memory_limit``) offers
each round only the candidates whose measurement keeps every answer within the guard — public
inputs and past selections only, so the run's privacy is unchanged. The model the run ends with
therefore leaves every query and family answerable; the run and :func:`answer_adaptive` check it
once more and raise an internal error otherwise.

**What is proven.** The run's privacy guarantee (its record). Not an interval: the model is
biased (it fills unmeasured interactions by maximum entropy), so the answers carry **no proven
interval** — the files leave ``std_error`` and ``ci95_*`` empty and the certificate says so.

``seed`` makes every draw reproducible, for tests only: the output then says NOT PRIVATE.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.data.table import CsvOptions, ExtraColumns
from tessera.engine.decomposition import DEFAULT_MEMORY_LIMIT
from tessera.errors import QueryError, ResourceError, TesseraError
from tessera.privacy import ONE_ROW, Neighbours, PrivacyUnit
from tessera.release.budget import Budget
from tessera.release.ledger import Ledger
from tessera.routes.model_files import (
    NO_INTERVAL,
    answer_batches,
    model_certificate,
    model_outputs,
    write_answers,
    write_model_outputs,
)
from tessera.synth.adaptive_record import model_counts
from tessera.synth.answerable import Answerable, least_structure
from tessera.synth.candidates import DEFAULT_MAX_CELLS, candidates
from tessera.synth.fitted import FittedSynthesizer
from tessera.synth.synthesizer import Synthesizer
from tessera.workload.workload import Workload

__all__ = ["MAX_ENGINE_QUERIES", "MAX_SCOPE_CELLS", "NO_INTERVAL", "ModelRelease", "RouteCost",
           "answer_adaptive", "check_workload", "route_cost"]

#: Largest dense marginal (cells of the product of a family's attributes) read from the model.
MAX_SCOPE_CELLS = 1 << 24
#: Most queries read by engine passes that the route runs without ``accept_cost``: every round's
#: selection plans their pass beside each candidate's model (docs/benchmarks.md, "the
#: answerability constraint": 4 such queries cost 1.4× the run without them, 10 cost 5×).
MAX_ENGINE_QUERIES = 4
#: One engine plan of a query pass beside a model of Adult (measured: 40–60 ms), for the
#: estimate's seconds.
PLAN_SECONDS = 0.05


@dataclass(frozen=True)
class RouteCost:
    """What the route will cost beyond the synthesizer's own run, from public inputs only (the
    schema, the workload, the candidates): ``queries`` predicate queries over ``scopes``
    distinct scopes, each scope's marginal read once from the model
    (:mod:`tessera.synth.query_reads`); ``engine_queries`` of them read by an engine pass
    beside the least model any run ends with (their scopes too large for a marginal), which
    the selection's answerability constraint plans beside each of the ``candidates`` models it
    is offered, every round (``plans_per_round``, at least one each)."""

    queries: int
    scopes: int
    engine_queries: int
    candidates: int

    @property
    def plans_per_round(self) -> int:
        return self.candidates if self.engine_queries else 0

    @property
    def expensive(self) -> bool:
        """More than :data:`MAX_ENGINE_QUERIES` queries read by engine passes."""
        return self.engine_queries > MAX_ENGINE_QUERIES

    def describe(self) -> str:
        head = (f"adaptive route: {self.queries:,} queries over {self.scopes:,} scopes, each "
                "scope's marginal read once from the fitted model")
        if not self.engine_queries:
            return head + "; no engine pass (cost ≈ the synthesizer's run)"
        return (head + f"; {self.engine_queries:,} read by engine passes: the selection plans "
                f"≥ {self.plans_per_round:,} passes per round (~{PLAN_SECONDS * 1000:.0f} ms "
                f"each on Adult: ≥ {self.plans_per_round * PLAN_SECONDS:,.0f} s of CPU per "
                "round on top of the synthesizer's)")


def route_cost(workload: Workload, max_cells: int = DEFAULT_MAX_CELLS) -> RouteCost:
    """The route's cost estimate (:class:`RouteCost`) for ``workload``: public inputs only."""
    keeper = Answerable(workload, DEFAULT_MEMORY_LIMIT)
    pending = keeper.pending(least_structure(workload, max_cells)) if keeper.functions else []
    return RouteCost(len(keeper.functions), len(set(keeper.scopes)), len(pending),
                     len(candidates(workload, max_cells)))


@dataclass(frozen=True, eq=False)
class ModelRelease:
    """W's answers read from the fitted model of an adaptive run, and its certificate.

    ``answers[q]`` = N̂ · P_θ(q) in W's expanded order (predicate queries, then every family's
    cells); ``fitted`` the run (its record, its model); ``certificate`` the sealed run record
    with its ``answers`` section (:func:`tessera.routes.model_files.model_certificate`)."""

    workload: Workload
    answers: npt.NDArray[np.float64]
    fitted: FittedSynthesizer
    certificate: dict[str, Any]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def private(self) -> bool:
        return self.fitted.private

    @property
    def charge(self) -> Any:
        return self.fitted.charge

    @property
    def total(self) -> float:
        """N̂, the total the model's answers are scaled by."""
        return float(self.fitted.result.total)

    def to_frame(self) -> pd.DataFrame:
        """One row per query (``query``) or, for a structured workload, per cell (``family,
        cell``): the model's answer, and ``std_error``/``ci95_low``/``ci95_high`` empty (no
        proven interval). ``attrs['private']`` says whether it is private."""
        import pyarrow as pa

        frame = pa.Table.from_batches(list(answer_batches(self))).to_pandas()
        frame.attrs["private"] = self.private
        frame.attrs["estimate"] = NO_INTERVAL
        return frame

    def write(self, path: str | Path) -> Path:
        """The answers as CSV or Parquet (:func:`tessera.routes.model_files.write_answers`)."""
        from tessera.data.outputs import atomic

        (o,) = model_outputs(path, None)
        with atomic(o.path) as tmp:
            write_answers(self, tmp)
        return o.path

    def mechanisms(self) -> str:
        """The mechanisms that ran, counted by name and role (from the run's recorded steps)."""
        counts: dict[tuple[str, str], int] = {}
        for step in self.fitted.result.record.steps:
            key = (step.mechanism.name, step.role)
            counts[key] = counts.get(key, 0) + 1
        return ", ".join(f"{name} ×{n} ({role})" for (name, role), n in counts.items())

    def describe(self) -> str:
        """A few lines for a terminal: the run's record, the mechanisms that ran and what the
        answers are."""
        return "\n".join([self.fitted.describe(), f"mechanisms: {self.mechanisms()}",
                          f"answers: {self.workload.n_queries:,} queries read from the fitted "
                          f"model (N̂ = {self.total:,.1f}); {NO_INTERVAL}"])


def check_workload(workload: Workload, max_cells: int = DEFAULT_MAX_CELLS,
                   memory_limit: int = DEFAULT_MEMORY_LIMIT) -> None:
    """Refuse, before any budget is spent, a workload the route cannot answer from a model
    (public inputs only: the schema, the workload, the candidates' ``max_cells``, the engine's
    ``memory_limit``): one with no query; a family whose attributes' product exceeds
    :data:`MAX_SCOPE_CELLS` codes (the model's marginal over them is a dense table); a query
    (predicate, Boolean clause, BDD query) whose engine pass, or a family whose marginal, does
    not fit the memory guard even beside the least model a run ends with (module docs: the
    one-way marginals of the attributes the candidates mention, at θ = 0) — the answerability
    test of :class:`tessera.synth.answerable.Answerable` that every selection of the run then
    keeps.
    A query over one attribute is read from its one-way marginal. (A workload that mentions no
    attribute is refused by the synthesizer's own preflight, also before the charge.)"""
    if workload.n_queries == 0:
        raise QueryError("the workload has no queries")
    dom = workload.domain
    for p in workload.partitions:
        cells = math.prod(dom[a].size for a in p.attributes)
        if cells > MAX_SCOPE_CELLS:
            raise QueryError(
                f"family {p.name!r}: the model's marginal over {', '.join(p.attributes)} has "
                f"{cells:,} cells, over the {MAX_SCOPE_CELLS:,} the adaptive route reads",
                hint="answer it with --estimate gls (a strategy), or split the family")
    keeper = Answerable(workload, memory_limit)
    refused = keeper.refusal(least_structure(workload, max_cells)) if keeper.active else None
    if refused is not None:
        raise ResourceError(
            f"{refused.message} — the adaptive route cannot read it from any model (nothing "
            "was charged)",
            hint="split the query into simpler ones (fewer attributes, or disjoint "
                 "conjunctions), or answer the workload with --estimate gls")


def answer_adaptive(
    data: Any,
    workload: Workload,
    budget: Budget,
    *,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    unit: PrivacyUnit = ONE_ROW,
    ledger: Ledger | str | Path | None = None,
    label: str | None = None,
    seed: int | None = None,
    csv: CsvOptions = CsvOptions(),
    table: str | None = None,
    on_invalid: str = "error",
    extra_columns: ExtraColumns = "error",
    output: str | Path | None = None,
    certificate: str | Path | None = None,
    progress: Callable[[Any], None] | None = None,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    accept_cost: bool = False,
    notice: Callable[[str], None] | None = None,
    **options: Any,
) -> ModelRelease:
    """Answer ``workload`` on ``data`` under ``budget`` from the adaptive synthesizer's fitted
    model (module docs for the order and what is proven).

    ``output`` (.csv/.parquet) and ``certificate`` (.json): written, all or none, before the
    ledger marks the charge released; checked writable before it is made. ``options``: the
    adaptive method's (:func:`tessera.synth.adaptive.adaptive`: ``rounds``,
    ``max_model_size``, …); ``rows`` defaults to 0 (no rows are sampled: the answers come
    from the model). ``memory_limit``: the engine's memory guard (bytes) for the passes that
    read queries from the model; the preflight, the selection's answerability constraint
    (the synthesizer's ``answer_memory``) and the answers all use it. ``unit``: one row, or
    one person of at most K rows (the synthesizer's, docs/theory.md §3.13). ``accept_cost``:
    run a workload whose :func:`route_cost` is :attr:`~RouteCost.expensive` (else refused
    before anything is charged, with the estimate and the cheaper route). ``notice``: called
    with the estimate (:meth:`RouteCost.describe`) once the inputs are checked, before the
    data is read or anything is charged."""
    if not isinstance(workload, Workload):
        raise QueryError("the adaptive route takes a tessera.Workload",
                         hint="Workload.load(path, domain) or Workload.from_sql(...)")
    outputs = model_outputs(output, certificate)
    options.setdefault("rows", 0)
    # answers only: the columns outside the workload are no answer's business, so nothing of
    # the budget goes to them (the record still names them, as uniform in the model)
    options.setdefault("uniform_columns", True)
    if "answer_memory" in options:
        raise QueryError("the adaptive route sets answer_memory itself",
                         hint="pass memory_limit= (the engine's guard for the answers)")
    if isinstance(memory_limit, bool) or not isinstance(memory_limit, int) or memory_limit < 1:
        raise QueryError(f"memory_limit must be a positive integer (bytes), got "
                         f"{memory_limit!r}")
    options["answer_memory"] = memory_limit  # the selection keeps every query answerable
    synthesizer = Synthesizer("adaptive", **options)  # unknown options refused here
    cells = options.get("max_cells", DEFAULT_MAX_CELLS)  # a bad value: refused by fit's preflight
    cells = cells if isinstance(cells, int) and not isinstance(cells, bool) and cells >= 1 \
        else DEFAULT_MAX_CELLS
    check_workload(workload, cells, memory_limit)
    cost = route_cost(workload, cells)
    if not accept_cost:
        if cost.expensive:
            raise ResourceError(
                f"{cost.describe()} — more than {MAX_ENGINE_QUERIES} queries read by engine "
                "passes (nothing was charged)",
                hint="answer it with --estimate gls (a strategy and least squares: no model), "
                     "split the wide queries, or run it anyway with --accept-cost "
                     "(accept_cost=True)")
    if notice is not None:
        notice(cost.describe())
    book = Ledger.open(ledger) if isinstance(ledger, (str, Path)) else ledger
    done: list[ModelRelease] = []
    start = time.perf_counter()

    def deliver(fitted: FittedSynthesizer) -> None:  # after the charge, before "released"
        t0 = time.perf_counter()
        try:
            answers = model_counts(fitted.result, workload, memory_limit=memory_limit)
        except ResourceError as e:  # the selection's constraint excludes it by construction
            raise TesseraError(f"internal error: the answers did not fit the engine's memory "
                               f"guard despite the selection's constraint: {e.message}"
                               ) from None
        t1 = time.perf_counter()
        release = ModelRelease(workload, answers, fitted, model_certificate(fitted, answers),
                               {"fit": t0 - start, "answers": t1 - t0})
        write_model_outputs(release, outputs)
        release.timings["deliver"] = time.perf_counter() - t1
        done.append(release)

    synthesizer.fit(data, workload, budget, neighbours=neighbours, unit=unit, ledger=book,
                    label=label or "answers (adaptive model)", seed=seed, csv=csv,
                    table=table, on_invalid=on_invalid,  # type: ignore[arg-type]
                    extra_columns=extra_columns, progress=progress, deliver=deliver)
    if not done:  # fit returns only after deliver ran
        raise TesseraError("internal error: the adaptive route delivered nothing")
    done[0].timings["total"] = time.perf_counter() - start
    return done[0]
