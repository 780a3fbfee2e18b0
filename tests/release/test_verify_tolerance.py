"""``verify`` of optimised splits does not need bit-identical optimiser output, and stays strict.

The privacy proof comes only from the certificate's stated scales, re-proved by the exact
re-check; the split's *choice* (that the stated scales are the optimiser's, and the candidates'
expected errors) is compared with the recomputation to :data:`CHOICE_RTOL` (relative 1e-6).
Another BLAS or CPU moves an iterative optimiser's last digits: simulated here by perturbing the
recomputed optimiser output at verify time by a relative 1e-12 and 1e-8 — every SciPy
``minimize`` of ``--objective max`` (L-BFGS of the smoothed max, SLSQP of the epigraph, the
trees' level costs), and the cutting-plane optimal split of predicate workloads. The certificate
still verifies. (The minimax splits' shares are rounded to 6 significant digits before use, which
absorbs such perturbations — they passed before too; the cutting-plane split is used unrounded,
and its 1e-8 case failed when verify compared every float to 1e-9.) A stated scale moved by a
relative 1e-3 either way (digest recomputed, so only the content is judged) fails.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
import scipy.optimize

import tessera.strategy.direct as direct
import tessera.strategy.epigraph as epigraph
import tessera.strategy.tree_allocation as tree_allocation
from tessera.release import Budget, answer
from tessera.release.certificate import CHOICE_RTOL, digest, verify_certificate
from tessera.schema.domain import Domain
from tessera.workload.families import Partition
from tessera.workload.ranges import RangeFamily
from tessera.workload.workload import Workload


def _perturbed(fn: Callable[..., Any], rel: float, field: str) -> Callable[..., Any]:
    """``fn`` whose result's ``field`` is multiplied by 1 + rel·u, u uniform in [-1, 1]
    (seeded): what another platform's last digits do to an optimiser's output."""
    rng = np.random.default_rng(11)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        v = np.asarray(getattr(out, field), dtype=np.float64)
        moved = v * (1 + rel * rng.uniform(-1, 1, v.shape))
        if isinstance(out, scipy.optimize.OptimizeResult):
            out[field] = moved
            return out
        return dataclasses.replace(out, **{field: moved})

    return wrapped


def _minimax_everywhere(monkeypatch: pytest.MonkeyPatch, rel: float) -> None:
    """Every SciPy ``minimize`` the strategies call (L-BFGS of the smoothed max, SLSQP of the
    epigraph, the trees' level costs) returns its point moved by a relative ``rel``."""
    moved = _perturbed(scipy.optimize.minimize, rel, "x")
    monkeypatch.setattr(scipy.optimize, "minimize", moved)
    for module in (epigraph, tree_allocation):
        monkeypatch.setattr(module, "minimize", moved)


def _edited(cert: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    doc = json.loads(json.dumps(cert))
    edit(doc)
    doc["digest"] = digest(doc)
    return doc


def _scale(factor: float) -> Callable[[dict[str, Any]], None]:
    """Move the first stated scale (a predicate query's, else a family's) by ``factor``."""
    def edit(doc: dict[str, Any]) -> None:
        q = next(q for q in [*doc["queries"], *doc["families"]] if q["scale"] is not None)
        q["scale"] *= factor

    return edit


def _frame(dom: Domain, n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({a.name: rng.integers(0, a.size, n) for a in dom})


MDOM = Domain.from_dict({"a": 2, "b": 10, "c": 12, "d": 3})
SPEC = [(("a",), 1.0), (("b", "c"), 2.0), (("a", "c", "d"), 1.0), (("b",), 0.5),
        (("b", "c"), 0.5)]  # (tests/strategy/test_objective.py: the minimax is no start)
XDOM = Domain.from_dict({"x": 64})


def _marginals() -> Workload:
    return Workload.of_families(MDOM, [Partition.marginal(MDOM, list(sc), w, name=f"f{i}")
                                       for i, (sc, w) in enumerate(SPEC)])


CASES = {
    "marginals, max (minimax split)": (_marginals, {"strategy": "identity", "objective": "max"}),
    "residuals, max (minimax split)": (_marginals, {"strategy": "residual", "objective": "max"}),
    "tree, max (minimax level costs)": (
        lambda: Workload.of_ranges(XDOM, [RangeFamily.of(XDOM, ["x"], "ranges")]),
        {"strategy": "hierarchical", "objective": "max"}),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("rel", [1e-12, 1e-8])
def test_minimax_certificates_verify_when_the_optimiser_moves(
        case: str, rel: float, monkeypatch: pytest.MonkeyPatch) -> None:
    make, options = CASES[case]
    wl = make()
    rel_ = answer(_frame(wl.domain), wl, Budget.of(rho=0.5), **options)
    cert = json.loads(json.dumps(rel_.certificate))
    assert cert["strategy"].get("max_split") == "minimax"
    assert verify_certificate(cert, wl).ok, verify_certificate(cert, wl).differences
    _minimax_everywhere(monkeypatch, rel)
    result = verify_certificate(cert, wl)
    assert result.ok, result.differences
    for factor in (1 + 1e-3, 1 - 1e-3):  # a stated scale moved: the choice (and the proof)
        assert not verify_certificate(_edited(cert, _scale(factor)), wl).ok


@pytest.mark.parametrize("rel", [1e-12, 1e-8])
def test_optimal_predicate_split_verifies_when_the_optimiser_moves(
        rel: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """Predicate queries of one weight under ``total``, one of them twice (so a strategy is
    chosen: ``direct`` with duplicates measured once): the cutting-plane split (kept only when
    it beats the shares), recomputed with its scales perturbed."""
    dom = Domain.from_dict({"a": 6, "b": 5})
    wl = Workload.from_sql(["a <= 2", "a >= 1 AND b <= 3", "b = 0", "a = 2 AND b >= 1",
                            "b <= 1", "a = 5", "a >= 3 AND b >= 2", "b = 4", "b = 0"], dom,
                           names=[f"q{i}" for i in range(9)])
    rel_ = answer(_frame(dom), wl, Budget.of(rho=0.5))
    cert = json.loads(json.dumps(rel_.certificate))
    assert cert["strategy"]["direct_split"] == "optimal"
    assert verify_certificate(cert, wl).ok, verify_certificate(cert, wl).differences
    monkeypatch.setattr(direct, "optimal_split",
                        _perturbed(direct.optimal_split, rel, "scales"))
    result = verify_certificate(cert, wl)
    assert result.ok, result.differences
    for factor in (1 + 1e-3, 1 - 1e-3):
        assert not verify_certificate(_edited(cert, _scale(factor)), wl).ok


def test_the_tolerance_is_the_documented_one() -> None:
    from pathlib import Path

    assert CHOICE_RTOL == 1e-6
    doc = (Path(__file__).parents[2] / "docs" / "certificate.md").read_text()
    assert "CHOICE_RTOL" in doc and "1e-6" in doc
