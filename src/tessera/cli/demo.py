"""``tessera demo``: the main job end to end on data the project makes itself."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tessera.cli.common import Command, err, info, out, user_errors

if TYPE_CHECKING:
    from tessera.release.answering import Release


def register(app: typer.Typer) -> None:
    app.command("demo", cls=Command)(demo)


@user_errors
def demo(
    directory: Annotated[
        Path, typer.Option("--out", help="Directory for the demo's files.")
    ] = Path("tessera-demo"),
    epsilon: Annotated[float, typer.Option("--epsilon", "-e", help="ε of the release, and of "
                                           "the synthetic data.")] = 1.0,
    seed: Annotated[
        int | None, typer.Option("--seed", help="Seeded noise for TESTS: NOT PRIVATE.")
    ] = None,
) -> None:
    """Make a population, then do both main jobs on it under one ledger: answer a workload
    privately (answers, certificate, report) and make private synthetic data for it (rows, run
    record, evaluation)."""
    from tessera.demo.end_to_end import run_demo

    with info.status("running the demo…", spinner="dots"):
        result = run_demo(directory, epsilon=epsilon, synth_epsilon=epsilon,
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
