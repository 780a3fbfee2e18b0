"""The partition bound (``tessera.overlap.families``): structured workloads against brute force.

Every check expands the workload (``Workload.expanded``: predicate queries, then each family's
cells row-major) and enumerates every row x — every pair (x, y) under substitution — of a small
domain (``tests.oracles.overlap``). Always: bound ≥ the true maximum, exact ⇒ bound = maximum
(to 1e-9), the witness re-evaluated on the expanded queries. Exact on every marginal, cube and
hierarchy workload (uniform weights per family), under both neighbour relations.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.engine import GibbsModel, maximize, workload_incidence_graph
from tessera.engine.model import treewidth_report
from tessera.errors import QueryError, ResourceError
from tessera.overlap import max_overlap, maximal_overlapping_sets
from tessera.overlap import structured as structured_module
from tessera.overlap.result import g, h
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.families import Partition, cube, hierarchy, k_way_marginals
from tessera.workload.query import Query
from tessera.workload.workload import Workload
from tests.oracles.overlap import (
    all_points,
    incidence,
    points_max_score,
    points_max_substitution,
    points_overlapping_sets,
)

SETTINGS = settings(max_examples=250, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
COMPS = ("pure", "gdp", "zcdp")
NEIGHBOURS = ("add-remove", "substitute")
WEIGHTS = (1.0, 2.0, 0.5, 0.0, 3.7)


def _tol(v: float) -> float:
    return 1e-9 * max(1.0, abs(v))


# -- generators ----------------------------------------------------------------------------------


@st.composite
def domains(draw: st.DrawFn, max_attrs: int = 3, max_size: int = 4) -> Domain:
    m = draw(st.integers(1, max_attrs))
    return Domain.from_dict({f"a{i}": draw(st.integers(1, max_size)) for i in range(m)})


@st.composite
def grids(draw: st.DrawFn, dom: Domain, weight: float) -> Partition:
    """Random disjoint groups per attribute; codes may be in no group and groups may be empty."""
    attrs = draw(st.lists(st.sampled_from(dom.names), min_size=1, unique=True))
    groups: dict[str, list[IntervalSet] | None] = {}
    for a in attrs:
        if draw(st.booleans()):
            groups[a] = None
            continue
        size = dom[a].size
        k = draw(st.integers(1, size + 1))
        label = draw(st.lists(st.integers(-1, k - 1), min_size=size, max_size=size))
        groups[a] = [IntervalSet.points([c for c in range(size) if label[c] == j])
                     for j in range(k)]
    return Partition.grid(dom, groups, weight)


@st.composite
def families(draw: st.DrawFn, dom: Domain, kinds: tuple[str, ...]) -> list[Partition]:
    out: list[Partition] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(kinds))
        weight = draw(st.sampled_from(WEIGHTS))
        attrs = draw(st.lists(st.sampled_from(dom.names), min_size=1, unique=True))
        if kind == "marginal":
            out.append(Partition.marginal(dom, attrs, weight))
        elif kind == "k-way":
            out.extend(k_way_marginals(dom, draw(st.integers(0, len(dom))), weight=weight))
        elif kind == "cube":
            out.extend(cube(dom, attrs, weight))
        elif kind == "hierarchy":
            depth = draw(st.none() | st.integers(1, 3))
            out.extend(hierarchy(dom, attrs[:2], draw(st.integers(2, 3)), depth, weight))
        else:
            out.append(draw(grids(dom, weight)))
    return out


@st.composite
def predicates(draw: st.DrawFn, dom: Domain, max_queries: int = 3) -> list[Query]:
    """Range and set predicates (a contradiction or a tautology now and then)."""
    out = []
    for _ in range(draw(st.integers(0, max_queries))):
        cov = {}
        for attr in dom:
            if draw(st.booleans()):
                continue
            k = attr.size
            if draw(st.booleans()):
                lo = draw(st.integers(0, k - 1))
                cov[attr.name] = IntervalSet.range(lo, draw(st.integers(lo, k)))
            else:
                cov[attr.name] = IntervalSet.points(
                    draw(st.lists(st.integers(0, k - 1), unique=True)))
        out.append(Query.conjunction(dom, cov))
    return out


@st.composite
def workloads(draw: st.DrawFn, kinds: tuple[str, ...], with_queries: bool) -> Workload:
    dom = draw(domains())
    queries = draw(predicates(dom)) if with_queries else []
    weights = [draw(st.sampled_from(WEIGHTS)) for _ in queries]
    # numbered: drawn predicates may repeat, and named by their SQL two would share a name
    return Workload.of(dom, queries, [f"q{i}" for i in range(len(queries))], weights=weights,
                       partitions=draw(families(dom, kinds)))


STRUCTURED = ("marginal", "k-way", "cube", "hierarchy")
ALL_KINDS = (*STRUCTURED, "grid")


# -- the oracle ----------------------------------------------------------------------------------


def _check(wl: Workload, res, weights: np.ndarray, comp: str, neighbours: str) -> float:
    """Compare ``res`` with brute force on the expanded workload; return the true score."""
    ex = wl.expanded()
    s = h(comp, weights)
    assert res.n_queries == len(ex.queries) == wl.n_queries
    sub = neighbours == "substitute"
    if sub:
        true, _, _ = points_max_substitution(wl.domain, ex.queries, s)
        live = np.array([bool(q.predicates) and not q.is_contradiction() for q in ex.queries],
                        dtype=bool)
        total = math.fsum(s[live].tolist()) if len(s) else 0.0
    else:
        true, _ = points_max_score(wl.domain, ex.queries, s)
        total = math.fsum(s.tolist())
    assert res.score_bound >= true - _tol(true), (res, true)
    if res.exact:
        assert abs(res.score_bound - true) <= _tol(true), (res, true)
    assert math.isclose(res.total_score, total, rel_tol=1e-12, abs_tol=1e-12)
    assert math.isclose(res.bound, g(comp, res.score_bound), rel_tol=1e-15)
    # the witness, re-evaluated on every expanded query: indices in expanded order
    w = res.witness
    assert w is not None and all(0 <= c < k for c, k in zip(w.x, wl.domain.sizes))
    hit = incidence(wl.domain, ex.queries, np.array([w.x]))[0]
    if sub:
        assert w.y is not None
        hit = hit ^ incidence(wl.domain, ex.queries, np.array([w.y]))[0]
    assert tuple(np.flatnonzero(hit).tolist()) == w.queries
    assert math.isclose(math.fsum(s[hit].tolist()), res.score_achieved, rel_tol=1e-9,
                        abs_tol=1e-12)
    assert res.score_achieved <= true + _tol(true)
    return true


# -- properties ----------------------------------------------------------------------------------


@SETTINGS
@given(workloads(STRUCTURED, with_queries=False), st.sampled_from(COMPS),
       st.sampled_from(NEIGHBOURS))
def test_marginals_cubes_hierarchies_are_exact(wl: Workload, comp: str, neighbours: str) -> None:
    res = max_overlap(wl, comp=comp, neighbours=neighbours)
    _check(wl, res, np.asarray(wl.all_weights()), comp, neighbours)
    assert res.exact, res
    assert not res.method.startswith("expanded")  # the partition bound itself was attained


@SETTINGS
@given(workloads(ALL_KINDS, with_queries=True), st.sampled_from(COMPS),
       st.sampled_from(NEIGHBOURS), st.booleans(), st.data())
def test_mixtures_against_brute_force(wl: Workload, comp: str, neighbours: str, per_cell: bool,
                                      data: st.DataObject) -> None:
    weights = np.asarray(wl.all_weights())
    if per_cell:  # non-uniform weights within families
        weights = np.asarray(data.draw(st.lists(st.sampled_from(WEIGHTS), min_size=len(weights),
                                                max_size=len(weights))), dtype=np.float64)
    res = max_overlap(wl, weights if per_cell else None, comp=comp, neighbours=neighbours)
    _check(wl, res, weights, comp, neighbours)
    if not per_cell and not wl.queries and all(p.covers(wl.domain) for p in wl.partitions):
        assert res.exact


@SETTINGS
@given(workloads(ALL_KINDS, with_queries=True), st.sampled_from(COMPS),
       st.sampled_from(NEIGHBOURS), st.booleans(), st.data())
def test_partition_bound_alone_is_valid(wl: Workload, comp: str, neighbours: str,
                                        per_cell: bool, data: st.DataObject) -> None:
    """Without the expanded fallback: the partition bound and the local search on their own."""
    weights = np.asarray(wl.all_weights())
    if per_cell:
        weights = np.asarray(data.draw(st.lists(st.sampled_from(WEIGHTS), min_size=len(weights),
                                                max_size=len(weights))), dtype=np.float64)
    with mock.patch.object(structured_module, "EXPANDED_MAX_QUERIES", 0):
        res = max_overlap(wl, weights, comp=comp, neighbours=neighbours)
    _check(wl, res, weights, comp, neighbours)
    if not res.exact:
        assert any("not attained" in n or "upper bound" in n for n in res.notes)


# -- worked cases --------------------------------------------------------------------------------


def test_not_attained_then_expanded() -> None:
    """Two families that no row can both reach: bound 2 from the families, true maximum 1."""
    dom = Domain.from_dict({"a": 2})
    wl = Workload.of_families(dom, [Partition.grid(dom, {"a": [IntervalSet.points([0])]}),
                                    Partition.grid(dom, {"a": [IntervalSet.points([1])]})])
    with mock.patch.object(structured_module, "EXPANDED_MAX_QUERIES", 0):
        alone = max_overlap(wl)
    assert not alone.exact and alone.score_bound == 2.0 and alone.score_achieved == 1.0
    assert any("not attained" in n for n in alone.notes)
    res = max_overlap(wl)
    assert res.exact and res.bound == 1.0 and res.method.startswith("expanded")


def test_per_cell_weights_found_by_local_search() -> None:
    dom = Domain.from_dict({"a": 3, "b": 3})
    wl = Workload.of_families(dom, [Partition.marginal(dom, ["a"]),
                                    Partition.marginal(dom, ["b"])])
    w = np.array([1.0, 5.0, 1.0, 1.0, 1.0, 5.0])
    with mock.patch.object(structured_module, "EXPANDED_MAX_QUERIES", 0):
        res = max_overlap(wl, w)
    assert res.exact and res.bound == 10.0 and res.witness.x == (1, 2)
    assert res.witness.queries == (1, 5)
    sub = max_overlap(wl, w, neighbours="substitute")
    assert sub.exact and sub.bound == 12.0  # (5 + 1) on each marginal
    _check(wl, sub, w, "pure", "substitute")


def test_witness_indices_in_expanded_order() -> None:
    dom = Domain.from_dict({"a": 4, "b": 3})
    queries = [Query.conjunction(dom, {"a": IntervalSet.range(1, 3)}),
               Query.conjunction(dom, {"b": IntervalSet.points([2])})]
    wl = Workload.of(dom, queries, weights=[2.0, 1.0],
                     partitions=[*hierarchy(dom, ["a"]), Partition.marginal(dom, ["a", "b"])])
    res = max_overlap(wl)
    true = _check(wl, res, np.asarray(wl.all_weights()), "pure", "add-remove")
    assert res.exact and res.bound == true == 2 + 1 + 3 + 1  # both queries, 3 levels, 1 cell
    names = wl.expanded().names
    x = dict(zip(dom.names, res.witness.x))
    assert names[res.witness.queries[0]] == queries[0].to_sql(dom)
    assert f"a={x['a']}, b={x['b']}" in names[res.witness.queries[-1]]


def test_weights_vector() -> None:
    dom = Domain.from_dict({"a": 3, "b": 2})
    wl = Workload.of_families(dom, [Partition.marginal(dom, ["a"], weight=2.0),
                                    Partition.marginal(dom, ["a", "b"])])
    default = max_overlap(wl, comp="gdp")
    explicit = max_overlap(wl, wl.all_weights(), comp="gdp")
    assert default.bound == explicit.bound == math.sqrt(5.0) and default.exact
    with pytest.raises(QueryError, match="9 queries"):
        max_overlap(wl, np.ones(len(wl)))
    with pytest.raises(QueryError, match="finite"):
        max_overlap(wl, [1.0] * 8 + [-1.0])
    with pytest.raises(QueryError, match="family"):
        max_overlap(Workload.of_families(dom, [Partition.marginal(dom, ["a"], 1e200)]),
                    comp="zcdp")


def test_many_marginals_compact_and_fast() -> None:
    """All 3-way marginals over 15 attributes (455 families, 11,000+ cells as one table each):
    exact from the compact form, no cell materialised beyond the witness's."""
    dom = Domain.from_dict({f"x{i}": 3 + i % 4 for i in range(15)})
    wl = Workload.of_families(dom, k_way_marginals(dom, 3))
    start = time.monotonic()
    add = max_overlap(wl)
    sub = max_overlap(wl, neighbours="substitute", comp="zcdp")
    assert time.monotonic() - start < 10
    assert add.exact and add.bound == 455 and len(add.witness.queries) == 455
    assert sub.exact and sub.bound == 910
    assert add.n_queries == wl.n_queries and add.total_score == wl.n_queries
    assert "partition bound: 455 families" in add.notes[0]


def test_mixture_with_ranges_uses_the_sweep_for_its_predicates() -> None:
    dom = Domain.from_dict({"a": 8, "b": 5})
    queries = [Query.conjunction(dom, {"a": IntervalSet.range(lo, lo + 3)}) for lo in range(6)]
    wl = Workload.of(dom, queries, partitions=cube(dom, ["a", "b"]))
    res = max_overlap(wl)
    _check(wl, res, np.asarray(wl.all_weights()), "pure", "add-remove")
    assert res.exact and res.bound == 3 + 4 and "sweep" in res.method


def test_maximal_overlapping_sets_expand() -> None:
    dom = Domain.from_dict({"a": 3, "b": 2})
    wl = Workload.of(dom, [Query.conjunction(dom, {"a": IntervalSet.range(0, 2)})],
                     partitions=[Partition.marginal(dom, ["b"])])
    ex = wl.expanded()
    got = {frozenset(s) for s in maximal_overlapping_sets(wl)}
    assert got == points_overlapping_sets(dom, ex.queries)


# -- the engine on structured workloads -------------------------------------------------------


def test_engine_takes_structured_workloads() -> None:
    dom = Domain.from_dict({"a": 3, "b": 2, "c": 2})
    wl = Workload.of(dom, [Query.conjunction(dom, {"a": IntervalSet.range(1, 3)})],
                     partitions=[Partition.marginal(dom, ["a", "b"]), *hierarchy(dom, ["c"])])
    ex = wl.expanded()
    rng = np.random.default_rng(3)
    theta = rng.normal(size=wl.n_queries)
    pts = all_points(dom)
    scores = incidence(dom, ex.queries, pts).astype(float) @ theta
    value, x = maximize(dom, wl, theta)
    assert math.isclose(value, scores.max(), abs_tol=1e-9)
    model = GibbsModel.from_workload(wl, theta)
    assert math.isclose(model.log_partition(), float(np.log(np.exp(scores).sum())), rel_tol=1e-9)
    assert len(model.queries) == wl.n_queries


def test_treewidth_from_family_scopes() -> None:
    dom = Domain.from_dict({f"x{i}": 2 for i in range(6)})
    chain = [Partition.marginal(dom, [f"x{i}", f"x{i + 1}"]) for i in range(5)]
    wl = Workload.of_families(dom, [*chain, *hierarchy(dom, ["x0"])])
    graph = workload_incidence_graph(wl)
    # attributes + one vertex per family; the level-0 hierarchy family constrains nothing
    assert graph.number_of_nodes() == 6 + 7 and graph.degree(("P", 5)) == 0
    report = treewidth_report(wl)
    assert report.incidence.families == 7 and report.incidence.width == 1
    assert report.plan.width >= 1
    big = Workload.of_families(dom, k_way_marginals(dom, 2))
    with mock.patch("tessera.engine.model.STRUCTURED_MAX_QUERIES", 10):
        with pytest.raises(ResourceError, match="at most 10"):
            treewidth_report(big).plan  # noqa: B018
        with pytest.raises(ResourceError, match="at most 10"):
            GibbsModel.from_workload(big)
    assert treewidth_report(big).incidence.width == 5  # all pairs: K_6 on the attributes


def test_treewidth_cli_on_a_structured_workload(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text('{"a": 4, "b": 3, "c": 2}')
    wl = tmp_path / "w.yaml"
    wl.write_text("marginals:\n  - {all: 2}\nhierarchies:\n  - {attributes: [a]}\n")
    result = CliRunner().invoke(app, ["treewidth", str(wl), "--schema", str(schema)])
    assert result.exit_code == 0, result.output
    assert "0 predicate queries and 6 families (33 cells)" in result.output
    assert "one vertex per family (6)" in result.output
    assert "engine decomposition: width" in result.output
