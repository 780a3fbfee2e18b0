"""The ``tessera`` command line (typer + rich). Each command group lives in its own module."""
