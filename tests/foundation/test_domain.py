"""Attribute kinds, encoding, schema files and schema errors (docs/theory.md §1: a public
domain)."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from tessera.errors import QueryError, SchemaError
from tessera.schema.domain import INVALID, Binned, Boolean, Categorical, Domain, IntegerRange
from tests.oracles.foundation import (
    FAST,
    HypDraw,
    bin_samples,
    gen_attribute,
    gen_domain,
    raw_values,
)

NULLS = [None, np.nan, pd.NA, float("nan")]


# -- encode / decode --------------------------------------------------------------------------


@FAST
@given(st.data())
def test_encode_decode_round_trip_every_kind(data: st.DataObject) -> None:
    attr = gen_attribute(HypDraw(data), "x")
    samples = raw_values(attr)
    assert len(samples) == attr.n_values
    assert attr.size == attr.n_values + int(attr.missing)
    for code, values in enumerate(samples):
        assert attr.encode(values).tolist() == [code] * len(values), (attr, values)
    codes = np.arange(attr.size)
    decoded = attr.decode(codes)
    if attr.missing:
        assert decoded[-1] is None and attr.missing_code == attr.n_values
        assert attr.label(attr.missing_code) == "NULL"
    else:
        assert attr.missing_code is None
    if not isinstance(attr, Binned):  # bins decode to labels, not to numbers
        assert attr.encode(np.array(decoded, dtype=object)).tolist() == codes.tolist()
    # missing values: the declared code, else invalid
    want = attr.missing_code if attr.missing else INVALID
    assert attr.encode(np.array(NULLS, dtype=object)).tolist() == [want] * len(NULLS)
    assert attr.encode(pd.Series([None, samples[0][0]])).tolist() == [want, 0]


@FAST
@given(st.data())
def test_encode_of_present_values_ignores_missing_flag(data: st.DataObject) -> None:
    """The same non-missing value gets the same code whether or not missing is declared."""
    r = HypDraw(data)
    attr = gen_attribute(r, "x")
    values = [v for vs in raw_values(attr) for v in vs]
    other = (
        type(attr)(**{**attr.__dict__, "missing": not attr.missing})
        if not isinstance(attr, Categorical)
        else Categorical(
            name="x", values=attr.values, is_ordered=attr.is_ordered, missing=not attr.missing
        )
    )
    assert attr.encode(values).tolist() == other.encode(values).tolist()


@pytest.mark.parametrize(
    ("attr", "bad"),
    [
        (IntegerRange(name="i", lo=0, hi=5), [6, -1, 2.5, "abc", float("inf"), "", "3x"]),
        (IntegerRange(name="i", lo=-2, hi=2, missing=True), [3, -3, 0.5, "two"]),
        (Categorical(name="c", values=("a", "b")), ["A", "c", " a", "", 1]),
        (Categorical(name="c", values=("1", "2")), [3, "1.5", 1.5]),
        (Boolean(name="b"), ["maybe", 2, -1, "", "tru"]),
        (Binned(name="z", edges=(0, 10, 20)), [-0.1, 20, 25, "x", float("inf")]),
        (Binned(name="z", edges=(0, 10, 20), closed="right"), [0, -1, 20.5]),
        (Binned(name="z", edges=(0, 10), below=True), [10, 11]),
        (Binned(name="z", edges=(0, 10), above=True, closed="right"), [0, -5]),
    ],
)
def test_values_outside_the_domain_are_invalid(attr, bad) -> None:  # type: ignore[no-untyped-def]
    assert attr.encode(np.array(bad, dtype=object)).tolist() == [INVALID] * len(bad)


def test_text_and_number_spellings() -> None:
    i = IntegerRange(name="i", lo=0, hi=5)
    assert i.encode(["3", 3, 3.0, np.int64(3), np.float32(3)]).tolist() == [3] * 5
    c = Categorical(name="c", values=("1", "2", "true"))
    # numbers from a numeric column match categorical text ('1.0' is the number one)
    assert c.encode([1, 1.0, np.int64(2), "2", True]).tolist() == [0, 0, 1, 1, 2]
    b = Boolean(name="b")
    assert b.encode([True, "TRUE", "t", "Yes", 1, "1", 1.0]).tolist() == [1] * 7
    assert b.encode([False, "false", "F", "no", 0, "0", 0.0]).tolist() == [0] * 7


@pytest.mark.parametrize(
    ("closed", "below", "above", "value", "code"),
    [
        # edges 0 < 10 < 20; closed='left': [0,10) [10,20)
        ("left", False, False, 0, 0),
        ("left", False, False, 9.999, 0),
        ("left", False, False, 10, 1),
        ("left", False, False, 19.999, 1),
        ("left", False, False, 20, INVALID),
        ("left", False, False, -1e-9, INVALID),
        ("left", True, False, -1e-9, 0),
        ("left", True, False, 0, 1),
        ("left", False, True, 20, 2),
        ("left", False, True, 1e12, 2),
        # closed='right': (0,10] (10,20]
        ("right", False, False, 0, INVALID),
        ("right", False, False, 1e-9, 0),
        ("right", False, False, 10, 0),
        ("right", False, False, 10.001, 1),
        ("right", False, False, 20, 1),
        ("right", False, False, 20.001, INVALID),
        ("right", True, False, 0, 0),
        ("right", True, False, -1e12, 0),
        ("right", True, True, 20.5, 3),
        ("right", True, True, 20, 2),
    ],
)
def test_binned_edges_closed_side(closed, below, above, value, code) -> None:  # type: ignore[no-untyped-def]
    attr = Binned(name="z", edges=(0, 10, 20), closed=closed, below=below, above=above)
    assert attr.encode([value]).tolist() == [code]


def test_binned_labels_and_bounds() -> None:
    left = Binned(name="z", edges=(0, 10, 20), below=True, above=True)
    assert [left.value(c) for c in range(4)] == ["(-inf, 0)", "[0, 10)", "[10, 20)", "[20, inf)"]
    right = Binned(name="z", edges=(0, 10, 20), closed="right", below=True, above=True)
    assert [right.value(c) for c in range(4)] == ["(-inf, 0]", "(0, 10]", "(10, 20]", "(20, inf)"]
    assert left.bounds(1) == (0.0, 10.0, True, False)
    assert right.bounds(3) == (20.0, math.inf, False, False)


@FAST
@given(
    st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=2, max_size=6, unique=True),
    st.sampled_from(["left", "right"]),
)
@example([1_000_000.0, 1_000_001.0, 1_000_002.0], "left")
@example([0.1234567, 0.1234568], "right")
def test_binned_labels_are_distinct(edges: list[float], closed: str) -> None:
    """Bin labels are how '=' and IN name a bin: two bins must never share a label."""
    attr = Binned(name="z", edges=tuple(sorted(edges)), closed=closed)  # type: ignore[arg-type]
    labels = [attr.value(c) for c in range(attr.n_values)]
    assert len(set(labels)) == len(labels), labels


@FAST
@given(st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=2, max_size=6, unique=True))
def test_binned_codes_of_bin_samples(edges: list[float]) -> None:
    for closed in ("left", "right"):
        attr = Binned(name="z", edges=tuple(sorted(edges)), closed=closed, below=True, above=True)
        for code, values in enumerate(bin_samples(attr)):
            finite = [v for v in values if math.isfinite(v)]
            got = attr.encode(finite).tolist()
            assert got == [code] * len(finite), (attr.edges, closed, finite, got)


def test_big_integers_encode_exactly() -> None:
    """Integer attributes may be huge (intervals never enumerate): codes must stay exact."""
    lo = 2**53
    attr = IntegerRange(name="t", lo=lo, hi=lo + 10)
    assert attr.encode([lo + 1, lo + 3]).tolist() == [1, 3]
    assert attr.encode([lo - 1]).tolist() == [INVALID]


# -- domain ------------------------------------------------------------------------------------


def test_domain_basics() -> None:
    d = Domain.from_dict(
        {
            "attributes": {
                "age": {"type": "integer", "min": 0, "max": 99},
                "sex": {"type": "categorical", "values": ["F", "M"], "missing": True},
                "ok": {"type": "bool"},
            }
        }
    )
    assert d.names == ("age", "sex", "ok")
    assert d.sizes == (100, 3, 2)
    assert d.size == 600 and isinstance(d.size, int)
    assert d.index("sex") == 1 and d["ok"].kind == "boolean"
    assert "age" in d and "agee" not in d
    assert len(d) == 3 and [a.name for a in d] == list(d.names)
    with pytest.raises(QueryError) as e:
        d.index("agee")
    assert "agee" in str(e.value) and "did you mean 'age'?" in str(e.value)
    assert d.project(["ok", "age"]).names == ("ok", "age")


def test_domain_size_is_exact_for_astronomical_domains() -> None:
    d = Domain(tuple(IntegerRange(name=f"x{i}", lo=0, hi=10**6 - 1) for i in range(40)))
    assert d.size == 10**240


def test_list_form_schema_and_aliases() -> None:
    d = Domain.from_dict(
        {
            "attributes": [
                {"name": "a", "type": "int", "min": 1, "max": 3},
                {"name": "b", "type": "category", "values": ["x"]},
                {"name": "c", "type": "numeric", "edges": [0, 1]},
            ]
        }
    )
    assert [a.kind for a in d] == ["integer", "categorical", "binned"]
    assert d.sizes == (3, 1, 1)


@FAST
@given(st.data(), st.sampled_from([".yaml", ".yml", ".json"]))
def test_save_load_round_trip(data: st.DataObject, suffix: str) -> None:
    d = gen_domain(HypDraw(data), (1, 5))
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / f"schema{suffix}"
        d.save(p, header="# a comment\n" if suffix != ".json" else None)
        back = Domain.load(p)
    assert back == d
    assert Domain.from_dict(d.to_dict()) == d
    assert back.sizes == d.sizes


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_save_load_keeps_binned_edges_exactly(tmp_path: Path, suffix: str) -> None:
    """A saved schema must describe the same bins: edges may not be rounded on the way."""
    d = Domain((Binned(name="w", edges=(0.1234567, 0.2345678, 1234567.0, 1234568.5)),))
    d.save(tmp_path / f"s{suffix}")
    assert Domain.load(tmp_path / f"s{suffix}") == d


def test_private_pgm_domain_dict_and_file(request: pytest.FixtureRequest) -> None:
    d = Domain.from_dict({"a": 4, "b-c": 2})
    assert d.names == ("a", "b-c") and d.sizes == (4, 2)
    assert all(isinstance(a, IntegerRange) and a.lo == 0 for a in d)
    path: Path = request.getfixturevalue("adult_domain_json")  # skips without the shared data
    spec = json.loads(path.read_text())
    d = Domain.load(path)
    assert d.names == tuple(spec) and d.sizes == tuple(spec.values())
    assert d["income>50K"].encode([0, 1, 2]).tolist() == [0, 1, INVALID]


def test_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("attributes:\n  age: {type: integer, min: 0, max: 9\n  sex: x\n")
    with pytest.raises(SchemaError) as e:
        Domain.load(p)
    assert f"{p}:" in str(e.value)
    assert str(e.value).split(f"{p}:")[1].split(":")[0].strip().isdigit()


def test_json_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.json"
    p.write_text('{"attributes": {\n "a": {"type": "integer",}\n}}')
    with pytest.raises(SchemaError) as e:
        Domain.load(p)
    assert f"{p}:2" in str(e.value)


def test_schema_error_in_file_names_file(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"attributes": {"age": {"type": "integr", "min": 0, "max": 1}}}))
    with pytest.raises(SchemaError) as e:
        Domain.load(p)
    assert str(e.value).startswith(f"{p}: ")
    assert "'age'" in str(e.value) and "did you mean 'integer'?" in str(e.value)
    with pytest.raises(SchemaError) as e:
        Domain.load(tmp_path / "nope.yaml")
    assert "nope.yaml" in str(e.value)


@pytest.mark.parametrize(
    ("spec", "needles"),
    [
        (
            {"type": "integr", "min": 0, "max": 1},
            ["unknown type 'integr'", "did you mean 'integer'?"],
        ),
        ({"type": "categorcal", "values": ["a"]}, ["did you mean 'categorical'?"]),
        ({"type": "categorical", "values": ["a", "b", "a"]}, ["'a'", "twice"]),
        ({"type": "integer", "min": 5, "max": 1}, ["min 5 > max 1", "swap"]),
        (
            {"type": "integer", "min": 0, "max": 9, "maxx": 3},
            ["unknown key 'maxx'", "did you mean 'max'?"],
        ),
        (
            {"type": "categorical", "values": ["a"], "orderd": True},
            ["'orderd'", "did you mean 'ordered'?"],
        ),
        ({"type": "integer", "min": 0}, ["missing key 'max'"]),
        ({"type": "integer", "min": 0.5, "max": 3}, ["min 0.5 is not an integer", "whole number"]),
        ({"type": "categorical", "values": []}, ["empty"]),
        ({"type": "binned", "edges": [0, 5, 5]}, ["strictly increasing"]),
        ({"type": "binned", "edges": [0]}, ["edges"]),
        ({"type": "binned", "edges": [0, 1], "closed": "both"}, ["'left' or 'right'"]),
        ("integer", ["expected a mapping"]),
    ],
)
def test_schema_errors_have_messages_and_hints(spec, needles) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SchemaError) as e:
        Domain.from_dict({"attributes": {"s": spec}})
    text = str(e.value)
    assert "'s'" in text
    for n in needles:
        assert n in text, text


def test_top_level_schema_errors() -> None:
    with pytest.raises(SchemaError, match="declared twice"):
        Domain.from_dict(
            {"attributes": [{"name": "a", "type": "boolean"}, {"name": "a", "type": "boolean"}]}
        )
    with pytest.raises(SchemaError) as e:
        Domain.from_dict({"atributes": {"a": {"type": "boolean"}}})
    assert "did you mean 'attributes'?" in str(e.value)
    with pytest.raises(SchemaError):
        Domain.from_dict({})
    with pytest.raises(SchemaError):
        Domain.from_dict({"a": 3, "b": True})  # not a Private-PGM domain: True is no size
    with pytest.raises(SchemaError, match="name"):
        Domain.from_dict({"attributes": [{"type": "boolean"}]})


def test_categorical_values_must_be_a_list() -> None:
    """`values: Female, Male` (YAML without brackets) is one string, not a list of values.

    It must be refused as such, not split into characters ('e' listed twice / values F, M).
    """
    for values in ("Female, Male", "MF"):
        with pytest.raises(SchemaError) as e:
            Domain.from_dict({"attributes": {"sex": {"type": "categorical", "values": values}}})
        assert "list" in str(e.value).replace("listed", ""), str(e.value)
