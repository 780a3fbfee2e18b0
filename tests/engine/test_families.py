"""docs/theory.md §8 workload families: measured widths against the paper's bounds; exactness."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.engine import GibbsModel, exact_treewidth, incidence_graph, treewidth
from tessera.engine.families import (
    grid_marginals,
    hierarchical_disjunctions,
    partitioned_marginals,
    tree_marginals,
)

from .test_bruteforce import check


@pytest.mark.parametrize(
    "family",
    [hierarchical_disjunctions(64), hierarchical_disjunctions(81, 3),
     hierarchical_disjunctions(128), partitioned_marginals(24, 3), partitioned_marginals(20, 5),
     tree_marginals(300), tree_marginals(300, boolean=True), grid_marginals(4, 10),
     grid_marginals(5, 5)],
    ids=lambda f: f.name,
)
def test_measured_incidence_width_matches_bound(family) -> None:  # noqa: ANN001
    width, td = treewidth(incidence_graph(family.domain, family.queries))
    assert width == family.width_bound
    model = GibbsModel(family.domain, family.queries)
    assert model.width <= family.width_bound + 1  # chains add at most O(1) here


def test_grid_width_is_proportional_to_smaller_side() -> None:
    """Min-fill is a heuristic: on wide grids it may end one above min(r, c)."""
    for rows, cols in [(3, 12), (6, 12)]:
        fam = grid_marginals(rows, cols)
        width, _ = treewidth(incidence_graph(fam.domain, fam.queries))
        assert fam.width_bound <= width <= fam.width_bound + 1


def test_small_family_widths_are_exact() -> None:
    """On small instances the bound is the exact treewidth (pendant vertices removed)."""
    for fam in [hierarchical_disjunctions(8), tree_marginals(4, edges=[(0, 1), (1, 2), (1, 3)]),
                partitioned_marginals(3, 3)]:
        g = incidence_graph(fam.domain, fam.queries)
        g.remove_nodes_from([v for v in list(g) if g.degree(v) <= 1])
        assert exact_treewidth(g) == fam.width_bound


@pytest.mark.parametrize(
    "family",
    [hierarchical_disjunctions(12), hierarchical_disjunctions(9, 3), partitioned_marginals(12, 3),
     partitioned_marginals(8, 4, boolean=True), tree_marginals(12), grid_marginals(3, 4),
     grid_marginals(3, 3, boolean=True)],
    ids=lambda f: f.name,
)
def test_families_exact_against_brute_force(family) -> None:  # noqa: ANN001
    rng = np.random.default_rng(0)
    theta = rng.normal(0, 1, size=len(family.queries))
    check(family.domain, family.queries, theta)
