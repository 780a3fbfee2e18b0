"""``tessera ledger``: the budget ledger of a data set (docs/theory.md §9)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tessera.cli.common import (
    Command,
    CountOpt,
    Group,
    JsonOpt,
    MaxRowsOpt,
    NeighboursOpt,
    PrivacyIdOpt,
    SchemaOpt,
    out,
    privacy_unit,
    user_errors,
)
from tessera.errors import TesseraError

LedgerArg = Annotated[
    Path, typer.Argument(help="Ledger file (SQLite), one per data set.", metavar="LEDGER")
]


def register(app: typer.Typer) -> None:
    ledger_app = typer.Typer(
        cls=Group, help="Budget ledger: a total per data set, charged before every release.",
        no_args_is_help=True,
    )
    ledger_app.command("init", cls=Command)(init)
    ledger_app.command("show", cls=Command)(show)
    app.add_typer(ledger_app, name="ledger")


@user_errors
def init(
    ledger: LedgerArg,
    schema: SchemaOpt,
    epsilon: Annotated[
        float | None, typer.Option("--epsilon", "-e", help="Total pure ε (discrete Laplace "
                                   "releases).")
    ] = None,
    rho: Annotated[
        float | None, typer.Option("--rho", help="Total ρ-zCDP (discrete Gaussian releases: "
                                   "--rho, --mu and (ε,δ) budgets).")
    ] = None,
    neighbours: NeighboursOpt = "add-remove",
    privacy_id: PrivacyIdOpt = None,
    max_rows: MaxRowsOpt = None,
    count: CountOpt = None,
    dataset: Annotated[str | None, typer.Option("--dataset", help="Name of the data set.")] = None,
) -> None:
    """Create a ledger with a total budget for one data set. With --privacy-id and --max-rows
    the budget is what one person may spend, and only releases made for that unit are
    charged."""
    from tessera.release.ledger import Ledger
    from tessera.schema.domain import Domain

    if (epsilon is None) == (rho is None):
        raise TesseraError("give the total as exactly one of --epsilon or --rho")
    book = Ledger.init(
        ledger, total=float(epsilon if epsilon is not None else rho),  # type: ignore[arg-type]
        definition="pure" if epsilon is not None else "zcdp", neighbours=neighbours,
        domain=Domain.load(schema), dataset=dataset or ledger.stem,
        unit=privacy_unit(privacy_id, max_rows, count),
    )
    out.print(book.summary().describe(), markup=False, highlight=False)


@user_errors
def show(ledger: LedgerArg, as_json: JsonOpt = False) -> None:
    """The total, the spent budget (exact or an upper bound) and every release."""
    import json

    from tessera.release.ledger import Ledger

    summary = Ledger.open(ledger).summary()
    if as_json:
        import dataclasses

        doc = dataclasses.asdict(summary) | {"remaining": summary.remaining}
        out.print_json(json.dumps(doc, default=str))
        return
    out.print(summary.describe(), markup=False, highlight=False)
