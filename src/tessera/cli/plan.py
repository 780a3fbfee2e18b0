"""``tessera plan``: which strategy a release would measure and its expected error, before any
data is read; with ``--target-error`` the smallest budget that meets it (docs/theory.md §10)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from tessera.cli.common import (
    Command,
    CountOpt,
    DeltaOpt,
    JsonOpt,
    MaxRowsOpt,
    NeighboursOpt,
    PrivacyIdOpt,
    RhoOpt,
    SchemaOpt,
    TimeLimitOpt,
    WorkloadArg,
    out,
    privacy_unit,
    user_errors,
)

#: Queries listed on the terminal.
MAX_PRINTED = 20


def register(app: typer.Typer) -> None:
    app.command("plan", cls=Command)(plan)


@user_errors
def plan(
    workload: WorkloadArg,
    schema: SchemaOpt,
    epsilon: Annotated[
        float | None, typer.Option("--epsilon", "-e", help="Pure ε-DP, or (ε,δ) with --delta.")
    ] = None,
    delta: DeltaOpt = None,
    rho: RhoOpt = None,
    mu: Annotated[float | None, typer.Option("--mu", help="μ-GDP target.")] = None,
    neighbours: NeighboursOpt = "add-remove",
    privacy_id: PrivacyIdOpt = None,
    max_rows: MaxRowsOpt = None,
    count: CountOpt = None,
    strategy: Annotated[
        str, typer.Option("--strategy", help="auto, direct, identity, residual, hierarchical.")
    ] = "auto",
    objective: Annotated[
        str, typer.Option("--objective", help="total (RMSE over the queries) or max.")
    ] = "total",
    target_error: Annotated[
        float | None, typer.Option("--target-error", help="Expected error wanted (RMSE, in "
                                   "counts): print the smallest budget that meets it.")
    ] = None,
    time_limit: TimeLimitOpt = 60.0,
    as_json: JsonOpt = False,
) -> None:
    """Expected error of answering WORKLOAD under a budget (no data): every candidate strategy,
    the chosen one, per-query RMSE and 95% half-width."""
    from tessera.release.budget import Budget
    from tessera.release.planning import plan_release
    from tessera.schema.domain import Domain
    from tessera.workload.workload import Workload

    budget = Budget.of(epsilon=epsilon, delta=delta, rho=rho, mu=mu)
    unit = privacy_unit(privacy_id, max_rows, count)
    result = plan_release(Workload.load(workload, Domain.load(schema)), budget,
                          neighbours=neighbours, strategy=strategy, objective=objective,
                          target_error=target_error, time_limit=time_limit, unit=unit)
    if as_json:
        out.print_json(json.dumps(result.to_dict()))
        return
    out.print(f"budget: {budget.text()}, {unit.label(result.neighbours)} neighbours",
              markup=False)
    if result.person_costs is not None:
        _print_person_costs(result)
    table = Table("strategy", "measured", "γ_w", "expected RMSE", "max RMSE", "Σ w·Var",
                  title="candidates (expected error, no data)")
    for row in result.choice.table():
        mark = " ← chosen" if row["chosen"] else ""
        table.add_row(row["strategy"] + mark, f"{row['measured_queries']:,}",
                      f"{row['gamma_w']:.6g}" + ("" if row["gamma_w_exact"] else " (bound)"),
                      f"{row['rmse']:.4g}", f"{row['expected_max'] ** 0.5:.4g}",
                      f"{row['expected_total']:.6g}")
    out.print(table)
    chosen = result.choice.chosen
    out.print(f"chosen: {chosen.name}; expected error ({result.choice.objective}) "
              f"{result.error:.4g}; 95% half-width ≈ {1.96 * result.error:.4g}", markup=False)
    names = chosen.workload.all_names()
    for r, h, _ in zip(result.rmse[:MAX_PRINTED], result.halfwidths, range(MAX_PRINTED)):
        out.print(f"  {next(names)}: RMSE {r:.4g}, 95% ±{h:.4g}", markup=False,
                  highlight=False)
    if chosen.workload.n_queries > MAX_PRINTED:
        out.print(f"  … {chosen.workload.n_queries - MAX_PRINTED:,} more (--json lists them)",
                  markup=False)
    if result.needed is not None:
        out.print(f"smallest budget for expected error {result.target_error:g}: "
                  f"{result.needed.text()}", markup=False)


def _print_person_costs(result: object) -> None:
    """Both of a person's costs (rows and people), and which one the plan uses."""
    from tessera.release.planning import ReleasePlan

    assert isinstance(result, ReleasePlan) and result.person_costs is not None
    k = result.unit.max_rows
    rows = "row" if k == 1 else "rows"
    for kind, r, what in (
            ("rows", result.person_costs.rows, f"each query counts a person's kept rows: {k} × "
             "a row's γ_w"),
            ("people", result.person_costs.people, "each query counts distinct people, a "
             f"person at most once: the coverage of {k} {rows}")):
        mark = " ← this plan" if kind == result.unit.count else ""
        out.print(f"  a person costs (--count {kind}): γ_w = {r.bound:.6g} "
                  f"({'exact' if r.exact else 'upper bound'}) — {what}{mark}", markup=False,
                  highlight=False)
    out.print("  (rows and people are different counts: choose with --count; the noise of "
              "every query grows with γ_w)", markup=False, highlight=False)
