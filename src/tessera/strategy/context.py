"""The public inputs a candidate strategy is calibrated with, and its calibration (docs/theory.md
§10): a measured workload's own γ_w (exact or a proven upper bound, Smith et al., Thm 6), the
noise scales of its shares, W's expected variances — and the shares themselves, rounded to
:data:`SHARE_DIGITS` significant digits (a certificate records them as used and ``tessera
verify`` takes them from it: :mod:`~.stated_shares`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.calibration.cost import workload_cost
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.strategy.reconstruction import Reconstruction, Strategy, model_variance
from tessera.workload.workload import Workload

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


#: A release's check of an optimised split (:attr:`Context.certify`): (measured queries, their
#: scales) → the scales it proves.
Certify = Callable[[Workload, FloatArray], FloatArray]

#: Significant digits the shares are rounded to (a certificate states them as used).
SHARE_DIGITS = 6


def shares_for(costs: FloatArray, definition: Definition) -> FloatArray:
    """Weights w with the budget split c_q ∝ h(w_q): w = √c (zCDP) or c (pure), normalised
    to max 1 and rounded to :data:`SHARE_DIGITS` significant digits."""
    w = np.sqrt(costs) if definition is not Definition.PURE else np.asarray(costs, float)
    w = w / w.max()
    return np.array([float(f"{x:.{SHARE_DIGITS}g}") for x in w])


# -- candidates -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Context:
    """The public inputs a candidate is calibrated with."""

    definition: Definition
    total: float
    neighbours: Neighbours
    time_limit: float | None = 60.0
    #: the error the split minimises (:func:`~.direct.direct`): ``total`` or ``max``
    objective: str = "total"
    #: whether :func:`~.direct.direct` may optimise its split (``False``: the weights as shares, as
    #: certificates made before the optimal split record it)
    optimise_direct: bool = True
    #: under ``max``, whether marginal and tree candidates take the minimax split (``False``:
    #: the better of the total-optimal and the equal split, as certificates made before the
    #: minimax record it)
    minimax: bool = True
    #: ``tessera verify``: a certificate's stated optimal split of ``direct``'s measured queries
    #: (∞: not released), used in place of the optimiser, which is not run again (None: run it)
    direct_scales: tuple[float, ...] | None = None
    #: under ``max`` (with ``minimax``), whether 2-D products of trees take the minimax split of
    #: each axis (``False``: the split chosen for the total, as certificates made before it
    #: record it: ``strategy.max_split: minimax``)
    minimax_rectangles: bool = True
    #: whose presence the budget protects: one row, or one person of at most K rows, whose γ_w
    #: is K·γ (pure) — every candidate's noise grows by K (docs/theory.md §3.13)
    unit: PrivacyUnit = ONE_ROW
    #: a release: the check ``tessera verify`` runs on an optimised split of ``direct``'s
    #: measured queries, given them and its scales, returning the scales it proves (widened if
    #: the proof needs a margin: :func:`tessera.release.plan.certify`), so that the candidate
    #: — chosen or recorded in the certificate's table — is the split verify re-proves
    #: (None: the optimiser's split as it is; verify takes a certificate's split as stated)
    certify: Certify | None = None


def calibrate(ctx: Context, workload: Workload, measured: Workload,
               reconstruction: Reconstruction, name: str) -> Strategy:
    """The strategy measuring ``measured`` (its shares the budget split) for W: its own γ_w,
    the noise scales, and W's expected variances under the continuous model."""
    cost = workload_cost(measured, definition=ctx.definition, neighbours=ctx.neighbours,
                         time_limit=ctx.time_limit, unit=ctx.unit)
    scales = cost.scales(ctx.total)
    expected = reconstruction.variances(model_variance(ctx.definition)(scales))
    w = workload.weight_array()
    total = float(w[w > 0] @ expected[w > 0])  # (weight 0: not released, variance ∞)
    return Strategy(name, workload, measured, reconstruction, cost.weighted, scales, expected,
                    total)
