"""The exact linear queries equal what DuckDB computes for the same SQL statement on the same
data: ``COUNT(*)``, ``COUNT(v)``, ``SUM(v)`` (SQL: NULLs ignored) and ``CLAMP(v, lo, hi)``
as ``LEAST(GREATEST(v, lo), hi)``, per group of the GROUP BY (groups the data do not have are
0 here, absent there). This checks the parser, the expansion into groups and pieces, and the
counting path together."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.data.source import encode
from tessera.release.aggregates import exact_linear

from .cases import DOMAIN, statement, workload_of

CLAMP = re.compile(r"CLAMP\(v, (-?\d+), (-?\d+)\)")


def frame(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 120
    f = pd.DataFrame({"a": rng.choice(["x", "y", "z"], n), "v": rng.integers(-3, 5, n),
                      "b": rng.choice([True, False], n)})
    f["v"] = f["v"].astype("Int64")
    f.loc[rng.random(n) < 0.1, "v"] = pd.NA
    return f


def clamp_sql(m: re.Match[str]) -> str:
    """CLAMP in DuckDB: NULL stays NULL (DuckDB's GREATEST and LEAST skip NULL arguments, so
    ``LEAST(GREATEST(v, lo), hi)`` would turn a NULL into lo)."""
    return f"CASE WHEN v IS NULL THEN NULL ELSE LEAST(GREATEST(v, {m.group(1)}), {m.group(2)}) END"


@settings(max_examples=25, deadline=None)
@given(statement, st.integers(0, 3))
def test_exact_answers_equal_duckdb(tmp_path_factory, text, seed):
    f = frame(seed)
    path = tmp_path_factory.mktemp("d") / "d.csv"
    f.to_csv(path, index=False)
    w = workload_of([text])
    mine = exact_linear(DOMAIN, w.linear, encode(str(path), DOMAIN))
    st_ = w.statements[0]
    con = duckdb.connect()
    con.register("t", f)
    sql = CLAMP.sub(clamp_sql, text)
    # the group columns first, to key DuckDB's rows
    if st_.group_by:
        sql = sql.replace("SELECT ", "SELECT " + ", ".join(st_.group_by) + ", ", 1)
    rows = con.sql(sql).fetchall()
    ng = len(st_.group_by)
    theirs = {tuple(r[:ng]): r[ng:] for r in rows}
    for i, lq in enumerate(w.linear):
        labels = tuple(DOMAIN[a].value(c) if c != DOMAIN[a].missing_code else None
                       for a, c in zip(st_.group_by, lq.key))
        row = theirs.get(labels)
        agg = st_.aggregates[lq.aggregate]
        pos = lq.aggregate
        if row is None:  # a group the data do not have
            assert mine[i] == 0
            continue
        value = row[pos]
        if agg.kind == "avg":
            # DuckDB's mean = our sum / our count
            s = mine[i] if lq.role == "sum" else mine[i - 1]
            c = mine[i + 1] if lq.role == "sum" else mine[i]
            if c == 0:
                assert value is None
            else:
                assert abs(value - s / c) < 1e-9
        else:
            assert mine[i] == (value or 0)
