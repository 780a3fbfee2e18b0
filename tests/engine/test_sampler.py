"""Perfect sampling: χ² goodness of fit against the exact distribution (docs/theory.md §4, paper 2
§6)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.stats import chi2

from tessera.engine import GibbsModel, bdd_manager
from tessera.schema.domain import Domain
from tests.oracles.engine import brute_force

from .test_bruteforce import random_boolean_queries, random_predicate_queries


def chi2_pvalue(samples: np.ndarray, domain: Domain, prob: np.ndarray) -> float:
    """Pearson χ² of the sample histogram against ``prob`` (cells with P > 0)."""
    idx = np.ravel_multi_index(tuple(samples.T.astype(np.int64)), domain.sizes)
    counts = np.bincount(idx, minlength=len(prob))
    assert counts[prob == 0].sum() == 0, "sampled a point of probability 0"
    keep = prob > 0
    expected = prob[keep] * len(samples)
    stat = float(((counts[keep] - expected) ** 2 / expected).sum())
    return float(chi2.sf(stat, df=keep.sum() - 1))


def instance(seed: int):  # noqa: ANN201
    rng = np.random.default_rng(seed)
    domain = Domain.from_dict({f"b{i}": 2 for i in range(6)} | {"c": 3})
    bits = domain.project([f"b{i}" for i in range(6)])
    mgr = bdd_manager(bits.names)
    queries = random_boolean_queries(bits, mgr, rng, 5) + random_predicate_queries(domain, rng, 4)
    return domain, queries, rng.normal(0, 1.5, size=len(queries))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chi_square_goodness_of_fit(seed: int) -> None:
    domain, queries, theta = instance(seed)
    bf = brute_force(domain, queries, theta)
    model = GibbsModel(domain, queries, theta, dense_limit=1)
    samples = model.sample(60_000, np.random.default_rng(100 + seed))
    assert samples.shape == (60_000, len(domain))
    # with a fixed seed this is deterministic; under a correct sampler P[p < 1e-4] = 1e-4
    assert chi2_pvalue(samples, domain, bf.prob) > 1e-4


def test_chi_square_rejects_a_wrong_conditional() -> None:
    """The same test fails when one conditional of the sampler is replaced by a fair coin."""
    domain, queries, theta = instance(0)
    bf = brute_force(domain, queries, theta)
    model = GibbsModel(domain, queries, theta, dense_limit=1)
    good = model.sampler()
    cdfs = list(good.cdfs)
    prog = model.structure.program
    # the first step (from the root) whose variable has 2 values and a non-empty separator
    t = next(t for t in reversed(range(len(cdfs))) if cdfs[t].shape[0] == 1
             and len(prog.bags[t]) > 1 and np.abs(cdfs[t] - 0.5).max() > 0.2)
    cdfs[t] = np.full_like(cdfs[t], 0.5)
    bad = dataclasses.replace(good, cdfs=tuple(cdfs))
    xc = bad.sample(60_000, np.random.default_rng(100))
    samples = np.stack([model.structure.compiled.classes[i].expand(xc[i].astype(np.int64),
                                                                    np.random.default_rng(1))
                        for i in range(len(domain))], axis=1)
    assert chi2_pvalue(samples, domain, bf.prob) < 1e-6


def test_injected_generator_is_reproducible_and_rows_vary() -> None:
    domain, queries, theta = instance(1)
    model = GibbsModel(domain, queries, theta)
    a = model.sample(1000, np.random.default_rng(5))
    b = model.sample(1000, np.random.default_rng(5))
    c = model.sample(1000, np.random.default_rng(6))
    np.testing.assert_array_equal(a, b)
    assert (a != c).any()


def test_samples_expand_atoms_uniformly() -> None:
    """Within an atom (codes no query distinguishes) samples are uniform."""
    from tessera.schema.intervals import IntervalSet
    from tessera.workload.query import Query

    domain = Domain.from_dict({"age": 50, "s": 2})
    q = Query.conjunction(domain, {"age": IntervalSet.range(10, 20), "s": IntervalSet.points([1])})
    model = GibbsModel(domain, [q], [2.0])
    samples = model.sample(200_000, np.random.default_rng(0))
    bf = brute_force(domain, [q], [2.0])
    assert chi2_pvalue(samples, domain, bf.prob) > 1e-4
