"""``tessera demo``: the main job end to end on data the project makes itself."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tessera.cli.common import Command, err, out, user_errors


def register(app: typer.Typer) -> None:
    app.command("demo", cls=Command)(demo)


@user_errors
def demo(
    directory: Annotated[
        Path, typer.Option("--out", help="Directory for the demo's files.")
    ] = Path("tessera-demo"),
    epsilon: Annotated[float, typer.Option("--epsilon", "-e", help="ε of the release.")] = 1.0,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seeded noise for TESTS: NOT PRIVATE.")
    ] = None,
) -> None:
    """Make a synthetic population, answer a workload privately, charge a ledger, and write
    answers, certificate and report."""
    from tessera.release.demo import run_demo

    with err.status("running the demo…", spinner="dots"):
        result = run_demo(directory, epsilon=epsilon, seed=seed)
    r = result.release
    ov = r.plan.overlap
    out.print(f"answered {len(r.workload)} queries at ε = {epsilon:g} (pure ε-DP, add/remove "
              f"one row); maximum overlap γ = {ov.bound:g} ({'exact' if ov.exact else 'bound'}): "
              f"Laplace scale {ov.bound / epsilon:g} per query instead of "
              f"{len(r.workload) / epsilon:g} under sequential composition", markup=False)
    if not r.private:
        err.print("[bold red]NOT PRIVATE[/]: seeded test randomness (--seed)")
    for name, path in (("synthetic data", result.data), ("schema", result.schema),
                       ("workload", result.workload), ("ledger", result.ledger),
                       ("answers", result.answers), ("certificate", result.certificate),
                       ("report", result.report)):
        out.print(f"{name:>15}: {path}", markup=False)
    out.print(f"next: tessera verify {result.certificate} {result.workload} --schema "
              f"{result.schema}", markup=False)
