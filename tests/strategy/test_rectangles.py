"""2-D product strategies (tessera.strategy.rectangles) against explicit dense GLS on small
grids: the closed-form variances κ⁻¹V₁V₂ equal the diagonal of W (AᵀUA)⁻¹ Wᵀ, the estimates
equal explicit GLS, the bound t·κ⁻¹V₁V₂ holds for discrete-like noise variances below the
model's; the chooser's expected error matches seeded empirical MSE (and a planted wrong γ
is caught); the candidates on a 2-D ranges block."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.privacy import Definition
from tessera.release import Budget, answer
from tessera.release.certificate import verify_certificate
from tessera.strategy.choose import choose_strategy
from tessera.workload.workload import Workload

from .dense import explicit, grid_workload
from .empirical import mse_ratio


def _wl(n1: int, n2: int, kind: str = "ranges") -> Workload:
    return grid_workload(n1, n2, kind)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.sampled_from(["identity", "hierarchical"]),
       st.sampled_from(["zcdp", "pure"]), st.sampled_from(["ranges", "prefixes"]), st.data())
def test_kronecker_gls_equals_dense(n1, n2, kind, definition, family, data):
    wl = _wl(n1, n2, family)
    ch = choose_strategy(wl, definition, 0.7, strategy="direct", compare=True)
    cands = [c for c in ch.candidates if c.name.split("(")[0] == kind]
    if not cands:  # (no tree on either axis of a tiny grid: only the identity)
        assert kind == "hierarchical" and max(n1, n2) < 3
        return
    s = cands[0]
    a_mat, q_mat = explicit(s)
    model = (2 * s.scales ** 2 if definition == "pure" else s.scales ** 2)
    prec = 1.0 / model
    cov = np.linalg.inv(a_mat.T @ (prec[:, None] * a_mat))
    # the model's variances are exact (t = 1 up to the shares' rounding)
    np.testing.assert_allclose(s.expected, np.einsum("ij,jk,ik->i", q_mat, cov, q_mat),
                               rtol=2e-5)
    # noise variances below the model's (as the discrete noises'): still an upper bound
    shrink = np.array([data.draw(st.floats(0.5, 1.0)) for _ in s.measured.partitions])
    starts = s.measured.family_starts
    v = model.copy()
    for k, f in enumerate(shrink):
        v[starts[k]:starts[k + 1]] *= f
    rec = s.reconstruction
    u = rec.estimator_weights()
    wvec = np.concatenate([np.full(starts[k + 1] - starts[k], u[k])
                           for k in range(len(u))])
    k_inv = np.linalg.inv(a_mat.T @ (wvec[:, None] * a_mat))
    est_map = q_mat @ k_inv @ a_mat.T * wvec
    exact = np.einsum("ij,j,ij->i", est_map, v, est_map)
    bound = rec.variances(v)
    assert np.all(exact <= bound * (1 + 1e-9))
    y = np.random.default_rng(0).normal(0, 3, len(v))
    np.testing.assert_allclose(rec.answers(y, v), est_map @ y, rtol=1e-8, atol=1e-8)


def test_candidates_and_choice_on_a_grid():
    wl = _wl(16, 12)
    ch = choose_strategy(wl, "zcdp", 0.1, compare=True)
    names = [c.name for c in ch.candidates]
    assert names[0] == "direct" and "identity" in names
    assert any(n.startswith("hierarchical(b=") for n in names)
    totals = {c.name.split("(")[0]: c.total for c in ch.candidates}
    assert ch.chosen.total == min(totals.values())
    assert totals["direct"] > 5 * ch.chosen.total


def test_expected_error_matches_empirical_and_catches_a_planted_gamma():
    wl = _wl(16, 12)
    rng = np.random.default_rng(5)
    data = pd.DataFrame({"x": rng.integers(0, 16, 4000), "y": rng.integers(0, 12, 4000)})
    runs = 40
    ratio, s = mse_ratio(wl, data, "hierarchical", 0.05, runs)
    assert abs(ratio - 1) < 3 * np.sqrt(2 / runs), ratio
    gamma_w = choose_strategy(wl, "zcdp", 0.05, strategy="direct").chosen.overlap.bound
    assert abs(ratio * s.overlap.bound / gamma_w - 1) > 3 * np.sqrt(2 / runs)


def test_answer_and_verify_2d(tmp_path):
    wl = _wl(12, 10)
    rng = np.random.default_rng(1)
    data = pd.DataFrame({"x": rng.integers(0, 12, 500), "y": rng.integers(0, 10, 500)})
    cert = tmp_path / "c.json"
    out = tmp_path / "a.csv"
    rel = answer(data, wl, Budget.of(epsilon=1.0), certificate=cert, output=out)
    import json

    doc = json.loads(cert.read_text())
    assert doc["strategy"]["chosen"] != "direct"
    assert verify_certificate(doc, wl).ok
    frame = pd.read_csv(out)
    assert list(frame["query"]) == list(wl.names)
    assert frame["query"][0] == "range(x in [0, 0] AND y in [0, 0])"
    assert rel.strategy is not None and np.all(np.isfinite(rel.answers))
    with pytest.raises(Exception, match="does not apply"):
        choose_strategy(wl, Definition.ZCDP, 0.1, strategy="residual")
