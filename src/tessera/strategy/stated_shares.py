"""A candidate on a certificate's stated shares (``tessera verify``; docs/certificate.md, "Stated
shares"; docs/theory.md §10.1, §10.4).

A non-direct candidate's split is the measured workload's weights, its *shares* (ε_f = ε w_f/γ_w,
ρ_f = ρ w_f²/γ_w, γ_w = Σ_f h(w_f) exact by the partition bound): an optimiser's output (the
minimax split of ``--objective max`` by SLSQP, tree level costs, the marginals' allocation)
rounded to :data:`~.context.SHARE_DIGITS` significant digits, and part of the measured workload's
hash. Recomputed on another platform, a share lying at a rounding boundary could round the other
way and change that hash; so a certificate states the shares as used (:func:`shares_of`) and
verify rebuilds the candidate on them (:func:`with_shares`): the same measured queries and
reconstruction as the recomputed candidate, its weights the stated shares, calibrated from
their own γ_w exactly as a release does. What verify then holds them against — the recomputed
candidate's expected error — is :func:`tessera.release.certificate.verify_certificate`'s.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from tessera.errors import TesseraError
from tessera.strategy.context import Context, calibrate
from tessera.strategy.marginal_candidates import calibrate_contrasts
from tessera.strategy.reconstruction import ContrastGLS, Strategy
from tessera.workload.workload import Workload


def shares_of(measured: Workload) -> tuple[float, ...]:
    """The shares of a measured workload in its order: each predicate query's weight, then each
    family's (one per family: its cells share it)."""
    return tuple(float(w) for w in measured.weights) + tuple(
        float(p.weight) for p in measured.partitions)


def with_shares(strategy: Strategy, shares: Sequence[float], ctx: Context) -> Strategy:
    """``strategy`` (a non-direct candidate) with ``shares`` (:func:`shares_of`'s order) as its
    measured workload's weights, recalibrated: its own γ_w of those shares, the noise scales,
    W's expected variances in closed form. Refused (a clear error) when the count differs or a
    share is not a finite positive number."""
    measured = strategy.measured
    k = len(measured.queries)
    if len(shares) != k + len(measured.partitions):
        raise TesseraError(f"{len(shares)} stated shares for the {k + len(measured.partitions)} "
                           f"queries and families {strategy.name!r} measures")
    for i, w in enumerate(shares):
        if not (isinstance(w, float) and math.isfinite(w) and w > 0):
            raise TesseraError(f"stated share {i} ({w!r}) is not a finite positive number")
    reweighted = Workload(measured.domain, measured.queries, measured.names,
                          tuple(shares[:k]), measured.sources,
                          tuple(dataclasses.replace(p, weight=w)
                                for p, w in zip(measured.partitions, shares[k:])))
    recon = strategy.reconstruction
    if isinstance(recon, ContrastGLS):
        return calibrate_contrasts(ctx, strategy.workload, reweighted, recon)
    return calibrate(ctx, strategy.workload, reweighted, recon, strategy.name)
