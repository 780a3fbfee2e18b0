"""Random small workloads for the overlap tests (seeded; ranges, sets and mixtures)."""

from __future__ import annotations

import numpy as np

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
