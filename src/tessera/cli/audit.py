"""``tessera audit``: statistical privacy audits of Tessera's mechanisms (docs/security.md).

Prints the audit table of :func:`tessera.audit.run.audit_table`: for every mechanism, the ε it
claims (with δ for the discrete Gaussian's (ε, δ) profile), a lower bound on its true ε measured
from many runs on a worst-case pair of neighbouring data sets (99% confidence), how close that
comes to the claim, and the output event that gave it. Exits 1 if an honest mechanism's lower
bound exceeds its claim (a privacy bug). ``--planted`` adds deliberately buggy mechanisms, which
the audit must catch.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from tessera.cli.common import Command, JsonOpt, info, out, user_errors

if TYPE_CHECKING:
    from tessera.audit.run import AuditRow

TITLE = "privacy audit: measured lower bound on ε vs the claim (99% confidence, Clopper–Pearson)"


def register(app: typer.Typer) -> None:
    app.command("audit", cls=Command)(audit)


@user_errors
def audit(
    trials: Annotated[
        int, typer.Option("--trials", help="Runs per data set (vectorised mechanisms).")
    ] = 200_000,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of the reproducible (NOT PRIVATE) samplers.")
    ] = 0,
    secure: Annotated[
        bool, typer.Option("--secure", help="Draw from OpenDP's secure sampler instead "
                           "(not reproducible; slower for the selections).")
    ] = False,
    planted: Annotated[
        bool, typer.Option("--planted", help="Also audit planted bugs (they must be caught).")
    ] = False,
    end_to_end: Annotated[
        bool, typer.Option("--end-to-end", help="Call each synthesizer once per run "
                           "(trials/40 runs, ~2 ms each) instead of its vectorised round.")
    ] = False,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every column (event, runs) in one wide table.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Measure lower bounds on every mechanism's ε and compare them with its claim."""
    from tessera.audit.run import audit_table

    with info.status("auditing…", spinner="dots"):
        rows = audit_table(trials, None if secure else seed, planted=planted,
                           end_to_end=end_to_end)
    if as_json:
        import dataclasses
        import json

        doc = [dataclasses.asdict(r) | {"ratio": r.ratio, "violated": r.violated} for r in rows]
        out.print_json(json.dumps(doc))
    else:
        print_audit(rows, out, wide=wide)
        if secure:
            out.print("randomness: OpenDP secure sampler (not reproducible)")
        else:
            out.print(f"randomness: seeded: not private randomness (numpy PCG64, seed {seed}): "
                      "reproducible, the same distributions as OpenDP's samplers; --secure "
                      "audits OpenDP's", markup=False, soft_wrap=wide)
        out.print("a lower bound below the claim does not prove privacy; one above it proves a "
                  "bug (docs/security.md)", markup=False, soft_wrap=wide)
    if any(_failed(r) for r in rows):
        raise typer.Exit(1)


def _failed(r: AuditRow) -> bool:
    """An honest mechanism's claim violated, or a planted bug missed."""
    return r.violated if r.planted is None else not r.violated


def _verdict(r: AuditRow) -> str:
    if r.planted is not None:
        return "[green]bug caught[/]" if r.violated else "[bold red]bug MISSED[/]"
    return "[bold red]VIOLATED[/]" if r.violated else "[green]pass[/]"


def print_audit(rows: Sequence[AuditRow], console: Console, *, wide: bool = False) -> None:
    """The audit table on ``console``. Compact (default): #, mechanism, claimed ε, δ, lower
    bound, ratio and result — 80 columns suffice, names wrap and are never cut — then per row
    a paragraph wrapped at the console's width: event, runs, claim, neighbours. ``wide``: all
    of it in one table (a wide terminal, or a file)."""
    if wide:
        table = Table(title=TITLE)
        for name in ("mechanism", "claimed ε", "δ", "ε lower bound", "lb / ε",
                     "runs per data set", "event", "result"):
            table.add_column(name, justify="left" if name in ("mechanism", "event", "result")
                             else "right")
        for r in rows:
            name = r.mechanism + (f" [bold]PLANTED BUG: {r.planted}[/]" if r.planted else "")
            table.add_row(name, f"{r.claimed_epsilon:.4f}", f"{r.delta:g}" if r.delta else "0",
                          f"{r.epsilon_lb:.4f}", f"{r.ratio:.3f}", f"{r.trials:,}", r.event,
                          _verdict(r))
        console.print(table)
        for r in rows:
            if r.planted is None:
                console.print(f"{r.mechanism}: {r.claim}; neighbours: {r.pair}", markup=False)
        return
    table = Table(title=TITLE, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
                  collapse_padding=True, expand=True)
    table.add_column("#", justify="right")
    table.add_column("mechanism", overflow="fold", ratio=1)
    for name in ("claim ε", "δ", "ε lb", "lb/ε"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("result", no_wrap=True)
    for i, r in enumerate(rows, 1):
        name = r.mechanism + (" [bold]PLANTED[/]" if r.planted else "")  # the bug: below
        table.add_row(str(i), name, f"{r.claimed_epsilon:.4f}", f"{r.delta:g}" if r.delta else "0",
                      f"{r.epsilon_lb:.4f}", f"{r.ratio:.3f}", _verdict(r))
    console.print(table)
    width = max(40, console.width)
    honest = {(r.mechanism, r.claim, r.pair): i for i, r in enumerate(rows, 1) if not r.planted}
    for i, r in enumerate(rows, 1):
        same = honest.get((r.mechanism, r.claim, r.pair))
        if r.planted and same is not None:
            about = f"the claim and neighbours of {same}"
        else:
            about = f"claim: {r.claim}; neighbours: {r.pair}"
        text = (f"{i:>2}. {r.mechanism}" + (f" (PLANTED: {r.planted})" if r.planted else "")
                + f": event {r.event}; {r.trials:,} runs per data set; {about}")
        console.print(textwrap.fill(text, width=width, subsequent_indent="    "),
                      markup=False, highlight=False, soft_wrap=True)
