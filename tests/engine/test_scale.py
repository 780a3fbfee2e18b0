"""Workloads with thousands of queries: incremental heuristics, capped candidates, fast guard.

Correctness and widths only; times are in ``bench/bench_engine.py --part scale-queries``.
"""

from __future__ import annotations

import itertools
import math
import tracemalloc
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import yaml
from scipy.special import logsumexp

from tessera.engine import GibbsModel, TreeDecomposition, incidence_graph, treewidth
from tessera.engine.decomposition import (
    Aborted,
    Elimination,
    best_elimination_order,
    greedy_elimination,
)
from tessera.errors import ResourceError
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload import builders
from tessera.workload import value_classes as value_classes_module
from tessera.workload.query import Query
from tessera.workload.value_classes import value_classes

from .test_bruteforce import check

ADULT = Path(__file__).parents[2] / "examples" / "adult" / "schema.yaml"


def true_fill(adj: dict, u) -> int:  # noqa: ANN001
    nb = list(adj[u])
    return sum(1 for a, b in itertools.combinations(nb, 2) if b not in adj[a])


@pytest.mark.parametrize("heuristic", ["min-fill", "min-degree"])
def test_incremental_keys_equal_recomputed_keys(heuristic: str) -> None:
    """Replaying the greedy order on a fresh elimination graph: every chosen vertex has the
    minimum recomputed key (fill 0 first, then fewest fill edges / smallest degree)."""
    rng = np.random.default_rng(5)
    for _ in range(80):
        n = int(rng.integers(2, 30))
        g = nx.gnp_random_graph(n, float(rng.uniform(0.05, 0.5)), seed=int(rng.integers(1 << 30)))
        result = greedy_elimination(g, heuristic)
        assert isinstance(result, Elimination)
        adj = {v: set(g.neighbors(v)) for v in g}
        for step, u in enumerate(result.order):
            fills = {v: true_fill(adj, v) for v in adj}
            if min(fills.values()) == 0:
                assert fills[u] == 0
            elif heuristic == "min-fill":
                assert fills[u] == min(fills.values())
            else:
                assert len(adj[u]) == min(len(a) for a in adj.values())
            assert result.costs[step] == len(adj[u]) + 1
            nb = adj.pop(u)
            for a in nb:
                adj[a].discard(u)
                adj[a].update(nb - {a})


def test_capped_candidate_stops_at_its_first_oversized_bag() -> None:
    """Variables first on G(F) of 2-way marginals: the first attribute's bag holds hundreds of
    query vertices; the capped elimination stops there, before building the clique."""
    domain = Domain.from_dict({f"a{i}": 12 for i in range(6)})
    queries = builders.marginals(domain, 2).queries
    g = incidence_graph(domain, queries)
    variables = [("x", i) for i in range(6)]
    result = greedy_elimination(g, first=variables, cap=6.0)
    assert isinstance(result, Aborted)
    assert result.step == 0 and result.bag[0] in variables
    assert result.cost == 1 + 5 * 12 * 12  # the attribute and its 720 query vertices
    best = best_elimination_order(g, phases=[variables, [v for v in g if v[0] == "f"]])
    assert isinstance(best, Elimination) and best.max_cost == 6  # K6 on the attributes


def test_membership_classes_match_the_membership_matrix(monkeypatch) -> None:  # noqa: ANN001
    """Value classes by batched partition refinement = unique rows of the full membership
    matrix."""
    monkeypatch.setattr(value_classes_module, "BATCH_CELLS", 64)  # several batches per attribute
    rng = np.random.default_rng(9)
    for _ in range(200):
        size = int(rng.integers(1, 40))
        covs = []
        for _ in range(int(rng.integers(1, 12))):
            if rng.random() < 0.5:
                lo, hi = sorted(rng.integers(-2, size + 3, size=2))
                covs.append(IntervalSet.range(int(lo), int(hi)))
            else:
                covs.append(IntervalSet.points(int(c) for c in np.flatnonzero(
                    rng.random(size) < 0.4)))
            if rng.random() < 0.3:
                covs.append(covs[int(rng.integers(0, len(covs)))])  # duplicates
        classes = value_classes(size, covs)
        codes = np.arange(size)
        member = np.stack([c.contains_array(codes) for c in covs], axis=1)
        _, first, inverse = np.unique(member, axis=0, return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first)] = np.arange(len(first))
        np.testing.assert_array_equal(classes.class_of(codes), rank[inverse.ravel()])
        np.testing.assert_array_equal(classes.n_codes, np.bincount(rank[inverse.ravel()]))


def test_large_marginal_groups_use_sparse_indicators_and_stay_exact() -> None:
    """17 × 17 cells share one table: CSR indicators; log Z, argmax and E[f] vs brute force."""
    domain = Domain.from_dict({"a": 17, "b": 17, "c": 17})
    queries = [q for pair in (("a", "b"), ("b", "c")) for q in _cells(domain, pair)]
    theta = np.random.default_rng(4).normal(0, 1, size=len(queries))
    model = check(domain, queries, theta)
    assert any(sp.issparse(g.indicators) for g in model.structure.compiled.groups)


def _cells(domain: Domain, pair: tuple[str, str]) -> list[Query]:
    a, b = (domain[n] for n in pair)
    return [Query.conjunction(domain, {a.name: IntervalSet.points([i]),
                                       b.name: IntervalSet.points([j])})
            for i in range(a.size) for j in range(b.size)]


def tree_log_z(sizes: list[int], edges: list[tuple[int, int]], unary: dict, pair: dict) -> float:
    """log Z of a tree MRF by leaf-to-root sum-product over the original codes (an oracle
    independent of the engine: no atoms, no chains, no elimination order)."""
    children: dict[int, list[int]] = {i: [] for i in range(len(sizes))}
    for p, c in edges:
        children[p].append(c)

    def inside(v: int) -> np.ndarray:  # log Σ over v's subtree given x_v
        acc = unary[v].copy()
        for c in children[v]:
            acc += logsumexp(pair[(v, c)] + inside(c)[None, :], axis=1)
        return acc

    return float(logsumexp(inside(0)))


def test_five_thousand_queries_tree_workload_decomposes_exactly() -> None:
    """~4,800 marginal cells on a tree over 15 attributes of size 18: tw(G(F)) = 2 (parallel
    query vertices make cycles), engine width 1, log Z equal to an independent oracle."""
    rng = np.random.default_rng(0)
    sizes = [18] * 15
    domain = Domain.from_dict({f"a{i}": k for i, k in enumerate(sizes)})
    edges = [(int(rng.integers(0, i)), i) for i in range(1, 15)]
    queries: list[Query] = []
    for i in range(15):
        queries += [Query.conjunction(domain, {f"a{i}": IntervalSet.points([c])})
                    for c in range(sizes[i])]
    for p, c in edges:
        queries += _cells(domain, (f"a{p}", f"a{c}"))
    assert 4500 <= len(queries) <= 5500
    theta = rng.normal(0, 1, size=len(queries))

    g = incidence_graph(domain, queries)
    width, td = treewidth(g)
    assert width == 2
    td.validate(g)

    model = GibbsModel(domain, queries, theta)
    assert model.width == 1
    model.decomposition().validate(model.structure.graph)
    unary, pair, j = {}, {}, 0
    for i in range(15):
        unary[i] = theta[j : j + sizes[i]].copy()
        j += sizes[i]
    for p, c in edges:
        pair[(p, c)] = theta[j : j + sizes[p] * sizes[c]].reshape(sizes[p], sizes[c])
        j += sizes[p] * sizes[c]
    assert model.log_partition() == pytest.approx(tree_log_z(sizes, edges, unary, pair),
                                                  rel=1e-12)


def test_all_two_way_marginals_over_15_attributes_width_and_refusal() -> None:
    """5,145 cells of all 2-way marginals of 15 attributes of size 7: tw(G(F)) = 14 exactly
    (≤: queries first leaves K15; ≥: contracting one cell per pair gives a K15 minor). The
    engine's single table would hold 7^15 entries: refused with the width, before any table
    is allocated (peak traced memory far below one such table)."""
    domain = Domain.from_dict({f"a{i}": 7 for i in range(15)})
    queries = builders.marginals(domain, 2).queries
    assert len(queries) == 105 * 49
    g = incidence_graph(domain, queries)
    width, td = treewidth(g)
    assert width == 14
    td.validate(g)
    tracemalloc.start()
    try:
        with pytest.raises(ResourceError) as e:
            GibbsModel(domain, queries)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "width 14" in str(e.value) and "'a0'" in str(e.value)
    assert peak < 256 << 20


def adult_binned() -> Domain:
    """The Adult schema with fnlwgt, capital-gain and capital-loss in public bins."""
    spec = yaml.safe_load(ADULT.read_text())
    attrs = spec["attributes"]
    attrs["fnlwgt"] = {"type": "binned", "edges": [0, 50_000, 100_000, 150_000, 200_000,
                                                   250_000, 300_000, 400_000, 600_000,
                                                   1_500_001]}
    attrs["capital-gain"] = {"type": "binned", "edges": [0, 1, 5_000, 10_000, 100_000]}
    attrs["capital-loss"] = {"type": "binned", "edges": [0, 1, 1_000, 2_000, 5_001]}
    return Domain.from_dict(spec)


def test_all_two_way_marginals_over_the_15_adult_attributes_are_refused_fast() -> None:
    """39,005 cells (numeric attributes binned; raw Adult has 1.6e11 cells and the workload
    builder refuses it). The capped elimination stops at the first bag, whose table has
    ~1.3e15 entries, and the error names the width and the attributes."""
    domain = adult_binned()
    assert len(domain) == 15
    queries = builders.marginals(domain, 2).queries
    assert len(queries) == 39_005
    with pytest.raises(ResourceError) as e:
        GibbsModel(domain, queries)
    text = str(e.value)
    assert "width at least 14" in text and "'age'" in text and "limit 2.0 GiB" in text
    raw = Domain.load(ADULT)
    with pytest.raises(ResourceError, match="158,472,004,523 queries"):
        builders.marginals(raw, 2)


def test_aborted_candidates_do_not_change_the_chosen_decomposition() -> None:
    """The cap only skips candidates that are already worse: same order as without it."""
    rng = np.random.default_rng(2)
    for _ in range(40):
        g = nx.gnp_random_graph(int(rng.integers(5, 25)), 0.3, seed=int(rng.integers(1 << 30)))
        half = [v for v in g if v % 2]
        capped = best_elimination_order(g, phases=[half])
        uncapped = [greedy_elimination(g), greedy_elimination(g, first=half)]
        best = min(uncapped, key=lambda r: r.score())  # type: ignore[union-attr]
        assert isinstance(capped, Elimination)
        assert capped.score() == best.score()  # type: ignore[union-attr]
        TreeDecomposition.from_elimination_order(g, capped.order).validate(g)
        assert math.isfinite(capped.total_cost)
