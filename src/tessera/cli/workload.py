"""``tessera workload``: validate a workload file and build standard families."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from tessera.cli.common import Command, Group, SchemaOpt, WorkloadArg, out, user_errors

if TYPE_CHECKING:
    from tessera.workload import Workload


def register(app: typer.Typer) -> None:
    workload_app = typer.Typer(
        cls=Group, help="Workloads of counting queries.", no_args_is_help=True
    )
    workload_app.command("check", cls=Command)(check)
    workload_app.command("build", cls=Command)(build)
    app.add_typer(workload_app, name="workload")


@user_errors
def check(workload: WorkloadArg, schema: SchemaOpt) -> None:
    """Validate WORKLOAD against the schema and print its statistics."""
    from tessera.domain import Domain
    from tessera.workload import Workload

    w = Workload.load(workload, Domain.load(schema))
    s = w.stats()
    table = Table(title=f"{workload}: {s.n_queries} queries", show_header=False)
    table.add_column("statistic", no_wrap=True)
    table.add_column("value", overflow="fold")  # never cut: wrap
    table.add_row("queries", f"{s.n_queries:,}")
    table.add_row("total weight", f"{s.total_weight:g}")
    table.add_row("range queries", f"{s.n_range_queries:,}")
    table.add_row(
        "attributes used",
        ", ".join(f"{a} ({n})" for a, n in s.attributes_used.items()) or "none",
    )
    table.add_row("scope sizes", ", ".join(f"{k}: {n}" for k, n in s.scope_sizes.items()))
    table.add_row("distinct scopes", f"{len(w.scopes()):,}")
    table.add_row("tautologies", _names(w, s.tautologies))
    table.add_row("contradictions", _names(w, s.contradictions))
    table.add_row(
        "duplicates",
        "; ".join(" = ".join(_where(w, i) for i in group) for group in s.duplicates[:10])
        + (f" (+{len(s.duplicates) - 10} more)" if len(s.duplicates) > 10 else "")
        or "none",
    )
    out.print(table)


def _where(w: Workload, i: int) -> str:
    """A query's name and its line in the file the table is about (``line 3``)."""
    if not w.sources:
        return w.names[i]
    place = w.sources[i].rsplit(":", 1)[-1]
    return f"{w.names[i]} ({'line ' + place if place.isdigit() else place})"


def _names(w: Workload, idx: tuple[int, ...], limit: int = 10) -> str:
    """``3: a (line 2), b (line 5), …``: how many, and the first ``limit`` of them."""
    if not idx:
        return "none"
    shown = ", ".join(_where(w, i) for i in idx[:limit])
    return f"{len(idx)}: {shown}" + (" …" if len(idx) > limit else "")


@user_errors
def build(
    family: Annotated[
        str,
        typer.Argument(
            help="marginals | identity | prefix | ranges | random", metavar="FAMILY"
        ),
    ],
    schema: SchemaOpt,
    output: Annotated[
        Path,
        typer.Option("--output", "-o", help="Workload file to write (.sql/.txt, .yaml or .json)."),
    ],
    attributes: Annotated[
        list[str] | None,
        typer.Option(
            "--attribute", "-a", help="Attribute(s) to use (repeatable).", metavar="<str>"
        ),
    ] = None,
    k: Annotated[int, typer.Option("-k", help="Marginal order for 'marginals'.")] = 2,
    n: Annotated[int, typer.Option("-n", help="Number of queries for 'random'.")] = 1000,
    kind: Annotated[str, typer.Option(help="random: range | set | mixed.")] = "mixed",
    min_attributes: Annotated[int, typer.Option(help="random: fewest attributes per query.")] = 1,
    max_attributes: Annotated[int, typer.Option(help="random: most attributes per query.")] = 3,
    seed: Annotated[
        int,
        typer.Option(
            help="random: seed (the workload is public; the seed only makes it reproducible)."
        ),
    ] = 0,
) -> None:
    """Build a standard workload FAMILY over the schema and write it to a file."""
    from tessera.builders import build as build_family
    from tessera.domain import Domain

    w = build_family(
        family,
        Domain.load(schema),
        attributes=attributes,
        k=k,
        n_queries=n,
        kind=kind,
        attributes_per_query=(min_attributes, max_attributes),
        seed=seed,
    )
    w.save(output)
    out.print(f"wrote {len(w):,} queries to {output}")
