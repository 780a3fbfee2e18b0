r"""Candidate strategies for a workload W, from public inputs only (docs/theory.md §10).

A strategy is a workload of *counting queries* to measure (``measured``, its weights the
budget shares) and a reconstruction: generalised least squares from its noisy answers to
every query of W. Because the measured queries are counting queries, their noise is calibrated
exactly as a direct release is (Smith et al., Thm 6): from the strategy's own maximum weighted
overlap γ_w — exact or a proven upper bound, :func:`tessera.calibration.workload_cost` — and
the budget split in proportion to the shares, w_q ∝ √c_q (ρ-zCDP) or c_q (pure ε).

Candidates:

* ``direct`` — W itself, identical predicate queries measured once (:func:`merge_duplicates`);
* ``identity`` — marginal workloads: the marginals over W's maximal scopes; one-attribute
  workloads: the attribute's histogram;
* ``residual`` — marginal workloads: under ρ-zCDP and add/remove neighbours, every residual of
  W's downward closure measured alone through integer contrasts (:mod:`~.contrasts`:
  ResidualPlanner's mechanism and closed-form allocation with discrete noise); otherwise every
  marginal of the downward closure, allocation and GLS in the residual basis (:mod:`~.marginals`);
* ``hierarchical`` — one-attribute workloads (ranges, prefixes, hierarchies): the b-ary interval
  tree, b and the per-level allocation chosen by expected error (:mod:`~.intervals`); all
  rectangles (or 2-D prefixes) over two ordered attributes: the product of two 1-D trees,
  every level pair measured (:mod:`~.rectangles`, GLS by the Kronecker structure);
* ``identity`` of two ordered attributes: their 2-D histogram (:mod:`~.rectangles`).

Each candidate's expected variance of every query of W is computed in closed form with the
continuous model of the noise (σ² for the discrete Gaussian, 2b² for the discrete Laplace, both
upper bounds on the discrete variances); a release recomputes them exactly with the discrete
variances of the scales it used (:meth:`Strategy.estimate`).

This module is the candidates' public API; each idea lives in its own module:
:mod:`~.reconstruction` (the :class:`Strategy` record, the GLS reconstructions, the continuous
noise model), :mod:`~.context` (the public inputs and the calibration of a measured workload),
:mod:`~.direct`, :mod:`~.marginal_candidates` (identity, residual, residual contrasts) and
:mod:`~.interval_candidates` (trees, histograms, rectangles); the split optimisers they call
are :mod:`~.marginals`, :mod:`~.tree_allocation` and :mod:`~.contrasts`; :mod:`~.stated_shares`
rebuilds a candidate on a certificate's stated shares (``tessera verify``).
"""
from __future__ import annotations

from tessera.strategy.context import SHARE_DIGITS, Context, calibrate, shares_for
from tessera.strategy.direct import direct, merge_duplicates, root_weights
from tessera.strategy.interval_candidates import (
    OTHER_BRANCHINGS,
    interval_strategy,
    no_tree_reason,
    one_attribute,
    other_branchings,
    rectangle_strategy,
)
from tessera.strategy.marginal_candidates import (
    DROP_BELOW,
    contrast_layout,
    contrast_strategy,
    marginal_scopes,
    marginal_strategy,
)
from tessera.strategy.reconstruction import (
    ContrastGLS,
    Copy,
    IntervalGLS,
    MarginalGLS,
    Reconstruction,
    Strategy,
    model_variance,
    worst_cell,
)

__all__ = [
    "DROP_BELOW",
    "OTHER_BRANCHINGS",
    "SHARE_DIGITS",
    "ContrastGLS",
    "Context",
    "Copy",
    "IntervalGLS",
    "MarginalGLS",
    "Reconstruction",
    "Strategy",
    "calibrate",
    "contrast_layout",
    "contrast_strategy",
    "direct",
    "interval_strategy",
    "marginal_scopes",
    "marginal_strategy",
    "merge_duplicates",
    "model_variance",
    "no_tree_reason",
    "one_attribute",
    "other_branchings",
    "rectangle_strategy",
    "root_weights",
    "shares_for",
    "worst_cell",
]
