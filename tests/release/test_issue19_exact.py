"""Issue 19, item 4: one number, one source for the spent budget, and exact rationals end to
end (the plan's re-check, a synthesis run's spend against what the ledger charges, ε²/2)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from tessera.errors import TesseraError
from tessera.privacy import Definition, Neighbours
from tessera.release import Budget, Ledger, answer, noise_plan
from tessera.release.decimals import decimal_value
from tessera.release.plan import recheck_spent
from tessera.schema.domain import Domain
from tessera.synth.accounting import Budget as RunBudget
from tessera.synth.accounting import plan as synth_plan
from tessera.workload.workload import Workload

DOMAIN = Domain.from_dict({"attributes": {
    "age": {"type": "integer", "min": 0, "max": 9},
    "sex": {"type": "categorical", "values": ["F", "M"]}}})
WL = Workload.from_sql(["age < 5", "age >= 5", "sex = 'F'", "age >= 7 AND sex = 'M'",
                        "age < 3"], DOMAIN)


def test_item4_certificate_and_ledger_state_one_number(tmp_path) -> None:  # type: ignore[no-untyped-def]
    book = Ledger.init(tmp_path / "L.db", total=1.0, definition="pure",
                       neighbours="add-remove", domain=DOMAIN, dataset="d")
    frame = pd.DataFrame({"age": [1, 5, 8], "sex": ["F", "M", "M"]})
    rel = answer(frame, WL, Budget.of(epsilon=1.0), ledger=book, seed=1)
    c = rel.certificate
    assert rel.charge is not None
    # the same float, from the same exact computation (previously 0.99999999999934 vs ...89)
    assert c["spent"]["value"] == rel.charge.cost == rel.charge.spent_after
    assert c["spent"]["value"] == c["ledger"]["spent_after"] == book.spent()
    assert decimal_value(c["spent"]["value"]) <= 1


def test_item4_plan_recheck_has_no_tolerance() -> None:
    wl = Workload.from_sql(["age < 5", "sex = 'F'"], DOMAIN)
    total = 1.0
    over = np.array([0.5, np.nextafter(0.5, 1.0)])  # the witness row pays 1 + 1.1e-16
    with pytest.raises(TesseraError, match="a row pays more than the budget"):
        recheck_spent(wl, over, Neighbours.ADD_REMOVE, total, 10.0)
    spent, exact = recheck_spent(wl, np.array([0.5, 0.5]), Neighbours.ADD_REMOVE, total, 10.0)
    assert spent == 1.0 and exact  # equal to the total is admitted


def test_item4_plan_recheck_adds_the_decimals_exactly() -> None:
    # in floating point 0.1 + 0.2 = 0.30000000000000004 > 0.3 (the old re-check refused this
    # plan: "a row pays more than the budget"); in the decimals every budget figure is read as
    # (what the ledger charges), it is exactly 0.3
    wl = Workload.from_sql(["age < 5", "sex = 'F'"], DOMAIN)
    assert 0.1 + 0.2 > 0.3
    spent, exact = recheck_spent(wl, np.array([0.1, 0.2]), Neighbours.ADD_REMOVE, 0.3, 10.0)
    assert spent == 0.3 and exact


def test_item4_synthesis_spends_at_most_what_the_ledger_charges() -> None:
    assert Fraction(0.1) > Fraction("0.1")  # the binary value of 0.1 is above one tenth
    for kw in ({"epsilon": 0.1}, {"rho": 0.1}):
        budget = RunBudget.of(**kw, neighbours="add-remove")  # type: ignore[arg-type]
        assert budget.exact == Fraction("0.1")
        p = synth_plan(budget, 7)
        spend = p.total_cost() + 7 * p.round_cost()
        assert spend <= Fraction("0.1")  # what repr(ε) charges: ten runs fit a total of 1
        assert 10 * spend <= 1
    assert RunBudget.of(epsilon=0.3).exact == Fraction(0.3)  # binary 0.3 is below 3/10


def test_item4_zcdp_from_pure_is_rounded_up() -> None:
    plan = noise_plan(WL, Budget.of(epsilon=0.7))
    eps = plan.spent
    rho = next(g for g in plan.guarantees() if g.definition is Definition.ZCDP)
    assert rho.rho is not None and decimal_value(rho.rho) >= decimal_value(eps) ** 2 / 2
