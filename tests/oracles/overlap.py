"""Brute-force references for the overlap tests (docs/theory.md §3). Exponential by design; guarded
by
size limits. (Formerly ``tessera.overlap.brute``; nothing in the library uses them.)

* :func:`subsets_max_score`: the naive 2^t enumeration, max{Σ_{q∈Q'} h(w_q) : C_{Q'} ≠ ∅}, with
  the polynomial joint-coverage test of :func:`tessera.workload.query.jointly_overlap`;
* :func:`points_max_score`: max_x Σ_{q(x)=1} h(w_q) by enumerating every point of a tiny 𝔻;
* :func:`points_max_substitution`: max_{x,y} Σ_q h(w_q)·[q(x) ≠ q(y)] over a tiny 𝔻;
* :func:`is_proper`: whether a colouring of the overlap graph is proper.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tessera.errors import ResourceError
from tessera.schema.domain import Domain
from tessera.workload.query import Query, jointly_overlap

MAX_SUBSET_QUERIES = 20
MAX_POINTS = 2_000_000


def subsets_max_score(
    domain: Domain, queries: Sequence[Query], scores: npt.ArrayLike
) -> tuple[float, tuple[int, ...]]:
    """max over jointly overlapping Q' ⊆ Q of Σ_{q∈Q'} s_q, and the best Q' (2^t subsets)."""
    t = len(queries)
    if t > MAX_SUBSET_QUERIES:
        raise ResourceError(
            f"{t} queries: 2^t subset enumeration is limited to {MAX_SUBSET_QUERIES}"
        )
    s = np.asarray(scores, dtype=np.float64)
    best, best_set = 0.0, ()
    for mask in range(1, 1 << t):
        members = tuple(i for i in range(t) if mask >> i & 1)
        value = float(s[list(members)].sum())
        if value > best and jointly_overlap(domain, (queries[i] for i in members)):
            best, best_set = value, members
    return best, best_set


def all_points(domain: Domain) -> npt.NDArray[np.int64]:
    """Every point of 𝔻 as rows of codes (tiny domains only)."""
    if domain.size > MAX_POINTS:
        raise ResourceError(
            f"|𝔻| = {domain.size} is too large to enumerate (limit {MAX_POINTS})"
        )
    grids = np.meshgrid(*[np.arange(k) for k in domain.sizes], indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1).astype(np.int64)


def incidence(
    domain: Domain, queries: Sequence[Query], points: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """(n_points, t): q(x) for every point and query, via :meth:`Query.evaluate`."""
    if not queries:
        return np.zeros((len(points), 0), dtype=bool)
    return np.stack([q.evaluate(domain, points) for q in queries], axis=1)


def points_max_score(
    domain: Domain, queries: Sequence[Query], scores: npt.ArrayLike
) -> tuple[float, tuple[int, ...]]:
    """max_x Σ_{q(x)=1} s_q by enumerating 𝔻, and a maximising x."""
    pts = all_points(domain)
    values = incidence(domain, queries, pts) @ np.asarray(scores, dtype=np.float64)
    i = int(np.argmax(values))
    return float(values[i]), tuple(int(c) for c in pts[i])


def points_max_substitution(
    domain: Domain, queries: Sequence[Query], scores: npt.ArrayLike
) -> tuple[float, tuple[int, ...], tuple[int, ...]]:
    """max_{x,y} Σ_q s_q [q(x) ≠ q(y)] by enumerating the distinct I(x) of 𝔻, and (x, y)."""
    pts = all_points(domain)
    inc = incidence(domain, queries, pts)
    rows, first = np.unique(inc, axis=0, return_index=True)
    r = rows.astype(np.float64)
    s = np.asarray(scores, dtype=np.float64)
    # Σ_q s_q (a_q xor b_q) = s·a + s·b − 2 Σ_q s_q a_q b_q
    own = r @ s
    dist = own[:, None] + own[None, :] - 2.0 * (r * s) @ r.T
    i, j = np.unravel_index(int(np.argmax(dist)), dist.shape)
    return (
        float(dist[i, j]),
        tuple(int(c) for c in pts[first[i]]),
        tuple(int(c) for c in pts[first[j]]),
    )


def points_overlapping_sets(domain: Domain, queries: Sequence[Query]) -> set[frozenset[int]]:
    """The maximal sets I(x) over 𝔻 (the maximal overlapping sets I_2), by enumeration."""
    inc = incidence(domain, queries, all_points(domain))
    sets = {frozenset(np.flatnonzero(row).tolist()) for row in np.unique(inc, axis=0)}
    return {a for a in sets if not any(a < b for b in sets)}


def is_proper(adj: npt.NDArray[np.bool_], colour: npt.ArrayLike) -> bool:
    """Whether ``colour`` (a colour per vertex) gives no edge of ``adj`` the same colour at both
    ends (formerly ``tessera.overlap.colouring.is_proper``)."""
    c = np.asarray(colour)
    return bool(not (adj & (c[:, None] == c[None, :])).any())


__all__ = [
    "all_points",
    "incidence",
    "is_proper",
    "points_max_score",
    "points_max_substitution",
    "points_overlapping_sets",
    "subsets_max_score",
]
