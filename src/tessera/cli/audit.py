"""``tessera audit``: statistical privacy audits of Tessera's mechanisms (docs/security.md).

Prints the audit table of :func:`tessera.audit.run.audit_table`: for every mechanism, the ε it
claims (with δ for the discrete Gaussian's (ε, δ) profile), a lower bound on its true ε measured
from many runs on a worst-case pair of neighbouring data sets (99% confidence), how close that
comes to the claim, and the output event that gave it. Exits 1 if an honest mechanism's lower
bound exceeds its claim (a privacy bug). ``--planted`` adds deliberately buggy mechanisms, which
the audit must catch.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from tessera.cli.common import Command, err, out, user_errors


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
) -> None:
    """Measure lower bounds on every mechanism's ε and compare them with its claim."""
    from tessera.audit.run import audit_table

    with err.status("auditing…", spinner="dots"):
        rows = audit_table(trials, None if secure else seed, planted=planted,
                           end_to_end=end_to_end)
    table = Table(title="privacy audit: measured lower bound on ε vs the claim "
                        "(99% confidence, Clopper–Pearson)")
    for name in ("mechanism", "claimed ε", "δ", "ε lower bound", "lb / ε", "runs per data set",
                 "event", "result"):
        table.add_column(name, justify="right" if name in ("claimed ε", "δ", "ε lower bound",
                                                           "lb / ε", "runs per data set")
                         else "left")
    bad = False
    for r in rows:
        if r.planted is not None:
            verdict = "[green]bug caught[/]" if r.violated else "[bold red]bug MISSED[/]"
            bad |= not r.violated
        else:
            verdict = "[bold red]VIOLATED[/]" if r.violated else "[green]pass[/]"
            bad |= r.violated
        name = r.mechanism + (f" [bold]PLANTED BUG: {r.planted}[/]" if r.planted else "")
        table.add_row(name, f"{r.claimed_epsilon:.4f}", f"{r.delta:g}" if r.delta else "0",
                      f"{r.epsilon_lb:.4f}", f"{r.ratio:.3f}", f"{r.trials:,}", r.event,
                      verdict)
    out.print(table)
    for r in rows:
        if r.planted is None:
            out.print(f"{r.mechanism}: {r.claim}; neighbours: {r.pair}", markup=False)
    if secure:
        out.print("randomness: OpenDP secure sampler (not reproducible)")
    else:
        out.print(f"randomness: seeded: not private randomness (numpy PCG64, seed {seed}): "
                  "reproducible, the same distributions as OpenDP's samplers; --secure audits "
                  "OpenDP's", markup=False)
    out.print("a lower bound below the claim does not prove privacy; one above it proves a "
              "bug (docs/security.md)", markup=False)
    if bad:
        raise typer.Exit(1)
