"""Structure recovered from plain predicate workloads: marginals written out as text
(docs/theory.md §3).

A text file with every cell of every 3-way marginal of Adult is 2.6 million unrelated
conjunctions to the general solvers, which cannot prove γ = 455 among them. But a group of
queries with the same scope whose per-attribute predicates are pairwise disjoint *is* a family
of disjoint cells: each row lies in at most one of them. :func:`recover_families` finds such
groups in one pass over the queries (no t² overlap graph) and rewrites them as
:class:`~tessera.workload.families.Partition` grids — missing cells get weight 0 — so that
:func:`tessera.overlap.max_overlap` applies the partition bound, then maps the witness back to
the original queries, where it is re-checked like every other witness.

A scope group is recovered when, on each attribute of its scope, the distinct predicates its
queries use are pairwise disjoint (their sizes add up to the size of their union) and no two
queries use the same combination: then two distinct queries differ on some attribute, where
their predicates are disjoint, so the queries are disjoint.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.families import Partition
from tessera.workload.query import Query
from tessera.workload.workload import Workload

#: Recovery is tried on workloads of at least this many queries (below, the solvers are fast).
RECOVER_MIN_QUERIES = 20_000
#: ... and used when the recovered families hold at least this share of the queries.
RECOVER_MIN_SHARE = 0.9
#: A recovered family's grid (present and missing cells) may be at most this many times the
#: number of its queries (a sparse group is left to the ordinary solvers).
MAX_GRID_BLOWUP = 4


@dataclass(frozen=True, eq=False)
class Recovery:
    """``workload``: the remaining predicate queries plus the recovered families;
    ``weights``: its weights in expanded order (0 for the cells no query wrote);
    ``original[i]``: the original index of query i of ``workload`` in expanded order, −1 for a
    missing cell."""

    workload: Workload
    weights: npt.NDArray[np.float64]
    original: npt.NDArray[np.int64]
    n_recovered: int

    def to_original(self, indices: Sequence[int]) -> tuple[int, ...]:
        """Witness indices of the recovered workload as indices of the original one."""
        mapped = self.original[np.asarray(indices, dtype=np.int64)]
        return tuple(sorted(int(i) for i in mapped[mapped >= 0]))


def _disjoint(covs: Sequence[IntervalSet]) -> bool:
    union = IntervalSet.empty()
    total = 0
    for c in covs:
        union = union | c
        total += len(c)
    return total == len(union)


def recover_families(
    domain: Domain, queries: Sequence[Query], weights: npt.NDArray[np.float64],
    *, deadline: float | None = None,
) -> Recovery | None:
    """Scope groups of pairwise-disjoint queries as families (module docstring); None when
    they hold less than :data:`RECOVER_MIN_SHARE` of the queries — decided as soon as the groups
    that failed hold more than the rest may (largest groups first) — or when ``deadline``
    (``time.monotonic()``) passes first."""
    groups: dict[tuple[str, ...], list[int]] = {}
    order = {a.name: i for i, a in enumerate(domain)}
    for i, q in enumerate(queries):
        # (a contradiction is a cell no row lies in: harmless to the bound)
        if type(q) is not Query or not q.predicates:
            continue
        scope = tuple(p.attribute for p in q.predicates)
        members = groups.get(scope)
        if members is None and any(order[a] >= order[b] for a, b in zip(scope, scope[1:])):
            continue  # (a query built by hand out of domain order: cells would be misnumbered)
        if members is None:
            members = groups[scope] = []
        members.append(i)
    families: list[Partition] = []
    cell_origin: list[npt.NDArray[np.int64]] = []
    cell_weights: list[npt.NDArray[np.float64]] = []
    taken = np.zeros(len(queries), dtype=bool)
    # queries in no group, then those of failed groups, cannot be recovered
    lost = len(queries) - sum(map(len, groups.values()))
    most_lost = (1.0 - RECOVER_MIN_SHARE) * len(queries)
    for scope, members in sorted(groups.items(), key=lambda g: -len(g[1])):
        if lost > most_lost or (deadline is not None and time.monotonic() > deadline):
            return None
        if len(members) < 2:
            lost += len(members)
            continue
        found = _grid(domain, scope, [queries[i] for i in members])
        if found is None:
            lost += len(members)
            continue
        groups_of, index_of_cell, shape = found
        n_cells = int(np.prod(shape))
        if n_cells > MAX_GRID_BLOWUP * len(members):
            lost += len(members)
            continue
        origin = np.full(n_cells, -1, dtype=np.int64)
        origin[index_of_cell] = members
        w = np.zeros(n_cells)
        w[index_of_cell] = weights[members]
        families.append(Partition.grid(domain, dict(zip(scope, groups_of)), 1.0,
                                       "recovered(" + ",".join(scope) + ")", "recovered"))
        cell_origin.append(origin)
        cell_weights.append(w)
        taken[members] = True
    n_recovered = int(taken.sum())
    if not families or n_recovered < RECOVER_MIN_SHARE * len(queries):
        return None
    rest = np.flatnonzero(~taken)
    wl = Workload(domain, tuple(queries[i] for i in rest),
                  tuple(f"q{i}" for i in rest), (1.0,) * len(rest), None, tuple(families))
    original = np.concatenate([rest.astype(np.int64), *cell_origin])
    vec = np.concatenate([weights[rest], *cell_weights])
    return Recovery(wl, vec, original, n_recovered)


def _grid(
    domain: Domain, scope: tuple[str, ...], group: Sequence[Query]
) -> tuple[list[list[IntervalSet]], npt.NDArray[np.int64], tuple[int, ...]] | None:
    """(per attribute the distinct predicates, each query's cell in row-major order, shape),
    or None when the group is not pairwise disjoint by the criterion of the module docstring."""
    # predicates are numbered by object identity first (hashing a coverage hashes its spans; a
    # parsed file shares one object per distinct predicate), then merged by value
    canon: list[dict[IntervalSet, int]] = [{} for _ in scope]
    seen: list[dict[int, int]] = [{} for _ in scope]
    columns: list[list[int]] = [[] for _ in scope]
    for q in group:
        for a, p in enumerate(q.predicates):
            cov = p.coverage
            k = seen[a].get(id(cov))
            if k is None:
                k = seen[a][id(cov)] = canon[a].setdefault(cov, len(canon[a]))
            columns[a].append(k)
    codes = np.array(columns, dtype=np.int64).T.reshape(len(group), len(scope))
    per_attr = canon
    groups_of = []
    for table in per_attr:
        covs = list(table)
        if not _disjoint(covs):
            return None
        groups_of.append(covs)
    shape = tuple(len(g) for g in groups_of)
    cell = np.ravel_multi_index(tuple(codes.T), shape) if scope else np.zeros(0, np.int64)
    if len(np.unique(cell)) != len(group):
        return None  # two queries with the same cell: duplicates, not disjoint
    return groups_of, np.asarray(cell, dtype=np.int64), shape
