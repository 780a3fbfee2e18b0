"""Boolean WHERE clauses (OR / NOT across attributes): parsing, SQL's three-valued semantics, the
SQL round trip, workload files, and exact counts against DuckDB and pandas (docs/theory.md §2)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.data.counts import count, count_encoded
from tessera.data.source import encode
from tessera.errors import QueryError, QueryWarning
from tessera.schema.domain import Attribute, Binned, Boolean, Categorical, Domain, IntegerRange
from tessera.schema.intervals import IntervalSet
from tessera.workload.clause import FALSE, TRUE, And, BooleanClause, Not, Or, clause_or_query
from tessera.workload.fastparse import FastParser
from tessera.workload.parse import parse_query
from tessera.workload.query import Predicate, Query
from tessera.workload.stats import WorkloadStats
from tessera.workload.workload import Workload
from tests.oracles.foundation import (
    Draw,
    HypDraw,
    RngDraw,
    choice,
    coin,
    gen_domain,
    gen_table,
    point_table,
    quote,
)

from .sqlgen import aligned_bounds, expression, integer_literal, sql_literal

D = Domain(
    (
        IntegerRange(name="a", lo=0, hi=3, missing=True),
        Categorical(name="b", values=("x", "y", "z"), missing=True),
        Boolean(name="c", missing=True),
        IntegerRange(name="d", lo=1, hi=2),
    )
)


def duck_ids(frame: pd.DataFrame, clause: str) -> set[int]:
    con = duckdb.connect()
    con.register("t", frame.assign(_id=np.arange(len(frame))))
    return {r[0] for r in con.sql(f"SELECT _id FROM t WHERE {clause}").fetchall()}


# -- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "clause",
    [
        "a = 1 OR b = 'x'",
        "NOT (a = 1 AND b = 'x')",
        "a = 1 AND (b = 'x' OR c)",
        "(a = 1 AND c) OR (a = 2 AND NOT c) OR b IS NULL",
        "NOT (a IN (1, 2) OR b = 'y') OR d = 2",
        "c OR d = 1",
        "NOT c OR a > 1 OR b <> 'z'",
        "a BETWEEN 1 AND 2 OR (b IN ('x', 'y') AND NOT (c OR d = 2))",
    ],
)
def test_boolean_combinations_parse_to_clauses(clause: str) -> None:
    q = parse_query(clause, D)
    assert isinstance(q, BooleanClause), q
    assert q.as_query() is None
    assert parse_query(q.to_sql(D), D) == q  # canonical SQL round trip
    # the clause's own two evaluators agree
    frame, codes = point_table(D, RngDraw(np.random.default_rng(0)))
    vec = q.evaluate(D, codes)
    assert vec.tolist() == [q(D, tuple(row)) for row in codes.tolist()]
    assert set(np.flatnonzero(vec).tolist()) == duck_ids(frame, clause)


@pytest.mark.parametrize(
    ("clause", "same_as"),
    [
        ("a = 1 OR a = 2", "a BETWEEN 1 AND 2"),  # one attribute: still one predicate
        ("NOT (a <> 1 OR b <> 'y')", "a = 1 AND b = 'y'"),  # a conjunction in disguise
        ("(a = 1 OR b = 'x') AND FALSE", "FALSE"),
        ("a = 1 OR b = 'x' OR TRUE", "TRUE"),
        ("d = 1 OR d = 2 OR a = 1", "TRUE"),  # d has no missing value
        ("NOT (a IN (1, NULL)) OR b = 'x'", "b = 'x'"),  # NOT (… IN (…, NULL)) is never true
        ("(a = 1 OR b = 'x') AND (b = 'x' OR a = 1)", "a = 1 OR b = 'x'"),
    ],
)
def test_conjunctions_and_constants_stay_queries(clause: str, same_as: str) -> None:
    q, want = parse_query(clause, D), parse_query(same_as, D)
    if isinstance(want, Query) and want.is_contradiction():
        assert isinstance(q, Query) and q.is_contradiction()
    else:
        assert q == want
    assert type(q) is type(want)


def test_errors_inside_clauses_keep_their_messages() -> None:
    for clause, needles in [
        ("a = 1 OR bb = 'x'", ["unknown attribute 'bb'", "did you mean 'b'?"]),
        ("a = 1 OR b = 'w'", ["'w'"]),
        ("NOT (a = 1 AND b = x)", ["single quote"]),
        ("a = 1 OR a < b", ["comparison across attributes"]),
        ("NOT (a = 1 AND b > 'x')", ["no order"]),
        ("a = 1 OR b = NULL", ["IS NULL"]),
    ]:
        with pytest.raises(QueryError) as e:
            parse_query(clause, D)
        for n in needles:
            assert n in str(e.value), (clause, str(e.value))


def test_build_normalises_formulas() -> None:
    pa_ = Predicate("a", IntervalSet.points([1]))
    pb = Predicate("b", IntervalSet.points([0]))
    c1 = BooleanClause.build(D, Or((pa_, pb)))
    c2 = BooleanClause.build(D, Not(And((Not(pb), Not(pa_)))))  # De Morgan
    assert c1 == c2 and hash(c1) == hash(c2)
    assert c1.scope == ("a", "b") and c1.sizes == (5, 4)
    assert BooleanClause.build(D, Or((pa_, Not(pa_)))).root == TRUE
    assert BooleanClause.build(D, And((pa_, Not(pa_)))).root == FALSE
    assert clause_or_query(D, And((pa_, pb))) == Query((pa_, pb))
    # a tautology that only the automaton sees (the form does not fold it)
    t = BooleanClause.build(D, Or((And((pa_, pb)), Not(pa_), Not(pb))))
    assert t.is_tautology() and not t.is_contradiction()
    f = BooleanClause.build(D, And((Or((pa_, pb)), Not(pa_), Not(pb))))
    assert f.is_contradiction() and not f.is_tautology()
    assert not c1.is_tautology() and not c1.is_contradiction()


# -- SQL semantics against DuckDB, pointwise -------------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    attr: Attribute
    op: str
    value: Any = None


@dataclass(frozen=True)
class Node:
    op: str  # AND, OR, NOT
    kids: tuple[Any, ...]


def gen_leaf(r: Draw, attr: Attribute) -> Leaf:
    if coin(r, 1, 8):
        return Leaf(attr, "IS NULL" if coin(r) else "IS NOT NULL")
    if isinstance(attr, Boolean):
        return Leaf(attr, "bare") if coin(r) else Leaf(attr, choice(r, ("=", "<>")), coin(r))
    if isinstance(attr, Binned):
        op, v = choice(r, aligned_bounds(attr))
        return Leaf(attr, op, v)
    if isinstance(attr, IntegerRange):
        def lit() -> Any:
            return integer_literal(r, attr)
    else:
        assert isinstance(attr, Categorical)

        def lit() -> Any:
            return choice(r, attr.values)
    if coin(r, 1, 4):
        return Leaf(attr, "IN", tuple(lit() for _ in range(r.int(1, 3))))
    ops = ("=", "<>", "<", "<=", ">", ">=") if attr.ordered else ("=", "<>")
    return Leaf(attr, choice(r, ops), lit())


def gen_tree(r: Draw, domain: Domain, depth: int = 3, top: bool = True) -> Any:
    """A random condition; at the top a connective (most are Boolean clauses)."""
    if depth == 0 or (not top and coin(r, 1, 3)):
        return gen_leaf(r, domain.attributes[r.int(0, len(domain) - 1)])
    form = r.int(0, 4)
    if form == 0:
        return Node("NOT", (gen_tree(r, domain, depth - 1, top),))
    return Node("AND" if form == 1 else "OR",
                tuple(gen_tree(r, domain, depth - 1, False) for _ in range(r.int(2, 3))))


def to_sql(t: Any) -> str:
    if isinstance(t, Node):
        if t.op == "NOT":
            return f"NOT ({to_sql(t.kids[0])})"
        return "(" + f" {t.op} ".join(to_sql(k) for k in t.kids) + ")"
    col = quote(t.attr.name)
    if t.op in ("IS NULL", "IS NOT NULL"):
        return f"{col} {t.op}"
    if t.op == "bare":
        return col
    if t.op == "IN":
        return f"{col} IN ({', '.join(sql_literal(t.attr, v) for v in t.value)})"
    return f"{col} {t.op} {sql_literal(t.attr, t.value)}"


def to_pandas(t: Any, frame: pd.DataFrame) -> pd.Series:
    """The clause with pandas' nullable booleans: Kleene logic, NA where SQL says unknown."""
    if isinstance(t, Node):
        parts = [to_pandas(k, frame) for k in t.kids]
        if t.op == "NOT":
            return ~parts[0]
        out = parts[0]
        for p in parts[1:]:
            out = (out & p) if t.op == "AND" else (out | p)
        return out
    s = frame[t.attr.name]
    if t.op == "IS NULL":
        return s.isna().astype("boolean")
    if t.op == "IS NOT NULL":
        return s.notna().astype("boolean")
    if t.op == "bare":
        return s.astype("boolean")
    if t.op == "IN":
        return s.isin(list(t.value)).astype("boolean").mask(s.isna())
    ops = {"=": "__eq__", "<>": "__ne__", "<": "__lt__", "<=": "__le__", ">": "__gt__",
           ">=": "__ge__"}
    return getattr(s, ops[t.op])(t.value).astype("boolean")


def _pointwise(r: Draw, n_clauses: int) -> None:
    domain = gen_domain(r, (2, 3))
    frame, codes = point_table(domain, r)
    for _ in range(n_clauses):
        if coin(r, 1, 3):  # the sqlgen single-attribute trees, combined across attributes
            a, b = (domain.attributes[r.int(0, len(domain) - 1)] for _ in range(2))
            clause = f"NOT ({expression(r, a)}) {choice(r, ('OR', 'AND'))} ({expression(r, b)})"
            clause = f"NOT ({clause})" if coin(r) else clause
        else:
            clause = to_sql(gen_tree(r, domain))
        q = parse_query(clause, domain)
        got = set(np.flatnonzero(q.evaluate(domain, codes)).tolist())
        assert got == duck_ids(frame, clause), (clause, domain, q)
        # to_sql means the same in DuckDB, and parses back to the same query
        back = parse_query(q.to_sql(domain), domain)
        if isinstance(q, Query) and q.is_contradiction():
            assert isinstance(back, Query) and back.is_contradiction()
        else:
            assert back == q, (clause, q.to_sql(domain))
        if not any(isinstance(a, Binned) for a in domain):  # (bins print as labels)
            assert duck_ids(frame, q.to_sql(domain)) == got, (clause, q.to_sql(domain))


@settings(max_examples=15, deadline=None)
@given(st.data())
def test_clause_semantics_pointwise_vs_duckdb(data: st.DataObject) -> None:
    """On every point of 𝔻 (NULLs included), a parsed clause is true iff DuckDB's WHERE is;
    its canonical SQL selects the same points and parses back to it."""
    _pointwise(HypDraw(data), 4)


@pytest.mark.parametrize("seed", range(2))
def test_clause_semantics_pointwise_seeded(seed: int) -> None:
    r = RngDraw(np.random.default_rng(700 + seed))
    for _ in range(6):
        _pointwise(r, 6)


# -- counts: DuckDB and pandas on the same raw data ----------------------------------------------


def _counts(r: Draw, n_clauses: int) -> None:
    domain = gen_domain(r, (2, 4), kinds=("integer", "categorical", "ordered", "boolean"))
    frame, codes = gen_table(r, domain, r.int(0, 70))
    trees = [gen_tree(r, domain) for _ in range(n_clauses)]
    clauses = [to_sql(t) for t in trees]
    # numbered: random clauses may repeat, and named by their SQL two would share a name
    w = Workload.from_sql(clauses, domain, names=[f"q{i}" for i in range(len(clauses))])
    got = count(frame, w).answers.tolist()
    con = duckdb.connect()
    con.register("t", frame)
    duck = [con.sql(f"SELECT count(*) FROM t WHERE {c}").fetchall()[0][0] for c in clauses]
    pand = [int(to_pandas(t, frame).fillna(False).sum()) for t in trees]
    assert got == duck == pand, list(zip(clauses, got, duck, pand))
    # the encoded path, whatever the packing of the predicate queries' GROUP BYs
    table = encode(frame, domain)
    for max_cells in (1, 1 << 19):
        assert count_encoded(table, w, max_cells=max_cells).tolist() == got
    # and the clause evaluated on the code matrix
    assert [int(q.evaluate(domain, codes).sum()) for q in w.queries] == got


@settings(max_examples=12, deadline=None)
@given(st.data())
def test_clause_counts_equal_duckdb_and_pandas(data: st.DataObject) -> None:
    _counts(HypDraw(data), 6)


@pytest.mark.parametrize("seed", range(3))
def test_clause_counts_seeded(seed: int) -> None:
    r = RngDraw(np.random.default_rng(800 + seed))
    for _ in range(5):
        _counts(r, 10)


def test_mixed_workload_counts_with_nulls() -> None:
    frame = pd.DataFrame({
        "a": pd.array([1, 2, None, 0, 1, None, 3], dtype="Int64"),
        "b": pd.array(["x", None, "y", "z", "y", "x", None], dtype="string"),
        "c": pd.array([True, None, False, True, None, True, False], dtype="boolean"),
        "d": pd.array([1, 2, 1, 2, 1, 2, 1], dtype="Int64"),
    })
    clauses = [
        "a = 1", "a = 1 OR b = 'x'", "NOT (a = 1 AND c)", "NOT (a = 1 OR c)",
        "NOT (a IN (1, NULL) OR b = 'y')", "c OR NOT c", "(a > 0 AND d = 1) OR b IS NULL",
        "b = 'y' AND d = 1", "TRUE", "FALSE",
    ]
    w = Workload.from_sql(clauses, D)
    con = duckdb.connect()
    con.register("t", frame)
    want = [con.sql(f"SELECT count(*) FROM t WHERE {c}").fetchall()[0][0] for c in clauses]
    assert count(frame, w).answers.tolist() == want == [2, 3, 4, 1, 0, 5, 4, 2, 7, 0]


# -- workloads ----------------------------------------------------------------------------------


MIXED = [
    "a = 1 OR b = 'x'",
    "young: a < 2",
    "NOT (a = 1 AND c)",
    "\"both, or none\": (a = 1 AND c) OR NOT (a = 1 OR c)",
    "b = 'y' AND d = 2",
    "d = 1 OR b IS NULL",
]


@pytest.mark.parametrize("suffix", [".sql", ".yaml", ".json"])
def test_workload_files_round_trip_clauses(tmp_path: Path, suffix: str) -> None:
    src = tmp_path / "w.sql"
    src.write_text("\n".join(MIXED) + "\n")
    w = Workload.load(src, D)
    assert [type(q) for q in w.queries] == [BooleanClause, Query, BooleanClause, BooleanClause,
                                            Query, BooleanClause]
    assert w.names[1] == "young" and w.names[3] == "both, or none"
    out = tmp_path / f"saved{suffix}"
    w.save(out)
    back = Workload.load(out, D)
    assert back.queries == w.queries and back.names == w.names and back.weights == w.weights
    assert w.n_clauses == 4


def test_fast_parser_falls_back_for_clauses() -> None:
    fast = FastParser(D)
    for text in MIXED[:1] + MIXED[2:3] + ["d = 1 OR b IS NULL", "(a = 1 OR b = 'x')"]:
        assert fast.try_parse(text) is None
        assert fast.parse(text) == parse_query(text, D)
    assert fast.try_parse("a < 2 AND d = 1") == parse_query("a < 2 AND d = 1", D)


def test_stats_count_clauses() -> None:
    clauses = [
        "a = 1 OR b = 'x'", "b = 'x' OR a = 1", "a < 2", "a < 2",
        "(a = 1 AND c) OR NOT (a = 1) OR NOT c OR a IS NULL OR c IS NULL",  # a tautology
        "(a = 1 OR b = 'x') AND NOT (a = 1) AND NOT (b = 'x')",  # a contradiction
        "b = 'y' AND a > 5",  # a contradiction (a conjunction)
    ]
    with pytest.warns(QueryWarning, match="query name 'a < 2' is already used"):
        s = WorkloadStats.of(Workload.from_sql(clauses, D))
    assert s.n_queries == 7 and s.n_clauses == 4
    assert s.duplicates == ((0, 1), (2, 3))
    assert s.tautologies == (4,) and s.contradictions == (5, 6)
    assert s.attributes_used == {"a": 7, "b": 4, "c": 1}
    assert s.scope_sizes == {1: 2, 2: 5}
    assert s.n_range_queries == 2


def test_clause_helpers_on_constants_and_columns() -> None:
    q = parse_query("a = 1 OR b = 'x'", D)
    assert isinstance(q, BooleanClause)
    cols = {"a": np.array([1, 0, 4]), "b": np.array([3, 0, 3])}
    assert q.evaluate_columns(cols).tolist() == [True, True, False]
    terms, exact = q.disjoint_terms()
    assert exact and len(terms) == 2
    assert "a = 1" in q.to_sql(D) and "OR" in q.to_sql(D)
    assert repr(q).startswith("BooleanClause(")


def test_clauses_pickle_across_processes() -> None:
    """Connectives cache their hash, which is per process: pickling rebuilds it."""
    import pickle

    q = parse_query("NOT (a = 1 AND b = 'x') AND (a = 2 OR c)", D)
    assert isinstance(q, BooleanClause)
    q.disjoint_terms()
    back = pickle.loads(pickle.dumps(q))
    assert back == q and hash(back) == hash(q)
    assert back.disjoint_terms() == q.disjoint_terms()


def test_release_with_clauses_through_the_ledger(tmp_path: Path) -> None:
    """Answering a workload with clauses: counts, calibration from the clause-aware γ_w, a
    ledger charge (clauses stored as SQL, re-parsed for the next charge) and post-processing
    that declines clauses with a note rather than failing."""
    from tessera.release import Budget, answer
    from tessera.release.ledger import Ledger

    frame = pd.DataFrame({
        "a": pd.array([1, 2, None, 0, 1], dtype="Int64"),
        "b": pd.array(["x", None, "y", "z", "y"], dtype="string"),
        "c": pd.array([True, None, False, True, None], dtype="boolean"),
        "d": pd.array([1, 2, 1, 2, 1], dtype="Int64"),
    })
    w = Workload.from_sql(["a = 1 OR b = 'x'", "NOT (a = 1 AND c)", "a = 1"], D)
    led = Ledger.init(tmp_path / "l.db", total=5.0, definition="pure",
                      neighbours="add-remove", domain=D, dataset="t")
    for _ in range(2):
        rel = answer(frame, w, Budget.of(epsilon=1.0), ledger=led, seed=3,
                     postprocess=["consistency"])
        assert rel.answers.shape == (3,)
    assert led.spent() == pytest.approx(2.0, abs=1e-3)
