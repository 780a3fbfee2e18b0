"""Value classes ("atoms") of one attribute with respect to a set of predicates (SPEC §2, §3).

For the max-weight point problem max_x Σ_q y_q q(x) only the *membership pattern* of x_a matters:
two codes that lie in exactly the same predicates φ_{q,a} are interchangeable. The atoms of
attribute a partition its codes into such classes. They come from the interval breakpoints of the
predicates' :class:`~tessera.intervals.IntervalSet` spans, so an attribute with a million codes
costs as much as its number of distinct breakpoints, never its size:

* breakpoints B = {0, |A|} ∪ {every span end}; the elementary segments [B_i, B_{i+1}) each have
  constant membership;
* segments with identical membership columns are merged into one atom (set predicates make
  non-adjacent segments equivalent, e.g. all the codes no predicate mentions).

Each predicate is then the union of the atoms it contains, and two predicates intersect iff they
share an atom.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.domain import Domain
from tessera.errors import ResourceError
from tessera.intervals import IntervalSet
from tessera.query import Query

#: Largest membership matrix (predicates × segments) built without complaint.
MAX_MEMBERSHIP_CELLS = 400_000_000


@dataclass(frozen=True, eq=False)
class AttributeAtoms:
    """The atoms of one constrained attribute.

    ``membership[c, i]`` is True iff atom ``c`` ⊆ φ_{queries[i], a}; ``queries`` lists the indices
    (into the workload) of the queries that constrain the attribute. ``representative[c]`` is a
    code inside atom ``c`` (its smallest) and ``n_codes[c]`` its number of codes.
    """

    name: str
    position: int
    size: int
    queries: npt.NDArray[np.int64]
    membership: npt.NDArray[np.bool_]
    representative: npt.NDArray[np.int64]
    n_codes: npt.NDArray[np.int64]

    @property
    def n_atoms(self) -> int:
        return int(self.membership.shape[0])

    def full_membership(self, n_queries: int) -> npt.NDArray[np.bool_]:
        """(n_atoms, n_queries): queries that do not constrain the attribute contain every atom."""
        out = np.ones((self.n_atoms, n_queries), dtype=bool)
        out[:, self.queries] = self.membership
        return out


def attribute_atoms(
    name: str, position: int, size: int, coverages: Sequence[IntervalSet], queries: Sequence[int]
) -> AttributeAtoms:
    """Atoms of an attribute of ``size`` codes for the predicates ``coverages`` (one per query)."""
    k = len(coverages)
    # every span of every predicate, flat: (predicate index, lo, hi), clipped to the attribute
    n_spans = np.fromiter((len(cov.spans) for cov in coverages), dtype=np.int64, count=k)
    flat = np.fromiter(
        (v for cov in coverages for span in cov.spans for v in span), dtype=np.int64,
        count=2 * int(n_spans.sum()),
    ).reshape(-1, 2)
    flat = np.clip(flat, 0, size)
    owner = np.repeat(np.arange(k, dtype=np.int64), n_spans)
    breaks = np.unique(np.concatenate([np.array([0, size], dtype=np.int64), flat.ravel()]))
    n_seg = len(breaks) - 1
    if k * n_seg > MAX_MEMBERSHIP_CELLS:
        raise ResourceError(
            f"attribute {name!r}: {k} predicates × {n_seg} value classes is too large to tabulate",
            hint="coarsen the attribute or split the workload",
        )
    # difference array: +1 at the first segment of a span, −1 after its last
    first = owner * (n_seg + 1) + np.searchsorted(breaks, flat[:, 0])
    last = owner * (n_seg + 1) + np.searchsorted(breaks, flat[:, 1])
    diff = np.zeros(k * (n_seg + 1), dtype=np.int32)
    np.add.at(diff, first, 1)
    np.add.at(diff, last, -1)
    diff = diff.reshape(k, n_seg + 1)
    seg_member = np.cumsum(diff[:, :n_seg], axis=1) > 0  # (k, n_seg)
    seg_len = np.diff(breaks)
    keep = seg_len > 0
    seg_member, seg_start, seg_len = seg_member[:, keep], breaks[:-1][keep], seg_len[keep]
    # merge segments with identical membership columns
    packed = np.packbits(seg_member.T, axis=1) if k else np.zeros((seg_member.shape[1], 0), np.uint8)
    _, first_idx, inverse = np.unique(packed, axis=0, return_index=True, return_inverse=True)
    inverse = np.asarray(inverse).ravel()
    order = np.argsort(first_idx)  # atoms in code order of their first segment
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    atom_of_seg = rank[inverse]
    n_atoms = len(order)
    n_codes = np.zeros(n_atoms, dtype=np.int64)
    np.add.at(n_codes, atom_of_seg, seg_len)
    first_seg = first_idx[order]
    return AttributeAtoms(
        name=name,
        position=position,
        size=size,
        queries=np.asarray(queries, dtype=np.int64),
        membership=np.ascontiguousarray(seg_member[:, first_seg].T),
        representative=seg_start[first_seg].astype(np.int64),
        n_codes=n_codes,
    )


def workload_atoms(domain: Domain, queries: Sequence[Query]) -> tuple[AttributeAtoms, ...]:
    """Atoms of every attribute that some query constrains, in domain order."""
    by_attr: dict[str, tuple[list[IntervalSet], list[int]]] = {}
    for i, q in enumerate(queries):
        for p in q.predicates:
            covs, idx = by_attr.setdefault(p.attribute, ([], []))
            covs.append(p.coverage)
            idx.append(i)
    out = []
    for name in sorted(by_attr, key=domain.index):
        covs, idx = by_attr[name]
        out.append(attribute_atoms(name, domain.index(name), domain[name].size, covs, idx))
    return tuple(out)


def undominated(atoms: AttributeAtoms, max_atoms: int = 4096) -> npt.NDArray[np.int64]:
    """Indices of atoms whose query set is not a strict subset of another atom's.

    With non-negative weights, moving x_a from a dominated atom to its dominator never lowers
    Σ_q y_q q(x), so the maximum is attained on undominated atoms (all atoms are kept when there
    are more than ``max_atoms``: the test is quadratic).
    """
    m = atoms.membership
    n = m.shape[0]
    if n <= 1 or n > max_atoms or m.shape[1] == 0:
        return np.arange(n, dtype=np.int64)
    mf = m.astype(np.float32)
    # missing[b, a] = #queries containing atom b but not atom a; b ⊆ a iff it is 0
    missing = mf @ (1.0 - mf).T
    np.fill_diagonal(missing, 1.0)
    dominated = (missing == 0).any(axis=1)  # rows are distinct, so ⊆ means ⊂
    return np.flatnonzero(~dominated).astype(np.int64)
