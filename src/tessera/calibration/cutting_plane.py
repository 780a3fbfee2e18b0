"""Cutting planes (constraint generation) for the weighted allocation (docs/theory.md §3).

Keep a family 𝓘 of realised sets; solve the master (P_𝓘) (a relaxation: its optimum is a lower
bound); ask the separation oracle for the load at the master's point and the argmax row's set;
stop when the load is within ``tol`` of the budget, else add the set. Finitely many I(x) exist,
so with an exact oracle this ends at an optimum.

The oracle says whether its load is *proven* (exact or an upper bound) or only the load of rows
a heuristic found (a lower bound: any violated row is a valid cut, but "nothing violated" proves
nothing). Only a proven load ≤ 1 + tol ends the loop as converged, and :attr:`CuttingPlane.load`
is the last proven load at ``v`` (∞ when the last round was a heuristic one: the caller must
then bound the load at ``v`` itself before using it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.calibration.master import solve_master, solve_master_dual
from tessera.calibration.oracles import Cut, FloatArray, incidence_matrix

#: Cutting-plane tolerance: stop when L(u) ≤ B (1 + tol).
DEFAULT_TOL = 1e-9


@dataclass(frozen=True)
class CuttingPlane:
    """Result of :func:`cutting_plane` (budget normalised to 1): ``v`` the last master point,
    ``lower_bound`` ≤ min (P) (with budget 1), ``load`` the oracle's proven bound at ``v`` (∞
    when none was computed there), ``heuristic_rounds`` the rounds whose cuts came from a
    heuristic, ``proven`` every (point, proven load) the loop saw (each a feasible split once
    rescaled by its load)."""

    v: FloatArray
    lower_bound: float
    load: float
    sets: tuple[Cut, ...]
    rounds: int
    converged: bool
    heuristic_rounds: int = 0
    proven: tuple[tuple[FloatArray, float], ...] = ()


def cutting_plane(
    importance: npt.ArrayLike,
    k: int,
    separate: Callable[[FloatArray, bool], tuple[float, list[Cut], bool]],
    initial_sets: Iterable[Cut] = (),
    *,
    tol: float = DEFAULT_TOL,
    max_rounds: int = 200,
    time_limit: float | None = None,
    fast_master: bool = False,
) -> CuttingPlane:
    """min Σ_q w_q v_q^{−k} s.t. Σ_{q∈I(x)} v_q ≤ 1 for every row x, 0 < v ≤ 1, by constraint
    generation: ``separate(v, heuristic_ok)`` returns (load, violated sets, proven): ``proven``
    when the load is an upper bound on max_x Σ_{q∈I(x)} v_q, else the load of the rows a
    heuristic found (allowed only when ``heuristic_ok``; a heuristic round that adds no new cut
    is followed by a proven one at the same point). ``fast_master``: after a heuristic round the
    master is solved approximately by warm-started dual ascent
    (:func:`~.master.solve_master_dual`), and exactly (interior point) before any proven round
    and at the end."""
    w = np.asarray(importance, dtype=np.float64)
    seen: set[Cut] = set()
    sets: list[Cut] = []

    def add(cut: Cut) -> bool:
        if len(cut) <= 1 or cut in seen:  # singletons are the box v ≤ 1, always present
            return False
        seen.add(cut)
        sets.append(cut)
        return True

    for cut in initial_sets:
        add(tuple(sorted(set(cut))))
    deadline = None if time_limit is None else time.monotonic() + time_limit
    master = solve_master(w, k, sets)
    precise, nu = True, None  # master by the interior point (precise) or by dual ascent
    load, rounds, converged, heuristic, heuristic_ok = math.inf, 0, False, 0, True
    certified: list[tuple[FloatArray, float]] = []
    while True:
        found_load, found, proven = separate(master.v, heuristic_ok)
        rounds += 1
        load = found_load if proven else math.inf
        heuristic += not proven
        if proven and math.isfinite(load):
            certified.append((master.v, load))
        if proven and load <= 1.0 + tol:
            converged = True
            break
        added = [c for c in found if float(np.sum(master.v[list(c)])) > 1.0 + tol and add(c)]
        if not added and not proven:
            if not precise:  # the heuristic sees nothing at the approximate point: solve the
                master, precise = solve_master(w, k, sets), True  # master exactly, look again
            else:
                heuristic_ok = False  # ask the proven oracle at the same point
            continue
        heuristic_ok = True
        if not added or rounds >= max_rounds:
            break  # a loose bound without a violated witness: no cut to add
        if deadline is not None and time.monotonic() > deadline:
            break
        if proven or not fast_master:
            master, precise = solve_master(w, k, sets), True
            nu = None
        else:
            lam0 = np.zeros(len(sets))
            lam0[: master.multipliers.size] = master.multipliers
            master, nu = solve_master_dual(w, k, incidence_matrix(w.size, sets), lam0, nu)
            precise = False
    if not precise and not converged:
        # the returned point and bound: the precise master (no load is proven there yet)
        master, load = solve_master(w, k, sets), math.inf
    return CuttingPlane(master.v, master.lower_bound, load, tuple(sets), rounds, converged,
                        heuristic, tuple(certified))
