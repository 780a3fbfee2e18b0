"""The evaluation plot stays readable with many families: the per-family panel draws the worst
:data:`PLOT_FAMILIES` (its title says how many of how many), the figure grows with the number
of bars, long names are cut, and no two tick labels overlap — measured on the drawn figure with
matplotlib's renderer, for the 66 two-way marginals of 12 Adult-like attributes."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from tessera.schema.domain import Domain
from tessera.synth.evaluate import LABEL_CHARS, PLOT_FAMILIES, Evaluation, short_label
from tessera.workload.families import k_way_marginals
from tessera.workload.workload import Workload

ATTRIBUTES = ("age", "workclass", "education", "education-num", "marital-status", "occupation",
              "relationship", "race", "sex", "capital-gain", "hours-per-week", "native-country")


def _evaluation(n_attributes: int) -> Evaluation:
    domain = Domain.from_dict({"attributes": {a: {"type": "boolean"}
                                              for a in ATTRIBUTES[:n_attributes]}})
    w = Workload.of_families(domain, k_way_marginals(domain, 2))
    rng = np.random.default_rng(1)  # not-privacy-noise: made-up fractions for a plot
    real = rng.dirichlet(np.ones(4), len(w.partitions)).ravel()
    synthetic = rng.dirichlet(np.ones(4), len(w.partitions)).ravel()
    return Evaluation(w, real, synthetic, 1000, 1000)


def _overlaps(a: object, b: object) -> bool:
    """Strictly positive intersection of two display-space boxes (touching is not overlap)."""
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > 0.5  # type: ignore[attr-defined]
            and min(a.y1, b.y1) - max(a.y0, b.y0) > 0.5)  # type: ignore[attr-defined]


@pytest.mark.parametrize("n_attributes", [12, 4])
def test_family_labels_do_not_overlap(n_attributes: int, tmp_path: Path) -> None:
    ev = _evaluation(n_attributes)
    families = len(ev.workload.partitions)
    fig = ev.figure()
    renderer = fig.canvas.get_renderer()
    left, right = fig.axes
    labels = [t for t in right.get_yticklabels() if t.get_visible() and t.get_text()]
    assert len(labels) == min(families, PLOT_FAMILIES)
    boxes = [t.get_window_extent(renderer) for t in labels]
    clashes = [(labels[i].get_text(), labels[j].get_text())
               for i, j in itertools.combinations(range(len(boxes)), 2)
               if _overlaps(boxes[i], boxes[j])]
    assert not clashes, clashes[:5]
    # nor do they run into the left panel, or out of the figure
    plot_area = left.get_window_extent(renderer)
    width, height = fig.canvas.get_width_height()
    for t, box in zip(labels, boxes):
        assert box.x0 > plot_area.x1 and box.x0 >= 0 and box.y0 >= 0 and box.y1 <= height, t
    title = right.get_title()
    assert (f"the worst {PLOT_FAMILIES} of {families} families shown" in title) == (
        families > PLOT_FAMILIES), title
    assert ev.plot(tmp_path / "e.png").stat().st_size > 0


def test_long_family_names_are_cut() -> None:
    name = "marginal(" + ",".join(ATTRIBUTES) + ")"
    assert len(short_label(name)) == LABEL_CHARS and short_label(name).endswith("…")
    assert short_label("marginal(age,sex)") == "marginal(age,sex)"
