"""Fast exact paths for range workloads (docs/theory.md §2, §3).

For intervals, pairwise overlap implies joint overlap (Helly's theorem in 1-D, applied per
attribute to boxes), so γ(Q) = ω(G_Q), the clique number of the overlap graph, and the maximum is
attained at a corner of the arrangement. Two sweeps compute the weighted maximum exactly without
building the graph:

* 1-D (every query constrains the same single attribute): sort the 2t endpoints; the running
  sum of the scores of the open intervals is maximal just before some interval closes.
  O(t log t).
* 2-D (queries constrain at most two attributes a, b): sweep a over the elementary segments of its
  breakpoints and keep, for the segments of b, the sum of the scores of the boxes open at the
  current a (range additions on a numpy array), taking the maximum at each a-segment where some
  box closes. O(t·log t + #segments_a · #segments_b) time, O(#segments_b) memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tessera.errors import ResourceError
from tessera.schema.domain import Domain
from tessera.workload.query import Query

MAX_SWEEP_CELLS = 2_000_000_000


def range_attributes(domain: Domain, queries: Sequence[Query]) -> tuple[str, ...] | None:
    """The constrained attributes (domain order) if every query is a range query, else None."""
    names: set[str] = set()
    for q in queries:
        if not q.is_range(domain):
            return None
        names.update(q.scope)
    return tuple(sorted(names, key=domain.index))


def _interval(q: Query, name: str, size: int) -> tuple[int, int]:
    cov = q.predicate(name)
    if cov is None:
        return 0, size
    if not cov:
        return 0, 0
    return cov.min(), cov.max() + 1


def sweep_1d(
    lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64], scores: npt.NDArray[np.float64]
) -> tuple[float, int]:
    """max_c Σ_{i: lo_i ≤ c < hi_i} s_i over integer points c, and a maximising c (empty
    intervals ignored; an all-empty input gives (0, 0))."""
    ok = hi > lo
    lo, hi, s = lo[ok], hi[ok], scores[ok]
    if len(s) == 0:
        return 0.0, 0
    # closings sort before openings at the same coordinate: [lo, hi) is half-open
    coord = np.concatenate([hi, lo])
    delta = np.concatenate([-s, s])
    kind = np.concatenate([np.zeros(len(hi)), np.ones(len(lo))])
    order = np.lexsort((kind, coord))
    running = np.cumsum(delta[order])
    i = int(np.argmax(running))
    return float(running[i]), int(coord[order][i])


def sweep_2d(
    box_a: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    box_b: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    scores: npt.NDArray[np.float64],
) -> tuple[float, tuple[int, int]]:
    """max over integer points (c_a, c_b) of the total score of the boxes containing it."""
    (alo, ahi), (blo, bhi) = box_a, box_b
    ok = (ahi > alo) & (bhi > blo)
    alo, ahi, blo, bhi, s = alo[ok], ahi[ok], blo[ok], bhi[ok], scores[ok]
    if len(s) == 0:
        return 0.0, (0, 0)
    bbreaks = np.unique(np.concatenate([blo, bhi]))
    abreaks = np.unique(np.concatenate([alo, ahi]))
    if len(abreaks) * len(bbreaks) > MAX_SWEEP_CELLS:
        raise ResourceError("2-D sweep too large")
    b_first = np.searchsorted(bbreaks, blo)
    b_last = np.searchsorted(bbreaks, bhi)  # segments b_first .. b_last-1
    a_open = np.searchsorted(abreaks, alo)
    a_close = np.searchsorted(abreaks, ahi)
    column = np.zeros(len(bbreaks), dtype=np.float64)
    best, arg = 0.0, (int(abreaks[0]), int(bbreaks[0]))
    opens = np.argsort(a_open, kind="stable")
    closes = np.argsort(a_close, kind="stable")
    io = ic = 0
    for seg in range(len(abreaks) - 1):
        while ic < len(closes) and a_close[closes[ic]] <= seg:
            i = closes[ic]
            column[b_first[i] : b_last[i]] -= s[i]
            ic += 1
        any_open = False
        while io < len(opens) and a_open[opens[io]] <= seg:
            i = opens[io]
            column[b_first[i] : b_last[i]] += s[i]
            io += 1
            any_open = True
        # a new maximum can only appear right after openings
        if any_open:
            j = int(np.argmax(column))
            if column[j] > best:
                best, arg = float(column[j]), (int(abreaks[seg]), int(bbreaks[j]))
    return best, arg


def range_max_point(
    domain: Domain, queries: Sequence[Query], scores: npt.ArrayLike
) -> tuple[float, tuple[int, ...]] | None:
    """Exact max_x Σ s_q q(x) by a sweep when the workload is ranges over ≤ 2 attributes.

    Returns None when the fast path does not apply. Tautologies add to every point.
    """
    names = range_attributes(domain, queries)
    if names is None or len(names) > 2:
        return None
    s = np.asarray(scores, dtype=np.float64)
    x = [0] * len(domain)
    if not names:
        live = [i for i, q in enumerate(queries) if not q.is_contradiction()]
        return float(s[live].sum()), tuple(x)
    bounds = [
        np.array([_interval(q, n, domain[n].size) for q in queries], dtype=np.int64).reshape(-1, 2)
        for n in names
    ]
    if len(names) == 1:
        value, c = sweep_1d(bounds[0][:, 0], bounds[0][:, 1], s)
        x[domain.index(names[0])] = c
        return value, tuple(x)
    value, (ca, cb) = sweep_2d(
        (bounds[0][:, 0], bounds[0][:, 1]), (bounds[1][:, 0], bounds[1][:, 1]), s
    )
    x[domain.index(names[0])] = ca
    x[domain.index(names[1])] = cb
    return value, tuple(x)
