"""Composition under maximum overlap vs sequential composition, for t identical queries
(docs/theory.md §3, Smith et al. Thm 6).

t queries, each answered by one noise mechanism with trade-off function f, with maximum overlap
≤ γ: a neighbour change touches at most g queries (g = γ under add/remove, min(2γ, t) under
substitution, or the exact substitution figure of a workload), so the release is f^{⊗g}-DP
instead of f^{⊗t}. This is what ``tessera tradeoff`` prints (:func:`compare_composition`,
with :func:`per_query_parameter` and, for a workload, :func:`overlap_counts`) and draws
(:func:`plot_comparison`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tessera.accounting import pld
from tessera.accounting.composition import PLD_MAX_COPIES, homogeneous_overlap
from tessera.accounting.guarantee import Guarantee
from tessera.accounting.tradeoff import EpsDelta, GaussianDP, TradeOff
from tessera.errors import TesseraError
from tessera.overlap import max_overlap
from tessera.privacy import Neighbours
from tessera.workload.workload import Workload

#: Mechanisms of :func:`compare_composition`: the continuous Gaussian (GDP, closed form) and
#: the PLD-accounted ones.
MECHANISM_NAMES = ("gaussian", "laplace", "discrete_laplace", "discrete_gaussian")
GAUSSIAN_LIKE = ("gaussian", "discrete_gaussian")


@dataclass(frozen=True)
class OverlapCounts:
    """t, γ(Q) and the number of queries one neighbour change touches, for a workload with
    unit weights; ``exact`` when both overlap figures are exact (else proven upper bounds)."""

    queries: int
    gamma: float
    changed: int
    exact: bool


def overlap_counts(
    workload: Workload, neighbours: Neighbours | str, time_limit: float | None = None
) -> OverlapCounts:
    """Both overlap figures are exact values or proven upper bounds (never lower bounds): they
    calibrate the guarantees of :func:`compare_composition`. Every query counts once (unit
    weights; structured families are not expanded) and the two solves share ``time_limit``."""
    rel = Neighbours.parse(neighbours)
    t = workload.n_queries
    # unit weights: the workload's own when they are all 1 (nothing built per cell)
    ones = None if workload.unit_weights else np.ones(t)
    start = time.monotonic()
    share = None if time_limit is None else (
        time_limit / 2 if rel is Neighbours.SUBSTITUTE else time_limit)
    add_remove = max_overlap(workload, ones, time_limit=share)
    left = None if time_limit is None else max(0.0, time_limit - (time.monotonic() - start))
    moved = (
        max_overlap(workload, ones, neighbours=Neighbours.SUBSTITUTE, time_limit=left)
        if rel is Neighbours.SUBSTITUTE
        else add_remove
    )
    # unit weights: the bounds are integers up to rounding margins added on the safe side
    changed = min(t, math.ceil(moved.bound - 1e-9))
    return OverlapCounts(t, float(add_remove.bound), changed, add_remove.exact and moved.exact)


@dataclass(frozen=True)
class Side:
    """One side of the comparison: ``k`` composed copies of the per-query trade-off, its f and
    the guarantees it implies (the first the headline, then conversions at δ)."""

    name: str
    copies: int
    tradeoff: TradeOff
    guarantees: tuple[Guarantee, ...]


@dataclass(frozen=True)
class CompositionComparison:
    """Overlap vs sequential for t queries of one mechanism (Smith et al. Thm 6)."""

    mechanism: str
    per_query: TradeOff
    queries: int
    gamma: float
    neighbours: Neighbours
    overlap: Side
    sequential: Side

    @property
    def gaussian_like(self) -> bool:
        return self.mechanism in GAUSSIAN_LIKE

    @property
    def utility_gain(self) -> float:
        """U = 1 − g/t (Laplace) or 1 − √(g/t) (Gaussian): the noise-scale reduction at the
        same target (docs/theory.md §3)."""
        r = self.overlap.copies / self.sequential.copies
        return 1.0 - (math.sqrt(r) if self.gaussian_like else r)


def compare_composition(
    mechanism: str,
    parameter: float,
    queries: int,
    gamma: float | None = None,
    *,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    delta: float = 1e-6,
    changed: int | None = None,
    overlap_exact: bool | None = None,
) -> CompositionComparison:
    """``parameter``: per-query μ (Gaussian) or ε (Laplace), i.e. 1/noise scale.

    ``gamma`` defaults to t (no overlap structure); ``changed`` (queries one neighbour change
    touches) defaults to ⌈min(factor·γ, t)⌉ with factor 2 under substitution. The overlap
    guarantee is labelled "upper bound" unless ``overlap_exact`` (default: γ was not given).
    """
    if mechanism not in MECHANISM_NAMES:
        raise TesseraError(f"unknown mechanism {mechanism!r}",
                           hint="one of " + ", ".join(MECHANISM_NAMES))
    rel = Neighbours.parse(neighbours)
    if queries < 1:
        raise TesseraError("--queries must be ≥ 1")
    g = float(queries if gamma is None else gamma)
    if not 1.0 <= g:
        raise TesseraError("--overlap γ must be ≥ 1")
    g = min(g, float(queries))  # γ ≤ t always
    if overlap_exact is None:
        overlap_exact = gamma is None
    if changed is None:
        # A substitution touches I(x) Δ I(y): at most min(2γ, t) queries (docs/theory.md §1).
        factor = 2.0 if rel is Neighbours.SUBSTITUTE else 1.0
        changed = math.ceil(min(factor * g, queries))
    if mechanism == "gaussian":
        per: TradeOff = GaussianDP(parameter)

        def side(name: str, k: int, exact: bool) -> Side:
            f = GaussianDP(parameter * math.sqrt(k))
            gd = Guarantee.gdp(f.mu, rel, basis="exact" if exact else "upper bound (Thm 6)")
            return Side(name, k, f, (gd, gd.at_delta(delta)))
    else:
        per = pld.MECHANISMS[mechanism](1.0 / parameter)
        pure = mechanism in ("laplace", "discrete_laplace")

        def side(name: str, k: int, exact: bool) -> Side:
            if pure and k > PLD_MAX_COPIES:
                # too many copies for a PLD: pure ε·k (its trade-off f_{εk,0}) is still a
                # guarantee (basic composition)
                g = Guarantee.pure(parameter * k, rel, basis="upper bound (Thm 6)")
                return Side(name, k, EpsDelta(parameter * k), (g,))
            f = homogeneous_overlap(per, k)  # (other mechanisms: refused beyond the limit)
            found: list[Guarantee] = []
            if pure:
                found.append(Guarantee.pure(parameter * k, rel, basis="upper bound (Thm 6)"))
            found.append(Guarantee.fdp(f, rel).at_delta(delta))
            return Side(name, k, f, tuple(found))

    return CompositionComparison(
        mechanism=mechanism,
        per_query=per,
        queries=queries,
        gamma=g,
        neighbours=rel,
        overlap=side("overlap", changed, overlap_exact),
        sequential=side("sequential", queries, True),
    )


def per_query_parameter(
    mechanism: str,
    *,
    mu: float | None = None,
    epsilon: float | None = None,
    scale: float | None = None,
) -> float:
    """The ``parameter`` of :func:`compare_composition` (1 / noise scale) from exactly one of
    ``mu`` (Gaussian noise), ``epsilon`` (Laplace noise) or the noise ``scale`` itself.

    Raises :class:`~tessera.errors.TesseraError` (naming the ``tessera tradeoff`` options) for
    none or several of them, the wrong one for the mechanism, or a value that is not finite and
    positive.
    """
    given = [x for x in (mu, epsilon, scale) if x is not None]
    if len(given) != 1:
        raise TesseraError(
            "give exactly one of --mu, --epsilon, --scale",
            hint="--mu for Gaussian noise, --epsilon for Laplace noise",
        )
    if scale is not None:
        if not scale > 0:
            raise TesseraError("--scale must be > 0")
        return 1.0 / scale
    gaussian_like = mechanism in GAUSSIAN_LIKE
    if gaussian_like and epsilon is not None:
        raise TesseraError(f"{mechanism} noise is set by --mu or --scale, not --epsilon")
    if not gaussian_like and mu is not None:
        raise TesseraError(f"{mechanism} noise is set by --epsilon or --scale, not --mu")
    value = float(given[0])
    if not (math.isfinite(value) and value > 0):
        raise TesseraError("the privacy parameter must be finite and > 0")
    return value


def plot_comparison(
    cmp: CompositionComparison, parameter: float, path: str | Path, *, clt: bool = False
) -> Path:
    """Draw both sides of ``cmp`` (built with ``parameter``) as trade-off curves to a PNG at
    ``path``. With ``clt``, for the PLD-accounted mechanisms, each side's CLT approximation
    is drawn too, labelled as not a guarantee. Returns the path written."""
    from tessera.accounting.composition import clt_approximation
    from tessera.accounting.plot import plot_tradeoffs

    curves: list[tuple[str, object]] = [
        (f"overlap: ⊗^{cmp.overlap.copies}", cmp.overlap.tradeoff),
        (f"sequential: ⊗^{cmp.sequential.copies}", cmp.sequential.tradeoff),
    ]
    if clt and not cmp.gaussian_like:
        curves.append(("CLT, overlap", clt_approximation([parameter] * cmp.overlap.copies)))
        curves.append(("CLT, sequential", clt_approximation([parameter] * cmp.queries)))
    title = f"{cmp.per_query.describe()}: overlap vs sequential ({cmp.neighbours.label})"
    return plot_tradeoffs(curves, path, title=title)  # type: ignore[arg-type]
