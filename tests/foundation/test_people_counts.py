"""Counting people (``PrivacyUnit(..., count="people")``, ``COUNT(DISTINCT id)``): after bounding,
each query counts the persons with at least one kept row in it — checked against the rule written
out in pandas, for predicate queries and for a marginal's cells (docs/theory.md §3.14)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.data.counts import count
from tessera.errors import TesseraError
from tessera.privacy import PrivacyUnit
from tessera.workload.families import Partition
from tessera.workload.workload import Workload

from .test_bounding import DOMAIN, expected_kept, people

SQL = ["a <= 1", "b = 'x'", "a = 2 AND b IN ('y', 'z')", "TRUE", "a > 3", "a >= 1 OR b = 'x'"]


def kept_frame(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """The kept rows with their person, by the bounding rule (tests/foundation/test_bounding)."""
    rows = []
    for pid, part in frame.groupby("pid"):
        kept = expected_kept(part, k)
        for (a, b), n in kept.items():
            rows += [{"pid": str(pid), "a": a, "b": ["x", "y", "z"][b]}] * n
    return pd.DataFrame(rows, columns=["pid", "a", "b"])


@settings(max_examples=15, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 4))
def test_distinct_people_per_query(seed: int, k: int) -> None:
    frame = people(seed, n=120, persons=15)
    workload = Workload.from_sql(SQL[:5], DOMAIN)
    got = count(frame, workload, unit=PrivacyUnit("pid", k, "people")).answers
    kept = kept_frame(frame, k)
    masks = [kept.a <= 1, kept.b == "x", (kept.a == 2) & kept.b.isin(["y", "z"]),
             pd.Series(True, index=kept.index), kept.a > 3]
    want = [kept.pid[m].nunique() for m in masks]
    assert list(got) == want
    rows = count(frame, workload, unit=PrivacyUnit("pid", k)).answers
    assert all(g <= r for g, r in zip(got, rows))  # a person counted once, not per row
    assert got[3] == frame.pid.nunique()  # TRUE: every person (each keeps ≥ 1 row)


def test_marginal_cells_count_people() -> None:
    frame = people(7, n=80, persons=10)
    workload = Workload.of_families(DOMAIN, [Partition.marginal(DOMAIN, ["a", "b"])])
    got = count(frame, workload, unit=PrivacyUnit("pid", 2, "people")).answers
    kept = kept_frame(frame, 2)
    want = [kept.pid[(kept.a == a) & (kept.b == b)].nunique()
            for a in range(4) for b in ("x", "y", "z")]
    assert list(got) == want


def test_boolean_clauses_count_people() -> None:
    frame = people(3, n=120, persons=15)
    workload = Workload.from_sql(SQL[5:] + ["NOT (a = 0 AND b = 'y')"], DOMAIN)
    got = count(frame, workload, unit=PrivacyUnit("pid", 2, "people")).answers
    kept = kept_frame(frame, 2)
    masks = [(kept.a >= 1) | (kept.b == "x"), ~((kept.a == 0) & (kept.b == "y"))]
    assert list(got) == [kept.pid[m].nunique() for m in masks]


def test_count_people_needs_a_privacy_id() -> None:
    with pytest.raises(TesseraError, match="privacy id"):
        PrivacyUnit(None, 1, "people")
    with pytest.raises(TesseraError, match="needs --privacy-id"):
        PrivacyUnit.of(None, None, "people")
    with pytest.raises(TesseraError, match="unknown --count"):
        PrivacyUnit.of("pid", 2, "persons")
    unit = PrivacyUnit("pid", 3, "people")
    assert PrivacyUnit.from_dict(unit.to_dict()) == unit
    assert PrivacyUnit.from_dict({"id_column": "pid", "max_rows": 3}).count == "rows"
    with pytest.raises(TesseraError, match="coverage"):
        unit.factor("pure")
    assert "counted once per query" in unit.text
    np.testing.assert_equal(PrivacyUnit("pid", 3).to_dict(), {"id_column": "pid", "max_rows": 3})
