"""Reads of a fitted adaptive model stay within the engine's memory limit.

``FittedSynthesizer.answers`` reads every family from its marginal P_θ(x_s) (a measured scope,
a clique, the clique tree's messages, else the model grown by s under the guard), and a
predicate query outside the model's cliques from an engine pass whose plan — tables *and* the
junction tree's compilation — passed the guard: each read is answered within the limit or
refused by a :class:`~tessera.errors.ResourceError` that names the limit and gives a hint,
before anything of its size is allocated. Peaks are measured with ``tracemalloc`` (numpy
reports its buffers to it); the answers are checked against the model's explicit joint.
"""

from __future__ import annotations

import itertools
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

import tessera as ts
from tessera.engine.junction import (
    check_junction,
    compile_bytes,
    junction_compile_bytes,
    junction_tree,
)
from tessera.errors import ResourceError
from tessera.workload.builders import marginal_families

#: What a read may allocate beyond the engine's own arrays: the Python objects of its plans
#: (layouts, elimination graphs, automata), measured at ≤ 1.4 MiB here.
PLANNING_SLACK = 2 << 20


@pytest.fixture(scope="module")
def fitted() -> ts.FittedSynthesizer:
    """A seeded run on all 21 two-way marginals of 7 attributes (6 values each): 10 rounds
    measure 3 of them, so 18 families lie outside the model's cliques."""
    rng = np.random.default_rng(0)
    dom = ts.Domain.from_dict({f"x{i}": 6 for i in range(7)})
    z = rng.integers(0, 6, size=3000)
    frame = pd.DataFrame({a: np.where(rng.random(3000) < 0.6, z, rng.integers(0, 6, size=3000))
                          for a in dom.names})
    return ts.Synthesizer("adaptive", rounds=10).fit(frame, marginal_families(dom, 2),
                                                     ts.Budget.of(rho=1.0), seed=1)


def _traced(read: Callable[[], Any]) -> tuple[Any, int]:
    """(what ``read`` returns, the peak bytes it allocated)."""
    tracemalloc.start()
    try:
        out = read()
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _joint(f: ts.FittedSynthesizer) -> np.ndarray:
    res = f.result
    joint = res.model.joint(res.fit.theta, limit=10**6)
    assert joint is not None
    return joint


def test_families_are_read_from_their_marginals_within_the_limit(
        fitted: ts.FittedSynthesizer) -> None:
    """Before: the families' 648 cells outside the cliques went into one engine pass as features
    of their own; the pass's plan fitted 1 MiB but compiling its junction tree peaked at
    2.5 MiB (599 MiB at a 16 MiB limit), and 28,699 such cells on Adult asked > 23 GiB."""
    res = fitted.result
    w = fitted.workload
    outside = [p for p in w.partitions
               if res.model.container(tuple(w.domain.index(a) for a in p.attributes)) is None]
    assert len(outside) >= 15
    limit = 1 << 20
    got, peak = _traced(lambda: fitted.answers(memory_limit=limit))
    assert peak <= limit  # measured 0.1 MiB
    joint = _joint(fitted)
    want = []
    for p in w.partitions:
        axes = [w.domain.index(a) for a in p.attributes]
        table = joint.sum(axis=tuple(i for i in range(joint.ndim) if i not in axes))
        want.append(np.transpose(table, np.argsort(np.argsort(axes))).ravel())
    np.testing.assert_allclose(got, np.concatenate(want), rtol=0, atol=1e-12)


def _queries(dom: ts.Domain, n: int) -> tuple[ts.Workload, list[tuple[int, int, int, int]]]:
    """n conjunctions ``x_a < u AND x_b >= l`` over attributes 1–6 (outside the cliques)."""
    rng = np.random.default_rng(3)
    spec = []
    for _ in range(n):
        a, b = sorted(int(v) for v in rng.choice(range(1, 7), size=2, replace=False))
        spec.append((a, int(rng.integers(1, 6)), b, int(rng.integers(1, 6))))
    sql = [f"x{a} < {u} AND x{b} >= {lo}" for a, u, b, lo in spec]
    return ts.Workload.from_sql(sql, dom, names=[f"q{j}" for j in range(n)]), spec


@pytest.mark.parametrize("limit", [64 << 10, 4 << 20])
def test_queries_are_answered_within_the_limit_or_refused_before_allocating(
        fitted: ts.FittedSynthesizer, limit: int) -> None:
    """60 conjunctions read by engine passes: at 4 MiB answered (exactly) within the limit,
    at 64 KiB refused by the guard — naming the query, the limit and a hint. Before: both
    answered, far past the limit (the plans priced the tables, not the junction
    tree's index maps: one entry per entry of each factor's host clique)."""
    w, spec = _queries(fitted.domain, 60)
    try:
        got, peak = _traced(lambda: fitted.answers(w, memory_limit=limit))
    except ResourceError as e:
        assert limit == 64 << 10  # measured: the 4 MiB reads all fit
        assert "limit 64.0 KiB" in e.message and e.message.startswith("query ")
        assert e.hint
        return
    assert peak <= limit + PLANNING_SLACK  # measured 2.8 MiB at 4 MiB
    joint = _joint(fitted)
    for j, (a, u, b, lo) in enumerate(spec):
        pair = joint.sum(axis=tuple(i for i in range(joint.ndim) if i not in (a, b)))
        assert got[j] == pytest.approx(pair[:u, lo:].sum(), abs=1e-12)


def test_the_compilation_guard_prices_the_junction_trees_index_maps() -> None:
    """One clique of 2^12 entries hosting all 66 pairs of 12 binary variables: the tables
    are 98 KiB, and the compilation builds no index array as large as a table (the passes
    broadcast and sum): a few entries per axis of each term. The guard's price
    (:func:`compile_bytes` of the index entries) bounds the measured peak, and a limit below
    it is refused before the schedule is built — by the tree and by its plan alike."""
    sizes = [2] * 12
    scopes = list(itertools.combinations(range(12), 2))
    price = junction_compile_bytes(sizes, scopes)
    assert price == compile_bytes(66 * 13 + 1)  # the pairs' host (12 axes), the root's child
    tree, peak = _traced(lambda: junction_tree(sizes, scopes))
    assert tree.table_entries == 4096 + 1
    assert peak <= price  # measured 87 KiB against the price's 644 KiB
    limit = price // 2  # above the tables (3 · 8 B per entry: 96 KiB)
    for build in (lambda: junction_tree(sizes, scopes, memory_limit=limit),
                  lambda: check_junction(sizes, scopes, memory_limit=limit)):
        with pytest.raises(ResourceError, match="compiling the junction tree needs") as e:
            build()
        assert e.value.hint
    _, refused = _traced(lambda: pytest.raises(ResourceError, junction_tree, sizes, scopes,
                                               memory_limit=limit))
    assert refused < limit / 4  # nothing of the compilation's size was allocated
