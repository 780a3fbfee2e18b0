"""tessera.workload.value_classes: the one construction of value classes (engine, overlap,
counts)."""

from __future__ import annotations

import doctest

import numpy as np
import pytest

import tessera.workload.value_classes as value_classes_module
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.query import Query
from tessera.workload.value_classes import value_classes, workload_value_classes


def test_docstring_example() -> None:
    result = doctest.testmod(value_classes_module)
    assert result.attempted > 0 and result.failed == 0


def random_coverages(rng: np.random.Generator, size: int) -> list[IntervalSet]:
    """Ranges and sets, some reaching outside [0, size), some repeated."""
    covs: list[IntervalSet] = []
    for _ in range(int(rng.integers(0, 12))):
        if rng.random() < 0.5:
            lo, hi = sorted(rng.integers(-2, size + 3, size=2))
            covs.append(IntervalSet.range(int(lo), int(hi)))
        else:
            codes = np.flatnonzero(rng.random(size + 4) < 0.4) - 2
            covs.append(IntervalSet.points(int(c) for c in codes))
        if rng.random() < 0.3:
            covs.append(covs[int(rng.integers(0, len(covs)))])
    return covs


@pytest.mark.parametrize("batch_cells", [1, 64, 1 << 24])
def test_classes_are_the_membership_patterns(monkeypatch, batch_cells: int) -> None:  # noqa: ANN001
    """Against the code-by-code membership matrix: codes share a class iff they lie in the same
    predicates (merged), classes are numbered by smallest code, and membership, n_codes,
    representative, contains and expand agree; unmerged classes are intervals in code order."""
    monkeypatch.setattr(value_classes_module, "BATCH_CELLS", batch_cells)
    rng = np.random.default_rng(3)
    for _ in range(150):
        size = int(rng.integers(1, 50))
        covs = random_coverages(rng, size)
        codes = np.arange(size)
        brute = (np.stack([c.contains_array(codes) for c in covs], axis=1) if covs
                 else np.zeros((size, 0), dtype=bool))
        _, first, inverse = np.unique(brute, axis=0, return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first)] = np.arange(len(first))
        expected = rank[inverse.ravel()]

        vc = value_classes(size, covs)
        assert vc.n_predicates == len(covs)
        np.testing.assert_array_equal(vc.class_of(codes), expected)
        np.testing.assert_array_equal(vc.n_codes, np.bincount(expected))
        np.testing.assert_array_equal(vc.representative, np.sort(first))
        np.testing.assert_array_equal(vc.membership[vc.class_of(codes)], brute)
        for i, c in enumerate(covs):
            np.testing.assert_array_equal(vc.contains(c), vc.membership[:, i])
        picked = rng.integers(0, vc.n_classes, size=30)
        np.testing.assert_array_equal(vc.class_of(vc.expand(picked, rng)), picked)

        for kw in ({"merge": False}, {"split_all": True}):
            other = value_classes(size, covs, **kw)
            cls = other.class_of(codes)
            assert np.all(np.diff(cls) >= 0)  # intervals in code order
            np.testing.assert_array_equal(other.membership[cls], brute)
            if kw.get("split_all"):
                np.testing.assert_array_equal(cls, codes)


def test_workload_value_classes_index_the_constraining_queries() -> None:
    domain = Domain.from_dict({"a": 10, "b": 4, "c": 3})
    queries = [
        Query.conjunction(domain, {"b": IntervalSet.points([1])}),
        Query.conjunction(domain, {"a": IntervalSet.range(2, 6), "b": IntervalSet.points([1])}),
        Query.conjunction(domain, {"a": IntervalSet.range(0, 3)}),
    ]
    attrs = workload_value_classes(domain, queries)
    assert [(a.name, a.position, a.queries.tolist()) for a in attrs] == [
        ("a", 0, [1, 2]), ("b", 1, [0, 1])]
    b = attrs[1].classes
    assert b.n_classes == 2 and b.predicate_row.tolist() == [0, 0]  # one distinct predicate
    assert b.membership.tolist() == [[False, False], [True, True]]
    a = attrs[0].classes
    assert a.n_codes.tolist() == [2, 1, 3, 4]  # [0,2) | {2} | [3,6) | [6,10)
