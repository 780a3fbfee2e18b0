"""The DuckDB-join fallback of `encode` codes rows exactly like the Arrow fast path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import tessera.data.duckdb_source as data
from tessera import Domain, count, random_workload


def _frame_and_domain() -> tuple[pd.DataFrame, Domain]:
    rng = np.random.default_rng(11)
    n = 500
    df = pd.DataFrame(
        {
            "a": rng.integers(0, 12, n),
            "c": pd.Categorical(rng.choice(["x", "y", None], n)),
            "f": np.where(rng.random(n) < 0.1, -0.0, rng.uniform(0, 10, n)),
        }
    )
    domain = Domain.from_dict(
        {
            "attributes": {
                "a": {"type": "integer", "min": 0, "max": 9},  # 10 and 11 are invalid
                "c": {"type": "categorical", "values": ["x", "y"], "missing": True},
                "f": {"type": "binned", "edges": [0, 2.5, 5, 7.5, 10]},
            }
        }
    )
    return df, domain


# the random builder names queries by their SQL: a repeated draw is renamed with a QueryWarning,
# which is not what this test checks
@pytest.mark.filterwarnings("ignore::tessera.errors.QueryWarning")
def test_join_fallback_gives_identical_codes_and_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    df, domain = _frame_and_domain()
    workload = random_workload(domain, 300, seed=4)
    fast = data.encode_duckdb(df, domain, on_invalid="drop")
    fast_counts = count(df, workload, on_invalid="drop")

    def unmatched(*args: object, **kwargs: object) -> int:
        raise data.UnmatchedValue

    monkeypatch.setattr(data, "code_rows", unmatched)
    slow = data.encode_duckdb(df, domain, on_invalid="drop")
    slow_counts = count(df, workload, on_invalid="drop")
    assert (fast.n_rows, fast.dropped) == (slow.n_rows, slow.dropped)
    assert fast.dropped == int((df["a"] > 9).sum())
    as_rows = lambda e: sorted(map(tuple, e.codes().tolist()))  # noqa: E731
    assert as_rows(fast) == as_rows(slow)
    assert np.array_equal(fast_counts.answers, slow_counts.answers)
