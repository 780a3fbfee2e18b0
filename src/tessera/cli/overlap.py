"""``tessera overlap``: maximum overlap γ / γ_w of a workload (SPEC §3)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.table import Table

from tessera.cli.common import err, out, user_errors
from tessera.errors import QueryError

_PARAM = {"pure": "ε", "gdp": "μ", "zcdp": "ρ"}
# GDP is proven for the continuous Gaussian; for a discrete Gaussian calibrate through zCDP
_SCALE = {
    "pure": "Laplace b",
    "gdp": "continuous Gaussian σ",
    "zcdp": "Gaussian σ (continuous or discrete)",
}


def register(app: typer.Typer) -> None:
    @app.command("overlap")
    @user_errors
    def overlap(
        workload: Path = typer.Argument(..., help="Workload file (WHERE clauses, YAML or JSON)."),
        schema: Path = typer.Option(..., "--schema", "-s", help="Public schema (YAML/JSON)."),
        definition: str = typer.Option(
            "pure", "--definition", "-d", help="Composition: pure (Σw), gdp (√Σw²), zcdp (Σw²)."
        ),
        neighbours: str = typer.Option(
            "add-remove",
            "--neighbours",
            "-n",
            help="Neighbouring data sets: add-remove or substitute.",
        ),
        time_limit: float = typer.Option(
            60.0,
            "--time-limit",
            help="Seconds for the search and its bounds (value classes and the witness check, "
            "linear in the workload, come on top); past it, a proven upper bound.",
        ),
        method: str = typer.Option(
            "auto",
            "--method",
            help="auto, sweep, branch-bound, mini-bucket, toulbar2, enumerate, engine, colouring, "
            "split.",
        ),
        budget: float | None = typer.Option(
            None, "--budget", help="Total ε / μ / ρ: print the per-query noise scales."
        ),
        as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
    ) -> None:
        """Maximum overlap γ(Q) and weighted γ_w(Q), with the witness row and its queries."""
        import numpy as np

        from tessera.domain import Domain
        from tessera.overlap import max_overlap, per_query_scales
        from tessera.overlap.result import COMPS, DEFINITION_NAMES

        if definition not in COMPS:
            raise QueryError(f"unknown definition {definition!r}", hint="pure, gdp or zcdp")
        from tessera.accounting.guarantee import Neighbours
        from tessera.workload import Workload

        # same spellings as `tessera tradeoff` (add/remove, add-remove, substitute, ...)
        neighbours = {Neighbours.ADD_REMOVE: "add-remove", Neighbours.SUBSTITUTE: "substitute"}[
            Neighbours.parse(neighbours)
        ]
        if not time_limit >= 0:
            raise QueryError(f"--time-limit {time_limit} must be ≥ 0 seconds")
        if budget is not None and not (np.isfinite(budget) and budget > 0):
            raise QueryError(f"--budget {budget} must be a finite number > 0")
        domain = Domain.load(schema)
        wl = Workload.load(workload, domain)
        common = dict(comp=definition, neighbours=neighbours, method=method)
        two = not all(w == 1.0 for w in wl.weights)  # γ_w and, for reference, γ
        start = time.monotonic()
        # a spinner on a terminal: the search can take seconds on large workloads
        with err.status(f"maximum overlap of {len(wl):,} queries…", spinner="dots"):
            # γ_w calibrates the noise: it gets most of the time when γ is solved too
            weighted = max_overlap(wl, time_limit=0.75 * time_limit if two else time_limit,
                                   **common)  # type: ignore[arg-type]
            unit = (
                max_overlap(wl, np.ones(len(wl)), **common,  # type: ignore[arg-type]
                            time_limit=max(0.0, time_limit - (time.monotonic() - start)))
                if two else weighted  # unit weights already: one solve, not two
            )
        guarantee = f"{DEFINITION_NAMES[weighted.comp]}, {neighbours} neighbours"
        scales = None if budget is None else per_query_scales(weighted, wl.weights, budget)
        if as_json:
            doc = {
                "guarantee": guarantee,
                "definition": definition,
                "neighbours": neighbours,
                "unweighted": unit.to_dict(),
                "weighted": weighted.to_dict(),
            }
            if weighted.witness is not None:
                doc["witness_values"] = {
                    a.name: a.label(c) for a, c in zip(domain, weighted.witness.x)
                }
                doc["witness_queries"] = [wl.names[i] for i in weighted.witness.queries]
            if scales is not None:
                doc["budget"] = budget
                doc["scales"] = {
                    n: (None if not np.isfinite(v) else float(v)) for n, v in zip(wl.names, scales)
                }
            out.print_json(json.dumps(doc))
            return
        table = Table(title=f"maximum overlap of {workload} ({len(wl)} queries)")
        table.add_column("quantity")
        table.add_column("value", justify="right")
        table.add_column("status")

        def status(r: object) -> str:
            return "exact" if r.exact else "upper bound"  # type: ignore[attr-defined]

        # γ(Q) is a count of queries; under gdp the calibration value is √γ (shown below)
        table.add_row("γ(Q) (queries one row touches)", f"{unit.score_bound:.6g}", status(unit))
        table.add_row("γ_w(Q) (workload weights)", f"{weighted.bound:.6g}", status(weighted))
        table.add_row("sequential comp(Q)", f"{weighted.sequential:.6g}", "")
        table.add_row("utility gain 1 − γ_w/comp(Q)", f"{weighted.utility_gain:.3f}", "")
        if not weighted.exact:
            table.add_row("witness attains", f"{weighted.achieved:.6g}", "lower bound")
        table.add_row("method", weighted.method, "")
        out.print(table)
        out.print(
            f"guarantee: {guarantee}; calibrate with γ_w = {weighted.bound:.6g} "
            f"({status(weighted)})"
        )
        for note in weighted.notes:
            out.print(f"note: {note}")
        if weighted.witness is not None:
            row = ", ".join(f"{a.name}={a.label(c)}" for a, c in zip(domain, weighted.witness.x))
            out.print(f"witness row: {row}")
            if weighted.witness.y is not None:
                row_y = ", ".join(
                    f"{a.name}={a.label(c)}" for a, c in zip(domain, weighted.witness.y)
                )
                out.print(f"substituted by: {row_y}")
            out.print(f"queries it touches ({len(weighted.witness.queries)}):")
            for i in weighted.witness.queries:
                out.print(f"  {wl.names[i]}")
        if scales is not None:
            st = Table(title=f"per-query noise for {_PARAM[definition]} = {budget:g} ({guarantee})")
            st.add_column("query")
            st.add_column("weight", justify="right")
            st.add_column(_SCALE[definition], justify="right")
            for n, w, v in zip(wl.names, wl.weights, scales):
                st.add_row(n, f"{w:g}", "not released" if not np.isfinite(v) else f"{v:.6g}")
            out.print(st)
