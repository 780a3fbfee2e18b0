"""Structured query families: marginals, data cubes and hierarchies, never expanded to text
(docs/theory.md §2, §3, §8).

A :class:`Partition` is a family of pairwise-disjoint cell queries over attributes S: on each
attribute a ∈ S the codes are cut into disjoint *groups* g_{a,1}, g_{a,2}, …; the cells are the
products g_{a_1,i_1} × … × g_{a_k,i_k}, and cell c counts the rows whose S-values fall in it.

* a **marginal** over S has one group per code (``Partition.marginal``);
* a **level of a hierarchy** has interval groups (a binary tree over age cut at one depth);
* a **data cube** over S is the marginals of every subset of S (the empty one is the total).

Because a row lies in at most one cell of a family (exactly one when the groups cover every
code: a true partition), the family adds at most max_c h(w_c) to any row's score — the
*partition bound* of Smith et al.'s maximum overlap (Thm 6): with per-family weights w_P,
γ_w ≤ g(Σ_P h(w_P)) + (the predicate part), exact for marginal workloads and data cubes. It is
found from the families alone, never from a t² overlap graph.

Cells are materialised only on request (:meth:`Partition.cell_queries`, lazily).

>>> from tessera.schema.domain import Domain
>>> dom = Domain.from_dict({"a": 3, "b": 2})
>>> p = Partition.marginal(dom, ["a", "b"])
>>> p.shape_in(dom), p.n_cells_in(dom), p.covers(dom)
((3, 2), 6, True)
>>> [q.to_sql(dom) for q in p.cell_queries(dom)][:2]
['a = 0 AND b = 0', 'a = 0 AND b = 1']
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.errors import QueryError
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Query

__all__ = ["Partition", "cube", "group_label", "hierarchy", "k_way_marginals"]

#: Most predicate queries range and prefix blocks may expand to beside other queries
#: (a file of range blocks alone stays compact: :mod:`tessera.workload.ranges`).
MAX_PREFIX_QUERIES = 1_000_000


@dataclass(frozen=True)
class Partition:
    """Disjoint cell queries: the product of per-attribute groups (module docstring).

    ``attributes`` in domain order; ``groups[i]`` the disjoint groups of ``attributes[i]``,
    or ``None`` for one group per code (a marginal axis); ``weight`` the weight of every cell.
    """

    name: str
    attributes: tuple[str, ...]
    groups: tuple[tuple[IntervalSet, ...] | None, ...]
    weight: float = 1.0
    kind: str = "marginal"

    def __post_init__(self) -> None:
        if len(self.groups) != len(self.attributes):
            raise ValueError("one grouping per attribute")
        if len(set(self.attributes)) != len(self.attributes):
            raise QueryError(f"family {self.name!r}: an attribute is listed twice")
        if not (math.isfinite(self.weight) and self.weight >= 0):
            raise QueryError(f"family {self.name!r}: weight {self.weight!r} must be finite, ≥ 0")
        for a, gs in zip(self.attributes, self.groups):
            if gs is None:
                continue
            if not gs:
                raise QueryError(f"family {self.name!r}: attribute {a!r} has no groups")
            # pairwise disjoint iff the spans of all groups, sorted by start, never overlap
            # their successor (a span overlapping a later one overlaps the next): O(s log s)
            spans = sorted(span for g in gs for span in g.spans)
            if any(e > s2 for (_, e), (s2, _) in zip(spans, spans[1:])):
                raise QueryError(f"family {self.name!r}: groups of {a!r} overlap",
                                 hint="the cells of a family must be pairwise disjoint")

    # -- construction ---------------------------------------------------------------------
    @staticmethod
    def marginal(domain: Domain, attributes: Sequence[str], weight: float = 1.0,
                 name: str | None = None) -> Partition:
        """The marginal over ``attributes``: one cell per combination of codes."""
        names = _in_domain_order(domain, attributes)
        return Partition(name or "marginal(" + ",".join(names) + ")", names,
                         (None,) * len(names), float(weight), "marginal")

    @staticmethod
    def grid(domain: Domain, groups: Mapping[str, Sequence[IntervalSet] | None],
             weight: float = 1.0, name: str | None = None, kind: str = "grid") -> Partition:
        """Cells = products of the given groups (None: one group per code)."""
        names = _in_domain_order(domain, list(groups))
        gs = tuple(None if groups[a] is None else tuple(groups[a]) for a in names)  # type: ignore[arg-type]
        for a, g in zip(names, gs):
            size = domain[a].size
            if g is not None and any(x and (x.min() < 0 or x.max() >= size) for x in g):
                raise QueryError(f"family {name!r}: a group of {a!r} leaves its {size} codes")
        return Partition(name or f"{kind}(" + ",".join(names) + ")", names, gs, float(weight),
                         kind)

    # -- shape ----------------------------------------------------------------------------
    def axis_groups(self, domain: Domain, i: int) -> tuple[IntervalSet, ...]:
        """The groups of attribute i (one per code for a marginal axis)."""
        g = self.groups[i]
        if g is None:
            return tuple(IntervalSet.points([c]) for c in range(domain[self.attributes[i]].size))
        return g

    def axis_size(self, domain: Domain, i: int) -> int:
        g = self.groups[i]
        return domain[self.attributes[i]].size if g is None else len(g)

    def shape_in(self, domain: Domain) -> tuple[int, ...]:
        return tuple(self.axis_size(domain, i) for i in range(len(self.attributes)))

    def n_cells_in(self, domain: Domain) -> int:
        return math.prod(self.shape_in(domain))

    def covers(self, domain: Domain) -> bool:
        """Whether every row lies in a cell (the groups cover every code): a true partition."""
        for a, g in zip(self.attributes, self.groups):
            if g is None:
                continue
            if sum(len(x) for x in g) != domain[a].size:
                return False
        return True

    def code_to_group(self, domain: Domain, i: int) -> npt.NDArray[np.int64]:
        """For attribute i: the group of every code (−1 for codes in no group)."""
        size = domain[self.attributes[i]].size
        g = self.groups[i]
        if g is None:
            return np.arange(size, dtype=np.int64)
        out = np.full(size, -1, dtype=np.int64)
        for j, grp in enumerate(g):
            for lo, hi in grp.spans:
                out[lo:hi] = j
        return out

    # -- cells (lazy) -----------------------------------------------------------------------
    def cell_query(self, domain: Domain, index: Sequence[int]) -> Query:
        cov = {a: self.axis_groups(domain, i)[j]
               for i, (a, j) in enumerate(zip(self.attributes, index))}
        return Query.conjunction(domain, cov)

    def cell_indices(self, domain: Domain) -> Iterator[tuple[int, ...]]:
        """Cells in row-major (C) order: the order of :meth:`cell_queries` and of counts."""
        return itertools.product(*(range(n) for n in self.shape_in(domain)))

    def cell_queries(self, domain: Domain) -> Iterator[Query]:
        groups = [self.axis_groups(domain, i) for i in range(len(self.attributes))]
        for index in self.cell_indices(domain):
            cov = {a: groups[i][j] for i, (a, j) in enumerate(zip(self.attributes, index))}
            yield Query.conjunction(domain, cov)

    def cell_labels(self, domain: Domain) -> Iterator[str]:
        """E.g. ``'age=30, sex=F'`` (a group of several codes shows its first..last label)."""
        labels = [[f"{a}={group_label(domain, a, g)}" for g in self.axis_groups(domain, i)]
                  for i, a in enumerate(self.attributes)]
        for combo in itertools.product(*labels):
            yield ", ".join(combo)

    # -- files ----------------------------------------------------------------------------
    @staticmethod
    def from_dict(domain: Domain, doc: Mapping[str, Any]) -> Partition:
        """The inverse of :meth:`to_dict` (a clear error for a malformed entry)."""
        unknown = set(doc) - {"name", "kind", "attributes", "groups", "weight"}
        if unknown:
            raise QueryError(f"unknown key {sorted(unknown)[0]!r} in a family",
                             hint="keys: name, kind, attributes, groups, weight")
        attrs = doc.get("attributes")
        if not (isinstance(attrs, list) and all(isinstance(a, str) for a in attrs)):
            raise QueryError("a family's 'attributes' must be a list of attribute names")
        groups_doc = doc.get("groups") or {}
        try:
            groups = {a: None if groups_doc.get(a) is None else
                      [IntervalSet.of([(int(lo), int(hi)) for lo, hi in g])
                       for g in groups_doc[a]] for a in attrs}
            weight = float(doc.get("weight", 1.0))
        except (TypeError, ValueError) as e:
            raise QueryError(f"malformed family groups: {e}",
                             hint="groups: {attribute: [[[lo, hi], ...], ...]}") from None
        kind = str(doc.get("kind", "grid"))
        if kind == "marginal" and not groups_doc:
            return Partition.marginal(domain, attrs, weight, doc.get("name"))
        return Partition.grid(domain, groups, weight, doc.get("name"), kind)

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"name": self.name, "kind": self.kind,
                               "attributes": list(self.attributes)}
        if any(g is not None for g in self.groups):
            doc["groups"] = {a: None if g is None else [list(map(list, x.spans)) for x in g]
                             for a, g in zip(self.attributes, self.groups)}
        if self.weight != 1.0:
            doc["weight"] = self.weight
        return doc


def group_label(domain: Domain, attribute: str, group: IntervalSet) -> str:
    """A group as text: its value, or ``first..last`` for several codes, ``∅`` when empty."""
    attr = domain[attribute]
    if not group:
        return "∅"
    if len(group) == 1:
        return attr.label(group.min())
    return f"{attr.label(group.min())}..{attr.label(group.max())}"


def _in_domain_order(domain: Domain, attributes: Sequence[str]) -> tuple[str, ...]:
    for a in attributes:
        domain.index(a)  # a clear error for an unknown attribute
    return tuple(sorted(attributes, key=domain.index))


def k_way_marginals(domain: Domain, k: int, attributes: Sequence[str] | None = None,
                    weight: float = 1.0) -> tuple[Partition, ...]:
    """All k-way marginals over ``attributes`` (default: all), one :class:`Partition` each."""
    names = list(attributes) if attributes is not None else list(domain.names)
    if not 0 <= k <= len(names):
        raise QueryError(f"k = {k} must be between 0 and the number of attributes ({len(names)})")
    return tuple(Partition.marginal(domain, s, weight)
                 for s in itertools.combinations(_in_domain_order(domain, names), k))


def cube(domain: Domain, attributes: Sequence[str], weight: float = 1.0,
         min_order: int = 0) -> tuple[Partition, ...]:
    """The data cube over ``attributes``: the marginal of every subset of size ≥ ``min_order``
    (the empty subset is the total count)."""
    out: list[Partition] = []
    for k in range(min_order, len(attributes) + 1):
        for p in k_way_marginals(domain, k, attributes, weight):
            out.append(Partition(p.name.replace("marginal(", "cube("), p.attributes, p.groups,
                                 p.weight, "cube"))
    return tuple(out)


def interval_levels(size: int, branching: int = 2,
                    depth: int | None = None) -> list[tuple[IntervalSet, ...]]:
    """The levels of a ``branching``-ary tree of intervals over codes 0..size−1: level 0 is the
    whole range, each next level cuts every interval into ``branching`` near-equal parts, down
    to single codes (or ``depth`` levels)."""
    if branching < 2:
        raise QueryError(f"branching {branching} must be ≥ 2")
    levels = [(IntervalSet.range(0, size),)]
    while True:
        if depth is not None and len(levels) >= depth:
            break
        parts: list[IntervalSet] = []
        for iv in levels[-1]:
            lo, hi = iv.min(), iv.max() + 1
            if hi - lo <= 1:
                parts.append(iv)
                continue
            cuts = np.linspace(lo, hi, min(branching, hi - lo) + 1).round().astype(int)
            parts.extend(IntervalSet.range(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]))
        if len(parts) == len(levels[-1]):
            break
        levels.append(tuple(parts))
    return levels


def hierarchy(domain: Domain, attributes: Sequence[str], branching: int = 2,
              depth: int | None = None, weight: float = 1.0,
              name: str | None = None) -> tuple[Partition, ...]:
    """Hierarchical ranges over one or more attributes: on each attribute a tree of intervals
    (:func:`interval_levels`, codes in their declared order), and one family per combination
    of levels — every level pair of age × hours is a partition, so γ = (levels)^k."""
    names = _in_domain_order(domain, attributes)
    per_attr = [interval_levels(domain[a].size, branching, depth) for a in names]
    base = name or "hierarchy(" + ",".join(names) + ")"
    out = []
    for combo in itertools.product(*(range(len(lv)) for lv in per_attr)):
        groups = {a: per_attr[i][lvl] for i, (a, lvl) in enumerate(zip(names, combo))}
        label = base + "[" + ",".join(f"{a}:{lvl}" for a, lvl in zip(names, combo)) + "]"
        out.append(Partition.grid(domain, groups, weight, label, "hierarchy"))
    return tuple(out)
