"""Guarantee values, the PNG plot and the ``tessera tradeoff`` command."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from tessera.accounting import (
    Definition,
    Guarantee,
    Neighbours,
    clt_approximation,
    gaussian_dp,
    pure_dp,
)
from tessera.accounting.plot import plot_tradeoffs
from tessera.cli import tradeoff as tradeoff_cli
from tessera.errors import TesseraError


def test_guarantee_names_definition_and_relation() -> None:
    g = Guarantee.gdp(0.5)
    assert "μ-GDP" in g.text() and "add/remove one row" in g.text()
    d = g.to_dict()
    assert d["definition"] == "μ-GDP" and d["neighbours"] == "add/remove one row" and d["mu"] == 0.5
    json.dumps(d)
    s = Guarantee.pure(1.0, Neighbours.SUBSTITUTE)
    assert "substitute one row" in str(s) and s.to_dict()["epsilon"] == 1.0
    f = Guarantee.fdp(gaussian_dp(1.0).to_piecewise_linear())
    assert f.basis == "safe lower bound" and "tradeoff" in f.to_dict()
    with pytest.raises(TesseraError):
        Guarantee.fdp(clt_approximation([0.1]))  # type: ignore[arg-type]
    with pytest.raises(TesseraError):
        Guarantee.approx(1.0, 1.0)
    assert Neighbours.parse("substitution") is Neighbours.SUBSTITUTE
    with pytest.raises(TesseraError):
        Neighbours.parse("swap-ish")


def test_guarantee_conversions() -> None:
    g = Guarantee.gdp(1.0)
    at = g.at_delta(1e-5)
    assert at.definition is Definition.APPROX and at.epsilon == pytest.approx(
        gaussian_dp(1.0).epsilon(1e-5)
    )
    assert Guarantee.pure(0.7).epsilon_at(1e-6) == 0.7
    rho = 0.5
    z = Guarantee.zcdp(rho)
    assert z.epsilon_at(1e-6) == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1e6)))
    # zCDP's trade-off lower bound implies the same or weaker ε than the closed conversion.
    f = z.as_tradeoff()
    assert f.epsilon(1e-6) <= z.epsilon_at(1e-6) * 1.001
    # ρ-zCDP of the Gaussian mechanism (ρ = μ²/2) is implied by μ-GDP: its f is below G_μ.
    a = np.linspace(0, 1, 501)
    assert np.all(f(a) <= gaussian_dp(1.0)(a) + 1e-12)
    assert Guarantee.approx(1.0, 1e-3).as_tradeoff() == pure_dp(1.0).__class__(1.0, 1e-3)


def test_plot_writes_png(tmp_path) -> None:
    path = plot_tradeoffs(
        [("G_1", gaussian_dp(1.0)), ("pure", pure_dp(1.0)), ("clt", clt_approximation([0.1] * 10))],
        tmp_path / "c.png",
    )
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:  # a group, as in tessera's main app with several commands
        pass

    tradeoff_cli.register(app)
    return app


def test_cli_gaussian(tmp_path) -> None:
    out = tmp_path / "curves.png"
    res = CliRunner().invoke(
        _app(),
        [
            "tradeoff",
            "--mechanism",
            "gaussian",
            "--mu",
            "0.5",
            "--queries",
            "100",
            "--overlap",
            "4",
            "-o",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "μ = 1 " in res.output and "μ = 5 " in res.output  # 0.5·√4 and 0.5·√100
    assert "add/remove one row" in res.output and "δ = 1e-06" in res.output
    assert "0.800" in res.output
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_cli_laplace_and_errors(tmp_path) -> None:
    res = CliRunner().invoke(
        _app(),
        [
            "tradeoff",
            "-m",
            "laplace",
            "-e",
            "0.5",
            "-t",
            "10",
            "-g",
            "2",
            "--clt",
            "-o",
            str(tmp_path / "l.png"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "pure ε-DP with ε = 1 " in res.output and "ε = 5 " in res.output
    bad = CliRunner().invoke(_app(), ["tradeoff", "-m", "laplace", "--mu", "1", "-t", "3"])
    assert bad.exit_code == 2 and "--epsilon" in bad.output
