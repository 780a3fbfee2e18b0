"""A ledger charged with releases that sum a measure under different clamps: its spent budget
equals brute force over real values (docs/theory.md §3.15, "Measures across releases").

A record is a point x of the small schema domain and a real value r of the measure m. Every
release rounds r to the ledger's one unit of m, u = round(r·10^−e), and the spent budget is
S = max over records (pairs) of Σ over releases Σ_q c_q |Δf_q|^p. The brute force evaluates
every release's linear queries on a dense grid of real values (non-breakpoints, values beyond
every clamp, and every breakpoint) × the schema domain; the ledger, which re-cuts every
release on the union of their breakpoints, must give S exactly (add/remove; substitution in
pure ε; ρ-zCDP substitution when every release is charged as linear queries, by the exact pair
program) or an upper bound labelled as one (ρ-zCDP substitution beside a counting release,
whose count pieces the pair program does not read). A counting release (no measure) is charged
as pieces, as a counting release is charged. The planted bug — solving on one release's grid
instead of the union — is shown to under-price a substitution.
"""

from __future__ import annotations

import re
import sqlite3
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.overlap.linear import pieces
from tessera.privacy import Neighbours, PrivacyUnit
from tessera.release.ledger import Ledger
from tessera.release.ledger_records import LedgerError
from tessera.release.ledger_store import create_file, has_linear
from tessera.release.linear_costs import piece_workload
from tessera.workload import aggregates as aggregate_module
from tessera.workload.aggregates import AggregateWorkload

from .cases import DOMAIN, measure_aggregate, measure_where, record_values, values, workload_of

statement = st.builds(lambda ags, w: f"SELECT {', '.join(ags)} FROM t{w}",
                      st.lists(st.one_of(measure_aggregate, st.just("COUNT(*)")), min_size=1,
                               max_size=2).filter(lambda a: any("(m" in x for x in a)),
                      measure_where)
counting = st.lists(st.sampled_from(["SELECT COUNT(*) FROM t GROUP BY a",
                                     "SELECT SUM(CLAMP(v, 0, 2)) FROM t WHERE b",
                                     "SELECT COUNT(*), SUM(v) FROM t WHERE v >= 0"]),
                    min_size=1, max_size=2)


def brute(releases: list[tuple[AggregateWorkload, np.ndarray]], e: int, p: int,
          neighbours: Neighbours) -> float:
    """max over records (pairs) of Σ over every release's queries of c_q |Δf_q|^p."""
    grid = sorted({b for w, _ in releases for lq in w.linear if lq.is_measure
                   for b in (lq.lo, lq.hi)} | {0})
    lo, hi = min(grid) * 10.0**e, max(grid) * 10.0**e
    # non-breakpoints, values beyond every clamp, and every breakpoint (a real value)
    reals = np.unique(np.concatenate([np.linspace(lo - 1.3, hi + 1.3, 53),
                                      np.array(grid) * 10.0**e, [0.37, -0.61]]))
    v = np.column_stack([record_values(w, e, reals) for w, _ in releases])
    c = np.concatenate([costs for _, costs in releases])
    v = np.unique(v, axis=0)
    if neighbours is Neighbours.ADD_REMOVE:
        return float(np.max(np.abs(v).astype(np.float64) ** p @ c))
    return max(float(np.max(np.abs(v - d).astype(np.float64) ** p @ c)) for d in v)


def per_unit(w: AggregateWorkload, base: np.ndarray, p: int) -> np.ndarray:
    """Costs per unit of the resolution, as a plan's are: c_q·10^(e·p) on a measure's sums."""
    return base * np.array([10.0 ** (lq.exponent * p) if lq.is_measure else 1.0
                            for lq in w.linear])


def charge(book: Ledger, w: AggregateWorkload, costs: np.ndarray, label: str) -> None:
    """A workload with measures as its linear queries (as ``tessera answer`` charges every
    aggregate release); one without as its count pieces (as a counting release is charged)."""
    if w.measures:
        book.charge_linear(w.domain, w.linear, costs, label=label, mechanism="test",
                           time_limit=30.0, unit=book.unit)
        return
    cut = pieces(w.cost_domain, w.linear, book.definition, book.neighbours)
    book.charge(piece_workload(w.cost_domain, cut), cut.costs(costs), label=label,
                mechanism="test", time_limit=30.0, unit=book.unit)


def ledger_and_truth(tmp: Path, texts: list[list[str]], bases: list[np.ndarray],
                     definition: str, neighbours: Neighbours,
                     unit: PrivacyUnit | None = None) -> tuple[Ledger, float, int]:
    """Charge every release (a list of statements each) with its base costs to a new ledger;
    return it, the brute-force row-level S and the common exponent."""
    p = 1 if definition == "pure" else 2
    kwargs = {} if unit is None else {"unit": unit}
    book = Ledger.init(tmp / f"l{len(list(tmp.iterdir()))}.db", total=1e9,
                       definition=definition, neighbours=neighbours, domain=DOMAIN,
                       dataset="t", **kwargs)
    charged = []
    for i, (ts, base) in enumerate(zip(texts, bases)):
        w = book.at_units(workload_of(ts))
        costs = per_unit(w, base[: len(w.linear)], p)
        charge(book, w, costs, f"r{i}")
        charged.append((w, costs))
    es = {e for w, _ in charged for e in w.measures.values()}
    assert len(es) == 1  # one unit of m for every release
    e = es.pop()
    return book, brute(charged, e, p, neighbours), e


def assert_matches(spent: float, truth: float, exact: bool) -> None:
    assert Fraction(spent) >= Fraction(truth) * (1 - Fraction(1, 10**12)), (spent, truth)
    if exact:
        assert Fraction(spent) - Fraction(truth) <= Fraction(1, 10**9) * max(
            Fraction(truth), Fraction(1)), (spent, truth)


@settings(max_examples=8, deadline=None)
@given(st.lists(st.lists(statement, min_size=1, max_size=2), min_size=2, max_size=3),
       counting, st.sampled_from(["pure", "zcdp"]), st.sampled_from(list(Neighbours)),
       st.data())
def test_ledger_spend_equals_brute_force(tmp_path_factory, measured, counts, definition,
                                         neighbours, data):
    # the first release fixes m's unit at 10^-6, which every bound of MEASURE_BOUNDS can take; the
    # counting release comes in between
    texts = [[*measured[0], "SELECT SUM(CLAMP(m, 0, 3)) FROM t WHERE a = 'z'"], counts,
             *measured[1:]]
    bases = [np.array(data.draw(st.lists(st.integers(1, 8), min_size=40, max_size=40))) / 4.0
             for _ in texts]
    book, truth, _ = ledger_and_truth(tmp_path_factory.mktemp("l"), texts, bases, definition,
                                      neighbours)
    summary = book.summary()
    exact = neighbours is Neighbours.ADD_REMOVE or definition == "pure"
    assert_matches(summary.spent, truth, exact)
    if exact:  # a witness attains it
        assert_matches(max(summary.spent_lower, truth), truth, True)
    else:  # the levels' bound: exact only where a witness pair's true cost reaches it
        assert summary.exact == (summary.spent_lower >= summary.spent)
    assert book.check(time_limit=30.0) is not None  # no row above the recorded bound
    assert book.tighten(time_limit=30.0) <= summary.spent


#: Substitution across releases: x in the second release's sum only, y in the third's only,
#: both in the first. The worst pair puts one value at the inner bound 1 and the other at 5
#: (4 + 10 + 10 = 24 per unit of the value); the first release's grid {0, 5} alone gives 20.
INNER = [["SELECT SUM(CLAMP(m, 0, 5)) FROM t"],
         ["SELECT SUM(CLAMP(m, 0, 1)) FROM t WHERE b"],
         ["SELECT SUM(CLAMP(m, 0, 1)) FROM t WHERE NOT b"]]
INNER_COSTS = [np.array([1.0]), np.array([10.0]), np.array([10.0])]


def inner_spent(tmp: Path) -> tuple[float, float]:
    book, truth, _ = ledger_and_truth(tmp, INNER, INNER_COSTS, "pure", Neighbours.SUBSTITUTE)
    return book.spent(), truth


def test_inner_bound_of_a_later_release_is_priced(tmp_path):
    spent, truth = inner_spent(tmp_path)
    assert abs(truth - 24) < 1e-9 and abs(spent - 24) < 1e-9


def test_planted_bug_one_release_grid_is_caught(tmp_path, monkeypatch):
    """Planted: the union solved on the first release's grid instead of the union of every
    release's breakpoints. The releases' inner bound 1 is then missing and the ledger
    under-prices the substitution (20 < 24): the brute-force comparison fails."""
    real = aggregate_module.measure_cost_domain

    def first_release_grid(domain, linear):  # noqa: ANN001, ANN202
        return real(domain, linear[:1])

    monkeypatch.setattr("tessera.release.ledger.measure_cost_domain", first_release_grid)
    spent, truth = inner_spent(tmp_path)
    assert abs(spent - 20) < 1e-9 < truth - spent
    with pytest.raises(AssertionError):
        assert_matches(spent, truth, exact=True)


def test_person_ledger_pays_k_times_the_rows(tmp_path):
    """A person of at most K = 3 rows: K·S (ε) and K²·S (ρ), S the row-level maximum (the
    larger of add/remove and substitution under substitution)."""
    bases = [np.array([1.0, 2.0, 1.0]), np.array([3.0, 1.0, 2.0]), np.array([2.0, 0.5])]
    texts = [["SELECT SUM(CLAMP(m, -1, 1.5)), COUNT(*) FROM t WHERE b"],
             ["SELECT COUNT(*) FROM t GROUP BY a"],
             ["SELECT AVG(CLAMP(m, 0.75, 3)) FROM t WHERE a = 'x'"]]
    person = PrivacyUnit("id", 3)
    for definition, factor in (("pure", 3), ("zcdp", 9)):
        for neighbours in Neighbours:
            book, truth, _ = ledger_and_truth(tmp_path, texts, bases, definition, neighbours,
                                              person)
            if neighbours is Neighbours.SUBSTITUTE:  # the larger of the two row relations
                _, more, _ = ledger_and_truth(tmp_path, texts, bases, definition,
                                              Neighbours.ADD_REMOVE)
                truth = max(truth, more)
            exact = neighbours is Neighbours.ADD_REMOVE or definition == "pure"
            assert_matches(book.spent(), factor * truth, exact)


def test_release_of_zero_sums_costs_nothing(tmp_path):
    """SUM(CLAMP(m, 0, 0)) is 0 on every row: charged at cost 0 (with a counting release)."""
    texts = [["SELECT SUM(CLAMP(m, 0, 0)) FROM t"], ["SELECT COUNT(*) FROM t"],
             ["SELECT SUM(CLAMP(m, 0, 0)) FROM t WHERE b"]]
    book, truth, _ = ledger_and_truth(tmp_path, texts, [np.array([1.0])] * 3, "pure",
                                      Neighbours.SUBSTITUTE)
    assert truth == 0 and book.spent() == 0 and book.releases()[0].cost == 0


def test_units_follow_the_first_charge(tmp_path):
    """The first charge fixes m's unit (10^-5 for bounds up to 12.5); a later release with a
    finer unit of its own is summed in it (brute force still matches); one whose bounds are
    not whole units, or too few of them, is refused before anything is recorded."""
    texts = [["SELECT SUM(CLAMP(m, 0, 12.5)) FROM t"],
             ["SELECT SUM(CLAMP(m, -2.5, 3)) FROM t WHERE b"]]
    bases = [np.array([1.0]), np.array([2.0])]
    assert workload_of(texts[1]).measures == {"m": -6}
    book, truth, e = ledger_and_truth(tmp_path, texts, bases, "pure", Neighbours.SUBSTITUTE)
    assert e == -5 and book.measure_units() == {"m": (-5, 1)}
    assert_matches(book.spent(), truth, exact=True)
    n = len(book.releases())
    for text, words in (("SELECT SUM(CLAMP(m, 0, 0.000015)) FROM t", "not multiples of 10^-5"),
                        ("SELECT SUM(CLAMP(m, 0, 0.005)) FROM t", "fewer than 1,000 units"),
                        ("SELECT SUM(CLAMP(m, 0, 1000)) FROM t", "more than 10,000,000")):
        with pytest.raises(LedgerError, match=re.escape(words)) as err:
            book.at_units(workload_of([text]))
        assert "'m'" in str(err.value) and "10^-5" in str(err.value)
        assert "nothing was charged" in str(err.value) and err.value.hint
        w = workload_of([text])  # charged without adapting: refused under the lock
        with pytest.raises(LedgerError, match="units of"):
            charge(book, w, per_unit(w, np.array([1.0]), 1), "bad")
    assert len(book.releases()) == n


def test_version_1_file_opens_and_upgrades(tmp_path):
    """A file of the first schema version (no linear column) opens, is charged counting
    releases as before, and gains the column in the transaction of its first release with a
    measure; its earlier charges still count."""
    path = tmp_path / "old.db"
    create_file(path, {"dataset": "t", "total": 100.0, "definition": "pure",
                       "neighbours": "add-remove", "domain": _domain_text(),
                       "domain_sha256": "", "created": "then"}, overwrite=False, version=1)
    book = Ledger.open(path)
    with sqlite3.connect(path) as con:
        assert not has_linear(con) and con.execute("PRAGMA user_version").fetchone()[0] == 1
    w = workload_of(["SELECT COUNT(*) FROM t GROUP BY a"])
    charge(book, w, np.array([0.5, 0.5, 0.5]), "counts")
    w = workload_of(["SELECT SUM(CLAMP(m, 0, 1.5)) FROM t"])
    charge(book, w, per_unit(w, np.array([1.0]), 1), "sums")
    with sqlite3.connect(path) as con:
        assert has_linear(con) and con.execute("PRAGMA user_version").fetchone()[0] == 2
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                           ).fetchone()[0] == 2
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            con.execute("UPDATE charges SET linear = NULL")
    again = Ledger.open(path)
    assert abs(again.spent() - 2.0) < 1e-12  # 0.5 + 1.5 on one row
    entry = again.entry(again.releases()[1].release_id)
    assert entry.linear is not None and entry.linear[0].exponent == -6
    assert again.entry(again.releases()[0].release_id).linear is None
    assert again.check(time_limit=30.0) is not None


def _domain_text() -> str:
    from tessera.release.ledger_store import domain_text

    return domain_text(DOMAIN)



#: Two releases summing the schema attribute v (−3..4): the worst row pays 4 in all (v = 4:
#: 4 + 0; v = 2: 2 + 2). Cut release by release, each release's cells are its own and each
#: piece weighs its cell's largest value, so the union of the pieces prices 5, which no row pays.
SCHEMA_SUMS = [["SELECT SUM(CLAMP(v, 0, 4)) FROM t"],
               ["SELECT SUM(CLAMP(v, 0, 4)) FROM t WHERE v <= 2"]]


@pytest.mark.parametrize("definition", ["pure", "zcdp"])
@pytest.mark.parametrize("neighbours", list(Neighbours))
def test_sums_of_a_schema_attribute_across_releases_are_exact(tmp_path, definition, neighbours):
    """Charged as ``tessera answer`` charges aggregate statements (their linear queries, cut
    together at every solve), two releases summing one schema attribute cost what brute force
    over every record (pair) says, exactly: under ρ-zCDP substitution by the pair program
    (the pieces would price the pair v = 4 → 2 at 16 − 4 + 4 = 16 against a true 4 + 4)."""
    p = 1 if definition == "pure" else 2
    book = Ledger.init(tmp_path / "s.db", total=1e9, definition=definition,
                       neighbours=neighbours, domain=DOMAIN, dataset="t")
    charged = []
    for i, texts in enumerate(SCHEMA_SUMS):
        w = workload_of(texts)
        book.charge_linear(w.domain, w.linear, np.ones(len(w.linear)), label=f"r{i}",
                           mechanism="test", time_limit=30.0)
        charged.append(w)
    v = np.column_stack([values(w) for w in charged]).astype(np.float64)
    if neighbours is Neighbours.ADD_REMOVE:
        truth = float((np.abs(v) ** p).sum(axis=1).max())
    else:
        truth = max(float((np.abs(v - d) ** p).sum(axis=1).max()) for d in v)
    if neighbours is Neighbours.ADD_REMOVE:
        assert truth == max(4 ** p, 2 * 2 ** p)  # v = 4 in the first, or v = 2 in both
    assert_matches(book.spent(), truth, exact=True)
    summary = book.summary()
    assert summary.exact
    if neighbours is Neighbours.SUBSTITUTE and p == 2:  # the pair program: no rounding up
        assert summary.spent_lower == summary.spent == truth


def test_planted_bug_schema_sums_cut_release_by_release_over_count(tmp_path):
    """Planted: each release cut into pieces on its own (the way counting releases are
    charged). The union then pays 5 for the worst row where brute force says 4: the exactness
    check above fails for it."""
    book = Ledger.init(tmp_path / "p.db", total=1e9, definition="pure",
                       neighbours=Neighbours.ADD_REMOVE, domain=DOMAIN, dataset="t")
    for i, texts in enumerate(SCHEMA_SUMS):
        w = workload_of(texts)
        charge(book, w, np.ones(len(w.linear)), f"r{i}")  # pieces, release by release
    assert abs(book.spent() - 5) < 1e-9
    with pytest.raises(AssertionError):
        assert_matches(book.spent(), 4.0, exact=True)


@settings(max_examples=6, deadline=None)
@given(st.lists(st.lists(statement, min_size=1, max_size=2), min_size=2, max_size=3),
       st.sampled_from([1, 2]), st.data())
def test_linear_ledger_under_zcdp_substitution_is_exact(tmp_path_factory, measured, k, data):
    """Every release charged as linear queries (as ``tessera answer`` charges aggregates), a
    schema sum among them: under ρ-zCDP substitution the ledger's spent budget is the pair
    program's, exactly the brute force (K² times the larger row relation for a person of
    K = 2), with a witness attaining it."""
    # (m's unit fixed at 10^-6 by the first release, as above)
    texts = [[*measured[0], "SELECT SUM(CLAMP(m, 0, 3)) FROM t WHERE a = 'z'",
              "SELECT SUM(CLAMP(v, -1, 2)) FROM t WHERE b"], *measured[1:]]
    bases = [np.array(data.draw(st.lists(st.integers(1, 8), min_size=40, max_size=40))) / 4.0
             for _ in texts]
    unit = PrivacyUnit.of("id", k) if k > 1 else PrivacyUnit.of()
    tmp = tmp_path_factory.mktemp("z")
    book = Ledger.init(tmp / "z.db", total=1e9, definition="zcdp",
                       neighbours=Neighbours.SUBSTITUTE, domain=DOMAIN, dataset="t", unit=unit)
    charged = []
    for i, (ts, base) in enumerate(zip(texts, bases)):
        w = book.at_units(workload_of(ts))
        costs = per_unit(w, base[: len(w.linear)], 2)
        book.charge_linear(w.domain, w.linear, costs, label=f"r{i}", mechanism="test",
                           time_limit=30.0, unit=unit)
        charged.append((w, costs))
    e = next(iter({e for w, _ in charged for e in w.measures.values()}))
    truth = brute(charged, e, 2, Neighbours.SUBSTITUTE)
    if k > 1:
        truth = k * k * max(truth, brute(charged, e, 2, Neighbours.ADD_REMOVE))
    summary = book.summary()
    assert_matches(summary.spent, truth, exact=True)
    assert_matches(max(summary.spent_lower, truth), truth, exact=True)
    assert book.check(time_limit=30.0) is not None


def test_counting_beside_linear_under_zcdp_substitution_is_a_labelled_bound(tmp_path):
    """A counting release (COUNT(*) WHERE b, charged as a counting workload) beside SUM(v),
    v in −3..4, under ρ-zCDP substitution with costs 1: the truth is 1 + (4 + 3)² = 50 (b and v
    both changed). The pair program does not read counting releases, so the union is the
    levels' bound, 51 (the two-signed sum's levels doubled: 2·(16 + 9)); the ledger records it
    as not exact, with a witness pair's true cost (at most 50) as its lower end."""
    book = Ledger.init(tmp_path / "m.db", total=1e9, definition="zcdp",
                       neighbours=Neighbours.SUBSTITUTE, domain=DOMAIN, dataset="t")
    count = workload_of(["SELECT COUNT(*) FROM t WHERE b"])
    cut = pieces(count.cost_domain, count.linear, "zcdp", Neighbours.SUBSTITUTE)
    book.charge(piece_workload(count.cost_domain, cut), cut.costs([1.0]), label="count",
                mechanism="test", time_limit=30.0)
    total = workload_of(["SELECT SUM(v) FROM t"])
    book.charge_linear(total.domain, total.linear, [1.0], label="sum", mechanism="test",
                       time_limit=30.0)
    book.tighten(time_limit=30.0)
    summary = book.summary()
    assert 50 < summary.spent <= 51 * (1 + 1e-12) and not summary.exact
    # (the count's piece costs 1 rounded up by an ulp: the truth is 50 and that ulp)
    assert summary.spent_lower <= 50 * (1 + 1e-12)
    union = book.check(time_limit=30.0)
    assert union is not None and not union.exact
    assert union.achieved_value <= 50 * (1 + Fraction(1, 10**12))
