"""Least-squares consistency of nested aggregate statements (tessera.release.aggregate_
consistency): every equality it imposes holds on exact answers of real data, the consistent
answers satisfy all of them, their variances never exceed the noisy ones', and with no nesting
nothing changes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tessera.data.source import encode
from tessera.release.aggregate_consistency import consistent, constraints
from tessera.release.aggregates import exact_linear
from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload
from tessera.workload.select import parse_statement

DOMAIN = Domain.from_dict({"attributes": {
    "a": {"type": "categorical", "values": ["x", "y", "z"]},
    "b": {"type": "boolean"},
    "v": {"type": "integer", "min": -2, "max": 6, "missing": True},
}})
NESTED = ["v >= 0",
          "SELECT COUNT(*), SUM(v), AVG(CLAMP(v, 0, 3)) FROM t WHERE v >= 0",
          "SELECT a, COUNT(*), SUM(v), SUM(CLAMP(v, 0, 3)), COUNT(v) FROM t WHERE v >= 0 "
          "GROUP BY a",
          "SELECT b, a, SUM(v), AVG(v) FROM t WHERE v >= 0 GROUP BY b, a",
          "SELECT a, SUM(v) FROM t GROUP BY a"]


def workload(texts):
    return AggregateWorkload(DOMAIN, tuple(parse_statement(t, DOMAIN)[0] for t in texts))


def matrix(eqs, n):
    a = np.zeros((len(eqs), n))
    for r, (coarse, fine) in enumerate(eqs):
        a[r, coarse] = 1.0
        a[r, fine] -= 1.0
    return a


def test_equalities_hold_on_exact_answers(tmp_path):
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"a": rng.choice(["x", "y", "z"], 200),
                          "b": rng.choice(["true", "false"], 200),
                          "v": rng.integers(-2, 7, 200).astype(object)})
    frame.loc[::7, "v"] = None
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    w = workload(NESTED)
    eqs = constraints(w, w.linear)
    # the bare count = the total COUNT(*); the total's COUNT, SUM and AVG's count/sum against
    # the groups by a and by (b, a); AVG's clamped sum = SUM(CLAMP(...)) of the groups ...
    assert len(eqs) >= 1 + 3 + 3 * 2 + 2 * 3
    exact = exact_linear(DOMAIN, w.linear, encode(str(path), DOMAIN))
    assert np.all(matrix(eqs, len(exact)) @ exact == 0)


def test_projection_is_consistent_and_never_noisier():
    w = workload(NESTED)
    rng = np.random.default_rng(4)
    n = len(w.linear)
    y = rng.normal(0, 30, n).round()
    var = rng.uniform(1, 50, n)
    f, fvar, n_eq = consistent(w, w.linear, y, var)
    a = matrix(constraints(w, w.linear), n)
    assert n_eq == a.shape[0]
    np.testing.assert_allclose(a @ f, 0, atol=1e-6)
    assert np.all(fvar <= var + 1e-9)
    # the statement outside the nesting (another WHERE) is untouched
    last = [i for i, lq in enumerate(w.linear) if lq.statement == 4]
    np.testing.assert_allclose(f[last], y[last])


def test_no_nesting_no_change():
    w = workload(["SELECT SUM(v) FROM t WHERE b", "SELECT a, COUNT(*) FROM t GROUP BY a"])
    y = np.arange(len(w.linear), dtype=float)
    f, fvar, n_eq = consistent(w, w.linear, y, np.ones(len(y)))
    assert n_eq == 0 and np.array_equal(f, y) and np.array_equal(fvar, np.ones(len(y)))
