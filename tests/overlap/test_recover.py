"""Structure recovered from text workloads: scope groups of disjoint cells become families, the
partition bound applies, and the witness is re-checked on the original queries."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tessera.overlap import max_overlap, recover
from tessera.overlap.recover import recover_families
from tessera.schema.domain import Domain
from tessera.workload.builders import marginals
from tessera.workload.workload import Workload

DOMAIN = Domain.from_dict({"a": 3, "b": 4, "c": 2, "d": 3})


def _shuffled(wl: Workload, seed: int, extra: list[str] = ()) -> Workload:
    rng = np.random.default_rng(seed)
    qs = list(wl.queries) + list(Workload.from_sql(list(extra), DOMAIN).queries) if extra \
        else list(wl.queries)
    order = rng.permutation(len(qs))
    return Workload.of(DOMAIN, [qs[i] for i in order])


def _brute(wl: Workload, w: np.ndarray, substitute: bool = False) -> float:
    points = list(itertools.product(*(range(a.size) for a in DOMAIN)))
    inc = np.array([[q(DOMAIN, x) for q in wl.queries] for x in points])
    if not substitute:
        return float((inc @ w).max())
    return float(max(((inc[i] ^ inc[j]) @ w) for i in range(len(points))
                     for j in range(len(points))))


def test_recover_finds_the_marginals_in_any_order() -> None:
    wl = _shuffled(marginals(DOMAIN, 2), seed=1)
    rec = recover_families(DOMAIN, wl.queries, np.ones(len(wl)))
    assert rec is not None and rec.n_recovered == len(wl)
    assert len(rec.workload.partitions) == 6 and len(rec.workload.queries) == 0
    # every original query appears exactly once among the cells
    assert sorted(i for i in rec.original.tolist() if i >= 0) == list(range(len(wl)))


def test_overlapping_groups_are_not_recovered() -> None:
    wl = Workload.from_sql(["a <= 1", "a >= 1", "b = 0", "b = 1"], DOMAIN)  # a-group overlaps
    rec = recover_families(DOMAIN, wl.queries, np.ones(len(wl)))
    assert rec is None  # only half of the queries form disjoint families


@pytest.mark.parametrize("neighbours", ["add-remove", "substitute"])
@pytest.mark.parametrize("comp", ["pure", "zcdp"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recovered_route_equals_brute_force(neighbours: str, comp: str, seed: int,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recover, "RECOVER_MIN_QUERIES", 10)
    monkeypatch.setattr(recover, "RECOVER_MIN_SHARE", 0.5)
    rng = np.random.default_rng(seed)
    base = marginals(DOMAIN, 2, ["a", "b", "c"])
    wl = _shuffled(base, seed, extra=["a = 1 AND d >= 1", "b <= 2"])
    w = rng.integers(1, 4, len(wl)).astype(float)  # per-cell weights, not uniform
    res = max_overlap(wl, w, comp=comp, neighbours=neighbours)
    assert res.method.startswith("recovered families")
    true = _brute(wl, w * w if comp == "zcdp" else w, neighbours == "substitute")
    assert res.score_bound >= true - 1e-9
    if res.exact:
        assert res.score_bound == pytest.approx(true, rel=1e-9)
    # without recovery the ordinary solvers agree on the exact value
    ref = max_overlap(wl, w, comp=comp, neighbours=neighbours, method="branch-bound")
    if ref.exact and res.exact:
        assert res.score_bound == pytest.approx(ref.score_bound, rel=1e-9)


def test_uniform_marginal_text_is_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recover, "RECOVER_MIN_QUERIES", 10)
    wl = _shuffled(marginals(DOMAIN, 3), seed=4)
    res = max_overlap(wl)
    assert res.exact and res.bound == 4.0  # C(4, 3) marginals: one cell each per row
    assert len(res.witness.queries) == 4
