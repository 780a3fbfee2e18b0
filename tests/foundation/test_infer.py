"""`infer_domain` / `tessera schema infer`: a draft schema from data, loudly not private."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tessera import Binned, Boolean, Categorical, Domain, IntegerRange, count, infer_domain
from tessera.cli.main import app
from tessera.errors import SchemaError
from tessera.workload.builders import marginals


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 200
    return pd.DataFrame(
        {
            "city": rng.choice(["Oslo", "Lima", "Pune"], n),
            "age": rng.integers(18, 80, n),
            "income": rng.uniform(0.0, 1234.5, n),
            "member": rng.choice([True, False], n),
            "note": pd.array(rng.choice(["a", "b", None], n), dtype=object),
        }
    )


def test_kinds_bounds_and_missing() -> None:
    d = infer_domain(_frame())
    assert isinstance(d["city"], Categorical) and d["city"].values == ("Lima", "Oslo", "Pune")
    assert isinstance(d["age"], IntegerRange)
    assert (d["age"].lo, d["age"].hi) == (int(_frame().age.min()), int(_frame().age.max()))
    assert isinstance(d["income"], Binned)
    edges = d["income"].edges
    assert edges[0] <= _frame().income.min() and edges[-1] > _frame().income.max()
    assert isinstance(d["member"], Boolean)
    assert d["note"].missing and not d["city"].missing


def test_every_row_fits_the_draft() -> None:
    """The draft covers the data it was read from: counting all 1-way marginals drops nothing."""
    df = _frame()
    d = infer_domain(df)
    res = count(df, marginals(d, 1))
    assert res.dropped == 0
    # each attribute's cells partition the rows
    per_attr = np.add.reduceat(res.answers, np.cumsum([0, *d.sizes[:-1]]))
    assert (per_attr == len(df)).all()


def test_too_many_categories_is_an_error() -> None:
    df = pd.DataFrame({"id": [f"person-{i % 250}" for i in range(500)]})  # repeats: no key
    with pytest.raises(SchemaError, match="distinct values"):
        infer_domain(df, max_categories=100)
    keys = pd.DataFrame({"id": [f"person-{i}" for i in range(500)]})
    with pytest.raises(SchemaError, match="no column can be an attribute"):
        infer_domain(keys)


def test_cli_warns_not_private(tmp_path: Path) -> None:
    csv = tmp_path / "d.csv"
    _frame().to_csv(csv, index=False)
    out = tmp_path / "s.yaml"
    res = CliRunner().invoke(app, ["schema", "infer", str(csv), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "NOT PRIVATE" in res.output
    text = out.read_text()
    assert text.startswith("# DRAFT SCHEMA INFERRED FROM DATA - NOT PRIVATE.")
    assert set(Domain.load(out).names) == set(_frame().columns)


def test_row_keys_are_left_out(tmp_path: Path) -> None:
    """A row number or a text id (every value distinct) is not an attribute: the draft leaves
    it out and says so; a measure whose whole values all differ but spread wide is kept, and so
    is a key of fewer rows than KEY_MIN_ROWS."""
    from tessera.data.infer import KEY_MIN_ROWS, draft_schema

    df = _frame()
    n = len(df)
    df.insert(0, "rownames", np.arange(1, n + 1))
    df["id"] = [f"r{i:04d}" for i in range(n)]
    df["population"] = np.arange(n) * 1_000 + 7  # all distinct, spread: a measure
    draft = draft_schema(df)
    assert draft.keys == ("rownames", "id")
    assert "rownames" not in draft.domain.names and "id" not in draft.domain.names
    assert isinstance(draft.domain["population"], Binned)
    assert "rownames" in draft.header() and "--extra-columns ignore" in draft.header()
    assert infer_domain(df) == draft.domain
    small = df.head(KEY_MIN_ROWS - 1)
    assert draft_schema(small).keys == () and "rownames" in infer_domain(small).names

    csv, out = tmp_path / "d.csv", tmp_path / "s.yaml"
    df.to_csv(csv, index=False)
    r = CliRunner().invoke(app, ["schema", "infer", str(csv), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "Left out as row keys" in r.output and "'rownames', 'id'" in r.output
    assert "# Left out as row keys" in out.read_text()
    assert "rownames" not in Domain.load(out).names


def test_wide_text_columns_are_left_out_of_the_draft_all_named(tmp_path: Path) -> None:
    """A draft leaves out every text column of more than --max-categories values and names
    them all at once (the user recodes them); infer_domain still refuses the first one."""
    from tessera.data.infer import draft_schema

    df = _frame()
    n = len(df)
    df["title"] = [f"t{i % 150}" for i in range(n)]  # 150 values, repeated: not a key
    df["town"] = [f"c{i % 120}" for i in range(n)]
    draft = draft_schema(df, max_categories=100)
    assert draft.wide == (("title", 150), ("town", 120)) and draft.keys == ()
    assert "title" not in draft.domain.names and "city" in draft.domain.names
    assert "'title' (150 values), 'town' (120 values)" in " ".join(
        line.lstrip("# ") for line in draft.header().splitlines())
    with pytest.raises(SchemaError, match="'title' has 150 distinct values"):
        infer_domain(df, max_categories=100)
    csv, out = tmp_path / "d.csv", tmp_path / "s.yaml"
    df.to_csv(csv, index=False)
    r = CliRunner().invoke(app, ["schema", "infer", str(csv), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "more distinct text values than --max-categories" in r.output
    assert "'town' (120 values)" in r.output
    assert set(Domain.load(out).names) == set(_frame().columns)
