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
from tessera.errors import TesseraError

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
    from tessera.workload.select import is_aggregate_file

    if is_aggregate_file(workload):
        bad = [flag for flag, on in (("--strategy", strategy != "auto"),
                                     ("--objective", objective != "total"),
                                     ("--target-error", target_error is not None)) if on]
        if bad:
            raise TesseraError(f"{', '.join(bad)} cannot be used with aggregate statements in "
                               "tessera plan", hint="it prints the direct plan of every "
                               "group under each count: drop the option")
        _plan_aggregates(workload, schema, budget, neighbours, unit, time_limit, as_json)
        return
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


def _plan_aggregates(workload: object, schema: object, budget: object, neighbours: str,
                     unit: object, time_limit: float, as_json: bool) -> None:
    """A workload of SELECT statements: the direct plan's noise of every group and aggregate
    (no data), and with a privacy id under both counts — ``rows`` (a person pays K (ε) or K²
    (ρ) times a row) and ``people`` (the coverage of K records, docs/theory.md §3.14) — the
    one ``--count`` chooses marked."""
    from pathlib import Path

    import numpy as np

    from tessera.privacy import PrivacyUnit
    from tessera.release.aggregate_plan import aggregate_plan
    from tessera.release.budget import Budget
    from tessera.schema.domain import Domain
    from tessera.workload.select import read_aggregates

    assert isinstance(budget, Budget) and isinstance(unit, PrivacyUnit)
    w = read_aggregates(Path(str(workload)), Domain.load(Path(str(schema))))
    units = ([unit] if unit.is_row else
             [PrivacyUnit(unit.id_column, unit.max_rows, c) for c in ("rows", "people")])
    plans = {u.count: aggregate_plan(w, budget, neighbours=neighbours, unit=u,
                                     time_limit=time_limit) for u in units}
    labels = w.labels()
    # a measure's noise in the answer's units (its sums are calibrated in units of 10^e)
    shown = {c: np.array([float(s) * float(10.0 ** lq.exponent) if lq.is_measure else float(s)
                          for s, lq in zip(p.scales, p.linear)]) for c, p in plans.items()}
    if as_json:
        doc = {"budget": budget.to_dict(), "neighbours": plans[unit.count].neighbours.value,
               "privacy_unit": None if unit.is_row else unit.to_dict(),
               "mechanism": plans[unit.count].mechanism,
               "plans": {c: {"spent": p.spent.bound, "exact": p.spent.exact,
                             "scales": [float(x) for x in shown[c]],
                             "bounds": [int(b) for b in p.bounds]}
                         for c, p in plans.items()},
               "linear_queries": [{"statement": st, "group": g, "aggregate": a, "role": r}
                                  for st, g, a, r in labels]}
        out.print_json(json.dumps(doc))
        return
    first = plans[unit.count]
    out.print(f"budget: {budget.text()}, {unit.label(first.neighbours)} neighbours",
              markup=False)
    note = ("" if "rows" not in plans else " (counting rows, tessera answer's --strategy auto "
            "may measure a sum strategy of lower expected error instead)")
    out.print(f"aggregates: {len(w.statements):,} statements, {len(w.linear):,} linear queries "
              f"(counts and clamped sums); mechanism {first.mechanism}; every group measured "
              f"directly{note}", markup=False)
    laplace = first.mechanism == "discrete_laplace"
    symbol = "b" if laplace else "σ"
    k = unit.max_rows
    factor = "" if k == 1 else (f"{k} × " if laplace else f"{k}² × ")
    what = {"rows": f"every group counts and sums a person's kept rows: {factor}a row's "
                    f"{'ε' if laplace else 'ρ'}",
            "people": "every group counts distinct people and sums each person's clamped "
                      f"total: the coverage of {k} record{'s' if k > 1 else ''}"}
    for c, p in plans.items():
        if unit.is_row:
            break
        mark = " ← this plan" if c == unit.count else ""
        out.print(f"  a person costs (--count {c}): {symbol} {shown[c].min():.4g}–"
                  f"{shown[c].max():.4g} ({'exact' if p.spent.exact else 'upper bound'}) — "
                  f"{what[c]}{mark}", markup=False, highlight=False)
    table = Table("statement", "group", "aggregate", *(f"{symbol} ({c})" for c in plans),
                  title="noise of each group (no data)")
    for i, (st, g, a, r) in enumerate(labels[:MAX_PRINTED]):
        table.add_row(st, g, f"{a} ({r})" if a.startswith("AVG") else a,
                      *(f"{v[i]:.4g}" for v in shown.values()))
    out.print(table)
    if len(labels) > MAX_PRINTED:
        out.print(f"  … {len(labels) - MAX_PRINTED:,} more (--json lists them)", markup=False)
