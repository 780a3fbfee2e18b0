"""What the budget ledger says to people: figures rounded the safe way (spent up, remaining
down, to the 6th significant digit of the total) in every message, exact values in JSON and on
the exception; whether the spent budget is exact said once and the same whatever path recorded
it; counts in the number they take, and a synthesis run named as one."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tessera.release import Budget, BudgetExceeded, Ledger
from tessera.release.ledger_records import Charge, charge_text
from tessera.schema.domain import Domain
from tessera.synth.charge import synthesis_mechanism
from tessera.synth.synthesizer import Synthesizer
from tessera.workload.families import k_way_marginals
from tessera.workload.sizes import counted, workload_size
from tessera.workload.workload import Workload

DOMAIN = Domain.from_dict({"attributes": {
    "a": {"type": "integer", "min": 0, "max": 9},
    "b": {"type": "categorical", "values": ["x", "y"]}}})
#: Costs computed in floating point (1/3, 1/7, …): the ledger rounds them up to a multiple of
#: 2^-k, so spent figures land a hair above the decimals a person expects.
W = Workload.from_sql(["a < 3", "a >= 3", "b = 'x'", "a < 5 AND b = 'y'"], DOMAIN)
COSTS = np.array([1 / 3, 2 / 3 * 0.99999999999, 1 / 3, 1 / 7])
TRUE = Workload.from_sql(["TRUE"], DOMAIN)
#: A long float in a message: seven or more decimals (the rounded figures have at most five).
RAW_FLOAT = re.compile(r"\d\.\d{7,}")


def _book(tmp_path: Path, name: str = "l.db") -> Ledger:
    return Ledger.init(tmp_path / name, total=3.0, definition="pure",
                       neighbours="add-remove", domain=DOMAIN, dataset="t")


def test_refusal_figures_are_rounded_spent_up_remaining_down(tmp_path: Path) -> None:
    """Releases calibrated in floating point spend a hair below 1 each (1 − 8e-13 relative, as
    a calibrated release does); a third is refused. The refusal reads "≤ 4", "spent so far
    ≤ 2", "remaining 1" — not the raw 3.9999999999984 that printed before (a float that close
    to a short decimal was printed in full) — while the exception keeps the exact values."""
    book = _book(tmp_path)
    hair = 0.9999999999992
    book.charge(TRUE, [hair], label="first", mechanism="discrete_laplace")
    book.charge(TRUE, [hair], label="second", mechanism="discrete_laplace")
    spent = book.spent()
    assert 1.99999 < spent < 2.0 and RAW_FLOAT.search(repr(spent))
    with pytest.raises(BudgetExceeded) as refused:
        book.charge(TRUE, [2 * hair], label="over", mechanism="discrete_laplace")
    text = str(refused.value)
    assert not RAW_FLOAT.search(text), text
    for part in ("would bring the spent budget to ≤ 4 ε", "spent so far ≤ 2,",
                 "this release alone costs ≤ 2,", "remaining 1 ", "ask for at most 1 ε"):
        assert part in text, text
    assert refused.value.spent == spent and refused.value.would_spend > 3.99999  # exact
    # and so does a bound a rounding error above a short decimal, computed in floating point
    with pytest.raises(BudgetExceeded) as again:
        book.charge(W, COSTS * 3, label="more", mechanism="discrete_laplace")
    assert not RAW_FLOAT.search(str(again.value)), str(again.value)


def test_refusal_overshooting_by_a_rounding_error_still_reads_above_the_total(
        tmp_path: Path) -> None:
    """Rounded up, a bound above the total still prints above it (3.00001, not 3)."""
    book = _book(tmp_path)
    book.charge(TRUE, [2.0], label="t", mechanism="discrete_laplace")
    with pytest.raises(BudgetExceeded) as refused:
        book.charge(TRUE, [1.0000000001], label="over", mechanism="discrete_laplace")
    text = str(refused.value)
    assert "≤ 3.00001 ε, above the total 3.0" in text and "overshoots by" in text, text


def test_report_ledger_row_is_rounded_up(tmp_path: Path) -> None:
    """The HTML report's ledger row prints the charge's figures rounded up, not 16 digits."""
    from tessera.release import answer

    book = _book(tmp_path)
    book.charge(W, COSTS, label="w", mechanism="discrete_laplace")
    frame = pd.DataFrame({"a": np.arange(200) % 10, "b": np.where(np.arange(200) % 3, "x", "y")})
    release = answer(frame, W, Budget.of(epsilon=1 / 3), ledger=book, seed=1)
    assert RAW_FLOAT.search(repr(release.charge.spent_after))
    page = release.report(tmp_path / "r.html").read_text()
    row = page[page.index("spent before"):][:200]
    assert not RAW_FLOAT.search(row), row
    assert "spent before 1, after 1.33334" in row, row


def test_exact_or_bound_is_said_once_and_the_same_whatever_the_path(tmp_path: Path) -> None:
    """The same releases, recorded by the sequential bound (a rounding error above the witness,
    so not flagged exact) and by the exact union solve: ``ledger show`` prints the same line,
    "spent 2 (exact)", instead of "(upper bound; at least 1.99999)" on one path only."""
    book = _book(tmp_path)
    book.charge(W, COSTS, label="w", mechanism="discrete_laplace")
    book.charge(TRUE, [1.0], label="t", mechanism="discrete_laplace")
    summary = book.summary()
    assert not summary.exact and summary.spent_lower < summary.spent  # the sequential path
    flagged = dataclasses.replace(summary, exact=True, spent_lower=summary.spent)
    line = summary.describe().splitlines()[1]
    assert line == flagged.describe().splitlines()[1]
    assert line == ("total ε = 3.0, spent 2 (exact), remaining 1; 2 releases (spent rounded up, "
                    "remaining down)"), line


def test_a_loose_bound_is_said_to_be_one(tmp_path: Path) -> None:
    """Two disjoint releases charged by the fast path: spent ≤ 2 is an upper bound and a row
    attains 1; once tightened, spent 1 (exact)."""
    book = _book(tmp_path)
    book.charge(Workload.from_sql(["a < 3"], DOMAIN), [1.0], label="x",
                mechanism="discrete_laplace", fast_path=True)
    book.charge(Workload.from_sql(["a >= 3"], DOMAIN), [1.0], label="y",
                mechanism="discrete_laplace", fast_path=True)
    assert ("spent ≤ 2 (an upper bound; at least 1 attained), remaining 1;"
            in book.summary().describe())
    book.tighten()
    assert "spent 1 (exact), remaining 2;" in book.summary().describe()


@pytest.mark.parametrize(("n", "noun", "text"), [
    (1, "query", "1 query"), (33, "query", "33 queries"), (0, "release", "0 releases"),
    (1, "release", "1 release"), (2, "hierarchy", "2 hierarchies"), (1234, "key", "1,234 keys"),
])
def test_counted(n: int, noun: str, text: str) -> None:
    assert counted(n, noun) == text


def test_workload_size_names_queries_and_families() -> None:
    domain = Domain.from_dict({"attributes": {f"x{i}": {"type": "boolean"} for i in range(12)}})
    two_way = k_way_marginals(domain, 2)
    assert workload_size(Workload.of_families(domain, two_way)) == "66 marginals"
    assert workload_size(W) == "4 queries"
    both = dataclasses.replace(Workload.from_sql(["x0 = true"], domain),
                               partitions=two_way[:1])
    assert workload_size(both) == "1 query and 1 marginal"


def test_a_synthesis_run_is_listed_as_one(tmp_path: Path) -> None:
    """A synthesis run is charged as the tautology (one query every row pays in full): the
    ledger lists it as "synthesis (ipmwu) of 4 queries", not "1 queries"; a release of one
    query as "1 query"."""
    book = _book(tmp_path)
    book.charge(Workload.from_sql(["a < 3"], DOMAIN), [0.5], label="one",
                mechanism="discrete_laplace")
    frame = pd.DataFrame({"a": np.arange(100) % 10, "b": np.where(np.arange(100) % 2, "x", "y")})
    Synthesizer("ipmwu", rounds=3, rows=20).fit(frame, W, Budget.of(epsilon=1.0), ledger=book,
                                                neighbours="add-remove", label="synth", seed=1)
    lines = book.summary().describe().splitlines()
    assert "; 2 releases (" in lines[1]
    assert lines[2].endswith("'one': 1 query (discrete_laplace), charged; alone 0.5, "
                             "spent after 0.5"), lines[2]
    assert lines[3].endswith("'synth': synthesis (ipmwu) of 4 queries, released; alone 1, "
                             "spent after 1.5"), lines[3]
    assert book.releases()[1].mechanism == synthesis_mechanism("ipmwu", W)


def test_charge_text_of_an_older_synthesis_charge() -> None:
    """Charges recorded before the mechanism named the workload still read as a synthesis."""
    old = Charge("id", 1, "now", "s", "synthesis:adaptive", 1, 1.0, 0.0, 1.0, 1.0, True,
                 "first", "released")
    assert charge_text(old) == "synthesis (adaptive)"
