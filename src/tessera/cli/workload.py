"""``tessera workload``: validate a workload file and build standard families."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from tessera.cli.common import Command, Group, SchemaOpt, WorkloadArg, err, out, user_errors

if TYPE_CHECKING:
    from tessera.workload.stats import FamilyStats
    from tessera.workload.workload import Workload

#: Most cells of a structured family ``workload build`` expands into a text file (one line
#: each); beyond, it asks for YAML/JSON.
TEXT_MAX_QUERIES = 1_000_000
#: ``--max-cells``'s default: tessera.workload.builders.DEFAULT_MAX_CELLS (tested equal; not
#: imported, so that ``--help`` loads no library).
DEFAULT_MAX_CELLS = 100_000_000
_STRUCTURED_SUFFIXES = (".yaml", ".yml", ".json")


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
    from tessera.schema.domain import Domain
    from tessera.workload.stats import WorkloadStats
    from tessera.workload.workload import Workload

    w = Workload.load(workload, Domain.load(schema))
    for warning in w.warnings:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    s = WorkloadStats.of(w)
    f = s.families
    title = f"{workload}: {s.n_queries} queries"
    if f is not None:
        title = (f"{workload}: {s.n_queries:,} predicate queries, {f.n_families:,} families "
                 f"({f.n_cells:,} cells)")
    table = Table(title=title, show_header=False)
    table.add_column("statistic", no_wrap=True)
    table.add_column("value", overflow="fold")  # never cut: wrap
    if f is not None:
        _family_rows(table, f)
        if not s.n_queries:
            out.print(table)
            return
    table.add_row("queries", f"{s.n_queries:,}")
    table.add_row("total weight", f"{s.total_weight:g}")
    table.add_row("range queries", f"{s.n_range_queries:,}")
    if s.n_clauses:
        table.add_row("Boolean clauses (OR / NOT across attributes)", f"{s.n_clauses:,}")
    if s.n_bdd:
        table.add_row("BDD queries (Boolean functions of two-valued attributes)", f"{s.n_bdd:,}")
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


def _family_rows(table: Table, f: FamilyStats) -> None:
    """The structured families: kinds, cells, attributes and scope sizes (nothing expanded)."""
    table.add_row("families", ", ".join(f"{kind}: {n:,} ({cells:,} cells)"
                                        for kind, (n, cells) in f.kinds.items()))
    table.add_row("cells", f"{f.n_cells:,}")
    table.add_row("cell weight", f"{f.total_weight:g}")
    table.add_row("family attributes",
                  ", ".join(f"{a} ({n})" for a, n in f.attributes_used.items()) or "none")
    table.add_row("family scope sizes", ", ".join(f"{k}: {n}" for k, n in f.scope_sizes.items()))
    table.add_row("distinct family scopes", f"{f.n_scopes:,}")
    table.add_row("largest family", f"{f.largest[0]} ({f.largest[1]:,} cells)")
    if f.n_partial:
        table.add_row("partial families",
                      f"{f.n_partial:,} (groups leave codes out: those rows are in no cell)")


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
            help="marginals | identity | cube | hierarchy | prefix | ranges | random",
            metavar="FAMILY",
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
    n: Annotated[
        int, typer.Option("--queries", "-t", help="Number of queries t for 'random'.")
    ] = 1000,
    kind: Annotated[str, typer.Option(help="random: range | set | mixed.")] = "mixed",
    min_attributes: Annotated[int, typer.Option(help="random: fewest attributes per query.")] = 1,
    max_attributes: Annotated[int, typer.Option(help="random: most attributes per query.")] = 3,
    seed: Annotated[
        int,
        typer.Option(
            help="random: seed (the workload is public; the seed only makes it reproducible)."
        ),
    ] = 0,
    branching: Annotated[
        int, typer.Option(help="hierarchy: children per interval at each level.")
    ] = 2,
    depth: Annotated[
        int | None,
        typer.Option(help="hierarchy: levels per attribute (default: down to single values)."),
    ] = None,
    min_order: Annotated[
        int, typer.Option(help="cube: fewest attributes per marginal (0 keeps the total).")
    ] = 0,
    max_queries: Annotated[
        int,
        typer.Option(help="marginals, identity, cube, hierarchy: most queries written to a "
                     "text file (.sql/.txt), one per cell; YAML/JSON keep them compact (a few "
                     "lines, up to --max-cells cells)."),
    ] = TEXT_MAX_QUERIES,
    max_cells: Annotated[
        int,
        typer.Option(help="marginals, identity, cube, hierarchy: most cells the families may "
                     "have (a guard against a typo filling memory; every command that "
                     "answers them counts every cell).", min=1),
    ] = DEFAULT_MAX_CELLS,
) -> None:
    """Build a standard workload FAMILY over the schema and write it to a file.

    marginals, identity, cube and hierarchy are written compactly to .yaml/.json (a few lines
    that name the families, up to --max-cells cells); to a text file, one query per cell, up to
    --max-queries.
    """
    from tessera.errors import ResourceError
    from tessera.schema.domain import Domain
    from tessera.workload.builders import DEFAULT_MAX_QUERIES, STRUCTURED, build_structured
    from tessera.workload.builders import build as build_family
    from tessera.workload.workload import Workload

    domain = Domain.load(schema)
    compact = output.suffix.lower() in _STRUCTURED_SUFFIXES
    if family in STRUCTURED:
        w, doc = build_structured(family, domain, attributes=attributes, k=k,
                                  branching=branching, depth=depth, min_order=min_order,
                                  max_cells=max_cells)
        if compact:
            _write_document(doc, output, f"{family}: {len(w.partitions):,} families, "
                                         f"{w.n_cells:,} cells")
            out.print(f"wrote {len(w.partitions):,} families ({w.n_cells:,} cells) to {output}")
            return
        if w.n_cells > max_queries:
            raise ResourceError(
                f"{family} has {w.n_cells:,} cells: too many for a text workload, one line "
                f"each (--max-queries {max_queries:,})",
                hint=f"write YAML or JSON ({output.with_suffix('.yaml').name}): its "
                f"{len(w.partitions):,} families stay a few lines, and every command takes them",
            )
    if family in ("cube", "hierarchy"):
        expanded = w.expanded(max_queries)
        w = Workload.of(domain, expanded.queries, expanded.names)
    else:
        w = build_family(
            family,
            domain,
            attributes=attributes,
            k=k,
            n_queries=n,
            kind=kind,
            attributes_per_query=(min_attributes, max_attributes),
            seed=seed,
            max_queries=max(max_queries, DEFAULT_MAX_QUERIES),  # families: checked above
        )
    w.save(output)
    out.print(f"wrote {len(w):,} queries to {output}")


def _write_document(doc: dict[str, object], path: Path, comment: str) -> None:
    """A compact structured workload as YAML (with a comment line) or JSON."""
    import json

    import yaml

    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(doc, indent=1) + "\n")
    else:
        path.write_text(f"# {comment}\n" + yaml.safe_dump(doc, sort_keys=False))
