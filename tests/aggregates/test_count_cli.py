"""``tessera count`` on a workload of SELECT statements: the exact (NOT PRIVATE) COUNT, SUM and
AVG of every group, per row or per person after the K-row bounding, against pandas; the rows
and columns of ``tessera answer``'s file; the NOT PRIVATE mark; the refusals
(docs/aggregates.md, "Exact answers")."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from tessera.data.counts import NOT_PRIVATE, PRIVACY_KEY
from tessera.privacy import PrivacyUnit
from tessera.release.exact_aggregates import exact_aggregates
from tessera.schema.domain import Domain
from tessera.workload.select import read_aggregates

from .test_answer_cli import run

SCHEMA = """attributes:
  region: {type: categorical, values: [N, S, E, W]}
  age: {type: integer, min: 0, max: 9}
"""
#: W never occurs: its AVG has no rows (an empty answer); x is a measure (not in the schema)
WORKLOAD = """by_region: SELECT region, COUNT(*), SUM(CLAMP(x, 0, 200)) AS revenue, \
AVG(CLAMP(x, 0, 200)) FROM t WHERE age < 5 GROUP BY region
tot: SELECT COUNT(*), SUM(CLAMP(age, 2, 7)), AVG(age) FROM t
"""
REGIONS = ["N", "S", "E", "W"]


def table(n: int = 240, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"region": rng.choice(REGIONS[:3], n), "age": rng.integers(0, 10, n),
                         "x": rng.normal(60, 90, n).round(2), "pid": rng.integers(0, 30, n)})


@pytest.fixture
def files(tmp_path):
    table().to_csv(tmp_path / "d.csv", index=False)
    (tmp_path / "s.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text(WORKLOAD)
    return tmp_path


def bounded(df: pd.DataFrame, k: int) -> pd.DataFrame:
    """The rows the bounding keeps (docs/people.md: each person's rows ordered by
    md5(id|code_1|…|code_m), ties by the codes then the measure, the first K), in pandas."""
    domain = Domain.from_dict({"attributes": {"region": {"type": "categorical",
                                                         "values": REGIONS},
                                              "age": {"type": "integer", "min": 0,
                                                      "max": 9}}})
    rc = np.asarray(domain["region"].encode(df.region))
    ac = np.asarray(domain["age"].encode(df.age))
    key = [hashlib.md5(f"{p}|{r}|{a}".encode()).hexdigest()
           for p, r, a in zip(df.pid, rc, ac)]
    order = df.assign(_h=key, _r=rc, _a=ac).sort_values(["pid", "_h", "_r", "_a", "x"])
    return order.groupby("pid").head(k).drop(columns=["_h", "_r", "_a"])


def reference(kept: pd.DataFrame, people: bool) -> list[float]:
    """Every published answer (statement, group, aggregate order) on the kept rows: per row,
    or per person (a count of distinct people, a sum of each person's clamped total)."""

    def total(rows: pd.DataFrame, col: str, lo: float, hi: float) -> float:
        if people:
            return float(rows.groupby("pid")[col].sum().clip(lo, hi).sum())
        return float(rows[col].clip(lo, hi).sum())

    def n(rows: pd.DataFrame) -> float:
        return float(rows.pid.nunique() if people else len(rows))

    out: list[float] = []
    for r in REGIONS:
        g = kept[(kept.age < 5) & (kept.region == r)]
        s, c = total(g, "x", 0, 200), n(g)
        out += [c, s, s / c if c else math.nan]
    out += [n(kept), total(kept, "age", 2, 7), total(kept, "age", 0, 9) / n(kept)]
    return out


def count(files, *extra):
    return run("count", files / "d.csv", files / "w.sql", "--schema", files / "s.yaml",
               "--extra-columns", "ignore", *extra)


def assert_answers(got: pd.Series, want: list[float]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (math.isnan(g) and math.isnan(w)) or g == pytest.approx(w, abs=1e-6), (got, want)


def test_per_row_equals_pandas(files):
    res = count(files, "-o", files / "c.csv")
    assert res.exit_code == 0, res.output
    out = pd.read_csv(files / "c.csv")
    assert_answers(out.answer, reference(table(), people=False))
    # the W group has no rows: its mean is empty, and said so
    assert out.answer.isna().sum() == 1 and "1 answer(s) empty" in res.output
    assert (out.noise_scale == 0).all()
    assert out.ci95_low.equals(out.answer) and out.ci95_high.equals(out.answer)


@pytest.mark.parametrize("k", [2, 50])
@pytest.mark.parametrize("people", [True, False])
def test_bounded_equals_pandas(files, k, people):
    """--privacy-id pid --max-rows K: at K = 2 the bounding cuts rows, at 50 none (nobody has
    50); with --count people each group counts distinct people and sums clamped totals."""
    df = table()
    kept = bounded(df, k)
    assert (len(kept) < len(df)) == (k == 2)
    extra = ("--count", "people") if people else ()
    res = count(files, "--privacy-id", "pid", "--max-rows", str(k), *extra, "--json",
                "-o", files / "c.json")
    assert res.exit_code == 0, res.output
    doc = json.loads((files / "c.json").read_text())
    assert doc["rows"] == len(kept)
    assert_answers(pd.Series([math.nan if r["answer"] is None else r["answer"]
                              for r in doc["answers"]]), reference(kept, people))


@pytest.mark.parametrize("k", [2, 50])
def test_counting_people_differs_from_counting_rows(k):
    """The reference itself tells the two apart on this table, in the counts and in the sums
    (else the test above could not catch one computed for the other)."""
    kept = bounded(table(), k)
    people, rows = reference(kept, True), reference(kept, False)
    assert people[0::3] != rows[0::3] and people[1::3] != rows[1::3]


def test_library_matches_the_cli(files):
    df = table()
    w = read_aggregates(files / "w.sql", Domain.load(files / "s.yaml"))
    got = exact_aggregates(df, w, unit=PrivacyUnit("pid", 2, "people"),
                           extra_columns="ignore")
    assert got.n_rows == len(bounded(df, 2))
    assert got.frame.attrs["private"] is False
    assert_answers(got.frame.answer, reference(bounded(df, 2), people=True))


@pytest.mark.parametrize("person", [[], ["--privacy-id", "pid", "--max-rows", "3", "--count",
                                         "people"]])
def test_same_rows_and_columns_as_answer(files, person):
    res = run("answer", files / "d.csv", files / "w.sql", "--schema", files / "s.yaml",
              "--epsilon", "1", "--seed", "1", "--extra-columns", "ignore", *person,
              "-o", files / "a.csv")
    assert res.exit_code == 0, res.output
    res = count(files, *person, "-o", files / "c.csv")
    assert res.exit_code == 0, res.output
    private = pd.read_csv(files / "a.csv", comment="#", keep_default_na=False)
    exact = pd.read_csv(files / "c.csv", keep_default_na=False)
    assert list(exact.columns) == list(private.columns)
    keys = ["statement", "group", "aggregate"]
    assert exact[keys].equals(private[keys])


def test_marked_not_private(files):
    res = count(files)
    assert res.exit_code == 0, res.output
    assert NOT_PRIVATE in res.output
    res = count(files, "--json", "-o", files / "c.json")
    assert json.loads((files / "c.json").read_text())["privacy"] == NOT_PRIVATE
    res = count(files, "-o", files / "c.parquet")
    assert res.exit_code == 0, res.output
    t = pq.read_table(files / "c.parquet")
    assert t.schema.metadata[PRIVACY_KEY.encode()] == NOT_PRIVATE.encode()
    assert t.num_rows == 15


@pytest.mark.parametrize("extra,says", [
    (["--wide", "wd"], "--wide cannot be used with aggregate statements"),
    (["--json", "-o", "c.parquet"], "--json and a .parquet output exclude each other"),
    (["--count", "people"], "--privacy-id"),
])
def test_refusals(files, extra, says):
    extra = [str(files / e) if e in ("wd", "c.parquet") else e for e in extra]
    res = count(files, *extra)
    assert res.exit_code != 0
    assert says in res.output and "Traceback" not in res.output, res.output
    assert not (files / "wd").exists() and not (files / "c.parquet").exists()
