"""Random small workloads for the overlap tests (seeded; ranges, sets and mixtures)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Query


def random_domain(rng: np.random.Generator, max_attrs: int = 3, max_size: int = 5) -> Domain:
    m = int(rng.integers(1, max_attrs + 1))
    return Domain.from_dict({f"a{i}": int(rng.integers(1, max_size + 1)) for i in range(m)})


def random_query(rng: np.random.Generator, dom: Domain, kind: str,
                 p_constrain: float = 0.6) -> Query:
    cov = {}
    for attr in dom:
        if rng.random() >= p_constrain:
            continue
        k = attr.size
        use_range = kind == "range" or (kind == "mixed" and rng.random() < 0.5)
        if use_range:
            lo = int(rng.integers(0, k))
            hi = int(rng.integers(lo, k + 1))  # may be empty: a contradiction
            cov[attr.name] = IntervalSet.range(lo, hi)
        else:
            cov[attr.name] = IntervalSet.points(np.flatnonzero(rng.random(k) < 0.5).tolist())
    return Query.conjunction(dom, cov)


def random_weights(rng: np.random.Generator, t: int) -> np.ndarray:
    style = int(rng.integers(3))
    if style == 0:
        return np.ones(t)
    if style == 1:
        return rng.integers(0, 4, size=t).astype(float)
    return rng.random(t) * 3


def random_case(rng: np.random.Generator, max_queries: int = 8, kind: str | None = None):
    dom = random_domain(rng)
    kind = kind or ("range", "set", "mixed")[int(rng.integers(3))]
    t = int(rng.integers(0, max_queries + 1))
    queries = [random_query(rng, dom, kind) for _ in range(t)]
    return dom, queries, random_weights(rng, t)


def small_workload(draw: st.DrawFn, max_queries: int) -> tuple[Domain, list[int], list[Query]]:
    """A hypothesis draw: a domain of at most 16 points (1–4 attributes of 1–3 values, the sizes
    returned too) and 1..``max_queries`` random queries over it — small enough to brute-force
    every set of a few records."""
    m = draw(st.integers(1, 4))
    sizes = [draw(st.integers(1, 3)) for _ in range(m)]
    while int(np.prod(sizes)) > 16:
        sizes[sizes.index(max(sizes))] -= 1
    dom = Domain.from_dict({f"a{i}": s for i, s in enumerate(sizes)})
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    t = draw(st.integers(1, max_queries))
    kind = draw(st.sampled_from(["range", "set", "mixed"]))
    return dom, sizes, [random_query(rng, dom, kind) for _ in range(t)]
