"""Shared by the 2-D strategy tests: explicit dense matrices of a product strategy on a small
grid (every measured level pair's cells as rows over the n₁·n₂ grid cells, every rectangle of
the lazy family as a row), for brute-force GLS."""

from __future__ import annotations

import numpy as np

from tessera.schema.domain import Domain
from tessera.strategy.candidates import Strategy
from tessera.workload.ranges import RangeFamily
from tessera.workload.workload import Workload


def grid_workload(n1: int, n2: int, kind: str = "ranges") -> Workload:
    """All rectangles (or 2-D prefixes) over x (n₁ codes) × y (n₂ codes)."""
    dom = Domain.from_dict({"attributes": {"x": {"type": "integer", "min": 0, "max": n1 - 1},
                                           "y": {"type": "integer", "min": 0, "max": n2 - 1}}})
    return Workload.of_ranges(dom, [RangeFamily.of(dom, ["x", "y"], kind)])


def pair_blocks(s: Strategy) -> list[np.ndarray]:
    """One dense block per measured family (level pair): its cells × the grid's cells."""
    wl = s.workload
    n1, n2 = wl.range_families[0].sizes
    out = []
    for p in s.measured.partitions:
        g1 = p.code_to_group(wl.domain, 0)
        g2 = p.code_to_group(wl.domain, 1)
        out.append(np.array([np.multiply.outer(g1 == i, g2 == j).ravel().astype(float)
                             for i in range(g1.max() + 1) for j in range(g2.max() + 1)]))
    return out


def rectangle_matrix(wl: Workload) -> np.ndarray:
    """Every query of the lazy 2-D family as an indicator row over the grid's cells."""
    fam = wl.range_families[0]
    n1, n2 = fam.sizes
    q = []
    (lo1, hi1), (lo2, hi2) = fam.bounds(0), fam.bounds(1)
    for a, b in zip(lo1, hi1):
        for c, d in zip(lo2, hi2):
            m = np.zeros((n1, n2))
            m[a:b, c:d] = 1
            q.append(m.ravel())
    return np.array(q)


def explicit(s: Strategy) -> tuple[np.ndarray, np.ndarray]:
    """(A, Q): the measurement matrix (every measured cell) and the query matrix."""
    return np.vstack(pair_blocks(s)), rectangle_matrix(s.workload)
