"""The routes of the maximum-overlap solver for predicate queries and Boolean clauses: γ_w(Q)
with a certificate (docs/theory.md §3).

:func:`~.solve.max_overlap` picks the cheapest exact method that applies, falls back to proven upper
bounds when exact search runs out of time, and always re-checks its witness by evaluating every
query on it. Methods (``method=``):

* ``"sweep"``: ranges over ≤ 2 attributes (Helly; exact);
* ``"branch-bound"``: exact anytime search over value classes (:mod:`.branch_bound`);
* ``"mini-bucket"``: the same, guided by a mini-bucket heuristic (:mod:`.mini_bucket`);
* ``"toulbar2"``: the exact weighted-CSP solver ToulBar2 after 1 s of branch and bound
  (:mod:`.wcsp`; optional ``tessera-dp[exact]``), also for substitution neighbours;
* ``"enumerate"``: distinct I(x) patterns over value classes (exact; small workloads);
* ``"engine"``: the max-plus engine over a tree decomposition (exact; :mod:`.engine_route`);
  the only method for Boolean (BDD) queries;
* ``"colouring"`` / ``"split"``: upper bounds only (DSatur colour classes; Lagrangian split);
* ``"auto"``: sweep if it applies; else the engine when the attribute graph has small width
  (and t ≥ ``ENGINE_MIN_QUERIES``); else branch-and-bound or mini-bucket search, handed to
  ToulBar2 up to ``TOULBAR2_MAX_QUERIES`` when installed; if ``time_limit`` stops them the bound
  is the least of their proven bounds, the split bound and the colouring bound. The time limit
  covers set-up and bounds too (docs/overlap.md, "Time limit").

Why this module is long (about 560 lines): every route here (direct, search portfolio, Boolean,
clauses, substitution) ends in the same witness re-check (:func:`checked`) and shares the scores
and thresholds above; the dispatcher is :mod:`.solve`, the structured route :mod:`.structured`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tessera.errors import QueryError, ResourceError
from tessera.overlap.branch_bound import (
    COLOURING_QUERIES,
    PointSolution,
    active_part,
    graph_seconds,
    max_point,
    split_bound,
)
from tessera.overlap.clauses import Expansion, exact_pair, expand
from tessera.overlap.colouring import MAX_GRAPH_QUERIES, colouring_bound
from tessera.overlap.engine_route import engine_point, estimate
from tessera.overlap.mini_bucket import mbe_point
from tessera.overlap.quick import even_split_bound, n_predicates
from tessera.overlap.ranges import range_max_point
from tessera.overlap.result import OverlapResult, Witness, h
from tessera.overlap.substitution import (
    exact_substitution,
    realisable_sets,
)
from tessera.overlap.wcsp import MIN_SECONDS as WCSP_MIN_SECONDS
from tessera.overlap.wcsp import available as wcsp_available
from tessera.overlap.wcsp import wcsp_point, wcsp_substitution
from tessera.privacy import Definition, Neighbours
from tessera.schema.domain import Domain
from tessera.workload.clause import BooleanClause, separates
from tessera.workload.query import Query

Method = Literal["auto", "sweep", "branch-bound", "mini-bucket", "toulbar2", "enumerate",
                 "engine", "colouring", "split"]
#: Below this many queries the branch and bound answers in milliseconds: not worth compiling.
ENGINE_MIN_QUERIES = 500
METHODS: tuple[str, ...] = ("auto", "sweep", "branch-bound", "mini-bucket", "toulbar2",
                            "enumerate", "engine", "colouring", "split")
#: ``auto`` hands searches up to this many queries to ToulBar2 when it is installed (measured:
#: exact at t = 1,000 random wide queries in ~21 s where our search is 20% off after 60 s; at
#: t = 3,000 and beyond its proven bound is looser than ours: docs/benchmarks.md).
TOULBAR2_MAX_QUERIES = 2_000
#: Substitution: ``auto`` tries ToulBar2 on workloads over at most this many attributes ...
TOULBAR2_SUBSTITUTION_MAX_ATTRIBUTES = 6
#: ... or of at most this many queries.
TOULBAR2_SUBSTITUTION_MAX_QUERIES = 60
#: ... after our own search has had this share of the time, at most TOULBAR2_WARMUP_SECONDS (it
#: finds the incumbent ToulBar2 starts from, and solves easy workloads outright).
TOULBAR2_WARMUP_SHARE = 0.25
TOULBAR2_WARMUP_SECONDS = 1.0
#: ``auto`` uses the mini-bucket search from this many queries on, when predicates are wide ...
MINI_BUCKET_MIN_QUERIES = 5_000
#: ... i.e. cover on average at least this fraction of their attribute (measured:
#: docs/benchmarks.md; on narrow predicates the colour-class bounds are tighter).
MINI_BUCKET_MIN_WIDTH = 0.2
#: i-bound of the mini-bucket heuristic; with ≥ 6 the 2²⁰-cell table limit is what binds
#: (measured at t = 10,000: root bound 1795 at i = 4, 1727 at 5, 1667 at 7–15).
MINI_BUCKET_IBOUND = 8
#: Estimated set-up time of the exact routes per predicate (the engine's estimate, value
#: classes, the incumbent, the split bound and the witness re-check: about 2·10⁻⁵ s each at 10⁶
#: random conjunctions, docs/benchmarks.md "Resource guards"). When a ``time_limit`` is shorter
#: than this estimate, the dispatcher (:func:`~.solve.max_overlap`) does not start them (after
#: structure recovery, which is linear and gives up early) and returns the one-pass bound of
#: :mod:`.quick` (a proven upper bound) instead; when the limit passes during them, the same at the
#: next check.
SETUP_SECONDS_PER_PREDICATE = 2e-5
#: ... but only when the estimate is at least this long (small workloads always run).
SETUP_FLOOR_SECONDS = 1.0


#: :func:`touched` memoises predicates from this many queries on.
TOUCHED_MEMO_QUERIES = 10_000


def _integral(s: npt.NDArray[np.float64]) -> bool:
    return bool(np.all(s == np.round(s))) and float(s.sum()) < 2.0**52


def _safe_upper(value: float, s: npt.NDArray[np.float64]) -> float:
    """A float upper bound made safe: integral scores → the integer below it (the maximum is an
    integer); otherwise a relative rounding margin."""
    if _integral(s):
        return float(math.floor(value + 1e-6))
    return value * (1.0 + 1e-9)


def mean_width(dom: Domain, queries: Sequence[Query]) -> float:
    """Average fraction of its attribute's codes that a predicate covers."""
    fr = [len(p.coverage) / dom[p.attribute].size for q in queries for p in q.predicates]
    return float(np.mean(fr)) if fr else 0.0


def touched(domain: Domain, queries: Sequence[Query], x: Sequence[int]) -> npt.NDArray[np.bool_]:
    """I(x) as a mask, by evaluating every query on x (:meth:`Query.__call__`).

    Each distinct predicate is evaluated once: large workloads repeat a few predicates
    millions of times (a text file of marginal cells shares them), so the witness re-check
    costs a dictionary lookup per predicate, not an interval search."""
    point = tuple(int(c) for c in x)
    if len(queries) < TOUCHED_MEMO_QUERIES:
        return np.fromiter((q(domain, point) for q in queries), dtype=bool,
                           count=len(queries))
    position = {a.name: i for i, a in enumerate(domain)}
    memo: dict[int, bool] = {}  # by object identity: hashing a predicate hashes its spans

    def holds(p: Any) -> bool:
        v = memo.get(id(p))
        if v is None:
            v = memo[id(p)] = point[position[p.attribute]] in p.coverage
        return v

    return np.fromiter(
        (all(map(holds, q.predicates)) if type(q) is Query else q(domain, point)
         for q in queries), dtype=bool, count=len(queries))


def quick_result(
    dom: Domain, queries: Sequence[Query], s: npt.NDArray[np.float64], comp: Definition,
    neighbours: Neighbours, note: str,
) -> OverlapResult:
    """The one-pass bound of :mod:`.quick` as a result without a witness (never exact): S, or
    under substitution min(2·S, Σ h(w)) since I(x)ΔI(y) ⊆ I(x) ∪ I(y)."""
    if neighbours is Neighbours.SUBSTITUTE:
        s = np.where([separates(q) for q in queries], s, 0.0)  # as solve_substitute
    upper = even_split_bound(queries, s)
    if neighbours is Neighbours.SUBSTITUTE:
        upper = min(2.0 * upper, witness_score(s)[1])
    return checked(dom, queries, s, comp, neighbours, _safe_upper(upper, s), None, None, False,
                   "one-pass split bound (time limit)", (note,))


def _out_of_time(deadline: float | None, queries: Sequence[Query]) -> bool:
    """The deadline has passed and what is left of the set-up is not small."""
    return (deadline is not None and time.monotonic() >= deadline
            and SETUP_SECONDS_PER_PREDICATE * n_predicates(queries) >= SETUP_FLOOR_SECONDS)


def scores(comp: Definition, w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The per-query scores h(w), refusing weights whose h overflows or underflows.

    A positive weight whose square underflows to 0 (or to a subnormal, which loses the relative
    precision the bounds rely on) would make γ_w too small — and noise calibrated from it too
    small: refuse it rather than return a bound that is not one.
    """
    with np.errstate(over="ignore", under="ignore"):
        s = h(comp, w)
    if not np.isfinite(s).all():
        i = int(np.flatnonzero(~np.isfinite(s))[0])
        raise QueryError(f"weight {w[i]:g} (query {i}) overflows under {comp}: h(w) = w² is not "
                         "a finite float", hint="rescale the weights (only their ratios matter)")
    # (pure: h(w) = w is w itself, subnormal or not; nothing is lost)
    lost = (w > 0) & (s < np.finfo(np.float64).tiny) & (comp is not Definition.PURE)
    if np.any(lost):
        i = int(np.flatnonzero(lost)[0])
        raise QueryError(f"weight {w[i]:g} (query {i}) underflows under {comp}: h(w) = w² is "
                         "not a normal float", hint="rescale the weights (only their ratios "
                         "matter), e.g. divide by the largest")
    return s


def witness_score(scores: npt.NDArray[np.float64]) -> tuple[float, float]:
    """(Σ scores correctly rounded, the smallest float ≥ the exact rational sum).

    Integral scores below 2^53 sum exactly in floats; otherwise the exact sum is taken in
    rationals, so that an 'exact' maximum is never reported half an ulp below the true one."""
    total = math.fsum(scores.tolist())
    if _integral(scores) and abs(total) < 2.0**53:
        return total, total
    exact = sum((Fraction(v) for v in scores.tolist()), Fraction(0))
    return total, total if Fraction(total) >= exact else math.nextafter(total, math.inf)


def checked(
    dom: Domain, queries: Sequence[Query], s: npt.NDArray[np.float64], comp: Definition,
    neighbours: Neighbours, upper: float, x: tuple[int, ...] | None, claimed: float | None,
    exact: bool, method: str, notes: tuple[str, ...] = (), y: tuple[int, ...] | None = None,
) -> OverlapResult:
    """Re-check the witness on every query, then package; a mismatch is a solver bug."""
    witness, achieved, achieved_up = None, 0.0, 0.0
    if x is not None:
        ix = touched(dom, queries, x)
        if y is not None:
            ix = ix ^ touched(dom, queries, y)
        achieved, achieved_up = witness_score(s[ix])
        if claimed is not None and not math.isclose(achieved, claimed, rel_tol=1e-9, abs_tol=1e-9):
            raise RuntimeError(f"{method}: witness scores {achieved}, solver claimed {claimed}")
        witness = Witness(tuple(x), tuple(int(i) for i in np.flatnonzero(ix)), y)
    if exact:
        # the claimed maximum and the re-checked witness agree up to rounding; report the larger,
        # rounded up: the witness's exact (rational) score is a maximum, and a float bound must
        # not round below it
        upper = max(upper, achieved_up)
        # 'exact' promises agreement to 1e-9 (relative); a rounding margin can exceed that for
        # extreme scores (subnormals): then it is an upper bound like any other
        exact = upper - achieved <= 1e-9 * abs(upper)
    if not (upper >= achieved and math.isfinite(upper)):  # fail closed, NaN included
        raise RuntimeError(f"{method}: upper bound {upper} below the witness's {achieved}")
    return OverlapResult(comp, neighbours, float(upper), achieved, exact, method, witness,
                         len(queries), math.fsum(s.tolist()), notes)


def solve_add_remove(
    dom: Domain, queries: Sequence[Query], s: npt.NDArray[np.float64], comp: Definition,
    method: str, deadline: float | None,
) -> OverlapResult:
    """S = max_x Σ_{q∈I(x)} s_q: a direct route when one applies (:func:`_direct_route`),
    else the anytime search portfolio (:func:`_search_route`), whose proven bounds are
    combined when it stops early (:func:`_stopped_early`)."""
    if method == "auto" and _out_of_time(deadline, queries):
        return quick_result(dom, queries, s, comp, Neighbours.ADD_REMOVE, LATE_NOTE)
    direct = _direct_route(dom, queries, s, comp, method)
    if direct is not None:
        return direct
    return _search_route(dom, queries, s, comp, method, deadline)


LATE_NOTE = ("time limit reached before the search started: one-pass bound, not exact; raise "
         "--time-limit (time_limit=) for a tighter one")


def _direct_route(
    dom: Domain, queries: Sequence[Query], s: npt.NDArray[np.float64], comp: Definition,
    method: str,
) -> OverlapResult | None:
    """Routes that answer in one step: the range sweep (Helly), the engine's max-plus at low
    width, enumeration of the realisable sets, and the colouring / split bounds on request."""
    add_remove = Neighbours.ADD_REMOVE
    if method in ("auto", "sweep"):
        fast = range_max_point(dom, queries, s)
        if fast is not None:
            value, x = fast
            return checked(dom, queries, s, comp, add_remove, value, x, value, True, "sweep",
                           ("range workload: γ equals the overlap graph's clique number (Helly)",))
        if method == "sweep":
            raise QueryError("the sweep needs range queries over at most two attributes",
                             hint="use --method auto")
    if method == "engine":
        upper, value, x, note = engine_point(dom, queries, s)
        return checked(dom, queries, s, comp, add_remove, upper, x, value, True, "engine",
                       (note,))
    if method == "auto" and len(queries) >= ENGINE_MIN_QUERIES:
        plan = estimate(dom, queries)
        if plan.feasible:
            try:
                upper, value, x, note = engine_point(dom, queries, s)
                return checked(dom, queries, s, comp, add_remove, upper, x, value, True,
                               "engine", (f"attribute graph width {plan.width}", note))
            except ResourceError:
                pass  # the engine's own memory plan refused: search instead
    if method == "enumerate":
        sets = realisable_sets(dom, queries, only_maximal=True)
        vals = sets.incidence.astype(np.float64) @ s
        i = int(np.argmax(vals)) if len(vals) else 0
        x = tuple(int(c) for c in sets.points[i])
        return checked(dom, queries, s, comp, add_remove, float(vals[i]), x, float(vals[i]),
                       True, "enumerate")
    if method in ("colouring", "split"):
        if method == "colouring":
            ub, k = colouring_bound(dom, queries, s)
            note = f"greedy/DSatur colouring with {k} colours"
        else:
            ub, note = split_bound(dom, queries, s), "Lagrangian split bound"
        return checked(dom, queries, s, comp, add_remove, _safe_upper(ub, s), None, None,
                       False, method, (note,))
    return None


def nodes_note(nodes: int) -> str:
    """How much search the proof took, in words a user reads: no nodes means the first bound
    already met the best solution."""
    if nodes == 0:
        return "proved at the root (no branching needed)"
    return f"{nodes} search node" + ("" if nodes == 1 else "s")


def _search_route(
    dom: Domain, queries: Sequence[Query], s: npt.NDArray[np.float64], comp: Definition,
    method: str, deadline: float | None,
) -> OverlapResult:
    """Our branch and bound (or mini-bucket search on wide predicates), with ToulBar2 after a
    short warm-up when it is installed and the workload is small enough; the time the exact
    solver does not use goes back to our search."""
    def remaining() -> float | None:
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    part = active_part(dom, queries, s)  # value classes, shared by the search and the bounds
    if method == "auto" and _out_of_time(deadline, queries):
        return quick_result(dom, queries, s, comp, Neighbours.ADD_REMOVE, LATE_NOTE)
    left = remaining()
    # wide predicates, or too many queries for colour-class bounds (measured: docs/benchmarks.md)
    use_mb = method == "mini-bucket" or (
        method == "auto" and len(queries) >= MINI_BUCKET_MIN_QUERIES
        and (len(queries) > COLOURING_QUERIES
             or mean_width(dom, queries) >= MINI_BUCKET_MIN_WIDTH))
    search = "mini-bucket" if use_mb else "branch-bound"
    # ToulBar2 after a short search of ours (incumbent), or alone when asked for
    portfolio = method == "toulbar2" or (
        method == "auto" and len(part.active) <= TOULBAR2_MAX_QUERIES and wcsp_available()
        and (left is None or (1 - TOULBAR2_WARMUP_SHARE) * left > WCSP_MIN_SECONDS))
    if portfolio:
        limit = (TOULBAR2_WARMUP_SECONDS if left is None
                 else min(TOULBAR2_WARMUP_SECONDS, TOULBAR2_WARMUP_SHARE * left))
    else:
        # keep a tenth of the time for the split bound, computed only if the search stops early
        limit = None if left is None else 0.9 * left

    def run_search(seconds: float | None) -> PointSolution:
        return (mbe_point(dom, queries, s, time_limit=seconds, ibound=MINI_BUCKET_IBOUND,
                          part=part) if use_mb
                else max_point(dom, queries, s, time_limit=seconds, part=part))

    def proven(sol: PointSolution, name: str, note: str) -> OverlapResult:
        return checked(dom, queries, s, comp, Neighbours.ADD_REMOVE, sol.upper, sol.x,
                       sol.lower, True, name, (note,))

    sol = run_search(limit)
    if sol.exact:
        return proven(sol, search, nodes_note(sol.nodes))
    bounds = {search: sol.upper}
    if portfolio:
        left = remaining()
        tb = wcsp_point(dom, queries, s, incumbent=(sol.lower, sol.x),
                        time_limit=None if left is None else 0.95 * left, part=part)
        if tb is not None:
            if tb.lower > sol.lower:
                sol = tb
            if tb.exact:
                return proven(tb, "toulbar2", "ToulBar2 proved optimality")
            bounds["toulbar2"] = tb.upper
        else:
            # ToulBar2 did not run (or failed): give the rest of the time to our own search
            left = remaining()
            if left is None or left > 0.1:
                again = run_search(None if left is None else 0.9 * left)
                if again.exact:
                    return proven(again, search, nodes_note(again.nodes))
                bounds[search] = min(bounds[search], again.upper)
                if again.lower > sol.lower:
                    sol = again
    return _stopped_early(dom, queries, s, comp, method, search, sol, bounds, part, remaining)


def _stopped_early(
    dom: Domain, queries: Sequence[Query], s: npt.NDArray[np.float64], comp: Definition,
    method: str, search: str, sol: PointSolution, bounds: dict[str, float], part: Any,
    remaining: Any,
) -> OverlapResult:
    """The search stopped at its time limit: every bound here is proven; keep the least.
    They share what is left of the time (the split bound always makes one pass, ~10 ms per
    10,000 queries)."""
    late = remaining() == 0.0 and (
        SETUP_SECONDS_PER_PREDICATE * n_predicates(queries) >= SETUP_FLOOR_SECONDS)
    if not late:  # (on a large workload past its deadline, the search's bound stands alone)
        bounds["split"] = split_bound(dom, queries, s, time_limit=remaining(), part=part)
    left = remaining()
    if COLOURING_QUERIES < len(queries) <= MAX_GRAPH_QUERIES // 4 and (
            left is None or graph_seconds(len(queries)) <= left):
        # (up to COLOURING_QUERIES the search's root bound already includes a colouring bound)
        bounds["colouring"] = colouring_bound(dom, queries, s)[0]
    name = min(bounds, key=lambda k: bounds[k])
    upper = max(_safe_upper(bounds[name], s), sol.lower)
    exact = upper <= sol.lower
    notes = (
        "time limit reached: bound is an upper bound, not exact" if not exact else
        "time limit reached but the bounds meet: exact",
        "bounds: " + ", ".join(f"{k} {v:.6g}" for k, v in bounds.items()),
    )
    if not exact and method == "auto" and len(part.active) <= TOULBAR2_MAX_QUERIES \
            and not wcsp_available():
        notes += ('the exact solver ToulBar2 may prove this one: pip install "tessera-dp[exact]"',)
    return checked(dom, queries, s, comp, Neighbours.ADD_REMOVE, upper, sol.x, sol.lower, exact,
                   f"{search} (anytime, best bound: {name})", notes)


def solve_boolean(
    dom: Domain, queries: Sequence[Any], s: npt.NDArray[np.float64], comp: Definition,
    neighbours: Neighbours, method: str,
) -> OverlapResult:
    """Workloads with Boolean (BDD) queries: only the max-plus engine evaluates them."""
    if method not in ("auto", "engine"):
        raise QueryError(f"method {method!r} needs predicate queries; this workload has Boolean "
                         "(BDD) queries", hint="use --method auto or engine")
    upper, value, x, note = engine_point(dom, queries, s)
    if neighbours is Neighbours.ADD_REMOVE:
        return checked(dom, queries, s, comp, Neighbours.ADD_REMOVE, upper, x, value, True,
                       "engine", (note,))
    # substitution: S_sub ≤ min(2·S, Σ s); the pair (x, best row over the queries x misses)
    total = math.fsum(s.tolist())
    miss = ~touched(dom, queries, x)
    _, _, y, _ = engine_point(dom, queries, np.where(miss, s, 0.0))
    ix = touched(dom, queries, x) ^ touched(dom, queries, y)
    achieved = math.fsum(s[ix].tolist())
    bound = min(2.0 * upper, total)
    return checked(dom, queries, s, comp, Neighbours.SUBSTITUTE, max(bound, achieved), x, None,
                   bound <= achieved, "engine, bound min(2·S_add/remove, Σ h(w))",
                   ("S_sub ≤ 2·S: I(x)ΔI(y) ⊆ I(x) ∪ I(y)", note), y=y)


def solve_clauses(
    dom: Domain, queries: Sequence[Query | BooleanClause], s: npt.NDArray[np.float64],
    comp: Definition, neighbours: Neighbours, method: str, time_limit: float | None,
) -> OverlapResult:
    """Workloads with Boolean WHERE clauses (:class:`~tessera.workload.clause.BooleanClause`).

    Add/remove: the max-plus engine when its estimate passes (exact), else every clause as
    disjoint predicate terms (:mod:`.clauses`) for the predicate solvers: the same objective,
    so their answer (exact, or a proven bound at the time limit) is the workload's; a relaxed
    expansion (a clause with too many terms) gives an upper bound. Substitution: the pairs of
    realisable sets of the expansion, clauses collapsed back (exact), else the predicate
    solvers' S_sub of the expansion (an upper bound: a clause changes only where one of its
    terms does), else min(2·S, Σ h(w))."""
    start = time.monotonic()
    deadline = None if time_limit is None else start + float(time_limit)
    ex = expand(queries)
    if neighbours is Neighbours.ADD_REMOVE:
        return _clauses_add_remove(dom, queries, s, comp, method, deadline, ex)
    sub = Neighbours.SUBSTITUTE
    s = np.where([separates(q) for q in queries], s, 0.0)  # as _substitute
    total = math.fsum(s.tolist())
    if ex.exact and method in ("auto", "enumerate"):
        try:
            value, x, y = exact_pair(dom, ex, s)
            ix = touched(dom, queries, x) ^ touched(dom, queries, y)
            achieved = math.fsum(s[ix].tolist())
            eps = float(np.finfo(np.float64).eps)
            upper = (value if _integral(s) else
                     max(value, achieved) + 4.0 * (len(s) + 1) * eps * total)
            return checked(dom, queries, s, comp, sub, upper, x, achieved,
                           upper - achieved <= 1e-9 * abs(upper),
                           "enumerate (pairs of overlap patterns)", (ex.describe(),), y=y)
        except ResourceError:
            if method == "enumerate":
                raise
    left = None if deadline is None else max(0.0, deadline - time.monotonic())
    if ex.exact and method != "engine":
        res = solve_substitute(dom, ex.queries, ex.scores(s), comp, method, left)
        assert res.witness is not None and res.witness.y is not None
        x, y = res.witness.x, res.witness.y
        upper = min(res.score_bound, total)
        name = f"{res.method}, on the clauses' disjoint terms"
        notes: tuple[str, ...] = (
            ex.describe(), "S_sub of the terms bounds the workload's: a clause changes between "
            "two rows only if one of its terms does", *res.notes)
    else:
        base = _clauses_add_remove(dom, queries, s, comp, method, deadline, ex)
        upper = min(2.0 * base.score_bound, total)
        x = base.witness.x if base.witness is not None else (0,) * len(dom)
        miss = ~touched(dom, queries, x)
        second = _clauses_add_remove(dom, queries, np.where(miss, s, 0.0), comp, "auto",
                                     deadline, ex)
        y = second.witness.x if second.witness is not None else x
        name = "bound min(2·S_add/remove, Σ h(w))"
        notes = ("S_sub ≤ 2·S: I(x)ΔI(y) ⊆ I(x) ∪ I(y)", *base.notes)
    ix = touched(dom, queries, x) ^ touched(dom, queries, y)
    achieved = math.fsum(s[ix].tolist())
    return checked(dom, queries, s, comp, sub, max(upper, achieved), x, None,
                   upper <= achieved, name, notes, y=y)


def _clauses_add_remove(
    dom: Domain, queries: Sequence[Query | BooleanClause], s: npt.NDArray[np.float64],
    comp: Definition, method: str, deadline: float | None, ex: Expansion,
) -> OverlapResult:
    """S = max_x Σ_{q∈I(x)} s_q with Boolean clauses (:func:`_clauses`)."""
    add_remove = Neighbours.ADD_REMOVE
    if method == "engine" or (method == "auto" and estimate(dom, queries).feasible):
        try:
            upper, value, x, note = engine_point(dom, queries, s)
            return checked(dom, queries, s, comp, add_remove, upper, x, value, True, "engine",
                           (note,))
        except ResourceError:
            if method == "engine":
                raise
    res = solve_add_remove(dom, ex.queries, ex.scores(s), comp,
                           "auto" if method == "engine" else method, deadline)
    x = res.witness.x if res.witness is not None else None
    name = f"{res.method}, on the clauses' disjoint terms"
    if ex.exact:  # the same objective: the witness scores what the solver claimed
        return checked(dom, queries, s, comp, add_remove, res.score_bound, x,
                       None if x is None else res.score_achieved, res.exact, name,
                       (ex.describe(), *res.notes))
    achieved = 0.0 if x is None else math.fsum(s[touched(dom, queries, x)].tolist())
    upper = res.score_bound
    return checked(dom, queries, s, comp, add_remove, max(upper, achieved), x, None,
                   upper - achieved <= 1e-9 * abs(upper), name, (ex.describe(), *res.notes))


def solve_substitute(
    dom: Domain, queries: Sequence[Query], s: npt.NDArray[np.float64], comp: Definition,
    method: str, time_limit: float | None,
) -> OverlapResult:
    start = time.monotonic()
    # a tautology or a contradiction takes the same value at every row: it never separates two
    # rows (its count does not change when a row is replaced), so it weighs nothing here — and
    # leaving its score in would only invite cancellation in own(x) + own(y) − 2·common
    s = np.where([separates(q) for q in queries], s, 0.0)
    total = math.fsum(s.tolist())
    if method in ("auto", "enumerate"):
        try:
            value, x, y = exact_substitution(dom, queries, s)
            # the pair's value is a float matmul: the maximum is within its rounding error
            # (≤ 4(t+1)·eps·Σ) of it; the pair itself is re-scored exactly
            ix = touched(dom, queries, x) ^ touched(dom, queries, y)
            achieved = math.fsum(s[ix].tolist())
            eps = float(np.finfo(np.float64).eps)
            upper = (value if _integral(s) else
                     max(value, achieved) + 4.0 * (len(s) + 1) * eps * total)
            tight = upper - achieved <= 1e-9 * abs(upper)
            return checked(dom, queries, s, comp, Neighbours.SUBSTITUTE, upper, x, achieved, tight,
                           "enumerate (pairs of overlap patterns)", y=y)
        except ResourceError:
            if method == "enumerate":
                raise
    # S_sub ≤ min(2·S, Σ s): bound from the add/remove score; witness pair from a second solve
    # with ToulBar2 to follow, the heuristic pair and the 2·S bound get half the time. auto tries
    # it where it was measured to finish (docs/benchmarks.md): few attributes (1,000 queries over
    # 3 attributes: exact in 7 s) or few queries (random ones over 15 attributes: t ≤ ~40)
    n_attrs = len({p.attribute for q in queries for p in q.predicates})
    exact_next = method in ("auto", "toulbar2") and wcsp_available() and (
        method == "toulbar2" or (len(queries) <= TOULBAR2_MAX_QUERIES and (
            n_attrs <= TOULBAR2_SUBSTITUTION_MAX_ATTRIBUTES
            or len(queries) <= TOULBAR2_SUBSTITUTION_MAX_QUERIES)))
    share = 0.5 if exact_next else 1.0
    base = solve_add_remove(dom, queries, s, comp,
                            "auto" if method in ("auto", "toulbar2") else method,
                            None if time_limit is None else start + share * time_limit / 2)
    upper = min(2.0 * base.score_bound, total)
    x = base.witness.x if base.witness else tuple([0] * len(dom))
    miss = ~touched(dom, queries, x)
    # the second solve only improves the witness pair (and may prove exactness): cap its time
    rest = (TOULBAR2_WARMUP_SECONDS if exact_next else 10.0) if time_limit is None else max(
        0.0, share * time_limit - (time.monotonic() - start))
    second = max_point(dom, queries, np.where(miss, s, 0.0), time_limit=rest)
    y = second.x
    ix = touched(dom, queries, x) ^ touched(dom, queries, y)
    achieved = math.fsum(s[ix].tolist())
    name, notes = "bound min(2·S_add/remove, Σ h(w))", ("S_sub ≤ 2·S: I(x)ΔI(y) ⊆ I(x) ∪ I(y)",)
    proved = False
    if exact_next and upper > achieved:
        left = None if time_limit is None else time_limit - (time.monotonic() - start)
        pair = wcsp_substitution(dom, queries, s, incumbent=(x, y),
                                 time_limit=None if left is None else 0.95 * left)
        if pair is not None:
            if pair.lower > achieved:
                x, y, achieved = pair.x, pair.y, pair.lower
            if pair.exact or pair.upper < upper:
                upper, proved = pair.upper, pair.exact
                proved = proved and upper - achieved <= 1e-9 * max(upper, 1e-300)
                name = "toulbar2" if pair.exact else "toulbar2 (anytime, dual bound)"
                notes = ("ToulBar2 proved optimality" if pair.exact else
                         "time limit reached: ToulBar2's proven dual bound",)
    if proved:
        # its bound and the re-checked pair agree up to the rounding of scaled costs
        return checked(dom, queries, s, comp, Neighbours.SUBSTITUTE, upper, x, achieved, True,
                       "toulbar2", notes, y=y)
    exact = upper <= achieved
    return checked(dom, queries, s, comp, Neighbours.SUBSTITUTE, max(upper, achieved), x, None,
                   exact, name, notes, y=y)
