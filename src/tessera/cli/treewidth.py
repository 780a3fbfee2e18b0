"""``tessera treewidth``: width of a workload's incidence graph and the engine's plan (SPEC §4).

Prints tw(G(F)) as found by the heuristic (an upper bound), the decomposition the engine would
run on (its width, number of bags, largest table, memory estimate) and, when the plan exceeds the
memory limit, the engine's refusal naming the queries that cause it. Nothing is allocated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tessera.cli.common import out, user_errors
from tessera.errors import TesseraError


def register(app: typer.Typer) -> None:
    app.command("treewidth")(treewidth)


@user_errors
def treewidth(
    workload: Annotated[
        Path, typer.Argument(help="Workload file (SQL lines, YAML or JSON).")
    ],
    schema: Annotated[
        Path, typer.Option("--schema", "-s", help="Schema (YAML/JSON) of the domain.")
    ],
    memory_limit: Annotated[
        str,
        typer.Option("--memory-limit", help="Refuse plans above this size (2GiB, 512MiB, …)."),
    ] = "2GiB",
    heuristic: Annotated[
        str, typer.Option("--heuristic", help="Elimination heuristic: min-fill or min-degree.")
    ] = "min-fill",
) -> None:
    """Print the incidence-graph width, the decomposition used, its largest table and memory."""
    from tessera.domain import Domain
    from tessera.engine.decomposition import HEURISTICS, format_bytes, parse_bytes
    from tessera.engine.decomposition import treewidth as incidence_treewidth
    from tessera.engine.factors import incidence_graph
    from tessera.engine.model import Structure
    from tessera.workload import Workload

    if heuristic not in HEURISTICS:
        raise TesseraError(f"unknown heuristic {heuristic!r}", hint=f"one of {list(HEURISTICS)}")
    try:
        limit = parse_bytes(memory_limit)
    except ValueError:
        raise TesseraError(f"cannot read memory limit {memory_limit!r}",
                           hint="e.g. 2GiB, 512MiB, 1e9") from None
    domain = Domain.load(schema)
    wl = Workload.load(workload, domain)
    graph = incidence_graph(domain, wl.queries)
    width, td = incidence_treewidth(graph, heuristic)
    out.print(f"workload: {len(wl.queries)} queries over {len(domain)} attributes")
    out.print(f"incidence graph G(F): {graph.number_of_nodes()} vertices, "
              f"{graph.number_of_edges()} edges; width {width} ({heuristic}, "
              f"{len(td.bags)} bags; an upper bound on tw(F))")
    # raises ResourceError (one-line error, exit 2) when the plan exceeds the limit
    s = Structure.build(domain, wl.queries, wl.names, (), heuristic=heuristic,
                        memory_limit=limit, dense_limit=64)
    plan = s.plan
    n_states = len(s.compiled.sizes) - len(domain)
    dense = sum(1 for g in s.compiled.groups if len(g.functions) and
                all(s.compiled.owner[v] < 0 for v in g.scope) and len(g.scope) > 1)
    out.print(f"engine decomposition: width {plan.width} over {len(s.compiled.sizes)} variables "
              f"({len(domain)} attributes as atoms, {n_states} chain states; {dense} dense "
              f"multi-attribute factor tables), {len(s.bags)} bags")
    largest = s.bags[plan.largest_bag]
    out.print(f"largest table: {plan.largest_entries:,} entries over "
              + ", ".join(f"{s.compiled.labels[v]} ({s.compiled.sizes[v]})" for v in largest))
    out.print(f"memory estimate: {format_bytes(plan.bytes_estimate)} "
              f"(limit {format_bytes(limit)})")
