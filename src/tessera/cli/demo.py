"""``tessera demo``: the main job end to end on data the project makes itself."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tessera.cli.common import Command, err, info, out, spent_text, user_errors
from tessera.errors import TesseraError

if TYPE_CHECKING:
    from tessera.release.aggregate_plan import AggregatePlan
    from tessera.release.answering import Release


def register(app: typer.Typer) -> None:
    app.command("demo", cls=Command)(demo)


@user_errors
def demo(
    directory: Annotated[
        Path | None, typer.Option("--out", help="Directory for the demo's files "
                                  "(default tessera-demo, or tessera-demo-people with --people).")
    ] = None,
    epsilon: Annotated[float, typer.Option("--epsilon", "-e", help="ε of the release, and of "
                                           "the synthetic data.")] = 1.0,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seeded noise for TESTS: NOT PRIVATE.")
    ] = None,
    people: Annotated[bool, typer.Option(
        "--people", help="Instead: a made-up purchases table (customers with 1–50 rows) and "
        "counts, sums and means of it, private for one customer (one person of at most "
        "--max-rows rows).")] = False,
    max_rows: Annotated[int | None, typer.Option(
        "--max-rows", help="With --people: K, the most purchases of one customer kept "
        "(default 10).", min=1)] = None,
) -> None:
    """Make a population, then do both main jobs on it under one ledger: answer a workload
    privately (answers, certificate, report) and make private synthetic data for it (rows, run
    record, evaluation). With --people: answer counts, sums and means of a made-up purchases
    table privately for one customer (docs/people.md)."""
    if people:
        _demo_people(directory or Path("tessera-demo-people"), epsilon,
                     10 if max_rows is None else max_rows, seed)
        return
    if max_rows is not None:
        raise TesseraError("--max-rows goes with --people (the most rows of one customer)",
                           hint="tessera demo --people --max-rows K")
    from tessera.demo.end_to_end import run_demo

    with info.status("running the demo…", spinner="dots"):
        result = run_demo(directory or Path("tessera-demo"), epsilon=epsilon, synth_epsilon=epsilon,
                          total=max(3.0, 2 * epsilon), seed=seed)
    r = result.release
    ov = r.plan.overlap
    if not r.private:
        err.print("[bold red]NOT PRIVATE[/]: seeded test randomness (--seed)")
    out.print(f"1. answered {len(r.workload)} queries at ε = {epsilon:g} (pure ε-DP, add/remove "
              f"one row); maximum overlap γ = {ov.bound:g} ({'exact' if ov.exact else 'bound'}); "
              f"{noise_text(r)}", markup=False)
    e = result.errors
    out.print(f"2. made {e.synthetic_rows:,} synthetic rows for the same workload "
              f"(adaptive method, ε = {epsilon:g}); their answers are off "
              f"by at most {e.max_error:.2%} of the rows, {e.mean_error:.2%} on average "
              f"(the evaluation compares them with the population itself: NOT PRIVATE)",
              markup=False)
    for name, path in (("population", result.data), ("schema", result.schema),
                       ("workload", result.workload), ("ledger", result.ledger),
                       ("answers", result.answers), ("certificate", result.certificate),
                       ("report", result.report), ("synthetic rows", result.synthetic),
                       ("run record", result.run_record), ("evaluation", result.evaluation)):
        out.print(f"{name:>15}: {path}", markup=False)
    out.print(f"next: tessera verify {result.certificate} {result.workload} --schema "
              f"{result.schema}; tessera ledger show {result.ledger}", markup=False)


def _demo_people(directory: Path, epsilon: float, max_rows: int, seed: int | None) -> None:
    """``tessera demo --people``: :func:`tessera.demo.people.run_people_demo`, then what it
    did."""
    from tessera.demo.people import run_people_demo

    total = max(3.0, 2 * epsilon)
    with info.status("running the people demo…", spinner="dots"):
        result = run_people_demo(directory, epsilon=epsilon, total=total, max_rows=max_rows,
                                 seed=seed)
    r = result.release
    plan = r.plan
    k = plan.unit.max_rows
    if not r.private:
        err.print("[bold red]NOT PRIVATE[/]: seeded test randomness (--seed)")
    out.print(f"1. made up {result.rows:,} purchases of {result.people:,} customers (1–50 "
              f"each; {result.over_k:,} have more than K = {k}, and only K of their rows are "
              "kept; read from the made-up table itself, not private)", markup=False)
    out.print(f"2. answered {len(plan.workload.statements)} statements ({len(r.frame)} counts, "
              f"sums and means; {len(plan.linear)} noisy counts and sums) at ε = {epsilon:g}: "
              f"{r.certificate['spent']['guarantee']}", markup=False)
    out.print(f"3. noise: {scales_text(plan)}", markup=False)
    out.print(f"4. the same noise protects one row at ε = {result.per_row:.6g}; one customer "
              f"of up to K = {k} rows costs K× that, ε = {plan.spent.bound:.6g} (noise K× a "
              "row-level release's at the same ε)", markup=False)
    out.print(f"5. the certificate verified (the spend re-derived from its scales and the "
              f"workload alone); the ledger was charged {spent_text(r.charge)} of "
              f"{total:g}", markup=False)
    for name, path in (("purchases", result.data), ("schema", result.schema),
                       ("workload", result.workload), ("ledger", result.ledger),
                       ("answers", result.answers), ("certificate", result.certificate)):
        out.print(f"{name:>12}: {path}", markup=False)
    out.print(f"next: tessera verify {result.certificate} {result.workload} --schema "
              f"{result.schema}; tessera ledger show {result.ledger}", markup=False)


def scales_text(plan: AggregatePlan) -> str:
    """The range of the discrete Laplace scales b_q of the counts and of the sums (3
    significant digits; the answers CSV has them to 6)."""
    import numpy as np

    parts = []
    for role, what in (("count", "counts"), ("sum", "sums")):
        s = np.array([b for lq, b in zip(plan.linear, plan.scales.tolist()) if lq.role == role])
        if s.size:
            low, high = f"{float(s.min()):.3g}", f"{float(s.max()):.3g}"
            parts.append(f"{what} {low if low == high else f'{low}–{high}'}")
    name = "Laplace scale" if plan.mechanism == "discrete_laplace" else "Gaussian σ"
    return f"discrete {name} " + ", ".join(parts) + " (a mean is a noisy sum / a noisy count)"


def noise_text(release: Release) -> str:
    """What noise the release added, read off the release itself: the range of the per-query
    noise scales (discrete Laplace b_q or discrete Gaussian σ_q, 3 significant digits; the
    answers CSV has them to 6) of the queries measured — W's, or the strategy's when one was
    measured — and what that same noise would cost under sequential composition, Σ_q c_q
    (:attr:`~tessera.release.plan.NoisePlan.sequential`), next to the overlap-aware cost."""
    import numpy as np

    from tessera.release.budget import DISCRETE_LAPLACE

    plan = release.plan
    scales = plan.scales[np.isfinite(plan.scales)]
    name = "Laplace scale" if plan.mechanism == DISCRETE_LAPLACE else "Gaussian σ"
    low, high = (f"{float(scales.min()):.3g}", f"{float(scales.max()):.3g}") if scales.size \
        else ("∞", "∞")
    spread = low if low == high else f"{low}–{high}"
    unit = "ε" if plan.mechanism == DISCRETE_LAPLACE else "ρ"
    measured = ("per query" if release.strategy is None else
                f"on the {plan.workload.n_queries:,} queries of the strategy measured (the "
                "answers are reconstructed from them)")
    return (f"discrete {name} {spread} {measured}; the same noise would cost "
            f"{unit} = {plan.sequential:.3g} under sequential composition")
