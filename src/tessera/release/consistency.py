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
queries constrain, :meth:`~tessera.workload.workload.Workload.scopes`) take a vector h_S over the
cells of S's grid, the product over a ∈ S of the elementary segments of a (a's codes cut at every
span end of every predicate on a in the whole workload — the value classes in code order — so every
predicate is a union of segments and q's answer is Σ_{cells ⊆ C_q} h_S[cell]); require that for
every two scopes S, S' the marginals of h_S and h_{S'} on T = S ∩ S' agree (T = ∅: the totals
agree). 𝒮 is the set of answer vectors of such families; the true data's marginals form one, so a ∈
𝒮. Building the grids on codes instead of segments gives the same 𝒮: spreading a segment's value
evenly over its codes, and summing codes back into segments, both commute with marginalisation and
keep every answer.

**Eliminating the constraints exactly (Fourier / ANOVA basis).** Work on codes. Per attribute
a with codes 0..n_a−1 take the basis u_a = 𝟙/n_a and d_{a,β} = e_{β−1} − e_β (β = 1..n_a−1) of
ℝ^{n_a} (D_a = [d_{a,1} … d_{a,n_a−1}]): the d's span the sum-zero vectors, u_a sums to 1.
Every h_S splits uniquely as h_S = Σ_{U⊆S} ((⊗_{a∈U} D_a) θ_{S,U}) ⊗ (⊗_{b∈S∖U} u_b), and
marginalising onto T ⊆ S keeps exactly the terms with U ⊆ T, unchanged (a sum-zero factor sums
to 0, u_b to 1). Hence the marginals on S ∩ S' agree iff θ_{S,U} = θ_{S',U} for every
U ⊆ S ∩ S', and the consistent families are exactly h_S = Σ_{U⊆S} ((⊗D) θ_U) ⊗ (⊗u) with one
free tensor θ_U per U in the down-closure Δ of the scopes (the Fourier parametrisation of
Barak, Chaudhuri, Dwork, Kale, McSherry, Talwar, "Privacy, accuracy, and consistency too: a
holistic solution to contingency table release", PODS 2007). On segments the same count gives
dim{consistent h} = Σ_{U∈Δ} ∏_{a∈U} (segments of a − 1) = cells − independent constraints.

**Local = global (for signed vectors).** The same θ define one signed histogram
x = Σ_{U∈Δ} ((⊗D) θ_U) ⊗ (⊗u) over the whole domain, whose marginal on each S is h_S. So
𝒮 = {Qx : x ∈ ℝ^𝔻}, the range of the workload matrix Q — the smallest linear subspace
guaranteed to contain a — whether or not the scopes form a cycle (the gap between the local
and the marginal polytope of cyclic scope sets needs non-negativity, which a linear projection
does not impose). a* is therefore the generalised least-squares (Gauss–Markov) estimate of
the workload answers from the noisy ones.

**The design.** In this basis q's answer is
Σ_{U⊆scope(q)} Σ_β θ_U[β] ∏_{a∈U} c_{q,a,β_a} ∏_{b∈scope(q)∖U} |φ_{q,b}|/n_b with
c_{q,a,β} = [β−1 ∈ φ_{q,a}] − [β ∈ φ_{q,a}] ∈ {0, ±1}, non-zero only at the ends of the spans
of φ_{q,a}. The design matrix A (a = Aθ) has ∏_{a∈scope(q)} (1 + #span ends of φ_{q,a})
non-zeros in row q (9 for a cell of a 2-way marginal), is built from the spans without ever
enumerating a cell, and its columns are only the coordinates θ_U[β] some query sees (the
others change no answer). Then 𝒮 = range A, dim 𝒮 = rank A, and

    a* = A θ̂,   θ̂ ∈ argmin_θ Σ_q ((Aθ)_q − â_q)²/v_q.

**Solving it exactly.**

1. Equal queries are one coordinate of 𝒮: Σ_i (y − â_i)²/v_i = (y − ȳ)² Σ_i 1/v_i + const,
   so they are pooled (inverse-variance mean ȳ, weight Σ 1/v_i) and share the answer.
2. Peeling: if a column of A meets one remaining row q only, then e_q ∈ range A, 𝒮 splits
   W-orthogonally into span(e_q) and the range of the other rows, and a*_q = â_q (a query no
   other query constrains keeps its answer); repeated while such columns appear.
3. The core B = W^{1/2} A with unit columns (column scaling keeps range A). With few rows and
   many unknowns: the eigenvectors U_r of BBᵀ with eigenvalue > RANK_TOL, a* = U_r U_rᵀ b.
   Otherwise the Gram matrix G = BᵀB + λI (λ = 1e-10, so that the singular G of a
   rank-deficient A factorises) is factorised — dense Cholesky, or a sparse symmetric-mode
   LU (an LDLᵀ with a fill-reducing ordering) — and iterative refinement on the true
   residual, θ ← θ + (G + λI)⁻¹ Bᵀ(b − Bθ), removes the shift: the error along an eigenvalue
   s > 0 of BᵀB shrinks by λ/(s + λ) per step, and the null directions of BᵀB never enter
   (Bᵀ maps into its range) and do not move Bθ. The refinement stops when a step moves a* by
   < 1e-13 of the largest answer; the note says so if it does not.
4. dim 𝒮 = peeled rows + #eigenvalues of the unit-column Gram matrix above RANK_TOL, counted
   by Sylvester's law of inertia as the positive pivots of an LDLᵀ of BᵀB − RANK_TOL·I
   (Bunch–Kaufman when dense). rank A does not depend on the weights; RANK_TOL = 1e-9 means
   singular values below 3·10⁻⁵ of a unit-column design count as zero.

Cost: all 2-way marginals of a 15-attribute Adult-shaped domain (35,290 queries, 31,741
unknowns) take about two seconds; random range/set workloads of 10,000 queries on it (most of
them peeled) about one. Limits (refused with a note, the answers returned unchanged): the
unknowns (``max_cells``), the unknowns one scope's queries see (``max_scope_cells``), the
non-zeros of A and of the factorised Gram matrix (``max_nonzeros``).

Queries with v_q = ∞ (not released) are left out of the objective and of t, and their output
is NaN (never a number that was not released). Contradictions (coverage ∅) answer 0 exactly.
a* is real-valued and may be negative; :func:`round_nonnegative` is the (biased) fix.

Why this module is long (about 600 lines): it is one computation, the weighted least-squares
consistency step. Building the sparse design over the unknowns, peeling the queries that
determine their unknowns alone, the sparse factorised solve with its refinement and rank checks,
and the limits that refuse a problem too big are stages of one solve that share its matrices
and invariants; none is used elsewhere.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import chain, combinations

import numpy as np
import numpy.typing as npt
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import SuperLU, splu

from tessera.workload.clause import BooleanClause
from tessera.workload.query import Query
from tessera.workload.workload import Workload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Scope = tuple[str, ...]

#: Default bound on the unknowns: the coordinates θ_U[β] of the consistent grids that some
#: query sees (never more than the cells Σ_S ∏_{a∈S} segments of the scope grids).
DEFAULT_MAX_CELLS = 2_000_000
#: Default bound on the unknowns that the queries of one scope see.
DEFAULT_MAX_SCOPE_CELLS = 200_000
#: Default bound on the non-zeros of the design matrix and of the Gram matrix factorised.
DEFAULT_MAX_NONZEROS = 20_000_000
#: Seconds :func:`consistent_answers` may take; checked after the design is built and after the
#: solve (the size guards above bound each phase); past it, the answers are left as released.
DEFAULT_TIME_LIMIT = 120.0

#: Eigenvalues of the unit-column Gram matrix below this count as 0 (the rank tolerance: a
#: singular value 3e-5 of the design with unit columns).
RANK_TOL = 1e-9
#: Tikhonov shift of the Gram matrix, removed by iterative refinement.
_LAMBDA = 1e-10
_REFINE_TOL = 1e-13
_MAX_REFINE = 60
_MAX_PEEL = 64
#: Gram matrices of order ≤ _SMALL, or ≤ _DENSE and a fifth full, are factorised densely.
_SMALL = 400
_DENSE = 3000
_KEY_LIMIT = 1 << 62
_RHS_CHUNK = 16


@dataclass(frozen=True)
class Consistency:
    """The result of :func:`consistent_answers`.

    * ``answers``: a*, the shape of the noisy input; NaN for unreleased queries;
    * ``applied``: whether a* was computed; if not, the released answers come back unchanged
      and ``note`` says why (naming the scope responsible when there is one);
    * ``n_cells``: cells of the scope grids, Σ_S ∏_{a∈S} (segments of a) (never built);
    * ``n_constraints``: independent marginal-agreement constraints among those cells (the
      cells minus the free coordinates Σ_{U∈Δ} ∏_{a∈U} (segments of a − 1)), eliminated
      exactly by the parametrisation;
    * ``n_unknowns``: the free coordinates some released query sees (the columns of A);
    * ``dimension``: dim 𝒮 (the rank of the projection; ``n_released`` when not applied);
    * ``n_released``: t, the released queries (finite variance).

    ``error_factor`` = dimension / t is E‖a* − a‖²_W / E‖â − a‖²_W (module docs).
    """

    answers: FloatArray
    applied: bool
    note: str
    n_cells: int
    n_constraints: int
    dimension: int
    n_released: int
    n_unknowns: int

    @property
    def error_factor(self) -> float:
        return self.dimension / self.n_released if self.n_released else 1.0


def round_nonnegative(values: npt.ArrayLike) -> FloatArray:
    """Clip at 0 and round to the nearest integer; NaN (an unreleased answer) stays NaN.

    Post-processing, hence free in privacy, and for a true count a ≥ 0 clipping never moves an
    answer away from it. But the result is **biased**: near 0, E max(0, â) > a (for a = 0,
    E max(0, z) = E|z|/2 > 0 for symmetric noise), and both steps break the linear relations
    that :func:`consistent_answers` restores (a parent may no longer be the sum of its
    children). Apply it last, if at all. Returns floats (integral values, or NaN).
    """
    arr = np.asarray(values, dtype=np.float64)
    return np.rint(np.maximum(arr, 0.0))


def consistent_answers(
    workload: Workload,
    noisy: npt.ArrayLike,
    variances: npt.ArrayLike,
    *,
    max_cells: int = DEFAULT_MAX_CELLS,
    max_scope_cells: int = DEFAULT_MAX_SCOPE_CELLS,
    max_nonzeros: int = DEFAULT_MAX_NONZEROS,
    time_limit: float | None = DEFAULT_TIME_LIMIT,
) -> Consistency:
    """a* = the V⁻¹-orthogonal projection of ``noisy`` onto the consistent answers 𝒮.

    ``noisy``: shape (t,), or (t, k) to project k draws at once; ``variances``: v_q > 0, or
    ``inf`` for a query that was not released (left out; its output is NaN). Refuses (returns
    the released answers unchanged, ``applied=False``, a note naming the scope) when the
    unknowns exceed ``max_cells``, one scope's unknowns exceed ``max_scope_cells``, or the
    design or its Gram matrix would exceed ``max_nonzeros`` non-zeros, and when ``time_limit``
    seconds have passed after building the design or after the solve (the released answers
    are a safe result: the projection is optional post-processing). Module docs: the math.
    """
    start = time.monotonic()
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
    if any(isinstance(q, BooleanClause) for q in workload.queries):
        return Consistency(y, False, "consistency not applied: the workload has Boolean clauses "
                           "(OR / NOT across attributes); the projection takes predicate queries",
                           0, 0, n_rel, n_rel, 0)
    if not all(isinstance(q, Query) for q in workload.queries):  # BDD queries
        return Consistency(y, False, "consistency not applied: the workload has BDD queries "
                           "(Boolean functions); the projection takes predicate queries",
                           0, 0, n_rel, n_rel, 0)

    # contradictions answer 0 on every data set; equal queries are one coordinate of 𝒮
    zero: list[int] = []
    first: dict[Query, int] = {}
    representative = np.full(t, -1, dtype=np.int64)
    for i in np.flatnonzero(released).tolist():
        q = workload.queries[i]
        if any(not p.coverage.spans for p in q.predicates):
            zero.append(i)
        else:
            representative[i] = first.setdefault(q, i)
    members = np.asarray(sorted(first.values()), dtype=np.int64)
    design = _design(workload, members, max_cells, max_scope_cells, max_nonzeros)

    def refused(reason: str) -> Consistency:
        return Consistency(y, False, f"consistency not applied: {reason}", design.n_cells,
                           design.n_constraints, n_rel, n_rel, design.n_unknowns)

    def late() -> bool:
        return time_limit is not None and time.monotonic() - start > time_limit

    if design.refusal:
        return refused(design.refusal)
    if late():
        return refused(f"time limit {time_limit:g} s reached building the design "
                       f"({design.n_unknowns:,} unknowns); raise time_limit=")
    out = y.copy()
    out[zero] = 0.0
    dimension = 0
    converged = True
    if len(design.rows):
        # Σ_{i ~ r} (y_r − â_i)²/v_i = (y_r − ȳ_r)² Σ 1/v_i + const: pool equal queries
        dup = np.flatnonzero(representative >= 0)
        position = np.full(t, -1, dtype=np.int64)
        position[design.rows] = np.arange(len(design.rows))
        slot = position[representative[dup]]
        inv_v = 1.0 / v[dup]
        weight = np.bincount(slot, weights=inv_v, minlength=len(design.rows))
        weighted = y[dup] * (inv_v if y.ndim == 1 else inv_v[:, None])
        if y.ndim == 1:
            pooled = np.bincount(slot, weights=weighted, minlength=len(design.rows)) / weight
        else:
            pooled = np.zeros((len(design.rows), y.shape[1]))
            np.add.at(pooled, slot, weighted)
            pooled /= weight[:, None]
        solution = _solve(design.matrix, weight, pooled, max_nonzeros)
        if solution.refusal:
            return refused(solution.refusal)
        if late():
            return refused(f"time limit {time_limit:g} s reached in the solve "
                           f"({design.n_unknowns:,} unknowns); raise time_limit=")
        out[dup] = solution.fitted[slot]
        dimension, converged = solution.rank, solution.converged
    note = (
        f"least-squares consistency (post-processing, no privacy cost): {n_rel} released "
        f"answers projected onto a {dimension}-dimensional consistent subspace; expected "
        f"weighted squared error × {dimension / max(n_rel, 1):.3g}"
    )
    if not converged:
        note += (f"; iterative refinement stopped above {_REFINE_TOL:g} (a nearly "
                 "rank-deficient design): a* is approximate")
    return Consistency(out, True, note, design.n_cells, design.n_constraints, dimension, n_rel,
                       design.n_unknowns)


# -- the design matrix -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Design:
    matrix: sp.csr_matrix  # (len(rows), n_unknowns): a = A θ
    rows: IntArray  # the workload query of each row
    n_cells: int
    n_constraints: int
    n_unknowns: int
    refusal: str = ""


@dataclass(frozen=True)
class _Attribute:
    """One attribute's predicates in one scope group, one per query of the group."""

    size: int
    fraction: FloatArray  # ⟨φ_q, u⟩ = |φ_q| / n
    count: IntArray  # span ends of φ_q strictly inside (0, n)
    start: IntArray  # offset of query r's ends in ``position`` / ``sign``
    position: IntArray  # β of each end (1..n−1), grouped by query
    sign: FloatArray  # c_{q,β} = ⟨φ_q, d_β⟩: −1 where a span starts, +1 where it ends


def _attribute(size: int, spans_per_query: Sequence[tuple[tuple[int, int], ...]]) -> _Attribute:
    m = len(spans_per_query)
    n_spans = np.fromiter(map(len, spans_per_query), dtype=np.int64, count=m)
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(spans_per_query)),
                       dtype=np.int64, count=2 * int(n_spans.sum())).reshape(-1, 2)
    flat = np.clip(flat, 0, size)
    owner = np.repeat(np.arange(m, dtype=np.int64), n_spans)
    covered = np.bincount(owner, weights=(flat[:, 1] - flat[:, 0]).astype(np.float64),
                          minlength=m)
    nonempty = flat[:, 0] < flat[:, 1]
    lo_in = nonempty & (flat[:, 0] > 0)
    hi_in = nonempty & (flat[:, 1] < size)
    position = np.concatenate([flat[lo_in, 0], flat[hi_in, 1]])
    sign = np.concatenate([np.full(int(lo_in.sum()), -1.0), np.full(int(hi_in.sum()), 1.0)])
    who = np.concatenate([owner[lo_in], owner[hi_in]])
    order = np.lexsort((position, who))
    count = np.bincount(who, minlength=m).astype(np.int64)
    start = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    return _Attribute(size, covered / size, count, start, position[order], sign[order])


def _expand(
    rows: IntArray, values: FloatArray, coords: list[IntArray], attr: _Attribute
) -> tuple[IntArray, FloatArray, list[IntArray]]:
    """Each entry (row, value, coordinates) times each span end of its row's predicate on
    ``attr`` (a ragged Cartesian product, vectorised with repeat)."""
    rep = attr.count[rows]
    total = int(rep.sum())
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(rep) - rep, rep)
    index = np.repeat(attr.start[rows], rep) + within
    return (np.repeat(rows, rep), np.repeat(values, rep) * attr.sign[index],
            [np.repeat(c, rep) for c in coords] + [attr.position[index] - 1])


def _key(coords: list[IntArray], dims: list[int], n: int) -> IntArray:
    """One int64 per coordinate tuple of θ_U when they fit, else the tuples as rows."""
    if not coords:
        return np.zeros(n, dtype=np.int64)
    if math.prod(dims) < _KEY_LIMIT:
        return np.ravel_multi_index(coords, dims).astype(np.int64)
    return np.stack(coords, axis=1)


def _name(scope: Scope) -> str:
    return "(" + ", ".join(scope) + ")" if scope else "() (the total count)"


def _design(
    workload: Workload,
    members: IntArray,
    max_cells: int,
    max_scope_cells: int,
    max_nonzeros: int,
) -> _Design:
    """A with a = Aθ for the (distinct, non-contradictory) queries ``members``.

    Row q, block U ⊆ scope(q): Π_{b∈scope(q)∖U} |φ_{q,b}|/n_b · Π_{a∈U} c_{q,a,β_a} at
    column (U, β); one Python pass over the predicates' spans, then numpy per (scope, U).
    """
    domain = workload.domain
    groups: dict[Scope, list[int]] = {}
    for i in members.tolist():
        groups.setdefault(workload.queries[i].scope, []).append(i)
    order = sorted(groups, key=lambda s: (len(s), [domain.index(a) for a in s]))
    rows = np.asarray([i for s in order for i in groups[s]], dtype=np.int64)
    row_base = np.cumsum([0] + [len(groups[s]) for s in order])

    attrs: dict[Scope, list[_Attribute]] = {}
    ends: dict[str, set[int]] = defaultdict(set)
    entries: dict[Scope, int] = {}
    for s in order:
        per = []
        for j, name in enumerate(s):
            spans = [workload.queries[i].predicates[j].coverage.spans for i in groups[s]]
            per.append(_attribute(domain[name].size, spans))
            ends[name].update(np.unique(per[-1].position).tolist())
        attrs[s] = per
        entries[s] = (int(np.prod([1 + a.count for a in per], axis=0).sum()) if per
                      else len(groups[s]))

    # the scope grids of the cell formulation: reported, never built
    segments = {name: len(e) + 1 for name, e in ends.items()}
    n_cells = sum(math.prod(segments[a] for a in s) for s in order)
    total = sum(entries.values())
    if total > max_nonzeros:  # (before the down-closure: a row has ≥ 2^|scope| entries)
        worst = max(entries, key=entries.__getitem__)
        return _Design(sp.csr_matrix((0, 0)), rows, n_cells, 0, 0, (
            f"the design would have {total:,} non-zeros (limit {max_nonzeros:,}), "
            f"{entries[worst]:,} of them from scope {_name(worst)}"))
    closure = {u for s in order for k in range(len(s) + 1) for u in combinations(s, k)}
    n_constraints = n_cells - sum(math.prod(segments[a] - 1 for a in u) for u in closure)

    def refuse(reason: str, n_unknowns: int = 0) -> _Design:
        return _Design(sp.csr_matrix((0, 0)), rows, n_cells, n_constraints, n_unknowns, reason)

    # entries (row, value, key of θ_U's coordinates), per U across every scope containing U
    by_subset: dict[Scope, list[tuple[IntArray, FloatArray, IntArray]]] = defaultdict(list)
    scope_unknowns: dict[Scope, int] = {}
    for g, s in enumerate(order):
        per = attrs[s]
        m = len(groups[s])
        seen = 0
        for k in range(len(s) + 1):
            for sub in combinations(range(len(s)), k):
                values = np.ones(m)
                for j in range(len(s)):
                    if j not in sub:
                        values = values * per[j].fraction
                r, val, coords = np.arange(m, dtype=np.int64), values, []
                for j in sub:
                    r, val, coords = _expand(r, val, coords, per[j])
                key = _key(coords, [per[j].size - 1 for j in sub], len(r))
                by_subset[tuple(s[j] for j in sub)].append((r + row_base[g], val, key))
                seen += len(np.unique(key, axis=0))
        scope_unknowns[s] = seen
        if seen > max_scope_cells:
            return refuse(f"scope {_name(s)} alone has {seen:,} unknowns "
                          f"(limit {max_scope_cells:,})", seen)

    all_rows, all_cols, all_vals = [], [], []
    offset = 0
    for parts in by_subset.values():
        uniq, inverse = np.unique(np.concatenate([p[2] for p in parts]), axis=0,
                                  return_inverse=True)
        all_rows.extend(p[0] for p in parts)
        all_vals.extend(p[1] for p in parts)
        all_cols.append(inverse.ravel() + offset)
        offset += len(uniq)
    if offset > max_cells:
        worst = max(scope_unknowns, key=scope_unknowns.__getitem__)
        return refuse(f"{offset:,} unknowns (limit {max_cells:,}), the most, "
                      f"{scope_unknowns[worst]:,}, seen by scope {_name(worst)}", offset)
    matrix = sp.csr_matrix(
        (np.concatenate(all_vals) if all_vals else np.zeros(0),
         (np.concatenate(all_rows) if all_rows else np.zeros(0, dtype=np.int64),
          np.concatenate(all_cols) if all_cols else np.zeros(0, dtype=np.int64))),
        shape=(len(rows), offset),
    )
    matrix.eliminate_zeros()
    return _Design(matrix, rows, n_cells, n_constraints, offset)


# -- the numerical linear algebra --------------------------------------------------------------


@dataclass(frozen=True)
class _Solution:
    fitted: FloatArray  # P b, on the design's rows
    rank: int
    converged: bool = True
    refusal: str = ""


def _peel(a: sp.csr_matrix) -> BoolArray:
    """Rows that a column of their own fits exactly (a mask).

    If column j's only non-zero among the rows still in play is in row q, then
    e_q = A e_j / A_qj ∈ range A, so range A = span(e_q) ⊕ {y ∈ range A : y_q = 0}, a
    W-orthogonal split (W is diagonal), and the second part is the range of A without row q
    (θ_j absorbs row q). So a*_q = â_q and the rest is the projection onto the range of the
    other rows. Repeated while such columns appear (at most _MAX_PEEL rounds).
    """
    t = a.shape[0]
    pattern = (a != 0).astype(np.float64).T.tocsr()  # (p, t)
    alive = np.ones(t, dtype=bool)
    index = np.arange(t, dtype=np.float64)
    for _ in range(_MAX_PEEL):
        single = (pattern @ alive.astype(np.float64)) == 1
        if not single.any():
            break
        alive[np.rint(pattern[single] @ np.where(alive, index, 0.0)).astype(np.int64)] = False
    return ~alive


def _solve(a: sp.csr_matrix, w: FloatArray, y: FloatArray, max_nonzeros: int) -> _Solution:
    """P y for P the W-orthogonal projector onto range A, and rank A.

    Peeled rows (:func:`_peel`) keep their value. The core B = W^{1/2} A_core, columns scaled
    to unit norm (range unchanged), is projected through K = BBᵀ (:func:`_row_projection`)
    when that is the smaller Gram matrix and has at most _DENSE rows, else through
    G = BᵀB (:func:`_refine`); the two share their non-zero eigenvalues, and rank A =
    peeled rows + #eigenvalues above RANK_TOL.
    """
    fitted = y.copy()
    peeled = _peel(a)
    n_peeled = int(peeled.sum())
    core_rows = np.flatnonzero(~peeled)
    if not len(core_rows):
        return _Solution(fitted, n_peeled)
    core = a[core_rows].tocsc()
    core = core[:, np.flatnonzero(np.diff(core.indptr))]
    if not core.shape[1]:  # rows that are 0 on every data set
        fitted[core_rows] = 0.0
        return _Solution(fitted, n_peeled)
    root = np.sqrt(w[core_rows])
    per_row = root if y.ndim == 1 else root[:, None]
    weighted = (sp.diags(root) @ core).tocsc()
    norms = np.sqrt(np.asarray(weighted.multiply(weighted).sum(axis=0)).ravel())
    scaled = (weighted @ sp.diags(1.0 / norms)).tocsr()
    row_nnz = np.diff(scaled.indptr).astype(np.float64)
    col_nnz = np.diff(scaled.tocsc().indptr).astype(np.float64)
    rows_bound = float((col_nnz**2).sum())  # ≥ nnz(BBᵀ)
    cols_bound = float((row_nnz**2).sum())  # ≥ nnz(BᵀB)
    b = y[core_rows] * per_row
    if rows_bound < cols_bound and scaled.shape[0] <= _DENSE:
        projected, rank = _row_projection(scaled, b)
        fitted[core_rows] = projected / per_row
        return _Solution(fitted, rank + n_peeled)

    def too_big(nnz: float) -> _Solution:
        return _Solution(fitted, 0, refusal=(
            f"the Gram matrix of the {scaled.shape[0]:,} × {scaled.shape[1]:,} core of the "
            f"design has {int(nnz):,} non-zeros (limit {max_nonzeros:,})"))

    if cols_bound > 4 * max(max_nonzeros, _DENSE**2):  # Σ_q nnz(row q)² counts overlaps
        return too_big(cols_bound)
    gram = (scaled.T @ scaled).tocsc()
    n = gram.shape[0]
    if gram.nnz > max(max_nonzeros, _DENSE**2):
        return too_big(gram.nnz)
    try:
        if n <= _SMALL or (n <= _DENSE and gram.nnz > 0.2 * n * n):
            dense = gram.toarray()
            factor = sla.cho_factor(dense + _LAMBDA * np.eye(n))
            solve: Callable[[FloatArray], FloatArray] = partial(sla.cho_solve, factor)
            rank = _dense_rank(dense)
        else:
            solve = _ldl(gram + _LAMBDA * sp.identity(n, format="csc")).solve
            rank = _sparse_rank(gram)
    except (MemoryError, RuntimeError, sla.LinAlgError) as e:
        return _Solution(fitted, 0, refusal=f"factorising the {n:,} × {n:,} Gram matrix "
                                            f"failed ({e})")
    projected, converged = _refine(scaled, solve, b)
    fitted[core_rows] = projected / per_row
    return _Solution(fitted, rank + n_peeled, converged)


def _row_projection(scaled: sp.csr_matrix, b: FloatArray) -> tuple[FloatArray, int]:
    """Few rows, many unknowns: K = BBᵀ = UΛUᵀ (t × t, dense), P b = U_r U_rᵀ b with U_r the
    eigenvectors of eigenvalue > RANK_TOL (K and BᵀB share their non-zero eigenvalues)."""
    values, vectors = np.linalg.eigh((scaled @ scaled.T).toarray())
    basis = vectors[:, values > RANK_TOL]
    return basis @ (basis.T @ b), basis.shape[1]


def _refine(
    scaled: sp.csr_matrix, solve: Callable[[FloatArray], FloatArray], b: FloatArray
) -> tuple[FloatArray, bool]:
    """P b = Bθ̂ by iterated Tikhonov: θ ← θ + (G + λI)⁻¹ Bᵀ(b − Bθ), G = BᵀB, where
    ``solve`` applies (G + λI)⁻¹. The error along an eigenvalue s > 0 of G shrinks by
    λ/(s + λ) per step; Bᵀ removes b's component outside range B before the solve, so null
    directions of G only receive rounding errors, which B maps to ~0.
    """
    def chunked(r: FloatArray) -> FloatArray:  # SuperLU slows down on wide right-hand sides
        if r.ndim == 1 or r.shape[1] <= _RHS_CHUNK:
            return solve(r)
        return np.concatenate([solve(np.asfortranarray(r[:, k:k + _RHS_CHUNK]))
                               for k in range(0, r.shape[1], _RHS_CHUNK)], axis=1)

    scale = max(float(np.abs(b).max()), 1e-300)
    theta = np.zeros((scaled.shape[1],) + b.shape[1:])
    residual = b.copy()
    for _ in range(_MAX_REFINE):
        step = chunked(np.asarray(scaled.T @ residual))
        theta += step
        residual = b - np.asarray(scaled @ theta)
        if float(np.abs(scaled @ step).max()) <= _REFINE_TOL * scale:
            return b - residual, True
    return b - residual, False


def _ldl(matrix: sp.spmatrix) -> SuperLU:
    """Sparse LU in symmetric mode (diagonal pivots, one symmetric fill-reducing ordering):
    an LDLᵀ, U = D Lᵀ."""
    return splu(sp.csc_matrix(matrix), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                options={"SymmetricMode": True})


def _sparse_rank(gram: sp.csc_matrix) -> int:
    """#eigenvalues of ``gram`` above RANK_TOL = #positive pivots of the LDLᵀ of
    gram − RANK_TOL·I (Sylvester's law of inertia)."""
    lu = _ldl(gram - RANK_TOL * sp.identity(gram.shape[0], format="csc"))
    if not np.array_equal(lu.perm_r, lu.perm_c):  # pivoted off the diagonal: not an LDLᵀ
        raise RuntimeError("the symmetric factorisation pivoted off the diagonal")
    return int((lu.U.diagonal() > 0).sum())


def _dense_rank(gram: FloatArray) -> int:
    """The same count by a Bunch–Kaufman LDLᵀ (1×1 and 2×2 pivots) of gram − RANK_TOL·I."""
    _, d, _ = sla.ldl(gram - RANK_TOL * np.eye(len(gram)))
    inertia = sla.eigvalsh_tridiagonal(np.diag(d).copy(), np.diag(d, 1).copy())
    return int((inertia > 0).sum())
