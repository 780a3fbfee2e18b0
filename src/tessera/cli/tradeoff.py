"""``tessera tradeoff``: composed-under-overlap vs sequential trade-off curves (SPEC §3).

t identical queries, each answered by one noise mechanism, with maximum overlap ≤ γ: by Thm 6
the release is f^{⊗γ}-DP instead of f^{⊗t} (sequential composition). Prints both guarantees
(GDP / pure ε where they are exact, and ε at δ) and draws both curves.
"""

from __future__ import annotations

import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from tessera.cli.common import out, user_errors
from tessera.errors import TesseraError


class MechanismName(StrEnum):
    gaussian = "gaussian"
    laplace = "laplace"
    discrete_laplace = "discrete_laplace"
    discrete_gaussian = "discrete_gaussian"


def register(app: typer.Typer) -> None:
    app.command("tradeoff")(tradeoff)


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
        Path | None, typer.Option("--schema", "-s", help="Schema of --workload.", exists=True)
    ] = None,
    time_limit: Annotated[
        float | None, typer.Option("--time-limit", help="Seconds for the overlap search.")
    ] = None,
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
    delta: Annotated[float, typer.Option("--delta", "-d", help="δ at which ε is reported.")] = 1e-6,
    neighbours: Annotated[
        str, typer.Option("--neighbours", help="Neighbour relation: add/remove or substitute.")
    ] = "add/remove",
    clt: Annotated[
        bool,
        typer.Option("--clt", help="Also draw the CLT approximation (labelled; not a guarantee)."),
    ] = False,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="PNG file for the curves.")
    ] = None,
) -> None:
    """Draw composed-under-overlap vs sequential trade-off curves and print both guarantees."""
    from tessera.accounting import (
        GaussianDP,
        Guarantee,
        Neighbours,
        clt_approximation,
        homogeneous_overlap,
        pld,
    )
    from tessera.accounting.plot import plot_tradeoffs

    rel = Neighbours.parse(neighbours)
    changed: int | None = None  # queries one neighbour change touches, from the workload
    # the overlap figure is exact only when computed exactly; a γ given by the user, or a
    # search stopped by its time limit, is an upper bound and the guarantee says so
    overlap_exact = overlap is None
    if workload is not None:
        if schema is None:
            raise TesseraError("--workload needs --schema")
        if queries is not None or overlap is not None:
            raise TesseraError("--workload computes t and γ: drop --queries/--overlap")
        queries, overlap, changed, overlap_exact = _from_workload(workload, schema, rel, time_limit)
    if queries is None:
        raise TesseraError("give --queries t (and --overlap γ), or --workload with --schema")
    if queries < 1:
        raise TesseraError("--queries must be ≥ 1")
    gamma = float(queries if overlap is None else overlap)
    if not 1.0 <= gamma:
        raise TesseraError("--overlap γ must be ≥ 1")
    if gamma > queries:
        gamma = float(queries)  # γ ≤ t always
    if changed is not None:
        g_eff = changed
    else:
        # A substitution touches I(x) Δ I(y): at most min(2γ, t) queries (SPEC §1).
        factor = 2.0 if rel is Neighbours.SUBSTITUTE else 1.0
        g_eff = math.ceil(min(factor * gamma, queries))
    t_eff = queries

    gaussian_like = mechanism in (MechanismName.gaussian, MechanismName.discrete_gaussian)
    param = _parameter(mechanism.value, mu, epsilon, scale, gaussian_like)
    noise = 1.0 / param
    lines: list[str] = []
    if mechanism is MechanismName.gaussian:
        per = GaussianDP(param)
        composed = GaussianDP(param * math.sqrt(g_eff))
        sequential = GaussianDP(param * math.sqrt(t_eff))
        for name, f in (("overlap", composed), ("sequential", sequential)):
            exact = overlap_exact or name == "sequential"
            g = Guarantee.gdp(f.mu, rel, basis="exact" if exact else "upper bound (Thm 6)")
            lines.append(f"{name:>10}: {g.text()}")
            lines.append(f"{'':>10}  ⇒ {g.at_delta(delta).text()}")
    else:
        make = pld.MECHANISMS[mechanism.value]
        per = make(noise)
        composed = homogeneous_overlap(per, g_eff)
        sequential = homogeneous_overlap(per, t_eff)
        pure = mechanism in (MechanismName.laplace, MechanismName.discrete_laplace)
        for name, f, k in (("overlap", composed, g_eff), ("sequential", sequential, t_eff)):
            if pure:
                g = Guarantee.pure(param * k, rel, basis="upper bound (Thm 6)")
                lines.append(f"{name:>10}: {g.text()}")
            ga = Guarantee.fdp(f, rel).at_delta(delta)
            lines.append(f"{'' if pure else name:>10}{'  ⇒ ' if pure else ': '}{ga.text()}")
    out.print(
        f"{queries} queries × {per.describe()}, overlap γ ≤ {gamma:g} "
        f"({rel.value}: {g_eff} queries per neighbour change)"
    )
    for line in lines:
        out.print(line, markup=False, highlight=False)
    gain = 1.0 - (g_eff / t_eff if not gaussian_like else math.sqrt(g_eff / t_eff))
    out.print(f"utility gain U (noise scale vs sequential at the same target): {gain:.3f}")
    if output is not None:
        curves: list[tuple[str, object]] = [
            (f"overlap: ⊗^{g_eff}", composed),
            (f"sequential: ⊗^{t_eff}", sequential),
        ]
        if clt and not gaussian_like:
            curves.append(("CLT, overlap", clt_approximation([param] * g_eff)))
            curves.append(("CLT, sequential", clt_approximation([param] * t_eff)))
        path = plot_tradeoffs(
            curves, output, title=f"{per.describe()}: overlap vs sequential ({rel.value})"
        )  # type: ignore[arg-type]
        out.print(f"wrote {path}")


def _from_workload(
    path: Path, schema: Path, rel: object, time_limit: float | None
) -> tuple[int, float, int, bool]:
    """(t, γ, queries per neighbour change, both exact?) of a workload with unit weights.

    Both overlap figures are exact values or proven upper bounds (never lower bounds): they
    calibrate the guarantee printed below.
    """
    from tessera.accounting import Neighbours
    from tessera.domain import Domain
    from tessera.overlap import max_overlap
    from tessera.workload import Workload

    w = Workload.load(path, Domain.load(schema))
    ones = [1.0] * len(w)
    add_remove = max_overlap(w, ones, time_limit=time_limit)
    moved = (
        max_overlap(w, ones, neighbours="substitute", time_limit=time_limit)
        if rel is Neighbours.SUBSTITUTE
        else add_remove
    )
    # unit weights: the bounds are integers up to rounding margins added on the safe side
    changed = min(len(w), math.ceil(moved.bound - 1e-9))
    return len(w), float(add_remove.bound), changed, add_remove.exact and moved.exact


def _parameter(
    mechanism: str,
    mu: float | None,
    epsilon: float | None,
    scale: float | None,
    gaussian_like: bool,
) -> float:
    given = [x for x in (mu, epsilon, scale) if x is not None]
    if len(given) != 1:
        raise TesseraError(
            "give exactly one of --mu, --epsilon, --scale",
            hint="--mu for Gaussian noise, --epsilon for Laplace noise",
        )
    if scale is not None:
        if not scale > 0:
            raise TesseraError("--scale must be > 0")
        return 1.0 / scale
    if gaussian_like and epsilon is not None:
        raise TesseraError(f"{mechanism} noise is set by --mu or --scale, not --epsilon")
    if not gaussian_like and mu is not None:
        raise TesseraError(f"{mechanism} noise is set by --epsilon or --scale, not --mu")
    value = float(given[0])
    if not (math.isfinite(value) and value > 0):
        raise TesseraError("the privacy parameter must be finite and > 0")
    return value
