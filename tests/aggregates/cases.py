"""Small aggregate workloads for the brute-force tests: a domain with a signed integer
attribute (with a missing value), random statements, and every record's linear answers."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import strategies as st

from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload
from tessera.workload.select import parse_statement

DOMAIN = Domain.from_dict({"attributes": {
    "a": {"type": "categorical", "values": ["x", "y", "z"]},
    "v": {"type": "integer", "min": -3, "max": 4, "missing": True},
    "b": {"type": "boolean"},
}})
POINTS = np.array(list(itertools.product(*(range(s) for s in DOMAIN.sizes))), dtype=np.int64)

where = st.sampled_from(["", " WHERE a = 'x'", " WHERE v >= 0", " WHERE b", " WHERE a <> 'z' "
                         "AND v < 3", " WHERE a = 'y' OR b", " WHERE NOT b AND v BETWEEN -2 AND 1"])
aggregate = st.sampled_from(["COUNT(*)", "COUNT(v)", "SUM(v)", "AVG(v)", "SUM(CLAMP(v, 0, 2))",
                             "SUM(CLAMP(v, -1, 1))", "AVG(CLAMP(v, 1, 3))", "SUM(CLAMP(v, 5, 9))"])
group = st.sampled_from(["", " GROUP BY a", " GROUP BY b", " GROUP BY a, b", " GROUP BY v"])
statement = st.builds(lambda ags, w, g: f"SELECT {', '.join(ags)} FROM t{w}{g}",
                      st.lists(aggregate, min_size=1, max_size=3), where, group)


#: A measure m's CLAMP bounds (decimal texts), its random SUM/AVG aggregates and the conditions
#: beside them, for the measures' brute-force tests.
MEASURE_BOUNDS = ["-2.5", "-1", "0", "0.75", "1.5", "3"]
measure_clamp = st.tuples(st.sampled_from(MEASURE_BOUNDS),
                          st.sampled_from(MEASURE_BOUNDS)).map(lambda t: sorted(t, key=float))
measure_where = st.sampled_from(["", " WHERE b", " WHERE NOT b", " WHERE a = 'x'",
                                 " WHERE v >= 0"])
measure_aggregate = st.builds(lambda kind, c: f"{kind}(CLAMP(m, {c[0]}, {c[1]}))",
                              st.sampled_from(["SUM", "AVG"]), measure_clamp)

def workload_of(texts: list[str]) -> AggregateWorkload:
    return AggregateWorkload(DOMAIN, tuple(parse_statement(t, DOMAIN)[0] for t in texts))


def values(w: AggregateWorkload) -> np.ndarray:
    """f_q(x) for every point x (rows) and linear query q (columns), by evaluating q and the
    clamp directly (no pieces)."""
    out = np.zeros((len(POINTS), len(w.linear)), dtype=np.int64)
    for j, lq in enumerate(w.linear):
        hit = lq.query.evaluate(DOMAIN, POINTS)
        if lq.role == "count":
            out[:, j] = hit
            continue
        attr = DOMAIN[lq.attribute]
        col = POINTS[:, DOMAIN.index(lq.attribute)]
        raw = np.where(col == attr.missing_code, 0, attr.lo + col)
        g = np.where(col == attr.missing_code, 0, np.clip(raw, lq.lo, lq.hi))
        out[:, j] = hit * g
    return out


def multisets(v: np.ndarray, k: int) -> np.ndarray:
    """Δf of every multiset of 0..k records."""
    sums = [np.zeros(v.shape[1], dtype=np.int64)]
    for size in range(1, k + 1):
        for combo in itertools.combinations_with_replacement(range(len(v)), size):
            sums.append(v[list(combo)].sum(axis=0))
    return np.array(sums)


def record_values(w: AggregateWorkload, e: int | None, reals: np.ndarray) -> np.ndarray:
    """Δf_q of every record (x, r): rows POINTS × ``reals`` (x major), columns the linear
    queries, each in its own units (a measure m's: round(r·10^−e), as the data engines round;
    ``e`` None when no query sums a measure)."""
    units = np.round(reals / 10.0**e) if e is not None else np.zeros(1)
    xs = np.repeat(POINTS, len(units), axis=0)
    us = np.tile(units, len(POINTS)).astype(np.int64)
    cols = []
    for lq in w.linear:
        hit = lq.query.evaluate(DOMAIN, xs).astype(np.int64)
        if lq.role == "count":
            cols.append(hit)
        elif lq.is_measure:
            assert lq.exponent == e
            cols.append(hit * np.clip(us, lq.lo, lq.hi))
        else:
            attr = DOMAIN[lq.attribute]
            c = xs[:, DOMAIN.index(lq.attribute)]
            g = np.where(c == attr.missing_code, 0, np.clip(attr.lo + c, lq.lo, lq.hi))
            cols.append(hit * g)
    return np.column_stack(cols)
