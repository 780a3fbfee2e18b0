"""The privacy unit's vocabulary and the DuckDB engine's bounding (docs/theory.md §3.13): at
most K rows of each person are kept, chosen by md5 of the row's contents and id, a rule that
reads that person's rows alone — so adding a person changes the kept rows of that person only,
whatever the row order."""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.data.source import encode
from tessera.errors import DataError, TesseraError
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.schema.domain import Domain

DOMAIN = Domain.from_dict({"attributes": {
    "a": {"type": "integer", "min": 0, "max": 3},
    "b": {"type": "categorical", "values": ["x", "y", "z"]},
}})


def people(seed: int, n: int = 300, persons: int = 25, pid: str = "pid") -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"a": rng.integers(0, 4, n), "b": rng.choice(["x", "y", "z"], n),
                         pid: rng.integers(0, persons, n)})


def expected_kept(frame: pd.DataFrame, k: int, pid: str = "pid") -> Counter[tuple[int, int]]:
    """The rule written out in Python: per person, rows ordered by md5('id|a|b' of the codes),
    then by the codes; the first k."""
    codes = [(str(p), int(a), ["x", "y", "z"].index(b))
             for p, a, b in zip(frame[pid], frame["a"], frame["b"])]
    by_person: dict[str, list[tuple[int, int]]] = {}
    for p, a, b in codes:
        by_person.setdefault(p, []).append((a, b))
    out: Counter[tuple[int, int]] = Counter()
    for p, rows in by_person.items():
        rows.sort(key=lambda r: (hashlib.md5(f"{p}|{r[0]}|{r[1]}".encode()).hexdigest(), r))
        out.update(rows[:k])
    return out


def kept(frame: pd.DataFrame, k: int, pid: str = "pid") -> Counter[tuple[int, int]]:
    table = encode(frame, DOMAIN, unit=PrivacyUnit(pid, k))
    return Counter(tuple(int(v) for v in row) for row in table.codes())


# -- the vocabulary ---------------------------------------------------------------------------

def test_unit_factor_and_relations() -> None:
    u = PrivacyUnit("pid", 4)
    assert (u.factor(Definition.PURE), u.factor(Definition.ZCDP), u.factor("gdp")) == (4, 16, 16)
    assert ONE_ROW.factor(Definition.ZCDP) == 1 and ONE_ROW.is_row
    assert u.row_relations(Neighbours.ADD_REMOVE) == (Neighbours.ADD_REMOVE,)
    # a person substituted: rows replaced, added or removed
    assert u.row_relations("substitute") == (Neighbours.ADD_REMOVE, Neighbours.SUBSTITUTE)
    assert ONE_ROW.row_relations("substitute") == (Neighbours.SUBSTITUTE,)
    assert u.label("substitute") == "substitute one person (privacy id 'pid', at most 4 rows each)"
    assert ONE_ROW.label("add-remove") == "add/remove one row"
    assert PrivacyUnit.from_dict(u.to_dict()) == u and PrivacyUnit.from_dict(None) == ONE_ROW


@pytest.mark.parametrize("args, words", [
    ((None, 3), "needs --privacy-id"), (("pid", None), "needs --max-rows"),
])
def test_unit_of_command_line_needs_both(args: tuple, words: str) -> None:
    with pytest.raises(TesseraError, match=words):
        PrivacyUnit.of(*args)
    assert PrivacyUnit.of() == ONE_ROW


@pytest.mark.parametrize("k", [0, -1, True, 2.5, 10**7])
def test_unit_refuses_bad_max_rows(k: object) -> None:
    with pytest.raises(TesseraError, match="max_rows"):
        PrivacyUnit("pid", k)  # type: ignore[arg-type]
    with pytest.raises(TesseraError, match="needs a privacy id"):
        PrivacyUnit(None, 2)


# -- bounding on DuckDB -----------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 2, 5, 1000])
def test_keeps_the_first_k_rows_by_hash(k: int) -> None:
    frame = people(0)
    table = encode(frame, DOMAIN, unit=PrivacyUnit("pid", k))
    assert kept(frame, k) == expected_kept(frame, k)
    sizes = frame.groupby("pid").size()
    assert table.n_rows == int(np.minimum(sizes, k).sum())
    assert table.dropped == 0  # bounding's count is private: never reported as dropped


def test_string_ids_and_the_id_outside_the_schema() -> None:
    frame = people(1).assign(pid=lambda f: "p" + f["pid"].astype(str))
    assert kept(frame, 2) == expected_kept(frame, 2)
    table = encode(frame, DOMAIN, unit=PrivacyUnit("pid", 2))
    assert table.codes().shape[1] == len(DOMAIN)  # the id is no column of the coded rows


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(1, 4), extra=st.integers(1, 12))
def test_a_person_changes_only_their_own_kept_rows(seed: int, k: int, extra: int) -> None:
    """bound(D + P) = bound(D) + bound(P) for a new person P, and row order never matters: the
    property the person-level guarantee rests on (docs/theory.md §3.13)."""
    base = people(seed, n=60, persons=8)
    rng = np.random.default_rng(seed + 1)
    new = pd.DataFrame({"a": rng.integers(0, 4, extra), "b": rng.choice(["x", "y", "z"], extra),
                        "pid": 999})
    both = pd.concat([base, new]).sample(frac=1.0, random_state=seed % 1000)
    assert kept(both, k) == kept(base, k) + kept(new, k)


def test_invalid_rows_are_dropped_before_bounding() -> None:
    frame = people(2)
    frame.loc[:9, "a"] = 7  # outside the domain
    table = encode(frame, DOMAIN, on_invalid="drop", unit=PrivacyUnit("pid", 2))
    assert table.dropped == 10
    valid = frame[frame["a"] <= 3]
    assert Counter(tuple(int(v) for v in r) for r in table.codes()) == expected_kept(valid, 2)


def test_csv_ids_read_as_written(tmp_path: Path) -> None:
    """A CSV's id is read as text: '007' and '7' are two people."""
    path = tmp_path / "t.csv"
    path.write_text("a,b,pid\n1,x,007\n2,y,7\n3,z,007\n")
    table = encode(str(path), DOMAIN, unit=PrivacyUnit("pid", 1))
    assert table.n_rows == 2


@pytest.mark.parametrize("frame, words", [
    (people(3).drop(columns="pid"), "privacy id column 'pid' is not in the data"),
    (people(3).assign(pid=lambda f: f["pid"].astype(float)), "an id must be an integer or text"),
    (people(3).assign(pid=lambda f: f["pid"].where(f.index % 7 != 0)), "have no privacy id"),
])
def test_bad_ids_are_refused(frame: pd.DataFrame, words: str) -> None:
    if "have no" in words:
        frame = frame.astype({"pid": "Int64"})
    with pytest.raises(DataError, match=words):
        encode(frame, DOMAIN, unit=PrivacyUnit("pid", 2))


def test_headerless_file_cannot_name_an_id(tmp_path: Path) -> None:
    from tessera.data.table import CsvOptions

    path = tmp_path / "t.csv"
    path.write_text("1,x\n2,y\n")
    with pytest.raises(DataError, match="without a header"):
        encode(str(path), DOMAIN, csv=CsvOptions(header=False), unit=PrivacyUnit("pid", 1))
