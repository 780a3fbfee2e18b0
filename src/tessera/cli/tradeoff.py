"""``tessera tradeoff``: composed-under-overlap vs sequential trade-off curves (docs/theory.md §3).

t identical queries, each answered by one noise mechanism, with maximum overlap ≤ γ: by Thm 6
the release is f^{⊗γ}-DP instead of f^{⊗t} (sequential composition). Prints both guarantees
(GDP / pure ε where they are exact, and ε at δ) and draws both curves.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tessera.cli.common import Command, NeighboursOpt, TimeLimitOpt, out, user_errors
from tessera.errors import TesseraError

if TYPE_CHECKING:
    from tessera.calibration.comparison import CompositionComparison


class MechanismName(StrEnum):
    gaussian = "gaussian"
    laplace = "laplace"
    discrete_laplace = "discrete_laplace"
    discrete_gaussian = "discrete_gaussian"


def register(app: typer.Typer) -> None:
    app.command("tradeoff", cls=Command)(tradeoff)


@user_errors
def tradeoff(
    queries: Annotated[
        int | None, typer.Option("--queries", "-t", help="Number of queries t (or --workload).")
    ] = None,
    workload: Annotated[
        Path | None,
        typer.Option(
            "--workload",
            "-w",
            help="Workload file: t and γ are computed from it (γ exact or a proven upper bound).",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    schema: Annotated[
        Path | None,
        typer.Option("--schema", "-s", help="Schema of --workload.", exists=True, dir_okay=False),
    ] = None,
    time_limit: TimeLimitOpt = 60.0,
    mechanism: Annotated[
        MechanismName, typer.Option("--mechanism", "-m", help="Noise mechanism of every query.")
    ] = MechanismName.gaussian,
    mu: Annotated[
        float | None, typer.Option("--mu", help="Per-query μ (Gaussian: σ = 1/μ).")
    ] = None,
    epsilon: Annotated[
        float | None, typer.Option("--epsilon", "-e", help="Per-query ε (Laplace: scale = 1/ε).")
    ] = None,
    scale: Annotated[
        float | None,
        typer.Option(
            "--scale", help="Noise scale (Laplace b or Gaussian σ) instead of --mu/--epsilon."
        ),
    ] = None,
    overlap: Annotated[
        float | None,
        typer.Option("--overlap", "-g", help="Upper bound on the maximum overlap γ (default: t)."),
    ] = None,
    delta: Annotated[float, typer.Option("--delta", help="δ at which ε is reported.")] = 1e-6,
    neighbours: NeighboursOpt = "add-remove",
    clt: Annotated[
        bool,
        typer.Option("--clt", help="Also draw the CLT approximation (labelled; not a guarantee)."),
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="PNG file for the curves.")
    ] = None,
) -> None:
    """Draw composed-under-overlap vs sequential trade-off curves and print both guarantees.

    Example: `tessera tradeoff -t 100 -g 5 --mu 0.3 -o curves.png` (100 Gaussian queries,
    a row touches ≤ 5), or `tessera tradeoff -w W --schema S -m laplace -e 0.1`.
    """
    from tessera.calibration.comparison import (
        compare_composition,
        overlap_counts,
        per_query_parameter,
        plot_comparison,
    )

    if output is not None:  # before any work: the figure needs the plot extra
        from tessera.accounting.plot import PURPOSE
        from tessera.software import require

        require("matplotlib", "plot", f"{PURPOSE} (tessera tradeoff -o)")
    changed: int | None = None  # queries one neighbour change touches, from the workload
    # the overlap figure is exact only when computed exactly; a γ given by the user, or a
    # search stopped by its time limit, is an upper bound and the guarantee says so
    overlap_exact = overlap is None
    if workload is not None:
        from tessera.schema.domain import Domain
        from tessera.workload.workload import Workload

        if schema is None:
            raise TesseraError("--workload needs --schema")
        if queries is not None or overlap is not None:
            raise TesseraError("--workload computes t and γ: drop --queries/--overlap")
        counts = overlap_counts(
            Workload.load(workload, Domain.load(schema)), neighbours, time_limit
        )
        queries, overlap, changed = counts.queries, counts.gamma, counts.changed
        overlap_exact = counts.exact
    if queries is None:
        raise TesseraError(
            "give --queries t (and --overlap γ), or --workload with --schema",
            hint="e.g. tessera tradeoff --queries 100 --overlap 5 --mu 0.3 -o curves.png",
        )
    param = per_query_parameter(mechanism.value, mu=mu, epsilon=epsilon, scale=scale)
    cmp = compare_composition(
        mechanism.value, param, queries, overlap, neighbours=neighbours, delta=delta,
        changed=changed, overlap_exact=overlap_exact,
    )
    _print_comparison(cmp)
    if output is not None:
        out.print(f"wrote {plot_comparison(cmp, param, output, clt=clt)}")


def _print_comparison(cmp: CompositionComparison) -> None:
    """t and γ, then each side's headline guarantee and its conversions, and the utility gain."""
    out.print(
        f"{cmp.queries} queries × {cmp.per_query.describe()}, overlap γ ≤ {cmp.gamma:g} "
        f"({cmp.neighbours.label}: {cmp.overlap.copies} queries per neighbour change)"
    )
    for side in (cmp.overlap, cmp.sequential):
        first, *rest = side.guarantees
        out.print(f"{side.name:>10}: {first.text()}", markup=False, highlight=False)
        for g in rest:
            out.print(f"{'':>10}  ⇒ {g.text()}", markup=False, highlight=False)
    out.print(f"utility gain U (noise scale vs sequential at the same target): "
              f"{cmp.utility_gain:.3f}")

