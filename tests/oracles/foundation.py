"""Random small domains, queries, tables and brute-force oracles for the foundation tests.

Generators are written once against a tiny ``Draw`` interface so that the same code serves
hypothesis (``HypDraw``: shrinkable draws) and seeded loops (``RngDraw``: numpy Generator).
Oracles never call the code under test for the property they check: coverages are plain Python
sets of codes, and points are enumerated with ``itertools.product``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tessera.schema.domain import Attribute, Binned, Boolean, Categorical, Domain, IntegerRange
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Query

#: Hypothesis settings shared by the suite: no deadline (first calls import sqlglot/duckdb).
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
QUICK = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: For examples that each set up DuckDB (about 0.1–0.2 s apiece).
SLOWEX = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Draw(Protocol):
    def int(self, lo: int, hi: int) -> int: ...  # inclusive bounds


class RngDraw:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def int(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi + 1))


class HypDraw:
    def __init__(self, data: st.DataObject) -> None:
        self.data = data

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(st.integers(lo, hi))


def numbered(items: Sequence[Any]) -> list[str]:
    """Names ``q0, q1, …`` for generated queries: random queries may repeat, and named by their
    SQL two would share a name (renamed, with a QueryWarning, which these tests do not check)."""
    return [f"q{i}" for i in range(len(items))]


def coin(r: Draw, p_num: int = 1, p_den: int = 2) -> bool:
    return r.int(0, p_den - 1) < p_num


def choice(r: Draw, items: Sequence[Any]) -> Any:
    return items[r.int(0, len(items) - 1)]


def subset(r: Draw, n: int) -> set[int]:
    return {c for c in range(n) if coin(r)}


# -- domains ----------------------------------------------------------------------------------

NAMES = ("a", "b", "c-d", "e f", "g")
#: Unordered categorical values, some awkward for SQL quoting and for text canonicalisation.
ODD_VALUES = ("x", "O'Neil", "1", "y z", "Ü")


def gen_attribute(r: Draw, name: str, kinds: Sequence[str] | None = None) -> Attribute:
    """One attribute with 1..5 non-missing values, maybe a missing code."""
    kind = choice(r, kinds or ("integer", "categorical", "ordered", "boolean", "binned"))
    missing = coin(r)
    if kind == "integer":
        lo = r.int(-3, 3)
        return IntegerRange(name=name, lo=lo, hi=lo + r.int(0, 4), missing=missing)
    if kind == "categorical":
        k = r.int(1, 5)
        return Categorical(name=name, values=ODD_VALUES[:k], missing=missing)
    if kind == "ordered":
        # lexicographic order = declared order, so SQL engines compare strings the same way
        k = r.int(1, 5)
        return Categorical(
            name=name, values=tuple(f"v{i}" for i in range(k)), is_ordered=True, missing=missing
        )
    if kind == "boolean":
        return Boolean(name=name, missing=missing)
    below, above = coin(r), coin(r)
    n_inner = r.int(0 if (below or above) else 1, 5 - int(below) - int(above))
    start = r.int(-2, 2) * 5
    steps = [r.int(1, 3) * 5 for _ in range(n_inner)]
    edges = tuple(float(e) for e in itertools.accumulate([start, *steps]))
    return Binned(
        name=name,
        edges=edges,
        closed=choice(r, ("left", "right")),
        below=below,
        above=above,
        missing=missing,
    )


def gen_domain(
    r: Draw, n_attrs: tuple[int, int] = (2, 4), kinds: Sequence[str] | None = None
) -> Domain:
    m = r.int(*n_attrs)
    return Domain(tuple(gen_attribute(r, NAMES[i], kinds) for i in range(m)))


def points(domain: Domain) -> Iterator[tuple[int, ...]]:
    """Every point of 𝔻 (codes): the brute-force universe."""
    return itertools.product(*(range(s) for s in domain.sizes))


# -- queries as plain sets ---------------------------------------------------------------------


@dataclass(frozen=True)
class SetQuery:
    """A query as one Python set of codes per attribute (None = unconstrained)."""

    sets: tuple[frozenset[int] | None, ...]

    def contains(self, x: Sequence[int]) -> bool:
        return all(s is None or xi in s for s, xi in zip(self.sets, x))

    def to_query(self, domain: Domain) -> Query:
        return Query.conjunction(
            domain,
            {a.name: IntervalSet.points(s) for a, s in zip(domain, self.sets) if s is not None},
        )


def gen_set_query(r: Draw, domain: Domain, p_constrain: int = 2) -> SetQuery:
    """Each attribute constrained with probability p/3 to a random subset (maybe ∅ or full)."""
    sets = []
    for a in domain:
        if r.int(0, 2) < p_constrain:
            sets.append(frozenset(subset(r, a.size)))
        else:
            sets.append(None)
    return SetQuery(tuple(sets))


def gen_interval_query(r: Draw, domain: Domain) -> SetQuery:
    """Every constrained predicate a non-empty interval of codes."""
    sets = []
    for a in domain:
        if coin(r, 2, 3):
            lo = r.int(0, a.size - 1)
            hi = r.int(lo, a.size - 1)
            sets.append(frozenset(range(lo, hi + 1)))
        else:
            sets.append(None)
    return SetQuery(tuple(sets))


def coverage_brute(domain: Domain, q: SetQuery) -> set[tuple[int, ...]]:
    return {x for x in points(domain) if q.contains(x)}


# -- tables ------------------------------------------------------------------------------------


def bin_samples(attr: Binned) -> list[list[float]]:
    """Raw numbers that fall in each bin (edges on the closed side included), per code."""
    out = []
    for code in range(attr.n_values):
        a, b, ai, bi = attr.bounds(code)
        vals = []
        if math.isinf(a):
            vals += [b - 7.5, b - 0.25]
        if math.isinf(b):
            vals += [a + 0.25, a + 1e6]
        if not math.isinf(a) and not math.isinf(b):
            mid = a / 2 + b / 2
            vals += [
                v for v in (mid, float(np.nextafter(a, b)), float(np.nextafter(b, a))) if a < v < b
            ]
        if ai:
            vals.append(a)
        if bi:
            vals.append(b)
        out.append(vals)
    return out


def raw_values(attr: Attribute) -> list[list[Any]]:
    """Per non-missing code, raw data values that encode to it."""
    if isinstance(attr, IntegerRange):
        return [[attr.lo + c] for c in range(attr.n_values)]
    if isinstance(attr, Categorical):
        return [[v] for v in attr.values]
    if isinstance(attr, Boolean):
        return [[False], [True]]
    if isinstance(attr, Binned):
        return bin_samples(attr)
    raise TypeError(attr)


def gen_table(r: Draw, domain: Domain, n_rows: int) -> tuple[pd.DataFrame, np.ndarray]:
    """A DataFrame of raw values (NULLs where declared) and its code matrix, built independently."""
    codes = np.array(
        [[r.int(0, a.size - 1) for a in domain] for _ in range(n_rows)], dtype=np.int64
    ).reshape(n_rows, len(domain))
    return frame_of_codes(domain, codes, r), codes


def point_table(domain: Domain, r: Draw) -> tuple[pd.DataFrame, np.ndarray]:
    """Every point of 𝔻 once, as raw values (a random raw value per code) and as codes."""
    codes = np.array(list(points(domain)), dtype=np.int64).reshape(-1, len(domain))
    return frame_of_codes(domain, codes, r), codes


def frame_of_codes(domain: Domain, codes: np.ndarray, r: Draw) -> pd.DataFrame:
    """Raw values for a code matrix, with SQL-typed nullable columns."""
    cols: dict[str, list[Any]] = {a.name: [] for a in domain}
    samples = [raw_values(a) for a in domain]
    for row in codes.tolist():
        for j, (a, c) in enumerate(zip(domain, row)):
            cols[a.name].append(None if c == a.missing_code else choice(r, samples[j][c]))
    frame = {}
    for a in domain:
        v = cols[a.name]
        if isinstance(a, IntegerRange):
            frame[a.name] = pd.array(v, dtype="Int64")
        elif isinstance(a, Boolean):
            frame[a.name] = pd.array(v, dtype="boolean")
        elif isinstance(a, Binned):
            frame[a.name] = pd.array(v, dtype="Float64")
        else:
            frame[a.name] = pd.array(v, dtype="string")
    return pd.DataFrame(frame)


def brute_count(q: SetQuery, codes: np.ndarray) -> int:
    return sum(q.contains(row) for row in codes.tolist())


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
