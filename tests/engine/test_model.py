"""GibbsModel API: weight updates without rebuild, errors, constraints, dtypes."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.engine import GibbsModel, bdd_manager, disjunction, log_partition
from tessera.errors import QueryError
from tessera.schema.domain import Domain
from tests.oracles.engine import brute_force

from .test_bruteforce import random_predicate_queries


def test_with_theta_shares_structure_and_matches_a_fresh_build() -> None:
    rng = np.random.default_rng(4)
    domain = Domain.from_dict({f"a{i}": 3 for i in range(4)})
    queries = random_predicate_queries(domain, rng, 7)
    model = GibbsModel(domain, queries, rng.normal(size=7))
    theta2 = rng.normal(size=7)
    updated = model.with_theta(theta2)
    assert updated.structure is model.structure  # no rebuild
    fresh = GibbsModel(domain, queries, theta2)
    assert updated.log_partition() == pytest.approx(fresh.log_partition(), rel=1e-12)
    one = model.with_weight(3, 5.0)
    assert one.structure is model.structure
    assert one.log_partition() == pytest.approx(
        brute_force(domain, queries, one.theta).log_z, rel=1e-12)
    assert model.theta[3] != 5.0  # the original is unchanged (immutable)


def test_theta_must_be_finite_and_sized() -> None:
    domain = Domain.from_dict({"a": 2})
    q = random_predicate_queries(domain, np.random.default_rng(0), 2)
    with pytest.raises(QueryError):
        GibbsModel(domain, q, [1.0])
    with pytest.raises(QueryError):
        GibbsModel(domain, q, [1.0, np.inf])


def test_boolean_query_needs_binary_attributes() -> None:
    domain = Domain.from_dict({"a": 3, "b": 2})
    mgr = bdd_manager(["a", "b"])
    with pytest.raises(QueryError, match="binary"):
        GibbsModel(domain, [disjunction(mgr, ["a", "b"])])
    with pytest.raises(QueryError, match="not an attribute"):
        GibbsModel(Domain.from_dict({"b": 2}), [disjunction(mgr, ["a", "b"])])


def test_infeasible_constraints() -> None:
    domain = Domain.from_dict({"a": 2, "b": 2})
    mgr = bdd_manager(["a", "b"])
    a, na = disjunction(mgr, {"a": 1}), disjunction(mgr, {"a": 0})
    model = GibbsModel(domain, [], constraints=[a, na])
    assert model.log_partition() == -np.inf
    with pytest.raises(QueryError):
        model.max_assignment()


def test_uniform_model_and_sample_shape() -> None:
    domain = Domain.from_dict({"a": 300, "b": 2})
    model = GibbsModel(domain, [])
    assert model.log_partition() == pytest.approx(np.log(600))
    s = model.sample(7, np.random.default_rng(0))
    assert s.shape == (7, 2) and s.dtype == np.int16 and (s[:, 0] < 300).all()
    assert log_partition(domain, [], []) == pytest.approx(np.log(600))
    assert model.sample(5, np.random.default_rng(0), dtype=np.int64).dtype == np.int64
