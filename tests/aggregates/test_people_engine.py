"""Aggregate statements counting people, computed by the engine (docs/theory.md §3.14,
"Aggregates counting people"): after the K-row bounding, a group's count is its number of
distinct people and a sum adds each person's total there, clamped once — against pandas on
the rows DuckDB kept. A person without a row in a group adds nothing (not clamp(0)), which a
clamp above 0 shows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.data.source import encode
from tessera.privacy import PrivacyUnit
from tessera.release.aggregates import exact_linear
from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload
from tessera.workload.select import parse_statement

from . import test_people_cost as cost_cases

DOMAIN = Domain.from_dict({"attributes": {
    "a": {"type": "integer", "min": -3, "max": 9},
    "b": {"type": "categorical", "values": ["x", "y", "z"]},
}})
STATEMENTS = ["SELECT COUNT(*), SUM(a), AVG(CLAMP(a, 0, 5)) FROM t GROUP BY b",
              "SELECT SUM(CLAMP(a, 2, 7)) FROM t WHERE b <> 'z'",
              "SELECT SUM(CLAMP(m, -1.5, 4)), AVG(CLAMP(m, 0.5, 2)) FROM t WHERE a >= 0 GROUP BY b"]


def table(n: int = 300, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.integers(-3, 10, n), "b": rng.choice(["x", "y", "z"], n),
                         "pid": rng.integers(0, 40, n), "m": rng.normal(0.5, 2, n).round(2)})


def workload() -> AggregateWorkload:
    return AggregateWorkload(DOMAIN, tuple(parse_statement(s, DOMAIN)[0] for s in STATEMENTS))


def by_pandas(w: AggregateWorkload, kept: pd.DataFrame) -> list[int]:
    """Every linear query per person, on the kept rows (columns a, b, pid, m), in pandas."""
    out = []
    for lq in w.linear:
        st = w.statements[lq.statement]
        sel = np.ones(len(kept), dtype=bool)
        if st.group_by:
            sel &= kept.b == ["x", "y", "z"][lq.key[0]]
        if lq.statement == 1:
            sel &= kept.b != "z"
        if lq.statement == 2:
            sel &= kept.a >= 0
        rows = kept[sel]
        if lq.role == "count":
            out.append(int(rows.pid.nunique()))
            continue
        if lq.is_measure:  # units of 10^e, half away from zero (the engines' rounding)
            y = rows.m * 10.0 ** -lq.exponent
            v = (np.sign(y) * np.floor(np.abs(y) + 0.5)).astype(np.int64)
        else:
            v = rows.a.astype(np.int64)
        out.append(int(v.groupby(rows.pid).sum().clip(lq.lo, lq.hi).sum()))
    return out


@pytest.mark.parametrize("k", [1, 3, 50])
def test_duckdb_sums_each_persons_clamped_total(k):
    frame = table()
    w = workload()
    unit = PrivacyUnit("pid", k, "people")
    got = exact_linear(DOMAIN, w.linear, encode(frame, DOMAIN, unit=unit,
                                                measures=tuple(w.measures))).tolist()
    if k == 50:  # nobody has 50 rows: every row is kept
        assert got == by_pandas(w, frame)
    # at most K rows of each person: the kept rows are a subset, the counts ≤ 40 people
    assert all(got[i] <= 40 for i, lq in enumerate(w.linear) if lq.role == "count")
    rows = exact_linear(DOMAIN, w.linear, encode(frame, DOMAIN, unit=PrivacyUnit("pid", k),
                                                 measures=tuple(w.measures))).tolist()
    if k > 1:
        assert got != rows  # a person's rows clamped once, not each


def test_no_row_in_a_group_adds_nothing():
    """CLAMP(a, 2, 7) of a group with one person: that person's clamped total, not plus
    clamp(0) = 2 for each of the others."""
    frame = pd.DataFrame({"a": [0, 1, 9, 9], "b": ["x", "x", "z", "z"], "pid": [1, 1, 2, 3],
                          "m": [0.0, 0.0, 0.0, 0.0]})
    w = workload()
    got = exact_linear(DOMAIN, w.linear, encode(frame, DOMAIN, unit=PrivacyUnit(
        "pid", 2, "people"), measures=tuple(w.measures))).tolist()
    assert got == by_pandas(w, frame)
    i = next(j for j, lq in enumerate(w.linear) if lq.statement == 1)
    assert got[i] == 2  # person 1: total 1, clamped to 2; persons 2 and 3 have no row in it


@settings(max_examples=12, deadline=None)
@given(st.lists(cost_cases.statement, min_size=1, max_size=3),
       st.integers(0, 2**32 - 1))
def test_duckdb_matches_the_definition_on_random_statements(texts, seed):
    """Random statements (WHERE with OR and NOT, GROUP BY the summed attribute, NULLs, clamps
    above 0) on a random table of 12 people with 1–4 rows each, K = 4 (nothing cut): DuckDB's
    answers are the definition evaluated person by person in Python."""
    w = cost_cases.workload_of(texts)
    rng = np.random.default_rng(seed)
    per = rng.integers(1, 5, 12)
    idx = rng.integers(0, len(cost_cases.POINTS), int(per.sum()))
    codes = cost_cases.POINTS[idx]
    pid = np.repeat(np.arange(12), per)
    dom = cost_cases.DOMAIN
    frame = pd.DataFrame({a.name: a.decode(codes[:, i]) for i, a in enumerate(dom)})
    frame["pid"] = pid
    got = exact_linear(dom, w.linear, encode(frame, dom, unit=PrivacyUnit(
        "pid", 4, "people"))).tolist()
    sets = np.full((12, 4), -1, dtype=np.int64)
    for p in range(12):
        rows = idx[pid == p]
        sets[p, :len(rows)] = rows
    want = cost_cases.terms(w, sets).sum(axis=0).tolist()
    assert got == want
