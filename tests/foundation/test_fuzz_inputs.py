"""Fuzzers for every user input: only the documented errors escape, each with a message.

Documented: :class:`tessera.errors.TesseraError` and its subclasses (``SchemaError``,
``QueryError``, ``DataError``, ``ResourceError``) and
:class:`tessera.workload.files.WorkloadError`. Inputs are kept small so nothing can hang; every
fuzzer counts the inputs it tried and checks that ``max_examples`` was honoured.
"""

from __future__ import annotations

import copy
import json
import math
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera
from tessera.errors import DataError, DataWarning, TesseraError
from tessera.schema.domain import Domain
from tessera.workload.files import WorkloadError
from tessera.workload.parse import parse_query
from tessera.workload.workload import Workload

MAX_EXAMPLES = 300
FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DOCUMENTED = (TesseraError, WorkloadError)

SCHEMA: dict[str, Any] = {
    "attributes": {
        "age": {"type": "integer", "min": 0, "max": 9},
        "cat": {"type": "categorical", "values": ["a", "b c", "é"], "missing": True},
        "inc": {"type": "binned", "edges": [0, 10, 20, 50]},
    }
}
DOMAIN = Domain.from_dict(SCHEMA)

#: Inputs tried by each fuzzer (checked against MAX_EXAMPLES after the run).
TRIED: Counter[str] = Counter()


def _expect_documented(fn: Callable[[], Any]) -> None:
    """Run ``fn``: it returns, or raises a documented error whose message is not empty."""
    try:
        fn()
    except DOCUMENTED as e:
        assert str(e).strip(), f"{type(e).__name__} with an empty message"
        assert isinstance(e, TesseraError)


def _run(name: str, fuzzer: Callable[[], None]) -> None:
    TRIED[name] = 0
    fuzzer()
    assert TRIED[name] >= MAX_EXAMPLES, f"{name}: only {TRIED[name]} inputs tried"


def _tmpdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="tessera-fuzz-"))


# -- crashes these fuzzers found, fixed; kept as regression tests -----------------------------


@pytest.mark.parametrize("value", ["true", "1", '"age"', '{"attributes": ["age"]}'])
def test_a_prefixes_block_that_is_not_a_list_is_a_clear_error(tmp_path: Path,
                                                               value: str) -> None:
    path = tmp_path / "w.json"
    path.write_text('{"queries": [], "prefixes": ' + value + "}")
    with pytest.raises(DOCUMENTED, match="'prefixes' must be a list"):
        Workload.load(path, DOMAIN)


def test_a_frame_without_columns_is_a_clear_error() -> None:
    with pytest.raises(DataError, match="no columns"):
        tessera.count(pd.DataFrame(), WORKLOAD)


def test_a_column_mixing_bool_and_number_is_a_clear_error() -> None:
    frame = pd.DataFrame({"age": [1, 2], "cat": ["a", "a"], "inc": [False, 0]})
    with pytest.raises(DataError, match=r"mixed value types in column\(s\) \['inc'\]"):
        tessera.count(frame, WORKLOAD)


def test_an_ignored_column_mixing_value_types_is_never_read() -> None:
    frame = pd.DataFrame({"age": [1, 2], "cat": ["a", "a"], "inc": [5.0, 6.0], "x": [False, 0]})
    with pytest.warns(DataWarning, match="'x'"):
        tessera.count(frame, WORKLOAD, extra_columns="ignore")


# -- 1. text workloads and parse_query -------------------------------------------------------
TOKENS = [
    "age", "cat", "inc", "AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL", "TRUE", "FALSE",
    "0", "1", "9", "10", "-1", "1.5", "1e23", str(2**70), "'a'", '"b c"', "'b c'", "'é'", "'x'",
    "''", "(", ")", ",", "=", "<", ">", "<=", ">=", "!=", "<>", "'", '"', "#", ":", ";",
    "q1:", '"q 2":', "\t", "\x00", "\x1b", "\u200b", "\ufeff", "é", "ß", "𝔻", "\u2028",
]
token_line = st.lists(
    st.one_of(st.sampled_from(TOKENS), st.text(max_size=3)), max_size=12
).map(" ".join)
raw_line = st.text(max_size=40)
text_file = st.lists(st.one_of(token_line, raw_line), min_size=0, max_size=6).map("\n".join)


def test_fuzz_text_workload() -> None:
    tmp = _tmpdir()

    @FUZZ
    @given(text=text_file, suffix=st.sampled_from([".sql", ".txt", ""]))
    def fuzz(text: str, suffix: str) -> None:
        TRIED["text_workload"] += 1
        path = tmp / f"w{suffix}"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        _expect_documented(lambda: Workload.load(path, DOMAIN))

    _run("text_workload", fuzz)


def test_fuzz_parse_query() -> None:
    @FUZZ
    @given(text=st.one_of(token_line, raw_line))
    def fuzz(text: str) -> None:
        TRIED["parse_query"] += 1
        _expect_documented(lambda: parse_query(text, DOMAIN, []))

    _run("parse_query", fuzz)


# -- 2. YAML / JSON workloads ----------------------------------------------------------------
KEYS = ["queries", "marginals", "cubes", "hierarchies", "partitions", "prefixes", "where",
        "name", "weight", "attributes", "all", "over", "min_order", "branching", "depth",
        "kind", "groups"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(TOKENS + ["age >= 3"]),
    st.text(max_size=8),
)
nested = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=5)), inner,
                        max_size=4),
    ),
    max_leaves=20,
)
workload_doc = st.one_of(
    nested,
    st.dictionaries(st.sampled_from(KEYS[:6]), nested, max_size=4),
)


def _dump(doc: Any, suffix: str) -> str:
    if suffix == ".json":
        return json.dumps(doc)  # NaN/Infinity are written as such; json.loads reads them back
    return yaml.safe_dump(doc, allow_unicode=True)


def test_fuzz_structured_workload() -> None:
    tmp = _tmpdir()

    @FUZZ
    @given(doc=workload_doc, suffix=st.sampled_from([".json", ".yaml", ".yml"]))
    def fuzz(doc: Any, suffix: str) -> None:
        TRIED["structured_workload"] += 1
        path = tmp / f"w{suffix}"
        path.write_text(_dump(doc, suffix), encoding="utf-8", errors="surrogatepass")
        _expect_documented(lambda: Workload.load(path, DOMAIN))

    _run("structured_workload", fuzz)


# -- 3. schemas ------------------------------------------------------------------------------
BAD_VALUES = [None, True, -1, 0, 1, -(2**70), 2**70, 1e23, -1e23, math.nan, math.inf, "", "x",
              [], [1, 1], ["a", "a"], [math.nan, 1.0], {}, {"type": "integer"}, 1.5]


@st.composite
def mutated_schema(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(SCHEMA)
    for _ in range(draw(st.integers(1, 3))):
        attrs = doc["attributes"]
        op = draw(st.sampled_from(["set", "delete", "rename", "retype", "list", "nonstr"]))
        name = draw(st.sampled_from(sorted(attrs, key=str))) if attrs else None
        if name is None:
            break
        spec = attrs[name]
        if op == "set" and isinstance(spec, dict):
            key = draw(st.sampled_from(["min", "max", "values", "edges", "closed", "below",
                                        "above", "missing", "ordered", "type", "bogus"]))
            spec[key] = draw(st.one_of(st.sampled_from(BAD_VALUES), nested))
        elif op == "delete" and isinstance(spec, dict) and spec:
            del spec[draw(st.sampled_from(sorted(spec)))]
        elif op == "rename":
            attrs[draw(st.sampled_from(["", "age", "a b", "é", "1"]))] = attrs.pop(name)
        elif op == "retype":
            attrs[name] = draw(st.sampled_from(BAD_VALUES))
        elif op == "list":  # the list form, possibly with duplicate names
            entries = [dict(s, name=n) if isinstance(s, dict) else s for n, s in attrs.items()]
            if draw(st.booleans()) and entries:
                entries.append(copy.deepcopy(entries[0]))
            doc["attributes"] = entries
            break
        else:  # a non-string key
            attrs[draw(st.sampled_from([1, 2.5, None, True, (1, 2)]))] = attrs.pop(name)
    return doc


pgm_domain = st.dictionaries(
    st.one_of(st.text(max_size=3), st.integers()),
    st.one_of(st.integers(min_value=-3, max_value=2**70), st.sampled_from(BAD_VALUES)),
    max_size=4,
)


def test_fuzz_schema() -> None:
    @FUZZ
    @given(doc=st.one_of(mutated_schema(), nested, pgm_domain,
                         st.fixed_dictionaries({"attributes": nested})))
    def fuzz(doc: Any) -> None:
        TRIED["schema"] += 1
        _expect_documented(lambda: Domain.from_dict(doc))

    _run("schema", fuzz)


# -- 4. data readers -------------------------------------------------------------------------
def _workload() -> Workload:
    path = _tmpdir() / "w.sql"
    path.write_text("age >= 3\ncat IN ('a', 'é')\ninc < 20 AND cat IS NULL\n"
                    "age = 1 OR inc >= 10\n")
    return Workload.load(path, DOMAIN)


WORKLOAD = _workload()
cells = st.one_of(
    st.none(), st.just(math.nan), st.booleans(), st.sampled_from(["a", "b c", "é", "x", ""]),
    st.integers(min_value=-3, max_value=12), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
)
columns = st.lists(st.sampled_from(["age", "cat", "inc", "other", ""]), min_size=0, max_size=5)


@st.composite
def frames(draw: st.DrawFn) -> pd.DataFrame:
    cols = draw(columns)
    rows = draw(st.integers(0, 4))
    data = [[draw(cells) for _ in cols] for _ in range(rows)]
    return pd.DataFrame(data, columns=cols, dtype=object if draw(st.booleans()) else None)


def _csv_cell(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return b"" if value is None else str(value).encode("utf-8", "surrogatepass")


@st.composite
def csv_bytes(draw: st.DrawFn) -> bytes:
    cols = draw(columns)
    header = b",".join(c.encode() for c in cols)
    raw_cells = st.one_of(cells, st.binary(max_size=4), st.just(b"\xff\xfe\xe9"))
    lines = [b",".join(_csv_cell(draw(raw_cells)) for _ in cols)
             for _ in range(draw(st.integers(0, 4)))]
    return b"\n".join([header, *lines]) + draw(st.sampled_from([b"", b"\n", b"\r\n"]))


def test_fuzz_count_frames() -> None:
    @FUZZ
    @given(frame=frames())
    def fuzz(frame: pd.DataFrame) -> None:
        TRIED["count_frames"] += 1
        _expect_documented(lambda: tessera.count(frame, WORKLOAD))

    _run("count_frames", fuzz)


def test_fuzz_count_csv() -> None:
    tmp = _tmpdir()

    @FUZZ
    @given(content=csv_bytes())
    def fuzz(content: bytes) -> None:
        TRIED["count_csv"] += 1
        path = tmp / "data.csv"
        with open(path, "wb") as f:
            f.write(content)
        _expect_documented(lambda: tessera.count(path, WORKLOAD))

    _run("count_csv", fuzz)


def test_counts_are_exact_on_a_valid_frame() -> None:
    """Sanity check that the data fuzzers reach the counting code at all."""
    frame = pd.DataFrame({"age": [1, 5], "cat": ["a", None], "inc": [5.0, 15.0]})
    result = tessera.count(frame, WORKLOAD)
    assert np.asarray(result.answers).tolist() == [1, 1, 1, 2]
