"""The budget ledger: one SQLite file per data set, charged before any answer leaves the process.

A data set has a total privacy budget B, in pure ε-DP or in ρ-zCDP, under one neighbour relation
(``docs/theory.md`` §9, accounting across releases). Every release k is a workload Q_k of counting
queries with a cost per query c_q: ε_q = Δ/b_q for Laplace noise of scale b_q, or
ρ_q = Δ²/(2σ_q²) for Gaussian noise of standard deviation σ_q (Δ = 1 for a count). A row x
touches the queries I(x) = {q : q(x) = 1}; its loss after releases 1..k is

    L_k(x) = Σ_{j ≤ k} Σ_{q ∈ Q_j ∩ I(x)} c_q          (add/remove one row)
    L_k(x, y) = Σ_{j ≤ k} Σ_{q ∈ Q_j ∩ (I(x) Δ I(y))} c_q   (substitute x by y)

(pure ε and ρ both compose by addition) and the **spent** budget is S_k = max over rows (pairs)
of L_k: the maximum weighted overlap of the *union* Q_1 ∪ … ∪ Q_k with weights c, computed by
:func:`tessera.overlap.max_overlap` (``comp`` pure on the costs; ``docs/overlap.md``). Releases
over disjoint sub-populations therefore cost what parallel composition says (the maximum), not
their sum; overlapping ones cost the sum where they overlap.

Why this is a valid privacy filter
----------------------------------
Releases are chosen adaptively: Q_k and its costs may depend on every earlier answer. Fix
neighbours D, D' that differ in a row x (or in x → y). Given the transcript so far, release k
answers the queries of Q_k with independent noise, and only the queries in I(x) (I(x) Δ I(y))
differ between D and D', each by at most Δ; so release k is, for this pair and conditionally
on the past, ε_k(x)-DP with ε_k(x) = Σ_{q ∈ Q_k ∩ I(x)} ε_q (ρ_k(x)-zCDP likewise): ε_k(x) is
x's *individual* privacy loss in the sense of Feldman & Zrnic, "Individual Privacy Accounting
via a Rényi Filter" (NeurIPS 2021, arXiv:2008.11193). The ledger admits release k only if an
upper bound U_k ≥ S_k = max_x Σ_{j ≤ k} ε_j(x) satisfies U_k ≤ B, and U_k is computed from the
transcript (the workloads and costs) alone — never from the data; its solver's time limit only
makes U_k looser, and a refusal reveals nothing about the data. So along *every* transcript and
for *every* row x at once, Σ_j ε_j(x) ≤ B: each row's individual filter holds.

* Pure ε-DP: the log-likelihood ratio of a transcript is the sum of the per-release ratios,
  each bounded pointwise by ε_j(x); their sum is ≤ B whatever the adaptive choices, so the
  interaction is B-DP. This is the pure-DP privacy filter of Rogers, Roth, Ullman & Vadhan,
  "Privacy Odometers and Filters: Pay-as-you-Go Composition" (NeurIPS 2016, arXiv:1605.08294),
  applied with each row's own losses.
* ρ-zCDP: zCDP is Rényi DP of every order α with ε(α) = αρ; the Rényi filter of Feldman & Zrnic
  (Thm. 3.1 there: adaptively chosen RDP losses that sum to ≤ B(α) along every transcript give
  B(α)-RDP) applied at each α with Σ_j ρ_j(x) ≤ B gives B-zCDP. Whitehouse, Ramdas, Rogers & Wu,
  "Fully Adaptive Composition in Differential Privacy" (ICML 2023, arXiv:2203.05481) show that
  such filters lose nothing against fixed-in-advance composition.

The maximum over the whole domain 𝔻 (not over the rows of the data) is what makes the spent
budget public; bounding each row's loss rather than summing the releases' worst cases is what
lets disjoint releases compose in parallel.

A person ledger
---------------
A ledger made for one person (``unit``: a privacy id and at most K rows each, docs/theory.md
§3.13) bounds what one person pays: every release is charged its row-level costs c_q (what a
row pays, per unit of sensitivity, as always), and the spent budget is K·S_k (pure) or
K²·S_k (ρ) — S_k the row-level maximum above, under substitution the larger of the add/remove
and the substitution one. This is a valid filter per person: release j moves a person's
answers by the sum of their ≤ K kept rows' changes, so given the past it costs that person at
most Σ_{x∈P} ε_j(x) (pure, triangle inequality) or K·Σ_{x∈P} ρ_j(x) (zCDP, Cauchy–Schwarz);
summed over the releases, at most K·max_x L_k(x) resp. K²·max_x L_k(x), a public bound, and
the filters above apply to each person's losses. Every release charged to it must have read
the data bounded to the same unit (a row-level release leaves a person's rows unbounded; one
bounded to another id or K is another unit): :meth:`Ledger.charge` refuses any other unit
before anything is recorded.

Sums of measures
----------------
A release that sums a *measure* (a data column outside the schema, summed as
Σ clamp(u, lo_q, hi_q) in integer units u of 10^e: docs/theory.md §3.15) has no count pieces
over the schema: its pieces live on a cost domain whose grid for the measure is its own clamps'
breakpoints, and these differ between releases. :meth:`Ledger.charge_linear` therefore stores
the release's linear queries themselves (conditions as SQL, clamps in units, the unit), and
every solve cuts *all* such releases together into count pieces on the **merged** cost domain:
the schema and, per measure, the union B* of every release's breakpoints (counting releases are
re-parsed on it; they do not read the measure). The combined loss of a record (x, r) is the
loss of the concatenated linear queries at u(r), and the union of the breakpoints contains a
maximiser of it over all real r (docs/theory.md §3.15, "Measures across releases": the Lemma's
proof needs only every clamp bound, and 0 where a clamp straddles it), so the union bound is the
spent budget exactly under add/remove and pure-ε substitution, and K or K² times it for a
person. Under ρ-zCDP substitution the pieces only bound it from above: when every release was
charged as linear queries the union is solved by the exact pair program instead
(:func:`tessera.release.linear_costs.linear_cost_bound` on the concatenated queries); beside
counting releases the pieces' bound is used, recorded as exact only when a witness pair's true
cost (evaluated directly) reaches it. This needs *one* u(r) per row: every
release sums a measure in the unit of its first charge (:meth:`Ledger.at_units` adapts a
workload before it is planned; a release in another unit is refused before anything is
recorded). The sequential bound below stays valid as the other arm of the minimum.

A ledger made to count people (``--count people``) cuts nothing into pieces: a person's total
in a group is clamped once, so every solve is the maximum weighted coverage of K records (2K
under substitution) over all its releases' conditions together — an aggregate release's
linear queries with the scores c_q·D_q^p, a counting release's queries with their costs
(docs/theory.md §3.14, "Aggregates counting people"; :meth:`Ledger._people_bound`).

Charging
--------
:meth:`Ledger.charge` runs in ONE ``BEGIN IMMEDIATE`` transaction (SQLite's write lock, taken
before anything is read): read every earlier charge, bound S_k, refuse with
:class:`BudgetExceeded` if the bound exceeds B (no tolerance: a bound equal to B is admitted,
anything above it is refused), else insert the charge and COMMIT with ``synchronous=FULL``. The
caller may let answers leave the process only after :meth:`charge` returns. A charge is never
refunded: a release aborted (or killed) after charging may already have leaked, so it stays
counted. The upper bound used is the smaller of

* the union bound: ``max_overlap`` on the union of every workload (exact or a proven upper
  bound within ``time_limit``), and
* the sequential bound U_{k-1} + γ_c(Q_k) (max_x (P(x) + N(x)) ≤ max P + max N).

Arithmetic is exact (:class:`CostBound`). Every number in the ledger — cost, total, bound — is
the decimal its float prints as (``repr``, which is also what the JSON record stores): 0.1 is
one tenth, so 0.3 + 0.7 and ten releases of 0.1 use a total of 1 exactly. The solver works on
the costs times their least common denominator, integers whose sums floating point adds
exactly; totals and sequential sums are :class:`~fractions.Fraction`; stored bounds are rounded
up, lower bounds down. So no tolerance is applied anywhere: a bound equal to the total is
admitted, anything above it refused, and what :attr:`LedgerSummary.remaining` reports (rounded
down to 12 digits) can always be charged. Costs with too many digits for 51-bit integers (costs
*computed* in floating point, such as 1/3) are rounded *up* to a multiple of 2^−k instead, which
only raises the bound, by ~1e-15 relative; when that alone would refuse a release (bound above
the total, witness row below it) the decision is settled exactly by enumerating the maximal
overlapping sets, when they are few (add/remove neighbours). Otherwise such a release is
refused, and the refusal says it overshoots by a rounding error: callers that calibrate noise to
exhaust the budget should aim a hair below it (× (1 − 1e-9)); their own floating-point
arithmetic needs that anyway. (A decimal and its binary float differ by under one ulp — immaterial
next to the floating-point error of noise samplers themselves; the decimal is what the record
says.)

Concurrency: a charge holds SQLite's write lock while it bounds the union (at most
``time_limit``); other writers wait up to ``timeout`` (default 120 s, above the default 30 s
time limit) and then get :class:`LedgerBusy`; readers (:meth:`Ledger.summary`) are not blocked
until the commit itself. Two processes racing for the last budget are serialised by the lock:
the second one reads the first one's charge before it decides.

With ``fast_path=True`` the union solve is skipped whenever the sequential bound already fits
in B: valid, faster, but the recorded spent budget can then exceed the union's (say, 2 instead
of 1 for two disjoint releases); :meth:`Ledger.tighten` recomputes it later.

The file (:mod:`tessera.release.ledger_store`) is one self-contained SQLite file, durable at
every commit, whose triggers make the history append-only: charges are never deleted, only their
status changes (``charged`` → ``released`` or ``aborted``), and no charge can be inserted whose
recorded spent budget exceeds the total. The bounds themselves are computed without SQLite, in
exact arithmetic (:mod:`tessera.release.exact_costs`, :mod:`tessera.release.decimals`); the
records and errors are in :mod:`tessera.release.ledger_records`.

Why this module is long (about 850 lines): the first 130 are this docstring, the privacy
argument (why charging this way is a valid filter) and the rules of exact arithmetic and
locking that the code relies on, kept next to the one class that implements them; the code is
the :class:`Ledger` class (and :class:`Part`, one release as the solver sees it), whose charge,
status and read paths share its settings and its caches of parsed workloads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.data.outputs import settled
from tessera.errors import QueryError
from tessera.overlap.linear import pieces
from tessera.overlap.linear_pairs import change_cost
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.release.decimals import (
    decimal_value,
    float_down,
    float_up,
    format_bound,
    format_budget,
    remaining_budget,
)
from tessera.release.exact_costs import (
    DEFAULT_TIME_LIMIT,
    CostBound,
    checked_costs,
    combined_cost,
    cost_bound,
    settle,
    union_of,
)
from tessera.release.ledger_records import (
    BudgetExceeded,
    Charge,
    LedgerBusy,
    LedgerEntry,
    LedgerError,
    LedgerSummary,
    Method,
    Status,
)
from tessera.release.ledger_store import (
    APPLICATION_ID,
    CHARGE_COLUMNS,
    DEFAULT_TIMEOUT,
    READABLE_VERSIONS,
    SCHEMA_VERSION,
    charge_from_row,
    connection,
    create_file,
    domain_text,
    has_linear,
    linear_doc,
    now,
    read_costs,
    snapshot,
    spent_bounds,
    stored_clauses,
    stored_costs,
    stored_linear,
    stored_workload,
    upgrade,
    write_transaction,
)
from tessera.release.linear_costs import linear_cost_bound, people_linear_cost, piece_workload
from tessera.schema.domain import Domain
from tessera.schema.measures import MAX_UNITS, unit_size
from tessera.workload.aggregates import (
    MIN_FIXED_UNITS,
    AggregateWorkload,
    LinearQuery,
    measure_cost_domain,
)
from tessera.workload.query import Query
from tessera.workload.workload import Workload

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_TIME_LIMIT",
    "LEDGER_DEFINITIONS",
    "SCHEMA_VERSION",
    "BudgetExceeded",
    "Charge",
    "CostBound",
    "Ledger",
    "LedgerBusy",
    "LedgerEntry",
    "LedgerError",
    "LedgerSummary",
    "combined_cost",
    "cost_bound",
    "decimal_value",
    "float_down",
    "float_up",
    "remaining_budget",
]

#: The definitions whose costs compose by addition over the queries a row touches.
LEDGER_DEFINITIONS: tuple[Definition, ...] = (Definition.PURE, Definition.ZCDP)


@dataclass(frozen=True, eq=False)
class Part:
    """One release as the union solve sees it: its ``workload`` over the ledger's schema and
    per-query ``costs``, ``clauses`` the stored text of its queries (re-parsed on a cost
    domain with measures), and for a release charged as linear queries
    (:meth:`Ledger.charge_linear`) those queries (``linear``: the workload is then their
    conditions q, the costs their c_q)."""

    release_id: str
    workload: Workload
    costs: npt.NDArray[np.float64]
    clauses: str
    linear: tuple[LinearQuery, ...] | None = None


class Ledger:
    """The budget ledger of one data set: an SQLite file (see the module docstring).

    Create with :meth:`init`, open with :meth:`open`. The object holds the ledger's immutable
    settings and a cache of parsed workloads; every operation opens its own connection, so a
    :class:`Ledger` may be used from several processes (each opens the file itself).
    """

    def __init__(self, path: Path, meta: dict[str, Any], *, timeout: float) -> None:
        self.path = path
        self.timeout = float(timeout)
        self.total = float(meta["total"])
        self.definition = Definition.parse(str(meta["definition"]))
        self.neighbours = Neighbours.parse(str(meta["neighbours"]))
        self.dataset = str(meta["dataset"])
        self.created = str(meta["created"])
        #: one row (ledgers without a privacy id), or one person of at most K rows
        self.unit = (ONE_ROW if "privacy_id" not in meta
                     else PrivacyUnit(str(meta["privacy_id"]), int(meta["max_rows"]),
                                      str(meta.get("count", "rows"))))
        self._domain_text = str(meta["domain"])
        self.domain = Domain.from_dict(json.loads(self._domain_text))
        self._parsed: dict[str, Workload] = {}
        self._linear: dict[str, tuple[LinearQuery, ...]] = {}
        self._lifted: dict[tuple[str, Any], Workload] = {}

    def __repr__(self) -> str:
        unit = "" if self.unit.is_row else (f", privacy_id={self.unit.id_column!r}, "
                                             f"max_rows={self.unit.max_rows}")
        return (f"Ledger({str(self.path)!r}, dataset={self.dataset!r}, total={self.total:g}, "
                f"definition={self.definition.value!r}, neighbours={self.neighbours.value!r}"
                f"{unit})")

    # -- creating and opening ---------------------------------------------------------------------
    @classmethod
    def init(
        cls,
        path: str | os.PathLike[str],
        *,
        total: float,
        definition: Definition | str,
        neighbours: Neighbours | str,
        domain: Domain,
        dataset: str,
        overwrite: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
        unit: PrivacyUnit = ONE_ROW,
    ) -> Ledger:
        """Create the ledger file of data set ``dataset`` with budget ``total``.

        ``unit``: whose presence the budget protects, for good — one row, or one person of at
        most K rows (module docs, "A person ledger"); every release charged to it must be
        made for the same unit.

        The schema ``domain`` is stored in the file (its JSON and SHA-256): every charge must be
        over it, and stored workloads are re-parsed with it. An existing file is never
        overwritten unless ``overwrite=True`` (which forgets the spent budget: only for a new
        data set, with no other process using the file). The file appears atomically, fully
        initialised, or not at all.
        """
        p = Path(path)
        total = float(total)
        if not (math.isfinite(total) and total > 0):
            raise LedgerError(f"the total budget must be a finite number > 0, got {total!r}",
                              where=str(p))
        d = Definition.parse(definition)
        if d not in LEDGER_DEFINITIONS:
            raise LedgerError(
                f"a ledger composes costs by addition; {d.label} does not",
                where=str(p),
                hint="use 'pure' (ε) or 'zcdp' (ρ); express (ε,δ) or μ-GDP targets in ρ-zCDP",
            )
        n = Neighbours.parse(neighbours)
        schema = domain_text(domain)
        if Domain.from_dict(json.loads(schema)) != domain:
            raise LedgerError("the schema does not survive its JSON form", where=str(p),
                              hint="use plain values (text, numbers) in the schema")
        meta: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "dataset": str(dataset),
            "total": total,
            "definition": d.value,
            "neighbours": n.value,
            "domain": schema,
            "domain_sha256": hashlib.sha256(schema.encode()).hexdigest(),
            "created": now(),
        }
        if not unit.is_row:
            meta |= {"privacy_id": unit.id_column, "max_rows": unit.max_rows}
            if unit.counts_people:  # each release counts people: a person pays a coverage
                meta["count"] = unit.count
        create_file(p, meta, overwrite=overwrite)
        return cls.open(p, timeout=timeout)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT) -> Ledger:
        """Open an existing ledger (never creates one); checks that it is a Tessera ledger of
        a schema version this code reads."""
        p = Path(path)
        if not p.is_file():
            raise LedgerError("no ledger at this path", where=str(p),
                              hint="create one with Ledger.init (tessera ledger init)")
        with connection(p, timeout) as con:
            app = con.execute("PRAGMA application_id").fetchone()[0]
            if app != APPLICATION_ID:
                raise LedgerError("not a Tessera budget ledger", where=str(p))
            meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        version = meta.get("schema_version")
        if version not in READABLE_VERSIONS:
            raise LedgerError(f"ledger schema version {version!r}; this Tessera reads "
                              f"{' and '.join(map(str, READABLE_VERSIONS))}", where=str(p),
                              hint="upgrade Tessera")
        return cls(p, meta, timeout=timeout)

    # -- charging ---------------------------------------------------------------------------------
    def charge(
        self,
        workload: Workload,
        costs: npt.ArrayLike,
        *,
        label: str,
        mechanism: str,
        time_limit: float = DEFAULT_TIME_LIMIT,
        fast_path: bool = False,
        unit: PrivacyUnit = ONE_ROW,
    ) -> Charge:
        """Charge a release in one committed transaction; answers may leave only afterwards.

        ``costs[i]`` is what query i costs a row it touches: ε_q = Δ/b_q (pure) or
        ρ_q = Δ²/(2σ_q²) (zCDP). Refuses with :class:`BudgetExceeded` (nothing recorded) when
        the bound on the spent budget with this release would exceed the total; raises
        :class:`LedgerBusy` when another process holds the lock beyond the timeout.
        ``time_limit`` bounds each maximum-overlap solve (the release alone, outside the lock;
        the union, inside it); a solve stopped by it gives an upper bound, so a release may be
        refused that an exact solve would admit, never the reverse. ``fast_path``: see the
        module docstring. ``unit``: the release's unit of privacy (the data it read were bounded
        to it); anything but the ledger's own is refused before anything is recorded (module
        docs, "A person ledger").
        """
        self.check_unit(unit)
        _check_time_limit(time_limit)
        c = checked_costs(workload, costs)
        clauses = stored_clauses(workload, self.domain, self._domain_text, str(self.path))
        part = Part(str(uuid.uuid4()), workload, c, json.dumps(clauses, ensure_ascii=False))
        return self._charge(part, label=label, mechanism=mechanism, time_limit=time_limit,
                            fast_path=fast_path)

    def charge_linear(
        self,
        domain: Domain,
        linear: Sequence[LinearQuery],
        costs: npt.ArrayLike,
        *,
        label: str,
        mechanism: str,
        time_limit: float = DEFAULT_TIME_LIMIT,
        fast_path: bool = False,
        unit: PrivacyUnit = ONE_ROW,
    ) -> Charge:
        """Charge a release of linear queries — counts and clamped sums of schema attributes
        or of **measures** (data columns outside the schema) — as :meth:`charge` does.

        ``linear``: the release's linear queries over the schema ``domain`` (the ledger's);
        ``costs[i]`` their c_q per unit of sensitivity (ε_q = 1/b_q, ρ_q = 1/(2σ_q²); a sum's
        in units of its resolution). The ledger stores the queries themselves (conditions as
        SQL, clamps in units, each measure's unit 10^e) and cuts every release charged this way
        into count pieces on the *merged* cost domain at each solve — each measure's grid the
        union of the breakpoints of every release so far — so that the spent budget is exact
        (module docs, "Sums of measures"). Every release must sum a measure in the unit of its
        first charge (:meth:`at_units` adapts a workload beforehand); another is refused
        before anything is recorded."""
        self.check_unit(unit)
        _check_time_limit(time_limit)
        lin = tuple(linear)
        for lq in lin:
            if lq.is_measure and lq.attribute in self.domain.names:
                raise LedgerError(f"{lq.attribute!r} is summed as a measure but is a schema "
                                  "attribute", where=str(self.path))
        names = tuple("count" if lq.role == "count" else
                      f"sum({lq.attribute}, {lq.lo}..{lq.hi}"
                      + ("" if lq.exponent is None else f" × 10^{lq.exponent}") + ")"
                      for lq in lin)
        conditions = Workload(domain, tuple(lq.query for lq in lin), names, (1.0,) * len(lin))
        c = checked_costs(conditions, costs)
        clauses = stored_clauses(conditions, self.domain, self._domain_text, str(self.path))
        part = Part(str(uuid.uuid4()), conditions, c, json.dumps(clauses, ensure_ascii=False),
                    lin)
        return self._charge(part, label=label, mechanism=mechanism, time_limit=time_limit,
                            fast_path=fast_path)

    def _charge(self, part: Part, *, label: str, mechanism: str, time_limit: float,
                fast_path: bool) -> Charge:
        """Bound the release alone (outside the lock), then admit it in one transaction."""
        threshold = None if self.unit.is_row else decimal_value(self.total)
        alone = self._solve([part], time_limit, threshold=threshold)  # outside the lock
        with write_transaction(self.path, self.timeout) as con:
            record = self._admit(con, part, alone, label=str(label), mechanism=str(mechanism),
                                 time_limit=time_limit, fast_path=fast_path)
        self._parsed[part.release_id] = part.workload
        if part.linear is not None:
            self._linear[part.release_id] = part.linear
        logger.info("ledger %s: charged %r (%s queries, %s): cost %.6g, spent %.6g → %.6g of "
                    "%.6g (%s)", self.path.name, record.label, f"{record.n_queries:,}",
                    record.mechanism, record.cost, record.spent_before, record.spent_after,
                    self.total, record.method)
        return record

    def _admit(
        self, con: sqlite3.Connection, part: Part, alone: CostBound, *, label: str,
        mechanism: str, time_limit: float, fast_path: bool,
    ) -> Charge:
        """Inside the write transaction: bound the spent budget, refuse or insert. Exact
        rational arithmetic on the decimals of the floats (:class:`CostBound`)."""
        history = self._history(con)
        workload, c = part.workload, part.costs
        if part.linear is not None:
            self._check_units(part, history)  # (again under the lock: a race with a first use)
            upgrade(con)  # a version-1 file gains the linear column (no-op on version 2)
        before, before_lower, _ = spent_bounds(con)
        method: Method
        total = decimal_value(self.total)
        if not history:
            if self.unit.is_row:  # (a person's bound was settled per row relation: _solve)
                domain, subject, costs = self._subject([part])
                alone = settle(alone, domain, subject, costs, self.neighbours, total,
                               time_limit=time_limit)
            value, lower, exact, method = (alone.value, alone.achieved_value, alone.exact,
                                           "first")
        else:
            # max_x (P(x) + N(x)) ≤ max P + max N: the earlier bound plus this release's
            sequential = decimal_value(before) + alone.value
            lower = max(decimal_value(before_lower), alone.achieved_value)
            if fast_path and sequential <= total:
                value, exact, method = sequential, False, "sequential"
            else:
                union = self._solve(history + [part], time_limit, threshold=total)
                lower = max(lower, union.achieved_value)
                if union.value <= sequential:
                    value, exact, method = union.value, union.exact, "union"
                else:
                    value, exact, method = sequential, False, "sequential"
        if lower > value:  # a witness above an upper bound: fail closed
            raise LedgerError(f"internal error: a row attains {float(lower)!r} above the bound "
                              f"{float(value)!r}; nothing was charged", where=str(self.path))
        if not value <= total:  # no tolerance
            raise self._refusal(label, before, alone, value)
        exact = exact or value == lower
        after, lower_f = float_up(value), float_down(lower)
        created = now()
        release_id = part.release_id
        row: tuple[Any, ...] = (
            release_id, created, label, mechanism, part.clauses,
            json.dumps(list(workload.names), ensure_ascii=False),
            json.dumps(stored_costs(workload, c)), workload.n_queries, alone.bound, before,
            after, lower_f, int(exact), method)
        columns = ("release_id, created, label, mechanism, queries, names, costs, n_queries,"
                   " cost, spent_before, spent_after, spent_lower, exact, method")
        if part.linear is not None:
            columns += ", linear"
            row += (json.dumps(linear_doc(part.linear)),)
        cur = con.execute(f"INSERT INTO charges ({columns}) VALUES "
                          f"({', '.join('?' * len(row))})", row)
        seq = int(cur.lastrowid or 0)
        con.execute(
            "INSERT INTO bounds (through_seq, upper, lower, exact, method, computed)"
            " VALUES (?, ?, ?, ?, ?, ?)", (seq, after, lower_f, int(exact), method, created))
        return Charge(release_id, seq, created, label, mechanism, workload.n_queries, alone.bound,
                      before, after, lower_f, exact, method, "charged")

    def _refusal(self, label: str, before: float, alone: CostBound,
                 value: Fraction) -> BudgetExceeded:
        unit = "ρ" if self.definition is Definition.ZCDP else "ε"
        remaining = remaining_budget(self.total, before)
        after = float_up(value)
        how = "" if alone.exact else " (upper bound)"
        over = value - decimal_value(self.total)
        if over <= decimal_value(self.total) * Fraction(1, 10**9):
            hint = (f"it overshoots by {float(over):.3g} only: costs computed in floating point "
                    "carry rounding errors; calibrate to slightly less than the remaining budget "
                    "(e.g. × (1 − 1e-9))")
        else:
            hint = (f"ask for at most {format_budget(remaining, self.total, up=False)} {unit} "
                    "per row (scale the costs down), or release queries over rows earlier releases "
                    "touched less; spent budget is never refunded")

        def up(x: float) -> str:  # a bound for people: to the total's 6th digit, rounded up
            return format_budget(x, self.total, up=True)

        return BudgetExceeded(
            f"release {label!r} refused: it would bring the spent budget to "
            f"≤ {up(after)} {unit}, above the total {format_bound(self.total)} "
            f"({self.definition.label}, {self.unit.label(self.neighbours)}); spent so far "
            f"≤ {up(before)}, this release alone costs ≤ {up(alone.bound)}"
            f"{how}, remaining {format_budget(remaining, self.total, up=False)}",
            where=str(self.path), hint=hint,
            total=self.total, spent=before, cost=alone.bound, would_spend=after,
        )

    @contextlib.contextmanager
    def releasing(
        self,
        workload: Workload,
        costs: npt.ArrayLike,
        *,
        label: str,
        mechanism: str,
        time_limit: float = DEFAULT_TIME_LIMIT,
    ) -> Iterator[Charge]:
        """``with ledger.releasing(...) as charge:`` charge first, then run the body (which
        may publish answers); mark the release ``released`` on success, ``aborted`` if the body
        raises. Either way the budget stays spent."""
        charge = self.charge(workload, costs, label=label, mechanism=mechanism,
                             time_limit=time_limit, unit=self.unit)
        with settled(self, charge):
            yield charge

    def mark_released(self, release_id: str) -> None:
        """Record that the answers of a charged release were published (idempotent)."""
        self._set_status(release_id, "released")

    def mark_aborted(self, release_id: str) -> None:
        """Record that a charged release was abandoned. Its budget is NOT refunded: answers may
        have been computed, and leaked, after the charge."""
        self._set_status(release_id, "aborted")

    def _set_status(self, release_id: str, status: Status) -> None:
        with write_transaction(self.path, self.timeout) as con:
            row = con.execute("SELECT status FROM charges WHERE release_id = ?",
                              (str(release_id),)).fetchone()
            if row is None:
                raise LedgerError(f"no release {release_id!r} in this ledger",
                                  where=str(self.path))
            if row[0] != status:
                if row[0] != "charged":
                    raise LedgerError(f"release {release_id} is already {row[0]}",
                                      where=str(self.path))
                con.execute("UPDATE charges SET status = ?, status_changed = ?"
                            " WHERE release_id = ?", (status, now(), str(release_id)))
                logger.debug("ledger %s: release %s %s", self.path.name, release_id, status)

    # -- reading ----------------------------------------------------------------------------------
    def spent(self) -> float:
        """An upper bound on the spent budget S (exact when the summary says so)."""
        return self.summary().spent

    def remaining(self) -> float:
        """total − spent, rounded down: a release costing at most this fits for sure."""
        return self.summary().remaining

    def summary(self) -> LedgerSummary:
        """Total, spent (upper bound and witness lower bound), remaining and every release, read
        in one consistent snapshot."""
        with snapshot(self.path, self.timeout) as con:
            upper, lower, exact = spent_bounds(con)
            rows = con.execute(f"SELECT {CHARGE_COLUMNS} FROM charges ORDER BY seq").fetchall()
        return LedgerSummary(str(self.path), self.dataset, self.definition, self.neighbours,
                             self.total, upper, lower, exact,
                             tuple(charge_from_row(r) for r in rows), self.unit)

    def releases(self) -> tuple[Charge, ...]:
        """Every charge, oldest first."""
        return self.summary().releases

    def entry(self, release_id: str) -> LedgerEntry:
        """One charge with its workload (re-parsed with the ledger's domain) and costs."""
        with connection(self.path, self.timeout) as con:
            col = "linear" if has_linear(con) else "NULL"
            row = con.execute(
                f"SELECT {CHARGE_COLUMNS}, queries, names, costs, {col} FROM charges"
                " WHERE release_id = ?", (str(release_id),)).fetchone()
        if row is None:
            raise LedgerError(f"no release {release_id!r} in this ledger", where=str(self.path))
        charge = charge_from_row(row[:13])
        stored = self._queries(charge.release_id, row[13])
        workload = dataclasses.replace(stored, names=tuple(json.loads(row[14])))
        costs = tuple(float(x) for x in read_costs(workload, json.loads(row[15])))
        linear = None if row[16] is None else self._linear_of(charge.release_id, stored,
                                                                 row[16])
        return LedgerEntry(charge, workload, costs, linear)

    def tighten(self, *, time_limit: float = DEFAULT_TIME_LIMIT) -> float:
        """Re-solve the union of every release (e.g. after fast-path charges, or with a longer
        ``time_limit``) and record the bound; the spent budget is the least bound recorded for
        the current releases, which this returns. Holds the write lock only to record."""
        with snapshot(self.path, self.timeout) as con:
            history = self._history(con)
            through = con.execute("SELECT MAX(seq) FROM charges").fetchone()[0]
        if not history:
            return 0.0
        union = self._solve(history, time_limit)
        with write_transaction(self.path, self.timeout) as con:
            # valid for the releases through `through`, whatever was charged since
            con.execute(
                "INSERT INTO bounds (through_seq, upper, lower, exact, method, computed)"
                " VALUES (?, ?, ?, ?, 'union', ?)",
                (through, union.bound, union.achieved, int(union.exact), now()))
        return self.spent()

    def check(self, *, time_limit: float | None = DEFAULT_TIME_LIMIT) -> CostBound | None:
        """Verify the file: SQLite's integrity check, the settings, every stored workload
        re-parses with its costs, and — unless ``time_limit`` is None — that no row attains more
        than the recorded spent budget (a witness above it would prove undercounting). Raises
        :class:`LedgerError`; returns the recomputed union bound (None without releases)."""
        with snapshot(self.path, self.timeout) as con:
            problems = [r[0] for r in con.execute("PRAGMA integrity_check")]
            if problems != ["ok"]:
                raise LedgerError("SQLite integrity check failed: " + "; ".join(problems),
                                  where=str(self.path))
            if con.execute("PRAGMA foreign_key_check").fetchall():
                raise LedgerError("a bound refers to no charge", where=str(self.path))
            history = self._history(con)
            upper, _, _ = spent_bounds(con)
            over = con.execute("SELECT seq FROM charges WHERE spent_after > ?",
                               (self.total,)).fetchall()
        if over:
            raise LedgerError(f"charge #{over[0][0]} records a spent budget above the total",
                              where=str(self.path))
        if not history or time_limit is None:
            return None
        union = self._solve(history, time_limit)
        if union.achieved_value > decimal_value(upper):  # a witness above the recorded bound
            raise LedgerError(f"a row attains {union.achieved!r}, above the recorded spent "
                              f"budget {upper!r}: the ledger undercounts", where=str(self.path))
        return union

    # -- internals --------------------------------------------------------------------------------
    def _queries(self, release_id: str, clauses_json: str) -> Workload:
        """The stored workload of a release (queries re-parsed, families rebuilt)."""
        cached = self._parsed.get(release_id)
        if cached is None:
            cached = stored_workload(self.domain, release_id, clauses_json, str(self.path))
            self._parsed[release_id] = cached
        return cached

    def _linear_of(self, release_id: str, conditions: Workload,
                   doc_json: str) -> tuple[LinearQuery, ...]:
        """The stored linear queries of a release charged as such (cached)."""
        cached = self._linear.get(release_id)
        if cached is None:
            cached = stored_linear(self.domain, release_id, conditions, json.loads(doc_json),
                                   str(self.path))
            self._linear[release_id] = cached
        return cached

    def _history(self, con: sqlite3.Connection) -> list[Part]:
        out = []
        col = "linear" if has_linear(con) else "NULL"
        for release_id, clauses, costs, linear in con.execute(
                f"SELECT release_id, queries, costs, {col} FROM charges ORDER BY seq"):
            queries = self._queries(release_id, clauses)
            c = read_costs(queries, json.loads(costs))
            if c.shape != (queries.n_queries,) or not (np.isfinite(c).all() and (c >= 0).all()):
                raise LedgerError(f"release {release_id}: stored costs do not match its queries",
                                  where=str(self.path))
            lin = None if linear is None else self._linear_of(release_id, queries, linear)
            out.append(Part(release_id, queries, c, clauses, lin))
        return out

    def _subject(self, parts: Sequence[Part]) -> tuple[Domain, Any, npt.NDArray[np.float64]]:
        """The domain, the union's queries (or structured workload) and their costs that the
        spent budget of ``parts`` is solved on (module docs, "Sums of measures"): the schema
        and every part's queries when none is linear; else the *merged* cost domain — the
        schema and, per measure, the union of every linear part's breakpoints — with every
        counting part re-parsed on it and all linear parts' queries cut into count pieces
        together (:func:`tessera.overlap.linear.pieces`, one set of cells for all)."""
        linear = [p for p in parts if p.linear is not None]
        if not linear:
            union, costs = union_of([(p.workload, p.costs) for p in parts])
            return self.domain, union if union.is_structured else union.queries, costs
        domain, lin, lc = self._linear_subject(parts)
        blocks = self._counting_on(domain, parts)
        cut = pieces(domain, lin, self.definition, self.neighbours)
        if cut.queries:
            blocks.append((piece_workload(domain, cut), cut.costs(lc)))
        if not blocks:  # every sum is 0 on every row (CLAMP(m, 0, 0)): a cost of 0
            nothing = Query.conjunction(domain, {})
            blocks.append((Workload(domain, (nothing,), ("nothing",), (1.0,)), np.zeros(1)))
        union, costs = union_of(blocks)
        return domain, union if union.is_structured else union.queries, costs

    def _linear_subject(
        self, parts: Sequence[Part],
    ) -> tuple[Domain, tuple[LinearQuery, ...], npt.NDArray[np.float64]]:
        """The merged cost domain, every linear part's queries and their costs, in order."""
        linear = [p for p in parts if p.linear is not None]
        lin = tuple(q for p in linear for q in p.linear or ())
        lc = (np.concatenate([p.costs for p in linear]) if linear
              else np.zeros(0, dtype=np.float64))
        try:
            domain = measure_cost_domain(self.domain, lin)
        except QueryError as e:  # (refused before: _check_units)
            raise LedgerError(f"internal error: {e.message}", where=str(self.path)) from None
        return domain, lin, lc

    def _levels_bound_only(self, parts: Sequence[Part]) -> bool:
        """Whether the count pieces of ``parts`` only bound their cost from above: ρ-zCDP, a
        substitution among the unit's row relations and a linear part with a sum (module
        docs, "Sums of measures")."""
        return (self.definition is Definition.ZCDP and not self.unit.counts_people
                and Neighbours.SUBSTITUTE in self.unit.row_relations(self.neighbours)
                and any(q.role == "sum" for p in parts for q in p.linear or ()))

    def _solve(
        self, parts: Sequence[Part], time_limit: float, *, threshold: Fraction | None = None,
    ) -> CostBound:
        if self.unit.counts_people and any(p.linear is not None for p in parts):
            return self._people_bound(parts, time_limit)
        if self._levels_bound_only(parts) and all(p.linear is not None for p in parts):
            # linear parts only: their exact cost (the pair program under substitution)
            domain, lin, lc = self._linear_subject(parts)
            cb = linear_cost_bound(domain, lin, lc, definition=self.definition,
                                   neighbours=self.neighbours, unit=self.unit,
                                   time_limit=time_limit, threshold=threshold)
            if cb is not None:
                return cb
        domain, subject, costs = self._subject(parts)
        if not self._levels_bound_only(parts):
            return cost_bound(domain, subject, costs, neighbours=self.neighbours,
                              time_limit=time_limit, threshold=threshold, unit=self.unit,
                              definition=self.definition)
        return self._pieces_bound(parts, domain, subject, costs, time_limit, threshold)

    def _counting_on(self, domain: Domain, parts: Sequence[Part]
                     ) -> list[tuple[Workload, npt.NDArray[np.float64]]]:
        """The counting parts' workloads re-parsed on the merged cost ``domain`` (their stored
        clauses; cached per release and measure grid), with their costs."""
        grids = tuple((a.name, getattr(a, "points", None))
                      for a in domain.attributes[len(self.domain.attributes):])
        out = []
        for p in parts:
            if p.linear is None:
                key = (p.release_id, grids)
                lifted = self._lifted.get(key)
                if lifted is None:
                    lifted = stored_workload(domain, p.release_id, p.clauses, str(self.path))
                    self._lifted[key] = lifted
                out.append((lifted, p.costs))
        return out

    def _people_bound(self, parts: Sequence[Part], time_limit: float) -> CostBound:
        """A person counted once per query (docs/theory.md §3.14, "Aggregates counting
        people"): the maximum weighted coverage of K records (2K under substitution) over every
        release's conditions together — the linear queries' with the scores c_q·D_q^p, the
        counting releases' with their costs — on the merged cost domain, the counting parts
        re-parsed on it (:func:`tessera.release.linear_costs.people_linear_cost`). No pieces:
        a person's total in a group is clamped once, so its cost is not that of the levels."""
        domain, lin, lc = self._linear_subject(parts)
        counted = self._counting_on(domain, parts)
        cb = people_linear_cost(domain, lin, lc, definition=self.definition,
                                neighbours=self.neighbours, unit=self.unit,
                                time_limit=time_limit, counted=counted)
        if cb is None:  # nothing any release measures can change
            nothing = Query.conjunction(domain, {})
            return cost_bound(domain, [nothing], np.zeros(1), neighbours=self.neighbours,
                              time_limit=time_limit, unit=self.unit,
                              definition=self.definition)
        return cb

    def _pieces_bound(
        self, parts: Sequence[Part], domain: Domain, subject: Any,
        costs: npt.NDArray[np.float64], time_limit: float, threshold: Fraction | None,
    ) -> CostBound:
        """Counting and linear parts under ρ-zCDP substitution: the pieces' upper bound, per
        row relation of the unit, each labelled exact only when its witness attains it, whose
        achieved value is the witness's true cost — the counting queries it changes (their
        costs) plus Σ_q c_q (a_q(x) − a_q(y))² over the linear queries, evaluated directly
        (a_q(y) = 0 under add/remove) — and a person's K² times the largest."""
        _, lin, lc = self._linear_subject(parts)
        exact_lc = [decimal_value(x) for x in lc.tolist()]
        n_pred = len(subject.queries) if isinstance(subject, Workload) else len(subject)
        n_pieces = len(pieces(domain, lin, self.definition, self.neighbours).queries)
        linear_block = range(n_pred - n_pieces, n_pred)  # (the last block: union_of's order)
        factor = self.unit.factor(self.definition)
        relations = self.unit.row_relations(self.neighbours)
        out = []
        for rel in relations:
            cb = cost_bound(domain, subject, costs, neighbours=rel,
                            time_limit=time_limit / len(relations),
                            threshold=None if threshold is None else threshold / factor)
            wit = cb.overlap.witness
            achieved = Fraction(0)
            if wit is not None and (rel is Neighbours.ADD_REMOVE or wit.y is not None):
                counted = sum((decimal_value(float(costs[i])) for i in wit.queries
                               if i not in linear_block), Fraction(0))
                achieved = counted + (change_cost(domain, lin, exact_lc, wit.x, wit.y)[0]
                                      if lin else Fraction(0))
            if achieved > cb.value:  # fail closed
                raise LedgerError(f"internal error: a row attains {float(achieved)!r} above "
                                  f"the bound {float(cb.value)!r}", where=str(self.path))
            out.append(dataclasses.replace(cb, achieved_value=achieved,
                                           exact=cb.value <= achieved))
        top = max(out, key=lambda c: c.value)
        best = max(out, key=lambda c: c.achieved_value)
        return CostBound(factor * top.value, factor * best.achieved_value,
                         top.value <= best.achieved_value, top.scale, top.overlap)

    # -- measures ---------------------------------------------------------------------------------
    def measure_units(self) -> dict[str, tuple[int, int]]:
        """Every measure charged so far: its resolution exponent e (the unit 10^e every release
        charged to this ledger sums it in) and the number of the charge that fixed it."""
        with snapshot(self.path, self.timeout) as con:
            if not has_linear(con):
                return {}
            rows = con.execute("SELECT seq, linear FROM charges WHERE linear IS NOT NULL"
                               " ORDER BY seq").fetchall()
        out: dict[str, tuple[int, int]] = {}
        for seq, doc in rows:
            for d in json.loads(doc):
                if d is not None and d.get("exponent") is not None:
                    out.setdefault(str(d["attribute"]), (int(d["exponent"]), int(seq)))
        return out

    def at_units(self, workload: AggregateWorkload) -> AggregateWorkload:
        """``workload`` with every measure this ledger has charged summed in the ledger's unit
        for it (fixed by its first charge): one row's value is then rounded to one integer u
        for every release, which is what makes the merged grid's maximum the spent budget
        (docs/theory.md §3.15, "Measures across releases"). Refused before any charge with a
        :class:`LedgerError` naming the measure and both units when the release's bounds are
        not whole units of the ledger's, or are more than 10^7 or fewer than 10^3 of them."""
        units = self.measure_units()
        fixed = {m: units[m] for m, e in workload.measures.items()
                 if m in units and units[m][0] != e}
        for m, (e, seq) in fixed.items():
            try:
                workload = workload.at_resolutions({m: e})
            except QueryError as err:
                lo, hi = (_decimal_text(Decimal(n).scaleb(e)) for n in (MIN_FIXED_UNITS,
                                                                        MAX_UNITS))
                raise LedgerError(
                    f"this release sums measure {m!r} in units of "
                    f"10^{workload.measures[m]}, the ledger in units of 10^{e} (fixed by "
                    f"its first charge with {m!r}, #{seq}): {err.message} — nothing was "
                    "charged", where=str(self.path),
                    hint=f"every release charged to this ledger rounds {m!r} to one unit "
                         f"(10^{e} = {_decimal_text(unit_size(e))}); give {m!r} CLAMP bounds "
                         f"that are multiples of it, the largest |bound| between {lo} and "
                         f"{hi}, or answer without --ledger and account for the spend "
                         "yourself (sequential composition)") from None
        return workload

    def _check_units(self, part: Part, history: Sequence[Part]) -> None:
        """Refuse (before anything is recorded) a linear release that sums a measure in
        another unit than the earlier releases charged to the ledger."""
        seen: dict[str, int] = {}
        for p in history:
            for lq in p.linear or ():
                if lq.is_measure and lq.attribute is not None and lq.exponent is not None:
                    seen.setdefault(lq.attribute, lq.exponent)
        for lq in part.linear or ():
            if lq.is_measure and lq.attribute in seen and seen[lq.attribute] != lq.exponent:
                raise LedgerError(
                    f"this release sums measure {lq.attribute!r} in units of "
                    f"10^{lq.exponent}, the ledger in units of 10^{seen[lq.attribute]}; "
                    "nothing was charged", where=str(self.path),
                    hint="adapt the workload first (Ledger.at_units), as tessera answer does")

    def check_unit(self, unit: PrivacyUnit) -> None:
        """Refuse a release made for another unit of privacy than the ledger's (before any
        charge): its data were bounded otherwise (or not at all), so the ledger's per-person
        accounting would not hold for it."""
        if unit == self.unit:
            return
        mine, theirs = self.unit, unit
        if mine.is_row:
            hint = ("charge it to a ledger made for that unit (tessera ledger init "
                    f"--privacy-id {theirs.id_column} --max-rows {theirs.max_rows}"
                    f"{' --count people' if theirs.counts_people else ''}), or release "
                    "at the row level (no --privacy-id)")
        else:
            hint = (f"release with the ledger's unit: --privacy-id {mine.id_column} --max-rows "
                    f"{mine.max_rows} --count {mine.count}")
        raise LedgerError(
            f"the ledger protects {mine.text}, this release {theirs.text}: a ledger adds up what "
            "one unit pays, and a release bounded or counted otherwise (or not bounded at all) "
            "pays differently; "
            "nothing was charged", where=str(self.path), hint=hint)


def _check_time_limit(time_limit: float) -> None:
    if not (isinstance(time_limit, (int, float)) and math.isfinite(time_limit)
            and time_limit > 0):
        raise LedgerError(f"time_limit must be a number of seconds > 0, got {time_limit!r}")


def _decimal_text(x: Decimal) -> str:
    """A power of ten (times a small integer) as plain decimal text: 0.001, 10000."""
    return f"{x.normalize():f}"
