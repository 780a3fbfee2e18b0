"""BDD queries on the default answering route (``tessera.answer``, ``tessera answer`` without
``--estimate adaptive``) and in exact counts (``tessera.count``, ``tessera count``).

The counts layer crashed (``KeyError`` in ``tessera.data.counts._pack``) on a workload holding
BDD queries. Now each BDD query is answered on the ``GROUP BY`` of its variables by its own
automaton (:mod:`tessera.data.bdd_counts`). Checked here against brute force: every BDD
query's function written out in Python and evaluated on every row (no BDD, no ``dd``), every SQL
predicate by pandas; a planted bug (the BDD read with its variables in reverse order) is caught.
End to end: the CLI answers, ``tessera verify`` accepts the certificate untouched and rejects an
edit; the parts that take predicate queries only say so (consistency: a note; the ledger: a
one-line refusal before any charge), never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import tessera
from tessera.cli.main import app
from tessera.data.counts import count, count_encoded
from tessera.data.source import encode
from tessera.engine.bdd import at_least, bdd_manager, disjunction, from_expr, parity
from tessera.schema.domain import Domain
from tessera.synth.sensitive import sensitive_counts
from tessera.workload.bdd import BooleanQuery
from tessera.workload.stats import WorkloadStats
from tessera.workload.workload import Workload

SCHEMA = ("attributes:\n" + "".join(f"  {v}: {{type: integer, min: 0, max: 1}}\n"
                                    for v in "abcd") + "  e: {type: integer, min: 0, max: 2}\n")

Row = Callable[[pd.DataFrame], "pd.Series[bool]"]

#: name → (how the workload gets it, the same function written out on a frame of rows)
SQL: dict[str, tuple[str, Row]] = {
    "p": ("e = 1 AND a = 0", lambda r: (r.e == 1) & (r.a == 0)),
    "r": ("e >= 1", lambda r: r.e >= 1),
    "s": ("b = 1 AND d = 1", lambda r: (r.b == 1) & (r.d == 1)),
}
BDD: dict[str, Row] = {
    "f": lambda r: ((r.a == 1) & (r.b == 0)) | (r.c == 1),       # (a /\ ~b) \/ c
    "g": lambda r: (r.a == 1) | (r.d == 0),                      # a \/ ~d (symmetric: or)
    "h": lambda r: (r.b + r.c + r.d) % 2 == 1,                   # b xor c xor d
    "k": lambda r: r.a + r.b + r.c >= 2,                         # at least 2 of a, b, c
    "m": lambda r: ((r.d == 1) & (r.a == 0)) | ((r.c == 1) & (r.b == 1)),  # order d,c,b,a
    "t": lambda r: pd.Series(True, index=r.index),               # the constant TRUE
}


def _bdd_queries() -> list[BooleanQuery]:
    mgr = bdd_manager(["a", "b", "c", "d"])
    other = bdd_manager(["d", "c", "b", "a"])  # another variable order than the domain's
    return [from_expr(mgr, r"(a /\ ~b) \/ c"), disjunction(mgr, {"a": 1, "d": 0}),
            parity(mgr, ["b", "c", "d"]), at_least(mgr, ["a", "b", "c"], 2),
            from_expr(other, r"(d /\ ~a) \/ (c /\ b)"), from_expr(mgr, "TRUE")]


def _workload(dom: Domain) -> Workload:
    """SQL and BDD queries interleaved, names in :data:`SQL` and :data:`BDD`."""
    sql = Workload.from_sql([s for s, _ in SQL.values()], dom).queries
    f, g, h, k, m, t = _bdd_queries()
    return Workload.of(dom, [sql[0], f, g, sql[1], h, k, m, sql[2], t],
                       names=["p", "f", "g", "r", "h", "k", "m", "s", "t"])


def _frame(n: int = 500, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({v: rng.integers(0, 2, n) for v in "abcd"})
    frame["e"] = rng.integers(0, 3, n)
    return frame


def _brute_force(w: Workload, frame: pd.DataFrame) -> np.ndarray:
    """Each query's function, written out, summed over every row."""
    functions = {**{k: f for k, (_, f) in SQL.items()}, **BDD}
    return np.array([int(functions[name](frame).sum()) for name in w.names], dtype=np.int64)


@pytest.fixture
def dom(tmp_path: Path) -> Domain:
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    return Domain.load(tmp_path / "schema.yaml")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_counts_of_bdd_queries_equal_brute_force(dom: Domain, seed: int) -> None:
    w, frame = _workload(dom), _frame(seed=seed)
    expected = _brute_force(w, frame)
    assert 0 < expected[:-1].min() and expected.max() <= len(frame)  # no trivial answers
    np.testing.assert_array_equal(count(frame, w).answers, expected)
    # one GROUP BY per scope (max_cells too small for the union's) gives the same counts
    encoded = encode(frame, dom)
    np.testing.assert_array_equal(count_encoded(encoded, w, max_cells=4), expected)
    # the adaptive route's row-by-row counts (a list of queries: synth.sensitive's Evaluator)
    rows = sensitive_counts(dom, list(w.queries), frame)
    np.testing.assert_array_equal(rows.counts, expected)
    # a BDD-only workload
    only = Workload.of(dom, list(_bdd_queries()), names=list(BDD))
    np.testing.assert_array_equal(count(frame, only).answers, _brute_force(only, frame))


def test_a_bdd_read_in_the_wrong_variable_order_is_caught(
    dom: Domain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planted bug: the automaton reads the scope's columns in reverse order."""
    w, frame = _workload(dom), _frame()
    expected = _brute_force(w, frame)

    def reversed_order(self: BooleanQuery, domain: Domain, codes: np.ndarray) -> np.ndarray:
        order = self.scope
        layers = self.cofactor_layers(order, max_states=1 << 30)
        assert layers is not None
        transitions, accept = layers
        state = np.zeros(codes.shape[0], dtype=np.int64)
        for name, table in zip(order[::-1], transitions, strict=True):
            state = table[state, codes[:, domain.index(name)]]
        return accept[state] if order else np.full(len(codes), self.node == self.manager.true)

    monkeypatch.setattr(BooleanQuery, "evaluate", reversed_order)
    wrong = count(frame, w).answers
    differs = [n for n, a, b in zip(w.names, wrong, expected) if a != b]
    # the functions that change when their variables are reversed; h, k (symmetric without
    # negations) and t read alike, SQL queries are not BDDs
    assert set(differs) == {"f", "g", "m"}, differs


def test_answer_route_releases_the_bdd_counts(dom: Domain) -> None:
    """``tessera.answer`` on a mixed workload: at ρ = 10⁴ (the largest budget accepted) the
    discrete Gaussian's σ is below 0.03 (checked), so P[any of 9 noises ≠ 0] ≤ 9 · 2 ·
    exp(−1/(2σ²)) < 10⁻²⁰⁰: the released answers are the exact counts, which must be the
    brute-force ones."""
    w, frame = _workload(dom), _frame()
    expected = _brute_force(w, frame)
    release = tessera.answer(frame, w, tessera.Budget.of(rho=1e4), seed=3)
    assert not release.private
    assert float(np.max(release.plan.scales)) < 0.03
    np.testing.assert_array_equal(release.noisy, expected)
    # at an ordinary budget the answers sit in their intervals around the brute force
    release = tessera.answer(frame, w, tessera.Budget.of(rho=1.0), seed=4,
                             postprocess=("consistency",))
    assert np.all(np.abs(release.noisy - expected) <= release.plan.halfwidths)
    assert "BDD queries" in release.postprocessing_notes["consistency"]  # not applied, and said so
    np.testing.assert_array_equal(release.postprocessed["consistency"], release.noisy)


def test_workload_statistics_count_bdd_queries(dom: Domain) -> None:
    w = _workload(dom)
    f = w.queries[1]
    twice = Workload.of(dom, [*w.queries, f], names=[*w.names, "f2"])
    s = WorkloadStats.of(twice)
    assert s.n_bdd == 7 and s.n_queries == 10
    assert s.tautologies == (8,) and (1, 9) in s.duplicates
    assert s.attributes_used["a"] == 1 + 4 + 1 and s.attributes_used["e"] == 2  # p; f g k m; f2


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dom: Domain) -> Path:
    monkeypatch.chdir(tmp_path)
    _workload(dom).save(tmp_path / "w.sql")
    _frame().to_csv(tmp_path / "d.csv", index=False)
    return tmp_path


def test_cli_answers_a_bdd_workload_and_verifies_it(files: Path, dom: Domain) -> None:
    run = CliRunner().invoke
    expected = _brute_force(_workload(dom), _frame())
    r = run(app, ["count", "d.csv", "w.sql", "-s", "schema.yaml", "-o", "exact.csv"])
    assert r.exit_code == 0, r.output
    np.testing.assert_array_equal(pd.read_csv(files / "exact.csv")["answer"], expected)
    r = run(app, ["answer", "d.csv", "w.sql", "-s", "schema.yaml", "--rho", "1", "-o", "a.csv",
                  "--certificate", "c.json", "--report", "r.html", "--consistency"])
    assert r.exit_code == 0 and "Traceback" not in r.output, r.output
    answers = pd.read_csv(files / "a.csv")
    assert list(answers["query"]) == list(_workload(dom).names)
    assert "BDD[a,b,c,d]" in (files / "r.html").read_text()  # the query's text in the report
    r = run(app, ["verify", "c.json", "w.sql", "-s", "schema.yaml"])
    assert r.exit_code == 0 and "verified" in r.output, r.output
    doc = json.loads((files / "c.json").read_text())
    doc["workload"]["sha256"] = "0" * 64  # one edited field
    (files / "edited.json").write_text(json.dumps(doc))
    r = run(app, ["verify", "edited.json", "w.sql", "-s", "schema.yaml"])
    assert r.exit_code != 0 and "Traceback" not in r.output, r.output


def test_cli_ledger_charges_bdd_releases_overlap_aware(files: Path, dom: Domain) -> None:
    """The ledger stores a BDD query as its text and reads it back: two releases on disjoint
    rows (a ∧ b, a ∧ ¬b | ¬a) cost a row their maximum (parallel composition), a repeat adds."""
    mgr = bdd_manager(["a", "b", "c", "d"])
    Workload.of(dom, [from_expr(mgr, r"a /\ b"), from_expr(mgr, r"a /\ ~b")],
                names=["x", "y"]).save(files / "wa.sql")
    Workload.of(dom, [from_expr(mgr, "~a")], names=["z"]).save(files / "wb.sql")
    run = CliRunner().invoke
    r = run(app, ["ledger", "init", "l.db", "--rho", "5", "-s", "schema.yaml"])
    assert r.exit_code == 0, r.output
    spent = []
    for name in ("wa", "wb", "wa"):
        r = run(app, ["answer", "d.csv", f"{name}.sql", "-s", "schema.yaml", "--rho", "1",
                      "--ledger", "l.db"])
        assert r.exit_code == 0 and "Traceback" not in r.output, r.output
        spent.append(r.output.split("spent ")[1].split(" (")[0])
    assert spent == ["0 → 1", "1 → 1", "1 → 2"], spent


def test_a_bdd_over_a_non_binary_attribute_is_refused_before_any_charge(
    dom: Domain, tmp_path: Path
) -> None:
    mgr = bdd_manager(["a", "e"])  # e has 3 values: not a BDD variable
    w = Workload.of(dom, [from_expr(mgr, r"a /\ e")], names=["x"])
    with pytest.raises(tessera.TesseraError, match="'e' has 3"):
        count(_frame(), w)
    from tessera.release.ledger import Ledger

    book = Ledger.init(tmp_path / "l.db", total=5.0, definition="zcdp", neighbours="add-remove",
                       domain=dom, dataset="d")
    with pytest.raises(tessera.TesseraError, match="'e' has 3"):
        tessera.answer(_frame(), w, tessera.Budget.of(rho=1.0), ledger=book)
    assert not Ledger.open(tmp_path / "l.db").releases()
