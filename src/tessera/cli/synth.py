"""``tessera synth`` and ``tessera evaluate``: private synthetic data from a workload, and its
errors against the real data (docs/theory.md §5, §6, §9)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import RenderableType
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, Task, TextColumn
from rich.text import Text

from tessera.cli.common import (
    Command,
    DataArg,
    DelimiterOpt,
    DeltaOpt,
    EngineOpt,
    ExtraColumnsOpt,
    JsonOpt,
    MaxRowsOpt,
    NaOpt,
    NeighboursOpt,
    NoHeaderOpt,
    OnInvalidOpt,
    PrivacyIdOpt,
    RhoOpt,
    SchemaOpt,
    SeedOpt,
    SkipRowsOpt,
    SparkMasterOpt,
    TableOpt,
    check_policies,
    csv_options,
    data_source,
    err,
    fail,
    info,
    out,
    privacy_unit,
    spent_text,
    user_errors,
)
from tessera.errors import TesseraError
from tessera.privacy import DEFAULT_NEIGHBOURS

if TYPE_CHECKING:
    from tessera.synth.fitted import FittedSynthesizer



def register(app: typer.Typer) -> None:
    app.command("synth", cls=Command)(synth)
    app.command("evaluate", cls=Command)(evaluate)


#: ``tessera synth``'s workload: optional (without it, the schema's default workload).
OptionalWorkloadArg = Annotated[
    Path | None,
    typer.Argument(help="Workload file (one WHERE clause per line, or YAML/JSON). Default: "
                   "every 2-way marginal of the schema, or every 1-way marginal when those do "
                   "not fit the engine's limits (said on stderr and in the record).",
                   metavar="WORKLOAD", exists=True, dir_okay=False, show_default=False),
]


@user_errors
def synth(
    data: DataArg,
    schema: SchemaOpt,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Synthetic rows: .csv or .parquet.")
    ],
    workload: OptionalWorkloadArg = None,
    epsilon: Annotated[
        float | None, typer.Option("--epsilon", "-e", help="Pure ε-DP, or (ε,δ)-DP with "
                                   "--delta (run as the ρ-zCDP that implies it).")
    ] = None,
    delta: DeltaOpt = None,
    rho: RhoOpt = None,
    mu: Annotated[
        float | None, typer.Option("--mu", help="μ-GDP target (run as ρ = μ²/2-zCDP; μ-GDP "
                                   "itself is not proven).")
    ] = None,
    method: Annotated[
        str, typer.Option("--method", help="adaptive (AIM-style, the default), ipmwu "
                          "(Ghazi et al.'s implicit weights), mwem (explicit histogram, ≤ 2^20 "
                          "points) or lp (LP over a private release).")
    ] = "adaptive",
    rows: Annotated[
        int | None, typer.Option("--rows", help="Synthetic rows (default: the method's).")
    ] = None,
    rounds: Annotated[
        int | None, typer.Option("--rounds", help="Rounds T of ipmwu/mwem (default: Ghazi et al.'s "
                                 "theory); for adaptive, AIM's T setting the initial noise "
                                 "(default: 16 × attributes, lowered to no fewer than 4 × "
                                 "attributes when the budget is small against the data; a "
                                 "given T is kept).")
    ] = None,
    uniform_columns: Annotated[
        bool, typer.Option("--uniform-columns", help="Leave the attributes no query of the "
                           "workload mentions uniformly random (stated on stderr and in the "
                           "record). Default: adaptive measures their one-way marginals from "
                           "the same budget; ipmwu, mwem and lp refuse such a workload.")
    ] = False,
    neighbours: NeighboursOpt = DEFAULT_NEIGHBOURS.value,
    privacy_id: PrivacyIdOpt = None,
    max_rows: MaxRowsOpt = None,
    ledger: Annotated[
        Path | None, typer.Option("--ledger", help="Budget ledger, charged before anything is "
                                  "written (tessera ledger init).")
    ] = None,
    label: Annotated[str | None, typer.Option("--label", help="Name of the charge.")] = None,
    record: Annotated[
        Path | None, typer.Option("--record", help="Write the run record (JSON): privacy "
                                  "spent, parameters, timings, width.")
    ] = None,
    seed: SeedOpt = None,
    on_invalid: OnInvalidOpt = "error",
    extra_columns: ExtraColumnsOpt = "error",
    no_header: NoHeaderOpt = False,
    delimiter: DelimiterOpt = None,
    na: NaOpt = None,
    skip_rows: SkipRowsOpt = 0,
    table: TableOpt = None,
    engine: EngineOpt = "duckdb",
    spark_master: SparkMasterOpt = "local[*]",
) -> None:
    """Private synthetic rows for WORKLOAD (default: the schema's 2-way marginals) from DATA
    under a budget, in the schema's values."""
    from tessera.release.answering import answer
    from tessera.release.budget import Budget
    from tessera.release.ledger import Ledger
    from tessera.schema.domain import Domain
    from tessera.synth.defaults import default_notes
    from tessera.synth.synthesizer import Synthesizer
    from tessera.workload.workload import Workload

    check_policies(on_invalid, extra_columns)
    budget = Budget.of(epsilon=epsilon, delta=delta, rho=rho, mu=mu)
    unit = privacy_unit(privacy_id, max_rows)
    domain = Domain.load(schema)
    w = Workload.load(workload, domain) if workload is not None else None  # None: the default
    options: dict[str, Any] = {k: v for k, v in (("rows", rows), ("rounds", rounds))
                               if v is not None}
    if uniform_columns:
        options["uniform_columns"] = True
    if method == "lp" and rounds is not None:
        fail("--rounds is for ipmwu and mwem (the LP runs to its certified gap)")
    synthesizer = Synthesizer(method, **options)  # unknown methods refused before any charge
    book = Ledger.open(ledger) if ledger is not None else None
    start = time.monotonic()
    with _progress(method) as show:
        fitted = synthesizer.fit(
            data_source(data, engine, spark_master), w, budget, neighbours=neighbours,
            unit=unit, ledger=book, label=label or f"synthetic data ({method}): "
            f"{workload.stem if workload is not None else 'default workload'}", domain=domain,
            seed=seed, csv=csv_options(no_header, delimiter, na, skip_rows), table=table,
            on_invalid=on_invalid, extra_columns=extra_columns, progress=show, output=output,
            record=record,
            answer=answer)  # type: ignore[arg-type]
    for note in default_notes(fitted.notes):  # the workload the user did not give
        info.print(note, markup=False, highlight=False, soft_wrap=True)
    _report(fitted, time.monotonic() - start, output)
    if record is not None:
        out.print(f"record: {record} (the run's schedule, rounds, parameters and every "
                  "mechanism)", markup=False)


#: Seconds between two plain progress lines when stderr is not a terminal (logs, CI, nohup).
PLAIN_EVERY = 5.0

#: What each step of a run is called on stderr (tessera.synth.progress.STEPS).
STEP_WORDS = {"counting": "reading the data", "setup": "setup (first measurements and fit)",
              "final fit": "final fit (the model refitted to every measurement)",
              "sampling": "sampling the rows"}


@contextlib.contextmanager
def _progress(method: str) -> Iterator[Callable[[Any], None]]:
    """What a run reports at every step (a :class:`tessera.synth.progress.ProgressEvent`): on a
    terminal a progress bar — the step, the budget spent, the estimated error or the LP's gap —
    whose spinner and clock keep moving through long steps (the final fit, the sampling); else
    plain lines on stderr (:class:`_PlainProgress`), so a run in a log is never silent."""
    if not info.is_terminal or info.quiet:
        plain = _PlainProgress(method)
        with plain.running():
            yield plain
        return
    start = time.monotonic()
    with Progress(_Spinner(), TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.fields[step]}"), TextColumn("{task.fields[info]}"),
                  _Clock(start), console=info, transient=True) as bar:
        task = bar.add_task(f"starting ({method})", total=None, step="", info="")

        def show(p: Any) -> None:
            if p.step == "iteration":  # a column-generation iteration of the LP
                it = p.detail
                if it is not None:
                    bar.update(task, description=f"LP iteration {it.iteration}",
                               step=f"{it.columns} columns", info=_lp_gap(it))
            elif p.step == "round" and p.spent is not None and p.budget:  # fills with budget
                left = "" if p.remaining is None else f"budget left {p.remaining:.4g}, "
                bar.update(task, description=_round_text(p), completed=p.spent / p.budget,
                           total=1.0, step="", info=f"{left}est. error {p.error:.3g}")
            elif p.step == "round":  # a replay spends nothing: the bar counts rounds
                bar.update(task, description=_round_text(p), completed=p.round,
                           total=p.rounds, step="", info=f"est. error {p.error:.3g}")
            elif p.phase == "start":  # a step of its own: the spinner and the clock run on
                bar.update(task, description=STEP_WORDS.get(p.step, p.step), step="",
                           info="" if p.rows is None else f"{p.rows:,} rows")

        yield show


class _Spinner(SpinnerColumn):
    """A spinner that keeps turning after the bar is full (the budget spent, the run not
    done): rich's stops on a finished task."""

    def render(self, task: Task) -> RenderableType:
        return self.spinner.render(time.monotonic())


class _Clock(ProgressColumn):
    """Time since the run started (rich's elapsed column freezes once the bar is full)."""

    def __init__(self, start: float) -> None:
        super().__init__()
        self.start = start

    def render(self, task: Task) -> RenderableType:
        return Text(_clock(time.monotonic() - self.start), style="progress.elapsed")


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}"


class _PlainProgress:
    """Plain progress lines on stderr: ``synth: started``, a line as each step starts (reading
    the data, the setup, the final fit, the sampling) and as the LP's iterations or the rounds
    go (at most one per :data:`PLAIN_EVERY` seconds), a line every :data:`PLAIN_EVERY` seconds
    while one step runs on (a heartbeat thread: a long final fit reports too), and ``synth:
    done`` — each with the seconds elapsed."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.start = self.last = time.monotonic()
        self.state = "starting"
        self.lock = threading.Lock()

    def line(self, text: str) -> None:
        with self.lock:
            now = time.monotonic()
            self.last = now
            info.print(f"synth: {text}, elapsed {now - self.start:.0f} s", markup=False,
                      highlight=False, soft_wrap=True)

    def __call__(self, p: Any) -> None:
        if p.step in ("round", "iteration"):
            self.state = _event_text(p)
            if time.monotonic() - self.last >= PLAIN_EVERY:
                self.line(self.state)
        elif p.phase == "start":
            self.state = STEP_WORDS.get(p.step, p.step) + (
                "" if p.rows is None else f", {p.rows:,} rows")
            self.line(self.state)
            self.state += f" (since {time.monotonic() - self.start:.0f} s)"

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        info.print(f"synth: started ({self.method})", markup=False, highlight=False,
                  soft_wrap=True)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(max(PLAIN_EVERY / 4, 0.05)):
                if time.monotonic() - self.last >= PLAIN_EVERY:
                    self.line(self.state)

        heart = threading.Thread(target=beat, name="synth-progress", daemon=True)
        heart.start()
        try:
            yield
        finally:
            stop.set()
            heart.join()
        self.line("done")


def _round_text(p: Any) -> str:
    """"round t/T", or "round t/≤T" while T is an upper bound (the run may stop earlier)."""
    return f"round {p.round}/{'≤' if p.rounds_bound else ''}{p.rounds}"


def _lp_gap(it: Any) -> str:
    return f"α {it.alpha:.4g}, gap {max(it.alpha - it.lower_bound, 0.0):.3g}"


def _event_text(p: Any) -> str:
    """One round (or LP iteration) in words: where the run is and what it has spent."""
    if p.step == "iteration":
        it = p.detail
        return f"LP iteration {it.iteration}, {it.columns} columns, {_lp_gap(it)}"
    text = _round_text(p)
    if p.spent is not None and p.budget:
        text += f", spent {p.spent:.4g} of {p.budget:.4g} ({100 * p.spent / p.budget:.0f} %)"
    return text + ("" if p.error is None else f", est. error {p.error:.3g}")


def looks_like_run_record(path: Path) -> bool:
    """Whether ``path`` holds a synthesis run record (else: a release certificate)."""
    import json

    from tessera.synth.verify import is_run_record

    try:
        return is_run_record(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError):
        return False


def verify_run(path: Path, workload: Path, schema: Path) -> None:
    """``tessera verify run.json WORKLOAD --schema S``: re-prove the run's spend from its
    record (:func:`tessera.synth.verify.verify_record`)."""
    from tessera.release.certificate import verify_certificate
    from tessera.schema.domain import Domain
    from tessera.synth.verify import read_record, verify_record
    from tessera.workload.workload import Workload

    doc = read_record(path)
    result = verify_record(doc, Workload.load(workload, Domain.load(schema)),
                           verify_certificate=verify_certificate)
    if not result.ok:
        raise TesseraError(
            f"{path}: the run record does NOT check out ({len(result.differences)} "
            "difference(s)):\n" + "\n".join(f"  {d}" for d in result.differences[:20])
            + (f"\n  … and {len(result.differences) - 20} more"
               if len(result.differences) > 20 else ""))
    what = (f"{result.steps:,} mechanisms re-proved" if doc["method"] != "lp"
            else "its release certificate verified")
    if isinstance(doc.get("answers"), dict):  # tessera answer --estimate adaptive
        what += (f"; {doc['answers'].get('queries')} answers read from its fitted model "
                 "(model estimates, no proven interval)")
    out.print(f"{path}: verified — {doc['method']} run, {what}; spent "
              f"{_spent_text(doc['spent'])} (workload sha256 "
              f"{doc['workload']['sha256'][:12]}…)", markup=False)


def _spent_text(spent: list[dict[str, Any]]) -> str:
    first = spent[0] if spent else {}
    return ", ".join(f"{k} = {first[k]:.6g}" for k in ("epsilon", "delta", "rho")
                     if k in first) or "nothing"


def _report(fitted: FittedSynthesizer, seconds: float, output: Path) -> None:
    """The run in a person's terms (:func:`tessera.synth.record.summary`: method, budget and
    spend, what the rows are fitted to, rows written, time); its internals (schedule, rounds,
    parameters, model size: :meth:`FittedSynthesizer.describe`) are in the run record, and
    logged at INFO (``tessera -v synth …``)."""
    import logging

    from tessera.synth.record import summary

    if not fitted.private:
        err.print("[bold red]NOT PRIVATE[/]: seeded test randomness (--seed); never publish")
    out.print(summary(fitted, seconds, output), markup=False, highlight=False)
    log = logging.getLogger(__name__)
    for line in fitted.describe().splitlines():
        log.info("run: %s", line)
    c = fitted.charge
    if c is not None:
        out.print(f"ledger: charged before the run; spent {spent_text(c)} (rounded up; "
                  f"{c.status})", markup=False)


@user_errors
def evaluate(
    data: DataArg,
    synthetic: Annotated[
        Path, typer.Argument(help="Synthetic rows (CSV or Parquet, as tessera synth writes "
                             "them).", metavar="SYNTH", exists=True, dir_okay=False)
    ],
    schema: SchemaOpt,
    workload: Annotated[
        Path | None,
        typer.Argument(help="Workload file (one WHERE clause per line, or YAML/JSON). Default: "
                            "the workload tessera synth fits without one (every 2-way marginal "
                            "of the schema, or every 1-way marginal when those do not fit the "
                            "engine's limits).",
                       metavar="WORKLOAD", exists=True, dir_okay=False)
    ] = None,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a PNG: sorted per-query errors and "
                                  "per-family L1 distances.")
    ] = None,
    top: Annotated[int, typer.Option("--top", help="Worst queries (and families) listed.")] = 20,
    as_json: JsonOpt = False,
    on_invalid: OnInvalidOpt = "error",
    extra_columns: ExtraColumnsOpt = "error",
    no_header: NoHeaderOpt = False,
    delimiter: DelimiterOpt = None,
    na: NaOpt = None,
    skip_rows: SkipRowsOpt = 0,
    table: TableOpt = None,
    engine: EngineOpt = "duckdb",
    spark_master: SparkMasterOpt = "local[*]",
) -> None:
    """Errors of SYNTH against DATA on WORKLOAD: max, mean, per query, per family. NOT PRIVATE."""
    import json

    from tessera.data.counts import NOT_PRIVATE
    from tessera.schema.domain import Domain
    from tessera.synth.evaluate import evaluate as evaluate_rows
    from tessera.workload.workload import Workload

    check_policies(on_invalid, extra_columns)
    if plot is not None:  # before counting: the figure needs the plot extra
        from tessera.software import require
        from tessera.synth.evaluate import PLOT_PURPOSE

        require("matplotlib", "plot", PLOT_PURPOSE)
    domain = Domain.load(schema)
    w = Workload.load(workload, domain) if workload is not None else domain  # the default
    what = f"{w.n_queries:,} queries" if isinstance(w, Workload) else "the default workload"
    with info.status(f"counting {what} on both tables…", spinner="dots"):
        result = evaluate_rows(data_source(data, engine, spark_master), synthetic, w,
                               csv=csv_options(no_header, delimiter, na, skip_rows),
                               table=table, on_invalid=on_invalid,  # type: ignore[arg-type]
                               extra_columns=extra_columns)  # type: ignore[arg-type]
    err.print(f"[bold red]{NOT_PRIVATE}[/] (errors against the real data)")
    if plot is not None:
        info.print(f"plot: {result.plot(plot)}")
    if as_json:
        out.print_json(json.dumps(result.to_dict()))
        return
    out.print(result.describe(), markup=False, highlight=False)  # the NOT PRIVATE line first
    out.print(f"worst {min(top, result.workload.n_queries)} queries:", markup=False)
    out.print(result.worst(top).to_string(index=False), markup=False, highlight=False)
    families = sorted(result.family_l1.items(), key=lambda kv: -kv[1])[:top]
    if families:
        out.print(f"L1 distance per family (worst {len(families)}):", markup=False)
        for name, value in families:
            out.print(f"  {value:.6g}  {name}", markup=False, highlight=False)
