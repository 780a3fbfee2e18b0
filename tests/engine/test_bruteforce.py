"""The engine against brute-force enumeration on hundreds of random small instances (docs/theory.md
§4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tessera.engine import (
    GibbsModel,
    at_least,
    bdd_manager,
    conjunction,
    disjunction,
    lex_range,
    maximize,
    parity,
)
from tessera.engine.bdd import BooleanQuery
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Query
from tests.oracles.engine import brute_force


def random_expr(mgr, names, rng, depth=3):  # noqa: ANN001
    """A random formula over ``names`` built with ∧, ∨, ⊕, ¬ (any function dd can build)."""
    if depth == 0 or rng.random() < 0.25:
        v = mgr.var(str(rng.choice(names)))
        return ~v if rng.random() < 0.5 else v
    a = random_expr(mgr, names, rng, depth - 1)
    b = random_expr(mgr, names, rng, depth - 1)
    op = rng.integers(0, 3)
    return a & b if op == 0 else (a | b if op == 1 else mgr.apply("xor", a, b))


def random_boolean_queries(domain, mgr, rng, n):  # noqa: ANN001
    names = list(domain.names)
    out = []
    for _ in range(n):
        kind = rng.integers(0, 7)
        k = int(rng.integers(1, len(names) + 1))
        sub = [str(s) for s in rng.choice(names, size=k, replace=False)]
        lits = {s: int(rng.integers(0, 2)) for s in sub}
        if kind == 0:
            out.append(disjunction(mgr, names))  # wide OR over the whole scope
        elif kind == 1:
            out.append(conjunction(mgr, {s: int(rng.integers(0, 2)) for s in names}))  # wide AND
        elif kind == 2:
            out.append(parity(mgr, lits))
        elif kind == 3:
            lo, hi = sorted(rng.integers(0, 2**k, size=2))
            out.append(lex_range(mgr, sub, int(lo), int(hi)))
        elif kind == 4:
            out.append(at_least(mgr, lits, int(rng.integers(0, k + 2))))
        elif kind == 5:
            out.append(disjunction(mgr, lits) if rng.random() < 0.5 else conjunction(mgr, lits))
        else:
            out.append(BooleanQuery(mgr, random_expr(mgr, names, rng)))
    return out


def random_predicate_queries(domain, rng, n):  # noqa: ANN001
    out = []
    for _ in range(n):
        covs = {}
        for a in domain:
            if rng.random() < 0.5:
                size = a.size
                if rng.random() < 0.5:
                    lo, hi = sorted(rng.integers(0, size + 1, size=2))
                    covs[a.name] = IntervalSet.range(int(lo), int(hi) + 1)
                else:
                    covs[a.name] = IntervalSet.points(
                        int(c) for c in np.flatnonzero(rng.random(size) < 0.5))
        out.append(Query.conjunction(domain, covs))
    return out


def check(domain, queries, theta, constraints=(), dense_limit=64, rel=1e-9):  # noqa: ANN001
    bf = brute_force(domain, queries, theta, constraints)
    model = GibbsModel(domain, queries, theta, constraints=constraints, dense_limit=dense_limit)
    lz = model.log_partition()
    assert lz == pytest.approx(bf.log_z, rel=rel, abs=1e-12)
    value, x = model.max_assignment()
    assert value == pytest.approx(bf.max_value, abs=1e-9)
    index = np.ravel_multi_index(tuple(x), domain.sizes)
    assert bf.scores[index] == pytest.approx(bf.max_value, abs=1e-9)  # x achieves the max
    np.testing.assert_allclose(model.expectations(), bf.expectations, rtol=0, atol=1e-9)
    return model


@pytest.mark.parametrize("dense_limit", [64, 1])
@pytest.mark.parametrize("block", range(4))
def test_random_boolean_queries(block: int, dense_limit: int) -> None:
    """BDD queries (XOR, wide OR/AND, ranges, thresholds, random formulas) on ≤ 14 bits."""
    rng = np.random.default_rng(1000 + block)
    for _ in range(40):
        d = int(rng.integers(1, 15))
        domain = Domain.from_dict({f"b{i}": 2 for i in range(d)})
        mgr = bdd_manager(domain.names)
        queries = random_boolean_queries(domain, mgr, rng, int(rng.integers(1, 9)))
        theta = rng.normal(0, 2, size=len(queries))
        check(domain, queries, theta, dense_limit=dense_limit)


@pytest.mark.parametrize("dense_limit", [64, 1])
@pytest.mark.parametrize("block", range(3))
def test_random_predicate_queries(block: int, dense_limit: int) -> None:
    """Overlapping predicate conjunctions over a few categorical/integer attributes."""
    rng = np.random.default_rng(2000 + block)
    for _ in range(40):
        n = int(rng.integers(1, 5))
        domain = Domain.from_dict({f"a{i}": int(rng.integers(2, 7)) for i in range(n)})
        queries = random_predicate_queries(domain, rng, int(rng.integers(1, 10)))
        theta = rng.normal(0, 2, size=len(queries))
        check(domain, queries, theta, dense_limit=dense_limit)


def test_two_variable_or_is_not_overcounted() -> None:
    """docs/theory.md §4's trap: Z of exp(θ·(x0 ∨ x1)) is 1 + 3e^θ, not anything else."""
    domain = Domain.from_dict({"x0": 2, "x1": 2})
    mgr = bdd_manager(domain.names)
    for dense_limit in (64, 1):
        model = GibbsModel(domain, [disjunction(mgr, ["x0", "x1"])], [0.7], dense_limit=dense_limit)
        assert model.log_partition() == pytest.approx(math.log(1 + 3 * math.exp(0.7)), rel=1e-12)


def test_mixed_boolean_and_predicate_queries() -> None:
    rng = np.random.default_rng(7)
    for _ in range(30):
        d = int(rng.integers(2, 10))
        domain = Domain.from_dict({f"b{i}": 2 for i in range(d)})
        mgr = bdd_manager(domain.names)
        queries = random_boolean_queries(domain, mgr, rng, 3) + random_predicate_queries(
            domain, rng, 3)
        check(domain, queries, rng.normal(0, 1.5, size=len(queries)), dense_limit=1)


def test_large_attributes_use_atoms() -> None:
    """An integer attribute with 100 values and a few ranges: atoms keep tables small."""
    rng = np.random.default_rng(3)
    domain = Domain.from_dict({"age": 100, "sex": 2, "k": 7})
    queries = []
    for _ in range(6):
        lo, hi = sorted(rng.integers(0, 100, size=2))
        queries.append(Query.conjunction(domain, {
            "age": IntervalSet.range(int(lo), int(hi) + 1),
            "k": IntervalSet.points([int(rng.integers(0, 7)), int(rng.integers(0, 7))]),
            **({"sex": IntervalSet.points([1])} if rng.random() < 0.5 else {}),
        }))
    model = check(domain, queries, rng.normal(0, 2, size=len(queries)), dense_limit=1)
    assert model.structure.compiled.sizes[0] <= 13  # ≤ 2·6 + 1 atoms, not 100 codes


def test_constant_and_contradiction_queries() -> None:
    domain = Domain.from_dict({"a": 3, "b": 2})
    queries = [Query.tautology(), Query.conjunction(domain, {"a": IntervalSet.empty()}),
               Query.conjunction(domain, {"a": IntervalSet.points([1])})]
    check(domain, queries, [0.5, 3.0, -1.0])


def test_maximize_weighted_overlap_and_pricing() -> None:
    """γ_w = max_x Σ w_q q(x) (w ≥ 0) and pricing with signed weights, vs brute force."""
    rng = np.random.default_rng(11)
    for _ in range(30):
        domain = Domain.from_dict({f"a{i}": int(rng.integers(2, 5)) for i in range(4)})
        queries = random_predicate_queries(domain, rng, 8)
        for w in (rng.random(8), rng.normal(size=8)):
            bf = brute_force(domain, queries, w)
            value, x = maximize(domain, queries, w)
            assert value == pytest.approx(bf.max_value, abs=1e-12)
            assert sum(w[j] for j, q in enumerate(queries) if q(domain, x)) == pytest.approx(value)
