"""Lazy range families (tessera.workload.ranges) against brute force on small domains: the
queries, their names, the containment counts c(x) = Π (v+1)(n−v) (ranges) or Π (n−v)
(prefixes), the answers by prefix sums; and the ``ranges:``/``prefixes:`` blocks of a file."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.errors import TesseraError
from tessera.schema.domain import Domain
from tessera.workload.canonical import workload_hash
from tessera.workload.ranges import RangeFamily, RangeQueries
from tessera.workload.workload import Workload


def _domain(n: int, m: int) -> Domain:
    return Domain.from_dict({"attributes": {
        "x": {"type": "integer", "min": 0, "max": n - 1},
        "y": {"type": "integer", "min": 10, "max": 10 + m - 1},
        "c": {"type": "categorical", "values": ["a", "b"]}}})


def _holds(q, cell: dict[str, int]) -> bool:
    return all(cell[p.attribute] in p.coverage for p in q.predicates)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(1, 5), st.sampled_from(["ranges", "prefixes"]),
       st.booleans(), st.data())
def test_family_equals_brute_force(n, m, kind, two, data):
    dom = _domain(n, m)
    fam = RangeFamily.of(dom, ["y", "x"] if two else ["x"], kind)
    assert fam.attributes == (("x", "y") if two else ("x",))
    queries = list(RangeQueries(dom, [fam]))
    assert len(queries) == fam.n_queries
    # the queries: every range (prefix) per axis, the product in row-major order
    axes = []
    for size in fam.sizes:
        axes.append([(lo, hi) for lo in range(size) for hi in range(lo, size)]
                    if kind == "ranges" else [(0, hi) for hi in range(size)])
    for q, combo in zip(queries, itertools.product(*axes)):
        for a, size, (lo, hi) in zip(fam.attributes, fam.sizes, combo):
            cov = q.predicate(a)
            want = set(range(lo, hi + 1))
            assert (set(range(size)) if cov is None else set(cov)) == want
    # c(x): brute force over every cell
    counts = fam.counts()
    cells = list(itertools.product(*(range(s) for s in fam.sizes)))
    for cell in cells:
        at = dict(zip(fam.attributes, cell))
        holding = [i for i, q in enumerate(queries) if _holds(q, at)]
        assert counts[cell] == len(holding)
        assert fam.containing(cell).tolist() == holding
    # answers by prefix sums = brute-force counts of a random histogram
    hist = np.array(data.draw(st.lists(st.integers(0, 9), min_size=len(cells),
                                       max_size=len(cells)))).reshape(fam.sizes)
    want = [sum(int(hist[c]) for c in cells if _holds(q, dict(zip(fam.attributes, c))))
            for q in queries]
    assert fam.answers(hist).tolist() == want
    # names: the labels of the schema
    names = fam.names(dom).tolist()
    assert len(set(names)) == len(names) == fam.n_queries
    first = "range(x in [0, 0]" if kind == "ranges" else "prefix(x<=0"
    assert names[0].startswith(first)
    if two:
        assert " AND y" in names[0] and ("y in [10, 10])" in names[0] or "y<=10)" in names[0])


def test_one_dimension_counts_closed_form():
    fam = RangeFamily.of(_domain(1024, 1), ["x"])
    v = np.arange(1024)
    assert fam.n_queries == 524_800
    assert np.array_equal(fam.counts(), (v + 1) * (1024 - v))
    assert int(fam.counts().max()) == 262_656


def test_file_block_is_lazy_and_hashed_compactly(tmp_path):
    dom = _domain(40, 6)
    f = tmp_path / "w.yaml"
    f.write_text("ranges:\n  - {attribute: x}\n")
    w = Workload.load(f, dom)
    assert w.range_families is not None and isinstance(w.queries, RangeQueries)
    assert w.n_queries == 820 and w.names[0] == "range(x in [0, 0])"
    assert w.queries[39].scope == ()  # [0, 39]: every row
    f2 = tmp_path / "w2.yaml"
    f2.write_text("ranges:\n  - {attributes: [x]}\n")  # the same family, spelled differently
    assert workload_hash(Workload.load(f2, dom)) == workload_hash(w)
    f2.write_text("ranges:\n  - {attributes: [x], weight: 2}\n")
    assert workload_hash(Workload.load(f2, dom)) != workload_hash(w)
    # 2-D rectangles and prefixes
    f2.write_text("ranges:\n  - {attributes: [y, x]}\nprefixes:\n  - {attributes: [x]}\n")
    w2 = Workload.load(f2, dom)
    assert [f.kind for f in w2.range_families] == ["ranges", "prefixes"]
    assert w2.n_queries == 820 * 21 + 40
    f3 = tmp_path / "saved.yaml"  # saved compactly, read back the same
    w2.save(f3)
    assert len(f3.read_text().splitlines()) < 10
    assert workload_hash(Workload.load(f3, dom)) == workload_hash(w2)
    # beside other queries the blocks are expanded to predicate queries (same names)
    f2.write_text("queries:\n  - {where: 'x >= 3'}\nranges:\n  - {attribute: x}\n")
    w3 = Workload.load(f2, dom)
    assert w3.range_families is None and w3.n_queries == 821
    assert list(w3.names[1:]) == list(w.names)
    assert list(w3.queries[1:]) == list(w.queries)


@pytest.mark.parametrize("text, needle", [
    ("ranges:\n  - {attribute: c}\n", "ranges need ordered attributes; 'c' is not ordered"),
    ("ranges:\n  - {attribute: nope}\n", "nope"),
    ("ranges:\n  - {attributes: [x, y, x]}\n", "one or two distinct"),
    ("ranges:\n  - {attributes: [x, y, c]}\n", "one or two distinct"),
    ("ranges:\n  - {attribute: x, attributes: [y]}\n", "names its attributes once"),
    ("ranges:\n  - {attribute: x, bins: 3}\n", "an entry of 'ranges' has keys"),
    ("ranges:\n  - {attribute: x, weight: -1}\n", "weight"),
    ("ranges: {attribute: x}\n", "'ranges' must be a list"),
    ("prefixes:\n  - {attributes: [big]}\n", "above 5,000,000"),
    ("ranges:\n  - {attributes: [big]}\n", "above 5,000,000"),
])
def test_bad_range_block_is_one_clear_error(tmp_path, text, needle):
    dom = Domain.from_dict({"attributes": {
        "x": {"type": "integer", "min": 0, "max": 9}, "y": {"type": "integer", "min": 0, "max": 3},
        "c": {"type": "categorical", "values": ["a", "b"]},
        "big": {"type": "integer", "min": 0, "max": 5_000_000}}})
    f = tmp_path / "w.yaml"
    f.write_text(text)
    with pytest.raises(TesseraError) as e:
        Workload.load(f, dom)
    msg = str(e.value)
    assert needle in msg, msg
    assert "w.yaml:" in msg and "hint" in msg, msg  # names the entry, with a hint
    assert "Traceback" not in msg


def test_cli_bad_range_block_is_one_line_not_a_traceback(tmp_path, monkeypatch):
    """``tessera answer`` on a ranges block over an unordered attribute: one error naming the
    entry and the attribute, with a hint; nothing charged, no traceback."""
    from typer.testing import CliRunner

    from tessera.cli.main import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text(
        "attributes:\n  x: {type: integer, min: 0, max: 9}\n"
        "  c: {type: categorical, values: [a, b]}\n")
    (tmp_path / "w.yaml").write_text("ranges:\n  - {attributes: [x, c]}\n")
    (tmp_path / "d.csv").write_text("x,c\n1,a\n5,b\n")
    r = CliRunner().invoke(app, ["answer", "d.csv", "w.yaml", "-s", "s.yaml", "--rho", "0.1"])
    out = r.output
    assert r.exit_code != 0
    assert "w.yaml:ranges[0]" in out and "'c' is not ordered" in out and "hint" in out, out
    assert "Traceback" not in out and r.exception is None or isinstance(r.exception, SystemExit)


def test_lazy_workload_pickles():
    import pickle

    dom = _domain(30, 4)
    w = Workload.of_ranges(dom, [RangeFamily.of(dom, ["x", "y"], weight=2.0)])
    back = pickle.loads(pickle.dumps(w))
    assert back == w and back.range_families == w.range_families
    assert back.weight_array().tolist() == w.weight_array().tolist()
    assert workload_hash(back) == workload_hash(w)
