"""The rows' local search (tessera.estimation.polish) against brute-force recounts: its
bookkeeping (the reported D equals the D recounted from the output rows; a planted bookkeeping
bug is caught), descent (D never rises, rows stay in the domain, their number is kept), and its
effect (it lowers D well below the systematic rounding's on a model with one large clique)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera.estimation.polish as polish_module
from tessera.estimation.polish import polish


def recount(rows: np.ndarray, sizes: list[int], scopes: list[tuple[int, ...]],
            targets: list[np.ndarray]) -> float:
    """D = Σ_s ‖C_s(rows) − T_s‖₁ by brute force: every row's cell counted one by one."""
    total = 0.0
    for s, t in zip(scopes, targets, strict=True):
        counts = np.zeros(math.prod(sizes[a] for a in s))
        for r in rows:
            cell = 0
            for a in s:
                cell = cell * sizes[a] + int(r[a])
            counts[cell] += 1
        total += float(np.abs(counts - t).sum())
    return total


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, list[int], list[tuple[int, ...]],
                                       list[np.ndarray], int]:
    """d ≤ 6 attributes of 2–4 values, n ≤ 120 rows, 1–3-way scopes, targets from a random
    distribution over each scope scaled to n (not mutually consistent: the search must still
    descend)."""
    d = draw(st.integers(2, 6))
    sizes = draw(st.lists(st.integers(2, 4), min_size=d, max_size=d))
    n = draw(st.integers(1, 120))
    seed = draw(st.integers(0, 10**6))
    rng = np.random.default_rng(seed)  # not-privacy-noise: test data
    rows = np.stack([rng.integers(0, k, n) for k in sizes], axis=1)
    pool = [s for k in (1, 2, 3) for s in itertools.combinations(range(d), k)]
    scopes = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=8, unique=True))
    targets = []
    for s in scopes:
        p = rng.dirichlet(np.ones(math.prod(sizes[a] for a in s)))
        targets.append(n * p)
    return rows, sizes, scopes, targets, seed


@settings(max_examples=60, deadline=None)
@given(problems(), st.sampled_from([None, 1, 7, 50]))
def test_polish_descends_and_its_bookkeeping_is_exact(
        problem: tuple[np.ndarray, list[int], list[tuple[int, ...]], list[np.ndarray], int],
        sample: int | None) -> None:
    rows, sizes, scopes, targets, seed = problem
    res = polish(rows, sizes, scopes, targets, np.random.default_rng(seed), passes=6,
                 sample=sample)
    assert res.rows.shape == rows.shape
    assert all(0 <= res.rows[:, a].min() and res.rows[:, a].max() < k
               for a, k in enumerate(sizes))
    assert res.before == pytest.approx(recount(rows, sizes, scopes, targets), abs=1e-9)
    assert res.after == pytest.approx(recount(res.rows, sizes, scopes, targets), abs=1e-9)
    trail = [res.before, *res.history]
    assert all(b <= a + 1e-9 for a, b in zip(trail, trail[1:], strict=False))
    untouched = [a for a in range(len(sizes)) if not any(a in s for s in scopes)]
    for a in untouched:  # an attribute in no scope is never changed
        np.testing.assert_array_equal(res.rows[:, a], rows[:, a])


def test_a_planted_bookkeeping_bug_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step that moves a row without updating the cell counts (the bug the recount guards
    against) makes the reported D differ from the recount."""
    rng = np.random.default_rng(3)  # not-privacy-noise: test data
    sizes = [2, 3, 2, 2]
    rows = np.stack([rng.integers(0, k, 60) for k in sizes], axis=1)
    scopes = [(0, 1), (1, 2, 3), (0, 3)]
    targets = [60 * rng.dirichlet(np.ones(math.prod(sizes[a] for a in s))) for s in scopes]
    real = polish_module._attribute_step

    def stale(a, x, size, ks, strides, keys, err, share, rows):  # type: ignore[no-untyped-def]
        out = real(a, x, size, ks, strides, keys, err, share, rows)
        w = (x[0, a] + 1) % size  # row 0 moved (its cells too), its counts left as they were
        for k in ks:
            keys[k][0] += (w - x[0, a]) * strides[k][a]
        x[0, a] = w
        return out

    monkeypatch.setattr(polish_module, "_attribute_step", stale)
    res = polish(rows, sizes, scopes, targets, np.random.default_rng(0), passes=3)
    assert res.after != pytest.approx(recount(res.rows, sizes, scopes, targets), abs=1e-9)


def test_polish_undoes_the_rounding_of_a_large_clique() -> None:
    """Rows drawn by systematic rounding from one clique of 10 binary attributes (1,024 cells,
    n = 1,500): the search lowers D over all 120 three-way marginals by more than half."""
    from tessera.estimation.rows import rows_from_cliques

    rng = np.random.default_rng(5)  # not-privacy-noise: a random model
    d, n = 10, 1500
    table = rng.dirichlet(np.full(2**d, 0.5)).reshape((2,) * d)
    rows = rows_from_cliques([(tuple(range(d)), table)], [-1], [2] * d, n, rng)
    scopes = list(itertools.combinations(range(d), 3))
    targets = []
    for s in scopes:
        rest = tuple(a for a in range(d) if a not in s)
        targets.append(n * table.sum(axis=rest).ravel())
    for sample in (None, 256):
        res = polish(rows, [2] * d, scopes, targets, np.random.default_rng(0), passes=10,
                     sample=sample)
        assert res.after < 0.5 * res.before, (sample, res.before, res.history)


def test_polish_refuses_unsorted_scopes_and_wrong_targets() -> None:
    rows = np.zeros((4, 2), dtype=np.int64)
    with pytest.raises(ValueError, match="increasing"):
        polish(rows, [2, 2], [(1, 0)], [np.ones(4)], np.random.default_rng(0))
    with pytest.raises(ValueError, match="increasing"):
        polish(rows, [2, 2], [(0, 1)], [np.ones(3)], np.random.default_rng(0))
