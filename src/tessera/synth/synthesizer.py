"""Private synthetic data in one call: :class:`Synthesizer` (docs/theory.md §5, §6, §9).

``Synthesizer(method, **options).fit(data, workload, budget)`` returns a
:class:`FittedSynthesizer`: the synthetic rows (``.sample()``: a DataFrame in the schema's own
values), the fitted output distribution (``.answers()``: its exact answers) and a JSON-ready
run record (``.run_record()``). Methods:

* ``"adaptive"`` (the default): :func:`tessera.synth.adaptive.adaptive`, AIM's selection over
  whole marginals and budget schedule with a maximum-entropy fit on the exact engine (any
  workload: it measures only what keeps the model under its memory cap);
* ``"ipmwu"``: :func:`tessera.synth.ipmwu.ipmwu`, paper 2's Algorithm 1 on the engine's
  implicit Gibbs weights (any domain whose workload has a small width);
* ``"mwem"``: :func:`tessera.synth.mwem.mwem`, the same rounds on an explicit histogram
  (domains of at most 2^20 points);
* ``"lp"``: :func:`tessera.synth.lp.synthesize`, the LP approach: post-processing of a private
  release of the workload (``fit(..., release=tessera.answer(...))``; module docs below);

**Order** (as :func:`tessera.release.answer.answer`): the budget is mapped to what the run is
calibrated in; the data is read and validated against the schema (errors reach the curator
before any budget is spent); the ledger, if any, is charged in a committed transaction; only
then does the run start; the ledger marks the charge ``released`` when the run succeeds and
``aborted`` if it fails (the budget stays spent). Nothing leaves :meth:`Synthesizer.fit` before
the charge.

**Budgets** (the target the user states, as :class:`tessera.Budget` states it):

===========  =====================================  ========================================
target       the run                                proven
===========  =====================================  ========================================
ε            pure ε (basic composition)             ε-DP; ρ-zCDP and (ε, δ) from its steps
ρ            ρ-zCDP                                 ρ-zCDP; (ε, δ) by the CKS20 conversion
(ε, δ)       the largest ρ with ρ-zCDP ⇒ (ε, δ)     ρ-zCDP, hence (ε, δ)
μ            ρ = μ²/2                               ρ-zCDP; μ-GDP is **not** proven (the
                                                    mechanisms are discrete)
===========  =====================================  ========================================

**Ledger charge.** A synthesis run reads every row in every round, so it is charged as a
workload every row pays its whole cost ``c`` (ε or ρ: the run's budget, which bounds what it
spends) for:

* add/remove neighbours: ONE query every row satisfies, the tautology ``TRUE``, cost ``c``;
* substitute neighbours: the tautology costs nothing there (replacing a row never changes its
  count), so the charge is the identity family — the marginal over every attribute, whose cells
  are the points of the domain — at ``c/2`` per cell: any two different rows lie in two
  different cells and pay ``c/2 + c/2 = c``. One cost per cell is stored compactly, but the
  ledger takes the costs as an array, so this is refused beyond :data:`IDENTITY_MAX_CELLS`
  points (use add/remove neighbours and an add/remove ledger there).

**Layers.** :mod:`tessera.synth` and :mod:`tessera.release` are independent layers
(``lint-imports``): this module never imports the release layer at run time. A budget is read
through its fields (a :class:`tessera.Budget`, or a :class:`tessera.synth.accounting.Budget`);
a ledger is an opened :class:`tessera.Ledger` (``Ledger.open(path)``) used through its methods
(:class:`LedgerLike`); the LP method post-processes a :class:`tessera.Release` passed as
``release=`` (the release was charged to the ledger when it was answered).

``seed`` makes every random draw reproducible, for TESTS ONLY: the run is then NOT PRIVATE, and
its record, frames and files say so.

Why this module is long (about 850 lines): it is one public object, the synthesiser and its
fitted result. :class:`Synthesizer` validates a target, charges the ledger and runs a method;
:class:`FittedSynthesizer` samples, evaluates, saves and describes the result; the helpers
around them (ledger checks, decoding rows, the JSON record) exist only for these two classes.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.accounting.guarantee import Guarantee
from tessera.accounting.zcdp import epsilon_for_delta
from tessera.data.counts import count
from tessera.data.source import encode
from tessera.data.table import CsvOptions, OnInvalid
from tessera.engine.model import GibbsModel
from tessera.errors import DataError, QueryError, ResourceError, TesseraError
from tessera.mechanisms import NoiseSource
from tessera.privacy import Definition, Neighbours
from tessera.schema.domain import Domain
from tessera.synth.accounting import Budget as RunBudget
from tessera.synth.adaptive import AdaptiveResult, adaptive, candidate_workload
from tessera.synth.candidates import DEFAULT_MAX_CELLS, candidates
from tessera.synth.ipmwu import (
    Evaluator,
    IPMWUResult,
    SensitiveCounts,
    default_parameters,
    ipmwu,
    iter_thetas,
    query_functions,
    sample_average,
    sensitive_counts,
)
from tessera.synth.mwem import DEFAULT_TABLE_LIMIT, MAX_CELLS, MWEMResult, cells, mwem
from tessera.workload.families import Partition
from tessera.workload.query import Query
from tessera.workload.workload import Workload

if TYPE_CHECKING:  # the release layer is a sibling of synth: no runtime import (lint-imports)
    from tessera.release.answer import Release
    from tessera.release.budget import Budget as ReleaseBudget
    from tessera.synth.lp import LPSynthesis

__all__ = [
    "IDENTITY_MAX_CELLS",
    "METHODS",
    "NOT_PRIVATE_MARK",
    "REPORTED_DELTAS",
    "FittedSynthesizer",
    "LedgerLike",
    "Synthesizer",
    "Target",
    "check_lp_workload",
    "decode_rows",
    "ledger_charge",
]

#: Methods :class:`Synthesizer` runs (the first is the default).
METHODS = ("adaptive", "ipmwu", "mwem", "lp")
#: δ values at which the run record states (ε, δ)-DP (as release certificates do).
REPORTED_DELTAS = (1e-5, 1e-6, 1e-9)
#: Largest domain (points) a substitute-neighbour ledger is charged over: the identity family
#: takes one cost per point (module docs).
IDENTITY_MAX_CELLS = 1 << 22
#: The first line of a CSV (and the Parquet metadata) of a seeded, NOT PRIVATE run.
NOT_PRIVATE_MARK = "NOT PRIVATE: seeded test randomness, never publish"

#: Arguments :meth:`Synthesizer.fit` sets itself (not options).
_SET_BY_FIT = frozenset({
    "domain", "queries", "data", "epsilon", "rho", "neighbours", "source", "rng", "replay",
    "names", "on_invalid", "progress", "release", "n", "callback", "targets",
})
_ALGORITHMS = {
    "lp": "LP approach (paper 2 §3; column generation), post-processing of a private release",
}


class LedgerLike(Protocol):
    """What :meth:`Synthesizer.fit` uses of a :class:`tessera.Ledger`."""

    definition: Definition
    neighbours: Neighbours

    def charge(self, workload: Workload, costs: npt.ArrayLike, *, label: str,
               mechanism: str) -> Any: ...

    def mark_released(self, release_id: str) -> None: ...

    def mark_aborted(self, release_id: str) -> None: ...


# -- the budget --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A budget as the user asked for it and what the run is calibrated in.

    ``definition`` is PURE (``value`` = ε) or ZCDP (``value`` = ρ); ``notes`` say what the
    mapping means (a μ-GDP target is not proven); ``deltas`` are where (ε, δ) is reported."""

    asked: dict[str, Any]
    definition: Definition
    value: float
    notes: tuple[str, ...] = ()
    deltas: tuple[float, ...] = REPORTED_DELTAS

    @staticmethod
    def of(budget: ReleaseBudget | RunBudget) -> Target:
        """From a :class:`tessera.Budget` (ε, ρ, μ or (ε, δ)) or a
        :class:`tessera.synth.accounting.Budget` (ε or ρ), read through their fields."""
        definition = getattr(budget, "definition", None)
        if not isinstance(definition, Definition):
            raise TesseraError(f"not a budget: {budget!r}",
                               hint="tessera.Budget.of(epsilon=...) (or rho=, mu=, delta=)")
        if hasattr(budget, "value"):  # tessera.synth.accounting.Budget: ε or ρ as the run has it
            value = float(budget.value)
            key = "epsilon" if definition is Definition.PURE else "rho"
            return Target({"definition": definition.value, key: value}, definition, value)
        asked = dict(budget.to_dict()) if hasattr(budget, "to_dict") else {
            "definition": definition.value}
        run, total = budget.calibration, float(budget.total)
        notes: list[str] = []
        deltas = REPORTED_DELTAS
        if definition is Definition.GDP:
            notes.append(f"μ-GDP target μ = {budget.mu:g}: the run is calibrated as "
                         f"ρ = μ²/2 = {total:.6g}-zCDP; μ-GDP is NOT proven (the mechanisms "
                         "are discrete: the exponential mechanism and the discrete Gaussian)")
        elif definition is Definition.APPROX:
            notes.append(f"(ε, δ) target ({budget.epsilon:g}, {budget.delta:g}): the run is "
                         f"calibrated as ρ = {total:.6g}-zCDP, the largest ρ whose CKS20 "
                         "conversion gives it")
            deltas = tuple(sorted({*REPORTED_DELTAS, float(budget.delta)}, reverse=True))
        return Target(asked, run, total, tuple(notes), deltas)

    def kwargs(self) -> dict[str, float]:
        """The budget argument of :func:`~tessera.synth.ipmwu.ipmwu`."""
        return {"epsilon" if self.definition is Definition.PURE else "rho": self.value}


# -- the ledger --------------------------------------------------------------------------------


def ledger_charge(domain: Domain, cost: float,
                  neighbours: Neighbours | str) -> tuple[Workload, npt.NDArray[np.float64]]:
    """The workload and per-query costs that charge a synthesis run of cost ``cost`` (ε or ρ)
    to a ledger: the tautology at ``cost`` (add/remove) or the identity family at ``cost/2``
    per point (substitute; module docs)."""
    rel = Neighbours.parse(neighbours)
    if rel is Neighbours.ADD_REMOVE:
        return (Workload.from_sql(["TRUE"], domain, names=["synthetic data (every row)"]),
                np.array([float(cost)]))
    if domain.size > IDENTITY_MAX_CELLS:
        raise ResourceError(
            f"a substitute-neighbour ledger charges a synthesis run as the identity workload "
            f"(one cost per point of the domain): the domain has {domain.size:,} points, above "
            f"{IDENTITY_MAX_CELLS:,}",
            hint="use add/remove neighbours (--neighbours add-remove) with an add/remove "
                 "ledger: the run is then charged as one query, the tautology")
    family = Partition.marginal(domain, domain.names, name="synthetic data (every point)")
    w = Workload.of_families(domain, [family])
    return w, np.full(w.n_queries, float(cost) / 2.0)


def _check_ledger(book: LedgerLike, definition: Definition, neighbours: Neighbours) -> None:
    if book.definition is not definition:
        raise TesseraError(
            f"the ledger counts {book.definition.label}, this run is calibrated in "
            f"{definition.label}",
            hint="use a ledger of the same definition (tessera ledger init --definition ...)")
    if book.neighbours is not neighbours:
        raise TesseraError(
            f"the ledger is for {book.neighbours.label} neighbours, this run for "
            f"{neighbours.label}", hint="use the ledger's neighbours (--neighbours)")


def _opened(ledger: Any) -> LedgerLike | None:
    if ledger is None:
        return None
    if isinstance(ledger, (str, Path)):
        raise TesseraError(
            "pass an opened ledger: tessera.Ledger.open(path)",
            hint="tessera.synth does not open ledger files itself (it is a sibling layer of "
                 "tessera.release)")
    for name in ("charge", "mark_released", "mark_aborted", "definition", "neighbours"):
        if not hasattr(ledger, name):
            raise TesseraError(f"not a ledger: {ledger!r} has no {name!r}")
    return ledger  # type: ignore[no-any-return]


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
    return names - _SET_BY_FIT


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise TesseraError(f"unknown method {method!r}",
                           hint="available: " + ", ".join(METHODS))
    return method


@dataclass(frozen=True, init=False)
class Synthesizer:
    """A synthesis method and its options (a frozen configuration); :meth:`fit` runs it.

    Options are the method's own parameters: for ``ipmwu`` and ``mwem`` those of
    :func:`~tessera.synth.ipmwu.ipmwu` (``rounds``, ``step``, ``sample_size``, ``rows``,
    ``expectations``, ``update``, ``total_fraction``, ``constraints``, …); for ``lp`` those of
    :func:`~tessera.synth.lp.synthesize` and :func:`~tessera.synth.lp.solve_lp` (``rows`` is
    its ``m``). Unknown options are refused here, before any data is read."""

    method: str
    options: tuple[tuple[str, Any], ...]

    def __init__(self, method: str = "adaptive", **options: Any) -> None:
        _check_method(method)
        unknown = sorted(set(options) - _method_options(method))
        if unknown:
            raise TesseraError(
                f"method {method!r} has no option {unknown[0]!r}",
                hint="options: " + ", ".join(sorted(_method_options(method))))
        object.__setattr__(self, "method", method)
        object.__setattr__(self, "options", tuple(sorted(options.items())))

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.options)

    def preflight(self, workload: Workload, budget: ReleaseBudget | RunBudget | None = None,
                  *, neighbours: Neighbours | str = Neighbours.SUBSTITUTE,
                  build: bool = True) -> None:
        """Every check that needs only the public inputs (schema, workload, budget, options),
        so that a run a ledger pays for does not fail after the charge: option values, the
        explicit histogram's size (mwem), and — with ``build`` — the engine's model of the
        workload (its memory guard; ipmwu, lp). :meth:`fit` runs it before charging a ledger;
        ``tessera synth --method lp`` before answering."""
        domain = workload.domain
        opts = self.settings
        if self.method == "adaptive":
            _adaptive_preflight(workload, opts, neighbours)
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
        workload: Workload,
        budget: ReleaseBudget | RunBudget | None = None,
        *,
        neighbours: Neighbours | str | None = None,
        ledger: LedgerLike | None = None,
        label: str | None = None,
        seed: int | None = None,
        csv: CsvOptions = CsvOptions(),
        table: str | None = None,
        on_invalid: OnInvalid = "error",
        progress: Callable[[Any], None] | None = None,
        release: Release | None = None,
    ) -> FittedSynthesizer:
        """Fit on ``data`` (a path, DataFrame, Arrow table or DuckDB relation, as
        :func:`tessera.count` reads it; or rows of codes) for ``workload`` under ``budget``.

        ``neighbours``: substitute one row (the default: paper 2, n public) or add/remove one
        row. ``ledger``: an opened :class:`tessera.Ledger`, charged before the data is read.
        ``seed``: seeded randomness for TESTS (the output is NOT PRIVATE). ``progress``: called
        after every round (a :class:`~tessera.synth.ipmwu.RoundProgress`; for ``lp`` every
        column-generation iteration, a :class:`~tessera.synth.lp.Iteration`). ``release``:
        the private release the ``lp`` method post-processes (module docs).
        """
        if not isinstance(workload, Workload):
            raise QueryError("the workload must be a tessera.Workload",
                             hint="Workload.load(path, domain) or Workload.from_sql(...)")
        if self.method == "lp":
            return self._fit_lp(data, workload, budget, neighbours, ledger, seed, csv, table,
                                on_invalid, progress, release)
        if release is not None:
            raise TesseraError(f"method {self.method!r} runs on the data: release= is for 'lp'")
        if budget is None:
            raise TesseraError("a budget is needed: tessera.Budget.of(epsilon=...) (or rho=, "
                               "mu=, epsilon= with delta=)")
        target = Target.of(budget)
        rel = Neighbours.parse(neighbours if neighbours is not None else Neighbours.SUBSTITUTE)
        book = _opened(ledger)
        charge = None
        if book is not None:
            _check_ledger(book, target.definition, rel)
            self.preflight(workload, budget, neighbours=rel)
        if self.method == "adaptive":
            _adaptive_preflight(workload, self.settings, rel)
        # the data is read and validated before the charge: a data error reaches the curator
        # without spending budget, and no data-dependent error is raised after the charge
        if self.method == "adaptive":  # it reads the counts of its candidates, never rows
            read = candidate_workload(workload, self.settings.get("max_cells", DEFAULT_MAX_CELLS))
            counts = (sensitive_counts(workload.domain, read, data)
                      if isinstance(data, np.ndarray) else
                      _sensitive_counts(data, read, csv, table, on_invalid))
        else:
            counts = _sensitive_counts(data, workload, csv, table, on_invalid)
        if book is not None:
            w, costs = ledger_charge(workload.domain, target.value, rel)
            charge = book.charge(w, costs, label=label or f"synthetic data ({self.method})",
                                 mechanism=f"synthesis:{self.method}")
        source = NoiseSource.secure() if seed is None else NoiseSource.seeded(seed)
        try:
            if self.method == "adaptive":
                run: Any = adaptive(workload, counts, RunBudget.of(**target.kwargs(),
                                                                   neighbours=rel),
                                    source=source, rng=seed, progress=progress, **self.settings)
            else:
                run = (ipmwu if self.method == "ipmwu" else mwem)(
                    workload.domain, workload, counts, **target.kwargs(),  # type: ignore
                    neighbours=rel, source=source, rng=seed, on_invalid=on_invalid,
                    progress=progress, **self.settings)
        except BaseException as e:
            if book is not None and charge is not None:
                try:
                    book.mark_aborted(charge.release_id)
                except TesseraError as f:
                    e.add_note(f"(could not mark release {charge.release_id} aborted: {f})")
            raise
        if book is not None and charge is not None:
            book.mark_released(charge.release_id)
            charge = dataclasses.replace(charge, status="released") \
                if dataclasses.is_dataclass(charge) else charge
        return FittedSynthesizer(self, workload, run, target, rel, charge, seed)

    def _fit_lp(self, data: Any, workload: Workload, budget: Any, neighbours: Any, ledger: Any,
                seed: int | None, csv: CsvOptions, table: str | None, on_invalid: OnInvalid,
                progress: Callable[[Any], None] | None,
                release: Release | None) -> FittedSynthesizer:
        from tessera.synth.lp import synthesize

        if release is None:
            raise TesseraError(
                "the LP approach post-processes a private release of the workload: pass it as "
                "release=",
                hint="release = tessera.answer(data, workload, budget, neighbours=..., "
                     "ledger=...); then Synthesizer(method='lp').fit(data, workload, "
                     "release=release) (tessera synth --method lp does both)")
        if budget is not None or ledger is not None:
            raise TesseraError("the release carries the privacy spend (and was charged to the "
                               "ledger when it was answered): give no budget or ledger with 'lp'")
        check_lp_workload(workload, release.plan.neighbours)
        if release.plan.workload != workload:
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
            n = _rows_of(data, workload.domain, csv, table, on_invalid)
        options = self.settings
        if "rows" in options:
            options["m"] = options.pop("rows")
        if progress is not None:
            options["callback"] = progress
        run = synthesize(release, n=n, rng=seed, **options)
        return FittedSynthesizer(self, workload, run, None, rel, release.charge, seed)


def _adaptive_preflight(workload: Workload, opts: dict[str, Any],
                        neighbours: Neighbours | str) -> None:
    """The public checks of the adaptive method: something to measure, option values, and
    the candidate workload's size (its counts are read before the charge)."""
    Neighbours.parse(neighbours)
    cands = candidates(workload, opts.get("max_cells", DEFAULT_MAX_CELLS))
    if not cands:
        raise QueryError("the workload mentions no attribute: the adaptive method has nothing "
                         "to measure", hint="add queries or marginals over the schema")
    for key in ("rounds", "rows", "iterations", "final_iterations", "sample_size",
                "max_model_size", "max_cells"):
        v = opts.get(key)
        if v is not None and (isinstance(v, bool) or int(v) != v or v < (0 if key == "rows"
                                                                          else 1)):
            raise TesseraError(f"{key} must be a positive integer, got {v!r}")
    f = opts.get("measure_fraction", 0.9)
    if not 0.0 < f < 1.0:
        raise TesseraError(f"measure_fraction must be in (0, 1), got {f!r}")


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


def _rows_of(data: Any, domain: Domain, csv: CsvOptions, table: str | None,
             on_invalid: OnInvalid) -> int:
    if isinstance(data, np.ndarray):
        return int(data.shape[0])
    return int(encode(data, domain, on_invalid=on_invalid, csv=csv, table=table).n_rows)


def _sensitive_counts(data: Any, workload: Workload, csv: CsvOptions, table: str | None,
                      on_invalid: OnInvalid) -> Any:
    """The exact counts the private steps read (NOT PRIVATE; never kept), by
    :func:`tessera.count` (one aggregation per scope, never row by row)."""
    if isinstance(data, (SensitiveCounts, np.ndarray)):
        return data
    res = count(data, workload, csv=csv, table=table, on_invalid=on_invalid)
    if res.n_rows == 0:
        raise DataError("the data has no rows" + (" left after dropping invalid ones"
                                                  if res.dropped else ""))
    return SensitiveCounts(res.answers, res.n_rows)


# -- the fitted model --------------------------------------------------------------------------


def decode_rows(domain: Domain, codes: npt.ArrayLike) -> pd.DataFrame:
    """Rows of codes as the schema's own values: categories, integers, bin labels, booleans
    (``None`` for a missing value)."""
    codes = np.asarray(codes)
    columns = {}
    for i, a in enumerate(domain):
        values = a.decode(codes[:, i])
        columns[a.name] = pd.Series(values, dtype=object if None in values else None)
    return pd.DataFrame(columns, index=pd.RangeIndex(codes.shape[0]))


@dataclass(frozen=True, eq=False)
class FittedSynthesizer:
    """A fitted synthesizer: the run's rows, its output distribution and its record.

    ``result`` is the method's own result (:class:`~tessera.synth.ipmwu.IPMWUResult`,
    :class:`~tessera.synth.mwem.MWEMResult` or :class:`~tessera.synth.lp.LPSynthesis`);
    ``charge`` the ledger's record of the charge (None without a ledger)."""

    synthesizer: Synthesizer
    workload: Workload
    result: AdaptiveResult | IPMWUResult | MWEMResult | LPSynthesis
    target: Target | None
    neighbours: Neighbours
    charge: Any = None
    seed: int | None = None

    @property
    def method(self) -> str:
        return self.synthesizer.method

    @property
    def domain(self) -> Domain:
        return self.workload.domain

    @property
    def rows(self) -> npt.NDArray[np.integer]:
        """The rows the run drew, as codes (shape (rows, attributes))."""
        return self.result.rows

    @property
    def private(self) -> bool:
        """False when the privacy randomness was seeded (then NOT PRIVATE). For ``lp`` that is
        the release's: a seed of the LP's own sampling is post-processing."""
        if self.method == "lp":
            return bool(self.result.private)
        return bool(self.result.private) and self.seed is None

    @property
    def record(self) -> Any:
        """The method's record: a :class:`~tessera.synth.ipmwu.RunRecord` (ipmwu, mwem) or the
        LP's JSON-ready dict."""
        return self.result.record() if self.method == "lp" else self.result.record

    # -- rows ---------------------------------------------------------------------------------
    def sample_codes(self, n: int | None = None,
                     rng: np.random.Generator | int | None = None) -> npt.NDArray[np.integer]:
        """``n`` fresh rows (codes) from the output distribution — the average of the round
        distributions (ipmwu, mwem) or the LP's histogram — or the run's own rows (n None).
        Sampling is post-processing: no privacy cost."""
        if n is None:
            return self.rows
        if isinstance(n, bool) or int(n) != n or n < 0:
            raise TesseraError(f"n must be an integer ≥ 0, got {n!r}")
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        res = self.result
        if isinstance(res, AdaptiveResult):
            return res.sample(int(n), gen)
        if isinstance(res, IPMWUResult):
            r = res.record
            model = res.model

            def samplers() -> Iterator[Callable[[int], np.ndarray]]:
                for theta in iter_thetas(r.transcript.selections, r.theta_steps, len(res.names)):
                    yield lambda k, theta=theta: model.with_theta(theta).sample(k, gen)

            return sample_average(int(n), r.parameters.rounds, gen, samplers(), len(self.domain))
        if isinstance(res, MWEMResult):
            p = res.average / res.average.sum()
            return res.cells[gen.choice(res.cells.shape[0], size=int(n), p=p)]
        return res.solution.sample(int(n), gen)

    def sample(self, n: int | None = None,
               rng: np.random.Generator | int | None = None) -> pd.DataFrame:
        """Rows in the schema's values (:func:`decode_rows`): the run's own rows (n None) or
        ``n`` fresh ones (:meth:`sample_codes`). ``attrs['private']`` says whether they are."""
        frame = decode_rows(self.domain, self.sample_codes(n, rng))
        frame.attrs["private"] = self.private
        frame.attrs["method"] = self.method
        return frame

    # -- the fitted distribution --------------------------------------------------------------
    def answers(self, workload: Workload | None = None) -> npt.NDArray[np.float64]:
        """Exact answers ⟨q, h⟩ (fractions in [0, 1]) of the output distribution h the rows
        are drawn from, for the fitted workload (expanded order) or another one over the same
        schema. Post-processing: no privacy cost."""
        w = self.workload if workload is None else workload
        if w.domain != self.domain:
            raise QueryError("the workload is over another schema than the fitted one")
        res = self.result
        same = w is self.workload or w == self.workload
        if isinstance(res, AdaptiveResult):
            return res.answers(w)
        if isinstance(res, IPMWUResult):
            return res.average_answers() if same else _ipmwu_answers(res, w, self.settings)
        functions, _ = query_functions(self.domain, w)
        if isinstance(res, MWEMResult):
            if same:
                return res.average_answers()
            table = Evaluator(self.domain, functions).matrix(res.cells)
            return table.astype(np.float64) @ (res.average / res.average.sum())
        return _lp_answers(res, functions)

    @property
    def settings(self) -> dict[str, Any]:
        return self.synthesizer.settings

    # -- records ------------------------------------------------------------------------------
    def spent(self) -> list[Guarantee]:
        """What the run provably spent, from its recorded mechanisms alone: pure ε (pure runs),
        ρ-zCDP (always) and (ε, δ) at :attr:`Target.deltas`. For ``lp``: empty (the release's
        guarantees are in :meth:`run_record`)."""
        if self.method == "lp":
            return []
        assert self.target is not None
        r = self.result.record
        out = []
        pure = None
        if r.spent.definition is Definition.PURE:
            pure = r.proved(Definition.PURE)
            out.append(pure)
        z = r.proved(Definition.ZCDP)
        out.append(z)
        rho = float(z.rho or 0.0)
        for delta in self.target.deltas:
            eps = epsilon_for_delta(rho, delta)
            note = "from ρ-zCDP (CKS20 Cor. 13)"
            if pure is not None and float(pure.epsilon or 0.0) <= eps:
                eps, note = float(pure.epsilon or 0.0), "implied by pure ε-DP"
            out.append(Guarantee.approx(eps, delta, r.neighbours, basis="upper bound",
                                        note=note))
        return out

    def run_record(self) -> dict[str, Any]:
        """JSON-ready: method and algorithm, privacy (budget asked, what the run is calibrated
        as, spent in every definition, what is not proven), parameters, timings, the model's
        width, the rows and the ledger's charge."""
        ledger = _charge_dict(self.charge)
        if self.method == "lp":
            return self._lp_record(ledger)
        assert self.target is not None
        r = self.result.record
        t = r.timings
        params = dataclasses.asdict(r.parameters)
        params["defaulted"] = list(params["defaulted"])
        params["options"] = {k: _jsonable(v) for k, v in self.synthesizer.options}
        not_proven = []
        if self.target.asked.get("definition") == Definition.GDP.value:
            not_proven.append({"definition": Definition.GDP.value, "mu": self.target.asked["mu"],
                               "reason": "discrete mechanisms: ρ = μ²/2-zCDP is proven, "
                                         "μ-GDP is only the target"})
        return {
            "method": self.method,
            "algorithm": r.algorithm,
            "private": self.private,
            "randomness": r.source,
            "neighbours": self.neighbours.value,
            "budget": {
                "asked": self.target.asked,
                "calibrated_as": {"definition": self.target.definition.value,
                                  ("epsilon" if self.target.definition is Definition.PURE
                                   else "rho"): self.target.value},
                "notes": list(self.target.notes),
            },
            "spent": [g.to_dict() for g in self.spent()],
            "not_proven": not_proven,
            "mechanisms": len(r.steps),
            "parameters": params,
            "timings": {"setup": t.setup, "rounds": sum(t.rounds), "mean_round": t.mean_round,
                        "output": t.output, "total": t.total, "n_rounds": len(t.rounds),
                        **({"fit": t.fit} if hasattr(t, "fit") else {})},
            "width": r.width,
            "rows": int(self.rows.shape[0]),
            "workload": _workload_dict(self.workload),
            "ledger": ledger,
        }

    def _lp_record(self, ledger: dict[str, Any] | None) -> dict[str, Any]:
        res = self.result
        rec = res.record()  # type: ignore[union-attr]
        privacy = rec.pop("privacy")
        timings = rec.pop("timings")
        return {
            "method": "lp",
            "algorithm": _ALGORITHMS["lp"],
            "private": self.private,
            "randomness": privacy.get("randomness"),
            "neighbours": self.neighbours.value,
            "budget": None,
            "spent": privacy.get("guarantees", []),
            "spent_basis": privacy.get("basis"),
            "not_proven": [],
            "parameters": {"options": {k: _jsonable(v) for k, v in self.synthesizer.options},
                           "n": privacy.get("n")},
            "lp": {k: _jsonable(v) for k, v in rec.items()},
            "timings": {k: float(v) for k, v in timings.items()},
            "width": rec.get("width"),
            "rows": int(self.rows.shape[0]),
            "workload": _workload_dict(self.workload),
            "ledger": ledger,
        }

    def describe(self) -> str:
        """A few lines for a terminal."""
        if self.method == "lp":
            rec = self.run_record()
            lp = rec["lp"]
            lines = [rec["algorithm"],
                     f"α = {lp['alpha']:.6g}, lower bound {lp['lower_bound']:.6g}, gap "
                     f"{lp['gap']:.3g} ({lp['status']}), {lp['iterations']} iterations, "
                     f"{lp['support']} support points, width {lp['width']}",
                     f"rows: {rec['rows']:,} (within {lp['rows_within']:.3g} of the release's "
                     f"answers w.p. ≥ {1 - lp['failure']:g})"]
            lines += [f"privacy: {g.get('definition')} {_parameter_text(g)} (post-processing of "
                      "the release)" for g in rec["spent"]]
        else:
            lines = [self.result.record.describe()]
            lines += [f"spent: {g.text()}" for g in self.spent()
                      if g.definition is Definition.APPROX]
            assert self.target is not None
            lines += list(self.target.notes)
        if not self.private and self.method == "lp":  # the run record's own text says it
            lines.append("NOT PRIVATE: seeded test randomness")
        return "\n".join(lines)

    def write(self, path: str | Path, n: int | None = None,
              rng: np.random.Generator | int | None = None) -> Path:
        """The rows (:meth:`sample`) as ``.csv`` (a ``# NOT PRIVATE`` first line when seeded) or
        ``.parquet`` (the privacy mark, the method and the run record in its metadata)."""
        p = Path(path)
        suffix = p.suffix.lower()
        if suffix not in (".csv", ".parquet"):
            what = suffix or "a file without suffix"
            raise TesseraError(f"cannot write synthetic rows as {what}", where=str(p),
                               hint="use .csv or .parquet")
        frame = self.sample(n, rng)
        if suffix == ".parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            meta = {b"tessera.private": b"true" if self.private else b"false",
                    b"tessera.method": self.method.encode(),
                    b"tessera.record": json.dumps(self.run_record()).encode()}
            if not self.private:
                meta[b"tessera.warning"] = NOT_PRIVATE_MARK.encode()
            table = pa.Table.from_pandas(frame, preserve_index=False)
            pq.write_table(table.replace_schema_metadata(meta), p)
            return p
        with p.open("w", newline="") as f:
            if not self.private:
                f.write(f"# {NOT_PRIVATE_MARK}\n")
            frame.to_csv(f, index=False)
        return p

    def write_record(self, path: str | Path) -> Path:
        """:meth:`run_record` as indented JSON."""
        p = Path(path)
        p.write_text(json.dumps(self.run_record(), indent=1, ensure_ascii=False) + "\n")
        return p


def _parameter_text(g: dict[str, Any]) -> str:
    return ", ".join(f"{k} = {g[k]:.6g}" for k in ("epsilon", "delta", "rho", "mu") if k in g)


def _jsonable(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return repr(v)


def _charge_dict(charge: Any) -> dict[str, Any] | None:
    if charge is None:
        return None
    if dataclasses.is_dataclass(charge) and not isinstance(charge, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(charge).items()}
    return {"release_id": str(getattr(charge, "release_id", charge))}


def _workload_dict(w: Workload) -> dict[str, Any]:
    return {"queries": w.n_queries, "predicate_queries": len(w.queries),
            "families": [p.name for p in w.partitions]}


def _ipmwu_answers(res: IPMWUResult, workload: Workload,
                   settings: dict[str, Any]) -> npt.NDArray[np.float64]:
    """⟨q, (1/T) Σ_t h_t⟩ for queries the run did not fit: one model over the fitted queries
    and the new ones, the new ones at θ = 0 (so every h_t is unchanged), one engine pass per
    round."""
    fitted = res.model.queries
    new, _ = query_functions(res.domain, workload)
    kw = {k: settings[k] for k in ("heuristic", "memory_limit") if k in settings}
    model = GibbsModel(res.domain, (*fitted, *new), constraints=settings.get("constraints", ()),
                       **kw)
    r = res.record
    total = np.zeros(len(new))
    k = len(fitted)
    for theta in iter_thetas(r.transcript.selections, r.theta_steps, k):
        full = np.concatenate([theta, np.zeros(len(new))])
        total += model.with_theta(full).expectations()[k:]
    return total / r.parameters.rounds


def _lp_answers(res: LPSynthesis, functions: Any) -> npt.NDArray[np.float64]:
    """⟨q, h⟩ for the LP's histogram h, whose support points stand for products of value
    classes (a drawn row takes a uniform code in each class): for a conjunction of predicates,
    Σ_k h_k Π_predicates (share of the class's codes inside the predicate)."""
    sol = res.solution
    dom = sol.targets.domain
    support, weights = sol.support, sol.weights
    out = np.zeros(len(functions))
    share_cache: dict[tuple[int, tuple[tuple[int, int], ...]], npt.NDArray[np.float64]] = {}
    for j, f in enumerate(functions):
        if not isinstance(f, Query):
            raise QueryError("exact LP answers take predicate queries (conjunctions)",
                             hint="count the sampled rows instead (tessera.synth.evaluate)")
        prob = np.ones(len(weights))
        for pred in f.predicates:
            i = dom.index(pred.attribute)
            key = (i, pred.coverage.spans)
            share = share_cache.get(key)
            if share is None:
                share = _class_share(dom, sol.classes, i, pred.coverage)
                share_cache[key] = share
            prob *= share[support[:, i]]
        out[j] = math.fsum((prob * weights).tolist())
    return out


def _class_share(dom: Domain, classes: Any, i: int, coverage: Any) -> npt.NDArray[np.float64]:
    """For every code c of attribute i: the share of the codes of c's value class inside
    ``coverage`` (1 or 0 when the classes are the codes)."""
    size = dom.sizes[i]
    codes = np.arange(size)
    inside = np.asarray(coverage.contains_array(codes), dtype=np.float64)
    if classes is None or classes[i].n_classes == size:
        return inside
    vc = classes[i]
    cls = vc.class_of(codes)
    per_class = np.bincount(cls, weights=inside, minlength=vc.n_classes) / vc.n_codes
    return per_class[cls]
