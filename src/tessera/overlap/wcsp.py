"""Exact maximum overlap through ToulBar2, an exact weighted-CSP solver (docs/theory.md §3).

The max-weight point problem S = max_x Σ_q s_q q(x) (s ≥ 0, predicate queries) is a weighted
constraint satisfaction problem once written as a cost to minimise: the weight of the queries a
row misses, Σ_q s_q (1 − q(x)) = Σ s − S(x). ToulBar2 solves it by hybrid best-first branch and
bound (Allouche, de Givry, Katsirelos, Schiex & Zytnicki, "Anytime hybrid best-first search with
tree decomposition for weighted CSP", CP 2015) with soft arc consistency lower bounds (de Givry,
Heras, Zytnicki & Larrosa, "Existential arc consistency", IJCAI 2005) and dead-end elimination;
it proves optimality where our own search does not (docs/benchmarks.md: t = 1,000 random wide
queries over Adult, exact in ~20 s; t = 300 in 0.2 s).

Encoding (y-encoding, linear in the workload):

* x_a ∈ {undominated value classes of a} for every constrained attribute (with s ≥ 0 the maximum
  is attained on undominated classes, :func:`~tessera.overlap.atoms.undominated`);
* a query on one attribute is a unary cost c_q [x_a ∉ φ_{q,a}] (summed per attribute);
* a query on ≥ 2 attributes gets a Boolean y_q with unary cost c_q [y_q = 0] and hard binary
  constraints y_q = 1 ⇒ x_a ∈ φ_{q,a}: at the optimum y_q = q(x).

Substitution neighbours (:func:`wcsp_substitution`) use the same machinery on two rows:
maximise Σ_q s_q [q(x) ≠ q(y)] as the cost Σ_q c_q [q(x) = q(y)], see :func:`_substitution_model`.

Costs are integers: c_q = s_q when the scores are integral (and Σ s < 2⁴⁰), else
c_q = max(1, ⌈s_q · 2^e⌉) for s_q > 0 with 2^e the power of two that puts Σ s just below 2⁴⁰
(exact in floating point), so Σ_{q∈I} s_q ≤ Σ_{q∈I} c_q / 2^e for every set I, and ToulBar2's
proven lower bound L on the cost gives the proven upper bound S ≤ (Σ c − L) / 2^e (a power-of-two
division, also exact). A bound below a row the solver itself returned is treated as a fault and
discarded.

ToulBar2 keeps global state and its time limit is CPU seconds, so it runs in a child process
(``python -m tessera.overlap._wcsp_child``, the model pickled on stdin) that is killed if it
overruns; the parent only reads back numbers. The row it returns is re-checked by
:func:`~tessera.overlap.solve.max_overlap` like every other witness. The solver is optional:
``pip install "tessera-dp[exact]"``.
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

from tessera.overlap.atoms import undominated
from tessera.overlap.branch_bound import ActivePart, PointSolution, active_part
from tessera.schema.domain import Domain
from tessera.workload.query import Query

#: Seconds allowed for the child process to start, build the model and report back beyond the
#: solver's own limit before it is killed (process start, imports and model: ≈ 0.4 s at t = 100).
GRACE_SECONDS = 2.0
#: Below this many seconds left, ToulBar2 is not started (its own limit is whole CPU seconds).
MIN_SECONDS = 0.5
#: Substitution pairs an attribute's classes with themselves (|classes|² tables): beyond this
#: many classes on one attribute ToulBar2 is not tried.
MAX_PAIR_CLASSES = 1_000
_EPS = float(np.finfo(np.float64).eps)
#: Integer costs are kept below this (ToulBar2 costs are 64-bit; headroom for its sums).
COST_SCALE = 2.0**40


def available() -> bool:
    """True when ``pytoulbar2`` is installed."""
    return importlib.util.find_spec("pytoulbar2") is not None


@dataclass(frozen=True)
class _Model:
    """A WCSP in plain arrays (picklable for the child process): variables with domain sizes,
    unary and binary cost tables; costs ≥ ``top`` are forbidden. The solver reports the values
    of the first ``report`` variables."""

    domains: list[int]
    unary: list[tuple[int, npt.NDArray[np.int64]]]
    binary: list[tuple[int, int, npt.NDArray[np.int64]]]  # (u, v, table |D_u| × |D_v|)
    top: int
    report: int


#: (values of the reported variables or None, their cost or None, proven lower bound on the cost)
Answer = tuple[list[int] | None, int | None, int]
#: runs the model with a solver limit (s) and a wall-clock wait (s); None when it failed
Runner = Callable[[_Model, int, float | None], Answer | None]


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


def _arity(part: ActivePart, n: int) -> npt.NDArray[np.int64]:
    arity = np.zeros(n, dtype=np.int64)
    for at in part.atoms:
        arity[at.queries] += 1
    return arity


def _point_model(part: ActivePart, costs: npt.NDArray[np.int64], top: int
                 ) -> tuple[_Model, list[npt.NDArray[np.int64]]]:
    """max_x Σ_q s_q q(x): x_a over undominated classes; one-attribute queries as unary costs;
    y_q ∈ {0, 1} with cost c_q [y_q = 0] and y_q = 1 ⇒ x_a ∈ φ_{q,a}. Also returns, per
    attribute, the kept class indices."""
    arity = _arity(part, len(costs))
    multi = np.flatnonzero(arity >= 2)
    m = len(part.atoms)
    y_var = np.full(len(costs), -1, dtype=np.int64)
    y_var[multi] = m + np.arange(len(multi))
    domains: list[int] = []
    unary: list[tuple[int, npt.NDArray[np.int64]]] = []
    binary: list[tuple[int, int, npt.NDArray[np.int64]]] = []
    kept = []
    for a, at in enumerate(part.atoms):
        keep = undominated(at)
        mem = at.membership[keep]  # (classes, queries on a)
        single = arity[at.queries] == 1
        # one-attribute queries: cost c_q on every class outside φ_{q,a}
        unary.append((a, (~mem[:, single]).astype(np.int64) @ costs[at.queries[single]]))
        for j in np.flatnonzero(~single):
            table = np.zeros((len(keep), 2), dtype=np.int64)
            table[~mem[:, j], 1] = top  # y = 1 is forbidden outside φ
            binary.append((a, int(y_var[at.queries[j]]), table))
        domains.append(len(keep))
        kept.append(keep)
    domains += [2] * len(multi)
    unary += [(m + i, np.array([c, 0], dtype=np.int64)) for i, c in enumerate(costs[multi])]
    return _Model(domains, unary, binary, top, m), kept


def _substitution_model(part: ActivePart, costs: npt.NDArray[np.int64], top: int) -> _Model:
    """max_{x,y} Σ_q s_q [q(x) ≠ q(y)] as a cost Σ_q c_q [q(x) = q(y)]: x_a and y_a over all
    classes (a class dominated for one row may be what the other row needs); one-attribute
    queries as a table over (x_a, y_a); for a query on k ≥ 2 attributes U_q, V_q ∈ {in, out
    through its 1st, …, k-th attribute} with U_q = in ⇒ x ∈ q, U_q = out_j ⇒ x_{a_j} ∉ φ_{q,a_j}
    (V_q, y likewise) and cost c_q when U_q and V_q are both in or both out."""
    arity = _arity(part, len(costs))
    m = len(part.atoms)
    domains = [at.n_atoms for at in part.atoms] * 2
    unary: list[tuple[int, npt.NDArray[np.int64]]] = []
    binary: list[tuple[int, int, npt.NDArray[np.int64]]] = []
    uv: dict[int, int] = {}  # query → its U variable (V is U + 1)
    slots: dict[int, int] = {}  # query → attributes seen so far
    for a, at in enumerate(part.atoms):
        mem = at.membership
        single = arity[at.queries] == 1
        ms = mem[:, single].astype(np.float64)
        cs = costs[at.queries[single]].astype(np.float64)
        if len(cs):
            # cost when x_a and y_a lie on the same side of the one-attribute predicates; in
            # float64 for BLAS, exact: every partial sum is an integer ≤ Σc < 2^53
            same = (ms * cs) @ ms.T + ((1.0 - ms) * cs) @ (1.0 - ms).T
            binary.append((a, m + a, np.rint(same).astype(np.int64)))
        for j in np.flatnonzero(~single):
            q = int(at.queries[j])
            if q not in uv:
                uv[q] = len(domains)
                domains += [int(arity[q]) + 1] * 2
                slots[q] = 0
                both = np.zeros((arity[q] + 1, arity[q] + 1), dtype=np.int64)
                both[0, 0] = costs[q]
                both[1:, 1:] = costs[q]
                binary.append((uv[q], uv[q] + 1, both))
            slots[q] += 1
            link = np.zeros((int(arity[q]) + 1, at.n_atoms), dtype=np.int64)
            link[0, ~mem[:, j]] = top  # in ⇒ inside φ
            link[slots[q], mem[:, j]] = top  # out through a ⇒ outside φ
            binary.append((uv[q], a, link))
            binary.append((uv[q] + 1, m + a, link))
    return _Model(domains, unary, binary, top, 2 * m)


def solve_model(model: _Model, seconds: int) -> Answer:
    """Build the CFN of ``model`` and solve it within ``seconds`` (CPU). Meant for the child
    process :mod:`tessera.overlap._wcsp_child` (ToulBar2's options are process-global); tests
    call it in process as a ``runner``."""
    import pytoulbar2

    # VAC (virtual arc consistency) in preprocessing and at the root: in bench_overlap.py
    # --hardness, t = 1,000 random wide queries proved in 18 s (26 s without), and at t = 3,000
    # a bound of 557 after 60 s (577 without)
    cfn = pytoulbar2.CFN(model.top, vac=1, verbose=-1)
    cfn.Option.showSolutions = 0
    for v, k in enumerate(model.domains):
        cfn.AddVariable(f"v{v}", range(k))
    for v, table in model.unary:
        if table.any():
            cfn.AddFunction([v], np.minimum(table, model.top).tolist())
    for u, v, table in model.binary:
        cfn.AddFunction([u, v], np.minimum(table, model.top).ravel().tolist())
    res = cfn.Solve(timeLimit=seconds)
    dual = int(cfn.GetDDualBound())
    if res is None:
        return None, None, dual
    return [int(v) for v in res[0][: model.report]], int(round(res[1])), dual


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


def _run(model: _Model, start: float, time_limit: float | None, runner: Runner | None
         ) -> Answer | None:
    """Solve within what is left of ``time_limit`` (counted from ``start``), or None."""
    left = None if time_limit is None else time_limit - (time.monotonic() - start)
    if left is not None and left < MIN_SECONDS:
        return None
    seconds = 0 if left is None else max(1, int(left))
    return (_run_child if runner is None else runner)(
        model, seconds, None if left is None else left + GRACE_SECONDS)


def _upper(total: int, dual: int, e: int, constant: float) -> float:
    """S ≤ constant + (Σc − L)/2^e, safe in floating point."""
    upper = constant + math.ldexp(float(total - dual), -e)
    if e != 0 or constant != round(constant):
        upper *= 1.0 + 4.0 * _EPS  # the float sum above may round down by an ulp
    return upper


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
    its proven bound), or ``None`` when ToulBar2 could not run (not installed, under
    ``MIN_SECONDS`` left, or the child failed) — the caller then relies on its own bounds.

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
    model, kept = _point_model(part, costs, incumbent_cost + 1)
    answer = _run(model, start, time_limit, runner)
    if answer is None:
        return None
    sol, cost, dual = answer
    if dual > incumbent_cost:
        # no row may cost more than the verified incumbent's optimum: a solver fault; its bound
        # cannot be trusted
        return None
    x, hit, lower_cost = x0, hit0, incumbent_cost
    if sol is not None and cost is not None and cost < incumbent_cost:
        codes = list(x0)
        for a, at in enumerate(part.atoms):
            codes[at.position] = int(at.representative[kept[a][sol[a]]])
        x = tuple(codes)
        hit = _hits(domain, queries, part, x)
        lower_cost = int(costs[~hit].sum())
    if dual > lower_cost:
        return None  # a bound below a row it returned: a solver fault, trust neither
    lower = part.constant + math.fsum(s[hit].tolist())
    upper = max(_upper(total, dual, e, part.constant), lower)
    # ``upper`` ≥ the true maximum in any case (scaled costs round up); exact when the integer
    # optimum is proven and the rounding leaves the bound within 1e-9 of the row
    return PointSolution(lower, upper, dual >= lower_cost and _tight(upper, lower), x, 0)


@dataclass(frozen=True)
class PairSolution:
    """max_{x,y} Σ_q s_q [q(x) ≠ q(y)]: ``lower`` (attained by the pair) ≤ max ≤ ``upper``."""

    lower: float
    upper: float
    exact: bool
    x: tuple[int, ...]
    y: tuple[int, ...]


def wcsp_substitution(
    domain: Domain,
    queries: Sequence[Query],
    scores: npt.ArrayLike,
    *,
    incumbent: tuple[tuple[int, ...], tuple[int, ...]] | None = None,
    time_limit: float | None = None,
    runner: Runner | None = None,
) -> PairSolution | None:
    """S_sub = max_{x,y} Σ_q s_q [q(x) ≠ q(y)] (substitution neighbours, docs/theory.md §3) by
    ToulBar2:
    exact unless ``time_limit`` stops it (then ``upper`` is its proven bound), or ``None`` as in
    :func:`wcsp_point` — also when an attribute has more than ``MAX_PAIR_CLASSES`` value classes.
    ``incumbent``: a known pair of rows (codes)."""
    if not available():
        return None
    start = time.monotonic()
    part = active_part(domain, queries, scores)
    s = part.scores[part.active]
    if len(s) == 0:  # tautologies and contradictions never separate two rows
        zero = (0,) * len(domain)
        return PairSolution(0.0, 0.0, True, zero, zero)
    if max(at.n_atoms for at in part.atoms) > MAX_PAIR_CLASSES:
        return None
    costs, e = integer_costs(s)
    total = int(costs.sum())
    zero = tuple([0] * len(domain))
    x0, y0 = (zero, zero) if incumbent is None else incumbent
    differ0 = _hits(domain, queries, part, x0) ^ _hits(domain, queries, part, y0)
    incumbent_cost = int(costs[~differ0].sum())  # the queries the pair does not separate
    model = _substitution_model(part, costs, incumbent_cost + 1)
    answer = _run(model, start, time_limit, runner)
    if answer is None:
        return None
    sol, cost, dual = answer
    if dual > incumbent_cost:
        return None  # contradicts the verified incumbent: a solver fault
    x, y, differ, lower_cost = x0, y0, differ0, incumbent_cost
    if sol is not None and cost is not None and cost < incumbent_cost:
        m = len(part.atoms)
        xs, ys = list(x0), list(y0)
        for a, at in enumerate(part.atoms):
            xs[at.position] = int(at.representative[sol[a]])
            ys[at.position] = int(at.representative[sol[m + a]])
        x, y = tuple(xs), tuple(ys)
        differ = _hits(domain, queries, part, x) ^ _hits(domain, queries, part, y)
        lower_cost = int(costs[~differ].sum())
    if dual > lower_cost:
        return None  # a bound below the pair it returned: a solver fault, trust neither
    lower = math.fsum(s[differ].tolist())
    upper = max(_upper(total, dual, e, 0.0), lower)
    return PairSolution(lower, upper, dual >= lower_cost and _tight(upper, lower), x, y)


def _tight(upper: float, lower: float) -> bool:
    """upper and lower agree to 1e-9 (relative): what 'exact' means with scaled costs, where the
    bound may sit up to (#queries)·2^-e above the maximum."""
    return upper - lower <= 1e-9 * abs(upper)


def _hits(domain: Domain, queries: Sequence[Query], part: ActivePart, x: tuple[int, ...]
          ) -> npt.NDArray[np.bool_]:
    """q(x) for the active queries, by evaluating their predicates on the row."""
    return np.fromiter((queries[i](domain, x) for i in part.active), dtype=bool,
                       count=len(part.active))
