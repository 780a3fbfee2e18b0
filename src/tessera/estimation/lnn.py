r"""Non-negative, mutually consistent marginals from noisy marginal measurements: residual
reconstruction with local non-negativity, **GReM-LNN** (Mullins, Xiao, Kifer et al.,
"Efficient and private marginal reconstruction with local non-negativity", NeurIPS 2024, §4;
the residual basis of docs/theory.md §10 and :mod:`tessera.strategy.marginals`).

**Input.** Public attribute sizes n_i; noisy marginals y_A over measured scopes A, each cell
with independent noise of variance v_A (precision u_A = 1/v_A); target scopes S (each inside a
measured scope, up to attributes of one code, whose residuals are zero spaces). Nothing else:
this is post-processing, no sensitive value is read.

**Program.** With x the (never built) histogram, Q_S its S-marginal and
H = Σ_A u_A Q_AᵀQ_A the information of the measurements, the estimate is

    x* = argmin_x ½ (x − x̂)ᵀ H (x − x̂)   subject to   Q_S x ≥ 0 for every target S,

x̂ any GLS solution — equivalently min Σ_A u_A ‖Q_A x − y_A‖² (the Gaussian negative
log-likelihood of the measurements) under local non-negativity. Its answers Q_S x* are
consistent by construction (one x; every pair of targets agrees on shared sub-marginals and on
the total) and non-negative; they are unique (the objective is strictly convex in the
residuals the targets depend on). Where the GLS answers are already non-negative they are the
solution. The feasible set of the target marginals is the local polytope of relaxed marginal
consistency (McKenna, Pradhan, Sheldon, Miklau, NeurIPS 2021), so this is also their
least-squares estimator over it, in the measurements' own (GLS) metric.

**Residual form.** H has eigenvalue N μ_B on the range of Π_B, μ_B = Σ_{A⊇B} u_A/n_A. The
Lagrangian dual (multipliers λ_S ≥ 0, one per target cell) is, with
ρ_B = Σ_{S⊇B} P⊥_B(mean over S∖B of λ_S) a tensor over B,

    min_{λ≥0}  F(λ) = Σ_S ⟨λ_S, μ̂_S⟩ + ½ Σ_B ‖ρ_B‖² / (μ_B n_B),
    ∇_{λ_S} F = μ_S(λ) = μ̂_S + (1/n_S) Σ_{B⊆S} broadcast(ρ_B) / μ_B,

μ̂_S the GLS answers (:meth:`~tessera.strategy.marginals.MarginalDesign.reconstruct`) and
μ_S(λ) = Q_S x(λ), x(λ) = x̂ + H⁺ Σ_S Q_Sᵀ λ_S. Every evaluation costs O(Σ_S n_S 2^|S|) and
never touches the full domain. Complementary slackness: λ_S > 0 only on cells where μ_S = 0.
F is solved by L-BFGS-B with bounds λ ≥ 0, preconditioned by λ_S = z_S / Var_S (Var_S: the GLS
variance of a cell of S, the diagonal of F's Hessian Q H⁺ Qᵀ).

**Relation to the paper.** Mullins et al. weight the residual terms of their loss by a
heuristic scheme and solve their own way; here the weights are the measurements' exact
precisions (the loss is the Gaussian negative log-likelihood, so the estimate is the
likelihood maximiser under local non-negativity), and the solver is the bound-constrained dual
above. Neither their code nor their weights are reproduced.

**Exactness.** The solver stops at a tolerance, so μ(λ) may be slightly negative (−1e-6-ish
of a count). The returned answers are then the convex combination (1 − α) μ(λ) + α (T/n_S)
with the uniform marginals of the same total T and the least α making every cell ≥ 0: still
exactly consistent and the same total; α and the largest deficit are reported, never hidden.

>>> sizes = {"a": 2, "b": 2}
>>> m = [MarginalMeasurement(("a", "b"), np.array([5.0, -3.0, 2.0, 40.0]), 1.0)]
>>> est = estimate_marginals(sizes, m, [("a", "b")])
>>> bool(np.all(est.marginals[("a", "b")] >= 0))
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

from tessera.engine.threads import one_blas_thread
from tessera.strategy.marginals import (
    MarginalDesign,
    Scope,
    downward_closure,
    informative,
    subsets,
)

FloatArray = npt.NDArray[np.float64]
#: KKT residual (counts) below which a solver stop is accepted as the optimum.
KKT_TOL = 1e-3

#: The name of this reconstruction in releases and certificates.
NAME = ("GReM-LNN: least squares in the measurements' metric under local non-negativity "
        "(Mullins et al., NeurIPS 2024); consistent, non-negative, no proven interval")


@dataclass(frozen=True, eq=False)
class MarginalMeasurement:
    """A noisy marginal over ``scope`` (``values``: row-major over the scope's attributes in
    the order given) whose cells carry independent noise of variance ``variance``."""

    scope: Scope
    values: FloatArray
    variance: float


@dataclass(frozen=True, eq=False)
class ModelEstimate:
    """The estimate of every target marginal (tensors over the target's attributes), the GLS
    answers it started from, and how the solver ended."""

    marginals: dict[Scope, FloatArray]
    gls: dict[Scope, FloatArray]
    iterations: int
    converged: bool
    #: the largest negative cell before the exactness step (0: none), and that step's α
    deficit: float
    alpha: float
    total: float
    #: the KKT residual in counts: max over cells of |μ| where λ > 0 and of max(−μ, 0)
    kkt: float = 0.0
    message: str = field(default="")


def _combine(measurements: Sequence[MarginalMeasurement], sizes: Mapping[str, int]
             ) -> tuple[dict[Scope, FloatArray], dict[Scope, float]]:
    """Repeated measurements of one scope merged into their precision-weighted mean (the
    sufficient statistic: same GLS, same likelihood up to a constant)."""
    acc: dict[Scope, FloatArray] = {}
    prec: dict[Scope, float] = {}
    for m in measurements:
        shape = tuple(sizes[a] for a in m.scope)
        y = np.asarray(m.values, dtype=np.float64)
        if y.size != math.prod(shape):
            raise ValueError(f"measurement over {m.scope} has {y.size} values, expected "
                             f"{math.prod(shape)} (the product of its attributes' sizes)")
        if not (m.variance > 0 and math.isfinite(m.variance)):
            raise ValueError(f"measurement over {m.scope}: variance {m.variance} must be a "
                             "positive finite number")
        u = 1.0 / m.variance
        acc[m.scope] = acc.get(m.scope, 0.0) + u * y.reshape(shape)
        prec[m.scope] = prec.get(m.scope, 0.0) + u
    return {a: acc[a] / prec[a] for a in acc}, prec


class _Dual:
    """F(λ) and its gradient μ(λ) over the targets (module docs), on flat vectors."""

    def __init__(self, sizes: Mapping[str, int], targets: Sequence[Scope],
                 mu_b: Mapping[Scope, float], gls: Mapping[Scope, FloatArray]) -> None:
        self.sizes = sizes
        self.targets = list(targets)
        self.shapes = [tuple(sizes[a] for a in s) for s in self.targets]
        self.cells = [math.prod(sh) for sh in self.shapes]
        self.bounds = np.concatenate([[0], np.cumsum(self.cells)]).astype(np.int64)
        # (a residual over an attribute of one code is the zero space: ρ_B = 0 there, and it
        # has no μ_B — :mod:`tessera.strategy.marginals`)
        self.residuals = tuple(b for b in downward_closure(self.targets)
                               if informative(b, sizes) == b)
        self.mu_b = mu_b
        self.mu_hat = np.concatenate([gls[s].ravel() for s in self.targets])
        # (target index, residual, axes of S∖B, broadcast shape of B within S) per pair B ⊆ S
        self.pairs = []
        for j, s in enumerate(self.targets):
            for b in subsets(s):
                if informative(b, sizes) != b:
                    continue
                axes = tuple(k for k, a in enumerate(s) if a not in b)
                shape = tuple(sizes[a] if a in b else 1 for a in s)
                self.pairs.append((j, b, axes, shape))

    def split(self, v: FloatArray) -> list[FloatArray]:
        return [v[self.bounds[j]:self.bounds[j + 1]].reshape(self.shapes[j])
                for j in range(len(self.targets))]

    def rho(self, lam: FloatArray) -> dict[Scope, FloatArray]:
        parts = self.split(lam)
        out: dict[Scope, FloatArray] = {}
        for j, b, axes, _ in self.pairs:
            r = parts[j].mean(axis=axes) if axes else parts[j]
            out[b] = out[b] + r if b in out else np.array(r, dtype=np.float64)
        for r in out.values():
            for axis in range(r.ndim):
                r -= r.mean(axis=axis, keepdims=True)  # P⊥ along each axis of B
        return out

    def answers(self, rho: Mapping[Scope, FloatArray]) -> FloatArray:
        out = [np.zeros(sh) for sh in self.shapes]
        for j, b, _, shape in self.pairs:
            out[j] += rho[b].reshape(shape) / self.mu_b[b]
        corr = np.concatenate([o.ravel() / n for o, n in zip(out, self.cells)])
        return self.mu_hat + corr

    def value_grad(self, lam: FloatArray) -> tuple[float, FloatArray]:
        rho = self.rho(lam)
        quad = sum(float(np.sum(r * r)) / (self.mu_b[b] * r.size) for b, r in rho.items())
        return float(lam @ self.mu_hat) + 0.5 * quad, self.answers(rho)


def estimate_marginals(
    sizes: Mapping[str, int], measurements: Sequence[MarginalMeasurement],
    targets: Sequence[Scope], *, tol: float = 1e-7, max_iter: int = 5000,
) -> ModelEstimate:
    """GReM-LNN estimates of every target marginal from noisy marginal measurements (module
    docs): non-negative, consistent on every shared sub-marginal and on the total.

    ``sizes``: public attribute sizes; ``measurements``: noisy marginals with per-cell noise
    variances (a scope measured twice is merged by precision); ``targets``: scopes to
    estimate, each inside some measured scope. ``tol``: the solver's stopping tolerance on the
    projected gradient, in counts (a cell's complementary-slackness residual)."""
    if not measurements:
        raise ValueError("no measurements to estimate from")
    for m in measurements:
        unknown = [a for a in m.scope if a not in sizes]
        if unknown:
            raise ValueError(f"measurement over {m.scope}: unknown attribute {unknown[0]!r}")
    y, prec = _combine(measurements, sizes)
    targets = list(dict.fromkeys(tuple(s) for s in targets))
    design = MarginalDesign(dict(sizes), tuple(y), tuple(targets))  # checks coverage
    gls = design.reconstruct(y, prec)
    mu_b = design.mu(np.array([prec[a] for a in design.measured]))
    var = design.variances(np.array([prec[a] for a in design.measured]))
    return estimate_from_gls(sizes, targets, gls, mu_b, var, tol=tol, max_iter=max_iter)


@one_blas_thread
def estimate_from_gls(
    sizes: Mapping[str, int], targets: Sequence[Scope], gls: Mapping[Scope, FloatArray],
    mu_b: Mapping[Scope, float], variances: Sequence[float], *, tol: float = 1e-7,
    max_iter: int = 5000,
) -> ModelEstimate:
    """GReM-LNN from the GLS answers of the targets and the information μ_B of every residual
    B of their downward closure (module docs; ``variances``: a typical GLS variance of a cell
    of each target, the preconditioner). :func:`estimate_marginals` computes these from
    marginal measurements; residual contrasts (:mod:`tessera.strategy.contrasts`) give them
    directly."""
    targets = list(targets)
    var = list(variances)
    dual = _Dual(sizes, targets, mu_b, gls)
    scale = np.concatenate([np.full(n, 1.0 / v) for n, v in zip(dual.cells, var)])

    def fun(z: FloatArray) -> tuple[float, FloatArray]:
        f, g = dual.value_grad(scale * z)
        return f, scale * g

    z0 = np.zeros(dual.bounds[-1])
    if np.all(dual.mu_hat >= 0):  # GLS is feasible: it is the optimum
        mu, iters, ok, msg = dual.mu_hat.copy(), 0, True, "GLS answers already non-negative"
        kkt = 0.0
    else:
        # pgtol on z: |∂F/∂z| = scale·|μ| ≤ tol·scale  ⇔  |μ| ≤ tol on active cells
        res = minimize(fun, z0, jac=True, method="L-BFGS-B",
                       bounds=[(0.0, None)] * len(z0),
                       options={"maxiter": max_iter, "maxcor": 20, "ftol": 0.0,
                                "gtol": tol * float(scale.min())})
        mu = dual.answers(dual.rho(scale * res.x))
        kkt = float(max(np.max(np.abs(mu[res.x > 0]), initial=0.0),
                        np.max(-mu, initial=0.0)))
        # a line-search stop at machine precision ("ABNORMAL") with the KKT conditions met to
        # KKT_TOL counts is an optimum; anything else is reported as not converged
        iters, msg = int(res.nit), str(res.message)
        ok = bool(res.success) or kkt <= KKT_TOL
    parts = dual.split(mu)
    total = float(parts[0].sum())
    deficit = float(max(0.0, -mu.min()))
    alpha = 0.0
    if deficit > 0:
        uniform = np.concatenate([np.full(n, max(total, 0.0) / n) for n in dual.cells])
        neg = mu < 0
        # the least α, raised by 1e-9 relative so that rounding cannot leave a −1e-31
        alpha = min(1.0, float(np.max(-mu[neg] / (uniform[neg] - mu[neg]))) * (1 + 1e-9))
        mu = (1.0 - alpha) * mu + alpha * uniform
        parts = dual.split(mu)
    return ModelEstimate(
        marginals={s: p.copy() for s, p in zip(targets, parts)},
        gls={s: gls[s] for s in targets}, iterations=iters, converged=ok, deficit=deficit,
        alpha=alpha, total=total, kkt=kkt, message=msg)
