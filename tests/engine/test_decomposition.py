"""Tree decompositions, nice form, exact treewidth and the memory guard (docs/theory.md §4)."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from tessera.engine import GibbsModel, TreeDecomposition, exact_treewidth, treewidth
from tessera.engine.decomposition import elimination_order, format_bytes, parse_bytes
from tessera.errors import ResourceError
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Query


def random_graph(rng: np.random.Generator) -> nx.Graph:
    n = int(rng.integers(1, 12))
    g = nx.gnp_random_graph(n, float(rng.uniform(0.1, 0.6)), seed=int(rng.integers(1 << 30)))
    return g


@pytest.mark.parametrize("heuristic", ["min-fill", "min-degree"])
def test_decompositions_are_valid_and_nice(heuristic: str) -> None:
    rng = np.random.default_rng(0)
    for _ in range(60):
        g = random_graph(rng)
        td = TreeDecomposition.from_elimination_order(g, elimination_order(g, heuristic))
        td.validate(g)
        nice = td.nice()
        nice.validate()
        assert nice.width == td.width
        assert td.width >= exact_treewidth(g)  # a heuristic is an upper bound


def test_invalid_decomposition_is_caught() -> None:
    g = nx.cycle_graph(4)
    td = TreeDecomposition((frozenset({0, 1, 2}), frozenset({2, 3})), (-1, 0))
    with pytest.raises(AssertionError):
        td.validate(g)  # edge 3-0 is in no bag


@pytest.mark.parametrize(
    ("graph", "tw"),
    [(nx.path_graph(7), 1), (nx.cycle_graph(9), 2), (nx.complete_graph(6), 5),
     (nx.grid_2d_graph(3, 4), 3), (nx.petersen_graph(), 4), (nx.empty_graph(3), 0)],
)
def test_exact_treewidth_known_values(graph: nx.Graph, tw: int) -> None:
    assert exact_treewidth(graph) == tw
    assert treewidth(graph)[0] >= tw


def test_star_incidence_graph_has_width_one() -> None:
    """One disjunction over all d variables is a star: tw = 1 (docs/theory.md §2)."""
    from tessera.engine import bdd_manager, disjunction, incidence_graph

    domain = Domain.from_dict({f"x{i}": 2 for i in range(50)})
    g = incidence_graph(domain, [disjunction(bdd_manager(domain.names), domain.names)])
    assert treewidth(g)[0] == 1
    model = GibbsModel(domain, [disjunction(bdd_manager(domain.names), domain.names)], [1.0])
    assert model.width <= 3  # the chain adds O(1)


def test_memory_guard_names_width_estimate_and_queries() -> None:
    """All 2-way marginals over 30 attributes: refused before any table is allocated."""
    domain = Domain.from_dict({f"a{i}": 2 for i in range(30)})
    queries = [Query.conjunction(domain, {f"a{i}": IntervalSet.points([1]),
                                          f"a{j}": IntervalSet.points([1])})
               for i, j in itertools.combinations(range(30), 2)]
    with pytest.raises(ResourceError) as e:
        GibbsModel(domain, queries, memory_limit=parse_bytes("2GiB"))
    text = str(e.value)
    assert "width 29" in text and "48.0 GiB" in text and "attributes 'a0'" in text
    assert "'q0'" in text


def test_memory_limit_is_configurable() -> None:
    domain = Domain.from_dict({f"a{i}": 2 for i in range(10)})
    queries = [Query.conjunction(domain, {f"a{i}": IntervalSet.points([1]),
                                          f"a{j}": IntervalSet.points([0])})
               for i, j in itertools.combinations(range(10), 2)]
    model = GibbsModel(domain, queries)
    assert model.width == 9
    with pytest.raises(ResourceError):
        GibbsModel(domain, queries, memory_limit=model.plan.bytes_estimate - 1)


def test_bytes_helpers() -> None:
    assert parse_bytes("2GiB") == 2 << 30
    assert parse_bytes("512 MiB") == 512 << 20
    assert parse_bytes("1e9") == 10**9
    assert format_bytes(3 << 30) == "3.0 GiB"


def test_model_runs_on_a_valid_decomposition_of_its_compiled_graph() -> None:
    from tessera.engine.families import hierarchical_disjunctions

    fam = hierarchical_disjunctions(16)
    model = GibbsModel(fam.domain, fam.queries, dense_limit=1)
    td = model.decomposition()
    td.validate(model.structure.graph)
    nice = td.nice()
    nice.validate()
    assert nice.width == td.width == model.width
