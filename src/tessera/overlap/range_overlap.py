r"""γ_w of a lazy range family in closed form (docs/theory.md §3, §10.7).

For one :class:`~tessera.workload.ranges.RangeFamily` (every range or prefix over one or two
ordered attributes, one weight w), a row x lies in c(x) of its queries, c(x) = Π_axes c_a(x_a)
with c_a(v) = (v + 1)(n_a − v) for ranges and n_a − v for prefixes
(:mod:`tessera.workload.ranges` proves it), so

* add/remove: S = h(w) · max_x c(x), attained at x* = argmax (the witness) — exact;
* substitute: the queries holding exactly one of x, y number
  D(x, y) = c(x) + c(y) − 2 c(x, y), c(x, y) = Π_a c_a(x_a, y_a) (the joint counts,
  (min + 1)(n − max) for ranges, n − max for prefixes), and S = h(w) · max_{x,y} D(x, y),
  found exactly: over the n² code pairs in 1-D; in 2-D as the largest entry of the product
  of the two axes' pair tables [c(x), c(y), c(x, y)] · [c'(x'), c'(y'), −2 c'(x', y')]ᵀ,
  computed in blocks.

Every count is an integer, so the score is exact in floating point up to h(w)'s rounding,
exactly as the other routes. Checked against brute-force enumeration by hypothesis
(``tests/overlap/test_range_overlap.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.overlap.result import OverlapResult, Witness, h
from tessera.privacy import Definition, Neighbours
from tessera.workload.ranges import RangeFamily, RangeQueries, axis_counts, axis_joint

#: Rows of the 2-D substitute table product computed at once.
BLOCK = 2048


def single_family(workload: Any, weights: npt.ArrayLike | None) -> tuple[RangeFamily, float] | None:
    """(the family, its one weight) when ``workload`` (a workload, or its
    :class:`~tessera.workload.ranges.RangeQueries`) is one lazy range family whose queries all
    carry one weight (explicit ``weights`` included); else None (the general routes)."""
    queries = getattr(workload, "queries", workload)  # (a workload, or its queries)
    fams = queries.families if isinstance(queries, RangeQueries) else None
    if fams is None or len(fams) != 1 or (weights is None
                                          and not hasattr(workload, "weight_array")):
        return None
    w = np.asarray(workload.weight_array() if weights is None else weights, dtype=np.float64)
    if w.shape != (fams[0].n_queries,) or not w.size or not np.all(w == w[0]):
        return None
    return fams[0], float(w[0])


def _substitute_pair(f: RangeFamily) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """max_{x,y} D(x, y) and a pair attaining it (module docs)."""
    tables = []
    for n in f.sizes:
        c = axis_counts(n, f.kind)
        joint = axis_joint(n, f.kind)
        tables.append((c[:, None] * np.ones(n, dtype=np.int64)[None, :],
                       c[None, :] * np.ones(n, dtype=np.int64)[:, None], joint))
    if len(tables) == 1:
        cx, cy, j = tables[0]
        d = cx + cy - 2 * j
        k = int(np.argmax(d))
        x, y = np.unravel_index(k, d.shape)
        return int(d.flat[k]), (int(x),), (int(y),)
    (a1, b1, j1), (a2, b2, j2) = tables
    p1 = np.stack([a1.ravel(), b1.ravel(), j1.ravel()], axis=1).astype(np.float64)
    q2 = np.stack([a2.ravel(), b2.ravel(), -2 * j2.ravel()], axis=1).astype(np.float64)
    best, arg = -1, (0, 0)
    for start in range(0, len(p1), BLOCK):
        block = p1[start:start + BLOCK] @ q2.T  # integers below 2^53: exact in float64
        k = int(np.argmax(block))
        r, c = np.unravel_index(k, block.shape)
        if block[r, c] > best:
            best, arg = int(round(block[r, c])), (start + int(r), int(c))
    n1, n2 = f.sizes
    x1, y1 = np.unravel_index(arg[0], (n1, n1))
    x2, y2 = np.unravel_index(arg[1], (n2, n2))
    return best, (int(x1), int(x2)), (int(y1), int(y2))


def _point(domain: Any, f: RangeFamily, cell: tuple[int, ...]) -> tuple[int, ...]:
    """A full domain point with the family's attributes at ``cell``, the others at code 0."""
    x = [0] * len(domain)
    for a, v in zip(f.attributes, cell):
        x[domain.index(a)] = v
    return tuple(x)


def solve_range_family(domain: Any, f: RangeFamily, weight: float, comp: Definition,
                       neighbours: Neighbours) -> OverlapResult:
    """γ_w of one range family with every weight ``weight`` (module docs): exact."""
    hw = float(h(comp, [weight])[0])
    if neighbours is Neighbours.SUBSTITUTE:
        count, cx, cy = _substitute_pair(f)
        qs = np.setxor1d(f.containing(cx), f.containing(cy))
        witness = Witness(_point(domain, f, cx), tuple(qs.tolist()), _point(domain, f, cy))
    else:
        c = f.counts()
        k = int(np.argmax(c))
        cell = tuple(int(v) for v in np.unravel_index(k, c.shape))
        count = int(c.flat[k])
        witness = Witness(_point(domain, f, cell), tuple(f.containing(cell).tolist()))
    score = hw * count
    if len(witness.queries) != count:  # the witness must attain the closed form
        raise RuntimeError(f"range family witness holds {len(witness.queries)} queries, "
                           f"the closed form says {count}: a bug")
    return OverlapResult(comp, neighbours, score, score, True,
                         f"range family closed form ({f.kind} over "
                         f"{' × '.join(f.attributes)})",
                         witness, f.n_queries, hw * f.n_queries)
