"""Workload files, stats and builders (docs/theory.md §2, §8)."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tessera.errors import QueryError, QueryWarning, ResourceError, TesseraError
from tessera.schema.domain import Binned, Categorical, Domain, IntegerRange
from tessera.schema.intervals import IntervalSet
from tessera.workload.builders import all_ranges, identity, marginals, prefixes, random_workload
from tessera.workload.files import WorkloadError
from tessera.workload.parse import parse_query
from tessera.workload.query import Query
from tessera.workload.stats import WorkloadStats
from tessera.workload.workload import Workload
from tests.oracles.foundation import QUICK, HypDraw, gen_domain, points

D = Domain(
    (
        IntegerRange(name="age", lo=17, hi=90),
        Categorical(name="sex", values=("Female", "Male"), missing=True),
        Binned(name="hours", edges=(0, 20, 40, 60)),
        Categorical(name="tag", values=("a#b", "c:d", "x")),
    )
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# -- text files --------------------------------------------------------------------------------


def test_text_file_comments_names_blank_lines(tmp_path: Path) -> None:
    p = write(
        tmp_path,
        "w.sql",
        "\n".join(
            [
                "# a workload",
                "",
                "young: age < 30   # trailing comment",
                "   ",
                "age BETWEEN 30 AND 39 AND sex = 'Female'",
                "hash_in_literal: tag = 'a#b'  # the first # is inside quotes",
                "colon_in_literal: tag = 'c:d'",
                "q.2-b: sex IS NULL",
                "\t# indented comment",
                "hours >= 40",
                "",
            ]
        ),
    )
    w = Workload.load(p, D)
    assert len(w) == 6
    assert w.names == (
        "young",
        "age BETWEEN 30 AND 39 AND sex = 'Female'",
        "hash_in_literal",
        "colon_in_literal",
        "q.2-b",
        "hours >= 40",
    )
    assert w.weights == (1.0,) * 6
    assert w[0] == parse_query("age < 30", D)
    assert w[2].predicate("tag") == IntervalSet.points([0])
    assert w[3].predicate("tag") == IntervalSet.points([1])
    assert w[4].predicate("sex") == IntervalSet.points([2])
    assert w[5].predicate("hours") == IntervalSet.points([2])
    assert list(w) == list(w.queries)


def test_malformed_text_file_reports_every_bad_line(tmp_path: Path) -> None:
    lines = [
        "# comment",
        "age > 30 OR sexx = 'Male'",  # 2: unknown attribute inside a Boolean clause
        "age >= 18",  # 3: fine
        "sex = 'Femal'",  # 4: unknown literal
        "",
        "hours <= 30",  # 6: splits a bin
        "named: agee > 3",  # 7: unknown attribute
        "age >=",  # 8: syntax
        "sex < 'Male'",  # 9: unordered
    ]
    p = write(tmp_path, "bad.sql", "\n".join(lines) + "\n")
    with pytest.raises(WorkloadError) as e:
        Workload.load(p, D)
    err = e.value
    assert isinstance(err, TesseraError)
    out = str(err).splitlines()
    assert [line.split(": ", 1)[0] for line in out] == [f"{p}:{n}" for n in (2, 4, 6, 7, 8, 9)]
    assert len(err.errors) == 6
    assert "did you mean 'Female'?" in out[1]
    assert "did you mean 'age'?" in out[3]
    assert "splits bin" in out[2]
    for e_ in err.errors:
        assert e_.hint, str(e_)  # every error comes with a hint
        assert e_.where and e_.where.startswith(f"{p}:")


def test_empty_and_unreadable_workloads(tmp_path: Path) -> None:
    p = write(tmp_path, "empty.sql", "# nothing\n\n")
    with pytest.raises(QueryError) as e:
        Workload.load(p, D)
    assert str(p) in str(e.value) and "no queries" in str(e.value)
    with pytest.raises(QueryError) as e:
        Workload.load(tmp_path / "missing.sql", D)
    assert "missing.sql" in str(e.value)


# -- YAML / JSON -------------------------------------------------------------------------------


def test_yaml_and_json_with_weights(tmp_path: Path) -> None:
    doc = {
        "queries": [
            {"name": "q1", "where": "age >= 30", "weight": 2.5},
            {"where": "sex = 'Male'"},
            "hours < 20",
            {"name": "zero", "where": "tag = 'x'", "weight": 0},
        ]
    }
    for suffix, text in (
        (".yaml", yaml.safe_dump(doc)),
        (".json", json.dumps(doc)),
        (".yml", yaml.safe_dump(doc["queries"])),
    ):
        w = Workload.load(write(tmp_path, f"w{suffix}", text), D)
        assert w.names == ("q1", "sex = 'Male'", "hours < 20", "zero")
        assert w.weights == (2.5, 1.0, 1.0, 0.0)
        assert w[1] == parse_query("sex = 'Male'", D)
        assert WorkloadStats.of(w).total_weight == 4.5


def test_malformed_yaml_reports_every_bad_entry(tmp_path: Path) -> None:
    doc = {
        "queries": [
            {"name": "ok", "where": "age > 20"},
            {"name": "neg", "where": "age > 20", "weight": -1},
            {"name": "nan", "where": "age > 20", "weight": "lots"},
            {"name": "nowhere"},
            {"where": "age > 20", "wieght": 3},
            {"where": "sex = 'Mal'"},
            42,
        ]
    }
    p = write(tmp_path, "bad.yaml", yaml.safe_dump(doc))
    with pytest.raises(WorkloadError) as e:
        Workload.load(p, D)
    out = str(e.value).splitlines()
    assert [line.split(": ", 1)[0] for line in out] == [
        f"{p}:queries[{i}]" for i in (1, 2, 3, 4, 5, 6)
    ]
    assert "did you mean 'Male'?" in out[4]
    assert "'wieght'" in out[3]


@pytest.mark.parametrize(
    ("suffix", "text"),
    [
        (".yaml", "queries: [age > 3"),
        (".json", '{"queries": [}'),
        (".yaml", "queries: []"),
        (".json", '{"queries": "age > 3"}'),
    ],
)
def test_structurally_bad_files(tmp_path: Path, suffix: str, text: str) -> None:
    p = write(tmp_path, f"w{suffix}", text)
    with pytest.raises(QueryError) as e:
        Workload.load(p, D)
    assert str(p) in str(e.value)


@QUICK
@given(st.data(), st.sampled_from([".sql", ".yaml", ".json"]))
def test_save_load_round_trip(data: st.DataObject, suffix: str) -> None:
    import tempfile

    r = HypDraw(data)
    domain = gen_domain(r, (1, 4))
    w = random_workload(
        domain, r.int(1, 15), attributes_per_query=(1, len(domain)), seed=r.int(0, 10**6)
    )
    w = Workload.of(
        domain,
        w.queries,
        [f"q{i}" if i % 2 else n for i, n in enumerate(w.names)],
        [float(r.int(0, 4)) for _ in w.queries],
    )
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / f"w{suffix}"
        w.save(p)
        back = Workload.load(p, domain)
    assert back.queries == w.queries
    assert back.names == w.names
    if suffix != ".sql":
        assert back.weights == w.weights


def test_from_sql_errors_name_the_clause() -> None:
    with pytest.raises(WorkloadError) as e:
        Workload.from_sql(["age > 3", "sex = 'x'", "foo = 1"], D)
    lines = str(e.value).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("query 2 (\"sex = 'x'\")")
    assert lines[1].startswith("query 3 ('foo = 1')")


def test_workload_validation() -> None:
    q = parse_query("age > 3", D)
    with pytest.raises(QueryError, match="weight"):
        Workload(D, (q,), ("a",), (-1.0,))
    with pytest.raises(QueryError, match="weight"):
        Workload(D, (q,), ("a",), (math.nan,))
    with pytest.raises(ValueError):
        Workload(D, (q, q), ("a",), (1.0,))


# -- stats -------------------------------------------------------------------------------------


def test_stats() -> None:
    w = Workload.from_sql(
        [
            "age > 30",  # 0
            "30 < age",  # 1 duplicate of 0
            "age > 100",  # 2 contradiction (age ≤ 90)
            "age >= 17",  # 3 tautology
            "sex = 'Male' AND age < 40",  # 4
            "age < 40 AND sex = 'Male'",  # 5 duplicate of 4
            "sex IN ('Male', 'Female')",  # 6 not a tautology: NULL is excluded
            "tag IN ('a#b', 'x')",  # 7 a set, not a range
            "FALSE",  # 8 contradiction
            "age > 30 AND age < 20",  # 9 contradiction, not a duplicate of 2
        ],
        D,
    )
    s = WorkloadStats.of(w)
    assert s.n_queries == 10
    assert s.duplicates == ((0, 1), (4, 5))
    assert s.contradictions == (2, 8, 9)
    assert s.tautologies == (3,)
    # FALSE is stored as a contradiction on the first attribute (age)
    assert s.attributes_used == {"age": 7, "sex": 3, "tag": 1}
    assert list(s.attributes_used) == ["age", "sex", "tag"]  # domain order
    assert s.scope_sizes == {0: 1, 1: 7, 2: 2}
    # sex and tag are unordered: queries 4, 5, 6, 7 are not range queries
    assert s.n_range_queries == 6
    assert s.total_weight == 10.0
    assert w.scopes()[("age", "sex")] == [4, 5]


# -- builders ----------------------------------------------------------------------------------


@QUICK
@given(st.data())
def test_marginals_count_and_partition(data: st.DataObject) -> None:
    """k-way marginals: Σ_{|S|=k} ∏_{a∈S} |A_a| queries; every point in exactly C(m,k) of them."""
    r = HypDraw(data)
    domain = gen_domain(r, (1, 4))
    m = len(domain)
    k = r.int(1, m)
    w = marginals(domain, k)
    want = sum(
        math.prod(domain[n].size for n in s) for s in itertools.combinations(domain.names, k)
    )
    assert len(w) == want
    pts = np.asarray(list(points(domain)), dtype=np.int64)
    hits = np.sum([q.evaluate(domain, pts) for q in w.queries], axis=0)
    assert (hits == math.comb(m, k)).all()
    ident = identity(domain)
    assert len(ident) == domain.size
    assert (np.sum([q.evaluate(domain, pts) for q in ident.queries], axis=0) == 1).all()


def test_marginals_on_named_attributes_and_errors() -> None:
    w = marginals(D, 2, ["sex", "hours"])
    assert len(w) == 3 * 3
    assert {q.scope for q in w.queries} == {("sex", "hours")}
    with pytest.raises(QueryError):
        marginals(D, 0)
    with pytest.raises(QueryError):
        marginals(D, 5)
    with pytest.raises(QueryError) as e:
        marginals(D, 1, ["sexx"])
    assert "did you mean 'sex'?" in str(e.value)


def test_prefixes_and_all_ranges() -> None:
    n = D["age"].n_values
    p = prefixes(D, "age")
    assert len(p) == n
    assert [q.predicate("age") for q in p.queries[:-1]] == [
        IntervalSet.range(0, c + 1) for c in range(n - 1)
    ]
    assert p.queries[-1] == Query.tautology()  # age <= 90 is every row (no missing code)
    r = all_ranges(D, "hours")
    k = D["hours"].n_values
    assert len(r) == k * (k + 1) // 2
    covs = {q.coverage_of(D["hours"]) for q in r.queries}
    assert covs == {IntervalSet.range(a, b + 1) for a in range(k) for b in range(a, k)}
    assert all(q.is_range(D) for q in r.queries)
    assert len(all_ranges(D, "age")) == n * (n + 1) // 2
    with pytest.raises(QueryError, match="no order"):
        prefixes(D, "sex")
    with pytest.raises(QueryError, match="no order"):
        all_ranges(D, "tag")


def test_prefixes_with_missing_exclude_null() -> None:
    d = Domain((IntegerRange(name="x", lo=0, hi=2, missing=True),))
    w = prefixes(d, "x")
    assert [q.predicate("x") for q in w.queries] == [IntervalSet.range(0, c) for c in (1, 2, 3)]


def test_random_workload_reproducible_and_well_formed() -> None:
    a = random_workload(D, 300, seed=7)
    b = random_workload(D, 300, seed=7)
    c = random_workload(D, 300, seed=8)
    assert a.queries == b.queries and a.names == b.names
    assert a.queries != c.queries
    for kind in ("range", "set", "mixed"):
        w = random_workload(D, 200, kind=kind, attributes_per_query=(2, 3), seed=1)  # type: ignore[arg-type]
        for q in w.queries:
            assert 2 <= len(q.scope) <= 3  # widths ≤ ½ never give a tautology here
            assert not q.is_contradiction()
            for n in q.scope:
                cov = q.predicate(n)
                assert cov and cov.max() < D[n].n_values  # never the missing code
                if kind == "range" and D[n].ordered:
                    assert cov.is_interval()
        if kind == "range":
            assert all(
                q.is_range(D) for q in w.queries if "tag" not in q.scope and "sex" not in q.scope
            )
    w = random_workload(
        D, 50, attributes=["age"], attributes_per_query=(1, 1), width=(0.1, 0.1), seed=3
    )
    assert all(q.scope == ("age",) and len(q.predicate("age")) == 7 for q in w.queries)
    with pytest.raises(QueryError):
        random_workload(D, 5, attributes_per_query=(0, 2))
    with pytest.raises(QueryError):
        random_workload(D, 5, attributes_per_query=(2, 9))


def test_random_workload_defaults_work_on_small_domains() -> None:
    """The default attributes_per_query=(1, 3) must not make 1- or 2-attribute domains fail."""
    d2 = Domain((IntegerRange(name="x", lo=0, hi=9), IntegerRange(name="y", lo=0, hi=9)))
    assert len(random_workload(d2, 10, seed=0)) == 10
    assert len(random_workload(D, 10, attributes=["age"], seed=0)) == 10


def test_resource_guard() -> None:
    big = Domain(tuple(IntegerRange(name=f"x{i}", lo=0, hi=999) for i in range(3)))
    with pytest.raises(ResourceError) as e:
        marginals(big, 3)  # 10^9 queries: refused before building anything
    assert "1,000,000,000" in str(e.value) and "max_queries" in str(e.value)
    with pytest.raises(ResourceError):
        marginals(D, 1, max_queries=10)
    assert len(marginals(D, 1, max_queries=len(marginals(D, 1)))) == 74 + 3 + 3 + 3
    with pytest.raises(ResourceError):
        all_ranges(big, "x0", max_queries=1000)
    with pytest.raises(ResourceError):
        prefixes(big, "x0", max_queries=999)
    with pytest.raises(ResourceError):
        random_workload(big, 11, max_queries=10)
    with pytest.raises(ResourceError):
        identity(big)


ODD_NAMES = ["young adults", "x: y", "q#1", "it's", "ok_name", "a-b.c"]


def _odd_workload() -> Workload:
    qs = [
        parse_query(c, D)
        for c in (
            "age > 30",
            "age < 20",
            "sex = 'Male'",
            "hours >= 40",
            "tag = 'c:d'",
            "sex IS NULL",
        )
    ]
    return Workload.of(D, qs, ODD_NAMES)


def test_text_save_of_any_names_loads_back_the_same_queries(tmp_path: Path) -> None:
    """Whatever the names, a saved text workload must load (and mean the same queries)."""
    w = _odd_workload()
    w.save(tmp_path / "w.sql")
    assert Workload.load(tmp_path / "w.sql", D).queries == w.queries


def test_text_save_keeps_names(tmp_path: Path) -> None:
    """Names that the `name:` prefix cannot carry should not vanish silently."""
    w = _odd_workload()
    w.save(tmp_path / "w.sql")
    assert Workload.load(tmp_path / "w.sql", D).names == w.names


def test_hash_inside_quoted_identifier_is_not_a_comment(tmp_path: Path) -> None:
    d = Domain((IntegerRange(name="a#b", lo=0, hi=9), IntegerRange(name="age", lo=0, hi=99)))
    p = write(tmp_path, "w.sql", 'q1: "a#b" > 3  # comment\nq2: age > 3 AND "a#b" = 2\n')
    w = Workload.load(p, d)
    assert w.names == ("q1", "q2")
    assert w[0].predicate("a#b") == IntervalSet.range(4, 10)


@pytest.mark.filterwarnings("error::tessera.errors.QueryWarning")
def test_builders_rename_their_own_repeated_names_silently() -> None:
    """A random draw repeated on a small domain (and cells of a one-value attribute, which
    print alike) get unique names without a warning: the builder chose the names, so the user
    has nothing to correct. A user's own repeated name still warns."""
    small = Domain((Categorical(name="a", values=("x", "y")), IntegerRange(name="b", lo=0, hi=2)))
    w = random_workload(small, 40, seed=1)
    assert len(set(w.names)) == len(w.names) == 40
    assert "a = 'y' (2)" in w.names  # the repeat keeps its SQL, numbered
    assert [q.to_sql(small) for q in w.queries] == [n.split(" (")[0] for n in w.names]
    one = Domain((IntegerRange(name="u", lo=0, hi=0), IntegerRange(name="v", lo=0, hi=0)))
    m = marginals(one, 1)
    assert len(set(m.names)) == len(m.names)
    with pytest.warns(QueryWarning, match="already used"):
        Workload.of(small, list(w.queries[:2]), names=["same", "same"])
