"""The maximum-overlap dispatcher: γ_w(Q) with a certificate (docs/theory.md §3).

:func:`max_overlap` sends a structured workload (:attr:`~tessera.workload.workload.Workload.
partitions`: marginals, data cubes, hierarchy levels) to :mod:`.structured` — never expanded:
each family of disjoint cells adds its heaviest cell at most (its two heaviest under
substitution), and a witness row re-checked on every query proves exactness — and predicate
queries and Boolean clauses to the routes of :mod:`.routes` (sweep, branch and bound,
mini-bucket, ToulBar2, enumeration, the engine, colouring and split bounds), after trying to
recover families from predicate workloads (:mod:`.recover`).

Only :attr:`OverlapResult.bound` may calibrate noise; it is exact or a proven upper bound.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.errors import QueryError, TesseraError
from tessera.overlap import recover, routes, structured
from tessera.overlap.clauses import expand, has_clauses, maximal_sets
from tessera.overlap.engine_route import is_boolean
from tessera.overlap.people import person_coverage
from tessera.overlap.quick import n_predicates
from tessera.overlap.range_overlap import single_family, solve_range_family
from tessera.overlap.recover import recover_families
from tessera.overlap.result import OverlapResult, composable, per_unit
from tessera.overlap.routes import (
    METHODS,
    Method,
    quick_result,
    scores,
    solve_add_remove,
    solve_boolean,
    solve_clauses,
    solve_substitute,
)
from tessera.overlap.substitution import (
    maximal_rows,
    realisable_sets,
)
from tessera.overlap.wcsp import available as wcsp_available
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.schema.domain import Domain
from tessera.workload.query import Query

#: :func:`maximal_overlapping_sets` expands a structured workload up to this many queries.
MAXIMAL_SETS_MAX_QUERIES = 20_000



def _unpack(
    workload_or_queries: Any, weights: npt.ArrayLike | None, domain: Domain | None,
    expand: int | None = None,
) -> tuple[Domain, tuple[Query, ...], npt.NDArray[np.float64]]:
    """(domain, queries, weights) of a workload or a plain list of queries. A structured
    workload (with families) is expanded to at most ``expand`` queries when that is given, and
    refused otherwise (its callers take the structured route)."""
    if structured.is_structured(workload_or_queries):
        if expand is None:
            raise QueryError("this call needs the workload's cells as queries",
                             hint="pass workload.expanded() (max_overlap takes the structured "
                             "form as it is)")
        workload_or_queries = workload_or_queries.expanded(max_queries=expand)
    if hasattr(workload_or_queries, "queries") and hasattr(workload_or_queries, "domain"):
        dom = workload_or_queries.domain if domain is None else domain
        queries = tuple(workload_or_queries.queries)
        w = workload_or_queries.weights if weights is None else weights
    else:
        if domain is None:
            raise QueryError("a domain is needed with a plain list of queries")
        dom, queries, w = domain, tuple(workload_or_queries), weights
    wa = np.ones(len(queries)) if w is None else np.asarray(w, dtype=np.float64)
    if wa.shape != (len(queries),):
        raise QueryError(f"{len(wa)} weights for {len(queries)} queries")
    if not (np.isfinite(wa).all() and (wa >= 0).all()):
        raise QueryError("weights must be finite and ≥ 0")
    return dom, queries, wa


def max_overlap(
    workload_or_queries: Any,
    weights: npt.ArrayLike | None = None,
    *,
    domain: Domain | None = None,
    comp: Definition | str = Definition.PURE,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    time_limit: float | None = None,
    method: Method = "auto",
    unit: PrivacyUnit = ONE_ROW,
) -> OverlapResult:
    """γ_w(Q) = g(max_x Σ_{q∈I(x)} h(w_q)) (add/remove) or g(max_{x,y} Σ_{I(x)ΔI(y)} h(w_q))
    (substitute), with a re-checked witness. Weights default to the workload's (or 1).

    ``unit``: a person of at most K rows (docs/theory.md §3.13) scores ``unit.factor(comp)``
    times the largest row score of ``unit.row_relations(neighbours)`` (:func:`.result.per_unit`):
    γ_w grows by K under ``pure`` and ``gdp`` (L1 and L2 sensitivity K·γ, K·√S) and the score
    by K² under ``zcdp``. This is the one place a person's γ is made; the solves share the
    time limit. A person counted once per query (``unit.count == "people"``) scores the
    maximum weighted coverage of K rows instead (:func:`.people.person_coverage`,
    docs/theory.md §3.14).

    A structured workload (:attr:`~tessera.workload.workload.Workload.partitions`) is solved from
    its families without expanding them (:func:`.structured.solve_structured`, the partition bound);
    explicit ``weights`` then give one weight per query in
    :meth:`~tessera.workload.workload.Workload.expanded` order, and the witness's queries are
    indices in that order."""
    start = time.monotonic()
    comp = composable(comp)
    try:
        neighbours = Neighbours.parse(neighbours)
    except TesseraError as e:
        raise QueryError(e.message, hint=e.hint) from None
    if unit.counts_people:
        return person_coverage(workload_or_queries, weights, domain, comp, neighbours,
                               time_limit, method, unit, max_overlap)
    if not unit.is_row:
        relations = unit.row_relations(neighbours)
        share = None if time_limit is None else time_limit / len(relations)
        rows = [max_overlap(workload_or_queries, weights, domain=domain, comp=comp,
                            neighbours=rel, time_limit=share, method=method)
                for rel in relations]
        return per_unit(rows, unit, neighbours, unit.factor(comp))
    if method not in METHODS:
        raise QueryError(f"unknown method {method!r}", hint=f"one of {', '.join(METHODS)}")
    if method == "toulbar2" and not wcsp_available():
        raise QueryError("method 'toulbar2' needs the ToulBar2 solver",
                         hint='pip install "tessera-dp[exact]"')
    ranges = single_family(workload_or_queries, weights) if method == "auto" else None
    if ranges is not None:  # every range or prefix over 1-2 attributes: closed form, exact
        dom = domain if domain is not None else workload_or_queries.domain
        return solve_range_family(dom, *ranges, comp, neighbours)
    if structured.is_structured(workload_or_queries):
        return structured.solve_structured(workload_or_queries, weights, domain, comp,
                                           neighbours, time_limit, method, max_overlap)
    dom, queries, w = _unpack(workload_or_queries, weights, domain)
    s = scores(comp, w)
    if any(is_boolean(q) for q in queries):
        return solve_boolean(dom, queries, s, comp, neighbours, method)
    if has_clauses(queries):
        return solve_clauses(dom, queries, s, comp, neighbours, method, time_limit)
    deadline = None if time_limit is None else start + float(time_limit)
    if method == "auto" and len(queries) >= recover.RECOVER_MIN_QUERIES:
        # (linear, and it gives up early on groups that are not cells)
        recovery = recover_families(dom, queries, w, deadline=deadline)
        if recovery is not None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            return structured.solve_recovered(dom, queries, s, comp, neighbours, left,
                                              recovery, max_overlap)
    if time_limit is not None and method == "auto":
        setup = routes.SETUP_SECONDS_PER_PREDICATE * n_predicates(queries)
        if setup >= routes.SETUP_FLOOR_SECONDS and setup > time_limit:
            return quick_result(dom, queries, s, comp, neighbours, (
                f"time limit {time_limit:g} s is shorter than the solvers' set-up for "
                f"{len(queries):,} queries (about {setup:.0f} s): one-pass bound, not exact; "
                f"raise --time-limit (time_limit=) above {math.ceil(setup)} s for a tighter one"))
    if neighbours is Neighbours.SUBSTITUTE:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return solve_substitute(dom, queries, s, comp, method, left)
    return solve_add_remove(dom, queries, s, comp, method, deadline)


def maximal_overlapping_sets(
    workload_or_queries: Any, *, domain: Domain | None = None, max_sets: int = 20_000
) -> list[tuple[int, ...]]:
    """The maximal overlapping sets I_2 (maximal I(x) over 𝔻; docs/theory.md §3 Thm 6), largest
    first.

    Exact enumeration over value classes; :class:`ResourceError` when more than ``max_sets``
    partial patterns arise. Needed for heterogeneous f-DP (compose each set, take the lce).
    """
    dom, queries, _ = _unpack(workload_or_queries, None, domain, expand=MAXIMAL_SETS_MAX_QUERIES)
    if any(is_boolean(q) for q in queries):
        raise QueryError("maximal overlapping sets need predicate queries; this workload has "
                         "Boolean (BDD) queries", hint="use max_overlap for γ_w")
    if has_clauses(queries):
        ex = expand(queries)
        if not ex.exact:
            raise QueryError("maximal overlapping sets: a Boolean clause has too many disjoint "
                             "terms to enumerate", hint="use max_overlap for γ_w")
        rows = maximal_sets(dom, ex, max_sets)
        out = [tuple(int(i) for i in np.flatnonzero(r)) for r in rows]
        return sorted(out, key=lambda t: (-len(t), t))
    sets = realisable_sets(dom, queries, max_states=max_sets, only_maximal=True)
    rows = sets.incidence[maximal_rows(sets.incidence)]
    out = [tuple(int(i) for i in np.flatnonzero(r)) for r in rows]
    return sorted(out, key=lambda t: (-len(t), t))
