"""The cost of a measure's clamped sums equals brute force over real values
(docs/theory.md §3.15, "Measures").

A measure m is a data column outside the schema: a record is a point x of the (small) schema
domain and a real value of m. The workloads mix counts, integer sums and sums/averages of
CLAMP(m, lo, hi) with decimal bounds. The brute force evaluates every record on a dense grid of
m's values (41 points from 1 below the outermost bounds to 1 above) plus every breakpoint,
rounding to units as the data engines do, and takes the max over records
(add/remove) or pairs (substitution) of Σ_q c_q |Δf_q|^p; the exact cost of
:func:`tessera.release.linear_costs.linear_cost_bound` on the cost domain must equal it (under
ρ-zCDP substitution by the exact pair program).
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.privacy import Neighbours
from tessera.release.linear_costs import linear_cost_bound
from tessera.schema import measures
from tessera.workload.aggregates import AggregateWorkload

from .cases import DOMAIN, measure_aggregate, measure_where, record_values, workload_of

aggregate = st.one_of(measure_aggregate, st.sampled_from(["COUNT(*)", "SUM(CLAMP(v, 0, 2))"]))
statement = st.builds(lambda ags, w: f"SELECT {', '.join(ags)} FROM t{w}",
                      st.lists(aggregate, min_size=1, max_size=3), measure_where)


def records(w: AggregateWorkload) -> np.ndarray:
    """Δf_q of every record (x, m) — x a schema point, m on a dense grid and every
    breakpoint — in the units of each query (rows: records, deduplicated)."""
    e = w.measures["m"]
    # every clamp bound and 0, read off the linear queries (not the cost domain's grid)
    grid = sorted({b for lq in w.linear if lq.is_measure for b in (lq.lo, lq.hi)} | {0})
    lo, hi = min(grid), max(grid)
    dense = np.linspace(lo * 10.0**e - 1, hi * 10.0**e + 1, 41)
    reals = np.unique(np.concatenate([dense, np.array(grid) * 10.0**e]))
    return np.unique(record_values(w, e, reals), axis=0)


def brute(v: np.ndarray, costs: np.ndarray, p: int, neighbours: Neighbours) -> float:
    if neighbours is Neighbours.ADD_REMOVE:
        return float(np.max(np.abs(v) ** p @ costs))
    return max(float(np.max(np.abs(v - d).astype(np.float64) ** p @ costs)) for d in v)


def bound(w: AggregateWorkload, costs: np.ndarray, definition: str,
          neighbours: Neighbours) -> Fraction:
    cb = linear_cost_bound(w.cost_domain, w.linear, costs, definition=definition,
                           neighbours=neighbours, time_limit=None)
    return Fraction(0) if cb is None else cb.value


def check(texts: list[str], costs: np.ndarray, definition: str,
          neighbours: Neighbours) -> None:
    w = workload_of(texts)
    p = 1 if definition == "pure" else 2
    # costs per unit of the resolution, as a plan's are: c_q/10^(-e·p) on a measure's sums
    per = np.array([10.0 ** (lq.exponent * p) if lq.is_measure else 1.0 for lq in w.linear])
    costs = costs * per
    truth = brute(records(w), costs, p, neighbours)
    got = bound(w, costs, definition, neighbours)
    assert got >= Fraction(truth) * (1 - Fraction(1, 10**12))  # (float brute force)
    # exact (up to the pieces' ulp rounding up, and the float brute force)
    assert got - Fraction(truth) <= Fraction(1, 10**9) * max(Fraction(truth), 1)


@settings(max_examples=15, deadline=None)
@given(st.lists(statement, min_size=1, max_size=3), st.sampled_from(["pure", "zcdp"]),
       st.sampled_from(list(Neighbours)), st.data())
def test_measure_cost_equals_brute_force(texts, definition, neighbours, data):
    if not any("(m" in t for t in texts):
        texts = [*texts, "SELECT SUM(CLAMP(m, -1, 1.5)) FROM t"]
    w = workload_of(texts)
    costs = np.array(data.draw(st.lists(st.integers(1, 8), min_size=len(w.linear),
                                        max_size=len(w.linear)))) / 4.0
    check(texts, costs, definition, neighbours)


#: Substitution: x in the first sum only, y in the second only, both in the third. The worst
#: pair puts one value at the inner bound 1 and the other at 5 (10 + 10 + 4 = 24); the
#: outermost values alone give 20.
INNER = ["SELECT SUM(CLAMP(m, 0, 1)) FROM t WHERE b",
         "SELECT SUM(CLAMP(m, 0, 1)) FROM t WHERE NOT b",
         "SELECT SUM(CLAMP(m, 0, 5)) FROM t"]


def test_inner_clamp_bound_is_the_worst_pair():
    costs = np.array([10.0, 10.0, 1.0])  # per unit of 10^-6
    w = workload_of(INNER)
    assert w.measures == {"m": -6}
    assert abs(bound(w, costs, "pure", Neighbours.SUBSTITUTE) / 10**6 - 24) < 1e-6
    assert abs(bound(w, costs, "pure", Neighbours.ADD_REMOVE) / 10**6 - 15) < 1e-6  # 10·1 + 5


def test_planted_bug_endpoints_only_is_caught(monkeypatch):
    """A grid of the outermost bounds alone (a planted bug) under-prices the substitution."""
    def endpoints(bounds):  # noqa: ANN001, ANN202
        pts = [b for pair in bounds for b in pair]
        return tuple(sorted({min(pts), max(pts)}))

    monkeypatch.setattr("tessera.workload.aggregates.grid_points", endpoints)
    w = workload_of(INNER)
    got = bound(w, np.array([10.0, 10.0, 1.0]), "pure", Neighbours.SUBSTITUTE) / 10**6
    truth = brute(records(w), np.array([10.0, 10.0, 1.0]), 1, Neighbours.SUBSTITUTE)
    assert abs(truth / 10**6 - 24) < 1e-9 and abs(got - 20) < 1e-6


def test_grid_points():
    assert measures.grid_points([(-3, 5)]) == (-3, 0, 5)
    assert measures.grid_points([(1, 5), (2, 3)]) == (1, 2, 3, 5)
    assert measures.grid_points([(-4, -1)]) == (-4, -1)


@pytest.mark.parametrize("bounds,e", [(["0", "500"], -4), (["0", "12.37"], -5),
                                      (["-5", "1000000"], 0), (["0", "0.5"], -7),
                                      (["0", "1.234567"], -6)])
def test_resolution(bounds, e):
    from decimal import Decimal

    assert measures.resolution_exponent([Decimal(b) for b in bounds]) == e


def test_resolution_refuses_too_many_digits():
    from decimal import Decimal

    from tessera.errors import QueryError

    with pytest.raises(QueryError, match="significant digits"):
        measures.resolution_exponent([Decimal("0"), Decimal("1000.000001")])


def test_one_grid_for_all_statements():
    w = workload_of(["SELECT SUM(CLAMP(m, 0, 1.5)) FROM t",
                     "SELECT AVG(CLAMP(m, -2, 3)) FROM t GROUP BY a"])
    assert w.measures == {"m": -6}
    assert w.cost_domain["m"].points == (-2_000_000, 0, 1_500_000, 3_000_000)
    assert list(itertools.chain(DOMAIN.names, ["m"])) == list(w.cost_domain.names)
