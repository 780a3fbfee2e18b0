"""The structured-workload route of :func:`~.solve.max_overlap`: the partition bound.

A workload with families of disjoint cells (:attr:`~tessera.workload.workload.Workload.partitions`:
marginals, data cubes, hierarchy levels) is never expanded to find γ_w (docs/theory.md §3): each
family adds its heaviest cell at most (its two heaviest under substitution), the predicate
queries go to the ordinary solvers of :mod:`.solve`, and a witness row (pair) re-checked on the
predicate queries and on each family's own groups proves exactness (:func:`solve_structured`,
:mod:`.families`). The same route serves the structure :mod:`.recover` finds in a plain list of
queries read from text (:func:`solve_recovered`), re-checked on the original queries.

This module and :mod:`.solve` call each other; both import the other as a module object and
look names up at call time, so either may be imported first. Its tuning constants
(``EXPANDED_MAX_QUERIES``, ``ASCENT_SECONDS``) stay in :mod:`.solve` and are read from there.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.errors import QueryError
from tessera.overlap import routes
from tessera.overlap.clauses import has_clauses
from tessera.overlap.engine_route import is_boolean
from tessera.overlap.families import FamilyTable, Objective, ascend, upper_sum
from tessera.overlap.recover import Recovery
from tessera.overlap.result import OverlapResult, Witness
from tessera.privacy import Definition, Neighbours
from tessera.schema.domain import Domain
from tessera.workload.clause import separates
from tessera.workload.query import Query

#: Solves the predicate queries of a structured workload: :func:`~.solve.max_overlap`.
PredicateSolver = Callable[..., OverlapResult]
#: A structured workload whose partition bound is not attained by the rows found is solved again
#: expanded (every cell a query) by the ordinary solvers when it has at most this many queries.
EXPANDED_MAX_QUERIES = 20_000
#: The local search for a row (pair) attaining the partition bound gets at most this long.
ASCENT_SECONDS = 1.0


def is_structured(workload_or_queries: Any) -> bool:
    return bool(getattr(workload_or_queries, "partitions", ()))


def _unpack_structured(
    workload: Any, weights: npt.ArrayLike | None, domain: Domain
) -> tuple[npt.NDArray[np.float64], list[float | npt.NDArray[np.float64]]]:
    """The predicate queries' weights and, per family, its weight (a number when all its cells
    share it, else one per cell, row-major). Default: the workload's own weights; an explicit
    vector has one weight per query in :meth:`~tessera.workload.workload.Workload.expanded`
    order."""
    t = len(workload.queries)
    parts = workload.partitions
    if weights is None:
        wp = np.asarray(workload.weights, dtype=np.float64).reshape(t)
        fam: list[float | npt.NDArray[np.float64]] = [float(p.weight) for p in parts]
    else:
        sizes = [p.n_cells_in(domain) for p in parts]
        n = t + sum(sizes)
        wa = np.asarray(weights, dtype=np.float64)
        if wa.shape != (n,):
            raise QueryError(
                f"{wa.size} weights for a structured workload of {n:,} queries ({t:,} predicate "
                f"queries and {n - t:,} cells of {len(parts)} families)",
                hint="one weight per query in Workload.expanded() order: the predicate queries, "
                "then each family's cells row-major (as Workload.all_weights() gives them)")
        if not (np.isfinite(wa).all() and (wa >= 0).all()):
            raise QueryError("weights must be finite and ≥ 0")
        wp, fam, at = wa[:t], [], t
        for size in sizes:
            cells = wa[at:at + size]
            fam.append(float(cells[0]) if size and bool(np.all(cells == cells[0])) else cells)
            at += size
    if not (np.isfinite(wp).all() and (wp >= 0).all()):
        raise QueryError("weights must be finite and ≥ 0")
    return wp, fam


def solve_structured(
    workload: Any, weights: npt.ArrayLike | None, domain: Domain | None, comp: Definition,
    neighbours: Neighbours, time_limit: float | None, method: str,
    predicate_solver: PredicateSolver,
) -> OverlapResult:
    """γ_w of a workload with structured families: the partition bound (:mod:`.families`).
    ``predicate_solver`` is :func:`~.solve.max_overlap`, passed in (the dispatcher calls this
    route, and this route calls the dispatcher on the predicate part).

    S ≤ S_pred + Σ_P (a family's share: its heaviest cell; its two heaviest under substitution),
    S_pred bounded by the ordinary solvers on the predicate queries alone. The witness is their
    row (pair), improved by a local search when it does not attain the families' share; when the
    bound is still not attained and the expanded workload is small (≤ ``EXPANDED_MAX_QUERIES``),
    the ordinary solvers run on every query for an exact answer or a tighter bound."""
    start = time.monotonic()
    deadline = None if time_limit is None else start + float(time_limit)
    sub = neighbours is Neighbours.SUBSTITUTE
    dom = workload.domain if domain is None else domain
    queries = tuple(workload.queries)
    w_pred, fam_w = _unpack_structured(workload, weights, dom)
    s_raw = routes.scores(comp, w_pred)
    tables: list[FamilyTable] = []
    offset = len(queries)
    maps: dict[Any, Any] = {}  # code maps shared by the families that cut an attribute alike
    for p, fw in zip(workload.partitions, fam_w):
        tables.append(FamilyTable.build(dom, p, offset, _family_scores(comp, p, fw), maps))
        offset += tables[-1].n_cells
    n_queries = offset
    # under substitution a tautology or a contradiction never separates two rows (as
    # solve_substitute)
    s_pred = s_raw if not sub else np.where([separates(q) for q in queries], s_raw, 0.0)
    total = float(Fraction(math.fsum(s_pred.tolist()))
                  + sum((t.total(sub) for t in tables), Fraction(0)))
    # uniform families that cover their attributes are attained at every row (add/remove): then
    # the predicate part alone decides, and gets all the time
    attained_anywhere = not sub and all(t.uniform is not None and t.covers for t in tables)
    may_expand = (not attained_anywhere and n_queries <= EXPANDED_MAX_QUERIES
                  and not any(is_boolean(q) for q in queries))
    x: tuple[int, ...] = (0,) * len(dom)
    y: tuple[int, ...] | None = x if sub else None
    pred_upper, pred_exact, route = 0.0, True, "partition bound"
    notes: list[str] = []
    if queries:
        share = None if time_limit is None else (0.5 if may_expand else 1.0) * time_limit
        pred = predicate_solver(queries, w_pred, domain=dom, comp=comp, neighbours=neighbours,
                           time_limit=share, method=method)  # type: ignore[arg-type]
        pred_upper, pred_exact = pred.score_bound, pred.exact
        if pred.witness is not None:
            x, y = pred.witness.x, (pred.witness.y if sub else None)
        route += f" + {pred.method} ({len(queries):,} predicate queries)"
        notes.extend(f"predicate queries: {n}" for n in pred.notes)
    pieces = [v for t in tables for v in (t.substitution_bound() if sub else
                                          t.add_remove_bound())]
    upper = upper_sum([pred_upper, *pieces])
    share_word = "two heaviest cells" if sub else "heaviest cell"
    notes.insert(0, f"partition bound: {len(tables):,} families ({n_queries - len(queries):,} "
                    f"cells), each adding its {share_word} at most")
    objective = Objective(dom, queries, s_pred, tuple(tables))
    claimed = float(objective.values(np.array([x]), None if y is None else np.array([y]))[0])

    def tight(value: float) -> bool:
        return upper - value <= 1e-9 * abs(upper)

    if not tight(claimed) and pred_exact:
        stop = time.monotonic() + ASCENT_SECONDS
        x2, y2, value = ascend(objective, x, y, target=upper,
                               deadline=stop if deadline is None else min(stop, deadline))
        if value > claimed:
            x, y, claimed = x2, y2, value
            route += ", local search"
    if not tight(claimed) and may_expand and pred_exact and (
            deadline is None or time.monotonic() < deadline):
        expanded = workload.expanded(max_queries=EXPANDED_MAX_QUERIES)
        s_all = np.concatenate([s_raw] + [np.full(t.n_cells, t.uniform) if t.uniform is not None
                                          else t.table for t in tables])
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if has_clauses(queries):
            res = routes.solve_clauses(dom, expanded.queries, s_all, comp, neighbours, "auto", left)
        else:
            res = (routes.solve_substitute(dom, expanded.queries, s_all, comp, "auto", left)
                   if sub else
                   routes.solve_add_remove(dom, expanded.queries, s_all, comp, "auto", deadline))
        notes.append(f"the partition bound ({upper:.6g}) was not attained: solved expanded "
                     f"({n_queries:,} queries) by {res.method}, bound {res.score_bound:.6g}")
        if res.score_bound < upper:
            upper, route = res.score_bound, f"expanded: {res.method}"
        if res.witness is not None and res.score_achieved > claimed:
            x, y, claimed = res.witness.x, res.witness.y, res.score_achieved
    return _family_result(objective, comp, neighbours, upper, x, y, claimed, route,
                          tuple(notes), n_queries, total, pred_exact)


def _family_scores(comp: Definition, p: Any,
                   weights: float | npt.NDArray[np.float64]) -> float | npt.NDArray[np.float64]:
    """h(w) of one family's weight (or of each cell's), refused as
    :func:`~.routes.scores` refuses."""
    try:
        s = routes.scores(comp, np.atleast_1d(np.asarray(weights, dtype=np.float64)))
    except QueryError as e:
        raise QueryError(f"family {p.name!r}: {e.message}", hint=e.hint) from None
    return float(s[0]) if isinstance(weights, float) else s


def _family_result(
    objective: Objective, comp: Definition, neighbours: Neighbours, upper: float,
    x: tuple[int, ...], y: tuple[int, ...] | None, claimed: float, method: str,
    notes: tuple[str, ...], n_queries: int, total: float, pred_exact: bool,
) -> OverlapResult:
    """Re-check the witness (predicate queries evaluated on x, y; each family's cell of x, y
    from its code maps, confirmed on the family's groups themselves), then package like
    :func:`~.routes.checked`; witness queries are indices in expanded order."""
    dom, queries = objective.domain, objective.queries
    ix = routes.touched(dom, queries, x)
    if y is not None:
        ix = ix ^ routes.touched(dom, queries, y)
    index = np.flatnonzero(ix).tolist()
    hit = objective.scores[ix].tolist()
    cxs = objective.cells(np.array([x]))[0].tolist()
    cys = objective.cells(np.array([y]))[0].tolist() if y is not None else [-1] * len(cxs)
    for t, cx, cy in zip(objective.tables, cxs, cys):
        # the cells of I(x) Δ I(y) (of I(x) under add/remove), each with the row it holds
        cells = ([(cx, x, None)] if cx >= 0 else []) if y is None else (
            [] if cx == cy else [(c, r, o) for c, r, o in ((cx, x, y), (cy, y, x)) if c >= 0])
        for c, row, other in cells:
            if not t.check_cell(c, row) or (other is not None and t.check_cell(c, other)):
                raise RuntimeError(f"family {t.partition.name!r}: cell {c} misplaced")
            index.append(t.offset + c)
            hit.extend(t.scores_of(np.array([c])).tolist())
    achieved, achieved_up = routes.witness_score(np.asarray(hit, dtype=np.float64))
    if not math.isclose(achieved, claimed, rel_tol=1e-9, abs_tol=1e-9):
        raise RuntimeError(f"{method}: witness scores {achieved}, search claimed {claimed}")
    exact = upper - achieved <= 1e-9 * abs(upper)
    if exact:
        upper = max(upper, achieved_up)  # as in _result: never below the witness's exact score
        exact = upper - achieved <= 1e-9 * abs(upper)
    elif pred_exact:
        notes += ("the bound is not attained by the witness: an upper bound, not exact",)
    else:
        notes += ("the predicate part is an upper bound (time limit): so is the total",)
    if not (upper >= achieved and math.isfinite(upper)):  # fail closed, NaN included
        raise RuntimeError(f"{method}: upper bound {upper} below the witness's {achieved}")
    return OverlapResult(comp, neighbours, float(upper), achieved, exact, method,
                         Witness(tuple(x), tuple(sorted(index)), y), n_queries, total, notes)


def solve_recovered(
    dom: Domain, queries: Sequence[Query], s: npt.NDArray[np.float64], comp: Definition,
    neighbours: Neighbours, time_limit: float | None, recovery: Recovery,
    predicate_solver: PredicateSolver,
) -> OverlapResult:
    """Solve the recovered structure (:mod:`.recover`), then re-check its witness on the
    original queries: the bound holds for them (same scores, each query in exactly one place)."""
    res = solve_structured(recovery.workload, recovery.weights, dom, comp, neighbours, time_limit,
                           "auto", predicate_solver)
    wit = res.witness
    note = (f"recovered {len(recovery.workload.partitions):,} families of disjoint cells from "
            f"{recovery.n_recovered:,} of the {len(queries):,} queries")
    return routes.checked(dom, queries, s, comp, neighbours, res.score_bound,
                   None if wit is None else wit.x, None if wit is None else res.score_achieved,
                   res.exact, f"recovered families ({res.method})", (note, *res.notes),
                   None if wit is None else wit.y)
