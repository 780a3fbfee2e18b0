r"""Budget allocation: per-query noise that meets a target through the overlap (SPEC §3).

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
I(x) Δ I(y) ⊆ I(x) ∪ I(y), so the load is at most 2 L(u): we use min(2·overlap, Σ_q y_q) (SPEC §1).

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

Utility gain vs sequential composition (SPEC §3): the sequential allocation is the same
procedure with the oracle y ↦ Σ_q y_q (comp(Q)); the gain is
U = 1 − √(E_overlap / E_sequential) with E = Σ w_q Var_q — the ratio of noise scales; for
homogeneous queries U = 1 − γ/t (Laplace) and 1 − √(γ/t) (Gaussian).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import scipy.linalg
import scipy.optimize
import scipy.sparse as sp

from tessera.accounting.composition import normalise_sets
from tessera.accounting.guarantee import Definition, Guarantee, Neighbours
from tessera.accounting.pld import DEFAULT_DISCRETIZATION, MECHANISMS, compose_plds
from tessera.accounting.tradeoff import GaussianDP
from tessera.errors import TesseraError

FloatArray = npt.NDArray[np.float64]
#: ``overlap(y)`` ≥ max_x Σ_{q: q(x)=1} y_q for per-query weights y ≥ 0.
Overlap = Callable[[FloatArray], float]
#: A realised overlapping set I(x) (sorted query indices).
Cut = tuple[int, ...]
#: Separation oracle: y ↦ (bound ≥ max_x Σ_{q∈I(x)} y_q, I(x*) or None).
CutOracle = Callable[[FloatArray], tuple[float, Sequence[int] | None]]

#: Cutting-plane tolerance: stop when L(u) ≤ B (1 + tol).
DEFAULT_TOL = 1e-9
#: Relative duality gap at which the master's interior-point method stops.
MASTER_GAP = 1e-11


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


@dataclass(frozen=True)
class WorkloadOracle:
    """Separation oracle of a workload: y ↦ (L(y) or a proven upper bound, I(x*)).

    Calls ``tessera.overlap.max_overlap(workload, y, comp="pure", neighbours="add-remove")``
    (the load is linear in y = h(p), whatever the privacy definition): ``.bound`` is exact or a
    proven upper bound, ``.witness.queries`` the set of the best row found, re-checked by
    evaluating every query on it (so it is a genuine constraint of (P)).

    ``time_limit`` (seconds per call, None = exact) is used when the bound matters: the final
    certificate and when cut generation stalls. While cuts are being generated
    :meth:`quick` uses ``separation_time_limit``: an anytime search finds a violated row long
    before it proves optimality, and any bound it returns is still valid.
    """

    workload: Any
    domain: Any = None
    time_limit: float | None = None
    separation_time_limit: float | None = 1.0
    method: str = "auto"

    def _solve(self, y: FloatArray, limit: float | None) -> tuple[float, Sequence[int] | None]:
        from tessera.overlap import max_overlap  # lazy: tessera.overlap may import this module

        res = max_overlap(
            self.workload,
            np.asarray(y, dtype=np.float64),
            domain=self.domain,
            comp="pure",
            neighbours="add-remove",
            time_limit=limit,
            method=self.method,  # type: ignore[arg-type]
        )
        return res.bound, None if res.witness is None else res.witness.queries

    def __call__(self, y: FloatArray) -> tuple[float, Sequence[int] | None]:
        return self._solve(y, self.time_limit)

    def quick(self, y: FloatArray) -> tuple[float, Sequence[int] | None]:
        limits = [x for x in (self.time_limit, self.separation_time_limit) if x is not None]
        return self._solve(y, min(limits) if limits else None)


def overlap_from_workload(
    workload: Any,
    *,
    domain: Any = None,
    time_limit: float | None = None,
    separation_time_limit: float | None = 1.0,
    method: str = "auto",
) -> WorkloadOracle:
    """The separation oracle of ``workload`` through ``tessera.overlap.max_overlap``
    (:class:`WorkloadOracle`); pass it as ``allocate(..., overlap=...)``."""
    return WorkloadOracle(workload, domain, time_limit, separation_time_limit, method)


def _read_answer(answer: object, t: int) -> tuple[float, Cut | None, bool]:
    """An oracle's answer as (bound, cut, separating): a number (not separating), a pair or
    an ``OverlapResult`` (separating, the set possibly None: e.g. no row meets any query)."""
    if isinstance(answer, tuple) and len(answer) == 2:
        bound, found = answer
    elif hasattr(answer, "score_bound") and hasattr(answer, "witness"):
        comp = getattr(answer, "comp", "pure")
        nb = getattr(answer, "neighbours", "add-remove")
        if comp != "pure" or nb != "add-remove":
            raise TesseraError(
                f"the overlap oracle returned a {comp}/{nb} result; allocation needs the linear "
                "load (comp='pure', neighbours='add-remove')",
                hint="call max_overlap(..., comp='pure', neighbours='add-remove'); the target's "
                "definition and neighbour relation are applied here",
            )
        bound = answer.score_bound
        wit = answer.witness
        found = None if wit is None else wit.queries
    else:
        return float(answer), None, False  # type: ignore[arg-type]
    cut = None
    if found is not None:
        cut = tuple(sorted({int(i) for i in found}))
        if any(i < 0 or i >= t for i in cut):
            raise TesseraError(f"the overlap oracle's set {cut} names a query outside 0..{t - 1}")
        cut = cut or None
    return float(bound), cut, True


@dataclass(frozen=True)
class _Oracles:
    """All the bounds the caller gave, combined: their minimum is an upper bound on L(y);
    explicit sets and separation oracles also yield violated sets (cuts)."""

    size: int
    callables: tuple[Callable[[FloatArray], object], ...]
    sets: tuple[Cut, ...]
    incidence: sp.csr_matrix | None
    sequential: bool  # no bound given at all: sequential composition

    def answer(
        self, y: FloatArray, above: float = math.inf, limit: int = 32, quick: bool = False
    ) -> tuple[float, list[Cut], bool]:
        """(min of the bounds at y, sets with load > ``above`` — most loaded first —, whether
        some oracle can separate). ``quick``: use an oracle's ``quick`` method if it has one
        (a cheaper, still valid, answer for cut generation)."""
        bounds: list[float] = []
        cuts: list[Cut] = []
        separating = self.incidence is not None
        if self.incidence is not None:
            loads = self.incidence @ y
            bounds.append(float(np.max(loads)))
            hot = np.flatnonzero(loads > above)
            for i in hot[np.argsort(-loads[hot], kind="stable")][:limit]:
                cuts.append(self.sets[int(i)])
        for f in self.callables:
            g = getattr(f, "quick", None) if quick else None
            bound, cut, sep = _read_answer((g if callable(g) else f)(y), self.size)
            bounds.append(bound)
            separating |= sep
            if cut is not None:
                cuts.append(cut)
        if not bounds:
            bounds.append(sequential_overlap(y))
        return min(bounds), cuts, separating

    def bound(self, y: FloatArray) -> float:
        return self.answer(y)[0]

    @property
    def has_quick(self) -> bool:
        return any(callable(getattr(f, "quick", None)) for f in self.callables)


def _oracles(
    workload_size: int,
    overlap: float | Overlap | CutOracle | None,
    maximal_sets: Iterable[Iterable[int]] | None,
) -> _Oracles:
    sets: tuple[Cut, ...] = ()
    incidence = None
    if maximal_sets is not None:
        sets = _clean_sets(workload_size, maximal_sets)
        incidence = _incidence(workload_size, sets)
    callables: tuple[Callable[[FloatArray], object], ...] = ()
    if overlap is not None:
        callables = (overlap if callable(overlap) else overlap_from_gamma(float(overlap)),)
    sequential = maximal_sets is None and (overlap is None or overlap is sequential_overlap)
    return _Oracles(workload_size, callables, sets, incidence, sequential)


def _clean_sets(t: int, sets: Iterable[Iterable[int]]) -> tuple[Cut, ...]:
    """Validated, de-duplicated, non-empty sets (subsets are kept: redundant constraints are
    harmless, and removing them is quadratic). A query in no set is added as a singleton, as
    :func:`normalise_sets` does: a forgotten query must still count in the load."""
    out: dict[Cut, None] = {}
    for s in sets:
        cut = tuple(sorted({int(i) for i in s}))
        if any(i < 0 or i >= t for i in cut):
            raise TesseraError(f"overlapping set {cut} names a query outside 0..{t - 1}")
        if cut:
            out[cut] = None
    seen = {i for cut in out for i in cut}
    for i in range(t):
        if i not in seen:
            out[(i,)] = None
    return tuple(out)


def _incidence(t: int, sets: Sequence[Cut]) -> sp.csr_matrix:
    """The m×t 0/1 matrix A with A[I, q] = [q ∈ I]."""
    lengths = [len(s) for s in sets]
    rows = np.repeat(np.arange(len(sets)), lengths)
    cols = np.fromiter((q for s in sets for q in s), dtype=np.int64, count=sum(lengths))
    return sp.csr_matrix((np.ones(cols.size), (rows, cols)), shape=(len(sets), t))


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


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
    overlapping sets the master problem used; ``rounds`` the oracle calls of the cutting plane;
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
    """U = 1 − √(E_overlap / E_sequential) (SPEC §3), with both allocations."""

    gain: float
    overlap: Allocation
    sequential: Allocation


# ---------------------------------------------------------------------------------------------
# The master problem (P_𝓘) and its dual bound
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MasterSolution:
    """Solution of min Σ w_q v_q^{−k} s.t. A v ≤ 1, v ≤ 1 (budget normalised to 1).

    ``v`` is feasible up to rounding (A v ≤ 1 + 1e-12: it is only a shape, the caller
    rescales it with the oracle); ``value`` = Σ w v^{−k}; ``lower_bound`` = G(λ, ν) ≤ the optimum
    (weak duality, valid whatever the solver did); ``multipliers`` = λ (one per cut)."""

    v: FloatArray
    value: float
    lower_bound: float
    multipliers: FloatArray
    iterations: int
    converged: bool

    @property
    def gap(self) -> float:
        return (self.value - self.lower_bound) / self.value


def dual_bound(w: FloatArray, k: int, a: sp.csr_matrix, lam: FloatArray, nu: FloatArray) -> float:
    """G(λ, ν) = C_k Σ_q w_q^{1/(k+1)} σ_q^{k/(k+1)} − Σλ − Σν, σ = Aᵀλ + ν, for budget 1:
    a lower bound on min Σ w v^{−k} s.t. A v ≤ 1, v ≤ 1 for any λ, ν ≥ 0 (module docs)."""
    sigma = np.maximum(a.T @ lam + nu, 0.0)
    ck = (k + 1) * k ** (-k / (k + 1))
    terms = ck * w ** (1.0 / (k + 1)) * sigma ** (k / (k + 1))
    return math.fsum(terms.tolist()) - math.fsum(lam.tolist()) - math.fsum(nu.tolist())


def _newton_solve(d: FloatArray, a: sp.csr_matrix, da: FloatArray, rhs: FloatArray) -> FloatArray:
    """Solve (diag(d) + Aᵀ diag(da) A) x = rhs (d, da > 0): Woodbury in the m×m space when the
    cuts are fewer than the queries, else the t×t normal matrix; Cholesky, with fallbacks."""
    m, t = a.shape
    if m == 0:
        return rhs / d

    def small() -> FloatArray:
        dinv = 1.0 / d
        ad = a.multiply(dinv[None, :]).tocsr()
        mat = (ad @ a.T).toarray()
        mat[np.diag_indices(m)] += 1.0 / da
        y = rhs * dinv
        z = scipy.linalg.cho_solve(scipy.linalg.cho_factor(mat, check_finite=False), a @ y)
        return np.asarray(y - dinv * (a.T @ z))

    def large() -> FloatArray:
        mat = (a.T.multiply(da[None, :]) @ a).toarray()
        mat[np.diag_indices(t)] += d
        return np.asarray(
            scipy.linalg.cho_solve(scipy.linalg.cho_factor(mat, check_finite=False), rhs)
        )

    order = (small, large) if m <= t else (large, small)
    for solve in order:
        try:
            x = solve()
        except (np.linalg.LinAlgError, ValueError):
            continue
        if np.all(np.isfinite(x)):
            return x
    mat = (a.T.multiply(da[None, :]) @ a).toarray()
    mat[np.diag_indices(t)] += d
    return np.asarray(np.linalg.lstsq(mat, rhs, rcond=None)[0])


def solve_master(
    importance: npt.ArrayLike,
    k: int,
    sets: Sequence[Cut],
    *,
    gap_tol: float = MASTER_GAP,
    max_iter: int = 200,
) -> MasterSolution:
    """min Σ_q w_q v_q^{−k} s.t. Σ_{q∈I} v_q ≤ 1 (I ∈ ``sets``), 0 < v_q ≤ 1.

    Primal-dual interior-point method (Boyd & Vandenberghe §11.7) on the m + t linear
    constraints; v > 0 is kept by the line search (the objective is infinite at 0). Near the
    optimum the slacks 1 − Σ v lose relative precision, so the method stops when the certified
    gap (value − G)/value ≤ ``gap_tol`` or progress stalls, and the active constraints
    (λ > slack) are then solved as equalities by Newton's method (quadratic convergence, no
    slacks), which gives both a boundary point and accurate multipliers for G.
    """
    w = np.asarray(importance, dtype=np.float64)
    t = w.size
    a = _incidence(t, sets)
    m = a.shape[0]
    n_cons = m + t

    def grad(v: FloatArray) -> FloatArray:
        return -k * w * v ** (-k - 1.0)

    def residual(
        v: FloatArray, lam: FloatArray, nu: FloatArray, sa: FloatArray, sb: FloatArray, tau: float
    ) -> float:
        rd = grad(v) + a.T @ lam + nu
        rc = np.concatenate([lam * sa, nu * sb]) - 1.0 / tau
        return float(np.sqrt(np.sum(rd**2) + np.sum(rc**2)))

    shape = w ** (1.0 / (k + 1))
    v = 0.5 * shape / max(float(np.max(shape)), float(np.max(a @ shape)) if m else 0.0)
    sa, sb = 1.0 - a @ v, 1.0 - v
    # Start on the central path of the constraints, the box multipliers dual feasible.
    value = float(np.sum(w * v ** (-k)))
    nu = np.maximum(-grad(v), value / n_cons / sb)
    lam = value / n_cons / sa
    best_lb, stalls, it = -math.inf, 0, 0
    while it < max_iter:
        it += 1
        value = float(np.sum(w * v ** (-k)))
        best_lb = max(best_lb, dual_bound(w, k, a, lam, nu))
        # the polish below finishes from here; more IPM steps would fight rounding in the slacks
        if value - best_lb <= max(gap_tol, 1e-9) * value or stalls >= 3:
            break
        eta = float(sa @ lam + sb @ nu)
        tau = 10.0 * n_cons / eta
        hess = k * (k + 1.0) * w * v ** (-k - 2.0)
        rhs = -grad(v) - a.T @ (1.0 / (tau * sa)) - 1.0 / (tau * sb)
        dv = _newton_solve(hess + nu / sb, a, lam / sa, rhs)
        adv = a @ dv
        dlam = 1.0 / (tau * sa) - lam + lam * adv / sa
        dnu = 1.0 / (tau * sb) - nu + nu * dv / sb
        step = 1.0
        for mult, dm in ((lam, dlam), (nu, dnu)):
            neg = dm < 0
            if np.any(neg):
                step = min(step, float(np.min(-mult[neg] / dm[neg])))
        step *= 0.99
        r0 = residual(v, lam, nu, sa, sb, tau)
        while step > 1e-12:
            v1 = v + step * dv
            sa1, sb1 = sa - step * adv, 1.0 - v1
            if np.all(v1 > 0) and np.all(sb1 > 0) and (m == 0 or np.all(sa1 > 0)):
                lam1, nu1 = lam + step * dlam, nu + step * dnu
                if residual(v1, lam1, nu1, sa1, sb1, tau) <= (1.0 - 0.01 * step) * r0:
                    break
            step *= 0.5
        else:
            break  # no progress possible in floating point
        stalls = stalls + 1 if step < 1e-3 else 0
        v, lam, nu = v1, lam1, nu1
        # recompute the slacks from v, not by updating them: no drift from rounding
        sa, sb = 1.0 - a @ v, 1.0 - v
        if (m and np.any(sa <= 0)) or np.any(sb <= 0):
            break
    value = float(np.sum(w * v ** (-k)))
    best_lb = max(best_lb, dual_bound(w, k, a, lam, nu))
    # Active-set refinement: polish on the face the interior point points at; drop rows with
    # negative multipliers and add violated rows until the face is optimal (a few rounds).
    act_cuts, act_box = lam > sa, nu > sb
    for _ in range(8):
        polished = _polish(w, k, a, v, act_cuts, act_box)
        if polished is None:
            break
        pv, plam, pnu = polished
        best_lb = max(best_lb, dual_bound(w, k, a, np.maximum(plam, 0.0), np.maximum(pnu, 0.0)))
        loads = a @ pv if m else np.zeros(0)
        add_cuts, add_box = (loads > 1.0 + 1e-12) & ~act_cuts, (pv > 1.0 + 1e-12) & ~act_box
        scale = max(float(np.max(np.abs(plam), initial=0.0)), float(np.max(np.abs(pnu))))
        neg_cuts, neg_box = plam < -1e-9 * scale, pnu < -1e-9 * scale
        if not (add_cuts.any() or add_box.any() or neg_cuts.any() or neg_box.any()):
            pvalue = float(np.sum(w * pv ** (-k)))
            if pvalue <= value:
                v, value, lam = pv, pvalue, np.maximum(plam, 0.0)
            break
        act_cuts = (act_cuts & ~neg_cuts) | add_cuts
        act_box = (act_box & ~neg_box) | add_box
    # v ≤ 1 gives the trivial certificate Σ w; keep the better
    best_lb = min(max(best_lb, math.fsum(w.tolist())), value)
    v = np.minimum(v, 1.0)
    converged = value - best_lb <= max(gap_tol, 1e-9) * value
    return MasterSolution(v, value, best_lb, lam, it, converged)


def _polish(
    w: FloatArray,
    k: int,
    a: sp.csr_matrix,
    v: FloatArray,
    cuts: npt.NDArray[np.bool_],
    box: npt.NDArray[np.bool_],
) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """Newton's method on min Σ w v^{−k} s.t. the active rows G v = 1 hold with equality, from
    the interior-point estimate ``v``; returns (v, λ, ν) — multipliers of the active rows, 0
    elsewhere, negative when a row should not be active — or None if it fails.

    Newton step: min ½ dᵀH d + ∇fᵀd s.t. G d = 1 − G v. With at most t active rows it is solved
    in the multipliers, (G H⁻¹ Gᵀ) μ = −G H⁻¹ ∇f − (1 − G v); with more (a degenerate vertex:
    G H⁻¹ Gᵀ is singular) in the primal, d = H^{−½}(−h + C⁺(r + C h)), C = G H^{−½},
    h = H^{−½}∇f, and the multipliers at the end by non-negative least squares on
    ∇f + Gᵀμ = 0 (then they are ≥ 0 by construction)."""
    t = w.size
    g_rows = sp.vstack([a[np.flatnonzero(cuts)], sp.eye(t, format="csr")[np.flatnonzero(box)]])
    g_rows = sp.csr_matrix(g_rows)
    n_act = g_rows.shape[0]
    x = v.copy()
    mult = np.zeros(n_act)
    for _ in range(30):
        grad = -k * w * x ** (-k - 1.0)
        hinv = 1.0 / (k * (k + 1.0) * w * x ** (-k - 2.0))
        r = 1.0 - g_rows @ x
        if n_act == 0:
            dx = -hinv * grad
        elif n_act <= t:
            mat = (g_rows.multiply(hinv[None, :]) @ g_rows.T).toarray()
            rhs = -(g_rows @ (hinv * grad)) - r
            try:
                mult = scipy.linalg.cho_solve(
                    scipy.linalg.cho_factor(mat, check_finite=False), rhs, check_finite=False
                )
            except (np.linalg.LinAlgError, ValueError):
                mult = np.linalg.lstsq(mat, rhs, rcond=1e-14)[0]
            dx = -hinv * (grad + g_rows.T @ mult)
        else:
            hs = np.sqrt(hinv)
            c_mat = g_rows.multiply(hs[None, :]).toarray()
            h = hs * grad
            dx = hs * (-h + np.linalg.lstsq(c_mat, r + c_mat @ h, rcond=1e-14)[0])
        neg = dx < 0
        step = 1.0 if not np.any(neg) else min(1.0, 0.9 * float(np.min(-x[neg] / dx[neg])))
        x = x + step * dx
        if not np.all(np.isfinite(x)) or np.any(x <= 0):
            return None
        if step == 1.0 and float(np.max(np.abs(dx) / x)) < 1e-13:
            break
    if n_act > t:
        grad = -k * w * x ** (-k - 1.0)
        mult = scipy.optimize.nnls(g_rows.T.toarray(), -grad)[0]
    n_cuts = int(np.count_nonzero(cuts))
    lam = np.zeros(a.shape[0])
    nu = np.zeros(t)
    lam[np.flatnonzero(cuts)] = mult[:n_cuts]
    nu[np.flatnonzero(box)] = mult[n_cuts:]
    return x, lam, nu


# ---------------------------------------------------------------------------------------------
# Cutting planes
# ---------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class _Regime:
    """How parameters p map to loads u = h(p) and errors c·u^{−k}."""

    k: int
    c: float
    budget: float
    mechanism: str
    squared: bool  # u = p² (GDP) rather than u = p (pure ε, zCDP ρ)
    zcdp: bool

    def to_u(self, p: FloatArray) -> FloatArray:
        return p**2 if self.squared else p

    def from_u(self, u: FloatArray) -> FloatArray:
        return np.sqrt(u) if self.squared else u

    def scales(self, p: FloatArray) -> FloatArray:
        return 1.0 / np.sqrt(2.0 * p) if self.zcdp else 1.0 / p

    def error(self, u: FloatArray, w: FloatArray) -> float:
        return float(self.c * np.sum(w * u ** (-float(self.k))))


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
    return w


def _regime(target: Guarantee, mechanism: str | None) -> _Regime:
    d = target.definition
    if d is Definition.PURE:
        k, c, budget, mech, squared = 2, 2.0, float(target.epsilon or 0.0), "laplace", False
    elif d is Definition.GDP:
        k, c, budget, mech, squared = 1, 1.0, float(target.mu or 0.0) ** 2, "gaussian", True
    elif d is Definition.APPROX:
        mu = gdp_mu_for(float(target.epsilon or 0.0), float(target.delta or 0.0))
        k, c, budget, mech, squared = 1, 1.0, mu**2, "gaussian", True
    elif d is Definition.ZCDP:
        k, c, budget, mech, squared = 1, 0.5, float(target.rho or 0.0), "gaussian", False
    else:
        raise TesseraError(
            f"cannot allocate for a {d.value} target",
            hint="use pure ε, μ-GDP, ρ-zCDP or (ε,δ)",
        )
    # Discrete Laplace with scale 1/ε is exactly ε-DP (Δ = 1) and the discrete Gaussian with
    # σ is exactly 1/(2σ²)-zCDP (Canonne–Kamath–Steinke 2020); the discrete Gaussian is *not*
    # known to be exactly (1/σ)-GDP, so GDP calibration admits the continuous Gaussian only
    # (use via="pld" to calibrate a discrete Gaussian for an (ε,δ) target).
    if mech == "laplace":
        allowed = {"laplace", "discrete_laplace"}
    elif d is Definition.ZCDP:
        allowed = {"gaussian", "discrete_gaussian"}
    else:
        allowed = {"gaussian"}
    if mechanism is not None and mechanism not in allowed:
        raise TesseraError(
            f"a {d.value} target is calibrated here for {sorted(allowed)}, not {mechanism!r}",
            hint="for a discrete Gaussian use a ρ-zCDP target, or an (ε,δ) target with via='pld'",
        )
    if budget <= 0.0:
        raise TesseraError("the privacy target must be > 0")
    return _Regime(k, c, budget, mechanism or mech, squared, d is Definition.ZCDP)


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
    max_rounds: int = 200,
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
    oracles = _oracles(t, overlap, maximal_sets)
    factor = 2.0 if target.neighbours is Neighbours.SUBSTITUTE else 1.0

    def load(y: FloatArray) -> float:
        # Σ_q y_q bounds the cost under either relation (a change touches at most all queries).
        return min(factor * oracles.bound(y), sequential_overlap(y))

    w = _importance(t, importance)
    if target.definition is Definition.APPROX and via == "pld":
        if w is not None:
            raise TesseraError(
                "PLD calibration supports uniform allocation only",
                hint="use via='gdp' for importance-weighted (ε,δ) allocation",
            )
        return _allocate_pld(t, target, load, mechanism or "gaussian", discretization)
    regime = _regime(target, mechanism)
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
    regime: _Regime,
    w: FloatArray,
    oracles: _Oracles,
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
    first_bound, first_cuts, separating = oracles.answer(y0, above=unit, quick=True)
    # (name, y, load(y)) — load None: ask the oracle
    candidates: list[tuple[str, FloatArray, float | None]] = [
        ("Lagrange shape", y0, capped(y0, first_bound)),
        ("uniform", np.ones(t), None),
    ]
    lower: float | None = seq_opt if oracles.sequential else None
    cp: CuttingPlane | None = None
    if separating:
        # Explicit I_2: small families go to the master at once; large ones by separation.
        initial = list(oracles.sets) if len(oracles.sets) <= 2000 else []
        initial += first_cuts

        def separate(v: FloatArray) -> tuple[float, list[Cut]]:
            bound, cuts, _ = oracles.answer(v * unit, above=unit * (1.0 + tol), quick=True)
            violated = any(math.fsum(v[list(c)].tolist()) > 1.0 + tol for c in cuts)
            if bound > unit * (1.0 + tol) and not violated and oracles.has_quick:
                # the quick answer neither certifies nor cuts: ask the full oracle
                full, more, _ = oracles.answer(v * unit, above=unit * (1.0 + tol))
                bound, cuts = min(bound, full), cuts + more
            return bound / unit, cuts

        # conditioning: the master sees weights ≤ 1
        cp = cutting_plane(
            w / scale, k, separate, initial, tol=tol, max_rounds=max_rounds, time_limit=time_limit
        )
        cut_lb = scale * regime.c * unit ** (-k) * cp.lower_bound
        lower = cut_lb if factor == 1.0 else min(cut_lb, seq_opt)
        y_cp = cp.v * unit
        candidates.insert(0, ("cutting plane", y_cp, capped(y_cp, cp.load * unit)))
        if cp.converged and factor == 1.0:
            candidates = candidates[:1]  # optimal to tol; other shapes cannot do better
    best: tuple[float, str, FloatArray] | None = None
    for name, y, lv in candidates:
        u = _rescale(y, budget, load, lv)
        err = regime.error(u, w)
        if best is None or err < best[0]:
            best = (err, name, u)
    assert best is not None
    _, name, u = best
    if cp is not None:
        method = (
            f"weighted (cutting planes: {len(cp.sets)} overlapping sets, {cp.rounds} oracle "
            f"round(s), {'converged' if cp.converged else 'stopped early'}"
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
        load,
        w,
        method,
        lower_bound=None if lower is None else float(min(lower, best[0])),  # ≤ a feasible error
        cuts=() if cp is None else cp.sets,
        rounds=0 if cp is None else cp.rounds,
        converged=None if cp is None else cp.converged,
    )


def _finish(
    target: Guarantee,
    regime: _Regime,
    u: FloatArray,
    load: Callable[[FloatArray], float],
    w: FloatArray,
    method: str,
    **record: Any,
) -> Allocation:
    """Convert the rescaled loads u to parameters, re-check with the oracle, package."""
    params, final = _shrink_until_valid(regime.from_u(u), regime, load)
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


def _shrink_until_valid(
    params: FloatArray, regime: _Regime, load: Callable[[FloatArray], float]
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
    overlap instead of sequential composition (SPEC §3)."""
    ov = allocate(workload_size, target, importance, overlap, maximal_sets, **kw)  # type: ignore[arg-type]
    seq = allocate(workload_size, target, importance, sequential_overlap, None, **kw)  # type: ignore[arg-type]
    e_ov = ov.weighted_error(importance)
    e_seq = seq.weighted_error(importance)
    return UtilityGain(1.0 - math.sqrt(e_ov / e_seq), ov, seq)
