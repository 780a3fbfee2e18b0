r"""Generalised least squares for measured marginals, in the residual basis (docs/theory.md §10;
Xiao, Kifer et al., NeurIPS 2023, "ResidualPlanner", §4).

Setting. Attributes i with n_i codes; a marginal over a scope A (a set of attributes) is the
count vector Q_A x (n_A = Π_{i∈A} n_i cells), x the histogram over the full domain (N cells,
never built). A *design* measures marginals A ∈ 𝓜 with independent noise of per-cell
variance v_A (precision u_A = 1/v_A) and answers target marginals S ∈ 𝓦, each S ⊆ some A.

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

Scope = tuple[str, ...]
FloatArray = npt.NDArray[np.float64]


def subsets(scope: Scope) -> list[Scope]:
    """Every subset of ``scope`` (order kept), the empty one first."""
    return [c for k in range(len(scope) + 1) for c in itertools.combinations(scope, k)]


def downward_closure(scopes: Sequence[Scope]) -> tuple[Scope, ...]:
    """Every subset of every scope, smallest first (ties in first-seen order)."""
    seen: dict[Scope, None] = {}
    for s in scopes:
        for b in subsets(s):
            seen.setdefault(b, None)
    return tuple(sorted(seen, key=len))


@dataclass(frozen=True)
class MarginalDesign:
    """Measured scopes 𝓜 and target scopes 𝓦 (each target inside some measured scope) over
    attributes of the given sizes; scopes list attributes in one fixed (domain) order."""

    sizes: Mapping[str, int]
    measured: tuple[Scope, ...]
    targets: tuple[Scope, ...]

    def __post_init__(self) -> None:
        for s in self.targets:
            if not any(set(s) <= set(a) for a in self.measured):
                raise ValueError(f"target {s} lies in no measured scope")

    def cells(self, scope: Scope) -> int:
        return math.prod(self.sizes[a] for a in scope)

    @property
    def residuals(self) -> tuple[Scope, ...]:
        """The residual scopes B the targets need: the downward closure of the targets."""
        return downward_closure(self.targets)

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
