"""The budget ledger's SQLite file: schema, append-only triggers, connections, durability, and
the conversion between its rows and the ledger's records (:mod:`tessera.release.ledger_records`),
workloads and costs. What is charged, and when, is :class:`tessera.release.ledger.Ledger`'s call.

File format: the rollback journal (``journal_mode=DELETE``), so that at rest the ledger is one
self-contained file that can be copied (a WAL file would hold committed charges outside it);
``synchronous=FULL`` (and ``fullfsync`` on macOS) for durability. A process killed at any point
leaves either the whole charge or none of it (SQLite's atomic commit), and a charge committed
before its answers were written stays charged. Triggers make the history append-only: charges
are never deleted, only their status changes (``charged`` → ``released`` or ``aborted``), and no
charge can be inserted whose recorded spent budget exceeds the total. A new file appears
atomically, fully initialised, or not at all (:func:`create_file`).

Every connection is in autocommit mode with explicit transactions: :func:`snapshot` reads in
one consistent view, :func:`write_transaction` holds SQLite's write lock (``BEGIN IMMEDIATE``,
taken before anything is read) until it commits, or rolls back if its body raises; SQLite
errors surface as :class:`~tessera.release.ledger_records.LedgerError`, a lock held past the
timeout as :class:`~tessera.release.ledger_records.LedgerBusy`.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import tempfile
import urllib.parse
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.data.outputs import fsync_directory, fsync_file
from tessera.errors import TesseraError
from tessera.release.ledger_records import Charge, LedgerBusy, LedgerError
from tessera.schema.domain import Domain
from tessera.workload.aggregates import LinearQuery
from tessera.workload.bdd import BooleanQuery, is_bdd_text, parse_bdd
from tessera.workload.clause import BooleanClause
from tessera.workload.families import Partition
from tessera.workload.parse import parse_query
from tessera.workload.query import Query
from tessera.workload.workload import Workload

__all__ = [
    "APPLICATION_ID",
    "CHARGE_COLUMNS",
    "DEFAULT_TIMEOUT",
    "SCHEMA_VERSION",
    "charge_from_row",
    "connection",
    "create_file",
    "domain_text",
    "now",
    "read_costs",
    "snapshot",
    "spent_bounds",
    "has_linear",
    "linear_doc",
    "stored_clauses",
    "stored_costs",
    "stored_linear",
    "stored_workload",
    "upgrade",
    "write_transaction",
]

#: Version of the ledger's SQLite schema (``PRAGMA user_version`` and ``meta.schema_version``)
#: that new files get. Version 2 adds the ``linear`` column (a release with sums of measures,
#: charged as linear queries: :func:`stored_linear`); a version-1 file is read as it is and
#: upgraded (:data:`UPGRADE`) in the transaction of its first such charge, so that an older
#: Tessera, which would not count that column, refuses the file instead of undercounting.
SCHEMA_VERSION = 2
#: The versions this code reads.
READABLE_VERSIONS = (1, 2)
#: ``PRAGMA application_id`` of a Tessera ledger ("TSLG").
APPLICATION_ID = 0x54534C47
#: Seconds to wait for another process's write lock; above the solve's time limit, since a
#: charge holds the lock while it bounds the union.
DEFAULT_TIMEOUT = 120.0

_SCHEMA = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value NOT NULL
) WITHOUT ROWID;

CREATE TABLE charges (
    seq            INTEGER PRIMARY KEY AUTOINCREMENT,
    release_id     TEXT NOT NULL UNIQUE,
    created        TEXT NOT NULL,
    label          TEXT NOT NULL,
    mechanism      TEXT NOT NULL,
    queries        TEXT NOT NULL,   -- JSON list: the canonical WHERE clause of each query
    names          TEXT NOT NULL,   -- JSON list: the queries' names
    costs          TEXT NOT NULL,   -- JSON list: ε_q (pure) or ρ_q (zCDP) per query
    n_queries      INTEGER NOT NULL CHECK (n_queries > 0),
    cost           REAL NOT NULL CHECK (cost >= 0),  -- upper bound: this release alone
    spent_before   REAL NOT NULL CHECK (spent_before >= 0),
    spent_after    REAL NOT NULL CHECK (spent_after >= spent_before OR method = 'union'),
    spent_lower    REAL NOT NULL CHECK (spent_lower <= spent_after),
    exact          INTEGER NOT NULL CHECK (exact IN (0, 1)),
    method         TEXT NOT NULL CHECK (method IN ('first', 'union', 'sequential')),
    status         TEXT NOT NULL DEFAULT 'charged'
                   CHECK (status IN ('charged', 'released', 'aborted')),
    status_changed TEXT
);

CREATE TABLE bounds (
    through_seq INTEGER NOT NULL REFERENCES charges(seq),
    upper       REAL NOT NULL,
    lower       REAL NOT NULL,
    exact       INTEGER NOT NULL CHECK (exact IN (0, 1)),
    method      TEXT NOT NULL,
    computed    TEXT NOT NULL,
    CHECK (0 <= lower AND lower <= upper)
);
CREATE INDEX bounds_by_seq ON bounds (through_seq);

CREATE TRIGGER meta_immutable BEFORE UPDATE ON meta
BEGIN SELECT RAISE(ABORT, 'ledger settings are immutable'); END;
CREATE TRIGGER meta_kept BEFORE DELETE ON meta
BEGIN SELECT RAISE(ABORT, 'ledger settings are immutable'); END;
CREATE TRIGGER charges_kept BEFORE DELETE ON charges
BEGIN SELECT RAISE(ABORT, 'a charge is never deleted: spent budget is never refunded'); END;
CREATE TRIGGER charges_immutable BEFORE UPDATE OF
    seq, release_id, created, label, mechanism, queries, names, costs, n_queries, cost,
    spent_before, spent_after, spent_lower, exact, method ON charges
BEGIN SELECT RAISE(ABORT, 'a charge is immutable: only its status changes'); END;
CREATE TRIGGER charges_status BEFORE UPDATE OF status ON charges
WHEN OLD.status <> 'charged' AND NEW.status <> OLD.status
BEGIN SELECT RAISE(ABORT, 'a released or aborted charge keeps its status'); END;
CREATE TRIGGER charges_within_total BEFORE INSERT ON charges
WHEN NEW.spent_after > (SELECT value FROM meta WHERE key = 'total')
BEGIN SELECT RAISE(ABORT, 'the charge exceeds the total budget'); END;
CREATE TRIGGER bounds_immutable BEFORE UPDATE ON bounds
BEGIN SELECT RAISE(ABORT, 'bounds are append-only'); END;
CREATE TRIGGER bounds_kept BEFORE DELETE ON bounds
BEGIN SELECT RAISE(ABORT, 'bounds are append-only'); END;
"""

#: Version 1 → 2: the ``linear`` column (immutable like the others) and the version itself.
UPGRADE = """
ALTER TABLE charges ADD COLUMN linear TEXT;  -- JSON: a release's linear queries (measures)

DROP TRIGGER charges_immutable;
CREATE TRIGGER charges_immutable BEFORE UPDATE OF
    seq, release_id, created, label, mechanism, queries, names, costs, n_queries, cost,
    spent_before, spent_after, spent_lower, exact, method, linear ON charges
BEGIN SELECT RAISE(ABORT, 'a charge is immutable: only its status changes'); END;

DROP TRIGGER meta_immutable;
UPDATE meta SET value = 2 WHERE key = 'schema_version';
CREATE TRIGGER meta_immutable BEFORE UPDATE ON meta
BEGIN SELECT RAISE(ABORT, 'ledger settings are immutable'); END;

PRAGMA user_version = 2;
"""

CHARGE_COLUMNS = (
    "seq, release_id, created, label, mechanism, n_queries, cost, spent_before, spent_after, "
    "spent_lower, exact, method, status"
)

#: The files SQLite may keep next to the ledger (a stale one must not touch a new ledger).
_SIDE_FILES = ("-journal", "-wal", "-shm")


# -- creating and connecting ------------------------------------------------------------------


def create_file(p: Path, meta: dict[str, Any], *, overwrite: bool,
                version: int = SCHEMA_VERSION) -> None:
    """Create the ledger file at ``p`` with the settings ``meta``: atomically, fully initialised,
    or not at all. An existing file (or a stale journal next to it) is an error unless
    ``overwrite``, which replaces it. ``version`` 2 is version 1 upgraded (:data:`UPGRADE`);
    1 only to test the upgrade of old files."""
    for side in _SIDE_FILES:
        if Path(str(p) + side).exists() and not overwrite:
            raise LedgerError(
                f"a stale {side[1:]} file exists next to the ledger path", where=str(p),
                hint=f"remove {p.name}{side} (it belongs to an older file) or pass "
                "overwrite=True")
    if p.exists() and not overwrite:
        raise LedgerError("a ledger (or another file) already exists here", where=str(p),
                          hint="use it as it is (it keeps the spent budget), or choose another "
                          "path; replacing it would discard the record of the spent budget")
    directory = p.parent if str(p.parent) else Path(".")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".init", dir=directory)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=DELETE")
            con.execute("PRAGMA synchronous=FULL")
            con.execute(f"PRAGMA application_id={APPLICATION_ID}")
            con.execute("PRAGMA user_version=1")
            con.execute("BEGIN IMMEDIATE")
            for statement in _statements(_SCHEMA):
                con.execute(statement)
            con.executemany("INSERT INTO meta (key, value) VALUES (?, ?)",
                            (meta | {"schema_version": 1}).items())
            if version >= 2:
                upgrade(con)
            con.execute("COMMIT")
        finally:
            con.close()
        fsync_file(tmp)
        if overwrite:
            for side in _SIDE_FILES:  # a hot journal of the old file must not touch the new
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(str(p) + side)
            os.replace(tmp, p)
        else:
            try:
                os.link(tmp, p)  # atomic, and fails if the name exists (no race with init)
            except FileExistsError:
                raise LedgerError("a ledger (or another file) already exists here",
                                  where=str(p),
                                  hint="use it as it is, or choose another path") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_directory(directory)


def connect(path: Path, timeout: float) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), never creating the file."""
    uri = "file:" + urllib.parse.quote(os.fspath(path.absolute())) + "?mode=rw"
    try:
        con = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None)
    except sqlite3.Error as e:
        raise LedgerError(f"cannot open the ledger: {e}", where=str(path)) from None
    try:
        con.execute("PRAGMA synchronous=FULL")
        con.execute("PRAGMA fullfsync=ON")
        con.execute("PRAGMA foreign_keys=ON")
    except sqlite3.Error as e:
        con.close()
        raise LedgerError(f"cannot open the ledger: {e}", where=str(path)) from None
    return con


@contextlib.contextmanager
def sqlite_errors(path: Path, timeout: float) -> Iterator[None]:
    """SQLite errors as :class:`LedgerError`; a lock held past the timeout as
    :class:`LedgerBusy`."""
    try:
        yield
    except sqlite3.OperationalError as e:
        text = str(e)
        if "locked" in text or "busy" in text:
            raise LedgerBusy(
                f"the ledger stayed locked by another process for {timeout:g} s", where=str(path),
                hint="another release is being charged (it holds the lock while it bounds the "
                "union): retry, or open the ledger with a longer timeout") from None
        raise LedgerError(f"SQLite: {text}", where=str(path)) from None
    except sqlite3.DatabaseError as e:
        raise LedgerError(f"SQLite: {e}", where=str(path),
                          hint="is this file a Tessera ledger? check it with Ledger.check") \
            from None


@contextlib.contextmanager
def connection(path: Path, timeout: float) -> Iterator[sqlite3.Connection]:
    """A connection (:func:`connect`) whose SQLite errors surface as :func:`sqlite_errors`
    says; closed on exit."""
    con = connect(path, timeout)
    try:
        with sqlite_errors(path, timeout):
            yield con
    finally:
        con.close()


@contextlib.contextmanager
def snapshot(path: Path, timeout: float) -> Iterator[sqlite3.Connection]:
    """A read transaction: one consistent view of the file, rolled back on exit."""
    with connection(path, timeout) as con:
        con.execute("BEGIN")
        try:
            yield con
        finally:
            con.execute("ROLLBACK")


@contextlib.contextmanager
def write_transaction(path: Path, timeout: float) -> Iterator[sqlite3.Connection]:
    """A write transaction: SQLite's write lock (``BEGIN IMMEDIATE``, taken before anything is
    read) held until COMMIT at the end of the body; rolled back if the body (or the commit)
    raises, whatever it raises."""
    with connection(path, timeout) as con:
        con.execute("BEGIN IMMEDIATE")
        try:
            yield con
            con.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            raise


def upgrade(con: sqlite3.Connection) -> None:
    """Upgrade a version-1 file to version 2 (:data:`UPGRADE`), inside the caller's write
    transaction (every statement is transactional in SQLite: all or nothing); a version-2 file
    is left as it is."""
    if has_linear(con):
        return
    for statement in _statements(UPGRADE):
        con.execute(statement)


def has_linear(con: sqlite3.Connection) -> bool:
    """Whether the file has the ``linear`` column (version 2)."""
    return any(r[1] == "linear" for r in con.execute("PRAGMA table_info(charges)"))


def _statements(script: str) -> list[str]:
    """Split the schema into statements (triggers contain ';' inside BEGIN ... END)."""
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        raise ValueError("incomplete statement in the ledger schema")
    return out


# -- rows and records -------------------------------------------------------------------------


def charge_from_row(row: Sequence[Any]) -> Charge:
    """The :class:`Charge` of a row whose columns are :data:`CHARGE_COLUMNS`."""
    (seq, release_id, created, label, mechanism, n_queries, cost, before, after, lower, exact,
     method, status) = row
    return Charge(str(release_id), int(seq), str(created), str(label), str(mechanism),
                  int(n_queries), float(cost), float(before), float(after), float(lower),
                  bool(exact), method, status)


def spent_bounds(con: sqlite3.Connection) -> tuple[float, float, bool]:
    """(upper, lower, exact) for every release so far: the best recorded bounds on S."""
    row = con.execute(
        "SELECT MIN(upper), MAX(lower) FROM bounds"
        " WHERE through_seq = (SELECT MAX(seq) FROM charges)").fetchone()
    if row is None or row[0] is None:
        return 0.0, 0.0, True
    upper, lower = float(row[0]), float(row[1])
    exact_row = con.execute(
        "SELECT 1 FROM bounds WHERE through_seq = (SELECT MAX(seq) FROM charges)"
        " AND exact = 1 AND upper = ?", (upper,)).fetchone()
    return upper, lower, bool(exact_row is not None or upper <= lower)


def stored_costs(workload: Workload, c: npt.NDArray[np.float64]) -> Any:
    """Costs as stored: a list (predicate workloads), or ``{"queries": [...], "families":
    [one cost per family]}`` — a family's cells share one cost (checked)."""
    if not workload.partitions:
        return c.tolist()
    per_family = []
    for p, cells in workload.family_slices():
        block = c[cells]
        if block.size and not np.all(block == block[0]):
            raise LedgerError(f"family {p.name!r}: its cells have different costs; the ledger "
                              "stores one cost per family")
        per_family.append(float(block[0]) if block.size else 0.0)
    return {"queries": c[: len(workload.queries)].tolist(), "families": per_family}


def read_costs(workload: Workload, doc: Any) -> npt.NDArray[np.float64]:
    """The per-query costs (expanded order) from their stored form."""
    if not isinstance(doc, dict):
        return np.asarray(doc, dtype=np.float64)
    parts = [np.asarray(doc["queries"], dtype=np.float64)]
    for (_, cells), cost in zip(workload.family_slices(), doc["families"]):
        parts.append(np.full(cells.stop - cells.start, float(cost)))
    return np.concatenate(parts)


def domain_text(domain: Domain) -> str:
    """The schema as the ledger stores it: compact JSON, attributes in their order."""
    try:
        # attribute order is part of the schema (codes, witness rows): never sort the keys
        return json.dumps(domain.to_dict(), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise LedgerError(f"the schema cannot be stored as JSON: {e}") from None


def now() -> str:
    """The current time (UTC, microseconds), as the ledger's records state it."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def stored_clauses(workload: Workload, domain: Domain, schema: str, where: str) -> Any:
    """The queries' canonical WHERE clauses, checked to parse back to the same queries with
    the ledger's ``domain`` (stored as the JSON ``schema``: what a later charge will rebuild);
    with structured families, a mapping ``{"clauses": [...], "families": [...]}`` (families in
    their compact form). ``where``: the ledger's path, for errors."""
    if domain_text(workload.domain) != schema:
        raise LedgerError("the workload is over another schema than the ledger's",
                          where=where, hint="load the workload with the data set's schema")
    if workload.n_queries == 0:
        raise LedgerError("the release has no queries", where=where)
    clauses = []
    managers: dict[str, Any] = {}
    for i, q in enumerate(workload.queries):
        if isinstance(q, BooleanQuery):  # stored as its canonical text (a workload file's)
            text = q.canonical_text()
            if parse_bdd(text, domain, managers).canonical_text() != text:
                raise LedgerError(f"query {workload.describe(i)} does not survive its text "
                                  f"{text[:80]!r}", where=where)
            clauses.append(text)
            continue
        if not isinstance(q, (Query, BooleanClause)):
            raise LedgerError(f"query {workload.describe(i)} is a {type(q).__name__}, not a "
                              "predicate query, a Boolean clause or a BDD query; the ledger "
                              "stores workloads as text", where=where)
        text = q.to_sql(domain)
        back = parse_query(text, domain)
        if back != q and not (back.is_contradiction() and q.is_contradiction()):
            raise LedgerError(f"query {workload.describe(i)} does not survive its SQL form "
                              f"{text!r}", where=where)
        clauses.append(text)
    if not workload.partitions:
        return clauses
    return {"clauses": clauses,
            "families": [p.to_dict() | {"weight": p.weight} for p in workload.partitions]}


def stored_workload(domain: Domain, release_id: str, clauses_json: str, where: str) -> Workload:
    """The stored workload of a release (queries re-parsed, families rebuilt) from its
    :func:`stored_clauses` in JSON. ``where``: the ledger's path, for errors."""
    doc = json.loads(clauses_json)
    clauses = doc["clauses"] if isinstance(doc, dict) else doc
    managers: dict[str, Any] = {}  # BDD queries of one variable order share a manager
    try:
        queries = tuple(parse_bdd(str(text), domain, managers) if is_bdd_text(str(text))
                        else parse_query(str(text), domain) for text in clauses)
        families = tuple(Partition.from_dict(domain, f)
                         for f in (doc.get("families", []) if isinstance(doc, dict) else []))
    except TesseraError as e:
        raise LedgerError(f"release {release_id}: a stored query does not parse: {e}",
                          where=where) from None
    return Workload(domain, queries, tuple(clauses), (1.0,) * len(queries), None, families)


def linear_doc(linear: Sequence[LinearQuery]) -> list[Any]:
    """What a release charged as linear queries stores besides their conditions (the
    ``queries`` column) and costs: per query ``null`` (a count) or ``{"attribute", "lo", "hi",
    "exponent"}`` (a sum of clamp(attribute, lo, hi), a measure's in units of 10^exponent;
    ``exponent`` null for a schema attribute)."""
    return [None if lq.role == "count" else
            {"attribute": lq.attribute, "lo": lq.lo, "hi": lq.hi, "exponent": lq.exponent}
            for lq in linear]


def stored_linear(domain: Domain, release_id: str, conditions: Workload, doc: Any,
                  where: str) -> tuple[LinearQuery, ...]:
    """The linear queries of a release charged as such: ``conditions`` (its stored queries,
    re-parsed: :func:`stored_workload`) with the sums of :func:`linear_doc` (``doc``). Only
    what the cost depends on is rebuilt (statement, aggregate and key are 0). ``where``: the
    ledger's path, for errors."""
    if not isinstance(doc, list) or len(doc) != conditions.n_queries:
        raise LedgerError(f"release {release_id}: its linear queries do not match its "
                          "conditions", where=where)
    out = []
    for q, d in zip(conditions.queries, doc):
        if d is None:
            out.append(LinearQuery(0, 0, (), "count", q))
            continue
        try:
            name, lo, hi, e = str(d["attribute"]), int(d["lo"]), int(d["hi"]), d["exponent"]
        except (KeyError, TypeError, ValueError):
            raise LedgerError(f"release {release_id}: a stored sum is malformed: {d!r}",
                              where=where) from None
        if not lo <= hi or (e is None and name not in domain.names):
            raise LedgerError(f"release {release_id}: a stored sum is malformed: {d!r}",
                              where=where)
        out.append(LinearQuery(0, 0, (), "sum", q, name, lo, hi,
                               exponent=None if e is None else int(e)))
    return tuple(out)
