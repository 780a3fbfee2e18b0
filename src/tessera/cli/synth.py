"""``tessera synth`` and ``tessera evaluate``: private synthetic data from a workload, and its
errors against the real data (docs/theory.md §5, §6, §9)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from tessera.cli.common import (
    Command,
    DataArg,
    DelimiterOpt,
    DeltaOpt,
    EngineOpt,
    JsonOpt,
    NaOpt,
    NeighboursOpt,
    NoHeaderOpt,
    OnInvalidOpt,
    RhoOpt,
    SchemaOpt,
    SeedOpt,
    SkipRowsOpt,
    SparkMasterOpt,
    TableOpt,
    WorkloadArg,
    csv_options,
    data_source,
    err,
    fail,
    out,
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


@user_errors
def synth(
    data: DataArg,
    workload: WorkloadArg,
    schema: SchemaOpt,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Synthetic rows: .csv or .parquet.")
    ],
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
    neighbours: NeighboursOpt = DEFAULT_NEIGHBOURS.value,
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
    no_header: NoHeaderOpt = False,
    delimiter: DelimiterOpt = None,
    na: NaOpt = None,
    skip_rows: SkipRowsOpt = 0,
    table: TableOpt = None,
    engine: EngineOpt = "duckdb",
    spark_master: SparkMasterOpt = "local[*]",
) -> None:
    """Private synthetic rows for WORKLOAD from DATA under a budget, in the schema's values."""
    from tessera.release.answering import answer
    from tessera.release.budget import Budget
    from tessera.release.ledger import Ledger
    from tessera.schema.domain import Domain
    from tessera.synth.synthesizer import Synthesizer
    from tessera.workload.workload import Workload

    if on_invalid not in ("error", "drop"):
        fail(f"--on-invalid {on_invalid!r}: use 'error' or 'drop'")
    budget = Budget.of(epsilon=epsilon, delta=delta, rho=rho, mu=mu)
    w = Workload.load(workload, Domain.load(schema))
    options: dict[str, Any] = {k: v for k, v in (("rows", rows), ("rounds", rounds))
                               if v is not None}
    if method == "lp" and rounds is not None:
        fail("--rounds is for ipmwu and mwem (the LP runs to its certified gap)")
    synthesizer = Synthesizer(method, **options)  # unknown methods refused before any charge
    book = Ledger.open(ledger) if ledger is not None else None
    start = time.monotonic()
    with _progress() as show:
        fitted = synthesizer.fit(
            data_source(data, engine, spark_master), w, budget, neighbours=neighbours,
            ledger=book, label=label or f"synthetic data ({method}): {workload.stem}",
            seed=seed, csv=csv_options(no_header, delimiter, na, skip_rows), table=table,
            on_invalid=on_invalid, progress=show, output=output, record=record,
            answer=answer)  # type: ignore[arg-type]
    _report(fitted, time.monotonic() - start, output)
    if record is not None:
        out.print(f"record: {record} (the run's schedule, rounds, parameters and every "
                  "mechanism)", markup=False)


#: Seconds between two plain progress lines when stderr is not a terminal (logs, CI, nohup).
PLAIN_EVERY = 5.0


@contextlib.contextmanager
def _progress() -> Iterator[Callable[[Any], None]]:
    """What a run reports after every round: a progress bar on a terminal (round, budget left,
    estimated error; the LP's gap), else one plain line every :data:`PLAIN_EVERY` seconds on
    stderr — round, budget spent, elapsed — so a long run in a log is never silent."""
    start = time.monotonic()
    if not err.is_terminal:
        last = [start]

        def plain(p: Any) -> None:
            now = time.monotonic()
            if now - last[0] >= PLAIN_EVERY:
                last[0] = now
                err.print(f"synth: {_step_text(p)}, elapsed {now - start:.0f} s",
                          markup=False, highlight=False, soft_wrap=True)

        yield plain
        return
    with Progress(TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.fields[step]}"), TextColumn("{task.fields[info]}"),
                  TimeElapsedColumn(), console=err, transient=True) as bar:
        task = bar.add_task("setting up", total=None, step="", info="")

        def show(p: Any) -> None:
            if hasattr(p, "iteration"):  # a column-generation iteration of the LP
                bar.update(task, description=f"LP iteration {p.iteration}",
                           step=f"{p.columns} columns", info=_step_text(p).split(", ", 2)[-1])
            elif p.spent is not None and p.budget:  # the bar fills with the budget spent
                left = "" if p.remaining is None else f"budget left {p.remaining:.4g}, "
                bar.update(task, description=f"round {p.round}", completed=p.spent / p.budget,
                           total=1.0, step="", info=f"{left}est. error {p.error:.3g}")
            else:  # a replay spends nothing: the bar counts rounds
                bar.update(task, description=f"round {p.round}/{p.rounds}", completed=p.round,
                           total=p.rounds, step="", info=f"est. error {p.error:.3g}")

        yield show


def _step_text(p: Any) -> str:
    """One round (or LP iteration) in words: where the run is and what it has spent."""
    if hasattr(p, "iteration"):
        gap = max(p.alpha - p.lower_bound, 0.0)
        return (f"LP iteration {p.iteration}, {p.columns} columns, α {p.alpha:.4g}, "
                f"gap {gap:.3g}")
    text = f"round {p.round}/{p.rounds}"
    if p.spent is not None and p.budget:
        text += f", spent {p.spent:.4g} of {p.budget:.4g} ({100 * p.spent / p.budget:.0f} %)"
    return text + f", est. error {p.error:.3g}"


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
    spend, what the rows are fitted to, rows written, time); its internals are in the run
    record."""
    from tessera.synth.record import summary

    if not fitted.private:
        err.print("[bold red]NOT PRIVATE[/]: seeded test randomness (--seed); never publish")
    out.print(summary(fitted, seconds, output), markup=False, highlight=False)
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
    workload: WorkloadArg,
    schema: SchemaOpt,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write a PNG: sorted per-query errors and "
                                  "per-family L1 distances.")
    ] = None,
    top: Annotated[int, typer.Option("--top", help="Worst queries (and families) listed.")] = 20,
    as_json: JsonOpt = False,
    on_invalid: OnInvalidOpt = "error",
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

    if on_invalid not in ("error", "drop"):
        fail(f"--on-invalid {on_invalid!r}: use 'error' or 'drop'")
    w = Workload.load(workload, Domain.load(schema))
    with err.status(f"counting {w.n_queries:,} queries on both tables…", spinner="dots"):
        result = evaluate_rows(data_source(data, engine, spark_master), synthetic, w,
                               csv=csv_options(no_header, delimiter, na, skip_rows),
                               table=table, on_invalid=on_invalid)  # type: ignore[arg-type]
    err.print(f"[bold red]{NOT_PRIVATE}[/] (errors against the real data)")
    if plot is not None:
        err.print(f"plot: {result.plot(plot)}")
    if as_json:
        out.print_json(json.dumps(result.to_dict()))
        return
    out.print(result.describe(), markup=False, highlight=False)  # the NOT PRIVATE line first
    out.print(f"worst {min(top, w.n_queries)} queries:", markup=False)
    out.print(result.worst(top).to_string(index=False), markup=False, highlight=False)
    families = sorted(result.family_l1.items(), key=lambda kv: -kv[1])[:top]
    if families:
        out.print(f"L1 distance per family (worst {len(families)}):", markup=False)
        for name, value in families:
            out.print(f"  {value:.6g}  {name}", markup=False, highlight=False)
