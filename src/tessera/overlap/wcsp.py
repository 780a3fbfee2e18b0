"""Exact maximum overlap through ToulBar2, an exact weighted-CSP solver (SPEC §3).

The max-weight point problem S = max_x Σ_q s_q q(x) (s ≥ 0, predicate queries) is a weighted
constraint satisfaction problem once written as a cost to minimise: the weight of the queries a
row misses, Σ_q s_q (1 − q(x)) = Σ s − S(x). ToulBar2 (Allouche et al., "Tractability-preserving
transformations of global cost functions", AIJ 2016; Hurley et al., "Multi-language evaluation of
exact solvers in graphical model discrete optimization", Constraints 2016) solves it by depth-first
/ hybrid best-first branch and bound with soft arc consistency (EDAC) lower bounds and dead-end
elimination; it proves optimality where our own search does not (docs/benchmarks.md:
t = 1,000 random wide queries over Adult, exact in ~30 s; t = 300 in 0.2 s).

Encoding (y-encoding, linear in the workload):

* x_a ∈ {undominated value classes of a} for every constrained attribute (with s ≥ 0 the maximum
  is attained on undominated classes, :func:`~tessera.overlap.atoms.undominated`);
* a query on one attribute is a unary cost c_q [x_a ∉ φ_{q,a}] (summed per attribute);
* a query on ≥ 2 attributes gets a Boolean y_q with unary cost c_q [y_q = 0] and hard binary
  constraints y_q = 1 ⇒ x_a ∈ φ_{q,a}: at the optimum y_q = q(x).

Costs are integers: c_q = s_q when the scores are integral (and Σ s < 2⁴⁰), else
c_q = max(1, ⌈s_q · 2^e⌉) for s_q > 0 with 2^e the power of two that puts Σ s just below 2⁴⁰ —
exact in floating point —
so Σ_{q∈I} s_q ≤ Σ_{q∈I} c_q / 2^e for every set I, and ToulBar2's proven lower bound L on the
cost gives the proven upper bound S ≤ (Σ c − L) / 2^e (also exact: a power-of-two division).

ToulBar2 keeps global state and its time limit is CPU seconds, so it runs in a child process
(``python -m tessera.overlap._wcsp_child``, the model pickled on stdin) that is killed if it
overruns; the parent only reads back numbers. The row it returns
is re-checked by :func:`~tessera.overlap.solve.max_overlap` like every other witness. The solver is
optional: ``pip install "tessera-dp[exact]"``.
"""

from __future__ import annotations

import importlib.util
import math
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.domain import Domain
from tessera.overlap.atoms import undominated
from tessera.overlap.branch_bound import ActivePart, PointSolution, active_part
from tessera.query import Query

#: Seconds allowed for the child process to start, build the model and report back beyond the
#: solver's own limit before it is killed (measured: ≈ 0.4 s at t = 100, ≈ 1 s at t = 2,000).
GRACE_SECONDS = 2.0
#: Below this many seconds left, ToulBar2 is not started (its own limit is whole CPU seconds).
MIN_SECONDS = 0.5
_EPS = float(np.finfo(np.float64).eps)
#: Integer costs are kept below this (ToulBar2 costs are 64-bit; headroom for its sums).
COST_SCALE = 2.0**40


def available() -> bool:
    """True when ``pytoulbar2`` is installed."""
    return importlib.util.find_spec("pytoulbar2") is not None


@dataclass(frozen=True)
class _Model:
    """The WCSP in plain arrays (picklable for the child process)."""

    sizes: list[int]  # undominated classes per attribute
    unary: list[npt.NDArray[np.int64]]  # per attribute: cost of each class (one-attribute queries)
    y_cost: npt.NDArray[np.int64]  # per multi-attribute query
    # per attribute: (y indices, forbidden mask (classes × those queries): y = 1 and x_a ∉ φ)
    links: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]]
    top: int  # forbidden cost: one more than the incumbent's cost


def integer_costs(s: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.int64], int]:
    """(c, e) with c_q ≥ s_q · 2^e integers, exactly (see the module docstring)."""
    total = math.fsum(s.tolist())
    if bool(np.all(s == np.round(s))) and total < COST_SCALE:
        return s.astype(np.int64), 0
    # total = f·2^k with ½ ≤ f < 1 (exactly, subnormals too): Σ s·2^e < 2^40 for e = 40 − k
    e = int(math.log2(COST_SCALE)) - math.frexp(total)[1] if total > 0 else 0
    c = np.ceil(np.ldexp(s, e))
    # a score that underflows to 0 still costs 1 ≥ s·2^e
    return np.where(s > 0, np.maximum(c, 1.0), 0.0).astype(np.int64), e


def _build(part: ActivePart, costs: npt.NDArray[np.int64], incumbent_cost: int
           ) -> tuple[_Model, list[npt.NDArray[np.int64]]]:
    """The model and, per attribute, the kept (undominated) class indices."""
    n = len(costs)
    arity = np.zeros(n, dtype=np.int64)
    for at in part.atoms:
        arity[at.queries] += 1
    multi = np.flatnonzero(arity >= 2)
    y_of = np.full(n, -1, dtype=np.int64)
    y_of[multi] = np.arange(len(multi))
    sizes, unary, links, kept = [], [], [], []
    for at in part.atoms:
        keep = undominated(at)
        mem = at.membership[keep]  # (classes, queries on a)
        single = arity[at.queries] == 1
        # one-attribute queries: cost c_q on every class outside φ_{q,a}
        unary.append((~mem[:, single]).astype(np.int64) @ costs[at.queries[single]])
        links.append((y_of[at.queries[~single]], ~mem[:, ~single]))
        sizes.append(len(keep))
        kept.append(keep)
    return _Model(sizes, unary, costs[multi], links, incumbent_cost + 1), kept


def _solve(model: _Model, seconds: int) -> tuple[list[int] | None, int | None, int]:
    """Build the CFN and solve: (classes of the best row or None, its cost, proven dual bound).
    Runs in the child process only (ToulBar2's options are process-global)."""
    import pytoulbar2

    cfn = pytoulbar2.CFN(model.top, vac=0, verbose=-1)
    cfn.Option.showSolutions = 0
    m = len(model.sizes)
    for a, k in enumerate(model.sizes):
        cfn.AddVariable(f"x{a}", range(k))
        if model.unary[a].any():
            cfn.AddFunction([a], np.minimum(model.unary[a], model.top).tolist())
    for i, c in enumerate(model.y_cost.tolist()):
        cfn.AddVariable(f"y{i}", [0, 1])
        cfn.AddFunction([m + i], [min(c, model.top), 0])
    for a, (ys, forbidden) in enumerate(model.links):
        for j, y in enumerate(ys.tolist()):
            # (x_a, y) in lexicographic order: y = 1 is forbidden outside φ
            table = np.zeros((model.sizes[a], 2), dtype=np.int64)
            table[forbidden[:, j], 1] = model.top
            cfn.AddFunction([a, m + y], table.ravel().tolist())
    res = cfn.Solve(timeLimit=seconds)
    dual = int(cfn.GetDDualBound())
    if res is None:
        return None, None, dual
    return [int(v) for v in res[0][:m]], int(round(res[1])), dual


#: (classes of the best row or None, its cost or None, proven lower bound on the cost)
Answer = tuple[list[int] | None, int | None, int]
#: runs the model with a solver limit (s) and a wall-clock wait (s); None when it failed
Runner = Callable[[_Model, int, float | None], Answer | None]


def _run_child(model: _Model, seconds: int, wait: float | None) -> Answer | None:
    """``python -m tessera.overlap._wcsp_child`` with the pickled model on stdin; ``None`` if it
    fails or overruns ``wait`` seconds (a subprocess, not multiprocessing: nothing of the caller's
    ``__main__`` is re-imported, and a stuck solver can be killed)."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tessera.overlap._wcsp_child"], input=pickle.dumps(model),
            capture_output=True, timeout=wait, check=False,
            env={**os.environ, "TESSERA_WCSP_SECONDS": str(seconds)},
        )
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0 or not done.stdout:
        return None
    answer: Answer = pickle.loads(done.stdout)
    return answer


def wcsp_point(
    domain: Domain,
    queries: Sequence[Query],
    scores: npt.ArrayLike,
    *,
    incumbent: tuple[float, tuple[int, ...]] | None = None,
    time_limit: float | None = None,
    part: ActivePart | None = None,
    runner: Runner | None = None,
) -> PointSolution | None:
    """max_x Σ_q s_q q(x) by ToulBar2: exact unless ``time_limit`` stops it (then ``upper`` is
    its proven bound), or ``None`` when ToulBar2 could not run (not installed, under a second
    left, or the child failed) — the caller then relies on its own bounds.

    ``incumbent`` = (score, codes) of a known row: the solver only looks for better ones and
    returns it when none exists. ``part``: :func:`~.branch_bound.active_part` of the arguments.
    ``runner`` replaces the child process (tests run the solver in-process, many times over).
    """
    if not available():
        return None
    start = time.monotonic()
    part = active_part(domain, queries, scores) if part is None else part
    s = part.scores[part.active]
    if len(s) == 0:
        return PointSolution(part.constant, part.constant, True, (0,) * len(domain), 0)
    costs, e = integer_costs(s)
    total = int(costs.sum())
    x0 = tuple([0] * len(domain) if incumbent is None else incumbent[1])
    hit0 = _hits(domain, queries, part, x0)
    incumbent_cost = int(costs[~hit0].sum())  # the queries it misses
    model, kept = _build(part, costs, incumbent_cost)
    left = None if time_limit is None else time_limit - (time.monotonic() - start)
    if left is not None and left < MIN_SECONDS:
        return None
    seconds = 0 if left is None else max(1, int(left))
    answer = (_run_child if runner is None else runner)(
        model, seconds, None if left is None else left + GRACE_SECONDS)
    if answer is None:
        return None
    sol, cost, dual = answer
    if dual > incumbent_cost:
        # no row may cost more than the verified incumbent's optimum: a solver fault; its bound
        # cannot be trusted
        return None
    upper_int = total - dual  # max Σ_{q∈I(x)} c_q ≤ Σ c − L
    upper = part.constant + math.ldexp(float(upper_int), -e)
    if e != 0 or part.constant != round(part.constant):
        upper *= 1.0 + 4.0 * _EPS  # the float sum above may round down by an ulp
    x, hit, lower_cost = x0, hit0, incumbent_cost
    if sol is not None and cost is not None and cost < incumbent_cost:
        codes = list(x0)
        for a, at in enumerate(part.atoms):
            codes[at.position] = int(at.representative[kept[a][sol[a]]])
        x = tuple(codes)
        hit = _hits(domain, queries, part, x)
        lower_cost = int(costs[~hit].sum())
    lower = part.constant + math.fsum(s[hit].tolist())
    if upper_int < total - lower_cost:
        return None  # a bound below a row it returned: a solver fault, trust neither
    # integer optimality proven; ``upper`` ≥ the true maximum in any case (scaled costs round up)
    exact = dual >= lower_cost
    return PointSolution(lower, max(upper, lower), exact, x, 0)


def _hits(domain: Domain, queries: Sequence[Query], part: ActivePart, x: tuple[int, ...]
          ) -> npt.NDArray[np.bool_]:
    """q(x) for the active queries, by evaluating their predicates on the row."""
    return np.fromiter((queries[i](domain, x) for i in part.active), dtype=bool,
                       count=len(part.active))

