"""``tessera overlap``: maximum overlap γ / γ_w of a workload (docs/theory.md §3)."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from tessera.cli.common import (
    Command,
    JsonOpt,
    NeighboursOpt,
    SchemaOpt,
    TimeLimitOpt,
    WorkloadArg,
    info,
    out,
    user_errors,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tessera.calibration.cost import WorkloadCost


def register(app: typer.Typer) -> None:
    app.command("overlap", cls=Command)(overlap)


@user_errors
def overlap(
    workload: WorkloadArg,
    schema: SchemaOpt,
    definition: Annotated[
        str,
        typer.Option(
            "--definition", help="Composition: pure (Σw), gdp (√Σw²), zcdp (Σw²)."
        ),
    ] = "pure",
    neighbours: NeighboursOpt = "add-remove",
    time_limit: TimeLimitOpt = 60.0,
    method: Annotated[
        str,
        typer.Option(
            "--method",
            help="auto, sweep, branch-bound, mini-bucket, toulbar2, enumerate, engine, colouring, "
            "split.",
        ),
    ] = "auto",
    budget: Annotated[
        float | None,
        typer.Option("--budget", help="Total ε / μ / ρ: print the per-query noise scales."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Maximum overlap γ(Q) and weighted γ_w(Q), with the witness row and its queries."""
    from tessera.calibration.cost import workload_cost
    from tessera.schema.domain import Domain
    from tessera.workload.workload import Workload

    wl = Workload.load(workload, Domain.load(schema))
    # a spinner on a terminal: the search can take seconds on large workloads
    with info.status(f"maximum overlap of {wl.n_queries:,} queries…", spinner="dots"):
        cost = workload_cost(wl, definition=definition, neighbours=neighbours,
                             time_limit=time_limit, method=method)
    if as_json:
        out.print_json(json.dumps(cost.to_dict(budget)))
        return
    scales = None if budget is None else cost.scales(budget)  # a bad budget: before any output
    _print_cost(cost, f"maximum overlap of {workload} ({wl.n_queries:,} queries)")
    if budget is not None and scales is not None:
        _print_scales(cost, budget, scales)


def _print_cost(cost: WorkloadCost, title: str) -> None:
    """γ(Q), γ_w(Q) and what they compare to, the guarantee, and the witness with its queries."""
    weighted, unit = cost.weighted, cost.unweighted

    def status(r: object) -> str:
        return "exact" if r.exact else "upper bound"  # type: ignore[attr-defined]

    table = Table(title=title)
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_column("status")
    # γ(Q) is a count of queries; under gdp the calibration value is √γ (shown below)
    table.add_row("γ(Q) (queries one row touches)", f"{unit.score_bound:.6g}", status(unit))
    table.add_row("γ_w(Q) (workload weights)", f"{weighted.bound:.6g}", status(weighted))
    table.add_row("sequential comp(Q)", f"{weighted.sequential:.6g}", "")
    table.add_row("utility gain (noise scale vs sequential)", f"{weighted.utility_gain:.3f}", "")
    if not weighted.exact:
        table.add_row("witness attains", f"{weighted.achieved:.6g}", "lower bound")
    table.add_row("method", weighted.method, "")
    out.print(table)
    out.print(
        f"guarantee: {cost.guarantee_label}; calibrate with γ_w = {weighted.bound:.6g} "
        f"({status(weighted)})"
    )
    for note in weighted.notes:
        out.print(f"note: {note}")
    row = cost.witness_row()
    if row is not None:
        out.print("witness row: " + ", ".join(f"{a}={v}" for a, v in row.items()))
        row_y = cost.witness_row(substituted=True)
        if row_y is not None:
            out.print("substituted by: " + ", ".join(f"{a}={v}" for a, v in row_y.items()))
        touched = cost.witness_queries()
        out.print(f"queries it touches ({len(touched)}):")
        for name in touched:
            out.print(f"  {name}")


def _print_scales(cost: WorkloadCost, budget: float, scales: npt.NDArray[np.float64]) -> None:
    """The per-query noise for ``budget``: one row per query, its weight and its scale."""
    from tessera.calibration.cost import BUDGET_SYMBOL, SCALE_NAME

    wl = cost.workload
    symbol = BUDGET_SYMBOL[cost.definition]
    table = Table(title=f"per-query noise for {symbol} = {budget:g} ({cost.guarantee_label})")
    table.add_column("query")
    table.add_column("weight", justify="right")
    table.add_column(SCALE_NAME[cost.definition], justify="right")
    for n, w, v in zip(wl.names, wl.weights, scales):
        table.add_row(n, f"{w:g}", "not released" if not math.isfinite(v) else f"{v:.6g}")
    out.print(table)
