"""A person's ledger, certificate, verification and report (docs/theory.md §3.13, §9;
docs/certificate.md): a ledger is bound to one unit and refuses every other one before any
charge; it adds up K (ε) or K² (ρ) times the row-level maximum; a person release's certificate
states the unit (the id column's name, never its values), validates against the schema, and
verifies — and stops verifying when its unit is removed or K edited."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tessera.privacy import ONE_ROW, Neighbours, PrivacyUnit
from tessera.release import Budget, BudgetExceeded, Ledger, answer, verify_certificate
from tessera.release.certificate import digest
from tessera.release.ledger import LedgerError
from tessera.schema.domain import Domain
from tessera.workload.builders import marginal_families
from tessera.workload.workload import Workload

DOMAIN = Domain.from_dict({"attributes": {
    "age": {"type": "integer", "min": 0, "max": 9},
    "region": {"type": "categorical", "values": ["N", "S", "E", "W"]},
}})
WL = Workload.from_sql(["age < 5", "age >= 5", "region = 'N'", "age >= 5 AND region = 'N'"],
                       DOMAIN)
PERSON = PrivacyUnit("customer", 3)


def transactions(seed: int = 0, n: int = 800) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(0, 10, n), "region": rng.choice(list("NSEW"), n),
                         "customer": [f"c{i:04d}" for i in rng.integers(0, 150, n)]})


def ledger(tmp_path: Path, unit: PrivacyUnit = PERSON, total: float = 3.0,
           definition: str = "pure", name: str = "l.sqlite") -> Ledger:
    return Ledger.init(tmp_path / name, total=total, definition=definition,
                       neighbours=Neighbours.ADD_REMOVE, domain=DOMAIN, dataset="t", unit=unit)


# -- the ledger -------------------------------------------------------------------------------

def test_ledger_records_its_unit(tmp_path: Path) -> None:
    book = ledger(tmp_path)
    again = Ledger.open(book.path)
    assert again.unit == PERSON and again.summary().unit == PERSON
    assert "add/remove one person (privacy id 'customer', at most 3 rows" in \
        again.summary().describe()
    assert Ledger.open(ledger(tmp_path, ONE_ROW, name="r.sqlite").path).unit == ONE_ROW


@pytest.mark.parametrize("book_unit, release_unit", [
    (PERSON, ONE_ROW), (ONE_ROW, PERSON), (PERSON, PrivacyUnit("customer", 2)),
    (PERSON, PrivacyUnit("account", 3)),
])
def test_ledger_refuses_another_unit_before_any_charge(tmp_path: Path, book_unit: PrivacyUnit,
                                                       release_unit: PrivacyUnit) -> None:
    book = ledger(tmp_path, book_unit)
    with pytest.raises(LedgerError, match="nothing was charged") as info:
        book.charge(WL, np.full(WL.n_queries, 0.1), label="x", mechanism="m",
                    unit=release_unit)
    assert info.value.hint and "--privacy-id" in info.value.hint
    assert book.summary().releases == ()
    with pytest.raises(LedgerError, match="the ledger protects"):
        answer(transactions(), WL, Budget.of(epsilon=0.5), ledger=book, unit=release_unit,
               seed=1)
    assert book.summary().releases == ()


@pytest.mark.parametrize("definition, factor", [("pure", 3), ("zcdp", 9)])
def test_person_ledger_spends_k_or_k_squared_times_a_row(tmp_path: Path, definition: str,
                                                         factor: int) -> None:
    costs = np.array([0.01, 0.02, 0.03, 0.04])
    row = ledger(tmp_path, ONE_ROW, definition=definition, name="row.sqlite")
    person = ledger(tmp_path, PERSON, definition=definition, name="person.sqlite")
    for _ in range(2):
        row.charge(WL, costs, label="r", mechanism="m")
        person.charge(WL, costs, label="p", mechanism="m", unit=PERSON)
    # the row maximum: 'age >= 5', 'region = N' and their conjunction meet: 0.02+0.03+0.04
    assert row.spent() == pytest.approx(2 * 0.09)
    assert person.spent() == pytest.approx(factor * 2 * 0.09)
    assert person.check() is not None


def test_person_releases_fill_a_person_ledger(tmp_path: Path) -> None:
    """ε = 1 per person, twice, in a total of 2: the third is refused (the person's spend,
    not the row's, is what the ledger adds up)."""
    book = ledger(tmp_path, total=2.0)
    for _ in range(2):
        answer(transactions(), WL, Budget.of(epsilon=1.0), ledger=book, unit=PERSON, seed=2)
    assert book.spent() == pytest.approx(2.0)
    with pytest.raises(BudgetExceeded):
        answer(transactions(), WL, Budget.of(epsilon=0.01), ledger=book, unit=PERSON, seed=3)


# -- the certificate --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def person_release() -> object:
    return answer(transactions(), WL, Budget.of(epsilon=1.0), unit=PERSON)  # secure noise


def test_certificate_states_the_unit(person_release: object) -> None:
    import jsonschema

    cert = json.loads(json.dumps(person_release.certificate))  # type: ignore[attr-defined]
    schema = json.loads((Path(__file__).parents[2] / "docs" / "certificate.schema.json")
                        .read_text())
    jsonschema.validate(cert, schema)
    unit = cert["privacy_unit"]
    assert (unit["id_column"], unit["max_rows"], unit["cost_factor"]) == ("customer", 3, 3)
    assert unit["relation"] == "add/remove one person (privacy id 'customer', at most 3 rows each)"
    assert cert["mechanism"]["sensitivity"] == 3
    assert cert["overlap"]["witness"]["copies"] == 3
    assert cert["overlap"]["gamma_w"] == 3 * 3.0  # γ = 3 per row ('age >= 5', N, both)
    assert all(g["privacy_unit"] == {"id_column": "customer", "max_rows": 3}
               for g in cert["guarantees"])
    # the id column is named, its values never appear
    text = json.dumps(cert)
    assert not any(f"c{i:04d}" in text for i in range(150))
    assert verify_certificate(cert, WL).ok


def test_certificate_without_its_unit_or_with_another_k_fails(person_release: object) -> None:
    cert = json.loads(json.dumps(person_release.certificate))  # type: ignore[attr-defined]
    removed = {k: v for k, v in cert.items() if k != "privacy_unit"}
    removed["digest"] = digest(removed)
    diffs = verify_certificate(removed, WL).differences
    assert any(d.startswith("spent.value") for d in diffs), diffs
    edited = json.loads(json.dumps(cert))
    edited["privacy_unit"]["max_rows"] = 2
    edited["digest"] = digest(edited)
    diffs = verify_certificate(edited, WL).differences
    assert any(d.startswith("privacy_unit.cost_factor") for d in diffs), diffs
    assert any(d.startswith("spent.value") for d in diffs), diffs


@pytest.mark.parametrize("budget", [Budget.of(rho=0.2), Budget.of(epsilon=1.0)],
                         ids=["zcdp", "pure"])
def test_strategy_release_for_a_person_verifies(budget: Budget) -> None:
    wl = marginal_families(DOMAIN, 2)
    rel = answer(transactions(), wl, budget, unit=PERSON)
    cert = json.loads(json.dumps(rel.certificate))
    assert "strategy" in cert and verify_certificate(cert, wl).ok
    factor = PERSON.factor(budget.calibration)
    assert cert["privacy_unit"]["cost_factor"] == factor
    assert rel.plan.spent == pytest.approx(budget.total, rel=1e-9)


def test_report_names_the_unit(tmp_path: Path) -> None:
    rel = answer(transactions(), WL, Budget.of(epsilon=1.0), unit=PERSON, seed=4,
                 report=tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert rel.plan.unit == PERSON
    assert "Unit of privacy" in html and "K = 3 rows" in html
    assert "one person (privacy id &#x27;customer&#x27;, at most 3 rows each)" in html or \
        "one person (privacy id 'customer', at most 3 rows each)" in html
