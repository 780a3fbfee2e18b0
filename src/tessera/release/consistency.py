r"""Post-processing by least-squares consistency (free in privacy), and clipping/rounding.

The release adds independent zero-mean noise z_q with known variance v_q to each true answer
a_q: â = a + z, Cov z = V = diag(v). :func:`consistent_answers` replaces â by

    a* = P â,   P = the V⁻¹-orthogonal projector onto a subspace 𝒮 ⊆ ℝᵗ that contains a,

i.e. a* = argmin_{y ∈ 𝒮} Σ_q (y_q − â_q)²/v_q. It reads only the noisy answers, their variances
and the public workload and domain, so it is post-processing and costs no privacy
(docs/theory.md §3.1: "post-processing preserves every definition"; the variances come from the
public noise plan and the mechanisms of §7). This is the consistency step of Hay, Rastogi,
Miklau and Suciu, "Boosting the accuracy of differentially private histograms through
consistency", PVLDB 3(1), 2010, arXiv:0904.0942, for arbitrary predicate workloads, and the
weighted least-squares form of the mutual consistency of overlapping marginals in Qardaji,
Yang and Li, "PriView: practical differentially private release of marginal contingency
tables", SIGMOD 2014.

**Theorem (error never grows; it shrinks by dim 𝒮 / t on average).** Let a ∈ 𝒮, E z = 0,
Cov z = V = diag(v) ≻ 0, W = V⁻¹, t the number of released queries, ‖y‖²_W = Σ_q y_q²/v_q,
and P the W-orthogonal projector onto 𝒮 (P² = P, WP = PᵀW). Then

1. a* − a = P z: E a* = a (unbiased), and ‖a* − a‖_W ≤ ‖â − a‖_W for every noise draw;
2. E ‖a* − a‖²_W = tr(P) = dim 𝒮 ≤ t = E ‖â − a‖²_W;
3. Cov a* = PV ⪯ V: no single query's variance grows (a* is the Gauss–Markov BLUE).

*Proof.* 1: a ∈ 𝒮 gives Pa = a, so a* − a = P(a + z) − a = Pz, and E Pz = 0. z = Pz + (I−P)z
is a W-orthogonal split (WP = PᵀW and P² = P give Pᵀ W (I−P) = WP(I−P) = 0), so
‖z‖²_W = ‖Pz‖²_W + ‖(I−P)z‖²_W ≥ ‖Pz‖²_W. 2: E ‖Pz‖²_W = E zᵀPᵀWPz = tr(PᵀWP V) and
PᵀWP = WPP = WP, so the expectation is tr(WPV) = tr(PVW) = tr(P); an idempotent matrix has
trace = rank = dim 𝒮; without projection, E zᵀWz = tr(WV) = t. 3: WP = PᵀW gives PV = VPᵀ, so
Cov Pz = PVPᵀ = PPV = PV and V − PV = (I−P)V(I−P)ᵀ ⪰ 0. ∎ Only the first two moments of z
enter: this holds for discrete Laplace and discrete Gaussian noise alike.

**The subspace: local consistency.** For every scope S of the workload (the attributes its
queries constrain, :meth:`~tessera.workload.Workload.scopes`) take a vector h_S over the cells
of S's grid, the product over a ∈ S of the elementary segments of a (the codes of a cut at every
predicate boundary on a in the whole workload: the value classes in code order, so every
predicate is a union of segments and q's answer is Σ_{cells in C_q} h_S[cell]); require that
for every two scopes S, S' the marginals of h_S and h_{S'} on T = S ∩ S' agree (T = ∅: the
totals agree). 𝒮 is the set of answer vectors of such families; the true data's marginals form
one, so a ∈ 𝒮.

**Eliminating the constraints exactly (Fourier / ANOVA basis).** Per attribute a with codes
0..n_a−1 take the basis u_a = 𝟙/n_a and d_{a,β} = e_{β−1} − e_β (β = 1..n_a−1) of ℝ^{n_a}: the
d's span the sum-zero vectors and u_a sums to 1. Every h_S splits uniquely as
h_S = Σ_{U⊆S} (⊗_{a∈U} D_a) θ_{S,U} ⊗ (⊗_{b∈S∖U} u_b), and marginalising onto T ⊆ S keeps
exactly the terms U ⊆ T (a sum-zero factor sums to 0, u_b sums to 1). Hence the marginals on
S ∩ S' agree iff θ_{S,U} = θ_{S',U} for all U ⊆ S ∩ S': the consistent families are exactly
h_S = Σ_{U⊆S} (⊗D) θ_U ⊗ (⊗u) with one free tensor θ_U per U in the down-closure Δ of the
scopes (the Fourier parametrisation of Barak, Chaudhuri, Dwork, Kale, McSherry, Talwar,
"Privacy, accuracy, and consistency too", PODS 2007), of dimension
Σ_{U∈Δ} ∏_{a∈U} (n_a − 1) (= the cell count minus the number of independent constraints,
counted on segments). The same θ define one signed histogram x = Σ_U (⊗D)θ_U ⊗ (⊗u) over the
whole domain whose marginals are the h_S, so **local = global consistency for signed vectors**:
𝒮 = {Q x : x ∈ ℝ^𝔻} = range of the workload matrix, the smallest subspace guaranteed to contain
a (the local/marginal polytope gap of cyclic scope sets only appears with non-negativity).

In this basis query q's answer is Σ_{U⊆scope(q)} Σ_β θ_U[β] ∏_{a∈U} c_{q,a,β_a}
∏_{b∈scope(q)∖U} |φ_{q,b}|/n_b with c_{q,a,β} = [β−1 ∈ φ_{q,a}] − [β ∈ φ_{q,a}] ∈ {0, ±1},
non-zero only at the ends of φ_{q,a}'s spans. So the design matrix A (a = Aθ) has
∏_a (1 + #span ends of φ_{q,a}) non-zeros per row (9 for a 2-way cell), it is built from the
predicates' spans without ever enumerating a cell, and only the θ-coordinates some query sees
are unknowns (the others do not change any answer). Then 𝒮 = range A, dim 𝒮 = rank A, and

    a* = A θ̂,   θ̂ ∈ argmin_θ ‖W^{1/2}(Aθ − â)‖²,

solved with a sparse factorisation of the Jacobi-scaled normal matrix N = ÃᵀÃ plus λI
(λ = 1e-10, only so that the singular N of a rank-deficient A factorises) followed by
iterative refinement on the true residual, θ ← θ + (N + λI)⁻¹ Ãᵀ(b − Ãθ), which converges
to the exact least-squares solution: each step multiplies the error along an eigenvalue s > 0
of N by λ/(s + λ), and the null directions of N never enter (Ãᵀ maps into range N) and do not
change Aθ. rank A is counted by Sylvester's law of inertia: the number of eigenvalues of the
Jacobi-scaled unweighted Gram matrix below μ = 1e-9 is the number of negative pivots of its
symmetric LDLᵀ factorisation shifted by −μ (rank A does not depend on the weights).

Queries with v_q = ∞ (not released) are left out of the objective and of t, and their output
is NaN (never a number that was not released). Contradictions (coverage ∅) answer 0 exactly.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, combinations

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.sparse.linalg import splu

from tessera.workload import Workload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Default bound on the unknowns (coordinates of the consistent scope grids some query sees).
DEFAULT_MAX_CELLS = 2_000_000
#: Default bound on the unknowns one scope's queries see.
DEFAULT_MAX_SCOPE_CELLS = 200_000
#: Default bound on the non-zeros of the design matrix.
DEFAULT_MAX_NONZEROS = 20_000_000

#: Tikhonov shift of the scaled normal matrix (removed by iterative refinement).
_LAMBDA = 1e-10
#: Eigenvalues of the (unit-column) Gram matrix below this count as zero: the rank tolerance.
_RANK_TOL = 1e-9
_MAX_REFINE = 60
_REFINE_TOL = 1e-13
_MAX_PEEL = 64
#: Gram matrices up to this order are eigendecomposed densely.
_DENSE = 2000
_KEY_LIMIT = 1 << 62


@dataclass(frozen=True)
class Consistency:
    """The result of :func:`consistent_answers`.

    ``answers``: a* (same shape as the noisy input; NaN for unreleased queries); ``applied``:
    whether the projection was computed (else the released answers come back unchanged and
    ``note`` says why); ``n_cells``: cells of the scope grids (Σ_S ∏_{a∈S} segments of a);
    ``n_constraints``: independent marginal-agreement constraints among them (eliminated
    exactly); ``n_unknowns``: coordinates of the consistent grids that some query sees;
    ``dimension``: dim 𝒮 = rank of the design; ``n_released``: t.
    """

    answers: FloatArray
    applied: bool
    note: str
    n_cells: int
    n_constraints: int
    dimension: int
    n_released: int
    n_unknowns: int = 0

    @property
    def error_factor(self) -> float:
        """dim 𝒮 / t: E‖a* − a‖²_W / E‖â − a‖²_W (theorem in the module docs)."""
        return self.dimension / self.n_released if self.n_released else 1.0


def round_nonnegative(values: npt.ArrayLike) -> FloatArray:
    """Clip at 0 and round to the nearest integer (NaN stays NaN).

    Post-processing, so free in privacy, and it never increases |y − a| for a true count
    a ≥ 0 when clipping; but it is **biased**: E max(0, â) > a near 0 (for a = 0 the clipped
    symmetric noise has mean E|z|/2 > 0), and rounding discards the exact linear relations that
    :func:`consistent_answers` restores. Apply it last, if at all.
    """
    arr = np.asarray(values, dtype=np.float64)
    return np.rint(np.where(np.isnan(arr), np.nan, np.maximum(arr, 0.0)))


def consistent_answers(
    workload: Workload,
    noisy: npt.ArrayLike,
    variances: npt.ArrayLike,
    *,
    max_cells: int = DEFAULT_MAX_CELLS,
    max_scope_cells: int = DEFAULT_MAX_SCOPE_CELLS,
    max_nonzeros: int = DEFAULT_MAX_NONZEROS,
) -> Consistency:
    """The V⁻¹-orthogonal projection of ``noisy`` onto the locally consistent answers.

    ``noisy``: shape (t,) or (t, k) (k noise draws projected at once, same variances);
    ``variances``: v_q > 0, ``inf`` for a query that was not released. Refuses (returns the
    released answers unchanged with ``applied=False`` and a note naming the scope) when the
    unknowns exceed ``max_cells``, one scope's exceed ``max_scope_cells``, or the design's
    non-zeros exceed ``max_nonzeros``. See the module docs for the math.
    """
    t = len(workload)
    y = np.array(noisy, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)
    if y.ndim not in (1, 2) or y.shape[0] != t:
        raise ValueError(f"noisy must have shape ({t},) or ({t}, k), got {y.shape}")
    if v.shape != (t,):
        raise ValueError(f"variances must have shape ({t},), got {v.shape}")
    if np.isnan(v).any() or (v <= 0).any():
        raise ValueError("variances must be > 0 (inf for a query that was not released)")
    released = np.isfinite(v)
    if not np.isfinite(y[released]).all():
        raise ValueError("every released answer must be a finite number")
    y[~released] = np.nan
    n_rel = int(released.sum())

    design = _design(workload, released, max_cells, max_scope_cells, max_nonzeros)
    if design.refusal:
        return Consistency(y, False, f"consistency not applied: {design.refusal}",
                           design.n_cells, design.n_constraints, n_rel, n_rel, design.n_unknowns)
    out = y.copy()
    rows = design.rows  # released queries with a non-zero design row
    out[design.zero_rows] = 0.0  # contradictions: the answer is 0 on every data set
    dimension, note = 0, ""
    if len(rows):
        solution = _solve(design.matrix, 1.0 / v[rows], y[rows], max_nonzeros)
        if solution.refusal:
            return Consistency(y, False, f"consistency not applied: {solution.refusal}",
                               design.n_cells, design.n_constraints, n_rel, n_rel,
                               design.n_unknowns)
        out[rows] = solution.fitted
        dimension = solution.rank
        if not solution.converged:
            note = ("least-squares consistency applied, but iterative refinement stopped "
                    f"above {_REFINE_TOL:g} (a nearly rank-deficient design): a* is approximate")
    note = note or (
        f"least-squares consistency (post-processing, no privacy cost): {n_rel} released "
        f"answers projected onto a {dimension}-dimensional consistent subspace; expected "
        f"weighted squared error × {dimension / max(n_rel, 1):.3g}"
    )
    return Consistency(out, True, note, design.n_cells, design.n_constraints, dimension, n_rel,
                       design.n_unknowns)


# -- the design matrix ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Design:
    matrix: sp.csr_matrix  # (len(rows), n_unknowns)
    rows: IntArray  # workload indices of its rows
    zero_rows: IntArray  # released contradictions
    n_cells: int
    n_constraints: int
    n_unknowns: int
    refusal: str = ""


@dataclass(frozen=True)
class _Attribute:
    """The predicates of one attribute in one scope group, one row per query of the group."""

    size: int
    fraction: FloatArray  # |φ_q| / n
    count: IntArray  # span ends strictly inside (0, n) per query
    start: IntArray  # offset of query r's ends in ``position``/``sign``
    position: IntArray  # β of each end (1..n−1), grouped by query
    sign: FloatArray  # c_{q,β}: −1 at a span's start, +1 at its end


def _attribute(size: int, spans_per_query: Sequence[tuple[tuple[int, int], ...]]) -> _Attribute:
    m = len(spans_per_query)
    n_spans = np.fromiter(map(len, spans_per_query), dtype=np.int64, count=m)
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(spans_per_query)),
                       dtype=np.int64, count=2 * int(n_spans.sum())).reshape(-1, 2)
    flat = np.clip(flat, 0, size)
    owner = np.repeat(np.arange(m, dtype=np.int64), n_spans)
    covered = np.bincount(owner, weights=(flat[:, 1] - flat[:, 0]).astype(np.float64),
                          minlength=m)
    lo_in = (flat[:, 0] > 0) & (flat[:, 0] < flat[:, 1])
    hi_in = (flat[:, 1] < size) & (flat[:, 0] < flat[:, 1])
    pos = np.concatenate([flat[lo_in, 0], flat[hi_in, 1]])
    sign = np.concatenate([-np.ones(int(lo_in.sum())), np.ones(int(hi_in.sum()))])
    who = np.concatenate([owner[lo_in], owner[hi_in]])
    order = np.lexsort((pos, who))
    count = np.bincount(who, minlength=m).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    return _Attribute(size, covered / size, count, start, pos[order], sign[order])


def _expand(
    rows: IntArray, values: FloatArray, coords: list[IntArray], attr: _Attribute
) -> tuple[IntArray, FloatArray, list[IntArray]]:
    """Every entry (row, value, coords) times every span end of its row on ``attr``."""
    rep = attr.count[rows]
    total = int(rep.sum())
    first = np.repeat(np.cumsum(rep) - rep, rep)
    index = np.repeat(attr.start[rows], rep) + (np.arange(total, dtype=np.int64) - first)
    return (np.repeat(rows, rep), np.repeat(values, rep) * attr.sign[index],
            [np.repeat(c, rep) for c in coords] + [attr.position[index] - 1])


def _design(
    workload: Workload,
    released: npt.NDArray[np.bool_],
    max_cells: int,
    max_scope_cells: int,
    max_nonzeros: int,
) -> _Design:
    domain = workload.domain
    groups: dict[tuple[str, ...], list[int]] = {}
    for i in np.flatnonzero(released):
        q = workload.queries[i]
        groups.setdefault(q.scope, []).append(int(i))
    empty = {i for idx in groups.values() for i in idx
             if any(not p.coverage.spans for p in workload.queries[i].predicates)}
    zero_rows = np.asarray(sorted(empty), dtype=np.int64)
    live = {s: [i for i in idx if i not in empty] for s, idx in groups.items()}
    live = {s: idx for s, idx in live.items() if idx}
    order = sorted(live, key=lambda s: (len(s), [domain.index(a) for a in s]))
    rows = np.asarray([i for s in order for i in live[s]], dtype=np.int64)
    row_base = np.cumsum([0] + [len(live[s]) for s in order])

    attrs: dict[tuple[str, ...], list[_Attribute]] = {}
    boundaries: dict[str, set[int]] = defaultdict(set)
    entries_per_scope: dict[tuple[str, ...], int] = {}
    for s in order:
        idx = live[s]
        per = []
        for j, name in enumerate(s):
            spans = [workload.queries[i].predicates[j].coverage.spans for i in idx]
            at = _attribute(domain[name].size, spans)
            boundaries[name].update(np.unique(at.position).tolist())
            per.append(at)
        attrs[s] = per
        entries_per_scope[s] = int(np.prod([1 + a.count for a in per], axis=0).sum()) if per \
            else len(idx)

    # the scope grids of the brief's formulation, reported (never built)
    segments = {name: len(b) + 1 for name, b in boundaries.items()}
    n_cells = sum(math.prod(segments[a] for a in s) for s in groups)
    closure = {u for s in groups for k in range(len(s) + 1) for u in combinations(s, k)}
    free = sum(math.prod(segments[a] - 1 for a in u) for u in closure)
    n_constraints = n_cells - free

    def refuse(reason: str, n_unknowns: int = 0) -> _Design:
        return _Design(sp.csr_matrix((0, 0)), rows, zero_rows, n_cells, n_constraints,
                       n_unknowns, reason)

    n_entries = sum(entries_per_scope.values())
    if n_entries > max_nonzeros:
        worst = max(entries_per_scope, key=entries_per_scope.__getitem__)
        return refuse(f"the design would have {n_entries:,} non-zeros (limit {max_nonzeros:,}); "
                      f"the largest share, {entries_per_scope[worst]:,}, comes from scope "
                      f"{_name(worst)}")

    # entries (row, U, coordinates of θ_U, value), collected per U across scopes
    by_subset: dict[tuple[str, ...], list[tuple[IntArray, FloatArray, IntArray]]] = \
        defaultdict(list)
    scope_unknowns: dict[tuple[str, ...], int] = {}
    for g, s in enumerate(order):
        per = attrs[s]
        m = len(live[s])
        base = np.arange(m, dtype=np.int64)
        seen = 0
        for k in range(len(s) + 1):
            for sub in combinations(range(len(s)), k):
                values = np.ones(m)
                for j in range(len(s)):
                    if j not in sub:
                        values = values * per[j].fraction
                r, val, coords = base, values, []
                for j in sub:
                    r, val, coords = _expand(r, val, coords, per[j])
                keep = val != 0
                key = _key([c[keep] for c in coords], [per[j].size - 1 for j in sub],
                           int(keep.sum()))
                u = tuple(s[j] for j in sub)
                by_subset[u].append((r[keep] + row_base[g], val[keep], key))
                seen += len(np.unique(key, axis=0))
        scope_unknowns[s] = seen
        if seen > max_scope_cells:
            return refuse(f"scope {_name(s)} alone has {seen:,} unknowns "
                          f"(limit {max_scope_cells:,})", seen)

    all_rows, all_cols, all_vals = [], [], []
    offset = 0
    for parts in by_subset.values():
        keys = np.concatenate([p[2] for p in parts])
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        all_rows.extend(p[0] for p in parts)
        all_vals.extend(p[1] for p in parts)
        all_cols.append(inverse.ravel() + offset)
        offset += len(uniq)
    if offset > max_cells:
        worst = max(scope_unknowns, key=scope_unknowns.__getitem__)
        return refuse(f"{offset:,} unknowns (limit {max_cells:,}); the largest scope is "
                      f"{_name(worst)} with {scope_unknowns[worst]:,}", offset)
    matrix = sp.csr_matrix(
        (np.concatenate(all_vals), (np.concatenate(all_rows), np.concatenate(all_cols))),
        shape=(len(rows), offset),
    )
    return _Design(matrix, rows, zero_rows, n_cells, n_constraints, offset)


def _key(coords: list[IntArray], dims: list[int], n: int) -> IntArray:
    """One int64 per coordinate tuple when they fit, else the tuples as rows (n, |U|)."""
    if not coords:
        return np.zeros(n, dtype=np.int64)
    if math.prod(dims) < _KEY_LIMIT:
        return np.ravel_multi_index(coords, dims).astype(np.int64)
    return np.stack(coords, axis=1)


def _name(scope: tuple[str, ...]) -> str:
    return "(" + ", ".join(scope) + ")" if scope else "() (the total count)"


# -- the numerical linear algebra ----------------------------------------------------------------


@dataclass(frozen=True)
class _Solution:
    fitted: FloatArray  # P b on the design's rows
    rank: int
    peeled: int
    converged: bool = True
    refusal: str = ""


def _peel(a: sp.csr_matrix) -> npt.NDArray[np.bool_]:
    """Rows that a column of their own lets fit exactly (returned as a mask).

    If column j's only non-zero among the rows still in play is in row q, then e_q = A e_j/A_qj
    lies in range A, so 𝒮 = span(e_q) ⊕ {y ∈ 𝒮 : y_q = 0} (a W-orthogonal split: W is
    diagonal), and the second part is the range of A without row q (θ_j absorbs row q's
    constraint). Hence a*_q = â_q, and the rest is the projection onto the range of A without
    row q. Repeated while such columns appear (at most _MAX_PEEL rounds).
    """
    t = a.shape[0]
    pattern = (a != 0).astype(np.float64).T.tocsr()  # (p, t)
    alive = np.ones(t, dtype=bool)
    index = np.arange(t, dtype=np.float64)
    for _ in range(_MAX_PEEL):
        counts = pattern @ alive.astype(np.float64)
        single = counts == 1
        if not single.any():
            break
        owners = np.rint(pattern[single] @ np.where(alive, index, 0.0)).astype(np.int64)
        alive[owners] = False
    return ~alive


def _scaled(a: sp.csr_matrix, root: FloatArray) -> sp.csr_matrix:
    """W^{1/2} A with unit columns (column scaling does not change range A)."""
    weighted = (sp.diags(root) @ a).tocsc()
    norms = np.sqrt(np.asarray(weighted.multiply(weighted).sum(axis=0)).ravel())
    return (weighted @ sp.diags(1.0 / norms)).tocsr()


def _solve(a: sp.csr_matrix, w: FloatArray, y: FloatArray, max_nonzeros: int) -> _Solution:
    """P y for the W-orthogonal projector P onto range A, and rank A.

    Rows peeled by :func:`_peel` keep their value; the core B = W^{1/2} A_core (unit columns)
    is projected with a Gram matrix, on whichever side is smaller: G = BᵀB (p × p) or
    K = BBᵀ (t × t), which share their non-zero eigenvalues. rank = #eigenvalues > _RANK_TOL.
    """
    fitted = y.copy()
    peeled = _peel(a)
    core_rows = np.flatnonzero(~peeled)
    if not len(core_rows):
        return _Solution(fitted, len(peeled), len(peeled))
    core = a[core_rows]
    core = core[:, np.flatnonzero(np.diff(core.tocsc().indptr))]
    root = np.sqrt(w[core_rows])
    b = y[core_rows] * (root if y.ndim == 1 else root[:, None])
    scaled = _scaled(core, root)
    t, p = scaled.shape
    row_nnz = np.diff(scaled.indptr).astype(np.float64)
    col_nnz = np.diff(scaled.tocsc().indptr).astype(np.float64)
    by_rows = t < p if min(t, p) <= _DENSE else (col_nnz**2).sum() < (row_nnz**2).sum()
    bound = min((col_nnz**2).sum(), (row_nnz**2).sum())
    if min(t, p) > _DENSE and bound > max_nonzeros:
        return _Solution(fitted, 0, int(peeled.sum()), refusal=(
            f"the Gram matrix of the {t:,} × {p:,} core of the design would have up to "
            f"{int(bound):,} non-zeros (limit {max_nonzeros:,})"))
    gram = (scaled @ scaled.T if by_rows else scaled.T @ scaled).tocsc()
    if min(t, p) <= _DENSE:
        projected, rank = _dense(scaled, gram.toarray(), b, by_rows)
        converged = True
    else:
        projected, converged = _refine(scaled, gram, b, by_rows)
        rank = _inertia_rank(gram)
    fitted[core_rows] = projected / (root if y.ndim == 1 else root[:, None])
    return _Solution(fitted, rank + int(peeled.sum()), int(peeled.sum()), converged)


def _dense(
    scaled: sp.csr_matrix, gram: FloatArray, b: FloatArray, by_rows: bool
) -> tuple[FloatArray, int]:
    """Projection onto range B from the eigenvectors of its Gram matrix (eigenvalues > tol)."""
    values, vectors = np.linalg.eigh(gram)
    keep = values > _RANK_TOL
    basis = vectors[:, keep]
    if by_rows:  # K = BBᵀ = UΛUᵀ: range B = range U_r, P = U_r U_rᵀ
        return basis @ (basis.T @ b), int(keep.sum())
    # G = BᵀB = VΛVᵀ: P = B V_r Λ_r⁻¹ V_rᵀ Bᵀ
    inner = (basis.T @ np.asarray(scaled.T @ b)) / (values[keep] if b.ndim == 1
                                                     else values[keep][:, None])
    return np.asarray(scaled @ (basis @ inner)), int(keep.sum())


def _factor(matrix: sp.spmatrix):  # type: ignore[no-untyped-def]
    """Symmetric-mode sparse LU (diagonal pivots, symmetric ordering): an LDLᵀ."""
    return splu(sp.csc_matrix(matrix), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                options={"SymmetricMode": True})


def _refine(
    scaled: sp.csr_matrix, gram: sp.csc_matrix, b: FloatArray, by_rows: bool
) -> tuple[FloatArray, bool]:
    """P b by iterated Tikhonov: a factorisation of gram + λI, refined on the true residual.

    Columns (G = BᵀB): θ ← θ + (G + λI)⁻¹ Bᵀ(b − Bθ), P b = Bθ. Rows (K = BBᵀ):
    y ← y + K (K + λI)⁻¹ (b − y), P b = y. Either way the error along an eigenvalue s > 0 of
    the Gram matrix shrinks by λ/(s + λ) per step and null directions never enter.
    """
    n = gram.shape[0]
    lu = _factor(gram + _LAMBDA * sp.identity(n, format="csc"))
    scale = max(float(np.abs(b).max()), 1e-300)
    if by_rows:
        fit = np.zeros_like(b)
        for _ in range(_MAX_REFINE):
            step = np.asarray(gram @ lu.solve(b - fit))
            fit += step
            if float(np.abs(step).max()) <= _REFINE_TOL * scale:
                return fit, True
        return fit, False
    theta = np.zeros((n,) + b.shape[1:])
    residual = b.copy()
    for _ in range(_MAX_REFINE):
        step = lu.solve(np.asarray(scaled.T @ residual))
        theta += step
        change = np.asarray(scaled @ step)
        residual = b - np.asarray(scaled @ theta)
        if float(np.abs(change).max()) <= _REFINE_TOL * scale:
            return b - residual, True
    return b - residual, False


def _inertia_rank(gram: sp.csc_matrix) -> int:
    """#eigenvalues of gram above _RANK_TOL: by Sylvester's law of inertia, the number of
    positive pivots of the symmetric LDLᵀ of gram − _RANK_TOL·I."""
    n = gram.shape[0]
    lu = _factor(gram - _RANK_TOL * sp.identity(n, format="csc"))
    if not np.array_equal(lu.perm_r, lu.perm_c):  # a row interchange: not an LDLᵀ
        raise ArithmeticError("the symmetric factorisation pivoted off the diagonal")
    return int((lu.U.diagonal() > 0).sum())
