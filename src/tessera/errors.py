"""Errors that a user can act on.

Every error Tessera raises for bad input names *where* (file:line, column, attribute, query),
*what* was wrong and, where possible, a *hint*. The CLI prints ``str(error)`` as one line and
exits non-zero without a traceback.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path


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


#: Errors of one file printed before the rest are only counted ("… and 19,990 more errors").
MAX_ERRORS_SHOWN = 10


def capped_lines(errors: Sequence[Exception], limit: int = MAX_ERRORS_SHOWN) -> str:
    """One line per error, the first ``limit`` of them, then how many more there are."""
    lines = [str(e) for e in errors[:limit]]
    if len(errors) > limit:
        more = len(errors) - limit
        lines.append(f"… and {more:,} more error{'s' if more > 1 else ''}")
    return "\n".join(lines)


class SchemaErrors(SchemaError):
    """All the errors found in one schema, one per line (each keeps its hint; the first
    :data:`MAX_ERRORS_SHOWN`, then a count)."""

    def __init__(self, errors: Sequence[SchemaError]) -> None:
        self.errors = list(errors)
        super().__init__(capped_lines(self.errors))

    def located(self, where: str) -> SchemaErrors:
        return SchemaErrors([e.located(where) for e in self.errors])  # type: ignore[misc]

    def __str__(self) -> str:
        return self.message


class QueryError(TesseraError):
    """A query that cannot be parsed or does not fit the schema."""


class DataError(TesseraError):
    """Data that does not fit the declared public domain."""


class TesseraWarning(UserWarning):
    """Something the user should know that is not an error; the CLI prints it as one
    ``warning:`` line on stderr."""


class DataWarning(TesseraWarning):
    """About the data (an empty data set under add/remove neighbours)."""


class QueryWarning(TesseraWarning):
    """About a workload (a query name used twice, made unique)."""


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


# -- reading the user's text files -------------------------------------------------------------


def read_text(path: str | os.PathLike[str], what: str,
              error: type[TesseraError] = TesseraError) -> str:
    """The UTF-8 text of a schema or workload file: an unreadable file or bytes that are not
    UTF-8 are one ``error`` naming the file, the line and column and the byte (a leading BOM is
    dropped)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise error(f"cannot read {what}: {e.strerror or e}", where=str(p)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        start = data.rfind(b"\n", 0, e.start) + 1
        line = data.count(b"\n", 0, e.start) + 1
        raise error(
            f"the {what} is not UTF-8 text: byte 0x{data[e.start]:02x} at line {line}, column "
            f"{e.start - start + 1}",
            where=f"{p}:{line}",
            hint="save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None


def syntax_error(path: str | os.PathLike[str], kind: str, e: Exception,
                 error: type[TesseraError] = TesseraError) -> TesseraError:
    """A JSON or YAML syntax error of a user's file as one line naming the file, line and
    column (PyYAML's own text names ``"<unicode string>"`` and spans several lines)."""
    line = getattr(e, "lineno", None)
    col = getattr(e, "colno", None)
    problem = getattr(e, "msg", None) if line is not None else None
    mark = getattr(e, "problem_mark", None)
    if mark is not None:
        line, col = mark.line + 1, mark.column + 1
        problem = getattr(e, "problem", None)
        context, cmark = getattr(e, "context", None), getattr(e, "context_mark", None)
        if context and cmark is not None:
            problem = (f"{problem} ({context} at line {cmark.line + 1}, column "
                       f"{cmark.column + 1})")
    if not problem:
        problem = " ".join(str(e).replace('"<unicode string>"', f'"{path}"').split())
    where = f"{path}:{line}:{col}" if line and col else f"{path}:{line}" if line else str(path)
    return error(f"not valid {kind}: {problem}", where=where)
