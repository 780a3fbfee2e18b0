"""Strategies for sums: a family of linear queries that share one summed quantity is a counting
workload on a weighted histogram (docs/theory.md §3.15, "Strategies for sums").

For one summed quantity u — a schema attribute or a measure, clamped to [lo, hi], in integer
units — the weighted histogram is h_u(c) = Σ_{rows in cell c} u(row) (the count histogram is
h_1). Every ``SUM(u) [WHERE φ] [GROUP BY G]`` linear query is the 0/1 counting query of the same
predicate applied to h_u instead of the count histogram, so any counting strategy A (a set of
counting queries, :mod:`~.candidates`) measured on h_u answers it by the same least squares.
Under add/remove one row of cell c and value v moves h_u by clamp(v)·e_c, hence A h_u by
clamp(v)·A e_c, and its cost under per-query costs c_a is |clamp(v)|^p Σ_a c_a [a ∋ c] ≤ M^p·γ
with M = max |clamp| (p = 1 pure ε, 2 ρ-zCDP): a counting strategy calibrated to a budget B/M^p
spends at most B on h_u (×K, ×K² for a person of at most K rows, as every count).

Under substitution a row moves from (c, v) to (c', v'), so A h_u by v·a(c) − v'·a(c') (a(c) the
0/1 column of cell c), and Σ_a c_a |v a(c) − v' a(c')|^p ≤ T γ_A with T = 2M (p = 1), 2M²
(p = 2, clamped values of one sign) or 4M² (p = 2, both signs) — the theorem "under
substitution" of §3.15, which also bounds the levels' p = 2 score by T γ_A, so the joint
re-check never exceeds the budget. The counts (u = 1) are counting substitution itself:
their strategy is calibrated to its own substitution cost (:func:`counting_calibration`).

This module builds the families (:func:`sum_families`), each family's counting workload with
the map from its linear queries to the counting workload's queries (:func:`counting_workload`)
and the measured strategy queries as linear queries on h_u (:func:`measured_linear`), whose
exact cost the release re-checks with the levels of §3.15 (the proof rests on that re-check).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.overlap.linear import two_signed
from tessera.privacy import Neighbours
from tessera.workload.aggregates import AggregateWorkload, LinearQuery
from tessera.workload.families import Partition
from tessera.workload.query import Query
from tessera.workload.workload import Workload

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class SumFamily:
    """The linear queries (``indices`` into the workload's linear queries) that sum one
    quantity: ``attribute`` clamped to [``lo``, ``hi``] in units of 10^``exponent`` (a
    measure), or counts (``attribute`` None: h_1); ``bound`` is M = max |clamp|;
    ``two_signed``: the clamped values take both signs (:func:`~tessera.overlap.linear.
    two_signed`)."""

    role: str
    attribute: str | None
    lo: int | None
    hi: int | None
    exponent: int | None
    indices: tuple[int, ...]
    bound: int
    two_signed: bool = False

    @property
    def label(self) -> str:
        """``COUNT`` or ``SUM(CLAMP(x, lo, hi))`` (a measure's bounds in its units)."""
        if self.role == "count":
            return "COUNT"
        unit = "" if self.exponent is None else f" [units of 1e{self.exponent}]"
        return f"SUM(CLAMP({self.attribute}, {self.lo}, {self.hi})){unit}"

    def linear_query(self, query: Query) -> LinearQuery:
        """The counting query ``query`` applied to h_u: f(D) = Σ_x query(x)·u(x)."""
        if self.role == "count":
            return LinearQuery(-1, -1, (), "count", query)
        return LinearQuery(-1, -1, (), "sum", query, self.attribute, self.lo, self.hi, 1.0,
                           self.exponent)


def sum_families(workload: AggregateWorkload,
                 bounds: npt.ArrayLike) -> tuple[SumFamily, ...]:
    """The workload's linear queries grouped by summed quantity (one family per attribute,
    clamp and unit; one for every count), in order of first appearance. ``bounds``: M_q of
    every linear query (:func:`tessera.overlap.linear.sensitivities`)."""
    m = np.asarray(bounds, dtype=np.int64)
    domain = workload.cost_domain
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, lq in enumerate(workload.linear):
        key = ("count",) if lq.role == "count" else ("sum", lq.attribute, lq.lo, lq.hi,
                                                     lq.exponent)
        groups.setdefault(key, []).append(i)
    out = []
    for idx in groups.values():
        first = workload.linear[idx[0]]
        out.append(SumFamily(first.role, first.attribute, first.lo, first.hi, first.exponent,
                             tuple(idx), int(m[idx].max()), two_signed(domain, first)))
    return tuple(out)


def substitution_factor(family: SumFamily, p: int) -> int:
    """T of the substitution theorem (docs/theory.md §3.15): for counting queries A with costs
    c_a and add/remove cost γ_A, every substitution (c, v) → (c', v') of clamped values
    |v|, |v'| ≤ M has Σ_a c_a |v a(c) − v' a(c')|^p ≤ T γ_A, and so has the levels' p = 2
    score of the queries ``SUM(u) WHERE a``: T = 2M (p = 1, triangle inequality), 2M² (p = 2,
    values of one sign: the cross term is ≤ 0), 4M² (p = 2, both signs: (x − y)² ≤ 2x² + 2y²,
    and the levels' doubled weights)."""
    m = family.bound
    if p == 1:
        return 2 * m
    return (4 if family.two_signed else 2) * m * m


def counting_calibration(family: SumFamily, p: int,
                         neighbours: Neighbours) -> tuple[int, Neighbours]:
    """(T, relation): a counting strategy whose cost under ``relation`` (for one row, or K·,
    K²· for a person) is at most B/T costs at most B on h_u under ``neighbours``
    (docs/theory.md §3.15). Add/remove: (M^p, add/remove), the theorem; substitution: the
    counts are counting substitution itself, (1, substitute), exact; a sum (T of
    :func:`substitution_factor`, add/remove)."""
    if neighbours is Neighbours.ADD_REMOVE:
        return family.bound ** p, Neighbours.ADD_REMOVE
    if family.role == "count":
        return 1, Neighbours.SUBSTITUTE
    return substitution_factor(family, p), Neighbours.ADD_REMOVE


def counting_workload(workload: AggregateWorkload, family: SumFamily
                      ) -> tuple[Workload, IntArray]:
    """The counting workload of a family — the same predicates (WHERE ∧ group key) as counting
    queries, weighted by their statements' weights — and ``index``: linear query
    ``family.indices[k]`` is the counting workload's query ``index[k]`` (expanded order).

    When every statement of the family has no WHERE (a total, or a GROUP BY), each (statement,
    aggregate, role) becomes a marginal family over its GROUP BY attributes (the schema's
    codes, every key, so the strategies of marginal workloads apply); otherwise the predicates
    are kept as predicate queries (``direct``, and the one-attribute strategies, apply)."""
    dom = workload.domain
    linear = [workload.linear[i] for i in family.indices]
    marginal = all(isinstance(lq.query, Query) and
                   _is_marginal_cell(workload, lq) for lq in linear)
    if not marginal:
        queries = tuple(lq.query for lq in linear)
        names = tuple(f"q{k}" for k in range(len(queries)))
        weights = tuple(float(lq.weight) for lq in linear)
        return (Workload(dom, queries, names, weights),  # type: ignore[arg-type]
                np.arange(len(linear), dtype=np.int64))
    blocks: dict[tuple[int, int, str], int] = {}  # (statement, aggregate, role) → partition
    partitions: list[Partition] = []
    for lq in linear:
        b = (lq.statement, lq.aggregate, lq.role)
        if b not in blocks:
            st = workload.statements[lq.statement]
            blocks[b] = len(partitions)
            partitions.append(Partition.marginal(dom, list(st.group_by), float(st.weight),
                                                 name=f"{st.name}#{lq.aggregate}{lq.role}"))
    w = Workload.of_families(dom, partitions)
    starts = w.family_starts
    index = np.empty(len(linear), dtype=np.int64)
    for k, lq in enumerate(linear):
        p = blocks[(lq.statement, lq.aggregate, lq.role)]
        part = partitions[p]
        order = [workload.statements[lq.statement].group_by.index(a) for a in part.attributes]
        cell = (int(np.ravel_multi_index(tuple(lq.key[j] for j in order),
                                         part.shape_in(dom))) if order else 0)
        index[k] = int(starts[p]) + cell
    return w, index


def _is_marginal_cell(workload: AggregateWorkload, lq: LinearQuery) -> bool:
    """Whether ``lq`` is a cell of its statement's GROUP BY marginal: its predicate is the key
    and nothing else (no WHERE, no NOT NULL restriction of COUNT(x) or AVG(x))."""
    st = workload.statements[lq.statement]
    if not isinstance(st.where, Query) or st.where.predicates:
        return False
    q = lq.query
    assert isinstance(q, Query)
    key = dict(zip(st.group_by, lq.key))
    preds = list(q.predicates)
    if lq.role == "sum" and lq.attribute in workload.domain.names and lq.attribute not in key:
        # SUM(x) of an attribute with NULLs reads the rows where x is not NULL; a NULL adds 0,
        # so h_u is 0 on those cells and q ∧ (x not NULL) equals q on h_u
        attr = workload.domain[lq.attribute]
        preds = [p for p in preds if not (p.attribute == lq.attribute and attr.missing
                                          and p.coverage == attr.present())]
    return len(preds) == len(key) and all(
        p.attribute in key and len(p.coverage) == 1 and key[p.attribute] in p.coverage
        for p in preds)


def measured_linear(family: SumFamily, measured: Workload) -> tuple[LinearQuery, ...]:
    """The strategy's measured counting queries (expanded order) as linear queries on h_u."""
    return tuple(family.linear_query(q) for q in measured.expanded().queries)  # type: ignore[arg-type]

