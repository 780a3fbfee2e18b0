"""A strategy — what is measured, its calibration, the expected error of every query of W —
and the generalised least-squares reconstructions that read W's answers from its noisy answers
(docs/theory.md §10; :mod:`~.candidates` lists the builders).

Every reconstruction maps the measured queries' noisy answers (expanded order) and the exact
variance of each one's noise to W's answers and their exact variances: ``direct`` copies
(:class:`Copy`), marginals use the residual basis (:class:`MarginalGLS`, ResidualPlanner's closed
form), one ordered attribute its tree levels (:class:`IntervalGLS`), residual contrasts their own
GLS (:class:`ContrastGLS`). Expected errors use the continuous noise model
(:func:`model_variance`: σ² or 2b², upper bounds on the discrete variances); :func:`worst_cell`
is the ``max`` objective of a strategy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from tessera.overlap import OverlapResult
from tessera.privacy import Definition
from tessera.strategy.contrasts import ResidualContrasts
from tessera.strategy.intervals import (
    IntervalDesign,
    Spans,
)
from tessera.strategy.marginals import (
    MarginalDesign,
    Scope,
)
from tessera.workload.workload import Workload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class Reconstruction(Protocol):
    """GLS from the measured queries' noisy answers (expanded order) to W's queries."""

    name: str

    def variances(self, noise_variance: FloatArray) -> FloatArray: ...

    def answers(self, noisy: FloatArray, noise_variance: FloatArray) -> FloatArray: ...


@dataclass(frozen=True, eq=False)
class Strategy:
    """What to measure, its calibration and the expected error of every query of W.

    ``scales``: the noise scale of every measured query (b or σ) from ``overlap`` (γ_w of the
    measured queries with their shares); ``expected``: Var of every query of W (expanded
    order) under the continuous noise model; ``total``: Σ_q w_q ``expected[q]``."""

    name: str
    workload: Workload
    measured: Workload
    reconstruction: Reconstruction
    overlap: OverlapResult
    scales: FloatArray
    expected: FloatArray
    total: float
    #: residual contrasts (:mod:`~.contrasts`): the measured families are charged as marginals
    #: but their noise is added to these integer contrasts, σ_A = ``scales`` × Δ_A
    contrasts: ResidualContrasts | None = None
    #: how ``scales`` split the budget: ``shares`` (the measured workload's weights, set by the
    #: candidate's closed form) or ``optimal`` (direct: the least total variance,
    #: :mod:`tessera.calibration.optimal`)
    split: str = "shares"

    @property
    def rmse(self) -> float:
        """√(mean expected variance) over the released queries (weight > 0)."""
        released = self.workload.weight_array() > 0
        return math.sqrt(float(np.mean(self.expected[released])))

    def estimate(self, noisy: npt.ArrayLike, noise_variance: npt.ArrayLike
                 ) -> tuple[FloatArray, FloatArray]:
        """(answers, exact variances) of W's queries from the measured noisy answers and the
        exact variance of each measured query's noise."""
        v = np.asarray(noise_variance, dtype=np.float64)
        y = np.asarray(noisy, dtype=np.float64)
        return self.reconstruction.answers(y, v), self.reconstruction.variances(v)


# -- reconstructions --------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Copy:
    """Direct: query q of W is measured query ``index[q]`` (duplicates share one)."""

    index: IntArray
    name: str = "direct (each query's own noisy answer; duplicates measured once)"

    def variances(self, noise_variance: FloatArray) -> FloatArray:
        return noise_variance[self.index]

    def answers(self, noisy: FloatArray, noise_variance: FloatArray) -> FloatArray:
        return noisy[self.index]


@dataclass(frozen=True, eq=False)
class MarginalGLS:
    """GLS in the residual basis (:class:`~.marginals.MarginalDesign`): W's families are the
    targets (``target_of[f]`` = the design's target of family f)."""

    design: MarginalDesign
    starts: IntArray  # first measured index of each measured scope
    target_of: tuple[int, ...]
    name: str = "GLS, residual basis (ResidualPlanner closed form)"

    def _precisions(self, noise_variance: FloatArray) -> FloatArray:
        return 1.0 / noise_variance[self.starts]

    def variances(self, noise_variance: FloatArray) -> FloatArray:
        per_target = self.design.variances(self._precisions(noise_variance))
        return np.concatenate([np.full(self.design.cells(self.design.targets[t]),
                                       per_target[t]) for t in self.target_of])

    def answers(self, noisy: FloatArray, noise_variance: FloatArray) -> FloatArray:
        d = self.design
        bounds = list(self.starts) + [len(noisy)]
        y = {a: noisy[bounds[k]:bounds[k + 1]] for k, a in enumerate(d.measured)}
        u = dict(zip(d.measured, self._precisions(noise_variance)))
        est = d.reconstruct(y, u)
        return np.concatenate([est[d.targets[t]].ravel() for t in self.target_of])


@dataclass(frozen=True, eq=False)
class IntervalGLS:
    """GLS over one attribute's histogram (:class:`~.intervals.IntervalDesign`)."""

    design: IntervalDesign
    starts: IntArray  # first measured index of each level (its groups follow in order)
    spans: Spans
    name: str = "GLS over one attribute (dense n × n, tree levels)"

    def _split(self, noise_variance: FloatArray) -> FloatArray:
        return 1.0 / noise_variance[self.starts]

    def variances(self, noise_variance: FloatArray) -> FloatArray:
        return self.design.variances(self._split(noise_variance), self.spans)

    def answers(self, noisy: FloatArray, noise_variance: FloatArray) -> FloatArray:
        bounds = list(self.starts) + [len(noisy)]
        ys = [noisy[bounds[k]:bounds[k + 1]] for k in range(len(self.starts))]
        return self.design.reconstruct(ys, self._split(noise_variance), self.spans)


@dataclass(frozen=True, eq=False)
class ContrastGLS:
    """GLS from residual contrasts (:class:`~.contrasts.ResidualContrasts`): the measured
    workload is the tautology (∅) then one marginal family per residual scope, ``starts[k]``
    the first measured index of scope k; the noisy values are each scope's contrasts in turn;
    ``noise_variance[q]`` is the variance of the contrast noise of q's family. W's family f
    reads target ``target_of[f]`` (−1: weight 0, not released: NaN, variance ∞)."""

    contrasts: ResidualContrasts
    starts: IntArray
    target_of: tuple[int, ...]
    cells: tuple[int, ...]  # of every family of W
    name: str = ("GLS from residual contrasts (ResidualPlanner's mechanism, integer Helmert "
                 "contrasts, discrete Gaussian)")

    def _by_scope(self, noise_variance: FloatArray) -> dict[Scope, float]:
        return {s: float(noise_variance[k]) for s, k in zip(self.contrasts.scopes, self.starts)}

    def _expand(self, per_target: dict[Scope, FloatArray], fill: float) -> FloatArray:
        rc = self.contrasts
        return np.concatenate([per_target[rc.targets[t]].ravel() if t >= 0 else
                               np.full(n, fill) for t, n in zip(self.target_of, self.cells)])

    def variances(self, noise_variance: FloatArray) -> FloatArray:
        var = self.contrasts.variances(self._by_scope(noise_variance))
        return self._expand(var, np.inf)

    def answers(self, noisy: FloatArray, noise_variance: FloatArray) -> FloatArray:
        return self._expand(self.contrasts.reconstruct(self.contrasts.split(noisy)), np.nan)


# -- the continuous noise model ---------------------------------------------------------------
def model_variance(definition: Definition) -> Callable[[FloatArray], FloatArray]:
    """Var of the noise of scale s: σ² (Gaussian, ρ-zCDP) or 2b² (Laplace, pure ε); both
    bound the discrete mechanisms' variances from above."""
    if definition is Definition.PURE:
        return lambda s: 2.0 * s * s
    return lambda s: s * s



def worst_cell(s: Strategy) -> float:
    """max_q w_q Var_q over W's released queries: the ``max`` objective of a candidate."""
    w = s.workload.weight_array()
    return float(np.max(w[w > 0] * s.expected[w > 0]))
