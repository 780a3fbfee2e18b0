"""γ_w of a person counted once per query (docs/theory.md §3.14): the overlap dispatcher's route
for a :class:`~tessera.privacy.PrivacyUnit` with ``count="people"``.

Each query is a distinct count, so one person moves it by [some kept row lies in q] ∈ {0, 1}
and |Δ_q| = Δ_q²: the person's score is the maximum weighted coverage C_K(s) of K records with
the *same* per-query scores s_q = h(w_q) as a row's (w under pure ε, w² under zCDP and μ²), and
γ_w = g(C_K) — no factor K or K² (:mod:`.coverage`). Under substitution of one person (its ≤ K
rows, possibly none, replaced by ≤ K others, possibly none) the queries that change are those
covered by exactly one of the two sets, cov(R) Δ cov(R') ⊆ cov(R ∪ R'), so C_K ≤ cost ≤ C_2K:
the bound is C_2K (R' = ∅ attains C_K, the witness).

The row-level solve (any route: structured, clauses, BDDs, ranges) gives the bound K·S and, when
the workload is too large to enumerate, the point solver of the greedy witness.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.errors import TesseraError
from tessera.overlap.coverage import CoverageResult, float_down, float_up, max_coverage
from tessera.overlap.result import OverlapResult, Witness
from tessera.overlap.routes import scores as h_scores
from tessera.privacy import Definition, Neighbours, PrivacyUnit
from tessera.schema.domain import Domain
from tessera.workload.clause import BooleanClause
from tessera.workload.query import Query

#: A workload expanded to more queries than this is bounded, not searched (min(K·S, Σ s)).
COVERAGE_MAX_QUERIES = 20_000

Solver = Callable[..., OverlapResult]


def person_coverage(
    workload_or_queries: Any, weights: npt.ArrayLike | None, domain: Domain | None,
    comp: Definition, neighbours: Neighbours, time_limit: float | None, method: str,
    unit: PrivacyUnit, solver: Solver,
) -> OverlapResult:
    """The person's γ_w under distinct counting (module docs); ``solver`` is
    :func:`tessera.overlap.max_overlap` (for the row score S and the greedy's point solves)."""
    start = time.monotonic()
    k = unit.max_rows
    row = solver(workload_or_queries, weights, domain=domain, comp=comp,
                 neighbours=Neighbours.ADD_REMOVE,
                 time_limit=None if time_limit is None else time_limit / 3, method=method)
    unpacked = _queries(workload_or_queries, weights, domain)
    if unpacked is None:  # too many queries to search: K·S and Σ s
        if neighbours is Neighbours.SUBSTITUTE:
            k *= 2  # the coverage of 2K rows (module docs)
        value = min(k * Fraction(row.score_bound), Fraction(row.total_score))
        bound = max(float_up(value), row.score_achieved)
        return OverlapResult(comp, neighbours, bound, row.score_achieved,
                             bound <= row.score_achieved,
                             f"min(K·S, Σ s) ({row.method})", row.witness, row.n_queries,
                             row.total_score, (*row.notes, (
                                 f"distinct counting: more than {COVERAGE_MAX_QUERIES:,} "
                                 "queries to search for K records; min(K·S, Σ s) is used")),
                             unit)
    dom, queries, w = unpacked
    s = h_scores(comp, w)
    left = None if time_limit is None else max(0.0, time_limit - (time.monotonic() - start))

    def point(left_scores: npt.NDArray[np.float64]) -> tuple[tuple[int, ...] | None, float]:
        r = solver(list(queries), left_scores, domain=dom, comp=Definition.PURE,
                   neighbours=Neighbours.ADD_REMOVE, time_limit=left, method=method)
        return (None if r.witness is None else r.witness.x), r.score_bound

    searched = [q for q in queries if type(q) is Query or isinstance(q, BooleanClause)]
    if len(searched) == len(queries):
        cov = max_coverage(dom, queries, s, k, row_bound=row.score_bound, point=point,
                           time_limit=left)
    else:  # compiled Boolean (BDD) queries: no enumeration of their patterns here
        cov = _bounds_only(dom, queries, s, k, row, point)
    value, notes = cov.value, cov.notes
    method_text = f"coverage of {k} rows per person ({cov.method})"
    if neighbours is Neighbours.SUBSTITUTE:
        twice = (max_coverage(dom, queries, s, 2 * k, row_bound=row.score_bound, point=point,
                              time_limit=left) if len(searched) == len(queries)
                 else _bounds_only(dom, queries, s, 2 * k, row, point))
        value = max(twice.value, cov.achieved)
        notes = (*notes, *twice.notes, "substitute one person: bounded by the coverage of 2K "
                 "rows (the queries that change are covered by the old or the new rows)")
        method_text = f"coverage of 2×{k} rows per person (substitution; {twice.method})"
    exact = value == cov.achieved
    witness = None
    if cov.witness:
        witness = Witness(cov.witness[0], cov.covered, None, cov.witness[1:])
    return OverlapResult(comp, neighbours, float_up(value), float_down(cov.achieved), exact,
                         method_text, witness, len(queries), float(np.sum(s)),
                         (*row.notes, *notes), unit)


def _queries(workload_or_queries: Any, weights: npt.ArrayLike | None, domain: Domain | None
             ) -> tuple[Domain, list[Any], npt.NDArray[np.float64]] | None:
    """(domain, queries, weights) with families expanded; None beyond
    :data:`COVERAGE_MAX_QUERIES`."""
    wl = workload_or_queries
    n = wl.n_queries if hasattr(wl, "n_queries") else len(getattr(wl, "queries", wl))
    if n > COVERAGE_MAX_QUERIES:
        return None
    if getattr(wl, "partitions", ()):
        wl = wl.expanded(max_queries=COVERAGE_MAX_QUERIES)
        if weights is None:
            weights = wl.weights
    if hasattr(wl, "queries") and hasattr(wl, "domain"):
        dom = wl.domain if domain is None else domain
        queries = list(wl.queries)
        weights = wl.weights if weights is None else weights
    else:
        if domain is None:
            raise TesseraError("a domain is needed with a plain list of queries")
        dom, queries = domain, list(wl)
    w = (np.ones(len(queries)) if weights is None
         else np.asarray(weights, dtype=np.float64).reshape(-1))
    if w.shape != (len(queries),):
        raise TesseraError(f"{w.size} weights for {len(queries)} queries")
    return dom, queries, w


def _bounds_only(dom: Domain, queries: list[Any], s: npt.NDArray[np.float64], k: int,
                 row: OverlapResult, point: Any) -> CoverageResult:
    """Compiled Boolean (BDD) queries: the greedy witness by point solves, and min(K·S, Σ s)."""
    from tessera.overlap.coverage import covered_by, exact_sum

    records: list[tuple[int, ...]] = []
    covered = np.zeros(len(queries), dtype=bool)
    left = s.copy()
    for _ in range(k):
        x, upper = point(left)
        if x is None or upper <= 0:
            break
        hit = covered_by(dom, queries, [x])
        if not np.any(left[hit] > 0):
            break
        records.append(x)
        covered |= hit
        left[hit] = 0.0
    achieved = exact_sum(s, covered)
    bounds = (("K·S (K times the row score)", k * Fraction(row.score_bound)),
              ("Σ s (every query)", exact_sum(s)))
    value = max(achieved, min(b for _, b in bounds))
    return CoverageResult(k, value, achieved, value == achieved, "greedy witness; min(K·S, Σ s)",
                          tuple(records), tuple(int(i) for i in np.flatnonzero(covered)),
                          bounds, ("compiled Boolean queries: the coverage is bounded, not "
                                   "searched",))


__all__ = ["COVERAGE_MAX_QUERIES", "person_coverage"]
