"""Synthesis at the person level (docs/theory.md §3.13): the adaptive method's measurements and
selection scores are calibrated to a person's sensitivity, K times a row's, so every noise
scale grows by K at the same budget; the run record names the unit and ``verify`` re-proves
the spend with it (and rejects the record without it); a person ledger is charged what a
person pays; methods calibrated to one row are refused for a person."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tessera.errors import DataError, TesseraError
from tessera.privacy import Neighbours, PrivacyUnit
from tessera.release import Budget, Ledger, answer
from tessera.release.certificate import verify_certificate
from tessera.schema.domain import Domain
from tessera.synth.record import sealed
from tessera.synth.synthesizer import Synthesizer
from tessera.synth.verify import verify_record
from tessera.workload.builders import marginal_families
from tessera.workload.workload import Workload

DOMAIN = Domain.from_dict({"attributes": {
    "a": {"type": "integer", "min": 0, "max": 3},
    "b": {"type": "categorical", "values": ["x", "y", "z"]},
    "c": {"type": "integer", "min": 0, "max": 2},
}})
WL = marginal_families(DOMAIN, 2)
PERSON = PrivacyUnit("pid", 3)
SEEDED = ("private: the run used seeded test randomness (NOT PRIVATE)",)


def people(n: int = 1500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.integers(0, 4, n), "b": rng.choice(list("xyz"), n),
                         "c": rng.integers(0, 3, n), "pid": rng.integers(0, 300, n)})


def fit(unit: PrivacyUnit | None, budget: Budget, neighbours: str = "add-remove",
        **kw: object):
    data = people() if unit is not None else people().drop(columns=[PERSON.id_column])
    extra = {} if unit is None else {"unit": unit}
    return Synthesizer("adaptive", rounds=9).fit(data, WL, budget, neighbours=neighbours,
                                                 seed=1, **extra, **kw)


@pytest.mark.parametrize("budget", [Budget.of(epsilon=1.0), Budget.of(rho=0.1)],
                         ids=["pure", "zcdp"])
@pytest.mark.parametrize("neighbours", ["add-remove", "substitute"])
def test_every_measurement_is_k_times_noisier(budget: Budget, neighbours: str) -> None:
    row, person = fit(None, budget, neighbours), fit(PERSON, budget, neighbours)
    r0, p0 = row.result.record.steps, person.result.record.steps
    # the initialisation measures every one-way marginal the same way in both runs
    inits = [i for i, s in enumerate(r0) if s.round == 0 and s.role == "measurement"]
    assert inits and [s.role for s in p0[:len(inits)]] == ["measurement"] * len(inits)
    for i in inits:
        assert p0[i].sensitivity == 3 * r0[i].sensitivity
        assert p0[i].mechanism.value == pytest.approx(3 * r0[i].mechanism.value, rel=1e-12)
    spent = person.result.record.spent
    assert spent.unit == PERSON and "one person (privacy id 'pid'" in spent.text()
    assert float(spent.epsilon if budget.definition.value == "pure" else spent.rho) <= \
        budget.total


def test_the_record_names_the_unit_and_verifies() -> None:
    person = fit(PERSON, Budget.of(rho=0.1))
    record = person.run_record()
    assert record["privacy_unit"]["id_column"] == "pid" and record["privacy_unit"]["max_rows"] == 3
    assert all(g["privacy_unit"] == {"id_column": "pid", "max_rows": 3}
               for g in record["spent"])
    assert verify_record(record, WL).differences == SEEDED
    # without its unit the steps' sensitivities are not a row's: verify says so
    body = {k: v for k, v in record.items() if k not in ("privacy_unit", "digest")}
    diffs = verify_record(sealed(body), WL).differences
    assert any(".sensitivity" in d for d in diffs), diffs
    # a record claiming K = 2 for steps calibrated to K = 3 fails the same way
    body = {k: v for k, v in record.items() if k != "digest"}
    body["privacy_unit"] = dict(body["privacy_unit"], max_rows=2)
    assert any(".sensitivity" in d for d in verify_record(sealed(body), WL).differences)


def test_a_person_ledger_is_charged_what_a_person_pays(tmp_path) -> None:
    book = Ledger.init(tmp_path / "l.sqlite", total=1.0, definition="pure",
                       neighbours=Neighbours.ADD_REMOVE, domain=DOMAIN, dataset="t",
                       unit=PERSON)
    with pytest.raises(TesseraError, match="the ledger protects one person"):
        fit(None, Budget.of(epsilon=0.5), ledger=book)
    assert book.summary().releases == ()
    run = fit(PERSON, Budget.of(epsilon=1.0), ledger=book)
    spent = float(run.result.record.spent.epsilon)
    assert spent <= book.spent() <= 1.0 and book.spent() == pytest.approx(1.0, rel=1e-12)


@pytest.mark.parametrize("method, neighbours, words", [
    ("ipmwu", "add-remove", "calibrated to one row"),
    ("mwem", "add-remove", "calibrated to one row"),
    ("lp", "substitute", "takes n as public"),
])
def test_methods_for_a_row_are_refused(method: str, neighbours: str, words: str) -> None:
    with pytest.raises(TesseraError, match=words):
        Synthesizer(method).fit(people(), WL, Budget.of(epsilon=1.0), neighbours=neighbours,
                                unit=PERSON, answer=answer)


def test_rows_of_codes_have_no_id() -> None:
    codes = np.zeros((10, 3), dtype=np.int64)
    with pytest.raises(DataError, match="no privacy id"):
        Synthesizer("adaptive", rounds=9).fit(codes, WL, Budget.of(epsilon=1.0), unit=PERSON)


def test_lp_at_the_person_level_embeds_a_person_certificate() -> None:
    wl = Workload.from_sql(["a < 2", "b = 'x'", "c = 2"], DOMAIN)
    run = Synthesizer("lp").fit(people(), wl, Budget.of(epsilon=1.0), unit=PERSON, seed=2,
                                answer=answer)
    record = run.run_record()
    cert = record["release_certificate"]
    assert cert["privacy_unit"]["max_rows"] == 3 and record["privacy_unit"]["max_rows"] == 3
    assert verify_record(record, wl, verify_certificate=verify_certificate).differences
    # (seeded: NOT PRIVATE is the only objection, on the certificate)
    assert all("NOT PRIVATE" in d for d in
               verify_record(record, wl, verify_certificate=verify_certificate).differences)
