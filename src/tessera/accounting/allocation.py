r"""Budget allocation: per-query noise that meets a target through the overlap (SPEC §3).

Setting. t counting queries, each answered by an additive-noise mechanism with privacy
parameter p_q (ε_q for Laplace, μ_q for Gaussian; sensitivity 1 under add/remove). By Thm 6
the joint release costs, with h(p) = p (pure DP, comp = Σ) or h(p) = p² (GDP, comp = √Σ·²),

    cost = g( max_x Σ_{q: q(x)=1} h(p_q) )          g = id (ε') or √ (μ),

so the target is met iff   L(p) := max_x Σ_{q∋x} h(p_q) ≤ B,   B = ε (pure) or μ² (GDP).
L is a weighted maximum overlap: the overlap solvers (``tessera.overlap``) compute it or an
upper bound. This module takes it as an *oracle* ``overlap(y) ≥ max_x Σ_{q∋x} y_q`` for y ≥ 0:

* a number γ ≥ γ(Q) becomes y ↦ γ · max_q y_q (valid: a row meets ≤ γ queries);
* ``maximal_sets`` (the maximal overlapping sets I_2) give the exact y ↦ max_I Σ_{q∈I} y_q;
* a callable is used as is (it must return an upper bound; that is what makes the result
  private — the final check below uses only the oracle, never a heuristic).

Under the *substitute-one-row* relation a row moving x → y changes the queries in
I(x) Δ I(y) ⊆ I(x) ∪ I(y), so the load is at most 2 L(p): we use min(2·overlap, Σ_q y_q) (SPEC §1).

Uniform allocation. p_q = p with h(p) · L(1) = B: ε_q = ε/γ, μ_q = μ/√γ.

Weighted allocation. With importance weights w_q > 0, minimise the weighted expected squared
error Σ_q w_q Var_q, Var_q = 2/ε_q² (Laplace) or 1/μ_q² (Gaussian), i.e. Σ_q w_q c u_q^{−k}
with u_q = h(p_q) and k = 2 (pure) or 1 (GDP), subject to L(u) ≤ B.

1. *Shape.* Under the structure-free constraint Σ_q u_q ≤ B, Lagrange gives
   k w_q u_q^{−k−1} = λ, i.e. u_q ∝ w_q^{1/(k+1)}  (ε_q ∝ w_q^{1/3}, μ_q² ∝ w_q^{1/2}).
   With ``maximal_sets`` the exact problem min Σ w_q u_q^{−k} s.t. Σ_{q∈I} u_q ≤ B (I ∈ I_2)
   is convex and is solved numerically (SLSQP) starting from that shape.
2. *Rescale (safety).* u ← c·u with c = B / overlap(u) (overlap is an upper bound, so the
   constraint holds), then shrink while the oracle says overlap(h(p)) > B after the conversion
   to parameters. Whatever step 1 returns, step 2 makes the allocation meet the target.

Utility gain vs sequential composition (SPEC §3): the sequential allocation is the same
procedure with the oracle y ↦ Σ_q y_q (comp(Q)); the gain is
U = 1 − √(E_overlap / E_sequential) with E = Σ w_q Var_q — the ratio of noise scales; for
homogeneous queries U = 1 − γ/t (Laplace) and 1 − √(γ/t) (Gaussian).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import optimize

from tessera.accounting.composition import normalise_sets
from tessera.accounting.guarantee import Definition, Guarantee, Neighbours
from tessera.accounting.pld import DEFAULT_DISCRETIZATION, MECHANISMS, compose_plds
from tessera.accounting.tradeoff import GaussianDP
from tessera.errors import TesseraError

FloatArray = npt.NDArray[np.float64]
#: ``overlap(y)`` ≥ max_x Σ_{q: q(x)=1} y_q for per-query weights y ≥ 0.
Overlap = Callable[[FloatArray], float]


# ---------------------------------------------------------------------------------------------
# Overlap oracles
# ---------------------------------------------------------------------------------------------


def overlap_from_gamma(gamma: float) -> Overlap:
    """y ↦ γ · max_q y_q: valid for any y when γ ≥ γ(Q) (each row meets ≤ γ queries)."""
    g = float(gamma)
    if not (math.isfinite(g) and g >= 1.0):
        raise TesseraError(f"a maximum overlap γ is ≥ 1, got {gamma!r}")
    return lambda y: g * float(np.max(y)) if np.size(y) else 0.0


def overlap_from_sets(workload_size: int, maximal_sets: Iterable[Iterable[int]]) -> Overlap:
    """y ↦ max_{I∈I_2} Σ_{q∈I} y_q: exact when the sets are the maximal overlapping sets."""
    sets = normalise_sets(workload_size, maximal_sets)
    n = len(sets)
    rows = np.repeat(np.arange(n), [len(t) for t in sets])
    cols = np.concatenate([np.asarray(t, dtype=np.int64) for t in sets])

    def oracle(y: FloatArray) -> float:
        sums = np.bincount(rows, weights=np.asarray(y, dtype=np.float64)[cols], minlength=n)
        return float(np.max(sums))

    return oracle


def sequential_overlap(y: FloatArray) -> float:
    """y ↦ Σ_q y_q: the structure-free bound comp(Q) of sequential composition."""
    return float(math.fsum(np.asarray(y, dtype=np.float64).tolist()))


# ---------------------------------------------------------------------------------------------
# Result
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Allocation:
    """Per-query noise meeting ``target``.

    ``parameters``: ε_q (Laplace / discrete Laplace) or μ_q (Gaussian); ``noise_scales``: the
    Laplace scale b_q = 1/ε_q or Gaussian σ_q = 1/μ_q (sensitivity-1 counting queries).
    ``load`` is the oracle's bound on the h-cost (≤ ``budget``); ``achieved`` is the guarantee
    that load certifies (never weaker than ``target``).
    """

    target: Guarantee
    mechanism: str
    parameters: tuple[float, ...]
    noise_scales: tuple[float, ...]
    budget: float
    load: float
    method: str
    achieved: Guarantee

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


@dataclass(frozen=True)
class UtilityGain:
    """U = 1 − √(E_overlap / E_sequential) (SPEC §3), with both allocations."""

    gain: float
    overlap: Allocation
    sequential: Allocation


# ---------------------------------------------------------------------------------------------
# Allocation
# ---------------------------------------------------------------------------------------------


def gdp_mu_for(eps: float, delta: float) -> float:
    """The largest μ with G_μ (ε,δ)-DP, i.e. δ_μ(ε) ≤ δ (bisection; returns the safe end)."""
    if not (eps >= 0 and 0 < delta < 1):
        raise TesseraError(f"need ε ≥ 0 and δ in (0, 1), got ({eps!r}, {delta!r})")
    lo, hi = 0.0, 1.0
    while float(GaussianDP(hi).delta(eps)) <= delta:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if float(GaussianDP(mid).delta(eps)) <= delta:
            lo = mid
        else:
            hi = mid
    return lo


def _oracle(
    workload_size: int,
    overlap: float | Overlap | None,
    maximal_sets: Iterable[Iterable[int]] | None,
) -> tuple[Overlap, list[tuple[int, ...]] | None]:
    oracles: list[Overlap] = []
    sets = None
    if maximal_sets is not None:
        sets = normalise_sets(workload_size, maximal_sets)
        oracles.append(overlap_from_sets(workload_size, sets))
    if overlap is not None:
        oracles.append(overlap if callable(overlap) else overlap_from_gamma(float(overlap)))
    if not oracles:
        oracles.append(sequential_overlap)
    if len(oracles) == 1:
        return oracles[0], sets
    # Both are upper bounds, so is their minimum.
    return (lambda y: min(o(y) for o in oracles)), sets


def _importance(workload_size: int, importance: npt.ArrayLike | None) -> FloatArray | None:
    if importance is None:
        return None
    w = np.asarray(importance, dtype=np.float64)
    if w.shape != (workload_size,):
        raise TesseraError(f"need {workload_size} importance weights, got shape {w.shape}")
    if np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise TesseraError(
            "importance weights must be finite and > 0",
            hint="drop a query instead of giving it weight 0 (weight 0 means infinite noise)",
        )
    return w / w.max()


def allocate(
    workload_size: int,
    target: Guarantee,
    importance: npt.ArrayLike | None = None,
    overlap: float | Overlap | None = None,
    maximal_sets: Iterable[Iterable[int]] | None = None,
    via: Literal["gdp", "pld"] = "gdp",
    mechanism: str | None = None,
    discretization: float = DEFAULT_DISCRETIZATION,
    refine: bool = True,
) -> Allocation:
    """Per-query noise parameters meeting ``target`` through the overlap bound.

    ``target``: pure ε (Laplace noise), μ-GDP (Gaussian), or (ε,δ) — ``via="gdp"``: Gaussian
    noise calibrated to the largest μ with G_μ ⇒ (ε,δ); ``via="pld"``: uniform noise of
    ``mechanism`` (laplace, discrete_laplace, gaussian, discrete_gaussian) calibrated by PLD
    composition of ⌈load⌉ copies. ``overlap``: a number γ ≥ γ(Q) or an oracle (see module
    docs); ``maximal_sets``: I_2. With neither, sequential composition (γ = t) is used.
    """
    t = int(workload_size)
    if t < 1:
        raise TesseraError("a workload has at least one query")
    oracle, sets = _oracle(t, overlap, maximal_sets)
    factor = 2.0 if target.neighbours is Neighbours.SUBSTITUTE else 1.0

    def load(y: FloatArray) -> float:
        # Σ_q y_q bounds the cost under either relation (a change touches at most all queries).
        return min(factor * oracle(y), sequential_overlap(y))

    w = _importance(t, importance)
    d = target.definition
    if d is Definition.APPROX and via == "pld":
        if w is not None:
            raise TesseraError(
                "PLD calibration supports uniform allocation only",
                hint="use via='gdp' for importance-weighted (ε,δ) allocation",
            )
        return _allocate_pld(t, target, load, mechanism or "gaussian", discretization)
    if d is Definition.PURE:
        k, budget, mech = 2, float(target.epsilon or 0.0), "laplace"
    elif d is Definition.GDP:
        k, budget, mech = 1, float(target.mu or 0.0) ** 2, "gaussian"
    elif d is Definition.APPROX:
        mu = gdp_mu_for(float(target.epsilon or 0.0), float(target.delta or 0.0))
        k, budget, mech = 1, mu**2, "gaussian"
    else:
        raise TesseraError(
            f"cannot allocate for a {d.value} target",
            hint="use pure ε, μ-GDP or (ε,δ)",
        )
    # Discrete Laplace with scale 1/ε is exactly ε-DP (Δ = 1); the discrete Gaussian is *not*
    # known to be exactly (1/σ)-GDP, so GDP calibration admits the continuous Gaussian only
    # (use via="pld" to calibrate a discrete Gaussian for an (ε,δ) target).
    allowed = {"laplace", "discrete_laplace"} if mech == "laplace" else {"gaussian"}
    if mechanism is not None and mechanism not in allowed:
        raise TesseraError(
            f"a {d.value} target is calibrated here for {sorted(allowed)}, not {mechanism!r}",
            hint="for a discrete Gaussian use an (ε,δ) target with via='pld'",
        )
    if mechanism is not None:
        mech = mechanism
    if budget <= 0.0:
        raise TesseraError("the privacy target must be > 0")

    if w is None:
        shape = np.ones(t)
        method = "uniform"
    else:
        shape = w ** (1.0 / (k + 1))
        method = "weighted"
        if refine and sets is not None and len(sets) > 1:
            shape = _refine(shape, w, k, sets)
            method = "weighted (optimised over I_2)"
    u = _rescale(shape, budget, load)
    params = u if k == 2 else np.sqrt(u)
    params = _shrink_until_valid(params, k, budget, load)
    final = load(params ** (2 if k == 1 else 1))
    achieved = _achieved(target, d, k, final)
    return Allocation(
        target=target,
        mechanism=mech,
        parameters=tuple(float(p) for p in params),
        noise_scales=tuple(float(1.0 / p) for p in params),
        budget=budget,
        load=final,
        method=method,
        achieved=achieved,
    )


def _h(params: FloatArray, k: int) -> FloatArray:
    return params if k == 2 else params**2


def _rescale(shape: FloatArray, budget: float, load: Callable[[FloatArray], float]) -> FloatArray:
    lv = load(shape)
    if not (lv > 0 and math.isfinite(lv)):
        raise TesseraError(f"the overlap oracle returned {lv!r} for positive weights")
    return shape * (budget / lv)


def _shrink_until_valid(
    params: FloatArray, k: int, budget: float, load: Callable[[FloatArray], float]
) -> FloatArray:
    """Enforce load(h(p)) ≤ B with the oracle itself (rounding in √ or a non-homogeneous
    oracle could overshoot by a few ulps)."""
    for _ in range(100):
        lv = load(_h(params, k))
        if lv <= budget:
            return params
        ratio = budget / lv * (1.0 - 1e-15)
        params = params * (ratio if k == 2 else math.sqrt(ratio))
    raise TesseraError("could not meet the budget with this overlap oracle (is it monotone?)")


def _achieved(target: Guarantee, d: Definition, k: int, final: float) -> Guarantee:
    n = target.neighbours
    basis = "upper bound (Thm 6 with the overlap oracle)"
    if d is Definition.PURE:
        return Guarantee.pure(final, n, basis=basis)
    mu = math.sqrt(final)
    if d is Definition.GDP:
        return Guarantee.gdp(mu, n, basis=basis)
    g = Guarantee.gdp(mu, n, basis=basis)
    delta = float(target.delta or 0.0)
    return Guarantee.approx(
        g.epsilon_at(delta), delta, n, basis=basis, note=f"via μ-GDP, μ = {mu:.6g}"
    )


def _refine(
    shape: FloatArray, w: FloatArray, k: int, sets: Sequence[tuple[int, ...]]
) -> FloatArray:
    """min Σ w_q u_q^{−k} s.t. Σ_{q∈I} u_q ≤ 1 (I ∈ I_2), u > 0 — convex; SLSQP in log u.

    Any returned point is only a *shape*: the caller rescales it with the oracle, so a
    solver failure costs utility, never privacy."""
    t = shape.size
    a = np.zeros((len(sets), t))
    for r, s in enumerate(sets):
        a[r, list(s)] = 1.0
    u0 = shape / np.max(a @ shape)

    def obj(z: FloatArray) -> tuple[float, FloatArray]:
        u = np.exp(z)
        val = w * u ** (-k)
        return float(np.sum(val)), -k * val

    cons = {
        "type": "ineq",
        "fun": lambda z: 1.0 - a @ np.exp(z),
        "jac": lambda z: -a * np.exp(z)[None, :],
    }
    if t > 400 or len(sets) > 4000:  # keep SLSQP's dense problem small
        return shape
    res = optimize.minimize(
        obj,
        np.log(u0),
        jac=True,
        constraints=[cons],
        method="SLSQP",
        options={"maxiter": 500, "ftol": 1e-12},
    )
    z = res.x if np.all(np.isfinite(res.x)) else np.log(u0)
    u = np.exp(z)

    # Keep the better of the solver's point and the starting shape (both rescaled).
    def cost(v: FloatArray) -> float:
        v = v / np.max(a @ v)
        return float(np.sum(w * v ** (-k)))

    return u if cost(u) <= cost(u0) else shape


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
    assert achieved_eps <= eps
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
    overlap: float | Overlap | None = None,
    maximal_sets: Iterable[Iterable[int]] | None = None,
    **kw: object,
) -> UtilityGain:
    """U = 1 − √(E_overlap/E_sequential): how much smaller the noise is when calibrated to the
    overlap instead of sequential composition (SPEC §3)."""
    ov = allocate(workload_size, target, importance, overlap, maximal_sets, **kw)  # type: ignore[arg-type]
    seq = allocate(workload_size, target, importance, sequential_overlap, None, **kw)  # type: ignore[arg-type]
    e_ov = ov.weighted_error(importance)
    e_seq = seq.weighted_error(importance)
    return UtilityGain(1.0 - math.sqrt(e_ov / e_seq), ov, seq)
