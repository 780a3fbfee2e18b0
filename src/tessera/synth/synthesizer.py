"""Private synthetic data in one call: :class:`Synthesizer` (docs/theory.md §5, §6, §9).

``Synthesizer(method, **options).fit(data, workload, budget)`` returns a
:class:`FittedSynthesizer`: the synthetic rows (``.sample()``: a DataFrame in the schema's own
values), the fitted output distribution (``.answers()``: its exact answers) and a JSON-ready
run record (``.run_record()``). Methods:

* ``"adaptive"`` (the default): :func:`tessera.synth.adaptive.adaptive`, AIM's selection over
  whole marginals and budget schedule with a maximum-entropy fit on the exact engine (any
  workload: it measures only what keeps the model under its memory cap);
* ``"ipmwu"``: :func:`tessera.synth.ipmwu.ipmwu`, Ghazi et al.'s Algorithm 1 on the engine's
  implicit Gibbs weights (any domain whose workload has a small width);
* ``"mwem"``: :func:`tessera.synth.mwem.mwem`, the same rounds on an explicit histogram
  (domains of at most 2^20 points);
* ``"lp"``: :func:`tessera.synth.lp.synthesize`, the LP approach: post-processing of a private
  release of the workload (``fit(..., release=tessera.answer(...))``; module docs below);

**Order** (as :func:`tessera.release.answering.answer`): the budget is mapped to what the run is
calibrated in; the data is read and validated against the schema (errors reach the curator
before any budget is spent); the ledger, if any, is charged in a committed transaction; only
then does the run start; the ledger marks the charge ``released`` when the run succeeds and
``aborted`` if it fails (the budget stays spent). Nothing leaves :meth:`Synthesizer.fit` before
the charge.

**Budgets and the ledger charge**: :mod:`tessera.synth.charge`.

**Layers.** :mod:`tessera.synth` and :mod:`tessera.release` are independent layers
(``lint-imports``): this module never imports the release layer at run time. A budget is read
through its fields (a :class:`tessera.Budget`, or a :class:`tessera.synth.accounting.Budget`);
a ledger is an opened :class:`tessera.Ledger` (``Ledger.open(path)``) used through its methods
(:class:`LedgerLike`); the LP method post-processes a :class:`tessera.Release` passed as
``release=`` (the release was charged to the ledger when it was answered).

``seed`` makes every random draw reproducible, for TESTS ONLY: the run is then NOT PRIVATE, and
its record, frames and files say so.

The fitted result (rows, exact answers, files) is :mod:`tessera.synth.fitted`; its run record
and description :mod:`tessera.synth.record`.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tessera.data.counts import count
from tessera.data.outputs import Delivery, aborted_hint, settled
from tessera.data.source import encode
from tessera.data.table import CsvOptions, ExtraColumns, OnInvalid
from tessera.engine.bdd import BooleanQuery
from tessera.engine.decomposition import DEFAULT_MEMORY_LIMIT
from tessera.engine.factors import Function
from tessera.engine.model import GibbsModel
from tessera.errors import DataError, QueryError, ResourceError, TesseraError
from tessera.mechanisms import NoiseSource
from tessera.privacy import DEFAULT_NEIGHBOURS, ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.schema.domain import Domain
from tessera.synth.accounting import Budget as RunBudget
from tessera.synth.adaptive import adaptive
from tessera.synth.answerable import Answerable, least_structure
from tessera.synth.candidates import DEFAULT_MAX_CELLS, Candidate, candidate_workload, candidates
from tessera.synth.charge import (
    LedgerLike,
    Target,
    check_ledger,
    ledger_charge,
    opened_ledger,
    person_shares,
    synthesis_mechanism,
)
from tessera.synth.columns import check_columns, warn_uniform
from tessera.synth.defaults import ApproxBudget, default_workload, stated_budget
from tessera.synth.fitted import FittedSynthesizer, synth_outputs, write_outputs
from tessera.synth.ipmwu import ipmwu
from tessera.synth.mwem import DEFAULT_TABLE_LIMIT, MAX_CELLS, cells, mwem
from tessera.synth.parameters import default_parameters
from tessera.synth.progress import Reporter
from tessera.synth.schedule import MEASURE_FRACTION, Schedule, sensitivities
from tessera.synth.sensitive import SensitiveCounts, query_functions, sensitive_counts
from tessera.workload.clause import BooleanClause
from tessera.workload.query import Query
from tessera.workload.workload import Workload

if TYPE_CHECKING:  # the release layer is a sibling of synth: no runtime import (lint-imports)
    from tessera.release.answering import Release
    from tessera.release.budget import Budget as ReleaseBudget

logger = logging.getLogger(__name__)

__all__ = [
    "METHODS",
    "Synthesizer",
    "check_lp_workload",
    "initial_spend",
    "TAUTOLOGY_NOTE",
    "as_workload",
    "with_tautology",
]

#: Methods :class:`Synthesizer` runs (the first is the default).
METHODS = ("adaptive", "ipmwu", "mwem", "lp")

#: Arguments :meth:`Synthesizer.fit` sets itself (not options).
_SET_BY_FIT = frozenset({
    "domain", "queries", "data", "epsilon", "rho", "neighbours", "source", "rng", "replay",
    "names", "on_invalid", "extra_columns", "progress", "release", "n", "callback", "targets",
})


# -- the synthesizer ---------------------------------------------------------------------------


def _method_options(method: str) -> set[str]:
    if method == "adaptive":
        names = set(inspect.signature(adaptive).parameters) - {"workload", "counts", "budget"}
    elif method == "ipmwu":
        names = set(inspect.signature(ipmwu).parameters)
    elif method == "mwem":
        names = set(inspect.signature(mwem).parameters)
    else:
        from tessera.synth.lp import solve_lp, synthesize

        names = set(inspect.signature(synthesize).parameters) | set(
            inspect.signature(solve_lp).parameters) | {"rows"}
        names.discard("options")
    return (names | {"uniform_columns"}) - _SET_BY_FIT


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise TesseraError(f"unknown method {method!r}",
                           hint="available: " + ", ".join(METHODS))
    return method


@dataclass(frozen=True, init=False)
class Synthesizer:
    """A synthesis method and its options (a frozen configuration); :meth:`fit` runs it.

    Options are the method's own parameters, and for every method ``uniform_columns``
    (:mod:`tessera.synth.columns`: True leaves the attributes outside the workload uniformly
    random, with a warning and in the record; the default measures them (adaptive) or refuses
    the workload (the others)): for ``ipmwu`` and ``mwem`` those of
    :func:`~tessera.synth.ipmwu.ipmwu` (``rounds``, ``step``, ``sample_size``, ``rows``,
    ``expectations``, ``update``, ``total_fraction``, ``constraints``, …); for ``lp`` those of
    :func:`~tessera.synth.lp.synthesize` and :func:`~tessera.synth.lp.solve_lp` (``rows`` is
    its ``m``). Unknown options are refused here, before any data is read.

    **The constructor form** (as SmartNoise, SDV and synthcity are called): the budget
    (``epsilon=``; ``epsilon=`` with ``delta=``; ``rho=``: :func:`tessera.synth.defaults.
    stated_budget`), the public schema (``domain=``) and optionally ``workload=``,
    ``neighbours=``, ``unit=`` and ``seed=`` (TESTS ONLY: NOT PRIVATE) are given here, and
    ``fit(df)`` needs nothing else. Without a workload, every 2-way marginal of the schema is
    fitted when it fits the engine's limits, else every 1-way marginal
    (:func:`tessera.synth.defaults.default_workload`; the run record's ``notes`` say which and
    why). A budget given both here and to :meth:`fit` is refused (one budget, stated once).
    :meth:`fit` returns the :class:`~tessera.synth.fitted.FittedSynthesizer` and keeps it
    (:attr:`fitted`), so that :meth:`sample` draws from it (post-processing, no privacy cost)
    and :meth:`fit_sample` does both.

    >>> import pandas as pd, tessera as ts
    >>> dom = ts.Domain.from_dict({"attributes": {
    ...     "a": {"type": "categorical", "values": ["x", "y"]},
    ...     "b": {"type": "categorical", "values": ["u", "v", "w"]},
    ...     "c": {"type": "integer", "min": 0, "max": 1}}})
    >>> df = pd.DataFrame({"a": ["x", "y"] * 50, "b": ["u", "v", "w", "u"] * 25,
    ...                    "c": [0, 1, 1, 0] * 25})
    >>> synth = ts.Synthesizer(epsilon=1.0, domain=dom, seed=0, rounds=8)  # seed: tests only
    >>> rows = synth.fit_sample(df, n=10)
    >>> list(rows.columns), len(rows)
    (['a', 'b', 'c'], 10)
    >>> (note,) = synth.fitted.run_record()["notes"]
    >>> note.startswith("default workload: all 3 2-way marginals")
    True
    """

    method: str
    options: tuple[tuple[str, Any], ...]
    #: the budget stated in the constructor (None: given to :meth:`fit`)
    budget: Any = None
    domain: Domain | None = dataclasses.field(default=None, compare=False)
    workload: Workload | None = dataclasses.field(default=None, compare=False, repr=False)
    neighbours: Neighbours | None = None
    unit: PrivacyUnit | None = None
    seed: int | None = None

    def __init__(self, method: str = "adaptive", *, epsilon: float | None = None,
                 delta: float | None = None, rho: float | None = None,
                 domain: Domain | None = None, workload: Workload | None = None,
                 neighbours: Neighbours | str | None = None, unit: PrivacyUnit | None = None,
                 seed: int | None = None, **options: Any) -> None:
        _check_method(method)
        unknown = sorted(set(options) - _method_options(method))
        if unknown:
            raise TesseraError(
                f"method {method!r} has no option {unknown[0]!r}",
                hint="options: " + ", ".join(sorted(_method_options(method))))
        if domain is not None and not isinstance(domain, Domain):
            raise TesseraError(f"domain must be a tessera.Domain (the public schema), got "
                               f"{type(domain).__name__}", hint="tessera.Domain.load(path)")
        if workload is not None and not isinstance(workload, Workload):
            raise QueryError("workload= in the constructor must be a tessera.Workload",
                             hint="Workload.load(path, domain), or pass a list of queries "
                                  "to fit(data, [queries...], domain=domain)")
        if workload is not None and domain is not None and workload.domain != domain:
            raise QueryError("the workload is over another schema than domain=")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TesseraError(f"seed must be an integer (tests only), got {seed!r}")
        object.__setattr__(self, "method", method)
        object.__setattr__(self, "options", tuple(sorted(options.items())))
        object.__setattr__(self, "budget", stated_budget(epsilon, delta, rho))
        object.__setattr__(self, "domain", domain)
        object.__setattr__(self, "workload", workload)
        object.__setattr__(self, "neighbours",
                           None if neighbours is None else Neighbours.parse(neighbours))
        object.__setattr__(self, "unit", unit)
        object.__setattr__(self, "seed", seed)

    @property
    def fitted(self) -> FittedSynthesizer:
        """The result of the last :meth:`fit` (refused before any)."""
        fitted = self.__dict__.get("last_fit")
        if fitted is None:
            raise TesseraError("the synthesizer is not fitted yet", hint="fit(df) first, or "
                               "fit_sample(df)")
        return fitted  # type: ignore[no-any-return]

    def sample(self, n: int | None = None) -> Any:
        """``n`` rows (a DataFrame in the schema's values and columns) drawn from the last
        fit's output distribution — post-processing, no privacy cost — or the run's own rows
        (n None). Seeded only when ``seed`` was given (the rows of successive calls then
        differ but repeat from run to run); otherwise drawn from fresh OS entropy."""
        fitted = self.fitted
        return fitted.sample(n, self.__dict__.get("sample_rng"))

    def fit_sample(self, data: Any, n: int | None = None, **fit_options: Any) -> Any:
        """:meth:`fit` on ``data`` (with ``fit_options``), then :meth:`sample` ``n`` rows (the
        run's own rows when n is None)."""
        self.fit(data, **fit_options)
        return self.sample(n)

    def _fit_inputs(self, workload: Workload | Sequence[Function] | None, budget: Any,
                    neighbours: Neighbours | str | None, unit: PrivacyUnit | None,
                    seed: int | None, domain: Domain | None,
                    ) -> tuple[Any, Any, Neighbours | str | None, PrivacyUnit, int | None,
                               Domain | None]:
        """The constructor's inputs merged with :meth:`fit`'s: a budget stated in both is
        refused; the others may be given in both only when they agree."""
        if budget is not None and self.budget is not None:
            raise TesseraError(
                "a budget was given both to the constructor and to fit(): state it once",
                hint="Synthesizer(epsilon=...).fit(df), or Synthesizer().fit(df, workload, "
                     "budget)")
        budget = self.budget if budget is None else budget
        if neighbours is not None and self.neighbours is not None and \
                Neighbours.parse(neighbours) is not self.neighbours:
            raise TesseraError(f"neighbours: the constructor says {self.neighbours.label}, "
                               f"fit() {Neighbours.parse(neighbours).label}", hint="give it once")
        neighbours = self.neighbours if neighbours is None else neighbours
        for name, mine, theirs in (("unit", self.unit, unit), ("seed", self.seed, seed),
                                   ("domain", self.domain, domain)):
            if mine is not None and theirs is not None and mine != theirs:
                raise TesseraError(f"{name}: the constructor and fit() give different values",
                                   hint="give it once")
        unit = self.unit if unit is None else unit
        seed = self.seed if seed is None else seed
        domain = self.domain if domain is None else domain
        workload = self.workload if workload is None else workload
        return workload, budget, neighbours, ONE_ROW if unit is None else unit, seed, domain

    def _default_workload(self, domain: Domain | None, budget: Any,
                          neighbours: Neighbours | str | None,
                          unit: PrivacyUnit) -> tuple[Workload, tuple[str, ...]]:
        """Every 2-way marginal, else every 1-way (:func:`default_workload`), checked by
        :meth:`preflight` under the memory limit of the options (``memory_limit``, or the
        adaptive method's ``answer_memory``; else the engine's default)."""
        if domain is None:
            raise QueryError("without a workload the synthesizer needs the public schema to "
                             "build its default (every 2-way marginal)",
                             hint="Synthesizer(epsilon=..., domain=tessera.Domain.load(path))")
        opts = self.settings
        limit = opts.get("memory_limit", opts.get("answer_memory")) or DEFAULT_MEMORY_LIMIT
        rel = neighbours if neighbours is not None else DEFAULT_NEIGHBOURS

        def check(w: Workload) -> None:  # lp under add/remove fits W with TRUE added
            lp_adds = self.method == "lp" and Neighbours.parse(rel) is Neighbours.ADD_REMOVE
            self.preflight(with_tautology(w)[0] if lp_adds else w, budget, neighbours=rel,
                           unit=unit)

        chosen = default_workload(domain, check, int(limit))
        logger.info("%s", chosen.note)
        return chosen.workload, (chosen.note,)

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.options)

    def preflight(self, workload: Workload, budget: ReleaseBudget | RunBudget | None = None,
                  *, neighbours: Neighbours | str = DEFAULT_NEIGHBOURS,
                  build: bool = True, unit: PrivacyUnit = ONE_ROW) -> None:
        """Every check that needs only the public inputs (schema, workload, budget, options),
        so that a run a ledger pays for does not fail after the charge: option values, the
        explicit histogram's size (mwem), and — with ``build`` — the engine's model of the
        workload (its memory guard; ipmwu, lp). :meth:`fit` runs it before charging a ledger;
        ``tessera synth --method lp`` before answering."""
        domain = workload.domain
        opts = self.settings
        check_unit(self.method, neighbours, unit)
        uniform = _uniform_option(opts)
        check_columns(self.method, workload, uniform)
        if self.method == "adaptive":
            _adaptive_preflight(workload, opts, neighbours, budget, unit)
            return
        functions, _ = query_functions(domain, workload)  # the structured-workload guards
        if self.method == "lp":
            check_lp_workload(workload, neighbours)
            for key in ("rows", "m"):
                v = opts.get(key)
                if v is not None and (isinstance(v, bool) or int(v) != v or v < 1):
                    raise TesseraError(f"{key} must be a positive integer, got {v!r}")
        else:
            value, definition = 1.0, Definition.PURE
            if budget is not None:
                target = Target.of(budget)
                value, definition = target.value, target.definition
            default_parameters(
                log_domain_size=math.log(domain.size), n_queries=len(functions),
                normaliser=1.0, definition=definition, value=value,
                expectations=opts.get("expectations",
                                      "exact" if self.method == "mwem" else "sample"),
                **{k: opts[k] for k in ("rounds", "step", "sample_size", "rows", "update")
                   if opts.get(k) is not None})
            if Neighbours.parse(neighbours) is Neighbours.ADD_REMOVE:
                fraction = opts.get("total_fraction", 0.05)
                if not 0.0 < fraction < 1.0:
                    raise TesseraError(f"total_fraction must be in (0, 1), got {fraction!r}")
        if self.method == "mwem":
            cells(domain, opts.get("max_cells", MAX_CELLS))
            need = len(functions) * domain.size
            limit = opts.get("memory_limit", DEFAULT_TABLE_LIMIT)
            if need > limit:
                raise ResourceError(f"the table of {len(functions):,} queries over "
                                    f"{domain.size:,} cells needs {need:,} bytes, over the "
                                    f"limit of {limit:,}", hint="fewer queries, or ipmwu")
        elif build:
            if self.method == "lp":  # the LP fits the released queries (weight > 0)
                weights = workload.all_weights()
                functions = tuple(f for f, w in zip(functions, weights, strict=True) if w > 0)
            kw = {k: opts[k] for k in ("heuristic", "memory_limit") if k in opts}
            GibbsModel(domain, functions, constraints=opts.get("constraints", ()), **kw)

    def fit(
        self,
        data: Any,
        workload: Workload | Sequence[Function] | None = None,
        budget: ReleaseBudget | RunBudget | None = None,
        *,
        neighbours: Neighbours | str | None = None,
        unit: PrivacyUnit | None = None,
        ledger: LedgerLike | None = None,
        label: str | None = None,
        seed: int | None = None,
        csv: CsvOptions = CsvOptions(),
        table: str | None = None,
        on_invalid: OnInvalid = "error",
        extra_columns: ExtraColumns = "error",
        progress: Callable[[Any], None] | None = None,
        release: Release | None = None,
        output: str | Path | None = None,
        record: str | Path | None = None,
        answer: Callable[..., Release] | None = None,
        domain: Domain | None = None,
        deliver: Callable[[FittedSynthesizer], None] | None = None,
    ) -> FittedSynthesizer:
        """Fit on ``data`` (a path, DataFrame, Arrow table or DuckDB relation, as
        :func:`tessera.count` reads it; or rows of codes) for ``workload`` under ``budget``.

        ``neighbours``: add/remove one row (the default of the whole tool,
        :data:`tessera.privacy.DEFAULT_NEIGHBOURS`: n stays private) or substitute one row
        (Ghazi et al., n public). ``unit``: one row, or one person
        (:class:`~tessera.privacy.PrivacyUnit`, docs/theory.md §3.13): every person's rows are
        bounded to K before anything is counted and every mechanism is calibrated to a person's
        sensitivity, K times a row's (:func:`tessera.synth.schedule.sensitivities`; the default
        adaptive method under either relation, ``lp`` under add/remove). ``ledger``: an opened
        :class:`tessera.Ledger`, charged before the data is read. ``seed``: seeded randomness
        for TESTS (the output is NOT PRIVATE).
        ``progress``: called with a :class:`~tessera.synth.progress.ProgressEvent` at the start
        and end of every step — reading the counts, the setup, each round (for ``lp`` each
        column-generation iteration), the adaptive method's final fit, the sampling — with the
        rounds done and to come (an upper bound while the run may stop early) and the seconds
        since the call; a round's ``detail`` is the method's own record of it
        (:class:`~tessera.synth.adaptive_record.AdaptiveProgress`,
        :class:`~tessera.synth.rounds.RoundProgress`, :class:`~tessera.synth.lp.Iteration`),
        whose fields the event also answers to. ``release``:
        the private release the ``lp`` method post-processes (module docs), or ``answer``:
        :func:`tessera.answer`, which ``lp`` then calls itself on ``budget`` and ``ledger``
        (passed in: this layer does not import the release layer), adding the tautology
        ``TRUE`` under add/remove when the workload has none (:func:`with_tautology`). ``output``
        (.csv/.parquet) and ``record`` (.json): the rows and the run record, checked writable
        before the charge and written (all or none, :func:`tessera.synth.fitted.write_outputs`)
        before the ledger marks the run released (docs/theory.md §9.6). ``deliver``: called
        with the fitted run once those files are complete in their temporary files, before
        they are renamed into place and the ledger marks it released, for a caller that
        delivers more of it (e.g. :func:`tessera.routes.adaptive.answer_adaptive` writes the
        model's answers there; a failure there marks the run aborted and leaves none of the
        requested files); adaptive, ipmwu and mwem only. ``csv``, ``table``, ``on_invalid``
        and ``extra_columns``: how the data are read, as by :func:`tessera.count`.

        ``workload``, ``budget``, ``neighbours``, ``unit``, ``seed`` and ``domain`` may instead
        be given to the constructor (class docs); without a workload the default one is built
        from the schema (:func:`tessera.synth.defaults.default_workload`) and the record's
        ``notes`` say which. The result is also kept for :meth:`sample`.
        """
        report = Reporter.of(progress)  # one clock for the whole call
        workload, budget, neighbours, unit, seed, domain = self._fit_inputs(
            workload, budget, neighbours, unit, seed, domain)
        notes: tuple[str, ...] = ()
        if workload is None:
            workload, notes = self._default_workload(domain, budget, neighbours, unit)
        if not isinstance(workload, Workload):
            workload = as_workload(workload, domain)
        outputs = synth_outputs(output, record)
        check_unit(self.method, neighbours if neighbours is not None else DEFAULT_NEIGHBOURS,
                   unit)
        if self.method == "lp":
            if deliver is not None:
                raise TesseraError("deliver= is for the methods that run on the data, not 'lp'")
            return self._kept(self._fit_lp(
                data, workload, budget, neighbours, ledger, label, seed, csv, table,
                (on_invalid, extra_columns), report, release, answer, outputs, notes,
                unit=unit))
        if release is not None:
            raise TesseraError(f"method {self.method!r} runs on the data: release= is for 'lp'")
        if budget is None:
            raise TesseraError("a budget is needed: tessera.Budget.of(epsilon=...) (or rho=, "
                               "mu=, epsilon= with delta=)")
        target = Target.of(budget)
        rel = Neighbours.parse(neighbours if neighbours is not None else DEFAULT_NEIGHBOURS)
        book = opened_ledger(ledger)
        charge = None
        if book is not None:
            check_ledger(book, target.definition, rel, unit)
            self.preflight(workload, budget, neighbours=rel, unit=unit)
        settings = self.settings
        uniform = _uniform_option(settings)
        settings.pop("uniform_columns", None)  # the adaptive method's own, the others' here
        check_columns(self.method, workload, uniform)  # before anything is read or charged
        if self.method == "adaptive":
            _adaptive_preflight(workload, self.settings, rel, budget, unit)
            settings["uniform_columns"] = uniform
        if uniform:  # on stderr, before the run: the record names them too
            warn_uniform(workload, rows=settings.get("rows") != 0)
        # a person's budget: the run's calibration and the ledger's per-row charge (K, K²)
        run_value, per_row = person_shares(target.value, target.definition, unit)
        run_budget = RunBudget.of(**{next(iter(target.kwargs())): run_value}, neighbours=rel,
                                  unit=unit)
        # the data is read and validated before the charge: a data error reaches the curator
        # without spending budget, and no data-dependent error is raised after the charge
        report("counting", "start")
        if self.method == "adaptive":  # it reads the counts of its candidates, never rows
            read = candidate_workload(workload, self.settings.get("max_cells", DEFAULT_MAX_CELLS),
                                      columns=not uniform)
            counts = (sensitive_counts(workload.domain, read, data, unit=unit)
                      if isinstance(data, np.ndarray) else
                      _sensitive_counts(data, read, csv, table, on_invalid, extra_columns,
                                        unit))
        else:
            counts = _sensitive_counts(data, workload, csv, table, on_invalid, extra_columns,
                                       unit)
        report("counting")
        if book is not None:
            w, costs = ledger_charge(workload.domain, per_row, rel)
            charge = book.charge(w, costs, label=label or f"synthetic data ({self.method})",
                                 mechanism=synthesis_mechanism(self.method, workload), unit=unit)
        source = NoiseSource.secure() if seed is None else NoiseSource.seeded(seed)
        logger.info("synthesizing (%s) for %s queries, calibrated as %s = %.6g (%s neighbours); "
                    "randomness: %s", self.method, f"{workload.n_queries:,}",
                    "ε" if target.definition is Definition.PURE else "ρ", target.value,
                    rel.label, source.label)
        delivery = Delivery(tuple(o.path for o in outputs), step="fitting")
        budget_unit = "ε" if target.definition is Definition.PURE else "ρ"
        with settled(book, charge, lambda: aborted_hint("run", charge, budget_unit, delivery)):
            if self.method == "adaptive":
                run: Any = adaptive(workload, counts, run_budget, source=source, rng=seed,
                                    progress=report, **settings)
            else:
                run = (ipmwu if self.method == "ipmwu" else mwem)(
                    workload.domain, workload, counts, **target.kwargs(),  # type: ignore
                    neighbours=rel, source=source, rng=seed, on_invalid=on_invalid,
                    extra_columns=extra_columns, progress=report, **settings)
            if book is not None and charge is not None and dataclasses.is_dataclass(charge):
                # what the ledger will say once every file exists (the record written says it)
                charge = dataclasses.replace(charge, status="released")  # type: ignore[type-var]
            fitted = FittedSynthesizer(self, workload, run, target, rel, charge, seed, notes,
                                       unit=unit)
            write_outputs(fitted, outputs, delivery, deliver)
        return self._kept(fitted)

    def _kept(self, fitted: FittedSynthesizer) -> FittedSynthesizer:
        """``fitted``, kept for :meth:`sample` with its sampling generator: seeded from the
        run's seed (tests), else from OS entropy (``numpy.random.default_rng()``; sampling is
        post-processing, so its randomness needs no privacy calibration)."""
        # the configuration's fields stay frozen; only the last fit is remembered
        self.__dict__["last_fit"] = fitted
        self.__dict__["sample_rng"] = np.random.default_rng(fitted.seed)
        return fitted

    def _fit_lp(self, data: Any, workload: Workload, budget: Any, neighbours: Any, ledger: Any,
                label: str | None, seed: int | None, csv: CsvOptions, table: str | None,
                policies: tuple[OnInvalid, ExtraColumns], progress: Reporter,
                release: Release | None, answer: Callable[..., Release] | None,
                outputs: Any, notes: tuple[str, ...] = (),
                unit: PrivacyUnit = ONE_ROW) -> FittedSynthesizer:
        from tessera.synth.lp import solve_lp, synthesize

        uniform = _uniform_option(self.settings)
        check_columns(self.method, workload, uniform)  # before the release is answered

        if release is None and answer is not None and budget is not None:
            if isinstance(budget, (RunBudget, ApproxBudget)):  # not one answer() reads
                raise TesseraError(
                    "the LP approach answers the workload with tessera.answer, which takes a "
                    "tessera.Budget, not a budget stated to the constructor",
                    hint="Synthesizer('lp', domain=domain).fit(df, budget=tessera.Budget.of("
                         "epsilon=1.0), answer=tessera.answer)")
            rel = Neighbours.parse(neighbours if neighbours is not None else DEFAULT_NEIGHBOURS)
            fitted_workload, added = (with_tautology(workload) if rel is Neighbours.ADD_REMOVE
                                      else (workload, False))
            self.preflight(fitted_workload, budget, neighbours=rel,
                           unit=unit)  # before the charge
            done: list[FittedSynthesizer] = []

            def deliver(answered: Release) -> None:  # before the release is marked released
                progress("counting")
                done.append(self._fit_lp(data, fitted_workload, None, None, None, label, seed,
                                         csv, table, policies, progress, answered, None,
                                         outputs, notes + ((TAUTOLOGY_NOTE,) if added else ())))

            progress("counting", "start")  # the release reads the data and answers
            answer(data, fitted_workload, budget, neighbours=rel, unit=unit, ledger=ledger,
                   label=label or "synthetic data (lp)", seed=seed, csv=csv, table=table,
                   on_invalid=policies[0], extra_columns=policies[1], deliver=deliver)
            return done[0]
        if release is None:
            raise TesseraError(
                "the LP approach post-processes a private release of the workload: pass it as "
                "release= (or answer=tessera.answer with a budget)",
                hint="release = tessera.answer(data, workload, budget, neighbours=..., "
                     "ledger=...); then Synthesizer(method='lp').fit(data, workload, "
                     "release=release) (tessera synth --method lp does both)")
        if budget is not None or ledger is not None:
            raise TesseraError("the release carries the privacy spend (and was charged to the "
                               "ledger when it was answered): give no budget or ledger with 'lp'")
        check_lp_workload(workload, release.plan.neighbours)
        if uniform:
            warn_uniform(workload)
        if release.workload != workload:
            raise QueryError("the release answers another workload than the one given")
        rel = Neighbours.parse(release.plan.neighbours)
        if neighbours is not None and Neighbours.parse(neighbours) is not rel:
            raise TesseraError(f"the release is for {rel.label} neighbours, not "
                               f"{Neighbours.parse(neighbours).label}")
        n = None
        if rel is Neighbours.SUBSTITUTE:  # n is public: neighbours have the same n
            if data is None:
                raise DataError("under substitution the LP needs n, the number of rows: give "
                                "the data")
            n = _rows_of(data, workload.domain, csv, table, *policies)
        options = self.settings
        options.pop("uniform_columns", None)
        if "rows" in options:
            options["m"] = options.pop("rows")
        limit = int(options.get("max_iterations", inspect.signature(
            solve_lp).parameters["max_iterations"].default))

        def iteration(it: Any) -> None:  # the iteration limit bounds the rounds
            progress("iteration", round=it.iteration, rounds=limit, bound=True, detail=it)

        options["callback"] = iteration
        run = synthesize(release, n=n, rng=seed, **options)
        fitted = FittedSynthesizer(self, workload, run, None, rel, release.charge, seed, notes,
                                   unit=release.plan.unit)
        write_outputs(fitted, outputs)
        return fitted


def check_unit(method: str, neighbours: Neighbours | str, unit: PrivacyUnit) -> None:
    """A person is synthesized by the adaptive method (under either relation: n is then
    private, estimated from its measurements) and by ``lp`` under add/remove (its release
    answers n); ipmwu and mwem, baselines calibrated to a row, and ``lp`` under substitution
    (which takes n as public) are refused for a person before anything is read or charged;
    so is a unit that counts people (a synthetic table holds rows)."""
    if unit.is_row:
        return
    if unit.counts_people:
        raise TesseraError(
            "synthetic data counts rows: a synthetic table is a histogram of rows, and a count "
            "of people (each person once per query) is not a sum of its cells",
            hint="synthesize with --count rows (a person then pays K × a row); release counts "
                 "of people with tessera answer --count people")
    if method in ("ipmwu", "mwem"):
        raise TesseraError(f"method {method!r} is calibrated to one row; a person "
                           f"(--privacy-id {unit.id_column}) is synthesized by the adaptive "
                           "method", hint="drop --method (adaptive is the default), or use lp")
    if method == "lp" and Neighbours.parse(neighbours) is Neighbours.SUBSTITUTE:
        raise TesseraError("the LP approach under substitution takes n as public, which it is "
                           "not when a person's rows (how many there are) may change",
                           hint="--neighbours add-remove (the LP then reads n̂ from the "
                                "release's noisy total)")


def _uniform_option(opts: dict[str, Any]) -> bool:
    """The ``uniform_columns`` option (default False), refused unless a bool."""
    v = opts.get("uniform_columns", False)
    if not isinstance(v, bool):
        raise TesseraError(f"uniform_columns must be True or False, got {v!r}")
    return v


def _adaptive_preflight(workload: Workload, opts: dict[str, Any], neighbours: Neighbours | str,
                        budget: ReleaseBudget | RunBudget | None = None,
                        unit: PrivacyUnit = ONE_ROW) -> None:
    """The public checks of the adaptive method: something to measure, option values, the
    candidate workload's size (its counts are read before the charge) and, with a budget, that
    the initialisation fits in it (:func:`initial_spend`)."""
    rel = Neighbours.parse(neighbours)
    cands = candidates(workload, opts.get("max_cells", DEFAULT_MAX_CELLS),
                       columns=not _uniform_option(opts))
    if not any(not c.outside for c in cands):
        raise QueryError("the workload mentions no attribute: the adaptive method has nothing "
                         "to measure", hint="add queries or marginals over the schema")
    for key in ("rounds", "rows", "iterations", "final_iterations", "sample_size",
                "max_model_size", "max_cells", "batch", "polish_passes", "exact_work"):
        v = opts.get(key)
        zero = key in ("rows", "polish_passes", "exact_work")  # 0: none / off
        if v is not None and (isinstance(v, bool) or int(v) != v or v < (0 if zero else 1)):
            kind = "a non-negative" if zero else "a positive"
            raise TesseraError(f"{key} must be {kind} integer, got {v!r}")
    memory = opts.get("answer_memory")
    if memory is not None:
        if isinstance(memory, bool) or not isinstance(memory, int) or memory < 1:
            raise TesseraError(f"answer_memory must be a positive integer (bytes), got "
                               f"{memory!r}")
        keeper = Answerable(workload, memory)  # the least model must leave W answerable
        refused = keeper.refusal(least_structure(workload, opts.get(
            "max_cells", DEFAULT_MAX_CELLS))) if keeper.active else None
        if refused is not None:
            raise ResourceError(f"{refused.message} — no model of the adaptive method can "
                                "answer it (nothing was charged)", hint=refused.hint)
    f = opts.get("measure_fraction")
    f = MEASURE_FRACTION if f is None else f  # the one-way initialisation's share
    if not 0.0 < f < 1.0:
        raise TesseraError(f"measure_fraction must be in (0, 1), got {f!r}")
    for key, hint in (("cell_sigmas", "5 (the default start), or 0 for AIM's T = 16·d"),
                      ("coarsen_sigmas", "3 (MST's threshold, the default), or 0 to measure "
                                         "every cell"),
                      ("prior_scale", "2.5 (the default: a weakly informative Cauchy prior on "
                                      "the final model's interactions), or 0 for the "
                                      "maximum-likelihood fit")):
        sig = opts.get(key, 0.0)
        if isinstance(sig, bool) or not isinstance(sig, (int, float)) or not (
                math.isfinite(sig) and sig >= 0):
            raise TesseraError(f"{key} must be a finite number ≥ 0, got {sig!r}", hint=hint)
    step = opts.get("anneal")
    if step is not None and (isinstance(step, bool) or not isinstance(step, (int, float))
                             or not (math.isfinite(step) and step > 1)):
        raise TesseraError(f"anneal must be a finite number > 1, got {step!r}",
                           hint="leave it to its default (the step that doubles a round's "
                                "cost), or 2 (AIM's step)")
    if budget is None:
        return
    target = Target.of(budget)
    run = RunBudget.of(**target.kwargs(), neighbours=rel, unit=unit)
    init, attrs, rounds = initial_spend(cands, run, opts.get("rounds"), f)
    if init > run.exact:
        outside = sum(1 for c in cands if c.outside)
        least = math.ceil(f * (attrs + outside))
        raise TesseraError(
            f"rounds = {rounds}: the adaptive method's initialisation measures all "
            f"{attrs + outside} one-way marginals"
            + (f" ({outside} of attributes outside the workload)" if outside else "")
            + f" at the noise of a round of budget {run.value:g}/{rounds}, which "
            f"spends {float(init):.6g} of {run.value:g}",
            hint=f"rounds ≥ {least} (measure_fraction × one-way marginals), or leave rounds "
                 f"to its default ({16 * attrs})")


def initial_spend(cands: Sequence[Candidate], budget: RunBudget, rounds: int | None,
                  measure_fraction: float) -> tuple[Fraction, int, int]:
    """What the adaptive method's initialisation spends (exactly), the number of the
    workload's one-way marginals it measures (d) and its T: every one-way marginal — the d of
    the workload's attributes and those of the ``outside`` candidates (the attributes outside
    the workload) — at the measurement noise of a round of budget/T, calibrated as
    :func:`tessera.synth.adaptive.adaptive` does (its
    :class:`~tessera.synth.schedule.Schedule`). More than the budget when T < measure_fraction ×
    attributes: refused before any charge. (With the default T the start may measure the
    workload's once more at T ≥ 4·d: at most 0.9 · (1/16 + 1/4) of the budget in all, plus
    0.9 · u/(16·d) for u attributes outside the workload.)"""
    selectable = [c for c in cands if not c.outside]
    l1, l2, sel, _ = sensitivities(selectable, budget)  # (× K for a person)
    schedule = Schedule(budget, l1, l2, sel, measure_fraction)
    attrs = len({c.scope[0] for c in selectable if c.is_marginal and len(c.scope) == 1})
    outside = sum(1 for c in cands if c.outside)
    T = int(rounds) if rounds is not None else 16 * attrs
    cal = schedule.round(schedule.total / T)
    per = schedule.cost(cal.measurement, l1 if schedule.pure else l2)
    return (attrs + outside) * per, attrs, T


#: What the record says when the LP added the tautology itself.
TAUTOLOGY_NOTE = ("add/remove neighbours: the query TRUE was added to the workload and answered "
                  "with it, so the release's charge includes it; the LP takes n̂, its noisy "
                  "answer, as the number of rows (post-processing)")


def with_tautology(workload: Workload) -> tuple[Workload, bool]:
    """``workload`` with the query ``TRUE`` (named ``"n (every row)"``) appended unless it
    already answers a tautology of weight > 0; and whether it was added."""
    if any(isinstance(q, Query) and not q.predicates and w > 0
           for q, w in zip(workload.queries, workload.weights)):
        return workload, False
    true = Workload.from_sql(["TRUE"], workload.domain).queries[0]
    return dataclasses.replace(
        workload, queries=(*workload.queries, true), names=(*workload.names, "n (every row)"),
        weights=(*workload.weights, 1.0),
        sources=None if workload.sources is None else (*workload.sources, "added by tessera"),
    ), True


def check_lp_workload(workload: Workload, neighbours: Neighbours | str) -> None:
    """Refuse, before any budget is spent, a workload whose release the LP could not normalise:
    under add/remove neighbours n is private and comes from the release's noisy answer of a
    tautology (``TRUE``, weight > 0), so the workload must contain one."""
    if Neighbours.parse(neighbours) is Neighbours.SUBSTITUTE:
        return
    if not any(isinstance(q, Query) and not q.predicates and w > 0
               for q, w in zip(workload.queries, workload.weights)):
        raise QueryError(
            "under add/remove neighbours the LP approach takes n from the release's noisy "
            "answer of a tautology, and the workload has none",
            hint="add the query TRUE to the workload (or use substitute neighbours, n public)")


def as_workload(queries: Sequence[Function], domain: Domain | None) -> Workload:
    """A list of queries as the workload :meth:`Synthesizer.fit` runs: predicate queries
    (:class:`~tessera.workload.query.Query`), Boolean clauses
    (:class:`~tessera.workload.clause.BooleanClause`) and BDD queries
    (:class:`~tessera.engine.bdd.BooleanQuery`, whose variables are attributes of two values,
    read as their codes 0/1), named ``q0``, ``q1``, … . The exact counts of a list with BDD
    queries are read row by row (:func:`tessera.synth.sensitive.sensitive_counts`)."""
    if isinstance(queries, (str, bytes)) or not isinstance(queries, Sequence):
        raise QueryError("the workload must be a tessera.Workload or a list of queries",
                         hint="Workload.load(path, domain), Workload.from_sql(...), or "
                              "fit(data, [queries...], domain=domain)")
    if domain is None:
        raise QueryError("a list of queries needs its schema: fit(..., domain=domain)")
    if not queries:
        raise QueryError("the workload has no queries")
    for j, q in enumerate(queries):
        if isinstance(q, BooleanQuery):
            for a in q.scope:
                if a not in domain.names:
                    raise QueryError(f"query q{j}: BDD variable {a!r} is not an attribute",
                                     hint="attributes: " + ", ".join(domain.names))
                if domain[a].size != 2:
                    raise QueryError(f"query q{j}: BDD variable {a!r} has {domain[a].size} "
                                     "values; a BDD reads attributes of two values",
                                     hint="a predicate query or a clause over it")
        elif not isinstance(q, (Query, BooleanClause)):
            raise QueryError(f"query q{j}: {type(q).__name__} is not a query",
                             hint="Query, BooleanClause or engine.bdd.BooleanQuery")
    return Workload.of(domain, list(queries), names=[f"q{j}" for j in range(len(queries))])


def _rows_of(data: Any, domain: Domain, csv: CsvOptions, table: str | None,
             on_invalid: OnInvalid, extra_columns: ExtraColumns) -> int:
    if isinstance(data, np.ndarray):
        return int(data.shape[0])
    return int(encode(data, domain, on_invalid=on_invalid, csv=csv, table=table,
                      extra_columns=extra_columns).n_rows)


def _sensitive_counts(data: Any, workload: Workload, csv: CsvOptions, table: str | None,
                      on_invalid: OnInvalid, extra_columns: ExtraColumns,
                      unit: PrivacyUnit = ONE_ROW) -> Any:
    """The exact counts the private steps read (NOT PRIVATE; never kept), by
    :func:`tessera.count` (one aggregation per scope, never row by row), each person's rows
    bounded first (``unit``)."""
    if isinstance(data, (SensitiveCounts, np.ndarray)):
        if not unit.is_row:
            raise DataError("exact counts or rows of codes carry no privacy id: they cannot "
                            "be bounded per person", hint="pass the table with its id column "
                            "(a path or a DataFrame)")
        return data
    if any(isinstance(q, BooleanQuery) for q in workload.queries):  # no SQL for a BDD
        return sensitive_counts(workload.domain, workload.queries, data, on_invalid=on_invalid,
                                unit=unit, extra_columns=extra_columns)
    res = count(data, workload, csv=csv, table=table, on_invalid=on_invalid, unit=unit,
                extra_columns=extra_columns)
    if res.n_rows == 0:
        raise DataError("the data has no rows" + (" left after dropping invalid ones"
                                                  if res.dropped else ""))
    return SensitiveCounts(res.answers, res.n_rows)


