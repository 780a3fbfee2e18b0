"""Maximum overlap under substitution neighbours (docs/theory.md §1, §3).

When a row moves from x to y the queries in I(x) Δ I(y) change, so the figure to bound is

    S_sub = max_{x,y} Σ_q s_q · [q(x) ≠ q(y)]        (s_q = h(w_q)),

not the add/remove score S = max_x Σ_{q∈I(x)} s_q. Always S_sub ≤ min(2·S, Σ_q s_q), since
I(x) Δ I(y) ⊆ I(x) ∪ I(y) ⊆ Q; a partition has S = 1 and S_sub = 2.

Exact method: enumerate the distinct realisable sets I(x) attribute by attribute over value
classes (:func:`realisable_sets`, guarded by a state limit), then take the maximum weighted
symmetric difference over pairs. Beyond the limit: the bound min(2·S_upper, Σ s) with a witness
pair found by a second max-point solve over the queries that x misses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.errors import ResourceError
from tessera.overlap.atoms import undominated, workload_atoms
from tessera.schema.domain import Domain
from tessera.workload.query import Query

MAX_STATES = 20_000
MAX_PAIR_STATES = 6_000


@dataclass(frozen=True)
class RealisableSets:
    """Every distinct I(x), x ∈ 𝔻, as rows of ``incidence`` (n_sets, t); ``points[i]`` realises
    row i."""

    incidence: npt.NDArray[np.bool_]
    points: npt.NDArray[np.int64]


def realisable_sets(
    domain: Domain,
    queries: Sequence[Query],
    *,
    max_states: int = MAX_STATES,
    only_maximal: bool = False,
) -> RealisableSets:
    """The distinct sets I(x) = {q : q(x) = 1} over all x ∈ 𝔻, without enumerating 𝔻.

    Fixes one attribute at a time, keeping the distinct partial incidence vectors (at most
    ``max_states``; :class:`ResourceError` beyond). With ``only_maximal`` dominated atoms are
    skipped, which keeps every maximal set (it may drop non-maximal ones).
    """
    t = len(queries)
    base = np.fromiter((not q.is_contradiction() for q in queries), dtype=bool, count=t)
    states = base[None, :].copy()
    points = np.zeros((1, len(domain)), dtype=np.int64)
    for at in workload_atoms(domain, queries):
        keep = undominated(at) if only_maximal else np.arange(at.n_atoms)
        full = at.full_membership(t)[keep]  # (a, t)
        new = (states[:, None, :] & full[None, :, :]).reshape(-1, t)
        new_points = np.repeat(points, len(keep), axis=0)
        new_points[:, at.position] = np.tile(at.representative[keep], len(states))
        packed = np.packbits(new, axis=1)
        _, first = np.unique(packed, axis=0, return_index=True)
        if len(first) > max_states:
            raise ResourceError(
                f"more than {max_states} distinct overlap patterns",
                hint="use the bound (--neighbours add-remove) or a smaller workload",
            )
        states, points = new[first], new_points[first]
    return RealisableSets(states, points)


def maximal_rows(incidence: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Indices of rows that are not strict subsets of another row (rows distinct)."""
    r = incidence.astype(np.float32)
    sizes = r.sum(axis=1)
    inter = r @ r.T  # |A ∩ B|, exact in float32 for t < 2^24
    contained = (inter == sizes[:, None]) & (sizes[None, :] > sizes[:, None])
    return np.flatnonzero(~contained.any(axis=1)).astype(np.int64)


def exact_substitution(
    domain: Domain, queries: Sequence[Query], scores: npt.ArrayLike
) -> tuple[float, tuple[int, ...], tuple[int, ...]]:
    """max_{x,y} Σ_q s_q [q(x) ≠ q(y)] and a maximising pair (raises ResourceError if too big)."""
    sets = realisable_sets(domain, queries, max_states=MAX_PAIR_STATES)
    return best_pair(sets.incidence, sets.points, scores)


def best_pair(
    incidence: npt.NDArray[np.bool_], points: npt.NDArray[np.int64], scores: npt.ArrayLike
) -> tuple[float, tuple[int, ...], tuple[int, ...]]:
    """max over pairs of rows a, b of Σ_q s_q [a_q ≠ b_q], and the points realising the pair
    (``points[i]`` realises row i; rows are the realisable sets I(x))."""
    r = incidence.astype(np.float64)
    s = np.asarray(scores, dtype=np.float64)
    own = r @ s
    # Σ_q s_q (a_q xor b_q) = s·a + s·b − 2 Σ_q s_q a_q b_q
    dist = own[:, None] + own[None, :] - 2.0 * ((r * s) @ r.T)
    i, j = np.unravel_index(int(np.argmax(dist)), dist.shape)
    return (
        max(float(dist[i, j]), 0.0),
        tuple(int(c) for c in points[i]),
        tuple(int(c) for c in points[j]),
    )
