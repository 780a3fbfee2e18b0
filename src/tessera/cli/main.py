"""Entry point of the ``tessera`` command.

Each command group is a module of this package with ``register(app: typer.Typer) -> None``;
they are listed here explicitly so the command surface is visible in one place. Commands are
module-level functions with ``Annotated`` options (see :mod:`tessera.cli.common`).
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated

try:  # Ctrl-C while the command starts: the same one line as anywhere else
    import typer

    from tessera.cli.common import Group, interrupted
except KeyboardInterrupt:
    sys.stderr.write("interrupted\n")
    sys.exit(130)

app = typer.Typer(
    cls=Group,
    name="tessera",
    help="Differential privacy for query workloads: overlap-aware accounting, exact counts, "
    "treewidth-bounded synthetic data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: Command modules under ``tessera.cli``, in the order their commands are listed.
COMMAND_MODULES: tuple[str, ...] = (
    "schema",
    "workload",
    "count",
    "tradeoff",
    "treewidth",
    "overlap",
    "plan",
    "answer",
    "synth",
    "ledger",
    "demo",
    "audit",
)


def _register_all() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(f"tessera.cli.{name}").register(app)


def _print_version(value: bool) -> None:
    if value:
        from tessera import __version__

        typer.echo(f"tessera-dp {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="Print the version (tessera-dp <version>) and exit.",
            callback=_print_version,
            is_eager=True,
        ),
    ] = False,
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            help="Log what the library does on stderr: -v the main steps (calibration, data "
            "read, ledger charge), -vv every step (synthesis rounds). Before the command: "
            "tessera -v answer …",
        ),
    ] = 0,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="Only results, errors, NOT PRIVATE marks and warnings about the input: no "
            "summaries, progress or log lines on stderr.",
        ),
    ] = False,
) -> None:
    """Tessera: differential privacy for query workloads."""
    from tessera.cli.logs import configure

    configure(verbose, quiet)


try:
    _register_all()
except KeyboardInterrupt:
    interrupted()


def main() -> None:
    """The ``tessera`` command. Ctrl-C anywhere prints ``interrupted`` (exit 130), never a
    traceback (:func:`tessera.cli.common.interrupted`)."""
    try:
        app()
    except KeyboardInterrupt:
        interrupted()


if __name__ == "__main__":
    main()
