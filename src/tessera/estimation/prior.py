"""The final estimate as a posterior mode: a weakly informative Cauchy prior on the
interactions of the maximum-entropy model (docs/theory.md §5, "the final estimate").

**Why.** Maximum likelihood (Private-PGM's loss L, :mod:`tessera.estimation.maxent`) fits every
measured marginal as closely as the others allow. The interaction part of a marginal measured
once — what it says beyond its attributes' one-way marginals — is fitted exactly, noise and all,
and the model carries that noise into every marginal that shares its attributes; where a noisy
count is negative, the likelihood drives the cell's probability to 0 and θ towards −∞. With
little budget that is most of the error: NLTCS 3-way at ε = 0.1, the first rounds measure
cells of ≈ 2,700 rows with noise of sd ≈ 950, and the marginals a run measured end up *worse*
in the maximum-likelihood model than those it never measured (0.0761 against 0.0727 L1,
seed 0; docs/theory.md §5, "the final estimate").

**The estimator.** With θ the model's log-potentials (one table θ_s per model scope s, then the
weights of wide queries) and M the projection of each table onto its interactions — θ_s minus
its main effects, the ANOVA decomposition under uniform weights on the table's cells:
(M θ)_s[x] = θ_s[x] − Σ_{a∈s} θ̄_{s,a}[x_a] + (|s| − 1) θ̄_s, θ̄_{s,a} the mean over the other
attributes, θ̄_s the table's mean — the posterior mode minimises

    F(θ) = L(μ(θ)) + Σ_i log(1 + (M θ)_i² / s²),

a flat prior on the one-way parts (main effects, and the wide queries' weights) and a Cauchy
(0, s) penalty on every cell of every table's interaction part, s = 2.5 (:data:`PRIOR_SCALE`):
the default prior that Gelman, Jakulin, Pittau and Su recommend for logistic-regression
coefficients ("A weakly informative default prior distribution for logistic and other
regression models", Ann. Appl. Stat. 2(4), 2008). Near 0 it pulls like N(0, s²/2): the
interactions that only noise supports shrink. Its tails are heavy: the interactions the data
do support stay — a structural zero (Adult: a wife who is male) needs |θ| of 10–20, which a
Gaussian prior of the same scale refuses, pouring rows into impossible cells (Adult 2-way,
ε = 1, the same runs: 1.03–1.63× the likelihood's error with N(0, 2.5²) by the steps allowed,
0.97–1.00× with the Cauchy). The likelihood's weight is ≈ N² μ(1 − μ)/σ² per cell: tens on
NLTCS ε = 0.1's typical cells, thousands from ε = 1 on, and ≈ 0 on the cells it drove towards
probability 0 — where the prior acts.

**The computation.** ∇F = J ∇_μ L + M (2 m / (s² + m²)) with m = M θ (M is symmetric) and
J = ∂μ/∂θ the model's Fisher matrix (the covariance of its features: symmetric), so
J v = d/dt μ(θ + t v) at t = 0, taken by central differences (two engine passes; step h with
h·max|v| = 10⁻⁴: truncation error O(h²), rounding O(10⁻¹²)). F is minimised by L-BFGS
(scipy) from two starts (:func:`posterior_mode`). Nothing new enters the model, only its θ
moves.

Everything here is post-processing of the noisy measurements: no sensitive value is read.

>>> import numpy as np
>>> from tessera.estimation.maxent import GroupMeasurement, ScopeModel, fit
>>> from tessera.schema.domain import Domain
>>> model = ScopeModel(Domain.from_dict({"a": 2, "b": 2}), [(0, 1)])
>>> noisy = [GroupMeasurement((0, 1), np.array([60.0, -20.0, 10.0, 50.0]), 30.0)]
>>> mle = fit(model, noisy, 100.0, iterations=2000)
>>> post = posterior_mode(model, noisy, 100.0)
>>> bool(abs(interactions(model, post.theta)).sum() < abs(interactions(model, mle.theta)).sum())
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy.optimize import OptimizeResult, minimize

from tessera.engine.threads import one_blas_thread
from tessera.estimation.maxent import (
    FitResult,
    GaussianLoss,
    GroupMeasurement,
    ScopeModel,
    initial_step,
)

__all__ = ["PRIOR_SCALE", "interactions", "posterior_mode"]

FloatArray = npt.NDArray[np.float64]

#: The Cauchy prior's scale on every cell of a table's interaction part (module docstring:
#: Gelman et al. 2008's default for logistic-regression coefficients).
PRIOR_SCALE = 2.5
#: The central difference's step, relative to the direction's largest entry.
_DIFFERENCE_STEP = 1e-4
#: L-BFGS steps each start gets before the better one goes on (50 chose the likelihood's θ at
#: NLTCS ε = 1, which then stalled at F = 208 where 0 reaches 117), and L-BFGS's memory:
#: scipy's default 10. Memory 50 needs fewer steps to converge (768 against 1,362: NLTCS 3-way,
#: ε = 0.1), but each step's own work grows with the memory times the model's size, and the
#: engine passes are capped (``passes``): profiled on movielens at ε = 1, L-BFGS-B's update
#: took 18 of the run's 64 s at 50 and 1.4 of 22 s at 10. Paired seeded runs over the panel
#: (docs/benchmarks.md, "What each default contributes"): movielens at ε = 1 0.934 ± 0.020 at
#: 10 against 50, every other table and budget within 0.5 %; off the panel, within 2 % (the
#: held-out table at ε = 1: 1.020 ± 0.013 over 8 seeds, one of them 1.11).
_TRIAL = 300
_MEMORY = 10


def interactions(model: ScopeModel, theta: FloatArray) -> FloatArray:
    """M θ: every table minus its main effects (module docstring), the wide queries' weights
    zero. An orthogonal projection (symmetric, idempotent), so ∇ ½‖M θ‖² = M θ.

    >>> from tessera.schema.domain import Domain
    >>> m = ScopeModel(Domain.from_dict({"a": 2, "b": 3}), [(0,), (0, 1)])
    >>> theta = np.array([5.0, -1.0, 1.0, 2.0, 3.0, 2.0, 3.0, 4.0])  # additive: no interaction
    >>> interactions(m, theta).round(12).tolist()
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    """
    out = np.zeros_like(theta)
    for k, shape in enumerate(model.shapes):
        if len(shape) < 2:
            continue  # a one-way table is all main effect
        lo, hi = model.offsets[k], model.offsets[k + 1]
        t = theta[lo:hi].reshape(shape)
        mean = t.mean()
        r = t - mean
        for axis in range(len(shape)):
            others = tuple(j for j in range(len(shape)) if j != axis)
            r = r - (t.mean(axis=others, keepdims=True) - mean)
        out[lo:hi] = r.reshape(-1)
    return out


@one_blas_thread
def posterior_mode(model: ScopeModel, measurements: Sequence[GroupMeasurement], total: float,
                   *, scale: float = PRIOR_SCALE, likelihood: FloatArray | None = None,
                   iterations: int = 1000, passes: int | None = None,
                   tolerance: float = 1e-10) -> FitResult:
    """argmin_θ L(μ(θ)) + Σ_i log(1 + (M θ)_i²/``scale``²) (module docstring) by L-BFGS (memory
    10), stopping when F falls by less than ``tolerance`` relative; the result's ``loss`` is F.

    The start: θ = 0 (the prior's mode, the uniform distribution) and, when given, the
    maximum-likelihood θ (``likelihood``) each get 300 steps, and the one that got lower goes
    on to ``iterations`` in all; ``passes`` caps the engine passes (three an evaluation; half
    of them for the trials). F is not convex in θ, and each start stalls where the other
    does not. Where noisy counts are negative, the likelihood drives those cells'
    probabilities to 0 and θ towards −∞ along directions it barely constrains (NLTCS 3-way,
    ε = 0.1, seed 0: ‖M θ‖² = 1.6·10⁵ at the maximum-likelihood θ); L-BFGS from there is at
    F = 587 after 1,000 steps, from 0 it converges to F = 91.2 in 1,576. Where the measurements
    are precise, 0 is far and the likelihood's θ close (docs/theory.md §5, "the final estimate")."""
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"the prior's scale must be a finite number > 0, got {scale!r}")
    loss_of = GaussianLoss(model, measurements, total)
    precision = 1.0 / (scale * scale)
    calls = 0

    def marginals(theta: FloatArray) -> FloatArray:
        nonlocal calls
        calls += 1
        return model.marginals(theta)

    def objective(theta: FloatArray) -> tuple[float, FloatArray]:
        mu = marginals(theta)
        loss, g_mu = loss_of(mu)
        reach = float(np.max(np.abs(g_mu)))
        if reach > 0:  # J g_mu by central differences (J is symmetric)
            h = _DIFFERENCE_STEP / reach
            jg = (marginals(theta + h * g_mu) - marginals(theta - h * g_mu)) / (2 * h)
        else:
            jg = np.zeros_like(theta)
        m = interactions(model, theta)
        q = m * m * precision
        return (loss + float(np.sum(np.log1p(q))),
                jg + interactions(model, 2.0 * precision * m / (1.0 + q)))

    # every evaluation is three engine passes; ``passes`` caps them all (the trials included)
    evaluations = math.inf if passes is None else max(passes // 3, 2)

    def descend(start: FloatArray, steps: int, most: float) -> OptimizeResult:
        options = {"maxiter": steps, "ftol": tolerance, "gtol": 0.0, "maxcor": _MEMORY}
        if math.isfinite(most):
            options["maxfun"] = max(int(most), 1)
        return minimize(objective, np.asarray(start, dtype=np.float64), jac=True,
                        method="L-BFGS-B", options=options)

    trial = min(_TRIAL, iterations)
    starts = 1 if likelihood is None else 2
    best = descend(model.zero(), trial, evaluations / (2 * starts))
    used = best.nfev
    if likelihood is not None:  # the start whose trial got lower goes on
        other = descend(likelihood, trial, evaluations / (2 * starts))
        used += other.nfev
        if other.fun < best.fun:
            best = other
    if iterations > trial and best.nit >= trial and evaluations - used >= 1:
        best = descend(best.x, iterations - trial, evaluations - used)
    theta = np.asarray(best.x, dtype=np.float64)
    return FitResult(theta, marginals(theta), float(best.fun), initial_step(measurements, total),
                     int(best.nit), calls)
