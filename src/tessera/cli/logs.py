"""What the command line says on stderr besides results and errors: the library's log records
and its own informational messages, set by the global ``--verbose/-v`` and ``--quiet/-q``.

The library logs to the ``tessera`` logger (a ``NullHandler`` only: :mod:`tessera`); the command
line adds one :class:`ConsoleHandler` that prints each record as one line on stderr
(``warning: …``; ``info: …``; ``debug: tessera.module: …``), at

* WARNING by default (a report written without figures, say);
* INFO with ``-v`` (the calibration chosen, the data read, the ledger charged, a synthesis
  run's outcome), DEBUG with ``-vv`` (every synthesis round, the noise added, status changes);
* ERROR with ``-q``, which also silences the informational console
  (:data:`tessera.cli.common.info`: summaries, ``wrote …`` lines, progress, spinners).

Never silenced: results on stdout, errors, warnings about the input (Python warnings such as
a renamed query) and every ``NOT PRIVATE`` mark (those print on
:data:`tessera.cli.common.err`). What is logged is public or differentially private: budgets,
parameters, public sizes, noisy values, timings — never a count of rows.
"""

from __future__ import annotations

import logging

from rich.text import Text

from tessera.cli.common import err, fail, info

__all__ = ["LOGGER", "ConsoleHandler", "configure", "level_for"]

#: The library's root logger.
LOGGER = "tessera"

_STYLES = {logging.DEBUG: "dim", logging.INFO: "cyan", logging.WARNING: "yellow",
           logging.ERROR: "bold red", logging.CRITICAL: "bold red"}


class ConsoleHandler(logging.Handler):
    """One line per record on :data:`tessera.cli.common.err` (stderr, resolved at each print,
    so a test runner's captured stderr gets it): the level in colour, then the message as
    plain text (never read as markup); at DEBUG also the module that logged it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = Text(f"{record.levelname.lower()}:", style=_STYLES.get(record.levelno, ""))
            where = f" {record.name}:" if record.levelno <= logging.DEBUG else ""
            text.append(f"{where} {record.getMessage()}")
            err.print(text, highlight=False, soft_wrap=True)
        except Exception:  # a broken record never breaks the command (logging's convention)
            self.handleError(record)


def level_for(verbose: int, quiet: bool) -> int:
    """The ``tessera`` logger's level for ``-v`` given ``verbose`` times and ``-q``."""
    if quiet:
        return logging.ERROR
    return {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)


def configure(verbose: int, quiet: bool) -> None:
    """Set the level, install the one :class:`ConsoleHandler` (replacing an earlier one: a
    process may run several commands, as tests do) and the informational console's silence."""
    if verbose and quiet:
        fail("--verbose and --quiet contradict each other: give one of them")
    logger = logging.getLogger(LOGGER)
    for handler in [h for h in logger.handlers if isinstance(h, ConsoleHandler)]:
        logger.removeHandler(handler)
    logger.addHandler(ConsoleHandler())
    logger.setLevel(level_for(verbose, quiet))
    info.quiet = quiet
