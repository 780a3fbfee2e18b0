"""``tessera treewidth``: width of a workload's incidence graph and the engine's plan
(docs/theory.md §4).

Prints tw(G(F)) as found by the heuristic (an upper bound), the decomposition the engine would
run on (its width, number of bags, largest table, memory estimate) and, when the plan exceeds the
memory limit, the engine's refusal naming the queries that cause it. Nothing is allocated.

The incidence graph has a vertex per predicate query, and the elimination heuristics take about
1 ms a query (20,000 random Adult conjunctions: 24 s; docs/benchmarks.md "Resource guards"):
workloads of more than ``--max-queries`` predicate queries are refused before the graph is built.
"""

from __future__ import annotations

from typing import Annotated

import typer

from tessera.cli.common import Command, SchemaOpt, WorkloadArg, out, user_errors

#: Most predicate queries ``tessera treewidth`` takes by default (about 2 minutes).
TREEWIDTH_MAX_QUERIES = 100_000


def register(app: typer.Typer) -> None:
    app.command("treewidth", cls=Command)(treewidth)


@user_errors
def treewidth(
    workload: WorkloadArg,
    schema: SchemaOpt,
    memory_limit: Annotated[
        str,
        typer.Option("--memory-limit", help="Refuse plans above this size (2GiB, 512MiB, …)."),
    ] = "2GiB",
    heuristic: Annotated[
        str, typer.Option("--heuristic", help="Elimination heuristic: min-fill or min-degree.")
    ] = "min-fill",
    max_queries: Annotated[
        int,
        typer.Option("--max-queries", help="Refuse workloads of more predicate queries (the "
                     "incidence graph has a vertex each; families count one each)."),
    ] = TREEWIDTH_MAX_QUERIES,
) -> None:
    """Print the incidence-graph width, the decomposition used, its largest table and memory."""
    from tessera.engine.decomposition import format_bytes
    from tessera.engine.model import treewidth_report
    from tessera.schema.domain import Domain
    from tessera.workload.files import count_lines, require_at_most
    from tessera.workload.workload import Workload

    def guard(n: int) -> None:
        require_at_most(n, max_queries, "the incidence graph would have a vertex for each of",
                        "raise --max-queries (about 1 ms a query); families (YAML marginals, "
                        "cubes, hierarchies) count one vertex each")

    if workload.suffix.lower() not in (".yaml", ".yml", ".json"):
        guard(count_lines(workload))  # before parsing: a line holds at most one query
    wl = Workload.load(workload, Domain.load(schema))
    guard(len(wl.queries))
    report = treewidth_report(wl, heuristic=heuristic, memory_limit=memory_limit)
    g = report.incidence
    if wl.partitions:
        out.print(f"workload: {len(wl.queries)} predicate queries and {len(wl.partitions)} "
                  f"families ({wl.n_cells:,} cells) over {len(wl.domain)} attributes")
    else:
        out.print(f"workload: {len(wl.queries)} queries over {len(wl.domain)} attributes")
    family_note = f", one vertex per family ({g.families})" if g.families else ""
    out.print(f"incidence graph G(F): {g.vertices} vertices, {g.edges} edges{family_note}; "
              f"width {g.width} ({heuristic}, {g.bags} bags; an upper bound on tw(F))")
    # raises ResourceError (one-line error, exit 2) when the plan exceeds the limit
    plan = report.plan
    out.print(f"engine decomposition: width {plan.width} over {plan.variables} variables "
              f"({plan.attributes} attributes as atoms, {plan.chain_states} chain states; "
              f"{plan.dense_tables} dense multi-attribute factor tables), {plan.bags} bags")
    out.print(f"largest table: {plan.largest_entries:,} entries over "
              + ", ".join(f"{label} ({size})" for label, size in plan.largest_bag))
    out.print(f"memory estimate: {format_bytes(plan.bytes_estimate)} "
              f"(limit {format_bytes(plan.memory_limit)})")
