r"""Budget allocation: per-query noise that meets a target through the overlap (docs/theory.md §3).

Setting. t counting queries, each answered by an additive-noise mechanism with privacy
parameter p_q (ε_q for Laplace, μ_q for Gaussian, ρ_q for Gaussian under zCDP; sensitivity 1
under add/remove). By Thm 6 a row x changes only the queries in I(x) = {q : q(x) = 1}, so with
u_q = h(p_q) (h(ε) = ε, h(μ) = μ², h(ρ) = ρ) the joint release costs g(L(u)) with the **load**

    L(u) = max_x Σ_{q∈I(x)} u_q          (g = id for ε and ρ, g = √ for μ),

and the target is met iff L(u) ≤ B, B = ε, μ² or ρ. L is a weighted maximum overlap: the
overlap solvers (``tessera.overlap``) compute it or an upper bound. This module takes it as an
*oracle* ``overlap(y) ≥ max_x Σ_{q∈I(x)} y_q`` (y ≥ 0):

* a number γ ≥ γ(Q) becomes y ↦ γ · max_q y_q (valid: a row meets ≤ γ queries);
* ``maximal_sets`` (the maximal overlapping sets I_2) give the exact y ↦ max_I Σ_{q∈I} y_q;
* a callable returning a number is used as is (it must be an upper bound; that is what makes
  the result private — the final check below uses only the oracle, never a heuristic);
* a **separation oracle**: a callable returning ``(bound, I)`` with ``bound`` ≥ L(y) and I a
  realised overlapping set I(x*) (ideally the argmax row's), or an
  :class:`~tessera.overlap.OverlapResult` for ``comp="pure"``, add/remove.
  :func:`overlap_from_workload` builds one from a workload with ``tessera.overlap.max_overlap``.

Under the *substitute-one-row* relation a row moving x → y changes the queries in
I(x) Δ I(y) ⊆ I(x) ∪ I(y), so the load is at most 2 L(u): we use min(2·overlap, Σ_q y_q)
(docs/theory.md §1).

Uniform allocation. p_q = p with h(p) · L(1) = B: ε_q = ε/γ, μ_q = μ/√γ, ρ_q = ρ/γ.

Weighted allocation: the problem. With importance weights w_q > 0 minimise the expected
weighted squared error Σ_q w_q Var_q, Var = 2/ε² (Laplace), 1/μ² (Gaussian), 1/(2ρ) (zCDP
Gaussian), i.e. with c = 2, 1, ½ and k = 2, 1, 1:

    (P)   min_u  E(u) = c Σ_q w_q u_q^{−k}   s.t.   Σ_{q∈I} u_q ≤ B  for every I(x),  0 < u_q ≤ B.

(u_q ≤ B holds anyway for a query that touches some row; it bounds queries that touch none.)
E is convex, the constraints linear: (P) is convex but has one constraint per row of 𝔻.

Exact solution: cutting planes (constraint generation) with the overlap solver as separation
oracle. Keep a family 𝓘 of realised sets (start: the singletons, the sets of ``maximal_sets``
and the oracle's witness at the Lagrange shape) and repeat

1. *master* (P_𝓘): (P) with the constraints of 𝓘 only — a relaxation of (P), so its optimum
   E_𝓘 ≤ E* (the optimum of (P));
2. *separate*: call the oracle with y = u_𝓘 (the load is linear in u, so comp = "pure"): it
   returns L(u_𝓘) (or an upper bound) and the argmax row's set I(x*);
3. stop if L(u_𝓘) ≤ B(1 + tol), else add I(x*) to 𝓘.

There are finitely many I(x), so with an exact oracle this ends at an optimum of (P) (to tol).
The master is solved by a primal-dual interior-point method (:func:`solve_master`); its Newton
system is diag + Aᵀ diag(λ/s) A, solved through the m×m Woodbury form when the m cuts are
fewer than the t queries (thousands of queries, hundreds of cuts: a few ms per step); at a
certified gap of 1e-9 the active constraints are solved as equalities by Newton's method
(active-set polish), which reaches gaps ≈ 1e-15. A :class:`WorkloadOracle` answers with a
short time limit while it finds violated rows and with its full one only when that neither
certifies nor cuts.

Lower bound (the optimality certificate). The Lagrangian of (P_𝓘) separates over queries:
for λ_I ≥ 0 and ν_q ≥ 0 (multipliers of the cuts and of u_q ≤ B), with σ_q = Σ_{I∋q} λ_I + ν_q,

    G(λ, ν) = Σ_q min_{u>0} (c w_q u^{−k} + σ_q u) − B(Σ λ + Σ ν)
            = C_k Σ_q (c w_q)^{1/(k+1)} σ_q^{k/(k+1)} − B(Σ λ + Σ ν),   C_k = (k+1) k^{−k/(k+1)},

and weak duality gives G(λ, ν) ≤ E_𝓘 ≤ E* for *any* λ, ν ≥ 0: the reported lower bound is
G at the master's final multipliers, a certificate that does not depend on the solver having
converged. The optimality gap E(u)/G − 1 covers the master's accuracy, the cutting-plane
tolerance and any looseness of the oracle's bound.

Safety. Whatever the optimiser returns is only a *shape*: u ← u · B / overlap(u) with the
oracle's proven upper bound, then shrink while the oracle says overlap(h(p)) > B after the
conversion to parameters. Privacy never depends on the optimiser converging.

Without sets (number-only oracles) no cut can be generated: the allocation is the better of the
Lagrange shape of the structure-free constraint Σ_q u_q ≤ B, u_q ∝ w_q^{1/(k+1)}
(ε_q ∝ w_q^{1/3}, μ_q² ∝ w_q^{1/2}), and the uniform allocation, each rescaled by the oracle
(under y ↦ γ max y the uniform one is optimal; under y ↦ Σ y the shape is).

Substitution: the model is min(2 L(u), Σ u) ≤ B; the cutting plane solves 2 L(u) ≤ B, the
shape solves Σ u ≤ B exactly, and the better is kept; the lower bound is the smaller of the two
(the feasible set is their union). It is a bound for this model, not for the exact
I(x) Δ I(y) constraints.

Utility gain vs sequential composition (docs/theory.md §3): the sequential allocation is the same
procedure with the oracle y ↦ Σ_q y_q (comp(Q)); the gain is
U = 1 − √(E_overlap / E_sequential) with E = Σ w_q Var_q — the ratio of noise scales; for
homogeneous queries U = 1 − γ/t (Laplace) and 1 − √(γ/t) (Gaussian).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from tessera.accounting.composition import require_pld_copies
from tessera.accounting.guarantee import Guarantee
from tessera.accounting.pld import DEFAULT_DISCRETIZATION, MECHANISMS, compose_plds
from tessera.calibration.cutting_plane import DEFAULT_TOL, CuttingPlane, cutting_plane
from tessera.calibration.oracles import (
    CombinedOracle,
    Cut,
    CutOracle,
    FloatArray,
    Overlap,
    combine_oracles,
    scaled_load,
    sequential_overlap,
)
from tessera.calibration.regimes import Regime, check_importance, regime_for
from tessera.errors import TesseraError
from tessera.privacy import Definition, Neighbours

IntArray = npt.NDArray[np.int64]

#: With a local search (:mod:`tessera.overlap.local_search`) the cutting plane's own loop stops
#: at this share of the time limit: the rest is for the exact proof of the load at its point.
LOOP_SHARE = 0.6
#: ... but the exact proof gets at least this many seconds (an upper bound if it stops early).
FINAL_MIN_SECONDS = 2.0
#: Violated rows added as cuts per heuristic round (heaviest first) ...
HEURISTIC_CUTS = 32
#: ... the rows kept as the next rounds' starts (those that gave cuts, latest first) ...
HEURISTIC_ARCHIVE = 256
#: ... random starts of the wide search tried before the exact solver, and its starts inside
#: the heaviest queries ...
WIDE_RANDOM = 512
WIDE_INSIDE = 1_024
#: Default most cutting-plane rounds with an exact oracle only ...
EXACT_ROUNDS = 200
#: ... and when they are heuristic (milliseconds each; the time
#: limit is what binds).
HEURISTIC_ROUNDS = 5_000


@dataclass(frozen=True)
class Allocation:
    """Per-query noise meeting ``target``.

    ``parameters``: ε_q (Laplace / discrete Laplace), μ_q (Gaussian, GDP) or ρ_q (Gaussian,
    zCDP); ``noise_scales``: the Laplace scale b_q = 1/ε_q or Gaussian σ_q = 1/μ_q = 1/√(2ρ_q)
    (sensitivity-1 counting queries). ``load`` is the oracle's bound on the h-cost
    (≤ ``budget``); ``achieved`` is the guarantee that load certifies (never weaker than
    ``target``).

    Optimisation record (weighted allocations): ``error`` = Σ_q w_q Var_q achieved;
    ``lower_bound`` ≤ the least Σ_q w_q Var_q of any allocation meeting the target under the
    accounting model (module docs), or None when no certificate is available; ``cuts`` the
    overlapping sets the master problem used; ``rounds`` the oracle calls of the cutting plane
    (``heuristic_rounds`` of them answered by the local search: cuts only, never a bound);
    ``converged`` whether it stopped because L(u) ≤ B(1 + tol).
    """

    target: Guarantee
    mechanism: str
    parameters: tuple[float, ...]
    noise_scales: tuple[float, ...]
    budget: float
    load: float
    method: str
    achieved: Guarantee
    error: float | None = None
    lower_bound: float | None = None
    cuts: tuple[Cut, ...] = ()
    rounds: int = 0
    converged: bool | None = None
    heuristic_rounds: int = 0

    def variances(self) -> FloatArray:
        """Per-query noise variance: 2b² (Laplace; ≥ discrete Laplace's), σ² (Gaussian;
        ≥ discrete Gaussian's)."""
        s = np.asarray(self.noise_scales)
        return 2.0 * s**2 if "laplace" in self.mechanism else s**2

    def weighted_error(self, importance: npt.ArrayLike | None = None) -> float:
        """Σ_q w_q Var_q (w = 1 when not given)."""
        v = self.variances()
        w = np.ones_like(v) if importance is None else np.asarray(importance, dtype=np.float64)
        return float(np.sum(w * v))

    @property
    def optimality_gap(self) -> float | None:
        """error / lower_bound − 1 ≥ 0: how far from optimal the allocation can be, at most."""
        if self.error is None or self.lower_bound is None or self.lower_bound <= 0:
            return None
        return max(0.0, self.error / self.lower_bound - 1.0)


@dataclass(frozen=True)
class UtilityGain:
    """U = 1 − √(E_overlap / E_sequential) (docs/theory.md §3), with both allocations."""

    gain: float
    overlap: Allocation
    sequential: Allocation



def allocate(
    workload_size: int,
    target: Guarantee,
    importance: npt.ArrayLike | None = None,
    overlap: float | Overlap | CutOracle | None = None,
    maximal_sets: Iterable[Iterable[int]] | None = None,
    via: Literal["gdp", "pld"] = "gdp",
    mechanism: str | None = None,
    discretization: float = DEFAULT_DISCRETIZATION,
    refine: bool = True,
    *,
    tol: float = DEFAULT_TOL,
    max_rounds: int | None = None,
    time_limit: float | None = None,
) -> Allocation:
    """Per-query noise parameters meeting ``target`` through the overlap bound.

    ``target``: pure ε (Laplace noise), μ-GDP (Gaussian), ρ-zCDP (Gaussian or discrete
    Gaussian), or (ε,δ) — ``via="gdp"``: Gaussian noise calibrated to the largest μ with
    G_μ ⇒ (ε,δ); ``via="pld"``: uniform noise of ``mechanism`` (laplace, discrete_laplace,
    gaussian, discrete_gaussian) calibrated by PLD composition of ⌈load⌉ copies.
    ``overlap``: a number γ ≥ γ(Q), a bound oracle, or a separation oracle (module docs;
    :func:`overlap_from_workload`); ``maximal_sets``: I_2. With neither, sequential
    composition (γ = t) is used.

    Without ``importance`` the allocation is uniform. With it, the importance-weighted error is
    minimised exactly by cutting planes when sets are available (``maximal_sets`` or a
    separation oracle; ``tol``, ``max_rounds``, ``time_limit`` in seconds for the loop);
    ``refine=False`` keeps the Lagrange shape u_q ∝ w_q^{1/(k+1)} (no optimisation).
    """
    t = int(workload_size)
    if t < 1:
        raise TesseraError("a workload has at least one query")
    oracles = combine_oracles(t, overlap, maximal_sets)
    factor = 2.0 if target.neighbours is Neighbours.SUBSTITUTE else 1.0

    def load(y: FloatArray) -> float:
        # Σ_q y_q bounds the cost under either relation (a change touches at most all queries).
        return min(factor * oracles.bound(y), sequential_overlap(y))

    w = check_importance(t, importance)
    if target.definition is Definition.APPROX and via == "pld":
        if w is not None:
            raise TesseraError(
                "PLD calibration supports uniform allocation only",
                hint="use via='gdp' for importance-weighted (ε,δ) allocation",
            )
        return _allocate_pld(t, target, load, mechanism or "gaussian", discretization)
    regime = regime_for(target, mechanism)
    budget = regime.budget

    if w is None:
        return _finish(
            target, regime, _rescale(np.ones(t), budget, load), load, np.ones(t), "uniform"
        )
    if not refine:
        shape = w ** (1.0 / (regime.k + 1))
        return _finish(target, regime, _rescale(shape, budget, load), load, w, "weighted")
    return _optimise(target, regime, w, oracles, factor, load, tol, max_rounds, time_limit)


def _optimise(
    target: Guarantee,
    regime: Regime,
    w: FloatArray,
    oracles: CombinedOracle,
    factor: float,
    load: Callable[[FloatArray], float],
    tol: float,
    max_rounds: int,
    time_limit: float | None,
) -> Allocation:
    """Cutting planes when the oracles give sets; else the better of shape and uniform."""
    t, k, budget = w.size, regime.k, regime.budget
    scale = w.max()
    shape = w ** (1.0 / (k + 1))
    # The structure-free problem Σ u ≤ B has the closed-form optimum (Σ a_q)^{k+1} / B^k,
    # a_q = (c w_q)^{1/(k+1)}: exact for the sequential model (and for substitution's cap).
    seq_opt = math.fsum(((regime.c * w) ** (1.0 / (k + 1))).tolist()) ** (k + 1) / budget**k

    def capped(y: FloatArray, bound: float) -> float:
        """load(y) from an oracle bound already computed at y (saves an oracle call)."""
        return min(factor * bound, sequential_overlap(y))

    # u = v · B/factor: the cut Σ_I u ≤ B/factor is Σ_I v ≤ 1.
    unit = budget / factor
    y0 = shape * (unit / np.max(shape))
    start = time.monotonic()
    search = oracles.row_search
    # rows whose sets became cuts (the heuristic's and the exact solver's): the weights move a
    # little between rounds, so they are the next searches' best starts
    archive: list[IntArray] = []

    def remember(rows: IntArray) -> None:
        archive[:] = [np.concatenate([rows, *archive])[:HEURISTIC_ARCHIVE]]

    def heavy_cuts(y: FloatArray, above: float, seed: int, wide: bool = False
                   ) -> tuple[float, list[Cut]]:
        """The local search's rows with load > ``above`` (at most HEURISTIC_CUTS, heaviest
        first): valid cuts, and the heaviest load found (a lower bound only). ``wide``: start
        inside every query and from many random rows too (before asking the exact solver)."""
        assert search is not None
        starts = archive[0] if archive else None
        if wide:
            found = search.search(y, starts, n_random=WIDE_RANDOM,
                                  n_inside=min(t, WIDE_INSIDE), generations=4, seed=seed)
        else:
            found = search.search(y, starts, seed=seed)
        hot = np.flatnonzero(found.loads > above)[:HEURISTIC_CUTS]
        remember(found.atoms[hot])
        cuts = [tuple(int(i) for i in np.flatnonzero(found.sets[r])) for r in hot]
        return float(found.loads[0]) if found.loads.size else 0.0, cuts

    if search is not None:
        # the first cuts from the heuristic; the shape's load is proven only if it is needed
        _, first_cuts = heavy_cuts(y0, unit, 0)
        first_load: float | None = None
        separating = True
    else:
        first_bound, first_cuts, separating = oracles.answer(y0, above=unit, quick=True)
        first_load = capped(y0, first_bound)
    # (name, y, load(y)) — load None: ask the oracle
    candidates: list[tuple[str, FloatArray, float | None]] = [("Lagrange shape", y0, first_load)]
    if not np.all(shape == shape[0]):  # else the uniform split is the Lagrange shape
        candidates.append(("uniform", np.ones(t), None))
    lower: float | None = seq_opt if oracles.sequential else None
    cp: CuttingPlane | None = None
    if separating:
        # Explicit I_2: small families go to the master at once; large ones by separation.
        initial = list(oracles.sets) if len(oracles.sets) <= 2000 else []
        initial += first_cuts
        # with a heuristic, the loop leaves time for the final proof of the load
        loop_limit = time_limit
        if time_limit is not None and search is not None:
            loop_limit = LOOP_SHARE * time_limit
        rounds = [0]

        def separate(v: FloatArray, heuristic_ok: bool) -> tuple[float, list[Cut], bool]:
            rounds[0] += 1
            above = unit * (1.0 + tol)
            if search is not None and heuristic_ok:
                found, cuts = heavy_cuts(v * unit, above, rounds[0])
                if not cuts:
                    found, cuts = heavy_cuts(v * unit, above, rounds[0], wide=True)
                return found / unit, cuts, False  # violated rows: cuts, never a bound
            if search is not None:
                # nothing violated that the heuristic sees: prove it (or find the row it
                # missed) with the exact solver, in the time left
                left = None if time_limit is None else max(
                    FINAL_MIN_SECONDS, time_limit - (time.monotonic() - start))
                bound, cuts, _ = oracles.answer(v * unit, above=above, seconds=left)
                for c in cuts:
                    row = search.row_meeting(c)
                    if row is not None:
                        remember(row[None, :])
                return bound / unit, cuts, True
            bound, cuts, _ = oracles.answer(v * unit, above=above, quick=True)
            violated = any(math.fsum(v[list(c)].tolist()) > 1.0 + tol for c in cuts)
            if bound > above and not violated and oracles.has_quick:
                # the quick answer neither certifies nor cuts: ask the full oracle
                full, more, _ = oracles.answer(v * unit, above=above)
                bound, cuts = min(bound, full), cuts + more
            return bound / unit, cuts, True

        # conditioning: the master sees weights ≤ 1
        cp = cutting_plane(
            w / scale, k, separate, initial, tol=tol,
            max_rounds=max_rounds if max_rounds is not None
            else EXACT_ROUNDS if search is None else HEURISTIC_ROUNDS,
            time_limit=loop_limit, fast_master=search is not None,
        )
        cut_lb = scale * regime.c * unit ** (-k) * cp.lower_bound
        lower = cut_lb if factor == 1.0 else min(cut_lb, seq_opt)
        y_cp = cp.v * unit
        if math.isfinite(cp.load):
            cp_load: float | None = capped(y_cp, cp.load * unit)
        else:
            # the last round was heuristic: prove the load at v in the time left
            left = None if time_limit is None else max(
                FINAL_MIN_SECONDS, time_limit - (time.monotonic() - start))
            cp_load = capped(y_cp, oracles.answer(y_cp, seconds=left)[0])
        candidates.insert(0, ("cutting plane", y_cp, cp_load))
        # the points the loop proved on its way: each a feasible split once rescaled
        candidates += [("an earlier cutting-plane point", v * unit, capped(v * unit, lv * unit))
                       for v, lv in cp.proven if v is not cp.v]
        if cp.converged and factor == 1.0:
            candidates = candidates[:1]  # optimal to tol; other shapes cannot do better
    best: tuple[float, str, FloatArray, FloatArray, float | None] | None = None
    for name, y, lv in candidates:
        if lv is None and time_limit is not None and search is not None:
            # the heuristic route proved no load here yet: in the time left (or a minimum)
            left = max(FINAL_MIN_SECONDS, time_limit - (time.monotonic() - start))
            lv = capped(y, oracles.answer(y, seconds=left)[0])
        lv = load(y) if lv is None else lv
        u = _rescale(y, budget, load, lv)
        err = regime.error(u, w)
        if best is None or err < best[0]:
            best = (err, name, u, y, lv)
    assert best is not None
    _, name, u, y_best, l_best = best
    if cp is not None:
        heur = (f" ({cp.heuristic_rounds} by local search)" if cp.heuristic_rounds else "")
        method = (
            f"weighted (cutting planes: {len(cp.sets)} overlapping sets, {cp.rounds} oracle "
            f"round(s){heur}, {'converged' if cp.converged else 'stopped early'}"
            + ("" if name == "cutting plane" else f"; {name} was better")
            + ")"
        )
    elif oracles.sequential:
        method = "weighted (closed form: optimal for sequential composition Σ u ≤ B)"
    else:
        method = f"weighted ({name}; the oracle gives no overlapping sets to optimise over)"
    return _finish(
        target,
        regime,
        u,
        # with the workload's own solver the proof at y_best covers the rescaled split (the
        # true load is homogeneous); another oracle must agree itself, as before
        load if search is None else scaled_load(y_best, l_best, load),
        w,
        method,
        lower_bound=None if lower is None else float(min(lower, best[0])),  # ≤ a feasible error
        cuts=() if cp is None else cp.sets,
        rounds=0 if cp is None else cp.rounds,
        converged=None if cp is None else cp.converged,
        heuristic_rounds=0 if cp is None else cp.heuristic_rounds,
    )


def _finish(
    target: Guarantee,
    regime: Regime,
    u: FloatArray,
    load: Callable[[FloatArray], float],
    w: FloatArray,
    method: str,
    **record: Any,
) -> Allocation:
    """Convert the rescaled loads u to parameters, re-check with the oracle, package."""
    params, final = shrink_until_valid(regime.from_u(u), regime, load)
    return Allocation(
        target=target,
        mechanism=regime.mechanism,
        parameters=tuple(float(p) for p in params),
        noise_scales=tuple(float(s) for s in regime.scales(params)),
        budget=regime.budget,
        load=final,
        method=method,
        achieved=_achieved(target, final),
        error=regime.error(regime.to_u(params), w),
        **record,
    )


def _rescale(
    shape: FloatArray,
    budget: float,
    load: Callable[[FloatArray], float],
    known: float | None = None,
) -> FloatArray:
    """shape · B / load(shape) (``known``: load(shape) when already computed)."""
    lv = load(shape) if known is None else known
    if not (lv >= 0 and math.isfinite(lv)):
        raise TesseraError(f"the overlap oracle returned {lv!r} for positive weights")
    if lv == 0:
        # no row meets any query (all contradictions): any noise is free; cap at u_q ≤ B
        return shape * (budget / float(np.max(shape)))
    return shape * (budget / lv)


def shrink_until_valid(
    params: FloatArray, regime: Regime, load: Callable[[FloatArray], float]
) -> tuple[FloatArray, float]:
    """Enforce load(h(p)) ≤ B with the oracle itself, at the final parameters (rounding in √
    or a non-homogeneous oracle could overshoot: by a few ulps, or by ~1e-9 relative for the
    ToulBar2 route, whose integer costs round up); returns (p, load(h(p))). The safety margin
    doubles on every retry (1e-15, 2e-15, …), so any monotone oracle is met within a few dozen
    calls at a utility cost no larger than its own slack."""
    budget = regime.budget
    for i in range(100):
        lv = load(regime.to_u(params))
        if lv <= budget:
            return params, lv
        ratio = budget / lv * (1.0 - min(1e-15 * 2.0**i, 0.5))
        params = params * (math.sqrt(ratio) if regime.squared else ratio)
    raise TesseraError("could not meet the budget with this overlap oracle (is it monotone?)")


def _achieved(target: Guarantee, final: float) -> Guarantee:
    n = target.neighbours
    d = target.definition
    basis = "upper bound (Thm 6 with the overlap oracle)"
    if d is Definition.PURE:
        return Guarantee.pure(final, n, basis=basis)
    if d is Definition.ZCDP:
        return Guarantee.zcdp(final, n, basis=basis)
    mu = math.sqrt(final)
    if d is Definition.GDP:
        return Guarantee.gdp(mu, n, basis=basis)
    g = Guarantee.gdp(mu, n, basis=basis)
    delta = float(target.delta or 0.0)
    return Guarantee.approx(
        g.epsilon_at(delta), delta, n, basis=basis, note=f"via μ-GDP, μ = {mu:.6g}"
    )


def _allocate_pld(
    t: int,
    target: Guarantee,
    load: Callable[[FloatArray], float],
    mechanism: str,
    discretization: float,
) -> Allocation:
    """Uniform noise scale s: the smallest (bisection on log s) with
    ε(δ) of the ⌈L⌉-fold PLD composition ≤ ε, L = load(1) (an integer bound on how many
    queries one neighbour change touches)."""
    if mechanism not in MECHANISMS:
        raise TesseraError(f"unknown mechanism {mechanism!r}", hint=f"one of {sorted(MECHANISMS)}")
    make = MECHANISMS[mechanism]
    copies = math.ceil(load(np.ones(t)))
    require_pld_copies(copies)  # before the bisection's many compositions
    eps, delta = float(target.epsilon or 0.0), float(target.delta or 0.0)

    def eps_of(scale: float) -> float:
        f = compose_plds([make(scale, 1, discretization)] * copies, discretization)
        return f.epsilon(delta)

    hi = 1.0
    while eps_of(hi) > eps:
        hi *= 2.0
        if hi > 1e9:
            raise TesseraError("could not reach the target (ε too small for this δ?)")
    lo = hi / 2.0
    while lo > 1e-9 and eps_of(lo) <= eps:
        hi, lo = lo, lo / 2.0
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if eps_of(mid) <= eps:
            hi = mid
        else:
            lo = mid
        if hi / lo < 1.0 + 1e-6:
            break
    achieved_eps = eps_of(hi)
    if not achieved_eps <= eps:  # never `assert`: it must hold under `python -O` too
        raise TesseraError(
            f"PLD calibration missed its target: ε(δ) = {achieved_eps} > {eps}",
            hint="report this: the bisection keeps the upper end, which meets the target",
        )
    n = target.neighbours
    return Allocation(
        target=target,
        mechanism=mechanism,
        parameters=tuple([1.0 / hi] * t),
        noise_scales=tuple([hi] * t),
        budget=eps,
        load=float(copies),
        method=f"uniform (PLD, {copies}-fold composition)",
        achieved=Guarantee.approx(
            achieved_eps,
            delta,
            n,
            basis="upper bound (pessimistic PLD)",
            note=f"{copies} × {mechanism}(scale {hi:.6g})",
        ),
    )


def utility_gain(
    workload_size: int,
    target: Guarantee,
    importance: npt.ArrayLike | None = None,
    overlap: float | Overlap | CutOracle | None = None,
    maximal_sets: Iterable[Iterable[int]] | None = None,
    **kw: object,
) -> UtilityGain:
    """U = 1 − √(E_overlap/E_sequential): how much smaller the noise is when calibrated to the
    overlap instead of sequential composition (docs/theory.md §3)."""
    ov = allocate(workload_size, target, importance, overlap, maximal_sets, **kw)  # type: ignore[arg-type]
    seq = allocate(workload_size, target, importance, sequential_overlap, None, **kw)  # type: ignore[arg-type]
    e_ov = ov.weighted_error(importance)
    e_seq = seq.weighted_error(importance)
    return UtilityGain(1.0 - math.sqrt(e_ov / e_seq), ov, seq)
