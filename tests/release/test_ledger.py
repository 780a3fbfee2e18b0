"""The budget ledger (tessera.release.ledger): overlap-aware accounting across releases,
refusals, durability under kill -9, and processes racing for the last budget."""

from __future__ import annotations

import itertools
import json
import math
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tessera.release.exact_costs as exact_costs_module
import tessera.release.ledger as ledger_module
from tessera.errors import TesseraError
from tessera.privacy import Definition, Neighbours
from tessera.release.ledger import (
    BudgetExceeded,
    Ledger,
    LedgerBusy,
    LedgerError,
    combined_cost,
    decimal_value,
)
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"

DOMAIN = Domain.from_dict({"attributes": {
    "age": {"type": "integer", "min": 0, "max": 99},
    "hours": {"type": "integer", "min": 0, "max": 99},
    "sex": {"type": "categorical", "values": ["F", "M"]},
}})


def wl(*clauses: str, domain: Domain = DOMAIN) -> Workload:
    return Workload.from_sql(clauses=list(clauses), domain=domain)


def make(tmp_path: Path, total: float = 1.0, definition: str = "pure",
         neighbours: str = "add-remove", name: str = "data.ledger",
         domain: Domain = DOMAIN) -> Ledger:
    return Ledger.init(tmp_path / name, total=total, definition=definition,
                       neighbours=neighbours, domain=domain, dataset="test")


def n_charges(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("SELECT COUNT(*) FROM charges").fetchone()[0])
    finally:
        con.close()


# -- hand-computed costs ----------------------------------------------------------------------


def test_disjoint_releases_cost_the_maximum_not_the_sum(tmp_path: Path) -> None:
    led = make(tmp_path, total=1.0)
    a = led.charge(wl("age < 30"), [1.0], label="young", mechanism="laplace")
    b = led.charge(wl("age >= 30"), [1.0], label="old", mechanism="laplace")
    assert (a.spent_after, b.spent_before, b.spent_after) == (1.0, 1.0, 1.0)
    assert b.exact and b.method == "union"
    s = led.summary()
    assert s.spent == 1.0 and s.exact and s.remaining == 0.0 and len(s.releases) == 2
    # any third release touches some row that already lost 1
    with pytest.raises(BudgetExceeded):
        led.charge(wl("age BETWEEN 90 AND 99"), [1e-6], label="more", mechanism="laplace")


def test_disjoint_releases_under_substitution_cost_two(tmp_path: Path) -> None:
    # moving a row from age 20 to age 40 changes both answers: 1 + 1
    led = make(tmp_path, total=3.0, neighbours="substitute")
    led.charge(wl("age < 30"), [1.0], label="young", mechanism="laplace")
    led.charge(wl("age >= 30"), [1.0], label="old", mechanism="laplace")
    assert led.spent() == 2.0 and led.summary().exact


def test_overlapping_releases_cost_the_sum_at_the_overlap(tmp_path: Path) -> None:
    led = make(tmp_path, total=1.0)
    led.charge(wl("age < 50"), [0.25], label="a", mechanism="laplace")
    led.charge(wl("age >= 20"), [0.5], label="b", mechanism="laplace")
    assert led.spent() == pytest.approx(0.75, rel=1e-9) and led.spent() >= 0.75
    # ages ≥ 90 have lost 0.5 only: 0.5 + 0.25 = 0.75 does not raise the maximum
    c = led.charge(wl("age >= 90"), [0.25], label="c", mechanism="laplace")
    assert c.spent_after == pytest.approx(0.75, rel=1e-9)
    # but 0.25 more on ages 20..49 reaches 1.0 exactly: admitted, with nothing left
    d = led.charge(wl("age BETWEEN 20 AND 49"), [0.25], label="d", mechanism="laplace")
    assert d.spent_after == 1.0 and led.remaining() == 0.0


def test_two_attribute_releases_meet_at_one_row(tmp_path: Path) -> None:
    led = make(tmp_path, total=10.0)
    led.charge(wl("age < 30", "age >= 30"), [1.0, 2.0], label="age", mechanism="laplace")
    led.charge(wl("sex = 'F'", "hours >= 40 AND sex = 'M'"), [3.0, 0.5],
               label="sex", mechanism="laplace")
    # the worst row: age ≥ 30 and female, 2 + 3
    assert led.spent() == 5.0 and led.summary().exact


@pytest.mark.parametrize(("neighbours", "expected"), [("add-remove", 1.0), ("substitute", 2.0)])
def test_a_partition_costs_one_or_two(tmp_path: Path, neighbours: str, expected: float) -> None:
    bands = ["age < 25", "age BETWEEN 25 AND 49", "age BETWEEN 50 AND 74", "age >= 75"]
    one = make(tmp_path, total=4.0, neighbours=neighbours, name="one.ledger")
    one.charge(wl(*bands), [1.0] * 4, label="partition", mechanism="laplace")
    assert one.spent() == expected
    # the same partition as four releases: overlap-aware across releases gives the same
    four = make(tmp_path, total=4.0, neighbours=neighbours, name="four.ledger")
    for band in bands:
        four.charge(wl(band), [1.0], label=band, mechanism="laplace")
    assert four.spent() == expected and four.summary().exact


def test_zcdp_costs_add_up(tmp_path: Path) -> None:
    led = make(tmp_path, total=0.5, definition="zcdp")
    led.charge(wl("age < 60"), [0.25], label="a", mechanism="gaussian")
    led.charge(wl("age >= 40"), [0.25], label="b", mechanism="gaussian")
    assert led.spent() == 0.5
    assert led.summary().definition is Definition.ZCDP
    with pytest.raises(BudgetExceeded, match="ρ"):
        led.charge(wl("age = 50"), [0.01], label="c", mechanism="gaussian")
    led.charge(wl("age = 10"), [0.25], label="d", mechanism="gaussian")  # ages < 40: 0.25 + 0.25
    assert led.spent() == 0.5


def test_refusal_names_spent_cost_total_and_remaining(tmp_path: Path) -> None:
    led = make(tmp_path, total=2.0)
    led.charge(wl("age < 30"), [1.0], label="young", mechanism="laplace")
    led.charge(wl("age >= 30"), [1.0], label="old", mechanism="laplace")
    with pytest.raises(BudgetExceeded) as info:
        led.charge(wl("sex = 'F'"), [1.5], label="by sex", mechanism="laplace")
    e = info.value
    text = str(e)
    assert "remaining 1" in text and "total 2" in text and "spent so far ≤ 1" in text
    assert "alone costs ≤ 1.5" in text and "≤ 2.5" in text and "'by sex'" in text
    assert e.hint and "at most 1" in e.hint
    assert (e.total, e.spent, e.cost, e.would_spend, e.remaining) == (2.0, 1.0, 1.5, 2.5, 1.0)
    assert isinstance(e, TesseraError)
    assert len(led.releases()) == 2 and led.spent() == 1.0  # nothing recorded
    # what remains can still be charged, on any rows
    led.charge(wl("sex = 'F'"), [1.0], label="by sex", mechanism="laplace")
    assert led.spent() == 2.0


def test_no_tolerance_at_the_total(tmp_path: Path) -> None:
    led = make(tmp_path, total=1.0)
    led.charge(wl("age < 50"), [0.5], label="a", mechanism="laplace")
    with pytest.raises(BudgetExceeded) as info:
        led.charge(wl("age < 50"), [math.nextafter(0.5, math.inf)], label="b",
                   mechanism="laplace")
    # (0.5000000000000001 has too many digits for exact integers: rounded up by a few 1e-16)
    assert info.value.hint and "overshoots by" in info.value.hint and "only" in info.value.hint
    # printed rounded up to the total's 6th digit: still above the total, as the hint explains
    assert "≤ 1.00001 ε, above the total 1.0" in str(info.value)
    led.charge(wl("age < 50"), [0.5], label="c", mechanism="laplace")  # exactly the total
    assert led.spent() == 1.0


def test_decimal_costs_add_up_exactly(tmp_path: Path) -> None:
    # in binary floating point 0.1 * 10 > 1 and 0.3 + 0.7 ≠ 1; the ledger reads every number as
    # the decimal it prints as (and stores), so these use the total exactly
    tenths = make(tmp_path, total=1.0, name="tenths.ledger")
    for i in range(10):
        tenths.charge(wl("age < 50"), [0.1], label=f"tenth {i}", mechanism="laplace")
    assert tenths.spent() == 1.0 and tenths.summary().exact and tenths.remaining() == 0.0
    with pytest.raises(BudgetExceeded):
        tenths.charge(wl("age < 50"), [1e-12], label="more", mechanism="laplace")
    split = make(tmp_path, total=1.0, name="split.ledger", definition="zcdp")
    split.charge(wl("age < 50", "hours < 10"), [0.3, 0.7], label="a", mechanism="gaussian")
    assert split.spent() == 1.0 and split.summary().exact
    # many digits (a computed cost): rounded up to a fine binary grid, never down; the third
    # release (6/3 = 1.9999999999999998 in decimals, ≤ 2) is then above the total by rounding
    # only, and the enumeration of maximal overlapping sets settles it exactly
    thirds = make(tmp_path, total=2.0, name="thirds.ledger")
    third = 1 / 3
    for i in range(3):
        ch = thirds.charge(wl("age < 50", "sex = 'F'"), [third, third], label=f"{i}",
                           mechanism="laplace")
    exact = 6 * decimal_value(third)
    assert decimal_value(ch.spent_after) >= exact and ch.spent_after == pytest.approx(2.0)
    assert ch.exact and ch.spent_after - float(exact) < 1e-13


def test_what_remains_can_be_charged(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    for trial in range(5):
        led = make(tmp_path, total=float(rng.choice([1.0, 0.7, 2.3])), name=f"{trial}.ledger")
        for k in range(3):
            led.charge(wl(f"age >= {int(rng.integers(0, 60))}", "sex = 'M'"),
                       [float(rng.uniform(0.01, 0.2)), 0.05], label=f"{k}", mechanism="laplace")
        left = led.remaining()
        assert left > 0 and decimal_value(led.spent()) + decimal_value(left) <= decimal_value(
            led.total)
        # the whole remainder, on the rows that spent the most
        led.charge(wl("TRUE"), [left], label="the rest", mechanism="laplace")
        assert led.spent() <= led.total and led.remaining() < 1e-9


def test_fast_path_is_valid_and_tighten_recovers_the_union(tmp_path: Path) -> None:
    led = make(tmp_path, total=5.0)
    led.charge(wl("age < 30"), [1.0], label="young", mechanism="laplace", fast_path=True)
    b = led.charge(wl("age >= 30"), [1.0], label="old", mechanism="laplace", fast_path=True)
    assert (b.method, b.spent_after, b.exact, b.spent_lower) == ("sequential", 2.0, False, 1.0)
    assert led.spent() == 2.0 and not led.summary().exact
    assert led.tighten() == 1.0 and led.summary().exact
    # the charges themselves are history: they keep what was decided
    assert [c.spent_after for c in led.releases()] == [1.0, 2.0]
    # when the sequential bound does not fit, the union decides
    tight = make(tmp_path, total=1.5, name="tight.ledger")
    tight.charge(wl("age < 30"), [1.0], label="young", mechanism="laplace", fast_path=True)
    c = tight.charge(wl("age >= 30"), [1.0], label="old", mechanism="laplace", fast_path=True)
    assert (c.method, c.spent_after) == ("union", 1.0)


# -- the ledger against a brute-force oracle --------------------------------------------------

SMALL = Domain.from_dict({"attributes": {
    "a": {"type": "integer", "min": 0, "max": 5},
    "b": {"type": "integer", "min": 0, "max": 3},
    "c": {"type": "categorical", "values": ["x", "y", "z"]},
}})


def random_clause(rng: np.random.Generator) -> str:
    parts = []
    if rng.random() < 0.6:
        lo = int(rng.integers(0, 6))
        parts.append(f"a BETWEEN {lo} AND {int(rng.integers(lo, 6))}")
    if rng.random() < 0.5:
        parts.append("b IN (" + ", ".join(str(v) for v in rng.choice(4, int(rng.integers(1, 4)),
                                                                     replace=False)) + ")")
    if rng.random() < 0.5:
        parts.append("c IN (" + ", ".join(f"'{v}'" for v in rng.choice(
            ["x", "y", "z"], int(rng.integers(1, 3)), replace=False)) + ")")
    return " AND ".join(parts) or "TRUE"


def brute_spent(releases: list[tuple[Workload, list[float]]], neighbours: str) -> float:
    """max over rows (pairs) of Σ costs of the touched (separating) queries, by enumeration
    (the costs here are multiples of 1/4: every float sum below is exact)."""
    queries = [q for w, _ in releases for q in w.queries]
    costs = np.array([c for _, cs in releases for c in cs])
    points = np.array(list(itertools.product(*(range(s) for s in SMALL.sizes))))
    touch = np.stack([q.evaluate(SMALL, points) for q in queries], axis=1).astype(np.float64)
    own = touch @ costs
    if neighbours == "add-remove":
        return float(own.max())
    common = (touch * costs) @ touch.T  # Σ over I(x) ∩ I(y); |I(x) Δ I(y)| = own + own − 2 common
    return float((own[:, None] + own[None, :] - 2 * common).max())


@pytest.mark.parametrize("neighbours", ["add-remove", "substitute"])
@pytest.mark.parametrize("fast_path", [False, True])
def test_random_releases_against_brute_force(tmp_path: Path, neighbours: str,
                                             fast_path: bool) -> None:
    rng = np.random.default_rng(20240611 + 7 * fast_path + (neighbours == "substitute"))
    refused = admitted = 0
    for trial in range(4):
        total = float(rng.choice([1.0, 2.0, 3.5]))
        led = make(tmp_path, total=total, neighbours=neighbours, name=f"r{trial}.ledger",
                   domain=SMALL)
        done: list[tuple[Workload, list[float]]] = []
        for k in range(8):
            clauses = [random_clause(rng) for _ in range(int(rng.integers(1, 5)))]
            # numbered: a clause may repeat (TRUE often), and named by its SQL two would
            # share a name
            w = Workload.from_sql(clauses, SMALL, names=[f"q{i}" for i in range(len(clauses))])
            costs = [float(rng.choice([0.25, 0.5, 1.0])) for _ in range(len(w))]
            truth = brute_spent(done + [(w, costs)], neighbours)
            try:
                ch = led.charge(w, costs, label=f"{trial}.{k}", mechanism="laplace",
                                fast_path=fast_path)
            except BudgetExceeded as e:
                refused += 1
                # refused: the bound exceeds the total and is an upper bound on the truth;
                # these tiny unions are solved exactly, so the truth exceeds it too
                assert e.would_spend > total and e.would_spend >= truth
                assert truth > total
                continue
            admitted += 1
            done.append((w, costs))
            assert truth <= ch.spent_after <= total  # never undercounts, never overspends
            assert ch.spent_lower <= truth + 1e-12
            if ch.exact:
                assert ch.spent_after == pytest.approx(truth, rel=1e-9)
            if not fast_path:
                assert ch.exact and ch.spent_after == truth
        if done:
            assert led.tighten() == brute_spent(done, neighbours)
            in_memory = combined_cost(done, neighbours=neighbours)
            assert in_memory.exact and in_memory.bound == brute_spent(done, neighbours)
    assert refused >= 3 and admitted >= 10


# -- the file: creation, settings, history --------------------------------------------------


def test_init_open_and_settings(tmp_path: Path) -> None:
    path = tmp_path / "d.ledger"
    led = Ledger.init(path, total=3.0, definition=Definition.PURE,
                      neighbours=Neighbours.SUBSTITUTE, domain=DOMAIN, dataset="adult")
    again = Ledger.open(path)
    assert (again.total, again.definition, again.neighbours, again.dataset) == (
        3.0, Definition.PURE, Neighbours.SUBSTITUTE, "adult")
    assert again.domain == DOMAIN and again.created == led.created
    assert sorted(os.listdir(tmp_path)) == ["d.ledger"]  # one file, no temporary left over
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert con.execute("PRAGMA application_id").fetchone()[0] == ledger_module.APPLICATION_ID
    con.close()
    with pytest.raises(LedgerError, match="already exists"):
        Ledger.init(path, total=1.0, definition="pure", neighbours="add-remove",
                    domain=DOMAIN, dataset="adult")
    led.charge(wl("age < 30"), [1.0], label="a", mechanism="laplace")
    fresh = Ledger.init(path, total=1.0, definition="zcdp", neighbours="add-remove",
                        domain=DOMAIN, dataset="adult", overwrite=True)
    assert fresh.releases() == () and fresh.spent() == 0.0 and fresh.summary().exact
    assert fresh.definition is Definition.ZCDP


def test_bad_settings_and_files_are_refused(tmp_path: Path) -> None:
    for bad in ({"total": 0.0}, {"total": math.inf}, {"definition": "approx"},
                {"definition": "gdp"}, {"neighbours": "sideways"}):
        args: dict[str, Any] = {"total": 1.0, "definition": "pure", "neighbours": "add-remove"}
        args.update(bad)
        with pytest.raises(TesseraError):
            Ledger.init(tmp_path / "x.ledger", domain=DOMAIN, dataset="x", **args)
        assert not (tmp_path / "x.ledger").exists()
    missing = tmp_path / "missing.ledger"
    with pytest.raises(LedgerError, match="no ledger"):
        Ledger.open(missing)
    assert not missing.exists()  # opening never creates a file
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n" * 100)
    with pytest.raises(LedgerError):
        Ledger.open(text)
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(LedgerError, match="not a Tessera budget ledger"):
        Ledger.open(other)


def test_bad_charges_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    led = make(tmp_path, total=1.0)
    other = Domain.from_dict({"attributes": {"age": {"type": "integer", "min": 0, "max": 120}}})
    with pytest.raises(LedgerError, match="another schema"):
        led.charge(wl("age < 30", domain=other), [0.1], label="x", mechanism="laplace")
    with pytest.raises(TesseraError, match="2 costs for 1 queries"):
        led.charge(wl("age < 30"), [0.1, 0.1], label="x", mechanism="laplace")
    for cost in (-0.1, math.nan, math.inf):
        with pytest.raises(TesseraError, match="finite and ≥ 0"):
            led.charge(wl("age < 30"), [cost], label="x", mechanism="laplace")
    with pytest.raises(LedgerError, match="no queries"):
        led.charge(Workload.of(DOMAIN, []), [], label="x", mechanism="laplace")
    with pytest.raises(LedgerError, match="time_limit"):
        led.charge(wl("age < 30"), [0.1], label="x", mechanism="laplace", time_limit=0)
    assert led.releases() == ()


def test_history_round_trips(tmp_path: Path) -> None:
    led = make(tmp_path, total=10.0)
    w = Workload.from_sql(clauses=["age BETWEEN 18 AND 64 AND sex = 'F'", "hours > 40", "TRUE",
                                   "age < 0"], domain=DOMAIN, names=["working women", "long",
                                                                     "all", "nobody"])
    ch = led.charge(w, [0.5, 0.25, 0.125, 3.0], label="mixed", mechanism="laplace")
    entry = Ledger.open(led.path).entry(ch.release_id)
    assert entry.workload.queries == w.queries and entry.workload.names == w.names
    assert entry.costs == (0.5, 0.25, 0.125, 3.0) and entry.charge == ch
    assert ch.spent_after == 0.875  # the contradiction touches no row
    assert Ledger.open(led.path).summary() == led.summary()
    with pytest.raises(LedgerError, match="no release"):
        led.entry("no-such-id")


def test_status_changes_never_refund(tmp_path: Path) -> None:
    led = make(tmp_path, total=1.0)
    a = led.charge(wl("age < 50"), [0.5], label="a", mechanism="laplace")
    led.mark_aborted(a.release_id)
    led.mark_aborted(a.release_id)  # idempotent
    with pytest.raises(LedgerError, match="already aborted"):
        led.mark_released(a.release_id)
    assert led.spent() == 0.5  # an aborted release stays charged
    with led.releasing(wl("age < 50"), [0.25], label="b", mechanism="laplace") as b:
        assert b.status == "charged"
    with pytest.raises(RuntimeError, match="boom"), \
            led.releasing(wl("age < 50"), [0.25], label="c", mechanism="laplace"):
        raise RuntimeError("boom")
    assert [c.status for c in led.releases()] == ["aborted", "released", "aborted"]
    assert led.spent() == 1.0
    with pytest.raises(LedgerError, match="no release"):
        led.mark_released("no-such-id")


def test_the_file_is_append_only(tmp_path: Path) -> None:
    led = make(tmp_path, total=1.0)
    a = led.charge(wl("age < 50"), [0.5], label="a", mechanism="laplace")
    led.mark_released(a.release_id)
    con = sqlite3.connect(led.path)
    for statement in ("DELETE FROM charges", "UPDATE charges SET costs = '[0.0]'",
                      "UPDATE charges SET spent_after = 0", "UPDATE charges SET status = 'charged'",
                      "DELETE FROM bounds", "UPDATE bounds SET upper = 0",
                      "UPDATE meta SET value = 100 WHERE key = 'total'",
                      "INSERT INTO charges (release_id, created, label, mechanism, queries, names,"
                      " costs, n_queries, cost, spent_before, spent_after, spent_lower, exact,"
                      " method) VALUES ('x', '', '', '', '[]', '[]', '[]', 1, 0, 0, 1.5, 0, 0,"
                      " 'first')"):
        with pytest.raises(sqlite3.IntegrityError):
            con.execute(statement)
        con.rollback()
    con.close()
    assert led.check() is not None and led.spent() == 0.5


# -- failures in the middle of a charge -------------------------------------------------------


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_charge_that_raises_in_the_union_solve_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: type[BaseException]) -> None:
    led = make(tmp_path, total=1.0)
    led.charge(wl("age < 50"), [0.25], label="a", mechanism="laplace")
    real = exact_costs_module.max_overlap
    calls = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(len(args[0]))
        if len(calls) == 2:  # the union, inside the write transaction
            raise error("solver died")
        return real(*args, **kwargs)

    monkeypatch.setattr(exact_costs_module, "max_overlap", failing)
    with pytest.raises(error, match="solver died"):
        led.charge(wl("age >= 20"), [0.25], label="b", mechanism="laplace")
    assert calls == [1, 2]
    monkeypatch.setattr(exact_costs_module, "max_overlap", real)
    assert n_charges(led.path) == 1 and led.spent() == 0.25
    assert not Path(str(led.path) + "-journal").exists()
    # the lock was released: another process (short timeout) charges at once
    Ledger.open(led.path, timeout=0.5).charge(wl("age >= 20"), [0.25], label="b",
                                              mechanism="laplace")
    assert led.spent() == 0.5


def test_a_write_failing_mid_transaction_leaves_no_partial_row(tmp_path: Path) -> None:
    led = make(tmp_path, total=1.0)
    led.charge(wl("age < 50"), [0.25], label="a", mechanism="laplace")
    con = sqlite3.connect(led.path)
    # the charge row goes in first; then recording its bound fails
    con.execute("CREATE TRIGGER inject BEFORE INSERT ON bounds "
                "BEGIN SELECT RAISE(ABORT, 'injected failure'); END")
    con.commit()
    with pytest.raises(LedgerError, match="injected failure"):
        led.charge(wl("age >= 20"), [0.25], label="b", mechanism="laplace")
    assert n_charges(led.path) == 1 and [c.label for c in led.releases()] == ["a"]
    con.execute("DROP TRIGGER inject")
    con.commit()
    con.close()
    led.charge(wl("age >= 20"), [0.25], label="b", mechanism="laplace")
    assert led.spent() == 0.5 and [c.seq for c in led.releases()] == [1, 2]


def test_a_held_lock_times_out_with_a_clear_error(tmp_path: Path) -> None:
    make(tmp_path, total=1.0)
    holder = sqlite3.connect(tmp_path / "data.ledger", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        led = Ledger.open(tmp_path / "data.ledger", timeout=0.2)
        with pytest.raises(LedgerBusy, match="locked by another process") as info:
            led.charge(wl("age < 50"), [0.25], label="a", mechanism="laplace")
        assert info.value.hint and "timeout" in info.value.hint
        assert led.summary().releases == ()  # readers are not blocked by a writer
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    led.charge(wl("age < 50"), [0.25], label="a", mechanism="laplace")


# -- other processes: kill -9 and races -------------------------------------------------------


class Zygote:
    """``ledger_child.py`` in a subprocess: forks the workers that get killed or race."""

    def __init__(self, log: Path) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(SRC)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])),
                   OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.log = log
        self._err = open(log, "w")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen([sys.executable, str(HERE / "ledger_child.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True, env=env)
        assert self.ask(None) == {"ready": True}, self.log.read_text()

    def ask(self, cmd: dict[str, Any] | None) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if cmd is not None:
            self.proc.stdin.write(json.dumps(cmd) + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the helper process died:\n{self.log.read_text()}"
        return dict(json.loads(line))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


@pytest.fixture(scope="module")
def zygote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    z = Zygote(tmp_path_factory.mktemp("zygote") / "stderr.log")
    yield z
    z.close()


def committed(path: Path) -> dict[str, str]:
    """release id -> status of every committed charge (read by a fresh process-level open)."""
    return {c.release_id: c.status for c in Ledger.open(path).releases()}


def test_kill_minus_nine_at_any_point_never_undercounts(tmp_path: Path, zygote: Zygote) -> None:
    path = tmp_path / "killed.ledger"
    Ledger.init(path, total=1e6, definition="pure", neighbours="add-remove", domain=DOMAIN,
                dataset="kill")
    answers = tmp_path / "answers"
    answers.mkdir()
    per_trial = 2

    def run(seed: int, delay: float | None) -> dict[str, Any]:
        r = zygote.ask({"cmd": "trial", "ledger": str(path), "answers": str(answers),
                        "n": per_trial, "seed": seed, "delay": delay})
        assert r["killed"] or r["exit"] == 0, zygote.log.read_text()
        return r

    rng = np.random.default_rng(987654321)
    outcomes: dict[str, int] = {}  # answers published by a killed worker: 0, 1, ...
    killed = 0
    window = 0.0
    for trial in range(60):
        if trial % 10 == 0:
            # the kill window: how long an unkilled worker takes (fork to exit); it grows
            # with the history each worker reads, so it is measured again every 10 trials
            window = run(10_000 + trial, None)["elapsed"]
        before = len(os.listdir(answers))
        r = run(trial, float(rng.uniform(0.0, 1.1 * window)))
        if r["killed"]:
            killed += 1
            key = str(len(os.listdir(answers)) - before)
            outcomes[key] = outcomes.get(key, 0) + 1
        if trial % 10 == 9:  # (reading also rolls back a hot journal the kill left)
            assert {f.stem for f in answers.iterdir()} <= set(committed(path)), \
                "answers left without a committed charge"
    status = committed(path)
    published = {f.stem for f in answers.iterdir()}
    # every answer that exists was charged first; some charges never got their answers out
    assert published <= set(status), "answers left without a committed charge"
    for f in answers.iterdir():
        if f.stat().st_size:
            assert json.loads(f.read_text())["release_id"] in status
    assert set(status.values()) <= {"charged", "released"}
    assert 6 * per_trial <= len(status) <= 66 * per_trial
    # the file is intact, and no row attains more than the recorded spent budget
    led = Ledger.open(path)
    recomputed = led.check()
    assert recomputed is not None and recomputed.exact
    assert led.spent() >= recomputed.bound and led.spent() == pytest.approx(recomputed.bound)
    # a stale (never-hot) journal a kill may leave is harmless: the next write goes through
    led.charge(wl("age < 10"), [0.5], label="after the kills", mechanism="laplace")
    assert not Path(str(path) + "-journal").exists() and led.check() is not None
    # the kills landed at different points: before any answer and between two
    assert killed >= 20 and len(outcomes) >= 2, (killed, outcomes, window)
    print(f"kill -9: {killed} killed of 60, answers published by killed workers {outcomes}, "
          f"window {window * 1e3:.0f} ms, {len(status)} charges, {len(published)} answers")


@pytest.mark.parametrize("racers", [4, 6])
def test_racing_processes_never_overspend(tmp_path: Path, zygote: Zygote, racers: int) -> None:
    for round_ in range(3):
        path = tmp_path / f"race{round_}.ledger"
        Ledger.init(path, total=1.0, definition="pure", neighbours="add-remove",
                    domain=DOMAIN, dataset="race")
        # every racer asks for ε = 0.4 on rows they all share (ages 25..60): two fit in 1.0
        clauses = [[f"age BETWEEN {20 + i} AND 60"] for i in range(racers)]
        r = zygote.ask({"cmd": "race", "ledger": str(path), "clauses": clauses, "cost": 0.4})
        assert sorted(r["exits"]) == [0, 0] + [3] * (racers - 2), zygote.log.read_text()
        led = Ledger.open(path)
        assert len(led.releases()) == 2
        assert led.spent() == pytest.approx(0.8, rel=1e-9) and led.spent() <= 1.0
        assert led.check() is not None


def test_racing_processes_on_disjoint_rows_all_fit(tmp_path: Path, zygote: Zygote) -> None:
    path = tmp_path / "parallel.ledger"
    Ledger.init(path, total=1.0, definition="pure", neighbours="add-remove", domain=DOMAIN,
                dataset="race")
    clauses = [[f"age BETWEEN {20 * i} AND {20 * i + 19}"] for i in range(5)]
    r = zygote.ask({"cmd": "race", "ledger": str(path), "clauses": clauses, "cost": 0.4})
    assert r["exits"] == [0] * 5, zygote.log.read_text()
    led = Ledger.open(path)
    assert len(led.releases()) == 5 and led.spent() == 0.4 and led.summary().exact
