"""Consistent aggregates: the least-squares projection of noisy linear queries onto the answers
that agree (post-processing, no privacy cost; docs/aggregates.md).

Two statements with the same WHERE clause whose GROUP BY columns nest (G ⊆ G') measure the
same aggregates at two resolutions: for every aggregate they share (same kind, column and
clamp) and every key k of G, the linear query at k equals the sum of the queries at the keys of
G' that extend k — on every data set. A total ``SUM(x)`` and a ``SUM(x) … GROUP BY a`` are the
simplest case; a bare WHERE line and a ``COUNT(*)`` with the same clause are another.

With these equalities A·f = 0 and independent noisy answers y of variances V (diagonal), the
generalised least-squares estimate under the constraints is

    f̂ = y − V Aᵀ (A V Aᵀ)⁺ A y,    Var f̂ = V − V Aᵀ (A V Aᵀ)⁺ A V,

unbiased, of least variance among linear unbiased estimates that satisfy A f̂ = 0
(Gauss–Markov with linear restrictions); the pseudo-inverse covers redundant equalities.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tessera.errors import TesseraError
from tessera.workload.aggregates import AggregateWorkload, LinearQuery

#: Most equalities the dense projection is run on.
MAX_CONSTRAINTS = 5_000


def _signature(lq: LinearQuery, attribute: str | None) -> tuple[object, ...]:
    """What a linear query measures within its group: a count (of the rows where
    ``attribute`` is not NULL; None: every row — COUNT(x) of a column without a missing
    value is COUNT(*)) or a sum of a column clamped to [lo, hi]."""
    if lq.role == "count":
        return ("count", attribute)
    return ("sum", lq.attribute, lq.lo, lq.hi)


def constraints(workload: AggregateWorkload,
                linear: Sequence[LinearQuery]) -> list[tuple[int, list[int]]]:
    """(coarse index, fine indices): linear query ``coarse`` equals the sum of ``fine`` on every
    data set (module docstring); a repeated measurement (an AVG's sum beside the same SUM) is
    an equality with one fine index."""
    st = workload.statements
    cells: dict[tuple[int, tuple[int, ...], tuple[object, ...]], list[int]] = {}
    for i, lq in enumerate(linear):
        agg = st[lq.statement].aggregates[lq.aggregate]
        counted = (agg.attribute if agg.attribute is not None and not agg.is_measure
                   and workload.domain[agg.attribute].missing else None)
        cells.setdefault((lq.statement, lq.key, _signature(lq, counted)), []).append(i)
    out: list[tuple[int, list[int]]] = [(ids[0], [other]) for ids in cells.values()
                                        for other in ids[1:]]
    sigs: dict[int, set[tuple[object, ...]]] = {}
    for s_i, _, sig in cells:
        sigs.setdefault(s_i, set()).add(sig)
    for i, j in itertools.permutations(range(len(st)), 2):
        a, b = st[i], st[j]
        if a.where != b.where or not set(a.group_by) <= set(b.group_by):
            continue
        if set(a.group_by) == set(b.group_by) and j < i:
            continue  # equal groupings: one direction is enough
        pos = [b.group_by.index(g) for g in a.group_by]
        fine_keys: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for key in b.keys(workload.domain):
            fine_keys.setdefault(tuple(key[p] for p in pos), []).append(key)
        for sig in sigs.get(i, set()) & sigs.get(j, set()):
            for key in a.keys(workload.domain):
                fine = [cells[(j, fk, sig)][0] for fk in fine_keys.get(key, [])]
                out.append((cells[(i, key, sig)][0], fine))
    return out


def consistent(workload: AggregateWorkload, linear: Sequence[LinearQuery],
               noisy: npt.ArrayLike, variances: npt.ArrayLike,
               ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], int]:
    """(f̂, Var f̂, number of equalities) — f̂ = the noisy answers when no two statements
    nest."""
    y = np.asarray(noisy, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)
    eqs = constraints(workload, linear)
    if not eqs:
        return y.copy(), v.copy(), 0
    if len(eqs) > MAX_CONSTRAINTS:
        raise TesseraError(f"{len(eqs):,} consistency equalities, above the limit of "
                           f"{MAX_CONSTRAINTS:,}", hint="answer without --consistency")
    a = np.zeros((len(eqs), len(y)))
    for r, (coarse, fine) in enumerate(eqs):
        a[r, coarse] = 1.0
        a[r, fine] -= 1.0
    av = a * v  # A V
    inner = np.linalg.pinv(av @ a.T, hermitian=True)
    f = y - av.T @ (inner @ (a @ y))
    var = v - np.einsum("ij,ij->j", av, inner @ av)
    return f, np.maximum(var, 0.0), len(eqs)
