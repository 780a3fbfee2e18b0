"""The fast path for simple clauses (tessera.workload.fastparse) against the main parser, and the
linear workload statistics against the obvious per-query loop.

The contract: whenever ``FastParser.try_parse`` answers, ``parse_query`` gives an equal query
(and does not raise); whenever ``parse_query`` raises, the fast path declines, so every error
and hint is the main parser's own.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tessera.errors import QueryError
from tessera.schema.domain import Attribute, Binned, Boolean, Categorical, Domain, IntegerRange
from tessera.schema.intervals import IntervalSet
from tessera.workload import fastparse
from tessera.workload.builders import marginals, random_workload
from tessera.workload.fastparse import FastParser
from tessera.workload.files import WorkloadError
from tessera.workload.parse import parse_query
from tessera.workload.query import Predicate, Query
from tessera.workload.stats import WorkloadStats
from tessera.workload.workload import Workload
from tests.oracles.foundation import (
    FAST,
    QUICK,
    Draw,
    HypDraw,
    RngDraw,
    choice,
    coin,
    gen_attribute,
    gen_domain,
    gen_set_query,
    numbered,
    quote,
)

from .sqlgen import aligned_bounds, where_clause

# -- a generator of simple clauses (the forms of the fast path), with mutations -----------------


def _space(r: Draw, least: int = 1) -> str:
    """Usually one space; sometimes several, a tab, or (where allowed) none."""
    k = r.int(0, 9)
    if k < 6 and least:
        return " "
    return choice(r, ["", " ", "  ", "\t", " \t "][least:])


def _kw(r: Draw, word: str) -> str:
    return choice(r, (word, word.lower(), word.capitalize()))


def _name(r: Draw, attr: Attribute | str) -> str:
    name = attr if isinstance(attr, str) else attr.name
    if not name.isidentifier() and coin(r, 2, 3):
        return quote(name)  # how to_sql writes it
    return quote(name) if coin(r, 1, 4) else name


def _sql(value: object) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _literal(r: Draw, attr: Attribute, for_order: bool = False) -> str:
    """A literal that usually fits the attribute; sometimes one that does not (an error or a
    contradiction for the main parser)."""
    odd = coin(r, 1, 8)
    if isinstance(attr, IntegerRange):
        if odd:
            return choice(r, ("'3'", "1e300", "TRUE", "2.5", "-0", "1E1", "0.0", "NULL"))
        v = r.int(attr.lo - 2, attr.hi + 2)
        return _sql(v + 0.5 if coin(r, 1, 6) else v)
    if isinstance(attr, Categorical):
        if odd:
            return choice(r, ("'zzz'", "1", "1.0", "TRUE", '"x"', "'o''neil'", "v1"))
        return _sql(choice(r, attr.values))
    if isinstance(attr, Boolean):
        return choice(r, ("TRUE", "FALSE", "true", "'yes'", "0", "1", "'maybe'", "2"))
    assert isinstance(attr, Binned)
    if for_order:
        if odd:
            return _sql(choice(r, attr.edges) + choice(r, (1, 2.5)))
        return _sql(choice(r, aligned_bounds(attr))[1])
    if odd:
        return _sql(choice(r, attr.edges))
    return _sql(attr.value(r.int(0, attr.n_values - 1)))


def simple_term(r: Draw, domain: Domain) -> str:
    if coin(r, 1, 8):  # a group (t1 OR t2 ...), usually on one attribute
        one = domain.attributes[r.int(0, len(domain) - 1)]
        one_domain = Domain((one,)) if coin(r, 5, 6) else domain
        inner = f"{_space(r)}{_kw(r, 'OR')}{_space(r)}".join(
            _term(r, one_domain) for _ in range(r.int(1, 3))
        )
        return f"({_space(r, 0)}{inner}{_space(r, 0)})"
    return _term(r, domain)


def _term(r: Draw, domain: Domain) -> str:
    if coin(r, 1, 20):
        attr_name = choice(r, ("zz", "A", "c_d", "ef"))  # unknown attributes
        return f"{_name(r, attr_name)} = 1"
    attr = domain.attributes[r.int(0, len(domain) - 1)]
    col = _name(r, attr)
    form = r.int(0, 7)
    if isinstance(attr, Binned) and form in (0, 1, 2):
        op, v = choice(r, aligned_bounds(attr))
        if coin(r, 1, 6):
            v += 1
        return f"{col}{_space(r, 0)}{op}{_space(r, 0)}{_sql(v)}"
    if form == 0:
        return f"{col}{_space(r, 0)}={_space(r, 0)}{_literal(r, attr)}"
    if form == 1:
        op = choice(r, ("<>", "!="))
        return f"{col}{_space(r, 0)}{op}{_space(r, 0)}{_literal(r, attr)}"
    if form == 2:
        op = choice(r, ("<", "<=", ">", ">="))
        return f"{col}{_space(r, 0)}{op}{_space(r, 0)}{_literal(r, attr, True)}"
    if form == 3:
        lo, hi = _literal(r, attr, True), _literal(r, attr, True)
        neg = _kw(r, "NOT") + _space(r) if coin(r, 1, 4) else ""
        return (
            f"{col}{_space(r)}{neg}{_kw(r, 'BETWEEN')}{_space(r)}{lo}{_space(r)}{_kw(r, 'AND')}"
            f"{_space(r)}{hi}"
        )
    if form in (4, 5):
        items = f"{_space(r, 0)},{_space(r, 0)}".join(
            _literal(r, attr) for _ in range(r.int(1, 3))
        )
        neg = _kw(r, "NOT") + _space(r) if coin(r, 1, 4) else ""
        return f"{col}{_space(r)}{neg}{_kw(r, 'IN')}{_space(r, 0)}({_space(r, 0)}{items})"
    neg = _kw(r, "NOT") + _space(r) if coin(r) else ""
    return f"{col}{_space(r)}{_kw(r, 'IS')}{_space(r)}{neg}{_kw(r, 'NULL')}"


def simple_clause(r: Draw, domain: Domain) -> str:
    terms = [simple_term(r, domain) for _ in range(r.int(1, 4))]
    out = terms[0]
    for t in terms[1:]:
        out += f"{_space(r)}{_kw(r, 'AND')}{_space(r)}{t}"
    return out


def _main(text: str, domain: Domain) -> Query | QueryError:
    try:
        return parse_query(text, domain)
    except QueryError as e:
        return e


def _check(fp: FastParser, text: str) -> bool:
    """The contract on one clause; returns whether the fast path answered."""
    fast = fp.try_parse(text)
    ref = _main(text, fp.domain)
    if isinstance(ref, QueryError):
        assert fast is None, (text, fast, str(ref))
        with pytest.raises(QueryError) as caught:
            fp.parse(text)
        assert str(caught.value) == str(ref)
        return False
    if fast is not None:
        assert fast == ref, (text, fast, ref)
    assert fp.parse(text) == ref
    return fast is not None


# -- the contract ------------------------------------------------------------------------------


@FAST
@given(st.data())
def test_fast_path_equals_parse_query_on_simple_clauses(data: st.DataObject) -> None:
    r = HypDraw(data)
    domain = gen_domain(r, (1, 4))
    fp = FastParser(domain)
    for _ in range(4):
        _check(fp, simple_clause(r, domain))


@FAST
@given(st.data())
def test_fast_path_declines_or_agrees_on_any_clause(data: st.DataObject) -> None:
    """OR, NOT, parentheses, literals on the left, bare booleans: declined, or the same query."""
    r = HypDraw(data)
    domain = gen_domain(r, (1, 4))
    fp = FastParser(domain)
    for _ in range(3):
        _check(fp, where_clause(r, domain))


#: Attribute names that are SQL keywords, functions, or not identifiers in awkward ways.
TRICKY_NAMES = (
    "from", "null", "true", "date", "interval", "current_user", "a.b", "x-y.z", "sel ect",
    'a"b', "it's", "AND", "not", "in", "é", "_x", "x1-2", "1x", "a--b", "a#b", "e-5", "a",
    "a-b", "b-c", "a-b-c", "x AND y", "a IS", "income>50K", "income", "select", "a-", "y z",
)  # fmt: skip


@FAST
@given(st.data())
def test_fast_path_with_awkward_attribute_names(data: st.DataObject) -> None:
    r = HypDraw(data)
    names: list[str] = []
    for _ in range(r.int(1, 4)):
        name = choice(r, TRICKY_NAMES)
        if name not in names:
            names.append(name)
    domain = Domain(tuple(gen_attribute(r, n) for n in names))
    fp = FastParser(domain)
    for _ in range(3):
        _check(fp, simple_clause(r, domain))
        _check(fp, where_clause(r, domain))


def test_quoted_name_with_a_single_quote() -> None:
    """quote_hyphenated reads the ' in "it's" as a string: the main parser then fails."""
    domain = Domain(
        (Categorical(name="it's", values=("x",)), Categorical(name="x1-2", values=("x",)))
    )
    text = "\"it's\" = 'x' AND x1-2 = 'x'"
    assert FastParser(domain).try_parse(text) is None
    _check(FastParser(domain), text)


@pytest.mark.parametrize("seed", range(3))
def test_fast_path_accepts_the_common_forms(seed: int) -> None:
    """Nearly every valid simple clause takes the fast path (bare 'e f' and the like do not)."""
    r = RngDraw(np.random.default_rng(seed))
    valid = accepted = 0
    for _ in range(60):
        domain = gen_domain(r, (1, 4))
        fp = FastParser(domain)
        for _ in range(25):
            text = simple_clause(r, domain)
            answered = _check(fp, text)
            if not isinstance(_main(text, domain), QueryError):
                valid += 1
                accepted += answered
    assert valid > 300
    assert accepted / valid >= 0.9, (accepted, valid)


@pytest.mark.parametrize(
    "text",
    [
        "age = 30",
        "age BETWEEN 20 AND 29 AND sex = 'Female'",
        "age between 20 and 29 and sex = 'Female'",
        "age\t>=\t18 AND age <= 65",
        "age>=18 AND  age<65",
        '"age" IN (1, 2,3) AND sex IS NULL',
        "sex IS NOT NULL AND hours >= 40",
        "age NOT BETWEEN 20 AND 30",
        "sex NOT IN ('Male')",
        "sex <> 'Male' AND age != 40",
        "hours < 20 AND hours >= 0",
        "hours = '[20, 40)'",
        "tag = 'a#b' AND tag IN ('c:d', 'x')",
        "age = 30 AND age = 31",
        "age > 200",
        "age = 30.5",
        "age >= -5",
        "age < 1e400",
        "age = 1.5e1 AND sex = 'Female'",
        "sex = 'Male' AND age = 30",
        "age = 30 AND sex = 'it''s'",
        "sex IN ('Male', 'Female') AND sex IS NULL",
        "(age = 30 OR age BETWEEN 40 AND 50 OR age >= 80) AND sex = 'Male'",
        "( sex = 'Male' or sex IS NULL )",
        "(tag = 'a#b OR x' OR tag = 'x')",
        "(age = 30)",
    ],
)
def test_examples_take_the_fast_path(text: str) -> None:
    """Valid ones are parsed fast; 'sex = it''s' is an error, so it is declined."""
    fp = FastParser(D)
    fast = fp.try_parse(text)
    ref = _main(text, D)
    if isinstance(ref, QueryError):
        assert fast is None
    else:
        assert fast == ref


D = Domain(
    (
        IntegerRange(name="age", lo=17, hi=90),
        Categorical(name="sex", values=("Female", "Male"), missing=True),
        Binned(name="hours", edges=(0, 20, 40, 60)),
        Categorical(name="tag", values=("a#b", "c:d", "x")),
        IntegerRange(name="education-num", lo=1, hi=16),
        Boolean(name="income>50K"),
        Categorical(name="e f", values=("x", "y")),
    )
)


@pytest.mark.parametrize(
    "text",
    [
        "age = 30 OR sex = 'Male'",
        "NOT age = 30",
        "(age = 30)",
        "30 = age",
        "age = (30)",
        "age = -(30)",
        "age = - 30",
        "age = +30",
        "age = .5",
        "age = 30.",
        "age = 1_000",
        "age == 30",
        "age = 30 -- comment",
        "age = 30 /* c */",
        "sex = N'Male'",
        "sex = 'Ma' 'le'",
        "sex = 'a\\'",
        "sex IN ()",
        "sex IN ('Male',)",
        "sex IN ('Male', NULL)",
        "sex = NULL",
        "income>50K",
        "NOT income>50K",
        "income>50K = TRUE",
        "e f = 'x'",
        "age = 30 AND e f = 'x'",
        "TRUE",
        "age = 30 AND FALSE",
        "age BETWEEN 20 AND",
        "age = 30 AND",
        "age = 30AND sex = 'Male'",
        "age.x = 1",
        "age-num = 1",
        "education-num-x = 1",
        "current_user = 1",
        "(age = 30 OR sex = 'Male')",
        "(age = 30 OR age = 31 AND age = 32)",
        "((age = 30) OR age = 31)",
        "(age = 30 OR NOT age = 31)",
        "(age = 30) OR (age = 31)",
        "(age = 30 OR age = 'x')",
    ],
)
def test_unusual_forms_are_declined_or_agree(text: str) -> None:
    fp = FastParser(D)
    fast = fp.try_parse(text)
    ref = _main(text, D)
    if fast is not None:
        assert not isinstance(ref, QueryError) and fast == ref, (text, fast, ref)
    else:
        assert text in FALLBACK_EXPECTED or isinstance(ref, QueryError), text


#: Valid clauses outside the fast grammar (they go to sqlglot and are parsed there).
FALLBACK_EXPECTED = {
    "NOT age = 30", "(age = 30)", "30 = age", "age = (30)", "age = -(30)", "age = - 30",
    "age = +30", "age = .5", "age = 30.", "age == 30", "age = 30 -- comment",
    "age = 30 /* c */", "sex = N'Male'", "sex IN ('Male', NULL)", "income>50K",
    "NOT income>50K", "income>50K = TRUE", "e f = 'x'", "age = 30 AND e f = 'x'", "TRUE",
    "age = 30 AND FALSE", "sex = 'Ma' 'le'", "age = 30AND sex = 'Male'", "sex IN ()",
    "sex IN ('Male',)", "(age = 30 OR age = 31 AND age = 32)", "(age = 30 OR NOT age = 31)",
    "(age = 30) OR (age = 31)", "age = 30 OR sex = 'Male'", "(age = 30 OR sex = 'Male')",
}  # fmt: skip


def test_deeply_nested_parentheses_are_declined() -> None:
    text = "(" * 400 + "age = 30" + ")" * 400
    assert FastParser(D).try_parse(text) is None
    assert FastParser(D).try_parse("((age = 30) OR age = 31)") == parse_query(
        "age BETWEEN 30 AND 31", D
    )


def test_deep_nesting_is_declined_whatever_the_recursion_limit() -> None:
    """Declining must not depend on the stack: another library may have raised the limit."""
    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20_000))
    try:
        assert FastParser(D).try_parse("(" * 400 + "age = 30" + ")" * 400) is None
    finally:
        sys.setrecursionlimit(old)


def test_hyphenated_and_quoted_names() -> None:
    fp = FastParser(D)
    for text in (
        "education-num >= 5",
        '"education-num" >= 5',
        '"income>50K" = TRUE AND education-num BETWEEN 3 AND 9',
        "\"e f\" IN ('x') AND age < 40",
    ):
        q = fp.try_parse(text)
        assert q is not None, text
        assert q == parse_query(text, D)


# -- errors are the main parser's --------------------------------------------------------------

BAD_LINES = [
    "agee = 30",  # unknown attribute
    "Age = 30",  # unknown attribute (case)
    "sex = 'Mal'",  # unknown categorical value
    "sex IN ('Male', 'Femal')",
    "age = 1e300",  # too large to name an integer
    "age < 'x'",  # not a number
    "hours < 30",  # splits a bin: not on an edge
    "hours BETWEEN 0 AND 30",
    "hours = 20",  # '=' on a binned attribute needs a label
    "sex = \"Male\"",  # text in double quotes
    "sex < 'Male'",  # unordered categorical
    '"income>50K" = \'maybe\'',  # not a boolean
    "age = 30 AND sex = 'Mal'",
    "education-num = 'x'",
]


@pytest.mark.parametrize("text", BAD_LINES)
def test_bad_simple_clauses_are_declined_with_the_main_error(text: str) -> None:
    fp = FastParser(D)
    assert fp.try_parse(text) is None
    with pytest.raises(QueryError) as main:
        parse_query(text, D)
    with pytest.raises(QueryError) as fast:
        fp.parse(text)
    assert str(fast.value) == str(main.value)


def test_workload_file_errors_identical_with_and_without_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = ["age = 30", *BAD_LINES, "ok: sex = 'Male' # fine", '"q 2": hours >= 20']
    p = tmp_path / "w.sql"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(WorkloadError) as fast:
        Workload.load(p, D)
    monkeypatch.setattr(fastparse, "ENABLED", False)
    with pytest.raises(WorkloadError) as slow:
        Workload.load(p, D)
    assert str(fast.value) == str(slow.value)
    assert len(fast.value.errors) == len(BAD_LINES)
    for err, (lineno, text) in zip(fast.value.errors, enumerate(BAD_LINES, start=2)):
        with pytest.raises(QueryError) as main:
            parse_query(text, D)
        assert str(err) == str(main.value.located(f"{p}:{lineno}"))


# -- loading files -----------------------------------------------------------------------------


@QUICK
@given(st.data())
def test_load_text_same_with_and_without_fast_path(data: st.DataObject) -> None:
    r = HypDraw(data)
    domain = gen_domain(r, (1, 4))
    lines = []
    for i in range(r.int(1, 12)):
        clause = simple_clause(r, domain) if coin(r, 3, 4) else where_clause(r, domain)
        if isinstance(_main(clause, domain), QueryError):
            continue
        prefix = choice(r, ("", f"q{i}: ", f'"query {i}": '))
        comment = "  # note" if coin(r, 1, 4) else ""
        lines.append(prefix + clause + comment)
    if not lines:
        return
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "w.sql"
        p.write_text("\n".join(lines) + "\n")
        fast = Workload.load(p, domain)
        fastparse.ENABLED = False
        try:
            slow = Workload.load(p, domain)
        finally:
            fastparse.ENABLED = True
    assert fast.queries == slow.queries
    assert fast.names == slow.names and fast.sources == slow.sources


def test_identical_predicates_are_shared(tmp_path: Path) -> None:
    p = tmp_path / "w.sql"
    p.write_text(
        "age = 30 AND sex = 'Male'\nage = 30 AND sex = 'Female'\n"
        "sex = 'Male' AND age BETWEEN 30 AND 30\nage = 30 OR age = 31\n(age = 30)\n"
    )
    w = Workload.load(p, D)
    age30 = w.queries[0].predicates[0]
    assert w.queries[1].predicates[0] is age30
    assert w.queries[2].predicates[0] is age30  # same coverage, written differently
    assert w.queries[2].predicates[1] is w.queries[0].predicates[1]
    assert w.queries[4].predicates[0] is age30  # the sqlglot path is interned too


# the random builder names queries by their SQL: a repeated draw is renamed with a QueryWarning,
# which is not what this test checks
@pytest.mark.filterwarnings("ignore::tessera.errors.QueryWarning")
def test_adult_random_workload_round_trips_fast(adult_domain: Domain) -> None:
    w = random_workload(adult_domain, 600, attributes_per_query=(1, 4), seed=3)
    fp = FastParser(adult_domain)
    fast = 0
    for q in w.queries:
        sql = q.to_sql(adult_domain)
        got = fp.try_parse(sql)
        if got is not None:
            fast += 1
            assert got == parse_query(sql, adult_domain)
    assert fast == len(w)  # to_sql writes (x = 1 OR x BETWEEN 3 AND 4) groups: fast too


def test_adult_marginals_text_loads_the_same(tmp_path: Path, adult_domain_json: Path) -> None:
    domain = Domain.load(adult_domain_json)
    w = marginals(domain, 2, ["age", "education-num", "income>50K", "sex", "race"])
    p = tmp_path / "m2.sql"
    w.save(p)
    loaded = Workload.load(p, domain)
    assert loaded.queries == w.queries
    sample = p.read_text().splitlines()[::37]
    for line in sample:
        assert FastParser(domain).try_parse(line) == parse_query(line, domain)


# -- workload statistics -----------------------------------------------------------------------


def reference_stats(w: Workload) -> WorkloadStats:
    """The per-query loop WorkloadStats.of replaced (hashing Query objects)."""
    used: Counter[str] = Counter()
    sizes: Counter[int] = Counter()
    seen: dict[Query, list[int]] = {}
    for i, q in enumerate(w.queries):
        used.update(q.scope)
        sizes[len(q.scope)] += 1
        if not q.is_contradiction():
            seen.setdefault(q, []).append(i)
    return WorkloadStats(
        n_queries=len(w),
        attributes_used=dict(sorted(used.items(), key=lambda kv: w.domain.index(kv[0]))),
        scope_sizes=dict(sorted(sizes.items())),
        contradictions=tuple(i for i, q in enumerate(w.queries) if q.is_contradiction()),
        tautologies=tuple(i for i, q in enumerate(w.queries) if not q.predicates),
        duplicates=tuple(tuple(ix) for ix in seen.values() if len(ix) > 1),
        n_range_queries=sum(q.is_range(w.domain) for q in w.queries),
        total_weight=float(sum(w.weights)),
    )


@FAST
@given(st.data())
def test_stats_equal_the_reference_loop(data: st.DataObject) -> None:
    r = HypDraw(data)
    domain = gen_domain(r, (1, 4))
    queries: list[Query] = []
    for _ in range(r.int(0, 25)):
        k = r.int(0, 9)
        if k == 0 and queries:  # a duplicate: the same object, or an equal fresh one
            q = choice(r, queries)
            queries.append(q if coin(r) else Query(tuple(Predicate(p.attribute, p.coverage)
                                                          for p in q.predicates)))
        elif k == 1:
            queries.append(Query.tautology())
        else:
            queries.append(gen_set_query(r, domain).to_query(domain))
    # numbered: the duplicates are the point here, and named by their SQL they would be
    # renamed with a QueryWarning (names play no part in the statistics)
    w = Workload.of(domain, queries, numbered(queries),
                    weights=[r.int(0, 3) / 2 for _ in queries])
    assert WorkloadStats.of(w) == reference_stats(w)


def test_stats_wide_queries_and_many_distinct_predicates() -> None:
    """Rows too wide for one integer key take the lexicographic sort."""
    domain = Domain(tuple(IntegerRange(name=f"x{i}", lo=0, hi=999) for i in range(12)))
    rng = np.random.default_rng(0)
    queries = []
    for _ in range(400):
        cov = {f"x{i}": IntervalSet.range(int(a), int(a) + 3)
               for i, a in enumerate(rng.integers(0, 3, size=12))}
        queries.append(Query.conjunction(domain, cov))
    queries += queries[:40] + [Query.conjunction(domain, {"x0": IntervalSet.empty()})] * 2
    w = Workload.of(domain, queries, numbered(queries))
    assert WorkloadStats.of(w) == reference_stats(w)
    assert WorkloadStats.of(w).duplicates
