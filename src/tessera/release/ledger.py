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

File format: the rollback journal (``journal_mode=DELETE``), so that at rest the ledger is one
self-contained file that can be copied (a WAL file would hold committed charges outside it);
``synchronous=FULL`` (and ``fullfsync`` on macOS) for durability. A process killed at any point
leaves either the whole charge or none of it (SQLite's atomic commit), and a charge committed
before its answers were written stays charged. Triggers make the history append-only: charges
are never deleted, only their status changes (``charged`` → ``released`` or ``aborted``), and no
charge can be inserted whose recorded spent budget exceeds the total.
"""

from __future__ import annotations

import contextlib
import dataclasses
import decimal
import hashlib
import json
import math
import os
import sqlite3
import tempfile
import urllib.parse
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tessera.domain import Domain
from tessera.errors import TesseraError
from tessera.families import Partition
from tessera.overlap import OverlapResult, max_overlap, maximal_overlapping_sets
from tessera.parse import parse_query
from tessera.privacy import Definition, Neighbours
from tessera.query import Query
from tessera.workload import Workload

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

#: Version of the ledger's SQLite schema (``PRAGMA user_version`` and ``meta.schema_version``).
SCHEMA_VERSION = 1
#: ``PRAGMA application_id`` of a Tessera ledger ("TSLG").
APPLICATION_ID = 0x54534C47
#: Seconds a maximum-overlap solve may take inside a charge (it then returns an upper bound).
DEFAULT_TIME_LIMIT = 30.0
#: Seconds to wait for another process's write lock; above the solve's time limit, since a
#: charge holds the lock while it bounds the union.
DEFAULT_TIMEOUT = 120.0
#: The definitions whose costs compose by addition over the queries a row touches.
LEDGER_DEFINITIONS: tuple[Definition, ...] = (Definition.PURE, Definition.ZCDP)

Status = Literal["charged", "released", "aborted"]
Method = Literal["first", "union", "sequential"]

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

_CHARGE_COLUMNS = (
    "seq, release_id, created, label, mechanism, n_queries, cost, spent_before, spent_after, "
    "spent_lower, exact, method, status"
)


# -- errors ---------------------------------------------------------------------------------------


class LedgerError(TesseraError):
    """A ledger file that cannot be created, opened, read or written."""


class LedgerBusy(LedgerError):
    """Another process held the ledger's lock for longer than the timeout."""


class BudgetExceeded(TesseraError):
    """A release refused because the spent budget would exceed the total.

    ``spent`` is the (upper bound on the) budget spent before the release, ``cost`` what the
    release costs a row by itself, ``would_spend`` the bound on the spent budget with it,
    ``remaining`` = total − spent.
    """

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        where: str | None = None,
        total: float = math.nan,
        spent: float = math.nan,
        cost: float = math.nan,
        would_spend: float = math.nan,
    ) -> None:
        super().__init__(message, hint=hint, where=where)
        self.total = total
        self.spent = spent
        self.cost = cost
        self.would_spend = would_spend

    @property
    def remaining(self) -> float:
        """total − spent, rounded down (see :func:`remaining_budget`)."""
        return remaining_budget(self.total, self.spent)

    def located(self, where: str) -> BudgetExceeded:
        inner = f"{self.where}: " if self.where else ""
        return BudgetExceeded(f"{inner}{self.message}", hint=self.hint, where=where,
                              total=self.total, spent=self.spent, cost=self.cost,
                              would_spend=self.would_spend)


# -- records --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Charge:
    """One committed charge (one release) as the ledger recorded it.

    * ``cost``: an upper bound on what the release alone costs a row, γ_c(Q_k);
    * ``spent_before`` / ``spent_after``: upper bounds on the spent budget S_{k−1}, S_k (the
      values the admission decision used); ``spent_lower`` ≤ S_k is what a witness row attains;
    * ``exact``: ``spent_after`` is S_k itself;
    * ``method``: ``first`` (no earlier release), ``union`` (maximum overlap of the union of
      all workloads) or ``sequential`` (spent_before + cost, rounded up);
    * ``status``: ``charged``, then ``released`` or ``aborted`` — the budget stays spent either
      way.
    """

    release_id: str
    seq: int
    created: str
    label: str
    mechanism: str
    n_queries: int
    cost: float
    spent_before: float
    spent_after: float
    spent_lower: float
    exact: bool
    method: Method
    status: Status


@dataclass(frozen=True)
class LedgerEntry:
    """A charge with its workload (re-parsed from the stored SQL) and its per-query costs."""

    charge: Charge
    workload: Workload
    costs: tuple[float, ...]


@dataclass(frozen=True)
class LedgerSummary:
    """The state of a ledger: the total, the spent budget (an upper bound; ``exact`` when it is
    the maximum itself, ``spent_lower`` what a witness row attains) and every release."""

    path: str
    dataset: str
    definition: Definition
    neighbours: Neighbours
    total: float
    spent: float
    spent_lower: float
    exact: bool
    releases: tuple[Charge, ...]

    @property
    def remaining(self) -> float:
        """total − spent, rounded down: a release costing at most this fits for sure."""
        return remaining_budget(self.total, self.spent)

    def describe(self) -> str:
        """A few lines for a terminal."""
        unit = "ρ" if self.definition is Definition.ZCDP else "ε"
        how = "exact" if self.exact else f"upper bound; at least {_fmt(self.spent_lower, up=False)}"
        lines = [
            f"ledger {self.path} (data set {self.dataset!r}): {self.definition.label}, "
            f"{self.neighbours.label}",
            f"total {unit} = {_fmt(self.total)}, spent {_fmt(self.spent)} ({how}), "
            f"remaining {_fmt(self.remaining, up=False)}; {len(self.releases)} release(s)",
        ]
        for c in self.releases:
            lines.append(f"  #{c.seq} {c.created} {c.label!r} [{c.mechanism}, {c.status}] "
                         f"{c.n_queries} queries, alone {_fmt(c.cost)}, spent after "
                         f"{_fmt(c.spent_after)} ({c.method})")
        return "\n".join(lines)


# -- the union bound, without SQLite -------------------------------------------------------------

#: Integer scores stay below this, so that every sum of them is exact in floating point.
SCORE_LIMIT = 2**51
#: At most this many overlap patterns are enumerated to settle a decision exactly.
REFINE_MAX_SETS = 20_000


@dataclass(frozen=True)
class CostBound:
    """S = max over rows x (pairs x → y) of Σ_{q ∈ I(x)} c_q (Σ over I(x) Δ I(y)), bounded.

    Arithmetic is exact: a cost is the decimal its float prints as (``repr``, what the ledger's
    JSON stores: 0.1 is one tenth), and the costs scaled by the least common denominator
    ``scale`` are integers, whose sums floating point adds exactly; the solver
    (:func:`tessera.overlap.max_overlap`) works on those integer scores, and the maximum of
    integers is at most ⌊its bound⌋. When the integers would reach 2^51 (costs with many
    digits), each cost is instead rounded *up* to a multiple of 1/scale = 2^−k, which only
    raises the bound. So

    * ``value`` (a :class:`~fractions.Fraction`) ≥ S, with no rounding error: the value for
      decisions; ``bound`` is the float whose decimal is the least one ≥ ``value``;
    * ``achieved`` ≤ S: the witness row's (pair's) summed costs (``achieved_value`` exactly);
    * ``exact``: the solver found the maximum of the integer scores, so ``value`` is S — up to
      the rounding of costs to multiples of 1/``scale`` when they had too many digits (then
      ``value`` − ``achieved_value`` ≤ 1/scale per query the witness touches, ~1e-13);
    * ``overlap``: the solver's result on the integer scores (witness, method, notes).
    """

    value: Fraction
    achieved_value: Fraction
    exact: bool
    scale: int | Fraction
    overlap: OverlapResult

    @property
    def bound(self) -> float:
        """An upper bound on S, as a float whose decimal is ≥ ``value``."""
        return float_up(self.value)

    @property
    def achieved(self) -> float:
        """A lower bound on S, as a float whose decimal is ≤ ``achieved_value``."""
        return float_down(self.achieved_value)


def combined_cost(
    releases: Sequence[tuple[Workload, npt.ArrayLike]],
    *,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
) -> CostBound:
    """The spent budget of these releases (workload, per-query costs), without a ledger: the
    maximum over rows of the summed costs of every query of every release that touches the row
    (docs/theory.md §9). Costs are ε_q (pure) or ρ_q (zCDP); both add up. All workloads must
    share one domain."""
    if not releases:
        raise TesseraError("no releases to combine")
    domain = releases[0][0].domain
    for i, (w, _) in enumerate(releases):
        if w.domain != domain:
            raise TesseraError(f"release {i}: its workload is over another domain",
                               hint="every release of one data set uses the same schema")
    union, costs = union_of([(w, _costs(w, c)) for w, c in releases])
    return cost_bound(domain, union, costs, neighbours=Neighbours.parse(neighbours),
                      time_limit=time_limit)


def union_of(
    parts: Sequence[tuple[Workload, npt.NDArray[np.float64]]],
) -> tuple[Workload, npt.NDArray[np.float64]]:
    """One workload holding every part's queries and families, and the costs in its expanded
    order (every predicate query first, then every family's cells)."""
    domain = parts[0][0].domain
    queries = [q for w, _ in parts for q in w.queries]
    families = [p for w, _ in parts for p in w.partitions]
    pred = [c[: len(w.queries)] for w, c in parts]
    cells = [c[len(w.queries):] for w, c in parts]
    union = Workload(domain, tuple(queries), tuple(f"q{i}" for i in range(len(queries))),
                     (1.0,) * len(queries), None, tuple(families))
    return union, np.concatenate(pred + cells)


def cost_bound(
    domain: Domain,
    queries: Sequence[Any],
    costs: npt.ArrayLike,
    *,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
    threshold: Fraction | None = None,
) -> CostBound:
    """:class:`CostBound` of queries with per-query costs ``costs`` (finite, ≥ 0).

    ``threshold``: when rounding costs up leaves the bound above it but the witness below it
    (add/remove neighbours), settle the question exactly by enumerating the maximal overlapping
    sets (:func:`tessera.overlap.maximal_overlapping_sets`, when there are few) and summing
    each one's costs in integers.
    """
    n = Neighbours.parse(neighbours)
    cb = _cost_bound(domain, queries, costs, n, time_limit)
    return cb if threshold is None else _settle(cb, domain, queries, costs, n, threshold)


def _settle(
    cb: CostBound, domain: Domain, queries: Sequence[Any], costs: npt.ArrayLike,
    neighbours: Neighbours, threshold: Fraction,
) -> CostBound:
    """``cb`` made exact by enumeration when it is undecided against ``threshold``."""
    if (cb.value <= threshold or cb.achieved_value > threshold
            or neighbours is not Neighbours.ADD_REMOVE
            or (isinstance(queries, Workload) and queries.is_structured)):
        return cb
    if isinstance(queries, Workload):
        queries = queries.queries
    try:
        sets = maximal_overlapping_sets(list(queries), domain=domain, max_sets=REFINE_MAX_SETS)
    except TesseraError:
        return cb
    exact_costs = [decimal_value(x) for x in np.asarray(costs, dtype=np.float64).tolist()]
    common = math.lcm(*(r.denominator for r in exact_costs)) if exact_costs else 1
    ints = [r.numerator * (common // r.denominator) for r in exact_costs]
    best = Fraction(max((sum(ints[i] for i in s) for s in sets), default=0), common)
    if not cb.achieved_value <= best <= cb.value:  # fail closed
        raise LedgerError(f"internal error: exact maximum {float(best)!r} outside "
                          f"[{float(cb.achieved_value)!r}, {float(cb.value)!r}]")
    return CostBound(best, best, True, common, cb.overlap)


def _cost_bound(
    domain: Domain, queries: Sequence[Any], costs: npt.ArrayLike, neighbours: Neighbours,
    time_limit: float | None,
) -> CostBound:
    c = np.asarray(costs, dtype=np.float64).reshape(-1)
    n = queries.n_queries if isinstance(queries, Workload) else len(queries)
    if c.shape != (n,) or not (np.isfinite(c).all() and (c >= 0).all()):
        raise TesseraError(f"{c.size} costs for {n} queries: one finite cost ≥ 0 per query")
    # rationals for the distinct costs only (a marginal's cells share one cost)
    distinct, inverse, counts = np.unique(c, return_inverse=True, return_counts=True)
    exact_distinct = [decimal_value(x) for x in distinct.tolist()]
    ints_distinct, scale = _integer_scores(exact_distinct, counts.tolist())
    ints = np.array(ints_distinct, dtype=np.float64)[inverse.ravel()]
    subject = queries if isinstance(queries, Workload) else list(queries)
    res = max_overlap(subject, ints, domain=None if isinstance(queries, Workload) else domain,
                      comp=Definition.PURE, neighbours=neighbours, time_limit=time_limit)
    top = math.floor(res.bound)  # the maximum of integer scores is an integer ≤ res.bound
    witness = [] if res.witness is None else list(res.witness.queries)
    achieved = sum((exact_distinct[int(inverse.ravel()[i])] for i in witness), Fraction(0))
    value = Fraction(top) / scale
    if top < res.score_achieved or achieved > value:  # fail closed
        raise LedgerError(f"internal error: the witness ({float(achieved)!r}) exceeds the "
                          f"bound ({float(value)!r}) on the summed costs")
    return CostBound(value, achieved, top <= res.score_achieved, scale, res)


def decimal_value(x: float) -> Fraction:
    """The decimal a float prints as, exactly (``repr``: the shortest that reads back as it)."""
    return Fraction(repr(float(x)))


def float_up(value: Fraction) -> float:
    """The least float whose decimal (:func:`decimal_value`) is ≥ ``value``."""
    f = float(value)
    while decimal_value(f) < value:
        f = math.nextafter(f, math.inf)
    return f


def float_down(value: Fraction) -> float:
    """The greatest float whose decimal (:func:`decimal_value`) is ≤ ``value``."""
    f = float(value)
    while decimal_value(f) > value:
        f = math.nextafter(f, -math.inf)
    return f


def remaining_budget(total: float, spent: float) -> float:
    """total − spent in exact decimals, rounded down to 12 significant digits (0 if negative):
    a release whose own cost is at most this always fits, since spent + cost bounds the new
    spent budget (and a short decimal is a cost the ledger sums without rounding)."""
    left = decimal_value(total) - decimal_value(spent)
    if left <= 0:
        return 0.0
    ctx = decimal.Context(prec=12, rounding=decimal.ROUND_FLOOR)
    down = ctx.divide(decimal.Decimal(left.numerator), decimal.Decimal(left.denominator))
    return float_down(Fraction(down))


def _integer_scores(
    costs: Sequence[Fraction], counts: Sequence[int] | None = None
) -> tuple[list[int], int | Fraction]:
    """Integers n_q ≥ c_q · scale with Σ n_q < 2^51: equal (scale = the least common
    denominator) when that fits, else ⌈c_q · 2^k⌉ for the largest k that fits. ``counts``:
    how many queries carry each (distinct) cost, for the sums."""
    if not costs:
        return [], 1
    m = [1] * len(costs) if counts is None else [int(x) for x in counts]
    n = sum(m)
    scale = math.lcm(*(r.denominator for r in costs))
    ints = [r.numerator * (scale // r.denominator) for r in costs]
    if sum(i * k for i, k in zip(ints, m)) < SCORE_LIMIT:
        return ints, scale
    total = sum((r * k for r, k in zip(costs, m)), Fraction(0))
    if total > 2**40:
        raise TesseraError(f"costs summing to {float(total):g} are beyond any privacy budget")
    k = math.floor(math.log2((SCORE_LIMIT - n) / float(total)))
    while True:
        unit = Fraction(2) ** k
        ints = [math.ceil(r * unit) for r in costs]
        if sum(i * c for i, c in zip(ints, m)) < SCORE_LIMIT:
            return ints, unit if k < 0 else int(unit)
        k -= 1


# -- the ledger -----------------------------------------------------------------------------------


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
        self._domain_text = str(meta["domain"])
        self.domain = Domain.from_dict(json.loads(self._domain_text))
        self._parsed: dict[str, Workload] = {}

    def __repr__(self) -> str:
        return (f"Ledger({str(self.path)!r}, dataset={self.dataset!r}, total={self.total:g}, "
                f"definition={self.definition.value!r}, neighbours={self.neighbours.value!r})")

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
    ) -> Ledger:
        """Create the ledger file of data set ``dataset`` with budget ``total``.

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
        domain_text = _domain_text(domain)
        if Domain.from_dict(json.loads(domain_text)) != domain:
            raise LedgerError("the schema does not survive its JSON form", where=str(p),
                              hint="use plain values (text, numbers) in the schema")
        for side in _SIDE_FILES:
            if Path(str(p) + side).exists() and not overwrite:
                raise LedgerError(
                    f"a stale {side[1:]} file exists next to the ledger path", where=str(p),
                    hint=f"remove {p.name}{side} (it belongs to an older file) or pass "
                    "overwrite=True")
        if p.exists() and not overwrite:
            raise LedgerError("a ledger (or another file) already exists here", where=str(p),
                              hint="open it with Ledger.open; overwrite=True discards its "
                              "history and with it the record of the spent budget")
        meta: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "dataset": str(dataset),
            "total": total,
            "definition": d.value,
            "neighbours": n.value,
            "domain": domain_text,
            "domain_sha256": hashlib.sha256(domain_text.encode()).hexdigest(),
            "created": _now(),
        }
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
                con.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                con.execute("BEGIN IMMEDIATE")
                for statement in _statements(_SCHEMA):
                    con.execute(statement)
                con.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta.items())
                con.execute("COMMIT")
            finally:
                con.close()
            _fsync(tmp)
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
                                      where=str(p), hint="open it with Ledger.open") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        _fsync_dir(directory)
        return cls.open(p, timeout=timeout)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT) -> Ledger:
        """Open an existing ledger (never creates one); checks that it is a Tessera ledger of
        a schema version this code reads."""
        p = Path(path)
        if not p.is_file():
            raise LedgerError("no ledger at this path", where=str(p),
                              hint="create one with Ledger.init (tessera ledger init)")
        con = _connect(p, timeout)
        try:
            with _errors(p, timeout):
                app = con.execute("PRAGMA application_id").fetchone()[0]
                if app != APPLICATION_ID:
                    raise LedgerError("not a Tessera budget ledger", where=str(p))
                meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        finally:
            con.close()
        version = meta.get("schema_version")
        if version != SCHEMA_VERSION:
            raise LedgerError(f"ledger schema version {version!r}; this Tessera reads "
                              f"{SCHEMA_VERSION}", where=str(p), hint="upgrade Tessera")
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
    ) -> Charge:
        """Charge a release in one committed transaction; answers may leave only afterwards.

        ``costs[i]`` is what query i costs a row it touches: ε_q = Δ/b_q (pure) or
        ρ_q = Δ²/(2σ_q²) (zCDP). Refuses with :class:`BudgetExceeded` (nothing recorded) when
        the bound on the spent budget with this release would exceed the total; raises
        :class:`LedgerBusy` when another process holds the lock beyond the timeout.
        ``time_limit`` bounds each maximum-overlap solve (the release alone, outside the lock;
        the union, inside it); a solve stopped by it gives an upper bound, so a release may be
        refused that an exact solve would admit, never the reverse. ``fast_path``: see the
        module docstring.
        """
        if not (isinstance(time_limit, (int, float)) and math.isfinite(time_limit)
                and time_limit > 0):
            raise LedgerError(f"time_limit must be a number of seconds > 0, got {time_limit!r}")
        c = _costs(workload, costs)
        clauses = self._canonical(workload)
        alone = self._solve([(workload, c)], time_limit)  # outside the lock
        release_id = str(uuid.uuid4())
        con = _connect(self.path, self.timeout)
        try:
            with _errors(self.path, self.timeout):
                con.execute("BEGIN IMMEDIATE")
                try:
                    record = self._admit(con, workload, c, clauses, alone, release_id,
                                         label=str(label), mechanism=str(mechanism),
                                         time_limit=time_limit, fast_path=fast_path)
                    con.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        con.execute("ROLLBACK")
                    raise
        finally:
            con.close()
        self._parsed[release_id] = workload
        return record

    def _admit(
        self, con: sqlite3.Connection, workload: Workload, c: npt.NDArray[np.float64],
        clauses: Any, alone: CostBound, release_id: str, *, label: str,
        mechanism: str, time_limit: float, fast_path: bool,
    ) -> Charge:
        """Inside the write transaction: bound the spent budget, refuse or insert. Exact
        rational arithmetic on the decimals of the floats (:class:`CostBound`)."""
        history = self._history(con)
        before, before_lower, _ = _spent(con)
        method: Method
        total = decimal_value(self.total)
        if not history:
            alone = self._refine(alone, workload, c, total)
            value, lower, exact, method = (alone.value, alone.achieved_value, alone.exact,
                                           "first")
        else:
            # max_x (P(x) + N(x)) ≤ max P + max N: the earlier bound plus this release's
            sequential = decimal_value(before) + alone.value
            lower = max(decimal_value(before_lower), alone.achieved_value)
            if fast_path and sequential <= total:
                value, exact, method = sequential, False, "sequential"
            else:
                union = self._solve(history + [(workload, c)], time_limit, threshold=total)
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
        created = _now()
        cur = con.execute(
            "INSERT INTO charges (release_id, created, label, mechanism, queries, names, costs,"
            " n_queries, cost, spent_before, spent_after, spent_lower, exact, method)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (release_id, created, label, mechanism, json.dumps(clauses, ensure_ascii=False),
             json.dumps(list(workload.names), ensure_ascii=False),
             json.dumps(_stored_costs(workload, c)), workload.n_queries, alone.bound, before,
             after, lower_f, int(exact), method),
        )
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
            hint = (f"ask for at most {_fmt(remaining, up=False)} {unit} per row (scale the "
                    "costs down), or release queries over rows earlier releases touched less; "
                    "spent budget is never refunded")
        return BudgetExceeded(
            f"release {label!r} refused: it would bring the spent budget to ≤ {_fmt(after)} "
            f"{unit}, above the total {_fmt(self.total)} ({self.definition.label}, "
            f"{self.neighbours.label}); spent so far ≤ {_fmt(before)}, this release alone costs "
            f"≤ {_fmt(alone.bound)}{how}, remaining {_fmt(remaining, up=False)}",
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
                             time_limit=time_limit)
        try:
            yield charge
        except BaseException as e:
            try:
                self.mark_aborted(charge.release_id)
            except TesseraError as f:
                e.add_note(f"(could not mark release {charge.release_id} aborted: {f})")
            raise
        self.mark_released(charge.release_id)

    def mark_released(self, release_id: str) -> None:
        """Record that the answers of a charged release were published (idempotent)."""
        self._set_status(release_id, "released")

    def mark_aborted(self, release_id: str) -> None:
        """Record that a charged release was abandoned. Its budget is NOT refunded: answers may
        have been computed, and leaked, after the charge."""
        self._set_status(release_id, "aborted")

    def _set_status(self, release_id: str, status: Status) -> None:
        con = _connect(self.path, self.timeout)
        try:
            with _errors(self.path, self.timeout):
                con.execute("BEGIN IMMEDIATE")
                try:
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
                                    " WHERE release_id = ?", (status, _now(), str(release_id)))
                    con.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        con.execute("ROLLBACK")
                    raise
        finally:
            con.close()

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
        con = _connect(self.path, self.timeout)
        try:
            with _errors(self.path, self.timeout):
                con.execute("BEGIN")
                try:
                    upper, lower, exact = _spent(con)
                    rows = con.execute(
                        f"SELECT {_CHARGE_COLUMNS} FROM charges ORDER BY seq").fetchall()
                finally:
                    con.execute("ROLLBACK")
        finally:
            con.close()
        return LedgerSummary(str(self.path), self.dataset, self.definition, self.neighbours,
                             self.total, upper, lower, exact,
                             tuple(_charge(r) for r in rows))

    def releases(self) -> tuple[Charge, ...]:
        """Every charge, oldest first."""
        return self.summary().releases

    def entry(self, release_id: str) -> LedgerEntry:
        """One charge with its workload (re-parsed with the ledger's domain) and costs."""
        con = _connect(self.path, self.timeout)
        try:
            with _errors(self.path, self.timeout):
                row = con.execute(
                    f"SELECT {_CHARGE_COLUMNS}, queries, names, costs FROM charges"
                    " WHERE release_id = ?", (str(release_id),)).fetchone()
        finally:
            con.close()
        if row is None:
            raise LedgerError(f"no release {release_id!r} in this ledger", where=str(self.path))
        charge = _charge(row[:13])
        stored = self._queries(charge.release_id, row[13])
        workload = dataclasses.replace(stored, names=tuple(json.loads(row[14])))
        costs = tuple(float(x) for x in _read_costs(workload, json.loads(row[15])))
        return LedgerEntry(charge, workload, costs)

    def tighten(self, *, time_limit: float = DEFAULT_TIME_LIMIT) -> float:
        """Re-solve the union of every release (e.g. after fast-path charges, or with a longer
        ``time_limit``) and record the bound; the spent budget is the least bound recorded for
        the current releases, which this returns. Holds the write lock only to record."""
        con = _connect(self.path, self.timeout)
        try:
            with _errors(self.path, self.timeout):
                con.execute("BEGIN")
                try:
                    history = self._history(con)
                    through = con.execute("SELECT MAX(seq) FROM charges").fetchone()[0]
                finally:
                    con.execute("ROLLBACK")
        finally:
            con.close()
        if not history:
            return 0.0
        union = self._solve(history, time_limit)
        con = _connect(self.path, self.timeout)
        try:
            with _errors(self.path, self.timeout):
                con.execute("BEGIN IMMEDIATE")
                try:
                    # valid for the releases through `through`, whatever was charged since
                    con.execute(
                        "INSERT INTO bounds (through_seq, upper, lower, exact, method, computed)"
                        " VALUES (?, ?, ?, ?, 'union', ?)",
                        (through, union.bound, union.achieved, int(union.exact), _now()))
                    con.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        con.execute("ROLLBACK")
                    raise
        finally:
            con.close()
        return self.spent()

    def check(self, *, time_limit: float | None = DEFAULT_TIME_LIMIT) -> CostBound | None:
        """Verify the file: SQLite's integrity check, the settings, every stored workload
        re-parses with its costs, and — unless ``time_limit`` is None — that no row attains more
        than the recorded spent budget (a witness above it would prove undercounting). Raises
        :class:`LedgerError`; returns the recomputed union bound (None without releases)."""
        con = _connect(self.path, self.timeout)
        try:
            with _errors(self.path, self.timeout):
                con.execute("BEGIN")
                try:
                    problems = [r[0] for r in con.execute("PRAGMA integrity_check")]
                    if problems != ["ok"]:
                        raise LedgerError("SQLite integrity check failed: " + "; ".join(problems),
                                          where=str(self.path))
                    if con.execute("PRAGMA foreign_key_check").fetchall():
                        raise LedgerError("a bound refers to no charge", where=str(self.path))
                    history = self._history(con)
                    upper, _, _ = _spent(con)
                    over = con.execute("SELECT seq FROM charges WHERE spent_after > ?",
                                       (self.total,)).fetchall()
                finally:
                    con.execute("ROLLBACK")
        finally:
            con.close()
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
    def _canonical(self, workload: Workload) -> Any:
        """The queries' canonical WHERE clauses, checked to parse back to the same queries with
        the ledger's domain (what a later charge will rebuild); with structured families, a
        mapping ``{"clauses": [...], "families": [...]}`` (families in their compact form)."""
        if _domain_text(workload.domain) != self._domain_text:
            raise LedgerError("the workload is over another schema than the ledger's",
                              where=str(self.path),
                              hint="load the workload with the data set's schema")
        if workload.n_queries == 0:
            raise LedgerError("the release has no queries", where=str(self.path))
        clauses = []
        for i, q in enumerate(workload.queries):
            if not isinstance(q, Query):
                raise LedgerError(f"query {workload.describe(i)} is not a predicate query; the "
                                  "ledger stores workloads as SQL", where=str(self.path))
            text = q.to_sql(self.domain)
            back = parse_query(text, self.domain)
            if back != q and not (back.is_contradiction() and q.is_contradiction()):
                raise LedgerError(f"query {workload.describe(i)} does not survive its SQL form "
                                  f"{text!r}", where=str(self.path))
            clauses.append(text)
        if not workload.partitions:
            return clauses
        return {"clauses": clauses,
                "families": [p.to_dict() | {"weight": p.weight} for p in workload.partitions]}

    def _queries(self, release_id: str, clauses_json: str) -> Workload:
        """The stored workload of a release (queries re-parsed, families rebuilt)."""
        cached = self._parsed.get(release_id)
        if cached is None:
            doc = json.loads(clauses_json)
            clauses = doc["clauses"] if isinstance(doc, dict) else doc
            try:
                queries = tuple(parse_query(str(text), self.domain) for text in clauses)
                families = tuple(Partition.from_dict(self.domain, f)
                                 for f in (doc.get("families", []) if isinstance(doc, dict)
                                           else []))
            except TesseraError as e:
                raise LedgerError(f"release {release_id}: a stored query does not parse: {e}",
                                  where=str(self.path)) from None
            cached = Workload(self.domain, queries, tuple(clauses), (1.0,) * len(queries),
                              None, families)
            self._parsed[release_id] = cached
        return cached

    def _history(
        self, con: sqlite3.Connection
    ) -> list[tuple[Workload, npt.NDArray[np.float64]]]:
        out = []
        for release_id, clauses, costs in con.execute(
                "SELECT release_id, queries, costs FROM charges ORDER BY seq"):
            queries = self._queries(release_id, clauses)
            c = _read_costs(queries, json.loads(costs))
            if c.shape != (queries.n_queries,) or not (np.isfinite(c).all() and (c >= 0).all()):
                raise LedgerError(f"release {release_id}: stored costs do not match its queries",
                                  where=str(self.path))
            out.append((queries, c))
        return out

    def _solve(
        self, parts: Sequence[tuple[Workload, npt.NDArray[np.float64]]],
        time_limit: float, *, threshold: Fraction | None = None,
    ) -> CostBound:
        union, costs = union_of(parts)
        subject: Any = union if union.is_structured else union.queries
        return cost_bound(self.domain, subject, costs, neighbours=self.neighbours,
                          time_limit=time_limit, threshold=threshold)

    def _refine(self, cb: CostBound, queries: Any, costs: npt.NDArray[np.float64],
                threshold: Fraction) -> CostBound:
        """``cb`` settled exactly against ``threshold`` where rounding left it undecided."""
        return _settle(cb, self.domain, queries, costs, self.neighbours, threshold)


# -- helpers --------------------------------------------------------------------------------------

_SIDE_FILES = ("-journal", "-wal", "-shm")


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


def _stored_costs(workload: Workload, c: npt.NDArray[np.float64]) -> Any:
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


def _read_costs(workload: Workload, doc: Any) -> npt.NDArray[np.float64]:
    """The per-query costs (expanded order) from their stored form."""
    if not isinstance(doc, dict):
        return np.asarray(doc, dtype=np.float64)
    parts = [np.asarray(doc["queries"], dtype=np.float64)]
    for (_, cells), cost in zip(workload.family_slices(), doc["families"]):
        parts.append(np.full(cells.stop - cells.start, float(cost)))
    return np.concatenate(parts)


def _costs(workload: Workload, costs: npt.ArrayLike) -> npt.NDArray[np.float64]:
    c = np.array(costs, dtype=np.float64, copy=True).reshape(-1)
    if c.shape != (workload.n_queries,):
        raise TesseraError(f"{c.size} costs for {workload.n_queries} queries",
                           hint="one cost (ε_q or ρ_q) per query")
    bad = ~(np.isfinite(c) & (c >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TesseraError(f"query {workload.describe(i)}: cost {c[i]!r} must be finite and ≥ 0")
    return c


def _spent(con: sqlite3.Connection) -> tuple[float, float, bool]:
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


def _charge(row: Sequence[Any]) -> Charge:
    (seq, release_id, created, label, mechanism, n_queries, cost, before, after, lower, exact,
     method, status) = row
    return Charge(str(release_id), int(seq), str(created), str(label), str(mechanism),
                  int(n_queries), float(cost), float(before), float(after), float(lower),
                  bool(exact), method, status)


def _fmt(x: float, *, up: bool = True) -> str:
    """x to 6 significant digits, rounded up (an upper bound) or down (what remains), so that
    a printed bound is still one; short decimals print as they are."""
    text = repr(float(x))
    if len(text) <= 12 or not math.isfinite(x):
        return text
    near = decimal.Context(prec=6).create_decimal(text)
    if abs(Fraction(near) - decimal_value(x)) <= abs(decimal_value(x)) / 10**12:
        return text  # a hair off a short decimal (1.0000000000000004): the digits matter
    ctx = decimal.Context(prec=6, rounding=decimal.ROUND_CEILING if up else decimal.ROUND_FLOOR)
    return str(ctx.create_decimal(text).normalize(ctx))


def _domain_text(domain: Domain) -> str:
    try:
        # attribute order is part of the schema (codes, witness rows): never sort the keys
        return json.dumps(domain.to_dict(), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as e:
        raise LedgerError(f"the schema cannot be stored as JSON: {e}") from None


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _connect(path: Path, timeout: float) -> sqlite3.Connection:
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
def _errors(path: Path, timeout: float) -> Iterator[None]:
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


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(directory: Path) -> None:
    """Make a new directory entry durable (POSIX); a no-op where directories cannot be opened."""
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
