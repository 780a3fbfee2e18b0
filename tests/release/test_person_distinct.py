"""Releases that count people (``COUNT(DISTINCT id)``; docs/theory.md §3.14): the noise is
calibrated to the coverage of K rows (never more than the row count's K·γ, and equal to γ for
K = 1), the spend is proven within the budget, the certificate states the count and the cost,
``verify`` re-derives it from the certificate and the workload, and what is refused is refused
before any budget is spent."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest

from tessera.errors import TesseraError
from tessera.overlap import max_overlap
from tessera.privacy import PrivacyUnit
from tessera.release.answering import answer
from tessera.release.budget import Budget
from tessera.release.certificate import digest, verify_certificate
from tessera.release.ledger import Ledger
from tessera.release.strategy_release import strategy_plan
from tessera.workload.builders import marginal_families
from tessera.workload.workload import Workload

from .test_person_release import DOMAIN, WORKLOADS, table

PEOPLE = PrivacyUnit("pid", 3, "people")


@pytest.mark.parametrize("name", sorted(WORKLOADS))
@pytest.mark.parametrize("budget", [Budget.of(epsilon=1.0), Budget.of(rho=0.5)],
                         ids=["pure", "zcdp"])
@pytest.mark.parametrize("neighbours", ["add-remove", "substitute"])
def test_people_noise_is_the_coverage(name: str, budget: Budget, neighbours: str) -> None:
    wl = WORKLOADS[name]()
    plan, choice = strategy_plan(wl, budget, neighbours=neighbours, allocation="auto",
                                 strategy="auto", objective="total", time_limit=30.0,
                                 unit=PEOPLE)
    assert choice is None and plan.workload is wl  # W measured as it is
    assert plan.spent <= budget.total and plan.unit == PEOPLE
    comp = budget.calibration
    rows = max_overlap(wl, plan.workload.weight_array() > 0, comp=comp, neighbours=neighbours,
                       unit=PrivacyUnit("pid", 3))
    one = max_overlap(wl, plan.workload.weight_array() > 0, comp=comp, neighbours=neighbours,
                      unit=PrivacyUnit("pid", 1, "people"))
    # S ≤ coverage ≤ K·S (and Σ s): never noisier than counting rows
    assert one.score_bound <= plan.overlap.score_bound <= rows.score_bound


def test_release_certificate_and_verify() -> None:
    wl = WORKLOADS["predicates"]()
    rel = answer(table(), wl, Budget.of(epsilon=1.0), unit=PEOPLE)
    doc = json.loads(json.dumps(rel.certificate))
    schema = json.loads((Path(__file__).parents[2] / "docs" / "certificate.schema.json")
                        .read_text())
    jsonschema.validate(doc, schema)
    unit = doc["privacy_unit"]
    assert unit["count"] == "people" and unit["cost"] == "coverage"
    assert "cost_factor" not in unit and doc["mechanism"]["sensitivity"] == 1
    assert "counted once per query" in unit["relation"]
    witness = doc["overlap"]["witness"]
    assert 1 <= len(witness.get("rows", [witness["row"]])) <= 3
    assert verify_certificate(doc, wl).ok
    # a certificate that claims rows (K·γ accounting) for the people's scales is caught
    forged = dict(doc)
    forged["privacy_unit"] = {k: v for k, v in unit.items() if k not in ("count", "cost")}
    forged["privacy_unit"]["cost_factor"] = 3
    forged["digest"] = digest(forged)
    diffs = verify_certificate(forged, wl).differences
    assert any("re-checks at" in d or d.startswith("spent.value") for d in diffs), diffs


def test_k1_people_is_the_row_release() -> None:
    """K = 1: one row per person, counted once: the same noise as the row-level release."""
    wl = WORKLOADS["marginals"]()
    a, _ = strategy_plan(wl, Budget.of(rho=0.5), neighbours="add-remove", allocation="uniform",
                         strategy="direct", objective="total", time_limit=30.0,
                         unit=PrivacyUnit("pid", 1, "people"))
    b, _ = strategy_plan(wl, Budget.of(rho=0.5), neighbours="add-remove", allocation="uniform",
                         strategy="direct", objective="total", time_limit=30.0)
    np.testing.assert_array_equal(a.scales, b.scales)


def test_refused_before_any_spend(tmp_path) -> None:  # type: ignore[no-untyped-def]
    wl = WORKLOADS["marginals"]()
    with pytest.raises(TesseraError, match="not a sum of other counts"):
        answer(table(), wl, Budget.of(epsilon=1.0), unit=PEOPLE, strategy="identity")
    with pytest.raises(TesseraError, match="coverage of K rows"):
        answer(table(), WORKLOADS["predicates"](), Budget.of(epsilon=1.0), unit=PEOPLE,
               allocation="optimal")
    with pytest.raises(TesseraError, match="sum"):
        answer(table(), wl, Budget.of(epsilon=1.0), unit=PEOPLE, postprocess=("consistency",))
    rows = Ledger.init(tmp_path / "rows.ledger", total=5.0, definition="pure",
                       neighbours="add-remove", domain=DOMAIN, dataset="t",
                       unit=PrivacyUnit("pid", 3))
    with pytest.raises(TesseraError, match="counted once per query"):
        answer(table(), wl, Budget.of(epsilon=1.0), unit=PEOPLE, ledger=rows)
    assert rows.spent() == 0


def test_people_ledger_charges_the_coverage(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A ledger made for people adds up the coverage of the union of its releases' costs."""
    book = Ledger.init(tmp_path / "people.ledger", total=3.0, definition="pure",
                       neighbours="add-remove", domain=DOMAIN, dataset="t", unit=PEOPLE)
    assert Ledger.open(book.path).unit == PEOPLE
    wl = WORKLOADS["predicates"]()
    answer(table(), wl, Budget.of(epsilon=1.0), unit=PEOPLE, ledger=book, seed=1)
    answer(table(), wl, Budget.of(epsilon=1.0), unit=PEOPLE, ledger=book, seed=2)
    assert 1.9 <= book.spent() <= 2.0 + 1e-9


def test_people_answers_are_distinct_counts() -> None:
    """With a huge budget the noise vanishes: the answers are the distinct counts."""
    frame = table(5, 300)
    wl = Workload.from_sql(["a < 2", "b = 'x'", "TRUE"], DOMAIN)
    rel = answer(frame, wl, Budget.of(epsilon=100.0), unit=PrivacyUnit("pid", 50, "people"),
                 seed=1)
    want = [frame.pid[frame.a < 2].nunique(), frame.pid[frame.b == "x"].nunique(),
            frame.pid.nunique()]
    assert np.max(np.abs(rel.noisy - np.array(want))) <= 3
    assert marginal_families is not None and pd is not None


def test_report_says_distinct_people(tmp_path) -> None:  # type: ignore[no-untyped-def]
    report = tmp_path / "r.html"
    answer(table(), WORKLOADS["predicates"](), Budget.of(rho=0.5), unit=PEOPLE, report=report)
    html = report.read_text()
    assert "distinct people" in html and "coverage" in html


@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_witness_person_moves_exactly_the_covered_queries(k: int) -> None:
    """Through the engine's bounding and distinct counting: adding a person made of the
    coverage witness's rows (at most K, all kept) moves exactly the witness queries, each by 1
    — the coverage the noise is calibrated to is attained by real data (a planted count of
    rows instead of people moves a query by the number of its rows there)."""
    from tessera.data.counts import count

    wl = WORKLOADS["predicates"]()
    unit = PrivacyUnit("pid", k, "people")
    ov = max_overlap(wl, unit=unit)
    assert ov.exact and ov.witness is not None and len(ov.witness.rows) <= k
    base = table(9, 200)
    rows = [{a.name: a.decode(np.array([c]))[0] for a, c in zip(DOMAIN, r)}
            for r in ov.witness.rows]
    person = pd.DataFrame([r | {"pid": 10_000} for r in rows])
    d1 = count(pd.concat([base, person], ignore_index=True), wl, unit=unit).answers
    d2 = count(base, wl, unit=unit).answers
    moved = np.asarray(d1) - np.asarray(d2)
    assert set(np.unique(moved)) <= {0, 1}
    assert tuple(np.flatnonzero(moved)) == ov.witness.queries
    assert int(moved.sum()) == ov.score_bound  # unit weights: the coverage counts queries
