"""Counts of structured families (marginals, cubes, hierarchies, grids) equal two oracles per
cell: a pandas ``groupby`` of the generated codes mapped to groups, and DuckDB evaluating each
expanded cell's SQL WHERE clause on the raw values; the long and wide writers round-trip; the
compact workloads ``workload build`` writes load back to the same families; ``tessera count``
takes them."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.data.counts import NOT_PRIVATE, PRIVACY_KEY, CountResult, count, count_encoded
from tessera.data.source import encode
from tessera.schema.domain import Categorical, Domain, IntegerRange
from tessera.schema.intervals import IntervalSet
from tessera.workload.builders import build, build_structured, marginal_families, marginals
from tessera.workload.families import Partition, cube, hierarchy, k_way_marginals
from tessera.workload.stats import WorkloadStats
from tessera.workload.workload import Workload
from tests.oracles.foundation import (
    SLOWEX,
    Draw,
    HypDraw,
    RngDraw,
    brute_count,
    coin,
    gen_domain,
    gen_set_query,
    gen_table,
    numbered,
)

NON_BINNED = ("integer", "categorical", "ordered", "boolean")


# -- random families ---------------------------------------------------------------------------


def _some(r: Draw, names: tuple[str, ...], lo: int, hi: int) -> list[str]:
    k = r.int(lo, min(hi, len(names)))
    order = list(names)
    for i in range(len(order) - 1, 0, -1):  # a Fisher-Yates shuffle driven by the Draw
        j = r.int(0, i)
        order[i], order[j] = order[j], order[i]
    return order[:k]


def _random_groups(r: Draw, size: int) -> list[IntervalSet]:
    """Disjoint groups that need not cover (a code may be in none); some may be empty."""
    n_groups = r.int(1, 3)
    owner = [r.int(-1, n_groups - 1) for _ in range(size)]
    return [IntervalSet.points([c for c in range(size) if owner[c] == j]) for j in range(n_groups)]


def gen_families(r: Draw, domain: Domain) -> list[Partition]:
    names = domain.names
    out: list[Partition] = []
    for _ in range(r.int(1, 4)):
        kind = r.int(0, 3)
        weight = float(r.int(1, 3))
        if kind == 0:  # a marginal, maybe the empty one (the total)
            out.append(Partition.marginal(domain, _some(r, names, 0, 3), weight))
        elif kind == 1:  # a cube, with the empty total when min_order is 0
            attrs = _some(r, names, 1, 3)
            out.extend(cube(domain, attrs, weight, r.int(0, len(attrs))))
        elif kind == 2:  # hierarchies over one or two attributes
            depth = None if coin(r) else r.int(1, 3)
            out.extend(hierarchy(domain, _some(r, names, 1, 2), r.int(2, 3), depth, weight))
        else:  # a grid whose groups need not cover the codes
            groups = {a: None if coin(r, 1, 3) else _random_groups(r, domain[a].size)
                      for a in _some(r, names, 1, 3)}
            out.append(Partition.grid(domain, groups, weight))
    return out


# -- oracles -----------------------------------------------------------------------------------


def group_of_code(domain: Domain, p: Partition, i: int) -> list[int]:
    """Oracle: the group of every code of axis i, read off the groups' spans (−1: none)."""
    size = domain[p.attributes[i]].size
    if p.groups[i] is None:
        return list(range(size))
    owner = [-1] * size
    for j, g in enumerate(p.groups[i]):
        for lo, hi in g.spans:
            for c in range(lo, hi):
                owner[c] = j
    return owner


def pandas_counts(domain: Domain, p: Partition, codes: np.ndarray) -> np.ndarray:
    """Oracle: the generated code matrix mapped to groups, rows in no group dropped, then
    a pandas ``groupby`` per cell."""
    shape = p.shape_in(domain)
    want = np.zeros(shape, dtype=np.int64)
    if not p.attributes:
        want[()] = len(codes)
        return want
    frame = pd.DataFrame({
        a: [group_of_code(domain, p, i)[c] for c in codes[:, domain.index(a)].tolist()]
        for i, a in enumerate(p.attributes)
    })
    frame = frame[(frame >= 0).all(axis=1)]
    for cell, n in frame.groupby(list(p.attributes)).size().items():
        want[cell if isinstance(cell, tuple) else (cell,)] = n
    return want


def duckdb_counts(domain: Domain, p: Partition, con: duckdb.DuckDBPyConnection) -> np.ndarray:
    """Oracle: every cell expanded to its SQL WHERE clause, counted by DuckDB on the raw
    values (one ``count(*) FILTER`` per cell)."""
    clauses = [q.to_sql(domain) for q in p.cell_queries(domain)]
    select = ", ".join(f"count(*) FILTER (WHERE {c})" for c in clauses)
    row = con.sql(f"SELECT {select} FROM t").fetchall()[0]
    return np.array(row, dtype=np.int64).reshape(p.shape_in(domain))


# -- counts equal the oracles ------------------------------------------------------------------


def _check(r: Draw, sql_oracle: bool) -> None:
    domain = gen_domain(r, (1, 4), kinds=NON_BINNED if sql_oracle else None)
    frame, codes = gen_table(r, domain, r.int(0, 120))
    families = gen_families(r, domain)
    sqs = [gen_set_query(r, domain) for _ in range(r.int(0, 4))]
    w = Workload.of(domain, [s.to_query(domain) for s in sqs], numbered(sqs),
                    partitions=families)
    table = encode(frame, domain)
    con = duckdb.connect()
    con.register("t", frame)
    for method in ("numpy", "duckdb"):
        answers = count_encoded(table, w, method=method)  # type: ignore[arg-type]
        assert answers.shape == (w.n_queries,)
        result = CountResult(w, answers, table.n_rows, 0, ())
        assert result.query_answers.tolist() == [brute_count(s, codes) for s in sqs]
        for p, got in zip(families, result.family_answers):
            assert got.shape == p.shape_in(domain)
            assert got.tolist() == pandas_counts(domain, p, codes).tolist(), (method, p)
            if sql_oracle and method == "numpy":
                assert got.tolist() == duckdb_counts(domain, p, con).tolist(), p
    # the same queries expanded to predicate queries count the same (today's path)
    assert count(frame, w.expanded()).answers.tolist() == answers.tolist()


@SLOWEX
@given(st.data())
def test_family_counts_match_pandas_and_duckdb(data: st.DataObject) -> None:
    _check(HypDraw(data), sql_oracle=True)


@pytest.mark.parametrize("seed", range(3))
def test_family_counts_seeded(seed: int) -> None:
    r = RngDraw(np.random.default_rng(700 + seed))
    for i in range(8):
        _check(r, sql_oracle=i % 2 == 0)  # binned attributes in every other domain


def test_shared_scopes_and_large_code_products() -> None:
    """A cube whose top marginal is small serves its faces; hierarchy levels over 300 × 300
    codes share one compressed marginal (np.unique: the code product exceeds a dense grid)."""
    d = Domain((IntegerRange(name="x", lo=0, hi=299), IntegerRange(name="y", lo=0, hi=299),
                Categorical(name="c", values=("a", "b"), missing=True)))
    rng = np.random.default_rng(5)
    codes = np.column_stack([rng.integers(0, 300, 400), rng.integers(0, 300, 400),
                             rng.integers(0, 3, 400)])
    frame = pd.DataFrame({"x": codes[:, 0], "y": codes[:, 1],
                          "c": pd.array([("a", "b", None)[c] for c in codes[:, 2]],
                                        dtype="string")})
    families = [*cube(d, ["c"]), *hierarchy(d, ["x", "y"], 4, 3),
                *k_way_marginals(d, 2, ["x", "c"]), *cube(d, ["x", "c"], min_order=1)]
    w = Workload.of_families(d, families)
    for method in ("numpy", "duckdb"):
        result = count(frame, w, method=method)  # type: ignore[arg-type]
        for p, got in zip(families, result.family_answers):
            assert got.tolist() == pandas_counts(d, p, codes).tolist(), (method, p.name)
    assert count(frame.iloc[:0], w).answers.tolist() == [0] * w.n_queries


def test_one_aggregation_per_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 9 levels of a hierarchy over (x, y) are one GROUP BY; a small cube's top marginal
    serves its faces (the total included): two GROUP BYs in all."""
    d = Domain((IntegerRange(name="x", lo=0, hi=29), IntegerRange(name="y", lo=0, hi=29),
                Categorical(name="c", values=("a", "b", "c")),
                Categorical(name="b", values=("u", "v"))))
    rng = np.random.default_rng(8)
    codes = np.column_stack([rng.integers(0, n, 300) for n in (30, 30, 3, 2)])
    frame = pd.DataFrame({"x": codes[:, 0], "y": codes[:, 1],
                          "c": np.array(["a", "b", "c"])[codes[:, 2]],
                          "b": np.array(["u", "v"])[codes[:, 3]]})
    families = [*hierarchy(d, ["x", "y"], 3, 3), *cube(d, ["c", "b"])]
    table = encode(frame, d)
    calls: list[tuple[str, ...]] = []
    group_by = type(table).group_by
    monkeypatch.setattr(type(table), "group_by",
                        lambda self, names, t="coded": calls.append(tuple(names))
                        or group_by(self, names, t))
    answers = count_encoded(table, Workload.of_families(d, families), method="duckdb")
    assert sorted(calls) == [("c", "b"), ("x", "y")]
    result = CountResult(Workload.of_families(d, families), answers, 300, 0, ())
    for p, got in zip(families, result.family_answers):
        assert got.tolist() == pandas_counts(d, p, codes).tolist(), p.name


def test_progress_counts_scopes_then_families() -> None:
    d = Domain((IntegerRange(name="x", lo=0, hi=3), IntegerRange(name="y", lo=0, hi=2)))
    frame = pd.DataFrame({"x": [0, 1, 3, 3], "y": [2, 2, 0, 1]})
    w = Workload.of(d, list(Workload.from_sql(["x < 2", "y = 2"], d)),
                    partitions=k_way_marginals(d, 1))
    seen: list[tuple[int, int]] = []
    result = count(frame, w, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert result.answers.tolist() == [2, 2, 1, 1, 0, 2, 1, 1, 2]


# -- frames and writers ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mixed() -> CountResult:
    """Predicate queries and families of every kind over a small domain with NULLs."""
    d = Domain((IntegerRange(name="age", lo=0, hi=5, missing=True),
                Categorical(name="sex", values=("F", "M")),
                Categorical(name="answer", values=("yes", "no, never", 'say "x"'))))
    rng = np.random.default_rng(11)
    frame = pd.DataFrame({
        "age": pd.array([None if v == 6 else v for v in rng.integers(0, 7, 60).tolist()],
                        dtype="Int64"),
        "sex": rng.choice(["F", "M"], 60),
        "answer": rng.choice(["yes", "no, never", 'say "x"'], 60),
    })
    families = [*k_way_marginals(d, 2), *cube(d, ["sex"]), *hierarchy(d, ["age"], 2),
                Partition.grid(d, {"age": [IntervalSet.range(0, 2), IntervalSet.points([4])],
                                   "sex": None}, name="grid")]
    w = Workload.of(d, list(Workload.from_sql(["age < 3", "sex = 'F' AND age IS NULL"], d)),
                    names=["young", "f, unknown age"], partitions=families)
    return count(frame, w)


def test_long_frame_lists_every_query(mixed: CountResult) -> None:
    w, d = mixed.workload, mixed.workload.domain
    long = mixed.to_long_frame()
    assert list(long.columns) == ["family", "cell", "answer"]
    assert long["answer"].tolist() == mixed.answers.tolist()
    assert long["family"].astype(str).tolist() == [""] * len(w) + [
        p.name for p in w.partitions for _ in range(p.n_cells_in(d))]
    assert long["cell"].tolist() == list(w.names) + [
        label for p in w.partitions for label in p.cell_labels(d)]
    # to_frame names the cells as Workload.expanded does
    expanded = w.expanded()
    frame = mixed.to_frame()
    assert frame["query"].tolist() == list(expanded.names)
    assert frame["answer"].tolist() == mixed.answers.tolist()


def test_wide_frames(mixed: CountResult) -> None:
    d = mixed.workload.domain
    for p, arr, wide in zip(mixed.workload.partitions, mixed.family_answers,
                            mixed.to_wide_frames()):
        answer = "answer_" if "answer" in p.attributes else "answer"
        assert list(wide.columns) == [*p.attributes, answer]
        assert wide[answer].tolist() == arr.reshape(-1).tolist()
        labels = [", ".join(f"{a}={v}" for a, v in zip(p.attributes, row))
                  for row in wide[list(p.attributes)].itertuples(index=False)]
        assert labels == list(p.cell_labels(d))
        assert wide.attrs["family"] == p.name and wide.attrs["privacy"] == NOT_PRIVATE


def test_csv_and_parquet_round_trip(mixed: CountResult, tmp_path: Path) -> None:
    long = mixed.to_long_frame().astype({"family": str, "cell": str})
    mixed.write_csv(tmp_path / "a.csv")
    back = pd.read_csv(tmp_path / "a.csv", keep_default_na=False, dtype={"family": str,
                                                                         "cell": str})
    assert back.to_dict("list") == long.to_dict("list")
    mixed.write_parquet(tmp_path / "a.parquet")
    table = pq.read_table(tmp_path / "a.parquet")
    assert table.schema.metadata[PRIVACY_KEY.encode()] == NOT_PRIVATE.encode()
    assert table.to_pydict() == long.to_dict("list")
    doc = json.loads(json.dumps(mixed.to_dict()))
    assert doc["privacy"] == NOT_PRIVATE
    assert [a["answer"] for a in doc["answers"]] == mixed.query_answers.tolist()
    for f, p, arr in zip(doc["families"], mixed.workload.partitions, mixed.family_answers):
        assert (f["name"], f["shape"]) == (p.name, list(arr.shape))
        assert f["answers"] == arr.reshape(-1).tolist()


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_wide_files_round_trip(mixed: CountResult, tmp_path: Path, fmt: str) -> None:
    index = pd.read_csv(mixed.write_wide(tmp_path / "w", fmt=fmt),  # type: ignore[arg-type]
                        keep_default_na=False)
    w = mixed.workload
    assert index["family"].tolist() == [""] + [p.name for p in w.partitions]
    assert index["cells"].tolist() == [len(w)] + [p.n_cells_in(w.domain) for p in w.partitions]
    for name, frame in zip(index["file"][1:], mixed.to_wide_frames()):
        path = tmp_path / "w" / name
        if fmt == "csv":
            back = pd.read_csv(path, keep_default_na=False, dtype=str)
            assert back.to_dict("list") == frame.astype(str).to_dict("list")
        else:
            table = pq.read_table(path)
            assert table.schema.metadata[PRIVACY_KEY.encode()] == NOT_PRIVATE.encode()
            assert table.to_pandas().astype(str).to_dict("list") == \
                frame.astype(str).to_dict("list")
    queries = tmp_path / "w" / index["file"][0]
    got = pq.read_table(queries).to_pandas() if fmt == "parquet" else pd.read_csv(queries)
    assert got["answer"].tolist() == mixed.query_answers.tolist()


def test_predicate_only_results_unchanged() -> None:
    d = Domain((IntegerRange(name="a", lo=0, hi=3),))
    w = Workload.from_sql(["a <= 1", "a = 3"], d)
    result = count(pd.DataFrame({"a": [0, 1, 1, 3]}), w)
    assert result.family_answers == ()
    assert result.to_frame().to_dict("list") == {"query": ["a <= 1", "a = 3"], "answer": [3, 1]}
    assert "families" not in result.to_dict()


# -- building compact workloads ----------------------------------------------------------------


ADULT_LIKE = Domain((
    IntegerRange(name="age", lo=17, hi=40),
    Categorical(name="sex", values=("F", "M"), missing=True),
    Categorical(name="race", values=("a", "b", "c")),
    IntegerRange(name="hours", lo=0, hi=9),
))


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
@pytest.mark.parametrize(
    ("family", "extra"),
    [("marginals", ["-k", "2"]), ("marginals", ["-k", "3", "-a", "age", "-a", "race",
                                                "-a", "sex"]),
     ("identity", ["-a", "sex", "-a", "race"]),
     ("cube", ["-a", "sex", "-a", "race", "-a", "hours"]),
     ("cube", ["-a", "sex", "-a", "race", "--min-order", "1"]),
     ("hierarchy", ["-a", "age", "--branching", "3"]),
     ("hierarchy", ["-a", "age", "-a", "hours", "--depth", "2"])],
)
def test_workload_build_writes_compact_families(tmp_path: Path, suffix: str, family: str,
                                                extra: list[str]) -> None:
    schema = tmp_path / "s.yaml"
    ADULT_LIKE.save(schema)
    out = tmp_path / f"w{suffix}"
    res = CliRunner().invoke(app, ["workload", "build", family, "-s", str(schema), "-o",
                                   str(out), *extra])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert len(text.splitlines()) < 20  # compact: the families named, never their cells
    loaded = Workload.load(out, ADULT_LIKE)
    args = dict(zip(extra[::2], extra[1::2]))
    attrs = [v for k, v in zip(extra[::2], extra[1::2]) if k == "-a"] or None
    want, _ = build_structured(family, ADULT_LIKE, attributes=attrs, k=int(args.get("-k", 2)),
                               branching=int(args.get("--branching", 2)),
                               depth=int(args["--depth"]) if "--depth" in args else None,
                               min_order=int(args.get("--min-order", 0)))
    assert loaded.partitions == want.partitions and len(loaded) == 0
    doc = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    assert set(doc) <= {"marginals", "cubes", "hierarchies"}


def test_marginal_families_are_the_expanded_marginals() -> None:
    for k in (1, 2, 3):
        structured = marginal_families(ADULT_LIKE, k)
        flat = marginals(ADULT_LIKE, k)
        assert [q for q in structured.expanded()] == list(flat)
        assert structured.n_cells == len(flat)
    assert build("marginals", ADULT_LIKE, k=2, structured=True).partitions == \
        marginal_families(ADULT_LIKE, 2).partitions
    assert len(build("marginals", ADULT_LIKE, k=2)) == marginal_families(ADULT_LIKE, 2).n_cells


def test_text_output_expands_up_to_a_guard(tmp_path: Path) -> None:
    schema = tmp_path / "s.yaml"
    ADULT_LIKE.save(schema)
    run = CliRunner().invoke
    res = run(app, ["workload", "build", "marginals", "-k", "2", "-s", str(schema), "-o",
                    str(tmp_path / "m.sql")])
    assert res.exit_code == 0, res.output
    assert len(Workload.load(tmp_path / "m.sql", ADULT_LIKE)) == \
        marginal_families(ADULT_LIKE, 2).n_cells
    res = run(app, ["workload", "build", "hierarchy", "-a", "age", "-s", str(schema), "-o",
                    str(tmp_path / "h.sql")])
    assert res.exit_code == 0, res.output
    text_w = Workload.load(tmp_path / "h.sql", ADULT_LIKE)
    assert list(text_w) == list(build("hierarchy", ADULT_LIKE, attributes=["age"]).expanded())
    res = run(app, ["workload", "build", "marginals", "-k", "3", "-s", str(schema), "-o",
                    str(tmp_path / "big.sql"), "--max-queries", "100"])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "big.yaml" in res.stderr and not (tmp_path / "big.sql").exists()
    res = run(app, ["workload", "build", "cube", "-s", str(schema), "-o", str(tmp_path / "c.yaml")])
    assert res.exit_code == 2 and "--attribute" in res.stderr


def test_workload_check_on_families(tmp_path: Path) -> None:
    schema = tmp_path / "s.yaml"
    ADULT_LIKE.save(schema)
    work = tmp_path / "w.yaml"
    work.write_text("queries: ['age < 30']\nmarginals: [{all: 2}]\n"
                    "hierarchies: [{attributes: [age], branching: 2, depth: 3}]\n")
    w = Workload.load(work, ADULT_LIKE)
    f = WorkloadStats.of(w).families
    assert f is not None and f.n_families == 6 + 3 and f.n_cells == w.n_cells
    assert f.kinds["marginal"] == (6, marginal_families(ADULT_LIKE, 2).n_cells)
    assert f.kinds["hierarchy"] == (3, 1 + 2 + 4)
    assert f.attributes_used == {"age": 6, "sex": 3, "race": 3, "hours": 3}
    assert f.scope_sizes == {1: 3, 2: 6} and f.n_scopes == 6 + 1
    res = CliRunner().invoke(app, ["workload", "check", str(work), "-s", str(schema)])
    assert res.exit_code == 0, res.output
    assert "9 families" in res.output and "marginal: 6" in res.output
    assert "hierarchy: 3 (7 cells)" in res.output


# -- tessera count on a structured workload ------------------------------------------------------


def test_cli_count_structured(tmp_path: Path) -> None:
    schema = tmp_path / "s.yaml"
    ADULT_LIKE.save(schema)
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({
        "age": rng.integers(17, 41, 50), "sex": rng.choice(["F", "M", ""], 50),
        "race": rng.choice(["a", "b", "c"], 50), "hours": rng.integers(0, 10, 50)})
    data = tmp_path / "d.csv"
    frame.to_csv(data, index=False)
    work = tmp_path / "w.yaml"
    work.write_text("queries: [{name: young, where: 'age < 30'}]\nmarginals: [{all: 2}]\n"
                    "cubes: [{attributes: [sex, race]}]\n")
    want = count(str(data), Workload.load(work, ADULT_LIKE))
    run = CliRunner().invoke
    base = ["count", str(data), str(work), "-s", str(schema)]
    res = run(app, [*base, "-o", str(tmp_path / "o.csv")])
    assert res.exit_code == 0, res.output
    assert "NOT PRIVATE" in res.stderr and "families" in res.stderr
    long = want.to_long_frame().astype({"family": str, "cell": str}).to_dict("list")
    got = pd.read_csv(tmp_path / "o.csv", keep_default_na=False, dtype={"cell": str})
    assert got.to_dict("list") == long
    res = run(app, base)  # stdout
    assert res.exit_code == 0
    assert res.stdout.splitlines()[0] == "family,cell,answer"
    assert len(res.stdout.splitlines()) == 1 + want.workload.n_queries
    res = run(app, [*base, "-o", str(tmp_path / "o.parquet")])
    assert res.exit_code == 0 and pq.read_table(tmp_path / "o.parquet").to_pydict() == long
    res = run(app, [*base, "--wide", str(tmp_path / "wide")])
    assert res.exit_code == 0, res.output
    index = pd.read_csv(tmp_path / "wide" / "index.csv", keep_default_na=False)
    assert len(index) == 1 + len(want.workload.partitions)
    res = run(app, [*base, "--json"])
    doc = json.loads(res.stdout)
    assert [f["answers"] for f in doc["families"]] == [
        a.reshape(-1).tolist() for a in want.family_answers]
    res = run(app, ["count", str(data), str(tmp_path / "o.csv"), "-s", str(schema), "--wide",
                    str(tmp_path / "x")])
    assert res.exit_code != 0 and "Traceback" not in res.output


def test_adult_marginals_match_expanded_counts(adult_frame: pd.DataFrame,
                                               adult_domain: Domain) -> None:
    """On real data: every 2-way marginal over five Adult attributes, structured vs expanded."""
    attrs = ["age", "workclass", "race", "sex", "native-country"]  # domain order
    w = marginal_families(adult_domain, 2, attrs)
    structured = count(adult_frame, w)
    expanded = count(adult_frame, marginals(adult_domain, 2, attrs))
    assert structured.answers.tolist() == expanded.answers.tolist()
    assert all(arr.sum() == structured.n_rows for arr in structured.family_answers)
