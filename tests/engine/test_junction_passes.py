"""The junction tree's broadcast-and-sum passes against brute-force enumeration and against
the sparse 0/1 products they replace (:mod:`tessera.engine.junction_sparse`), to float rounding
(relative 1e-12), on random scopes with −∞ entries; and a planted axis-order bug is caught."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tessera.engine import junction_tree
from tessera.engine.junction import JunctionTree, Term
from tessera.engine.junction_sparse import sparse_junction

from .test_junction import brute

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
REL = 1e-12


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, ...]], np.ndarray]:
    """≤ 12 variables of 2–4 values (≤ 4096 points), up to 14 scopes of ≤ 4 variables (some
    repeated, some empty), flat N(0, 3) log-potentials with some −∞ entries."""
    d = draw(st.integers(1, 12))
    sizes = [draw(st.integers(2, 4)) for _ in range(d)]
    while math.prod(sizes) > 4096:
        sizes[sizes.index(max(sizes))] -= 1
    n = draw(st.integers(1, 14))
    scopes = [tuple(draw(st.permutations(range(d)))[: draw(st.integers(0, min(d, 4)))])
              for _ in range(n)]
    if n > 1 and draw(st.booleans()):
        scopes.append(scopes[0])
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))  # not-privacy-noise
    total = sum(math.prod(sizes[v] for v in sc) for sc in scopes)
    flat = rng.normal(0, 3, size=total)
    if draw(st.booleans()):
        flat[rng.random(total) < 0.15] = -np.inf
    return sizes, scopes, flat


def close(got: float | np.ndarray, want: float | np.ndarray) -> None:
    """Equal to float rounding: relative 1e-12 (absolute 1e-14 next to 0)."""
    np.testing.assert_allclose(got, want, rtol=REL, atol=1e-14)


@SETTINGS
@given(problems())
def test_passes_equal_brute_force_and_the_sparse_products(
        problem: tuple[list[int], list[tuple[int, ...]], np.ndarray]) -> None:
    sizes, scopes, flat = problem
    jt = junction_tree(sizes, scopes)
    ref = sparse_junction(jt)
    log_z, margs = brute(sizes, scopes, jt.split(flat))
    if not math.isfinite(log_z):
        assert jt.log_partition(flat) == -math.inf == ref.log_partition(flat)
        return
    got_z, got = jt.infer(flat)
    want_z, want = ref.infer(flat)
    close(got_z, want_z)
    close(got_z, log_z)
    close(jt.log_partition(flat), want_z)
    close(got, want)
    close(got, np.concatenate([np.ravel(m) for m in margs]))


def test_the_wide_real_shapes() -> None:
    """A width-7 clique hosting all pairs of its variables beside a chain of cliques (the
    prefix tables, union tables and several levels), with −∞ entries: equal to the sparse
    products."""
    rng = np.random.default_rng(7)  # not-privacy-noise
    sizes = [2, 3, 4, 2, 3, 2, 4, 3, 2, 2, 3, 4]
    scopes = [(a, b) for a in range(7) for b in range(a + 1, 7)]
    scopes += [(6, 7, 8), (8, 9), (9, 10, 11), (11,), (5, 11), (3,)]
    jt = junction_tree(sizes, scopes)
    assert jt.width >= 6 and jt.depth >= 2
    ref = sparse_junction(jt)
    for _ in range(5):
        flat = rng.normal(0, 3, size=jt.n_entries)
        flat[rng.random(jt.n_entries) < 0.05] = -np.inf
        got_z, got = jt.infer(flat)
        want_z, want = ref.infer(flat)
        close(got_z, want_z)
        close(got, want)
        log_z, margs = brute(sizes, scopes, jt.split(flat))
        close(got_z, log_z)
        close(got, np.concatenate([np.ravel(m) for m in margs]))


def planted(jt: JunctionTree) -> JunctionTree:
    """``jt`` with one factor term of one clique reading its table with two axes swapped
    (its read strides permuted): a wrong axis order for one factor."""
    levels = []
    done = False
    for lv in jt.levels:
        plans = []
        for plan in lv.cliques:
            steps = []
            for stp in plan.steps:
                terms = []
                for t in stp.terms:
                    nonzero = [i for i, x in enumerate(t.read_strides) if x]
                    if not done and plan.copy is None and t.source == 0 and len(nonzero) >= 2:
                        rs = list(t.read_strides)
                        i, j = nonzero[:2]
                        rs[i], rs[j] = rs[j], rs[i]
                        t = dataclasses.replace(t, read_strides=tuple(rs))  # noqa: PLW2901
                        done = True
                    terms.append(t)
                steps.append(dataclasses.replace(stp, terms=tuple(terms)))
            plans.append(dataclasses.replace(plan, steps=tuple(steps)))
        levels.append(dataclasses.replace(lv, cliques=tuple(plans)))
    assert done
    return dataclasses.replace(jt, levels=tuple(levels))


def test_a_planted_axis_order_bug_is_caught() -> None:
    """Swapping two axes of one factor's read (a square table, so the shapes still fit)
    changes log Z and the marginals far beyond the tolerance: the comparisons above are
    sharp."""
    sizes, scopes = [3, 3, 2, 2], [(0, 1), (1, 2, 3), (2,), (0, 3)]
    jt = junction_tree(sizes, scopes)
    bad = planted(jt)
    assert isinstance(bad.levels[0].cliques[0].steps[0].terms[0], Term)
    flat = np.random.default_rng(3).normal(0, 2, size=jt.n_entries)  # not-privacy-noise
    want_z, want = sparse_junction(jt).infer(flat)
    close(jt.infer(flat)[1], want)
    bad_z, bad_m = bad.infer(flat)
    assert abs(bad_z - want_z) > 1e-6
    with pytest.raises(AssertionError):
        close(bad_m, want)
