"""Answer a workload privately: the main job of Smith et al. (docs/theory.md §3, §7, §9).

:func:`answer` runs, in this order, so that nothing leaves the process before it is paid for:

1. **plan** — per-query noise from the public inputs alone (:func:`~.plan.noise_plan`):
   γ_w exact or a proven upper bound, the allocation, a re-check of what it costs a row;
   then the data is read and validated against the schema (errors go to the curator, before
   any budget is spent). What is measured is a *strategy* chosen from the public inputs
   (:mod:`tessera.strategy`: W itself, marginals, residuals, a tree), and the plan is the
   strategy's (its own γ_w); W's answers are reconstructed from it by least squares
   (:mod:`.strategy_release`);
2. **charge** — if a ledger is given, the release's per-query costs are charged in a
   committed SQLite transaction (refused when the total would be exceeded);
3. **count** — exact answers on the data (DuckDB), held only in this function;
4. **noise** — discrete Laplace or discrete Gaussian from OpenDP's secure sampler;
5. **post-process** (free in privacy, each optional and labelled);
6. **deliver** — the requested files (answers, certificate, report) are written to temporary
   files beside their targets, a caller's ``deliver`` callback runs, and only when all of that
   succeeded are the files renamed over their targets (:func:`tessera.data.outputs.staged`);
   then the ledger marks the release ``released`` and a :class:`Release` holding only noisy
   values is returned.

Every requested output path (suffix, directory, permission) is checked in step 1, before the
charge (:func:`tessera.data.outputs.check_outputs`): what can be foreseen fails without
spending budget. A failure or an interruption after the charge (a full disk, Ctrl-C, a crash,
a failing ``deliver`` callback) marks the release ``aborted``, leaves no requested file behind,
and keeps the budget spent (docs/theory.md §9.6: once the charge is committed the ledger cannot
know whether noise was drawn or seen, so it never refunds); the error says which charge, at
which step, and which files exist (:func:`tessera.data.outputs.aborted_hint`).

A ``seed`` makes the noise reproducible for tests: the release then says NOT PRIVATE
everywhere (its certificate, its frame's attributes, its files).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from tessera.data.counts import count_encoded
from tessera.data.outputs import (
    Delivery,
    Output,
    OutputError,
    aborted_hint,
    atomic,
    check_outputs,
    settled,
    staged,
)
from tessera.data.source import encode
from tessera.data.table import CsvOptions, ExtraColumns
from tessera.errors import DataError, DataWarning, TesseraError
from tessera.mechanisms import NoiseSource, discrete_gaussian, discrete_laplace
from tessera.mechanisms.batch import MAX_PARAMETER
from tessera.mechanisms.record import MechanismRecord
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.release.budget import DISCRETE_LAPLACE, Budget
from tessera.release.ledger import Charge, Ledger
from tessera.release.plan import Allocation, NoisePlan
from tessera.release.strategy_release import (
    Reconstructed,
    contrast_sigmas,
    measure_contrasts,
    noise_variances,
    reconstruct,
    strategy_plan,
)
from tessera.strategy.candidates import Strategy
from tessera.workload.ranges import RangeNames
from tessera.workload.workload import Workload

logger = logging.getLogger(__name__)

#: Post-processing steps :func:`answer` knows, in the order they apply.
POSTPROCESSING = ("consistency", "model", "nonnegative")
#: What the ``nonnegative`` step says it did (both the direct and the strategy route).
NONNEGATIVE_NOTE = ("answers clipped at 0 and rounded to integers (post-processing: no privacy "
                    "cost; biased for small counts)")
#: Largest workload (cells included) least-squares consistency is run on.
CONSISTENCY_MAX_QUERIES = 500_000


@dataclass(frozen=True, eq=False)
class Release:
    """Noisy answers of a workload and everything needed to publish and audit them.

    ``noisy[q]``: the integer answer + discrete noise; ``postprocessed``: name → answers after
    that step (cumulative, in :data:`POSTPROCESSING` order); ``certificate``: the JSON-ready
    record (:mod:`tessera.release.certificate`). Exact answers are never kept.
    """

    plan: NoisePlan
    noisy: npt.NDArray[np.int64]
    mechanism: MechanismRecord
    postprocessed: dict[str, npt.NDArray[np.float64]]
    postprocessing_notes: dict[str, str]
    certificate: dict[str, Any]
    charge: Charge | None = None
    timings: dict[str, float] = field(default_factory=dict)
    #: W's answers reconstructed from a measured strategy (None: W itself was measured)
    strategy: Reconstructed | None = None

    @property
    def private(self) -> bool:
        return self.mechanism.private

    @property
    def workload(self) -> Workload:
        """W, the workload answered (the measured strategy is ``plan.workload``)."""
        return self.plan.workload if self.strategy is None else self.strategy.workload

    @property
    def answers(self) -> npt.NDArray[np.float64]:
        """The published answers: the last post-processing step applied, else the noisy ones
        (or, through a strategy, W's reconstructed answers)."""
        if self.postprocessed:
            return list(self.postprocessed.values())[-1]
        if self.strategy is not None:
            return self.strategy.answers
        return self.noisy.astype(np.float64)

    def to_frame(self) -> pd.DataFrame:
        """One row per query: noisy answer, noise scale, exact 95% interval of the noise around
        it, and each post-processed answer. ``attrs['private']`` says whether it is private.

        A structured workload gives the long table: ``family, cell`` instead of ``query``
        (:func:`tessera.release.output.long_batches`)."""
        if self.workload.is_structured:
            import pyarrow as pa

            from tessera.release.output import long_batches

            frame = pa.Table.from_batches(list(long_batches(self))).to_pandas()
            frame.attrs["private"] = self.private
            frame.attrs["mechanism"] = self.mechanism.describe()
            return frame
        if self.strategy is not None:
            st = self.strategy
            names = self.workload.names
            frame = pd.DataFrame({
                "query": names.array if isinstance(names, RangeNames)
                else list(self.workload.all_names()),
                "answer": st.answers,
                "std_error": np.sqrt(st.variances),
                "ci95_low": st.answers - st.halfwidths,
                "ci95_high": st.answers + st.halfwidths,
            })
            for name, values in self.postprocessed.items():
                frame[name] = values
            frame.attrs["private"] = self.private
            frame.attrs["mechanism"] = self.mechanism.describe()
            return frame
        released = self.plan.halfwidths >= 0
        hw = np.where(released, self.plan.halfwidths, 0)
        frame = pd.DataFrame({
            "query": list(self.workload.all_names()),
            "answer": np.where(released, self.noisy, pd.NA),
            "noise_scale": self.plan.scales,
            "ci95_low": np.where(released, self.noisy - hw, pd.NA),
            "ci95_high": np.where(released, self.noisy + hw, pd.NA),
        })
        for name, values in self.postprocessed.items():
            frame[name] = values
        frame.attrs["private"] = self.private
        frame.attrs["mechanism"] = self.mechanism.describe()
        return frame

    def write(self, path: str | Path) -> Path:
        """Answers as CSV or Parquet (the NOT PRIVATE mark in the file when seeded)."""
        from tessera.release.output import write_release

        (o,) = check_outputs([Output(Path(path), "answers", ANSWER_SUFFIXES)])
        with atomic(o.path) as tmp:
            write_release(self, tmp)
        return o.path

    def write_certificate(self, path: str | Path) -> Path:
        """The certificate as JSON, written atomically."""
        from tessera.release.certificate import write_certificate

        return write_certificate(self.certificate, Path(path))

    def report(self, path: str | Path) -> Path:
        """A self-contained HTML report (:mod:`tessera.release.report`), written atomically."""
        from tessera.release.report import write_report

        return write_report(self, Path(path))


#: Suffixes of the files :func:`answer` writes (answers, certificate, report).
ANSWER_SUFFIXES = (".csv", ".parquet")
CERTIFICATE_SUFFIXES = (".json",)
REPORT_SUFFIXES = (".html", ".htm")


def release_outputs(output: str | Path | None = None, certificate: str | Path | None = None,
                    report: str | Path | None = None) -> tuple[Output, ...]:
    """The requested files of a release, checked writable now (before any charge)."""
    return check_outputs([Output.of(output, "answers", ANSWER_SUFFIXES),
                          Output.of(certificate, "certificate", CERTIFICATE_SUFFIXES),
                          Output.of(report, "report", REPORT_SUFFIXES)])


def _deliver(release: Release, outputs: Sequence[Output], delivery: Delivery,
             then: Callable[[Release], None] | None = None) -> None:
    """Write every requested file of ``release`` and run ``then`` (a caller's delivery), all
    or none: the files are renamed into place only once ``then`` returned (:func:`staged`), so
    that a failure anywhere leaves none of them. ``delivery`` records the step and the files
    put in place (what an abort says)."""
    from tessera.release.certificate import write_certificate
    from tessera.release.output import write_release
    from tessera.release.report import write_report

    writers = {"answers": lambda p: write_release(release, p),
               "certificate": lambda p: write_certificate(release.certificate, p),
               "report": lambda p: write_report(release, p)}
    delivery.step = "writing the files"
    with staged([o.path for o in outputs], delivery.placed) as temps:
        for o, tmp in zip(outputs, temps):
            try:
                writers[o.what](tmp)
            except OSError as e:  # a full disk, a vanished directory: one line, no traceback
                raise OutputError(f"cannot write the {o.what}: {e.strerror or e}",
                                  where=str(o.path)) from None
        if then is not None:
            delivery.step = "in the deliver callback, before the files were put in place"
            then(release)
        delivery.step = "putting the files in place"


def answer(
    data: Any,
    workload: Workload,
    budget: Budget,
    *,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    unit: PrivacyUnit = ONE_ROW,
    allocation: Allocation = "auto",
    postprocess: Sequence[str] = (),
    strategy: str = "auto",
    objective: str = "total",
    estimate: str = "gls",
    ledger: Ledger | str | Path | None = None,
    label: str | None = None,
    time_limit: float | None = 60.0,
    seed: int | None = None,
    csv: CsvOptions = CsvOptions(),
    table: str | None = None,
    on_invalid: str = "error",
    extra_columns: ExtraColumns = "error",
    output: str | Path | None = None,
    certificate: str | Path | None = None,
    report: str | Path | None = None,
    deliver: Callable[[Release], None] | None = None,
) -> Release:
    """Answer ``workload`` on ``data`` under ``budget`` (module docs for the order of steps).

    ``output`` (.csv/.parquet), ``certificate`` (.json), ``report`` (.html): files written
    before the release is marked released, checked before the charge. ``deliver``: called with
    the release once its files are complete in their temporary files, before they are renamed
    into place and the release is marked released, for a caller that delivers more of it (e.g.
    ``tessera synth --method lp`` writes its synthetic rows there); a failure there marks the
    release aborted and leaves none of the requested files.

    ``strategy``: what is measured (:mod:`tessera.strategy`; ``auto``: the least expected error
    for ``objective``), W's answers reconstructed from it (:mod:`.strategy_release`).
    ``estimate``: ``gls`` (those answers) or ``model`` (adds the post-processing step
    ``model``: non-negative consistent estimates from every measurement,
    :mod:`.model_estimate`; no proven interval).

    ``unit``: whose presence the budget protects — one row (the default), or one person
    (:class:`~tessera.privacy.PrivacyUnit`: every row with the same value of its id column, at
    most K of them kept by a rule that reads that person's rows alone; docs/theory.md §3.13):
    the noise is calibrated to a person's γ_w (K·γ under pure ε, the ℓ2 sensitivity K·√γ(c)
    under zCDP), the guarantees and the certificate name the unit, and a ledger must be made
    for the same unit."""
    if estimate == "adaptive":  # the route lives above this layer (tessera.routes)
        raise TesseraError("estimate 'adaptive' is tessera.answer_adaptive(data, workload, "
                           "budget, ...) (tessera answer --estimate adaptive)",
                           hint="it spends the budget on the adaptive synthesizer and answers "
                                "from its fitted model")
    if estimate not in ("gls", "model"):
        raise TesseraError(f"unknown estimate {estimate!r}", hint="one of gls, model, adaptive")
    if estimate == "model" and "model" not in postprocess:
        postprocess = (*postprocess, "model")
    unknown = [p for p in postprocess if p not in POSTPROCESSING]
    if unknown:
        raise TesseraError(f"unknown post-processing {unknown[0]!r}",
                           hint="one of " + ", ".join(POSTPROCESSING))
    if unit.counts_people:
        check_people_postprocessing(postprocess)
    outputs = release_outputs(output, certificate, report)
    source = NoiseSource.secure() if seed is None else NoiseSource.seeded(seed)
    timings: dict[str, float] = {}
    start = time.perf_counter()
    plan, choice = strategy_plan(workload, budget, neighbours=neighbours, allocation=allocation,
                                 strategy=strategy, objective=objective, time_limit=time_limit,
                                 estimate=estimate, unit=unit)
    measured = plan.workload
    timings["plan"] = time.perf_counter() - start
    if choice is not None:
        logger.info("strategy %s: %s measured queries, answers by %s", choice.chosen.name,
                    f"{measured.n_queries:,}", choice.chosen.reconstruction.name)
    book = Ledger.open(ledger) if isinstance(ledger, (str, Path)) else ledger
    if book is not None:
        _check_ledger(book, plan)
    # Validate and code the data BEFORE the charge: a data error (values outside the schema,
    # a malformed file) is reported to the curator without spending budget, and nothing that
    # depends on the data is computed or raised between the charge and the noisy release.
    t0 = time.perf_counter()
    encoded = encode(data, workload.domain, on_invalid=on_invalid,  # type: ignore[arg-type]
                     csv=csv, table=table, unit=unit, extra_columns=extra_columns)
    timings["encode"] = time.perf_counter() - t0
    _check_rows(encoded.n_rows, plan.neighbours)
    contrasted = None if choice is None else choice.chosen
    if contrasted is not None and contrasted.contrasts is None:
        contrasted = None
    if contrasted is not None:
        contrasted.contrasts.check_rows(encoded.n_rows)  # type: ignore[union-attr]
    _check_scales(plan, contrasted)
    charge = None
    if book is not None:
        charge = book.charge(measured, plan.costs, label=label or "release",
                             mechanism=plan.mechanism,
                             time_limit=60.0 if time_limit is None else max(time_limit, 1.0),
                             unit=plan.unit)
    delivery = Delivery(tuple(o.path for o in outputs))
    symbol = _budget_symbol(plan)
    with settled(book, charge, lambda: aborted_hint("release", charge, symbol, delivery)):
        t0 = time.perf_counter()
        exact = count_encoded(encoded, measured)
        del encoded
        timings["count"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        noisy, record = (_add_noise(plan, exact, source) if contrasted is None
                         else measure_contrasts(plan, contrasted, exact, source))
        del exact  # the exact answers go no further
        timings["noise"] = time.perf_counter() - t0
        logger.debug("noise added: %s (%s)", record.describe(), source.label)
        # (W measured as given — direct, nothing merged — needs no reconstruction)
        rec = (None if choice is None or choice.chosen.measured is workload
               else reconstruct(plan, choice, noisy))
        t0 = time.perf_counter()
        post, notes = (_postprocess(plan, noisy, postprocess) if rec is None
                       else _postprocess_reconstructed(rec, postprocess, plan, noisy))
        timings["postprocess"] = time.perf_counter() - t0
        from tessera.release.certificate import build_certificate

        doc = build_certificate(plan, record, notes, charge=charge, choice=choice)
        # the charge as it will read once every file exists (what deliver() may record)
        shown = None if charge is None else dataclasses.replace(charge, status="released")
        release = Release(plan, noisy, record, post, notes, doc, shown, timings, rec)
        t0 = time.perf_counter()
        _deliver(release, outputs, delivery, deliver)
        timings["deliver"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - start
    return release


def check_people_postprocessing(steps: Sequence[str]) -> None:
    """Counting people, the steps that treat the answers as sums over one histogram
    (``consistency``: least squares under the families' sums; ``model``: a data distribution
    fitted to them) are refused before anything is spent: a count of people is not the sum
    of the counts of its parts (a person in two cells is one person in their union)."""
    bad = [p for p in steps if p in ("consistency", "model")]
    if bad:
        raise TesseraError(
            f"post-processing {bad[0]!r} treats every count as a sum of histogram cells, and a "
            "count of people is not a sum of other counts (a person in two cells is one "
            "person in their union); nothing was charged",
            hint="use --postprocess nonnegative (or none) with --count people")


def _check_rows(n_rows: int, neighbours: Neighbours) -> None:
    """No rows (an empty file, a header only, every row dropped): under substitution n is
    public and a data set of 0 rows has no neighbour, so it is refused before the charge; under
    add/remove n = 0 is a valid data set (its neighbours have one row), answered as any other,
    and the curator is warned (a :class:`~tessera.errors.DataWarning`, never in an output)."""
    if n_rows > 0:
        return
    if Neighbours.parse(neighbours) is Neighbours.SUBSTITUTE:
        raise DataError("the data has no rows: under substitute neighbours n is public and "
                        "must be at least 1 (nothing was charged)",
                        hint="check the file (a header only?), or use add/remove neighbours, "
                        "under which an empty data set is valid")
    warnings.warn(DataWarning("the data has no rows (n = 0): answered as a valid empty data "
                              "set under add/remove neighbours; check the file if you expected "
                              "rows"), stacklevel=3)


def _check_scales(plan: NoisePlan, contrasted: Strategy | None) -> None:
    """Every noise parameter the release will pass to OpenDP's samplers lies in their domain
    (finite, positive, at most 2^52: :data:`~tessera.mechanisms.batch.MAX_PARAMETER`), checked
    before the charge: a split that gives a query a vanishing share of the budget (possible
    under pure ε, where some optimised splits are degenerate) is refused while nothing is
    spent, not by the sampler after the charge."""
    released = np.flatnonzero(np.isfinite(plan.scales))
    values = (plan.scales[released] if contrasted is None
              else contrast_sigmas(plan, contrasted))
    bad = np.flatnonzero(~((values > 0) & (values <= MAX_PARAMETER)))
    if bad.size == 0:
        return
    k = int(bad[0])
    what = (f"measured query {int(released[k])} ({plan.workload.name_of(int(released[k]))!r})"
            if contrasted is None else f"residual {k} of the strategy")
    raise TesseraError(
        f"{what}: its noise scale {float(values[k]):.4g} is past the sampler's limit 2^52 "
        f"({bad.size} such): the split gives it a vanishing share of the budget (nothing was "
        "charged)",
        hint="choose another strategy (--strategy auto, direct or identity) or objective, or "
             "weights that give no released query a vanishing share")


def _budget_symbol(plan: NoisePlan) -> str:
    """The symbol the ledger counts this release's cost in: ε (pure) or ρ (zCDP)."""
    return "ε" if plan.budget.calibration is Definition.PURE else "ρ"


def _check_ledger(book: Ledger, plan: NoisePlan) -> None:
    if book.definition is not plan.budget.calibration:
        raise TesseraError(
            f"the ledger counts {book.definition.label}, this release is calibrated in "
            f"{plan.budget.calibration.label}",
            hint="use a ledger of the same definition (tessera ledger init --definition ...)",
        )
    if book.neighbours is not plan.neighbours:
        raise TesseraError(
            f"the ledger is for {book.neighbours.label} neighbours, this release for "
            f"{plan.neighbours.label}", hint="use the ledger's --neighbours")
    book.check_unit(plan.unit)  # (before the data are read: nothing is charged)


def _add_noise(
    plan: NoisePlan, exact: npt.NDArray[np.int64], source: NoiseSource
) -> tuple[npt.NDArray[np.int64], MechanismRecord]:
    """Discrete noise on the released queries (scale ∞: not released, answer withheld)."""
    released = np.isfinite(plan.scales)
    out = np.zeros(len(exact), dtype=np.int64)
    sampler = (discrete_laplace.sample if plan.mechanism == DISCRETE_LAPLACE
               else discrete_gaussian.sample)
    if not released.any():
        raise TesseraError("no query of the workload is released (every weight is 0)")
    noisy = sampler(np.asarray(exact, dtype=np.int64)[released], plan.scales[released], source)
    out[released] = noisy.values
    return out, noisy.mechanism


def _postprocess(
    plan: NoisePlan, noisy: npt.NDArray[np.int64], steps: Sequence[str]
) -> tuple[dict[str, npt.NDArray[np.float64]], dict[str, str]]:
    post: dict[str, npt.NDArray[np.float64]] = {}
    notes: dict[str, str] = {}
    if not steps:
        return post, notes
    from tessera.release.consistency import consistent_answers, round_nonnegative

    current = noisy.astype(np.float64)
    for step in POSTPROCESSING:
        if step not in steps:
            continue
        if step == "consistency":
            variances = noise_variances(plan)
            wl = plan.workload
            if wl.is_structured:
                if wl.n_queries > CONSISTENCY_MAX_QUERIES:
                    notes[step] = (f"consistency not applied: {wl.n_queries:,} queries exceed "
                                   f"{CONSISTENCY_MAX_QUERIES:,} (answers left as released)")
                    post[step] = current.copy()
                    continue
                wl = wl.expanded(max_queries=CONSISTENCY_MAX_QUERIES)
            result = consistent_answers(wl, current, variances)
            current = result.answers
            notes[step] = result.note
        elif step == "model":
            current = _model_step(plan, plan.workload, noisy, current, notes)
        else:
            current = round_nonnegative(current).astype(np.float64)
            notes[step] = NONNEGATIVE_NOTE
        post[step] = current
    return post, notes


def _model_step(plan: NoisePlan, workload: Workload, noisy: npt.NDArray[np.int64],
                current: npt.NDArray[np.float64], notes: dict[str, str],
                strategy: Strategy | None = None) -> npt.NDArray[np.float64]:
    from tessera.release.model_estimate import model_answers

    values, notes["model"] = model_answers(plan, workload, noisy, strategy)
    return current.copy() if values is None else values


def _postprocess_reconstructed(
    rec: Reconstructed, steps: Sequence[str], plan: NoisePlan, noisy: npt.NDArray[np.int64]
) -> tuple[dict[str, npt.NDArray[np.float64]], dict[str, str]]:
    post: dict[str, npt.NDArray[np.float64]] = {}
    notes: dict[str, str] = {}
    current = rec.answers
    for step in POSTPROCESSING:
        if step not in steps:
            continue
        if step == "consistency":
            notes[step] = ("already consistent: W's answers are one generalised least-squares "
                           "fit of the measured strategy")
        elif step == "model":
            current = _model_step(plan, rec.workload, noisy, current, notes,
                                  rec.choice.chosen)
        else:
            from tessera.release.consistency import round_nonnegative

            current = round_nonnegative(current).astype(np.float64)
            notes[step] = NONNEGATIVE_NOTE
        post[step] = current
    return post, notes
