"""Regressions from the numerical audit: each ε is finite where the truth is, and safe."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest

from tessera.accounting.composition import tensor
from tessera.accounting.tradeoff import eps_delta, gaussian_dp, pure_dp


def test_pure_tensor_eps_delta_at_its_own_delta_is_finite() -> None:
    # 1 − (1 − δ) rounds above δ for this δ: the jump at α = 0 exceeded δ, and ε(δ) was ∞.
    d = 0.00023463085908344644
    e1, e2 = 0.19022093620103114, 1.453350674020791
    got = tensor([pure_dp(e1), eps_delta(e2, d)]).epsilon(d)
    # exact: δ(ε) = δ + (1 − δ)·δ_pure(ε), and δ_pure(ε) = 0 iff ε ≥ ε₁ + ε₂
    assert got >= e1 + e2
    assert got == pytest.approx(1.6435716102218223, rel=1e-11)


def test_gaussian_epsilon_is_safe_in_high_precision() -> None:
    mp = pytest.importorskip("mpmath")
    mu, target = 0.0057, 1e-13

    def true_delta(e: float) -> object:
        m, x = mp.mpf(mu), mp.mpf(e)
        return mp.ncdf(-x / m + m / 2) - mp.exp(x) * mp.ncdf(-x / m - m / 2)

    eps = gaussian_dp(mu).epsilon(target)
    assert math.isfinite(eps)
    with mp.workdps(60):
        assert true_delta(eps) <= mp.mpf(target)  # was above by 8.3e-12 relative
        exact = mp.findroot(lambda x: true_delta(x) - mp.mpf(target), eps)
        assert 0 <= eps / float(exact) - 1 < 1e-10  # and still tight


def test_bdd_queries_alive_at_exit_print_nothing() -> None:
    # a reference cycle makes the collector finalise dd's node table before its nodes
    script = textwrap.dedent("""
        from tessera.engine.bdd import bdd_manager, conjunction, parity
        mgr = bdd_manager([f"x{i}" for i in range(6)])
        QUERIES = [conjunction(mgr, ["x0", "x1"]), parity(mgr, ["x2", "x3", "x4"])]
        QUERIES.append(QUERIES)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Exception ignored" not in result.stderr
    assert result.stderr == ""
