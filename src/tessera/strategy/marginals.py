r"""Generalised least squares for measured marginals, in the residual basis (docs/theory.md §10;
Xiao, Kifer et al., NeurIPS 2023, "ResidualPlanner", §4).

Setting. Attributes i with n_i codes; a marginal over a scope A (a set of attributes) is the
count vector Q_A x (n_A = Π_{i∈A} n_i cells), x the histogram over the full domain (N cells,
never built). A *design* measures marginals A ∈ 𝓜 with independent noise of per-cell
variance v_A (precision u_A = 1/v_A) and answers target marginals S ∈ 𝓦, each S ⊆ some A
(up to attributes of one code, below).

Residual basis. With P1_i = 11ᵀ/n_i and P⊥_i = I − P1_i, the projectors
Π_B = ⊗_{i∈B} P⊥_i ⊗_{i∉B} P1_i (B ⊆ attributes) are orthogonal and sum to I; Q_AᵀQ_A =
(Π_{i∉A} n_i) Σ_{B⊆A} Π_B. So the information matrix Σ_A u_A Q_AᵀQ_A has eigenvalue
λ_B = N μ_B on the range of Π_B, with

    μ_B = Σ_{A∈𝓜, A⊇B} u_A / n_A,

and the GLS estimate is computed residual by residual (never over the full domain): the
B-residual of the fit, as a tensor over B's codes,

    t_B = (1/μ_B) Σ_{A⊇B} (u_A/n_A) · P⊥_B (Σ_{A∖B} y_A)        (sum over the axes A∖B),

and the estimate of target S is Σ_{B⊆S} t_B broadcast over S∖B and divided by n_{S∖B}.
Every cell of S has the same variance (exact for the GLS estimator):

    Var_S = Σ_{B⊆S} p_B / (μ_B n_B n_{S∖B}²),     p_B = Π_{i∈B} (1 − 1/n_i).

An attribute with one code has P⊥_i = 0: a residual B over it is the zero space (p_B = 0,
n_B·p_B = Π_{i∈B}(n_i − 1) = 0 dimensions), so it needs no measurement and contributes 0 to
every target (:func:`informative`; as :attr:`~.contrasts.ResidualContrasts.scopes` leaves it
out). A target S is then answered from any measured scope holding S's attributes of more than
one code: a marginal over S is that marginal broadcast over the one-code attributes (the
same cells in the same order).

ResidualPlanner measures the residuals themselves with Gaussian noise, each at privacy cost
p_B/(2σ_B²); here each measured marginal is a set of disjoint counting queries answered with
Tessera's discrete noise at cost c_A (its cells are disjoint, so a row pays Σ_A c_A: the
strategy's γ_w is exact). Measuring marginal A with per-cell variance v is the residual
mechanism with σ_B² = v n_{A∖B} for every B ⊆ A: the same family, minus ResidualPlanner's freedom
to weight the sub-residuals of A separately (docs/benchmarks.md: 3.6% more error on Adult's
2-way marginals).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.strategy.epigraph import epigraph_minimax, frank_wolfe_bound

Scope = tuple[str, ...]
FloatArray = npt.NDArray[np.float64]


def subsets(scope: Scope) -> list[Scope]:
    """Every subset of ``scope`` (order kept), the empty one first."""
    return [c for k in range(len(scope) + 1) for c in itertools.combinations(scope, k)]


def informative(scope: Scope, sizes: Mapping[str, int]) -> Scope:
    """``scope`` without its attributes of one code (order kept): what a marginal over it
    depends on (module docs)."""
    return tuple(a for a in scope if sizes[a] > 1)


def covers(target: Scope, scopes: Sequence[Scope], sizes: Mapping[str, int]) -> bool:
    """Whether some scope of ``scopes`` holds every attribute of ``target`` with more than one
    code: then the marginals over ``scopes`` answer ``target`` (module docs)."""
    need = set(informative(target, sizes))
    return any(need <= set(a) for a in scopes)


def downward_closure(scopes: Sequence[Scope]) -> tuple[Scope, ...]:
    """Every subset of every scope, smallest first (ties in first-seen order)."""
    seen: dict[Scope, None] = {}
    for s in scopes:
        for b in subsets(s):
            seen.setdefault(b, None)
    return tuple(sorted(seen, key=len))


@dataclass(frozen=True)
class MarginalDesign:
    """Measured scopes 𝓜 and target scopes 𝓦 (each target inside some measured scope, up to
    its attributes of one code: :func:`covers`) over attributes of the given sizes; scopes
    list attributes in one fixed (domain) order."""

    sizes: Mapping[str, int]
    measured: tuple[Scope, ...]
    targets: tuple[Scope, ...]

    def __post_init__(self) -> None:
        for s in self.targets:
            if not covers(s, self.measured, self.sizes):
                raise ValueError(f"target {s} lies in no measured scope")

    def cells(self, scope: Scope) -> int:
        return math.prod(self.sizes[a] for a in scope)

    @property
    def residuals(self) -> tuple[Scope, ...]:
        """The residual scopes B the targets need: the downward closure of the targets, less
        the zero spaces (a B with an attribute of one code, module docs)."""
        return tuple(b for b in downward_closure(self.targets)
                     if informative(b, self.sizes) == b)

    def mu(self, precision: FloatArray) -> dict[Scope, float]:
        """μ_B = Σ_{A⊇B} u_A/n_A for every residual B (``precision[k]`` = u of measured[k])."""
        out: dict[Scope, float] = {}
        for b in self.residuals:
            sb = set(b)
            out[b] = float(sum(u / self.cells(a) for a, u in zip(self.measured, precision)
                               if sb <= set(a)))
        return out

    def coefficients(self) -> tuple[list[Scope], npt.NDArray[np.float64], FloatArray]:
        """(residuals R, the 0/1 matrix M[b, a] = [B_b ⊆ A_a]/n_a, the matrix
        C[s, b] = [B_b ⊆ S_s] p_B/(n_B n_{S∖B}²)): μ = M u and Var = C (1/μ)."""
        res = list(self.residuals)
        m = np.zeros((len(res), len(self.measured)))
        for j, a in enumerate(self.measured):
            sa = set(a)
            for k, b in enumerate(res):
                if set(b) <= sa:
                    m[k, j] = 1.0 / self.cells(a)
        c = np.zeros((len(self.targets), len(res)))
        for j, s in enumerate(self.targets):
            ss = set(s)
            for k, b in enumerate(res):
                if set(b) <= ss:
                    p = math.prod(1.0 - 1.0 / self.sizes[i] for i in b)
                    rest = math.prod(self.sizes[i] for i in s if i not in b)
                    c[j, k] = p / (self.cells(b) * rest * rest)
        return res, m, c

    def variances(self, precision: npt.ArrayLike) -> FloatArray:
        """Var_S of one cell of each target (module docs), for per-cell precisions u_A."""
        _, m, c = self.coefficients()
        mu = m @ np.asarray(precision, dtype=np.float64)
        if np.any(mu <= 0):
            raise ValueError("a residual the targets need is not measured")
        return c @ (1.0 / mu)

    def reconstruct(self, answers: Mapping[Scope, npt.ArrayLike],
                    precision: Mapping[Scope, float]) -> dict[Scope, FloatArray]:
        """The GLS estimate of every target marginal from noisy measured marginals
        (``answers[A]``: a tensor of shape (n_i for i in A), or its row-major flattening)."""
        y = {a: np.asarray(answers[a], dtype=np.float64).reshape(self._shape(a))
             for a in self.measured}
        mu = self.mu(np.array([precision[a] for a in self.measured]))
        t: dict[Scope, FloatArray] = {}
        for b in self.residuals:
            acc = np.zeros(self._shape(b))
            for a in self.measured:
                if not set(b) <= set(a):
                    continue
                axes = tuple(k for k, i in enumerate(a) if i not in b)
                acc += (precision[a] / self.cells(a)) * y[a].sum(axis=axes)
            for axis in range(len(b)):
                acc -= acc.mean(axis=axis, keepdims=True)  # P⊥ along each axis of B
            t[b] = acc / mu[b]
        out: dict[Scope, FloatArray] = {}
        for s in self.targets:
            est = np.zeros(self._shape(s))
            for b in subsets(s):
                if b not in t:  # a zero space (module docs): contributes 0
                    continue
                shape = [self.sizes[i] if i in b else 1 for i in s]
                rest = math.prod(self.sizes[i] for i in s if i not in b)
                est += t[b].reshape(shape) / rest
            out[s] = est
        return out

    def _shape(self, scope: Scope) -> tuple[int, ...]:
        return tuple(self.sizes[a] for a in scope)


def optimal_precisions(
    design: MarginalDesign, target_weights: npt.ArrayLike, *, zcdp: bool, total: float,
) -> FloatArray:
    r"""Per-measured-marginal costs c_A ≥ 0 with Σ c_A = ``total`` minimising the total
    expected squared error Σ_S w_S n_S Var_S (γ_w of marginals is Σ_A c_A: each row meets one
    cell of each). Noise precision u_A = 2 c_A (zCDP: σ² = 1/(2ρ)) or c_A²/2 (pure ε: Laplace
    variance 2b², b = 1/ε). zCDP: a convex problem (1/μ is convex and μ linear in c);
    solved by L-BFGS over the softmax parametrisation of the simplex from the uniform split
    (the result is never worse than uniform: the start is kept if nothing improves it).
    Returns the costs c_A."""
    from scipy.optimize import minimize

    _, m, c = design.coefficients()
    w = np.asarray(target_weights, dtype=np.float64)
    g = (w * np.array([design.cells(s) for s in design.targets])) @ c  # Σ_S w_S n_S C[S,B]
    k = len(design.measured)

    def precision(cost: FloatArray) -> FloatArray:
        return 2.0 * cost if zcdp else 0.5 * cost * cost

    def objective(z: FloatArray) -> tuple[float, FloatArray]:
        e = np.exp(z - z.max())
        s = e / e.sum()
        cost = total * s
        mu = m @ precision(cost)
        if np.any(mu <= 0):
            return math.inf, np.zeros_like(z)
        value = float(g @ (1.0 / mu))
        dmu = -(m.T @ (g / (mu * mu)))  # d value / d u_A
        du = 2.0 * np.ones(k) if zcdp else cost  # d u_A / d c_A
        grad_c = dmu * du * total
        return value, s * (grad_c - float(s @ grad_c))

    uniform = np.zeros(k)
    best = uniform
    if k > 1:
        res = minimize(objective, uniform, jac=True, method="L-BFGS-B",
                       options={"maxiter": 2000, "gtol": 1e-10, "ftol": 1e-13})
        if np.isfinite(res.fun) and res.fun < objective(uniform)[0]:
            best = res.x
    e = np.exp(best - best.max())
    return total * e / e.sum()


#: The p of the smoothed max (Σ_S f_S^p)^{1/p}, raised in turn (each from the last solution).
MINIMAX_POWERS = (4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0)
#: Most measured marginals the SLSQP polish runs for (its dense QP is cubic in their number:
#: ~4 s for Adult's 105 2-way marginals on a loaded machine, minutes for its 455 3-way ones;
#: the smoothed max alone is within 1e-5 of the certified bound on both, docs/benchmarks.md).
SLSQP_MAX = 64
#: Most measured marginals for which, under pure ε, a start near each vertex is also tried.
PURE_STARTS = 16


@dataclass(frozen=True, eq=False)
class MinimaxProblem:
    """max_S f_S(c), f_S = w_S Var_S = w_S C[S]·(1/μ), μ = M u(c), for the released targets
    (w_S > 0), with u_A = 2c_A (ρ-zCDP) or c_A²/2 (pure ε) (:func:`minimax_precisions`)."""

    m: FloatArray  # M[B, A]
    wc: FloatArray  # w_S C[S, B], released targets only
    zcdp: bool

    @staticmethod
    def of(design: MarginalDesign, target_weights: npt.ArrayLike, zcdp: bool
           ) -> MinimaxProblem:
        w = np.asarray(target_weights, dtype=np.float64)
        _, m, c = design.coefficients()
        return MinimaxProblem(m, w[w > 0, None] * c[w > 0], zcdp)

    def mu(self, cost: FloatArray) -> FloatArray:
        return self.m @ (2.0 * cost if self.zcdp else 0.5 * cost * cost)

    def values(self, cost: FloatArray) -> FloatArray:
        """f_S(c) of every released target."""
        mu = self.mu(cost)
        return self.wc @ (1.0 / mu) if np.all(mu > 0) else np.full(len(self.wc), np.inf)

    def worst(self, cost: FloatArray) -> float:
        return float(np.max(self.values(cost)))

    def jacobian(self, cost: FloatArray, rows: FloatArray | None = None) -> FloatArray:
        """∂f_S/∂c_A = −Σ_B w_S C[S,B] M[B,A] u'(c_A)/μ_B² (``rows``: a combination λᵀ of the
        targets' rows instead of all of them)."""
        mu = self.mu(cost)
        du = np.full(len(cost), 2.0) if self.zcdp else cost
        wc = self.wc if rows is None else rows @ self.wc
        return -((wc / (mu * mu)) @ self.m) * du

    def lower_bound(self, cost: FloatArray, total: float) -> float:
        """A certified lower bound on min_c max_S f_S under ρ-zCDP (f_S convex): for any
        λ ∈ Δ, min max_S f_S ≥ min_c h_λ(c) with h_λ = Σ λ_S f_S, and ≥ h_λ(c') +
        min_A total·∂_A h_λ(c') − ∇h_λ(c')·c' (the Frank–Wolfe bound of a convex function on
        the simplex {c ≥ 0, Σ c = total}). The bound is linear in λ, so the best λ is the linear
        program  max λ·(f − Jc') + total·t  s.t.  t ≤ (Jᵀλ)_A, λ ∈ Δ  (J = ∂f/∂c at c').
        Equal to the minimax at its solution (KKT); not a bound under pure ε (not convex)."""
        return frank_wolfe_bound(self.values(cost), self.jacobian(cost), cost, total)


def _smoothed(problem: MinimaxProblem, start: FloatArray, total: float,
              powers: Sequence[float] = MINIMAX_POWERS) -> FloatArray:
    """L-BFGS on (1/p) log Σ_S f_S(c)^p over c = total·softmax(θ), p raised through
    ``powers`` (:data:`MINIMAX_POWERS`): the p-norm's minimiser c_p has max_S f_S(c_p) ≤
    m^{1/p} × the minimax (m targets), and each solve starts from the last."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    theta = np.log(np.maximum(start / total, 1e-300))
    for p in powers:

        def objective(th: FloatArray, p: float = p) -> tuple[float, FloatArray]:
            s = np.exp(th - th.max())
            s /= s.sum()
            cost = total * s
            f = problem.values(cost)
            if not np.all(np.isfinite(f)):
                return math.inf, np.zeros_like(th)
            lf = np.log(f)
            value = float(logsumexp(p * lf)) / p
            pi = np.exp(p * (lf - value))  # the weights of the smoothed max, Σ = 1
            g = problem.jacobian(cost, pi / f) * total
            return value, s * (g - float(s @ g))

        res = minimize(objective, theta, jac=True, method="L-BFGS-B",
                       options={"maxiter": 1000, "gtol": 1e-12, "ftol": 1e-15})
        if np.all(np.isfinite(res.x)) and res.fun <= objective(theta)[0]:
            theta = res.x
    s = np.exp(theta - theta.max())
    return total * s / s.sum()


def _polished(problem: MinimaxProblem, start: FloatArray, total: float) -> FloatArray:
    """SLSQP on the epigraph  min z  s.t.  f_S(c) ≤ z (every released target), Σ c = total,
    with the exact Jacobian, from ``start`` (:func:`~.epigraph.epigraph_minimax`)."""
    return total * epigraph_minimax(lambda x: problem.values(total * x),
                                    lambda x: problem.jacobian(total * x) * total,
                                    start / total, maxiter=500, ftol=1e-14)


def minimax_precisions(
    design: MarginalDesign, target_weights: npt.ArrayLike, *, zcdp: bool, total: float,
) -> FloatArray:
    r"""Per-measured-marginal costs c_A ≥ 0 with Σ c_A = ``total`` minimising the worst
    weighted cell max_S w_S Var_S (docs/theory.md §10.4): every cell of target S has the
    variance Var_S = C[S]·(1/μ), μ = M u (module docs), u_A = 2c_A (ρ-zCDP) or c_A²/2 (pure ε).
    A target of weight 0 is not released and constrains nothing.

    * ρ-zCDP: a **convex** program (1/μ_B is convex in c, μ linear, a max of sums of convex
      functions); its optimum is reached to ~1e-6 relative (checked against brute force and
      the certified bound :meth:`MinimaxProblem.lower_bound` in
      ``tests/strategy/test_objective.py``).
    * pure ε: **not convex** in general (1/μ_B = 1/(Σ M c²/2) is not convex on the simplex;
      e.g. one total count read from two 1-way marginals: the equal split is a saddle, the
      optimum measures one of them): the best local minimum from several starts (below), equal
      to brute force on the tests' small designs, without a guarantee in general.

    Method: the better of the total-optimal split (:func:`optimal_precisions`) and the equal
    split (pure ε: each of them, the ρ-zCDP minimax and up to :data:`PURE_STARTS` vertex
    starts) starts the smoothed max (:func:`_smoothed`, L-BFGS, O(targets × residuals) an
    evaluation); up to :data:`SLSQP_MAX` measured marginals its result is polished by SLSQP on
    the epigraph min z s.t. w_S Var_S ≤ z, Σ c = total (:func:`_polished`), mirroring
    :meth:`~.contrasts.ResidualContrasts.minimax_costs`. The best of all of these by the exact
    objective is returned, so it is never worse than the total-optimal or the equal split."""
    k = len(design.measured)
    even = np.full(k, total / k)
    w = np.asarray(target_weights, dtype=np.float64)
    if k == 1 or not np.any(w > 0):
        return even
    problem = MinimaxProblem.of(design, w, zcdp)
    starts = [optimal_precisions(design, w, zcdp=zcdp, total=total), even]
    if zcdp:
        starts = [min(starts, key=problem.worst)]
    else:  # not convex: a local search from each start, the ρ-zCDP minimax and (up to
        # PURE_STARTS marginals) each start moved half-way to one marginal's vertex (pure ε
        # favours few marginals: symmetric starts can sit on a saddle between vertices)
        starts.append(minimax_precisions(design, w, zcdp=True, total=total))
        if k <= PURE_STARTS:
            base = min(starts, key=problem.worst)
            starts += [0.5 * base + 0.5 * total * np.eye(k)[j] for j in range(k)]
    # (pure ε: the continuation starts at a larger p, which keeps each start's basin; every
    # local minimum is polished, not only the best)
    powers = MINIMAX_POWERS if zcdp else MINIMAX_POWERS[3:]
    found = starts + [_smoothed(problem, s, total, powers) for s in starts]
    if k <= SLSQP_MAX:
        found += [_polished(problem, s, total)
                  for s in ([min(found, key=problem.worst)] if zcdp else found)]
    return min(found, key=problem.worst)
