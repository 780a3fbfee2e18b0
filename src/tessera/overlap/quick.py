"""A proven upper bound on max_x Σ_q s_q q(x) in one linear pass: what the dispatcher returns when
the time limit is too short for the solvers' set-up (docs/theory.md §3; docs/overlap.md, "Time
limit").

The bound is the first iterate of the Lagrangian split bound
(:func:`tessera.overlap.branch_bound.split_bound`) with the score of each query spread evenly
over its attributes, λ_{q,a} = s_q / |scope(q)|: since q(x) ≤ [x_a ∈ φ_{q,a}] for every a in its
scope,

    Σ_q s_q q(x) ≤ Σ_{q tautology} s_q + Σ_a max_c Σ_{q ∋ a} λ_{q,a} [c ∈ φ_{q,a}].

It needs no value classes: the λ's are summed per distinct predicate object (a parsed file
shares one object per distinct predicate), and each attribute's maximum is a sweep over the
spans of its distinct predicates, so the cost is one pass over the predicates plus
O(s log s) in the number s of distinct spans, whatever the size of the attributes. It is never
below the truth; it is capped by Σ_q s_q (sequential composition).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain
from operator import attrgetter

import numpy as np
import numpy.typing as npt

from tessera.workload.query import Query


def n_predicates(queries: Sequence[Query]) -> int:
    """Σ_q |scope(q)|: the size of the solvers' set-up work (one pass, no allocation)."""
    return sum(map(len, map(attrgetter("predicates"), queries)))


def even_split_bound(queries: Sequence[Query], scores: npt.ArrayLike) -> float:
    """Σ_{q tautology} s_q + Σ_a max_c Σ_{q∋a} (s_q/|scope q|)·[c ∈ φ_{q,a}] (module docstring),
    rounded up by a margin that covers the float sums, and at most Σ s rounded up.

    ``queries`` are predicate conjunctions and ``scores`` are ≥ 0, one per query. Vectorised:
    the spans of every predicate become ±λ events, sorted by (attribute, code) — an end before
    a start at the same code, the spans being half-open — and each attribute's maximum is the
    largest running sum within its events."""
    s = np.asarray(scores, dtype=np.float64)
    if s.shape != (len(queries),):
        raise ValueError("one score per query")
    lengths = np.fromiter(map(len, map(_PREDICATES, queries)), np.int64, count=len(queries))
    total = math.fsum(s.tolist())
    constant = math.fsum(s[lengths == 0].tolist())
    n = int(lengths.sum())
    if n == 0:
        return _up(constant, total)
    predicates = list(chain.from_iterable(map(_PREDICATES, queries)))
    spans = list(map(_SPANS, predicates))
    n_spans = np.fromiter(map(len, spans), np.int64, count=n)
    ends = np.fromiter(chain.from_iterable(chain.from_iterable(spans)), np.int64,
                       count=2 * int(n_spans.sum())).reshape(-1, 2)
    numbers: dict[str, int] = {}
    attr = np.fromiter((numbers.setdefault(p.attribute, len(numbers)) for p in predicates),
                       np.int64, count=n)
    del predicates, spans
    lam = np.repeat(s / np.maximum(lengths, 1), lengths)  # λ_{q,a}, one per predicate
    lam_span = np.repeat(lam, n_spans)
    attr_span = np.repeat(attr, n_spans)
    pos = np.concatenate([ends[:, 0], ends[:, 1]])
    delta = np.concatenate([lam_span, -lam_span])
    group = np.concatenate([attr_span, attr_span])
    if not len(delta):  # only contradictions: no row is in any constrained query
        return _up(constant, total)
    order = np.lexsort((delta, pos, group))  # by attribute, code, then ends (−λ) first
    running = np.cumsum(delta[order])
    group = group[order]
    first = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    base = np.concatenate(([0.0], running))[first]  # running sum before each attribute
    tops = np.maximum.reduceat(running, first) - base
    best = constant + float(np.maximum(tops, 0.0).sum())
    # every float sum above adds at most n + len(delta) terms of absolute sum ≤ Σ s + Σ|delta|
    return _up(best, total, n + len(delta), total + 2.0 * float(lam_span.sum()))


_PREDICATES = attrgetter("predicates")
_SPANS = attrgetter("coverage.spans")


def _up(value: float, total: float, terms: int = 0, magnitude: float = 0.0) -> float:
    """``value`` plus a rounding margin: a float sum of ``terms`` numbers of absolute sum
    ``magnitude`` is within terms·eps·magnitude of exact, and ``value`` is a difference of two
    such sums plus a third; never above Σ s (rounded up), which bounds the maximum anyway."""
    eps = float(np.finfo(np.float64).eps)
    cap = math.nextafter(total, math.inf) if total > 0 else 0.0
    return min(value * (1.0 + 1e-9) + 4.0 * (terms + 1) * eps * max(magnitude, total), cap)
