"""WHERE clauses → queries: round trips, SQL semantics against DuckDB, and errors (docs/theory.md
§2)."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.data.counts import count
from tessera.errors import QueryError
from tessera.schema.domain import Binned, Boolean, Categorical, Domain, IntegerRange
from tessera.schema.intervals import IntervalSet
from tessera.workload.clause import BooleanClause
from tessera.workload.parse import parse_query
from tessera.workload.query import Query
from tessera.workload.workload import Workload
from tests.oracles.foundation import (
    FAST,
    SLOWEX,
    Draw,
    HypDraw,
    RngDraw,
    gen_domain,
    gen_set_query,
    gen_table,
    point_table,
)

from .sqlgen import where_clause

NON_BINNED = ("integer", "categorical", "ordered", "boolean")


class DuckTable:
    """DuckDB's own evaluation of WHERE clauses on a DataFrame: the oracle."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.con = duckdb.connect()
        self.con.register("t", frame.assign(_id=np.arange(len(frame))))

    def ids(self, clause: str) -> set[int]:
        return {r[0] for r in self.con.sql(f"SELECT _id FROM t WHERE {clause}").fetchall()}


def duck_ids(frame: pd.DataFrame, clause: str) -> set[int]:
    return DuckTable(frame).ids(clause)


def duck_count(con: duckdb.DuckDBPyConnection, clause: str) -> int:
    return con.sql(f"SELECT count(*) FROM t WHERE {clause}").fetchall()[0][0]


# -- round trip --------------------------------------------------------------------------------


def _round_trip(domain: Domain, q: Query) -> None:
    sql = q.to_sql(domain)
    back = parse_query(sql, domain)
    if q.is_contradiction():
        assert back.is_contradiction(), sql
    else:
        assert back == q, (sql, q, back)


@FAST
@given(st.data())
def test_parse_to_sql_round_trip(data: st.DataObject) -> None:
    r = HypDraw(data)
    domain = gen_domain(r, (1, 4))
    for _ in range(3):
        _round_trip(domain, gen_set_query(r, domain).to_query(domain))


@pytest.mark.parametrize("seed", range(3))
def test_parse_to_sql_round_trip_seeded(seed: int) -> None:
    r = RngDraw(np.random.default_rng(seed))
    for _ in range(150):
        domain = gen_domain(r, (1, 4))
        _round_trip(domain, gen_set_query(r, domain).to_query(domain))


def test_round_trip_boolean_with_missing() -> None:
    """`b IS NOT NULL` on a boolean with a missing code: {false, true} must print parseably."""
    d = Domain((Boolean(name="b", missing=True),))
    q = Query.conjunction(d, {"b": IntervalSet.range(0, 2)})
    assert parse_query(q.to_sql(d), d) == q


@SLOWEX
@given(st.data())
def test_to_sql_means_the_query_in_duckdb(data: st.DataObject) -> None:
    """to_sql(q) evaluated by DuckDB selects exactly the points q contains."""
    r = HypDraw(data)
    domain = gen_domain(r, (1, 3), kinds=NON_BINNED)
    frame, codes = point_table(domain, r)
    duck = DuckTable(frame)
    for _ in range(3):
        q = gen_set_query(r, domain).to_query(domain)
        want = set(np.flatnonzero(q.evaluate(domain, codes)).tolist())
        assert duck.ids(q.to_sql(domain)) == want, q.to_sql(domain)


# -- SQL semantics of parse_query --------------------------------------------------------------


def _pointwise(r: Draw, n_clauses: int) -> None:
    domain = gen_domain(r, (1, 3))
    frame, codes = point_table(domain, r)
    duck = DuckTable(frame)
    for _ in range(n_clauses):
        clause = where_clause(r, domain)
        q = parse_query(clause, domain)
        got = set(np.flatnonzero(q.evaluate(domain, codes)).tolist())
        assert got == duck.ids(clause), (clause, domain, q)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_where_semantics_pointwise_vs_duckdb(data: st.DataObject) -> None:
    """On every point of 𝔻, parse_query(clause) is true iff DuckDB's WHERE clause is true."""
    _pointwise(HypDraw(data), 6)


@pytest.mark.parametrize("seed", range(3))
def test_where_semantics_pointwise_seeded(seed: int) -> None:
    r = RngDraw(np.random.default_rng(100 + seed))
    for _ in range(25):
        _pointwise(r, 10)


@pytest.mark.parametrize("seed", range(4))
def test_count_equals_duckdb_count(seed: int) -> None:
    """tessera count(df, workload) == SELECT count(*) FROM df WHERE clause, for each clause."""
    r = RngDraw(np.random.default_rng(200 + seed))
    for _ in range(6):
        domain = gen_domain(r, (2, 4))
        frame, _ = gen_table(r, domain, r.int(0, 60))
        clauses = [where_clause(r, domain) for _ in range(25)]
        # numbered: random clauses may repeat, and named by their SQL two would share a name
        names = [f"q{i}" for i in range(len(clauses))]
        result = count(frame, Workload.from_sql(clauses, domain, names=names))
        con = duckdb.connect()
        con.register("t", frame)
        want = [duck_count(con, c) for c in clauses]
        assert result.answers.tolist() == want, list(zip(clauses, result.answers, want))
        assert result.n_rows == len(frame) and result.dropped == 0


THREE_VALUED = [
    ("x = 1", [1]),
    ("x <> 1", [2]),
    ("NOT x = 1", [2]),
    ("NOT (x = 1)", [2]),
    ("NOT x <> 1", [1]),
    ("x IS NULL", [None]),
    ("x IS NOT NULL", [1, 2]),
    ("NOT x IS NULL", [1, 2]),
    ("x IN (1)", [1]),
    ("x NOT IN (1)", [2]),
    ("NOT (x IN (1))", [2]),
    ("x IN (1) OR x IS NULL", [1, None]),
    ("NOT (x = 1 OR x IS NULL)", [2]),
    ("NOT (x = 1 AND x IS NULL)", [1, 2]),  # on NULL: NOT (unknown AND true) is unknown
    ("NOT (x = 1 AND x = 2)", [1, 2]),
    ("NOT (NOT x = 1)", [1]),
    ("x BETWEEN 1 AND 1", [1]),
    ("x NOT BETWEEN 1 AND 1", [2]),
    ("x < 1 OR x >= 1", [1, 2]),
    ("NOT (x < 1 OR x >= 1)", []),
    ("x = 1 OR NOT x = 1", [1, 2]),
    ("1 = x", [1]),
    ("2 > x", [1]),
    ("x > 1.5", [2]),
    ("x = 1.5", []),
    ("x < -1", []),
    ("x > -1 AND x < 100", [1, 2]),
    ("TRUE", [1, 2, None]),
    ("FALSE", []),
    ("x = 1 AND FALSE", []),
    ("(((x = 2)))", [2]),
]


@pytest.mark.parametrize(("clause", "rows"), THREE_VALUED)
def test_three_valued_logic_cases(clause: str, rows: list[int | None]) -> None:
    d = Domain((IntegerRange(name="x", lo=0, hi=3, missing=True),))
    frame = pd.DataFrame({"x": pd.array([1, 2, None], dtype="Int64")})
    assert duck_ids(frame, clause) == {[1, 2, None].index(v) for v in rows}  # the oracle agrees
    codes = np.array([[1], [2], [4]])
    q = parse_query(clause, d)
    assert [v for v, hit in zip([1, 2, None], q.evaluate(d, codes)) if hit] == rows


def test_boolean_forms() -> None:
    d = Domain((Boolean(name="b", missing=True), IntegerRange(name="y", lo=0, hi=1)))
    t = IntervalSet.points([1])
    for clause in (
        "b",
        "b = TRUE",
        "b <> FALSE",
        "NOT b = FALSE",
        "b IN (TRUE)",
        "TRUE = b",
        "b = 'yes'",
        "b = 1",
    ):
        assert parse_query(clause, d).predicate("b") == t, clause
    for clause in ("NOT b", "b = FALSE", "b <> TRUE"):
        assert parse_query(clause, d).predicate("b") == IntervalSet.points([0]), clause


def test_unquoted_hyphenated_names_and_literals_left_alone() -> None:
    d = Domain(
        (
            IntegerRange(name="education-num", lo=1, hi=16),
            Categorical(name="native-country", values=("education-num", "a-b")),
            IntegerRange(name="income>50K", lo=0, hi=1),
        )
    )
    q = parse_query(
        "education-num >= 10 AND native-country = 'education-num' AND income>50K = 1", d
    )
    assert q.predicate("education-num") == IntervalSet.range(9, 16)
    assert q.predicate("native-country") == IntervalSet.points([0])
    assert q.predicate("income>50K") == IntervalSet.points([1])
    assert parse_query('"education-num" = 3', d).predicate("education-num") == IntervalSet.points(
        [2]
    )


def test_categorical_literal_spellings() -> None:
    d = Domain((Categorical(name="c", values=("O'Neil", "1", "Ü")),))
    assert parse_query("c = 'O''Neil'", d).predicate("c") == IntervalSet.points([0])
    assert parse_query("c = 1", d).predicate("c") == IntervalSet.points([1])  # number → text '1'
    assert parse_query("c IN ('Ü', '1')", d).predicate("c") == IntervalSet.points([1, 2])


def test_same_attribute_conditions_intersect() -> None:
    d = Domain((IntegerRange(name="a", lo=0, hi=9), IntegerRange(name="b", lo=0, hi=9)))
    q = parse_query("a >= 2 AND b = 1 AND a < 5 AND (a <> 3)", d)
    assert q.predicate("a") == IntervalSet.points([2, 4])
    assert q.scope == ("a", "b")
    assert parse_query("a >= 0", d) == Query.tautology()
    assert parse_query("a > 5 AND a < 3", d).is_contradiction()


# -- errors ------------------------------------------------------------------------------------

ADULTISH = Domain(
    (
        IntegerRange(name="age", lo=17, hi=90),
        Categorical(name="sex", values=("Female", "Male")),
        Categorical(name="edu", values=("HS", "BA", "MA"), is_ordered=True),
        Binned(name="hours", edges=(0, 20, 40, 60)),
        Binned(name="gain", edges=(0, 100, 1000), closed="right"),
        Boolean(name="ok"),
        IntegerRange(name="education-num", lo=1, hi=16),
    )
)


@pytest.mark.parametrize(
    ("clause", "needles"),
    [
        ("age < edu", ["comparison across attributes", "'age'", "'edu'", "literals"]),
        ("age > 30 OR sexx = 'Male'", ["unknown attribute 'sexx'", "did you mean 'sex'?"]),
        ("NOT (age > 30 AND sex = 'Femal')", ["'Femal'", "did you mean 'Female'?"]),
        ("agee > 30", ["unknown attribute 'agee'", "did you mean 'age'?"]),
        ("sex = 'Femal'", ["'Femal'", "did you mean 'Female'?"]),
        ("sex IN ('Male', 'mail')", ["'mail'", "did you mean"]),
        ("hours <= 30", ["splits bin", "hours", "edges"]),
        ("hours <= 20", ["splits bin"]),  # closed-left: [20, 40) holds 20
        ("gain < 100", ["splits bin"]),  # closed-right: (0, 100] holds 100
        ("hours = 20", ["bin label"]),
        ("hours BETWEEN 20 AND 40", ["splits bin"]),
        ("age = 'old'", ["not a number"]),
        ("age > TRUE", ["not a number"]),
        ("sex < 'Male'", ["no order", "'sex'"]),
        ("ok < TRUE", ["no order"]),
        ("ok = 3", ["not a boolean"]),
        ("age", ["not a condition"]),
        ("age = NULL", ["IS NULL"]),
        ("age = age", ["literal"]),
        ("age + 1 > 3", []),
        ("age IN (SELECT 1)", []),
        ("education - num > 3", []),
        ("age >= ", ["syntax error"]),
        ("(age = 3", ["syntax error"]),
        ("age = 3)", []),
        ("age => 3", []),
        ("", ["empty"]),
        ("   ", ["empty"]),
        ("age = 3; DROP TABLE x", []),
        ("age = 3 ORDER BY age", ["WHERE"]),
        ("edu < 'PhD'", ["'PhD'", "did you mean"]),
    ],
)
def test_errors_are_one_query_error_with_message(clause: str, needles: list[str]) -> None:
    with pytest.raises(QueryError) as e:
        parse_query(clause, ADULTISH)
    text = str(e.value)
    assert type(e.value) is QueryError
    assert "\n" not in text and "Traceback" not in text
    assert len(text) < 400
    for n in needles:
        assert n in text, text


def test_syntax_error_names_a_column() -> None:
    with pytest.raises(QueryError) as e:
        parse_query("age >= 30 AND AND sex = 'Male'", ADULTISH)
    assert "column" in str(e.value) and "hint" in str(e.value)


SQLISH = st.lists(
    st.sampled_from(
        list("agesxhoursk' ()=<>!-,.;0123456789\"")
        + [
            " AND ",
            " OR ",
            " NOT ",
            " IN ",
            " IS ",
            " NULL ",
            " BETWEEN ",
            "TRUE",
            "'Male'",
            "age",
            "sex",
            "hours",
            "ok",
            "edu",
            "education-num",
        ]
    ),
    max_size=25,
).map("".join)


@FAST
@given(SQLISH)
def test_garbage_raises_only_query_error(text: str) -> None:
    """Any input either parses or raises QueryError: no sqlglot/Python exception leaks out."""
    try:
        q = parse_query(text, ADULTISH)
    except QueryError as e:
        assert str(e)
    else:
        assert isinstance(q, (Query, BooleanClause))


def test_big_integer_literals_are_exact() -> None:
    """Integer attributes may be huge; a literal beyond 2**53 must not be rounded to a float."""
    lo = 2**60
    d = Domain((IntegerRange(name="t", lo=lo, hi=lo + 5),))
    assert parse_query(f"t = {lo + 1}", d).predicate("t") == IntervalSet.points([1])
    assert parse_query(f"t > {lo + 1}", d).predicate("t") == IntervalSet.range(2, 6)
    assert parse_query(f"t BETWEEN {lo + 2} AND {lo + 3}", d).predicate("t") == IntervalSet.range(
        2, 4
    )
    assert parse_query(f"t IN ({lo + 4}, {lo + 5})", d).predicate("t") == IntervalSet.range(4, 6)


@pytest.mark.parametrize(
    ("clause", "expect"),
    [
        ("age > 1e400", "contradiction"),
        ("age >= -1e400", "tautology"),
        ("age < 1e400", "tautology"),
        ("age BETWEEN 20 AND 1e400", "age >= 20"),
        ("age = 1e400", "contradiction"),
    ],
)
def test_infinite_literals_do_not_crash(clause: str, expect: str) -> None:
    """A literal that overflows to ±inf is a valid bound (or a QueryError), never OverflowError."""
    # every case here has a defined meaning: an error would be a regression, not a pass
    q = parse_query(clause, ADULTISH)
    if expect == "contradiction":
        assert q.is_contradiction()
    elif expect == "tautology":
        assert q == Query.tautology()
    else:
        assert q == parse_query(expect, ADULTISH)


def test_hint_prefers_the_same_word_in_another_case() -> None:
    """sex = 'male' should suggest 'Male', not 'Female' (difflib alone prefers 'Female')."""
    with pytest.raises(QueryError) as e:
        parse_query("sex = 'male'", ADULTISH)
    assert "did you mean 'Male'?" in str(e.value), str(e.value)
    with pytest.raises(QueryError) as e:
        parse_query("Sex = 'Male'", ADULTISH)
    assert "did you mean 'sex'?" in str(e.value), str(e.value)


@pytest.mark.parametrize("clause", ['sex = "Male"', "sex = Male"])
def test_double_quoted_or_bare_string_literal_gets_a_useful_hint(clause: str) -> None:
    """A very common slip: the message should say that text literals take single quotes."""
    with pytest.raises(QueryError) as e:
        parse_query(clause, ADULTISH)
    text = str(e.value)
    assert "'Male'" in text and "single quote" in text, text


@pytest.mark.parametrize("name", ["from", "case", "when", "select", "null", "true", "group"])
def test_round_trip_with_sql_keyword_attribute_names(name: str) -> None:
    """to_sql must quote attribute names that SQL reads as keywords."""
    d = Domain((IntegerRange(name=name, lo=0, hi=9), Boolean(name="b")))
    for cov in (IntervalSet.range(2, 5), IntervalSet.points([1, 7]), IntervalSet.points([3])):
        q = Query.conjunction(d, {name: cov, "b": IntervalSet.points([1])})
        assert parse_query(q.to_sql(d), d) == q, q.to_sql(d)


def test_null_in_lists_and_negated_literals_follow_sql() -> None:
    """`x IN (a, NULL)` is true for a, unknown elsewhere (so its NOT is never true);
    `NOT FALSE` is TRUE. Counts must equal DuckDB's own WHERE."""
    import duckdb

    from tessera import Workload, count

    d = Domain.from_dict(
        {"attributes": {"c": {"type": "categorical", "values": ["a", "b", "x"], "missing": True}}}
    )
    df = pd.DataFrame({"c": ["a", "b", None, "x", "a"]})
    clauses = [
        "c IN ('a', NULL)",
        "NOT (c IN ('a', NULL))",
        "c NOT IN ('a', NULL)",
        "NOT FALSE",
        "NOT (TRUE)",
        "c IN ('a', 'b') OR c IS NULL",
    ]
    ours = count(df, Workload.from_sql(clauses, d)).answers.tolist()
    con = duckdb.connect()
    con.register("df", df)
    theirs = [con.sql(f"SELECT count(*) FROM df WHERE {c}").fetchall()[0][0] for c in clauses]
    assert ours == theirs == [2, 0, 0, 5, 0, 4]


def test_a_keyword_named_column_gets_a_hint_to_quote_it() -> None:
    """A column named like an SQL keyword (R's `union`, `date`) breaks the parser when left
    unquoted: the error's hint says to double-quote it (in WHERE clauses and in SELECT
    statements); quoted, it parses; a keyword inside a string literal is not blamed."""
    from tessera.workload.select import parse_statement

    d = Domain((Boolean(name="union"), IntegerRange(name="year", lo=1980, hi=1987),
                Categorical(name="sector", values=("union", "trade"))))
    with pytest.raises(QueryError) as e:
        parse_query("union AND year = 1980", d)
    assert e.value.hint == "'union' is an SQL keyword: write it in double quotes, \"union\""
    with pytest.raises(QueryError) as e:
        parse_statement("SELECT year, union, COUNT(*) FROM t GROUP BY year, union", d)
    assert "double quotes" in str(e.value.hint)
    assert parse_query('"union" AND year = 1980', d).predicate("union") == IntervalSet.points([1])
    assert parse_statement('SELECT year, "union", COUNT(*) FROM t GROUP BY year, "union"', d)
    with pytest.raises(QueryError) as e:
        parse_query("sector = 'union' AND AND", d)  # the keyword only inside a literal
    assert "double quotes" not in str(e.value.hint)
