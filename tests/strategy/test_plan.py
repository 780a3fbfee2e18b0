"""``tessera plan``: the smallest budget for a target error meets it (and no smaller one)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.release.budget import Budget
from tessera.release.planning import plan_release
from tessera.schema.domain import Domain
from tessera.workload.families import k_way_marginals
from tessera.workload.workload import Workload

DOMAIN = Domain.from_dict({"a": 2, "b": 6, "c": 3})
WL = Workload.of_families(DOMAIN, k_way_marginals(DOMAIN, 2))


@pytest.mark.parametrize("budget", [Budget.of(rho=0.1), Budget.of(epsilon=1.0),
                                    Budget.of(epsilon=1.0, delta=1e-6), Budget.of(mu=0.5)])
def test_target_error_budget_meets_the_target(budget: Budget) -> None:
    first = plan_release(WL, budget, target_error=1.5)
    assert first.needed is not None
    again = plan_release(WL, first.needed)
    assert again.choice.chosen.name == first.choice.chosen.name
    assert again.error == pytest.approx(1.5, rel=1e-6)
    assert again.error <= 1.5 * (1 + 1e-9)


def test_cli_plan_prints_candidates_and_budget(tmp_path) -> None:
    schema = tmp_path / "s.yaml"
    DOMAIN.save(schema)
    wl = tmp_path / "w.yaml"
    wl.write_text("marginals:\n  - {all: 2}\n")
    res = CliRunner().invoke(app, ["plan", str(wl), "--schema", str(schema), "--rho", "0.1",
                                   "--target-error", "2"])
    assert res.exit_code == 0, res.output
    assert "direct" in res.output and "chosen" in res.output and "ρ = " in res.output
    res = CliRunner().invoke(app, ["plan", str(wl), "--schema", str(schema), "--rho", "0.1",
                                   "--strategy", "hierarchical"])
    assert res.exit_code != 0 and "does not apply" in res.output
