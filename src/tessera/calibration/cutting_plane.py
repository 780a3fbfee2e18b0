"""Cutting planes (constraint generation) for the weighted allocation (docs/theory.md §3).

Keep a family 𝓘 of realised sets; solve the master (P_𝓘) (a relaxation: its optimum is a lower
bound); ask the separation oracle for the load at the master's point and the argmax row's set;
stop when the load is within ``tol`` of the budget, else add the set. Finitely many I(x) exist,
so with an exact oracle this ends at an optimum.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.calibration.master import solve_master
from tessera.calibration.oracles import Cut, FloatArray

#: Cutting-plane tolerance: stop when L(u) ≤ B (1 + tol).
DEFAULT_TOL = 1e-9


@dataclass(frozen=True)
class CuttingPlane:
    """Result of :func:`cutting_plane` (budget normalised to 1): ``v`` the last master point,
    ``lower_bound`` ≤ min (P) (with budget 1), ``load`` the oracle's bound at ``v``."""

    v: FloatArray
    lower_bound: float
    load: float
    sets: tuple[Cut, ...]
    rounds: int
    converged: bool


def cutting_plane(
    importance: npt.ArrayLike,
    k: int,
    separate: Callable[[FloatArray], tuple[float, list[Cut]]],
    initial_sets: Iterable[Cut] = (),
    *,
    tol: float = DEFAULT_TOL,
    max_rounds: int = 200,
    time_limit: float | None = None,
) -> CuttingPlane:
    """min Σ_q w_q v_q^{−k} s.t. Σ_{q∈I(x)} v_q ≤ 1 for every row x, 0 < v ≤ 1, by constraint
    generation: ``separate(v)`` returns (bound ≥ max_x Σ_{q∈I(x)} v_q, violated sets)."""
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
    load, rounds, converged = math.inf, 0, False
    while True:
        load, found = separate(master.v)
        rounds += 1
        if load <= 1.0 + tol:
            converged = True
            break
        added = [c for c in found if float(np.sum(master.v[list(c)])) > 1.0 + tol and add(c)]
        if not added or rounds >= max_rounds:
            break  # a loose bound without a violated witness: no cut to add
        if deadline is not None and time.monotonic() > deadline:
            break
        master = solve_master(w, k, sets)
    return CuttingPlane(master.v, master.lower_bound, load, tuple(sets), rounds, converged)
