"""Value classes ("atoms") as the overlap solvers search them (docs/theory.md §2, §3).

For the max-weight point problem max_x Σ_q y_q q(x) only the *membership pattern* of x_a matters:
two codes that lie in exactly the same predicates φ_{q,a} are interchangeable. The classes are
built once, by :mod:`tessera.workload.value_classes` (from the interval breakpoints: an attribute
with a million codes costs as much as its number of distinct breakpoints); this module is the
overlap view of them: per constrained attribute, the membership of each atom in each query
constraining it (columns indexed by ``queries``), reducible to the undominated atoms
(:func:`undominated`) and re-indexable to a subset of the workload
(:meth:`AttributeAtoms.with_queries`).

Each predicate is the union of the atoms it contains, and two predicates intersect iff they
share an atom.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from tessera.errors import ResourceError
from tessera.schema.domain import Domain
from tessera.workload.query import Query
from tessera.workload.value_classes import ConstrainedAttribute, workload_value_classes

#: Largest membership matrix (atoms × predicates) built without complaint.
MAX_MEMBERSHIP_CELLS = 400_000_000


@dataclass(frozen=True, eq=False)
class AttributeAtoms:
    """The atoms of one constrained attribute (all of them, or a subset such as the undominated).

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

    @staticmethod
    def of(attribute: ConstrainedAttribute) -> AttributeAtoms:
        """All the value classes of ``attribute``, with their membership in its queries."""
        vc = attribute.classes
        if vc.n_classes * vc.n_predicates > MAX_MEMBERSHIP_CELLS:
            raise ResourceError(
                f"attribute {attribute.name!r}: {vc.n_predicates} predicates × {vc.n_classes} "
                "value classes is too large to tabulate",
                hint="coarsen the attribute or split the workload",
            )
        return AttributeAtoms(attribute.name, attribute.position, vc.size, attribute.queries,
                              vc.membership, vc.representative, vc.n_codes)

    @property
    def n_atoms(self) -> int:
        return int(self.membership.shape[0])

    def subset(self, keep: npt.NDArray[np.int64]) -> AttributeAtoms:
        """Only the atoms ``keep`` (e.g. :func:`undominated`)."""
        return replace(self, membership=self.membership[keep],
                       representative=self.representative[keep], n_codes=self.n_codes[keep])

    def with_queries(self, queries: npt.NDArray[np.int64]) -> AttributeAtoms:
        """The same atoms with the query indices renumbered (``queries[i]`` for column i)."""
        return replace(self, queries=queries)

    def full_membership(self, n_queries: int) -> npt.NDArray[np.bool_]:
        """(n_atoms, n_queries): queries that do not constrain the attribute contain every atom."""
        out = np.ones((self.n_atoms, n_queries), dtype=bool)
        out[:, self.queries] = self.membership
        return out


def workload_atoms(domain: Domain, queries: Sequence[Query]) -> tuple[AttributeAtoms, ...]:
    """Atoms of every attribute that some query constrains, in domain order."""
    return tuple(AttributeAtoms.of(a) for a in workload_value_classes(domain, queries))


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
