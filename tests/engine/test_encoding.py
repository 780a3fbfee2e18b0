"""Categorical attributes natively and through a binary encoding give the same distribution."""

from __future__ import annotations

import numpy as np
import pytest

from tessera.engine import BinaryEncoding, GibbsModel
from tessera.schema.domain import Domain
from tests.oracles.engine import all_points

from .test_bruteforce import random_predicate_queries


@pytest.mark.parametrize("seed", range(6))
def test_native_and_binary_encoding_agree(seed: int) -> None:
    rng = np.random.default_rng(seed)
    domain = Domain.from_dict({"a": 3, "b": 5, "c": 2, "d": 6})
    queries = random_predicate_queries(domain, rng, 6)
    theta = rng.normal(0, 2, size=len(queries))
    native = GibbsModel(domain, queries, theta)
    enc = BinaryEncoding.of(domain)
    binary = GibbsModel(enc.binary, [enc.query(q) for q in queries], theta,
                        constraints=enc.validity(), dense_limit=1 + seed % 2 * 63)
    assert binary.log_partition() == pytest.approx(native.log_partition(), rel=1e-10)
    np.testing.assert_allclose(binary.expectations(), native.expectations(), atol=1e-10)
    X = all_points(domain)
    np.testing.assert_allclose(binary.log_probability(enc.encode(X)),
                               native.log_probability(X), atol=1e-9)
    np.testing.assert_array_equal(enc.decode(enc.encode(X)), X)
    rows = enc.decode(binary.sample(5000, np.random.default_rng(seed)))
    assert (rows < np.array(domain.sizes)).all()  # invalid codes are never sampled
    v_nat, _ = native.max_assignment()
    v_bin, x_bin = binary.max_assignment()
    assert v_bin == pytest.approx(v_nat, abs=1e-9)
    assert (enc.decode(x_bin[None])[0] < np.array(domain.sizes)).all()


def test_validity_constraints_count_valid_codes() -> None:
    domain = Domain.from_dict({"a": 3, "b": 5})
    enc = BinaryEncoding.of(domain)
    model = GibbsModel(enc.binary, [], constraints=enc.validity())
    assert model.log_partition() == pytest.approx(np.log(15), rel=1e-12)
