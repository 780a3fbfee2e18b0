"""``answer(..., estimate="model")``: the GReM-LNN step on a release (release.model_estimate)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tessera.errors import TesseraError
from tessera.release import Budget, answer
from tessera.schema.domain import Domain
from tessera.workload.families import k_way_marginals
from tessera.workload.workload import Workload

DOMAIN = Domain.from_dict({"a": 2, "b": 6, "c": 3, "d": 4})


def _frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({a.name: rng.integers(0, a.size, n) for a in DOMAIN})


@pytest.mark.parametrize("strategy", ["auto", "direct", "residual", "contrasts"])
def test_model_answers_nonnegative_consistent(strategy: str) -> None:
    wl = Workload.of_families(DOMAIN, k_way_marginals(DOMAIN, 2))
    if strategy == "contrasts":  # the GLS choice (residual contrasts), then the model step
        rel = answer(_frame(), wl, Budget.of(rho=0.005), strategy="residual",
                     postprocess=["model"], seed=3)
        assert rel.strategy is not None and rel.strategy.choice.chosen.contrasts is not None
    else:
        rel = answer(_frame(), wl, Budget.of(rho=0.005), strategy=strategy, estimate="model",
                     seed=3)
        if strategy == "residual":  # for the model: marginals measured, not contrasts
            assert rel.strategy is not None and rel.strategy.choice.chosen.contrasts is None
            assert rel.certificate["strategy"]["estimate"] == "model"
    got = rel.postprocessed["model"]
    assert rel.answers is got
    assert np.all(got >= 0)
    assert "no interval is proven" in rel.postprocessing_notes["model"]
    assert "no interval is proven" in rel.certificate["postprocessing"]["model"]
    # consistency: every family's total is the same, and shared 1-way marginals agree
    starts = wl.family_starts
    fams = [got[starts[k]:starts[k + 1]].reshape([DOMAIN[a].size for a in p.attributes])
            for k, p in enumerate(wl.partitions)]
    totals = [f.sum() for f in fams]
    np.testing.assert_allclose(totals, totals[0], rtol=1e-9)
    ones: dict[str, np.ndarray] = {}
    for p, f in zip(wl.partitions, fams):
        for i, a in enumerate(p.attributes):
            m = f.sum(axis=1 - i)
            if a in ones:
                np.testing.assert_allclose(m, ones[a], rtol=1e-7, atol=1e-7)
            ones[a] = m
    # a small budget makes the unbiased answers negative somewhere: the step did something
    base = rel.strategy.answers if rel.strategy is not None else rel.noisy
    assert np.any(base < 0)


def test_model_not_applied_to_predicates() -> None:
    wl = Workload.from_sql(["a = 1 AND b >= 2", "c <= 1"], DOMAIN)
    rel = answer(_frame(), wl, Budget.of(rho=0.5), estimate="model", seed=1)
    assert rel.postprocessing_notes["model"].startswith("model estimate not applied")


def test_unknown_estimate() -> None:
    wl = Workload.from_sql(["a = 1"], DOMAIN)
    with pytest.raises(TesseraError, match="unknown estimate 'mle'"):
        answer(_frame(), wl, Budget.of(rho=0.5), estimate="mle", seed=1)
