"""Output files delivered whole or not at all, and checked before any budget is spent.

A private release is paid for in a ledger before its answers exist (docs/theory.md §9), so
everything that could stop it from being delivered must be found *before* the charge, and a
file must never be seen half-written. This module is the one place both the release layer
(answers, certificate, report) and the synthesizer (rows, run record) get that from:

* :func:`check_outputs` — before the charge: each requested path has a suffix its writer
  knows, is not a directory, lies in an existing directory where a file can be created (a
  probe file is created and removed there), and no two outputs share a path;
* :func:`staged` — after it: every file is written to a temporary file *in its own directory*
  (same file system, so the final rename is atomic), fsynced; only when every one of them is
  complete are they renamed over their targets (``os.replace``) and the directories fsynced.
  If anything fails first, the temporary files are removed and no target is touched;
* :func:`settled` — around everything after the charge: the ledger's charge is marked
  ``released`` when it all succeeded, ``aborted`` (its budget stays spent) when anything
  failed, and the error then says what is true at that moment (:class:`Delivery`,
  :func:`aborted_hint`): which charge stays spent, at which step it failed, and which
  requested files were put in place before the failure (none, unless it came while they were
  being renamed into place).

So a reader sees either the previous file (or none) or the complete new one, and a release
whose writing failed leaves no output behind. It sits in the data layer because it is a side
effect at the edge, usable by every layer above it.
"""

from __future__ import annotations

import contextlib
import decimal
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tessera.errors import TesseraError

__all__ = ["Delivery", "Output", "OutputError", "aborted_hint", "atomic", "check_outputs",
           "fsync_directory", "fsync_file", "settled", "staged", "write_text"]


class OutputError(TesseraError):
    """An output file that cannot be written (wrong suffix, missing directory, no permission)."""


@dataclass(frozen=True)
class Output:
    """One requested output file: its ``path``, ``what`` it holds (named in errors) and the
    ``suffixes`` its writer knows (lower case, with the dot; empty: any)."""

    path: Path
    what: str
    suffixes: tuple[str, ...] = ()

    @staticmethod
    def of(path: str | os.PathLike[str] | None, what: str,
           suffixes: Sequence[str] = ()) -> Output | None:
        """An :class:`Output`, or None when no path is given (the output was not asked for)."""
        return None if path is None else Output(Path(path), what, tuple(suffixes))


def check_outputs(outputs: Sequence[Output | None]) -> tuple[Output, ...]:
    """Every requested output (None entries skipped), each checked to be writable now; raises
    :class:`OutputError` naming the path and what is wrong, with a hint. Call it before a
    charge: whatever it refuses costs no budget."""
    wanted = tuple(o for o in outputs if o is not None)
    seen: dict[Path, Output] = {}
    for o in wanted:
        _check(o)
        key = o.path.absolute()
        if key in seen:
            raise OutputError(f"the {o.what} and the {seen[key].what} would be written to the "
                              "same file", where=str(o.path), hint="give each output its own path")
        seen[key] = o
    return wanted


def _check(o: Output) -> None:
    p = o.path
    suffix = p.suffix.lower()
    if o.suffixes and suffix not in o.suffixes:
        raise OutputError(
            f"cannot write the {o.what} as {suffix or 'a file without suffix'}", where=str(p),
            hint="use " + " or ".join(o.suffixes))
    if p.is_dir():
        raise OutputError(f"the {o.what} path is a directory", where=str(p),
                          hint="give a file name inside it")
    directory = _directory(p)
    if not directory.exists():
        raise OutputError(f"cannot write the {o.what}: directory {directory} does not exist",
                          where=str(p), hint=f"create it first (mkdir -p {directory})")
    if not directory.is_dir():
        raise OutputError(f"cannot write the {o.what}: {directory} is not a directory",
                          where=str(p))
    if p.exists() and not os.access(p, os.W_OK):
        raise OutputError(f"cannot write the {o.what}: the file exists and is read-only",
                          where=str(p), hint="choose another path or make it writable")
    try:  # the one reliable test: create (and remove) a file where the output will be made
        fd, probe = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".probe", dir=directory)
    except OSError as e:
        raise OutputError(f"cannot write the {o.what} in {directory}: {e.strerror or e}",
                          where=str(p), hint="choose a directory you can write to") from None
    os.close(fd)
    os.unlink(probe)


def _directory(p: Path) -> Path:
    return p.parent if str(p.parent) else Path(".")


def _temporary(p: Path) -> Path:
    """A new, empty temporary file beside ``p`` whose name keeps ``p``'s suffix (writers pick
    the format by suffix) and starts with a dot (hidden, never taken for the output)."""
    fd, name = tempfile.mkstemp(prefix=f".{p.stem}.", suffix=f".part{p.suffix}",
                                dir=_directory(p))
    try:  # mkstemp makes it 0600: give it the mode a plain open() would (an existing file's)
        os.fchmod(fd, _mode(p))
    finally:
        os.close(fd)
    return Path(name)


def _mode(p: Path) -> int:
    try:
        return p.stat().st_mode & 0o777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


@contextlib.contextmanager
def staged(paths: Sequence[str | os.PathLike[str]],
           placed: list[Path] | None = None) -> Iterator[tuple[Path, ...]]:
    """``with staged([a, b]) as (ta, tb):`` write each file to its temporary path; when the
    body returns, every temporary file is fsynced and only then renamed over its target, and
    each directory fsynced; if the body raises (or is interrupted), every temporary file is
    removed and no target is touched. Returns the temporary paths, in order. ``placed``: each
    target is appended to it once renamed into place (if a rename fails — an
    :class:`OutputError` naming the target — the targets before it are in place, and the
    temporary files not yet renamed are removed)."""
    targets = tuple(Path(p) for p in paths)
    temps: list[Path] = []
    try:
        for p in targets:
            temps.append(_temporary(p))
        yield tuple(temps)
        for t in temps:
            fsync_file(t)
        for k, (t, p) in enumerate(zip(temps, targets)):  # renames only: each atomic
            try:
                os.replace(t, p)
            except OSError as e:  # (a directory made at the target since the check, say)
                raise OutputError(f"cannot put the finished file in place: {e.strerror or e}",
                                  where=str(p)) from None
            temps[k] = p  # (in place: no longer a temporary file to remove)
            if placed is not None:
                placed.append(p)
    except BaseException:
        for t, p in zip(temps, targets):
            if t != p:
                with contextlib.suppress(OSError):
                    os.unlink(t)
        raise
    for directory in {_directory(p) for p in targets}:
        fsync_directory(directory)


@contextlib.contextmanager
def atomic(path: str | os.PathLike[str]) -> Iterator[Path]:
    """``with atomic(p) as tmp:`` write ``tmp``; it replaces ``p`` whole when the body returns
    (:func:`staged` for one file)."""
    with staged([path]) as (tmp,):
        yield tmp


class Settles(Protocol):
    """What :func:`settled` uses of a ledger (:class:`tessera.Ledger`)."""

    def mark_released(self, release_id: str) -> None: ...

    def mark_aborted(self, release_id: str) -> None: ...


@dataclass(eq=False)
class Delivery:
    """What has happened since a charge, for the error a failure raises (:func:`aborted_hint`):
    the ``requested`` output files, those ``placed`` (renamed into place, in order:
    :func:`staged`) and the ``step`` under way. Mutable on purpose: the release fills it in
    as it goes, and the failure reads it when it comes."""

    requested: tuple[Path, ...] = ()
    placed: list[Path] = field(default_factory=list)
    step: str = "computing the answers"


def aborted_hint(subject: str, charge: Any, unit: str, delivery: Delivery) -> str:
    """What a failure after the charge says (docs/theory.md §9.6), true when it comes: which
    charge stays spent (``subject`` #seq, label and cost in ``unit``, as the ledger records
    them), the step that failed, and which requested files were written (none, all, or those
    renamed into place before a rename failed — each complete)."""
    placed = [str(p) for p in delivery.placed]
    missing = [str(p) for p in delivery.requested if str(p) not in placed]
    if not placed:
        files = "no requested file was written"
    elif not missing:
        files = "every requested file was written before it: " + ", ".join(placed)
    else:
        files = (f"written before it (complete): {', '.join(placed)}; not written: "
                 f"{', '.join(missing)}")
    cost = decimal.Context(prec=6, rounding=decimal.ROUND_CEILING).create_decimal(
        repr(float(charge.cost))).normalize()  # (rounded up: still an upper bound)
    return (f"{subject} #{charge.seq} {charge.label!r} ({unit} ≤ {cost:f} alone) was charged "
            f"before this failure ({delivery.step}) and is marked aborted in the ledger: its "
            f"budget stays spent, and {files}")


@contextlib.contextmanager
def settled(book: Settles | None, charge: Any,
            aborted: str | Callable[[], str] | None = None) -> Iterator[None]:
    """``with settled(book, charge, hint):`` run everything after the charge (noise, files,
    callbacks); when the body returns, the charge is marked released; when it raises (or is
    interrupted), marked aborted — the budget stays spent (docs/theory.md §9.6) — and the
    error gets ``aborted`` (when given; a callable is called then, to say what is true at
    that moment, :func:`aborted_hint`): added to a :class:`~tessera.errors.TesseraError`'s
    hint, as a note to any other exception. Nothing is marked without a ledger or a charge
    (``None``)."""
    try:
        yield
    except BaseException as e:
        if book is not None and charge is not None:
            try:
                book.mark_aborted(charge.release_id)
            except TesseraError as f:
                e.add_note(f"(could not mark release {charge.release_id} aborted: {f})")
            text = aborted() if callable(aborted) else aborted
            if text and isinstance(e, TesseraError):
                e.hint = "; ".join(filter(None, [e.hint, text]))
            elif text:
                e.add_note(f"({text})")
        raise
    if book is not None and charge is not None:
        book.mark_released(charge.release_id)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; returns the path."""
    with atomic(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def fsync_file(path: Path) -> None:
    """Flush a file's data to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    """Make the renamed entries durable (POSIX); a no-op where a directory cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
