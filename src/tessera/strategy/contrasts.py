r"""Residual contrasts: ResidualPlanner's mechanism with integer queries and discrete noise
(docs/theory.md §10.6; Xiao, Kifer et al., NeurIPS 2023, "ResidualPlanner", §4–5).

Why. Measuring a marginal over a scope A with per-cell noise pays for every residual B ⊆ A
at the full cost of the marginal (:mod:`~.marginals`: 3.4% more error than ResidualPlanner on
Adult's 2-way marginals). ResidualPlanner measures each residual *alone*: the part of the
A-marginal orthogonal to every lower marginal, R_A x with R_A = ⊗_{i∈A} S_i ⊗_{i∉A} 1ᵀ
(S_i spans 1^⊥ over attribute i's n_i codes), with Gaussian noise of covariance σ_A² R_A R_Aᵀ;
it costs p_A/(2σ_A²), p_A = Π_{i∈A}(1 − 1/n_i) < 1, and measuring every residual of the
downward closure once is the optimal Gaussian linear mechanism for marginal workloads.

Integer contrasts. Tessera's noise is discrete (OpenDP's discrete Gaussian on integers), so the
residual is measured through integer rows: per attribute the Helmert contrasts
h_k = (1, …, 1, −k, 0, …, 0) (k ones, k = 1 … n−1; ‖h_k‖² = k(k+1), mutually orthogonal and
orthogonal to 1), each times an integer multiplier m_k ≈ Q/√(k(k+1)) so that the rows
g_k = m_k h_k have nearly equal norms (Q a power of two ≥ :data:`PRECISION` · n, halved for the
widest scopes until |Y_A| ≤ 2^62 holds for up to :data:`MAX_ROWS` rows; the multipliers
divided by their gcd). The residual A is measured as the integer vector
Y_A = (⊗_{i∈A} G_i) M_A (M_A the A-marginal, G_i the rows g_k of attribute i) plus i.i.d.
N_ℤ(0, S_A²) noise on every entry.

Privacy (add/remove neighbours). Adding or removing a row in cell j changes Y_A by the column
⊗_{i∈A} G_i e_{j_i}, whose squared L2 norm is Π_{i∈A} c_i(j_i), c_i(v) = Σ_k g_k[v]² — an
integer; so the release of Y_A has L2 sensitivity Δ_A with Δ_A² = Π_{i∈A} max_v c_i(v), exact,
and is Δ_A²/(2S_A²)-zCDP (Canonne, Kamath, Steinke 2020, Thm 4: the discrete Gaussian on an
integer query). Every row lies in one cell of each A-marginal and pays at most that much
through A, so the residuals compose like the cells of the marginal families they are charged
as: the strategy's measured workload is the marginal family of each residual scope (the
tautology for A = ∅) whose cells carry the cost ρ_A, and the plan's re-check and the ledger
see exactly Σ_A ρ_A per row (:func:`contrast_sigmas` turns each family's σ per unit
sensitivity into the σ of its contrasts, S_A = σ Δ_A, checked exactly).

Reconstruction (GLS, exact). The rows of one residual are orthogonal and the residual
subspaces are orthogonal and each measured once, so the generalised least-squares estimate of
the A-residual is Σ_r h_r (Y_r + Z_r)/(m_r ‖h_r‖²) and a target marginal T is
Σ_{A⊆T} (the A-residual broadcast over T∖A)/n_{T∖A}; unbiased, with per-cell variance

    Var_T(t) = Σ_{A⊆T} V_A Π_{i∈A} e_i(t_i) / n_{T∖A}²,   e_i(v) = Σ_k h_k[v]²/(m_k² ‖h_k‖⁴),

V_A the exact variance of N_ℤ(0, S_A²). Allocation: minimise Σ_T w_T Σ_t Var_T(t) =
Σ_A a_A S_A² (continuous model V_A = S_A²), a_A = Π_{i∈A} E_i · Σ_{T⊇A} w_T/n_{T∖A},
E_i = Σ_v e_i(v), subject to Σ_A Δ_A²/(2S_A²) = ρ: Lagrange gives ρ_A ∝ Δ_A √a_A, the total
(Σ_A Δ_A √a_A)²/(2ρ) — ResidualPlanner's closed form, exactly so when every c_i and e_i is
flat (binary attributes; within 0.1% per attribute at the default Q: :func:`efficiency`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np
import numpy.typing as npt

from tessera.errors import ResourceError, TesseraError
from tessera.strategy.epigraph import epigraph_minimax
from tessera.strategy.marginals import Scope, downward_closure, subsets

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Q ≥ PRECISION · n: the cost × variance of an attribute is then within 0.1% of the ideal
#: (:func:`efficiency`; ≈ 1 + 0.8 n/Q).
PRECISION = 1024
#: Rows a release may have for its contrasts to fit 64 bits (a public bound: Q is lowered for
#: scopes whose contrasts could exceed 2^62 at this many rows). Wider scopes pay for it: Adult's
#: 3-way marginals cost 1.0032 / 1.0072 / 1.0166 × ResidualPlanner's MAE at 2^24 / 2^28 / 2^31
#: rows (``bench/bench_strategy.py --part contrasts``); 2^28 (268 million) is above any table
#: the engines here count in one release.
MAX_ROWS = 2**28
#: Largest |contrast| the discrete Gaussian takes (OpenDP adds noise in i64; the mechanisms'
#: :data:`~tessera.mechanisms.batch.MAX_ABS_VALUE`).
MAX_ABS_CONTRAST = 2**62


@dataclass(frozen=True)
class AttributeContrasts:
    """The integer contrasts of one attribute with ``n`` codes at precision ``q`` (module
    docs; ``q`` = 0: the default, the power of two ≥ :data:`PRECISION` · n)."""

    n: int
    q: int = 0

    @property
    def precision(self) -> int:
        return self.q or default_precision(self.n)

    @cached_property
    def multipliers(self) -> IntArray:
        """m_k ≈ Q/√(k(k+1)), k = 1 … n−1, divided by their gcd."""
        if self.n < 2:
            return np.zeros(0, dtype=np.int64)
        k = np.arange(1, self.n, dtype=np.float64)
        m = np.maximum(1, np.rint(self.precision / np.sqrt(k * (k + 1)))).astype(np.int64)
        return m // np.gcd.reduce(m)

    @cached_property
    def helmert(self) -> IntArray:
        """H[k−1] = h_k = (1, …, 1, −k, 0, …): (n−1) × n."""
        n = self.n
        h = np.zeros((max(n - 1, 0), n), dtype=np.int64)
        for k in range(1, n):
            h[k - 1, :k] = 1
            h[k - 1, k] = -k
        return h

    @property
    def norms2(self) -> IntArray:
        """‖h_k‖² = k(k+1)."""
        k = np.arange(1, self.n, dtype=np.int64)
        return k * (k + 1)

    @cached_property
    def rows(self) -> IntArray:
        """G = diag(m) H, the integer rows measured."""
        return self.multipliers[:, None] * self.helmert

    @cached_property
    def column_norms2(self) -> list[int]:
        """c(v) = Σ_k g_k[v]² for every code v (exact Python integers)."""
        g = [[int(x) for x in row] for row in self.rows]
        return [sum(row[v] ** 2 for row in g) for v in range(self.n)]

    @property
    def sensitivity2(self) -> int:
        """max_v c(v): the squared L2 sensitivity of this attribute's factor."""
        return max(self.column_norms2)

    @cached_property
    def cell_variance(self) -> FloatArray:
        """e(v) = Σ_k h_k[v]²/(m_k² ‖h_k‖⁴): the residual estimate's variance at code v per
        unit noise variance."""
        w = 1.0 / (self.multipliers.astype(np.float64) ** 2 * self.norms2.astype(np.float64) ** 2)
        return (self.helmert.astype(np.float64) ** 2 * w[:, None]).sum(axis=0)

    @cached_property
    def inverse(self) -> FloatArray:
        """n × (n−1): noisy contrasts → the residual estimate, Hᵀ diag(1/(m_k ‖h_k‖²))."""
        scale = 1.0 / (self.multipliers.astype(np.float64) * self.norms2)
        return self.helmert.T.astype(np.float64) * scale[None, :]

    @property
    def max_abs(self) -> int:
        """max |g_k[v]|."""
        return int(np.abs(self.rows).max()) if self.n > 1 else 1


@functools.lru_cache(maxsize=1024)
def attribute_contrasts(n: int, q: int) -> AttributeContrasts:
    """One shared (cached) :class:`AttributeContrasts` per (n, Q)."""
    return AttributeContrasts(n, q)


def default_precision(n: int) -> int:
    """The power of two ≥ :data:`PRECISION` · n."""
    return 2 ** math.ceil(math.log2(PRECISION * n))


def efficiency(n: int, q: int = 0) -> float:
    """(max_v c(v) · Σ_v e(v)) / ((n−1)(1 − 1/n)): the factor by which this attribute's
    integer contrasts pay in cost × variance over ResidualPlanner's real-valued residual
    (1 exactly for n = 2)."""
    a = AttributeContrasts(n, q)
    return a.sensitivity2 * float(a.cell_variance.sum()) / ((n - 1) * (1.0 - 1.0 / n))


def apply_axes(tensor: npt.NDArray, matrices: Sequence[npt.NDArray]) -> npt.NDArray:
    """Multiply axis k of ``tensor`` by ``matrices[k]`` (out[..., i, ...] = Σ_j M[i, j] t[..., j,
    ...]); integer arrays stay integer (exact)."""
    out = tensor
    for axis, m in enumerate(matrices):
        out = np.moveaxis(np.tensordot(m, out, axes=([1], [axis])), 0, axis)
    return out


@dataclass(frozen=True)
class ResidualContrasts:
    """The residual scopes of a marginal workload (its downward closure, ∅ first), the
    contrasts of each, and the GLS back to the target marginals (module docs)."""

    sizes: Mapping[str, int]
    targets: tuple[Scope, ...]

    @cached_property
    def scopes(self) -> tuple[Scope, ...]:
        """Every residual the targets need (∅ first; smallest first). A scope with an attribute
        of one code has no residual (1^⊥ is {0} there): it is left out, and the targets over
        it read the residuals without that attribute (broadcast over its one code)."""
        return tuple(s for s in downward_closure(self.targets)
                     if all(self.sizes[a] > 1 for a in s))

    def parts(self, target: Scope) -> list[Scope]:
        """The residuals a target is the sum of: its subsets that have one."""
        have = set(self.scopes)
        return [a for a in subsets(target) if a in have]

    def factors(self, scope: Scope) -> tuple[AttributeContrasts, ...]:
        """Each attribute's contrasts in ``scope``: default precision, the largest halved
        while n · Π max|g_i| could exceed 2^62 at :data:`MAX_ROWS` rows."""
        qs = {a: default_precision(self.sizes[a]) for a in scope}
        while True:
            fs = tuple(attribute_contrasts(self.sizes[a], qs[a]) for a in scope)
            if MAX_ROWS * math.prod(f.max_abs for f in fs) <= MAX_ABS_CONTRAST:
                return fs
            widest = max(scope, key=lambda a: qs[a] / self.sizes[a])
            if qs[widest] <= self.sizes[widest]:
                raise ResourceError(
                    f"the residual contrasts over ({', '.join(scope)}) cannot fit 64 bits",
                    hint="use --strategy identity (marginals measured as counts)")
            qs[widest] //= 2

    def shape(self, scope: Scope) -> tuple[int, ...]:
        return tuple(self.sizes[a] for a in scope)

    def n_contrasts(self, scope: Scope) -> int:
        """Π_{i∈A} (n_i − 1) (1 for ∅)."""
        return math.prod(self.sizes[a] - 1 for a in scope)

    def sensitivity2(self, scope: Scope) -> int:
        """Δ_A² = Π_{i∈A} max_v c_i(v), exact (1 for ∅)."""
        return math.prod(f.sensitivity2 for f in self.factors(scope))

    def error_weights(self, target_weights: Sequence[float]) -> FloatArray:
        """a_A = Π_{i∈A} E_i · Σ_{T⊇A} w_T / n_{T∖A} for every residual scope."""
        out = np.zeros(len(self.scopes))
        for k, a in enumerate(self.scopes):
            e = math.prod(float(f.cell_variance.sum()) for f in self.factors(a))
            s = sum(w / math.prod(self.sizes[i] for i in t if i not in a)
                    for t, w in zip(self.targets, target_weights) if set(a) <= set(t))
            out[k] = e * s
        return out

    def optimal_costs(self, target_weights: Sequence[float], total: float) -> FloatArray:
        """ρ_A ∝ Δ_A √a_A, Σ ρ_A = ``total`` (module docs: the closed-form optimum)."""
        a = self.error_weights(target_weights)
        d = np.array([math.sqrt(self.sensitivity2(s)) for s in self.scopes])
        r = d * np.sqrt(a)
        return total * r / r.sum()

    def worst_cell_weights(self, target_weights: Sequence[float]) -> FloatArray:
        """K[T, A] = w_T Δ_A² max_t Π_{i∈A} e_i(t_i) / (2 n_{T∖A}²): the worst cell of target T
        has variance ≤ Σ_A K[T, A]/ρ_A (continuous model, σ_A² = Δ_A²/(2ρ_A); equal when
        the e_i are flat)."""
        k = np.zeros((len(self.targets), len(self.scopes)))
        index = {s: j for j, s in enumerate(self.scopes)}
        for t, (target, w) in enumerate(zip(self.targets, target_weights)):
            for a in self.parts(target):
                e = math.prod(float(f.cell_variance.max()) for f in self.factors(a))
                rest = math.prod(self.sizes[i] for i in target if i not in a)
                k[t, index[a]] = w * self.sensitivity2(a) * e / (2.0 * rest * rest)
        return k

    def minimax_costs(self, target_weights: Sequence[float], total: float) -> FloatArray:
        """ρ_A minimising max_T w_T Var_T(worst cell) subject to Σ ρ_A = ``total``: the convex
        program min z s.t. Σ_A K[T, A]/ρ_A ≤ z for every target (:meth:`worst_cell_weights`),
        by SLSQP from the total-optimal split, kept only where it lowers the objective (so never
        worse than that split for ``--objective max``)."""
        k = self.worst_cell_weights(target_weights)
        start = self.optimal_costs(target_weights, total)

        def worst(rho: FloatArray) -> float:
            return float(np.max(k @ (1.0 / rho)))

        rho = total * epigraph_minimax(
            lambda x: k @ (1.0 / (x * total)), lambda x: -k / (total * x * x)[None, :],
            start / total, maxiter=500, ftol=1e-12)
        return rho if worst(rho) < worst(start) else start

    # -- measuring ----------------------------------------------------------------------------
    def contrasts(self, scope: Scope, marginal: npt.ArrayLike) -> IntArray:
        """Y_A = (⊗_{i∈A} G_i) M_A, flattened row-major (exact int64; ``marginal``: the
        A-marginal's counts in row-major order of ``scope``)."""
        m = np.asarray(marginal, dtype=np.int64).reshape(self.shape(scope))
        return apply_axes(m, [f.rows for f in self.factors(scope)]).reshape(-1)

    @staticmethod
    def check_rows(n_rows: int) -> None:
        """Refuse (before any charge) more rows than the contrasts were sized for."""
        if n_rows > MAX_ROWS:
            raise ResourceError(
                f"{n_rows:,} rows: residual contrasts are sized for at most {MAX_ROWS:,} (their "
                "64-bit range)", hint="use --strategy identity (marginals measured as counts)")

    def split(self, noisy: npt.ArrayLike) -> dict[Scope, FloatArray]:
        """The concatenated contrasts (every residual's in turn, :attr:`scopes` order) per
        residual."""
        values = np.asarray(noisy, dtype=np.float64)
        ends = np.cumsum([self.n_contrasts(s) for s in self.scopes])
        if values.size != ends[-1]:
            raise ValueError(f"{values.size} noisy contrasts, the residuals have {ends[-1]}")
        return dict(zip(self.scopes, np.split(values, ends[:-1])))

    # -- reconstruction -----------------------------------------------------------------------
    def residual_estimate(self, scope: Scope, noisy: npt.ArrayLike) -> FloatArray:
        """The GLS estimate of the A-residual (a tensor over A's codes) from its noisy
        contrasts."""
        z = np.asarray(noisy, dtype=np.float64).reshape([self.sizes[a] - 1 for a in scope])
        return apply_axes(z, [f.inverse for f in self.factors(scope)])

    def reconstruct(self, noisy: Mapping[Scope, npt.ArrayLike]) -> dict[Scope, FloatArray]:
        """Every target marginal (tensor over its scope) from the noisy contrasts of every
        residual: Σ_{A⊆T} residual_A broadcast over T∖A, divided by n_{T∖A}."""
        res = {s: self.residual_estimate(s, noisy[s]) for s in self.scopes}
        out: dict[Scope, FloatArray] = {}
        for t in self.targets:
            est = np.zeros(self.shape(t))
            for a in self.parts(t):
                shape = [self.sizes[i] if i in a else 1 for i in t]
                rest = math.prod(self.sizes[i] for i in t if i not in a)
                est += res[a].reshape(shape) / rest
            out[t] = est
        return out

    def variances(self, noise_variance: Mapping[Scope, float]) -> dict[Scope, FloatArray]:
        """Var_T(t) of every cell of every target (module docs), from V_A per residual."""
        out: dict[Scope, FloatArray] = {}
        for t in self.targets:
            var = np.zeros(self.shape(t))
            for a in self.parts(t):
                term = np.ones([1] * len(t))
                for i, f in zip(a, self.factors(a)):
                    shape = [1] * len(t)
                    shape[t.index(i)] = self.sizes[i]
                    term = term * f.cell_variance.reshape(shape)
                rest = math.prod(self.sizes[i] for i in t if i not in a)
                var = var + noise_variance[a] * term / (rest * rest)
            out[t] = var
        return out


def contrast_sigma(unit_sigma: float, sensitivity2: int, cost: float) -> float:
    """S = σ·Δ rounded up, with Δ²/(2S²) ≤ ``cost`` checked exactly (``unit_sigma``: the plan's
    σ per unit L2 sensitivity; ``cost``: the plan's per-row cost of the family, rounded up)."""
    s = math.nextafter(math.nextafter(unit_sigma * math.sqrt(sensitivity2), math.inf), math.inf)
    if Fraction(sensitivity2) / (2 * Fraction(s) ** 2) > Fraction(cost):
        raise TesseraError("a contrast σ pays more than its family's cost: refusing to release")
    return s
