"""Errors that a user can act on.

Every error Tessera raises for bad input names *where* (file:line, column, attribute, query),
*what* was wrong and, where possible, a *hint*. The CLI prints ``str(error)`` as one line and
exits non-zero without a traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence


class TesseraError(Exception):
    """Base class: ``where: message (hint: ...)``."""

    def __init__(self, message: str, *, hint: str | None = None, where: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.where = where

    def located(self, where: str) -> TesseraError:
        """The same error with a location prefix (keeps the innermost detail)."""
        inner = f"{self.where}: " if self.where else ""
        return type(self)(f"{inner}{self.message}", hint=self.hint, where=where)

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f" (hint: {self.hint})"
        return text


class SchemaError(TesseraError):
    """A malformed or inconsistent public schema (Domain)."""

    @staticmethod
    def combine(errors: Sequence[SchemaError]) -> SchemaError:
        """Every error found in one schema: the error itself when there is one, else a
        :class:`SchemaErrors` printed one per line (as a workload's)."""
        return errors[0] if len(errors) == 1 else SchemaErrors(errors)


class SchemaErrors(SchemaError):
    """All the errors found in one schema, one per line (each keeps its hint)."""

    def __init__(self, errors: Sequence[SchemaError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))

    def located(self, where: str) -> SchemaErrors:
        return SchemaErrors([e.located(where) for e in self.errors])  # type: ignore[misc]

    def __str__(self) -> str:
        return self.message


class QueryError(TesseraError):
    """A query that cannot be parsed or does not fit the schema."""


class DataError(TesseraError):
    """Data that does not fit the declared public domain."""


class ResourceError(TesseraError):
    """A computation that would exceed a resource limit (memory, width), refused up front."""


def closest(value: str, choices: Iterable[str], cutoff: float = 0.0) -> str | None:
    """The closest valid spelling: the same word in another case first, then difflib's best.

    With ``cutoff`` 0 (values of a categorical attribute) there is always an answer: the user
    must see a valid value. Names of keys and attributes use a higher cutoff, so an unrelated
    word is not suggested.
    """
    pool = [str(c) for c in choices]
    folded = [c for c in pool if c.casefold() == str(value).casefold()]
    if folded:
        return folded[0]
    match = difflib.get_close_matches(str(value), pool, n=1, cutoff=cutoff)
    return match[0] if match else None


def did_you_mean(value: str, choices: Iterable[str], cutoff: float = 0.0) -> str | None:
    guess = closest(value, choices, cutoff)
    return f"did you mean {guess!r}?" if guess is not None else None
