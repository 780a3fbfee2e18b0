"""Coarsened measurements: MST's domain compression for the adaptive synthesizer, without
losing the values it merges (docs/theory.md §5, "coarsened measurements").

MST (McKenna, Miklau, Sheldon, "Winning the NIST Contest: A scalable and general approach to
differentially private synthetic data", JPC 2021, §4.1) measures every one-way marginal, then
merges the values of each attribute whose noisy count is below 3σ into one value before it
measures anything else: a 2-way marginal of Adult's ``native-country`` (42 values, 90 % one of
them) × ``age`` (32) then has 4 × 21 cells instead of 1,344 (Adult's exact one-way counts
against τ = 450, about 3σ at ε = 0.3), and its measurement the same ρ spread over 16× fewer
cells. AIM measures every cell of every marginal it selects, so its noise penalty
√(2/π)·σ·cells keeps such marginals out of its model (docs/theory.md §5, "Coarsened
measurements").

Here the model keeps every value. After the one-way initialisation each attribute's values are
grouped from the noisy one-way counts ĉ_v, τ = ``coarsen_sigmas`` × the round noise's standard
deviation: a value with ĉ_v ≥ τ is its own group; the others, for an ordered attribute, form runs
of consecutive codes, each closed once its total reaches τ (:func:`value_runs`: the ends of
Adult's age stay apart), and for a categorical one all share one group (:func:`value_groups`,
MST's rule). A selected marginal r of two or more attributes is then measured **coarsened**: the
noisy counts of the products of groups (:class:`Coarsened`); one-way marginals are always
measured fine — they alone tell the merged values apart, and within a group the model follows
them (:class:`CoarseSpace`).

**Privacy.** The groups are a function of the noisy one-way measurements (post-processing).
Summing cells is a contraction: adding or removing one row changes one cell of the fine marginal
by 1 and hence one coarse cell by 1 (substitution: two cells by 1, or none), so a coarsened
marginal has the fine one's Δ₁ and Δ₂, its measurement the same calibration and cost, and the
exact selection score (:func:`tessera.synth.accounting.exact_scores`) on the coarse counts the
same sensitivity w_r Δ₁.

>>> import numpy as np
>>> value_groups(np.array([500.0, 3.0, 900.0, 1.0, 2.0]), 10.0)
(0, 3, 1, 3, 3)
>>> c = Coarsened.of((2, 5), ((0, 1), (0, 3, 1, 3, 3)))
>>> c.cells, c.sum(np.arange(10)).tolist()
(8, [0, 2, 0, 6, 5, 7, 0, 20])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.estimation.maxent import Coarsening, FitResult, GroupMeasurement, ScopeModel
from tessera.schema.domain import Domain

__all__ = ["COARSEN_SIGMAS", "CoarseSpace", "Coarsened", "one_way_counts", "value_groups",
           "value_runs"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

#: MST's threshold: a value is its own group when its noisy count is at least 3 noise sd.
COARSEN_SIGMAS = 3.0


def value_groups(counts: FloatArray, threshold: float) -> tuple[int, ...]:
    """code → group for one attribute: the codes whose estimated count is ≥ ``threshold`` are
    groups 0, 1, … in code order; the others share the last group when there are at least two
    of them (one alone keeps a group of its own: merging it changes nothing)."""
    keep = np.asarray(counts, dtype=np.float64) >= threshold
    if int((~keep).sum()) < 2:
        return tuple(range(keep.size))
    out = np.empty(keep.size, dtype=np.int64)
    out[keep] = np.arange(int(keep.sum()))
    out[~keep] = int(keep.sum())
    return tuple(int(g) for g in out)


def value_runs(counts: FloatArray, threshold: float) -> tuple[int, ...]:
    """code → group for an ordered attribute: the codes whose estimated count is ≥
    ``threshold`` are their own groups; consecutive other codes are merged into runs, each
    closed once its clipped total reaches ``threshold`` (groups numbered in code order, so each
    group is an interval of codes)."""
    out: list[int] = []
    g, run, total = -1, False, 0.0
    for c in np.asarray(counts, dtype=np.float64):
        if c >= threshold:
            g, run = g + 1, False
        else:
            if not run:
                g, run, total = g + 1, True, 0.0
            total += max(float(c), 0.0)
        out.append(g)
        if run and total >= threshold:
            run = False
    return tuple(out)


def one_way_counts(measurements: Sequence[GroupMeasurement], attribute: int) -> FloatArray | None:
    """The inverse-variance weighted mean of the fine one-way measurements of ``attribute``
    (None when it has none): the ĉ_v that :func:`value_groups` reads."""
    ms = [m for m in measurements
          if m.query is None and m.groups is None and m.scope == (attribute,)]
    if not ms:
        return None
    w = np.array([1.0 / (m.sd * m.sd) for m in ms])
    return np.asarray((w[:, None] * np.stack([m.y for m in ms])).sum(axis=0) / w.sum())


@dataclass(frozen=True, eq=False)
class Coarsened:
    """A marginal over a scope measured coarsened: ``groups`` (one code → group map per
    attribute, or None: the marginal itself) and ``index``, each fine cell's coarse cell
    (row-major over the scope's codes and over the group numbers)."""

    groups: Coarsening | None
    index: IntArray
    cells: int

    @classmethod
    def of(cls, shape: Sequence[int], groups: Coarsening | None) -> Coarsened:
        fine = math.prod(shape)
        if groups is None or all(g == tuple(range(n)) for g, n in zip(groups, shape,
                                                                        strict=True)):
            return cls(None, np.arange(fine, dtype=np.intp), fine)
        digits = np.unravel_index(np.arange(fine, dtype=np.intp), tuple(shape))
        maps = [np.asarray(g, dtype=np.intp) for g in groups]
        dims = tuple(int(m.max()) + 1 for m in maps)
        index = np.ravel_multi_index(tuple(m[d] for m, d in zip(maps, digits, strict=True)),
                                     dims) if shape else np.zeros(1, dtype=np.intp)
        return cls(groups, np.asarray(index, dtype=np.intp), math.prod(dims))

    def sum(self, fine: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
        """The coarse cells' sums of a fine marginal (integers stay exact integers)."""
        if self.groups is None:
            return fine
        if np.issubdtype(np.asarray(fine).dtype, np.integer):
            out = np.zeros(self.cells, dtype=np.int64)
            np.add.at(out, self.index, fine)
            return out
        return np.bincount(self.index, weights=fine, minlength=self.cells)


def _log_q(groups: Sequence[int], counts: FloatArray, floor: float) -> FloatArray:
    """log q(v | g(v)), q ∝ max(ĉ_v, floor) within each group."""
    gi = np.asarray(groups, dtype=np.intp)
    w = np.maximum(np.asarray(counts, dtype=np.float64), floor)
    return np.asarray(np.log(w) - np.log(np.bincount(gi, weights=w))[gi])


@dataclass(frozen=True, eq=False)
class CoarseSpace:
    """The domain the rounds are fitted in once values are grouped: attribute a has one code per
    group of ``groups[a]``, and the model over it is

        P(x) = P_c(g(x)) · Π_a q_a(x_a | g_a(x_a)),   q_a(v | G) ∝ max(ĉ_v, floor) on G,

    ĉ the fine one-way counts (:func:`one_way_counts`). This is the maximum-entropy family of
    the measurements made — fine one-way marginals and coarsened marginals with these groups —
    up to the within-group factors, which the fine one-way measurements alone inform (the
    coarsened ones sum over them): q_a is their clipped, normalised estimate, and the fine
    one-way measurements enter the coarse fit as their group sums (noise sd σ√|G| per group,
    :meth:`coarse`). The junction tree then runs over group codes (with MST's rule at
    τ = 450: native-country × age × … over 4 × 21 × … cells instead of 42 × 32 × …), and
    :meth:`expand` writes the fitted model over the fine domain exactly:
    θ_f,s[x_s] = θ_c,s[g(x_s)] (+ log q_a once per attribute), so that its marginals over
    groups are P_c's and its fine one-way marginals P_c(g_a) q_a. Post-processing throughout."""

    fine: Domain
    domain: Domain
    groups: dict[int, tuple[int, ...]]
    log_q: dict[int, FloatArray]  # log q_a(v | g_a(v)) of the attributes with a merged group

    #: The floor of ĉ_v in q (rows): a merged value never gets probability 0.
    FLOOR = 1e-3

    @classmethod
    def of(cls, fine: Domain, groups: dict[int, tuple[int, ...]],
           counts: dict[int, FloatArray]) -> CoarseSpace:
        names, sizes = fine.names, fine.sizes
        coarse = Domain.from_dict({names[a]: (max(groups[a]) + 1 if a in groups else sizes[a])
                                   for a in range(len(names))})
        log_q: dict[int, FloatArray] = {}
        for a, g in groups.items():
            if len(set(g)) < len(g):
                log_q[a] = _log_q(g, counts[a], cls.FLOOR)
        return cls(fine, coarse, dict(groups), log_q)

    def with_counts(self, attribute: int, counts: FloatArray) -> CoarseSpace:
        """The same groups with q of ``attribute`` from new one-way counts (a fine one-way
        measurement made in the rounds)."""
        if attribute not in self.log_q:
            return self
        log_q = dict(self.log_q)
        log_q[attribute] = _log_q(self.groups[attribute], counts, self.FLOOR)
        return CoarseSpace(self.fine, self.domain, self.groups, log_q)

    def fine_one_way(self, attribute: int, coarse: FloatArray) -> FloatArray:
        """A one-way marginal over groups refined within them: c[g(v)] · q_a(v | g(v))."""
        if attribute not in self.log_q:
            return coarse
        g = np.asarray(self.groups[attribute], dtype=np.intp)
        return np.asarray(coarse)[g] * np.exp(self.log_q[attribute])

    @property
    def merged(self) -> bool:
        """Whether any attribute has a group of two or more values."""
        return bool(self.log_q)

    def maps(self, scope: Sequence[int]) -> Coarsening:
        return tuple(self.groups.get(a, tuple(range(self.fine.sizes[a]))) for a in scope)

    def coarse(self, m: GroupMeasurement) -> GroupMeasurement:
        """A measurement of the fine domain in this one: a coarsened one as it is (its groups
        must be these), a fine marginal summed over the groups, entry noise sd σ√|G|."""
        if m.query is not None:
            raise ValueError("wide queries are functions of the fine values: no coarse space")
        maps = self.maps(m.scope)
        if m.groups is not None:
            if m.groups != maps:
                raise ValueError(f"measurement of {m.scope} coarsened with other groups")
            return GroupMeasurement(m.scope, m.y, m.sd)
        how = Coarsened.of([self.fine.sizes[a] for a in m.scope], maps)
        var = how.sum(np.broadcast_to(np.square(np.asarray(m.sd, dtype=np.float64)),
                                      np.shape(m.y)).astype(np.float64))
        sd: float | FloatArray = np.sqrt(var) if how.groups is not None else m.sd
        return GroupMeasurement(m.scope, np.asarray(how.sum(np.asarray(m.y)), dtype=np.float64),
                                sd)

    def expand(self, model: ScopeModel, fitted: FitResult) -> tuple[ScopeModel, FitResult]:
        """The fitted coarse model written over the fine domain (class docstring): the same
        scopes, each table θ_c,s[g(x_s)] plus log q_a for the first scope holding a; its
        marginals from one pass of the fine junction tree."""
        if model.queries:
            raise ValueError("a coarse model has no wide queries")
        fine = ScopeModel(self.fine, model.scopes)
        theta = fine.zero()
        placed: set[int] = set()
        for k, s in enumerate(model.scopes):
            shape = fine.shapes[k]
            index = Coarsened.of(shape, self.maps(s)).index
            table = fitted.theta[model.offsets[k]: model.offsets[k + 1]][index].reshape(shape)
            for pos, a in enumerate(s):
                if a in self.log_q and a not in placed:
                    table = table + self.log_q[a].reshape(
                        tuple(shape[pos] if i == pos else 1 for i in range(len(s))))
                    placed.add(a)
            theta[fine.offsets[k]: fine.offsets[k + 1]] = table.ravel()
        return fine, FitResult(theta, fine.marginals(theta), fitted.loss, fitted.alpha,
                               fitted.iterations, fitted.oracle_calls)
