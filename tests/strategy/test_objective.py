"""``--objective max``: the direct split minimises max_q w_q Var_q (candidates.direct), exactly
at the closed form γ(w)/(2ρ) — against a numerical minimisation on small workloads."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from tessera.overlap import max_overlap
from tessera.schema.domain import Domain
from tessera.strategy.choose import choose_strategy
from tessera.workload.workload import Workload

DOMAIN = Domain.from_dict({"a": 4, "b": 3})
CLAUSES = ["a <= 1", "a >= 1", "b = 0", "a = 2 AND b >= 1", "b <= 1", "a = 3"]


def _rows(wl: Workload) -> np.ndarray:
    """R[x, q] = [row x satisfies query q] over the 12 points of the domain (brute force)."""
    codes = np.array([divmod(x, 3) for x in range(12)])
    return np.stack([q.evaluate(DOMAIN, codes) for q in wl.queries], axis=1).astype(float)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from([0.25, 1.0, 2.0, 9.0]), min_size=len(CLAUSES),
                max_size=len(CLAUSES)))
def test_max_objective_split_is_optimal(weights: list[float]) -> None:
    rho = 0.5
    wl = Workload.from_sql(CLAUSES, DOMAIN, weights=weights)
    chosen = choose_strategy(wl, "zcdp", rho, strategy="direct", objective="max").chosen
    w = wl.weight_array()
    got = float(np.max(w * chosen.expected))
    # closed form: γ(w)/(2ρ), γ(w) = max over rows of Σ w_q over the queries it satisfies
    gamma = max_overlap(wl, w, comp="pure").bound
    assert np.isclose(got, gamma / (2 * rho), rtol=1e-4)
    # never worse than the split optimised for the total
    total = choose_strategy(wl, "zcdp", rho, strategy="direct", objective="total").chosen
    assert got <= float(np.max(w * total.expected)) * (1 + 1e-9)
    # and optimal over every split: max_q w_q/(2c_q) ≤ t ⇔ c_q ≥ w_q s/2 with s = 1/t, so
    # the best t is 1/s* of the LP  max s  s.t.  Σ_{q∋x} c_q ≤ ρ (every row x), c_q ≥ w_q s/2
    m = len(CLAUSES)
    rows = _rows(wl)
    a_ub = np.vstack([np.hstack([rows, np.zeros((12, 1))]),
                      np.hstack([-np.eye(m), (w / 2)[:, None]])])
    b_ub = np.concatenate([np.full(12, rho), np.zeros(m)])
    res = linprog(np.r_[np.zeros(m), -1.0], A_ub=a_ub, b_ub=b_ub)
    assert res.status == 0 and np.isclose(got, 1.0 / res.x[-1], rtol=1e-4)
