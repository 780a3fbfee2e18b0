"""The junction tree's passes — broadcast steps for large cliques, shared 0/1 maps for small
ones (:data:`~tessera.engine.junction.SMALL_CLIQUE`) — against brute-force enumeration and
against the sparse 0/1 products of :mod:`tessera.engine.junction_sparse`, to float rounding
(relative 1e-12), on random scopes with −∞ entries, many-clique stars and chains, in either
regime and mixed (the size limit drawn); a planted bug is caught in each regime; the compile
guard prices the maps above their measured peak."""

from __future__ import annotations

import dataclasses
import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tessera.engine import junction_tree
from tessera.engine.junction import (
    SMALL_CLIQUE,
    JunctionTree,
    Term,
    check_junction,
    junction_compile_bytes,
    zero_one,
)
from tessera.engine.junction_sparse import sparse_junction
from tessera.errors import ResourceError

from .test_junction import brute, variables_and_scopes

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
REL = 1e-12
#: the size limit of a small clique: every clique large (broadcast steps only), mixed, the
#: default, every clique small (0/1 maps only)
LIMITS = st.sampled_from([0, 8, 32, SMALL_CLIQUE, 2**62])


@st.composite
def problems(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, ...]], np.ndarray]:
    """≤ 12 variables of 2–4 values (≤ 4096 points), up to 14 scopes of ≤ 4 variables (some
    repeated, some empty), flat N(0, 3) log-potentials with some −∞ entries."""
    sizes, scopes = variables_and_scopes(draw, 2, (1, 14))
    if len(scopes) > 1 and draw(st.booleans()):
        scopes.append(scopes[0])
    return sizes, scopes, log_potentials(draw, sizes, scopes, 0.15)


def log_potentials(draw: st.DrawFn, sizes: list[int], scopes: list[tuple[int, ...]],
                   minus_infinity: float) -> np.ndarray:
    """The flat N(0, 3) log-potentials of ``scopes``, and (drawn) a share ``minus_infinity``
    of them −∞."""
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))  # not-privacy-noise
    total = sum(math.prod(sizes[v] for v in sc) for sc in scopes)
    flat = rng.normal(0, 3, size=total)
    if draw(st.booleans()):
        flat[rng.random(total) < minus_infinity] = -np.inf
    return flat


def close(got: float | np.ndarray, want: float | np.ndarray) -> None:
    """Equal to float rounding: relative 1e-12 (absolute 1e-14 next to 0)."""
    np.testing.assert_allclose(got, want, rtol=REL, atol=1e-14)


@SETTINGS
@given(problems(), LIMITS)
def test_passes_equal_brute_force_and_the_sparse_products(
        problem: tuple[list[int], list[tuple[int, ...]], np.ndarray], limit: int) -> None:
    sizes, scopes, flat = problem
    jt = junction_tree(sizes, scopes, small_clique=limit)
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


@st.composite
def many_cliques(draw: st.DrawFn) -> tuple[list[int], list[tuple[int, ...]], np.ndarray]:
    """A star (pairs (0, i)) or a chain (pairs (i, i + 1)) of 2–120 cliques of 2–6-valued
    variables, some cliques also hosting a singleton or a triple with a fresh variable,
    N(0, 3) log-potentials with some −∞ entries."""
    n = draw(st.integers(2, 120))
    star = draw(st.booleans())
    sizes = [draw(st.integers(2, 6)) for _ in range(n + 1)]
    scopes: list[tuple[int, ...]] = [(0, i) if star else (i - 1, i) for i in range(1, n + 1)]
    for i in draw(st.lists(st.integers(1, n), max_size=8)):
        if draw(st.booleans()):
            scopes.append((i,))
        else:
            sizes.append(draw(st.integers(2, 3)))
            scopes.append((i, 0 if star else i - 1, len(sizes) - 1))
    return sizes, scopes, log_potentials(draw, sizes, scopes, 0.1)


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(many_cliques(), LIMITS)
def test_many_clique_stars_and_chains_equal_the_sparse_products(
        problem: tuple[list[int], list[tuple[int, ...]], np.ndarray], limit: int) -> None:
    """Hundreds of cliques on one level (a star) or on as many levels (a chain), in either
    regime and mixed: equal to the sparse products, and to brute force when that is small."""
    sizes, scopes, flat = problem
    jt = junction_tree(sizes, scopes, small_clique=limit)
    ref = sparse_junction(jt)
    want_z = ref.log_partition(flat)
    if not math.isfinite(want_z):
        assert jt.log_partition(flat) == -math.inf
        return
    got_z, got = jt.infer(flat)
    close(got_z, want_z)
    close(got, ref.infer(flat)[1])
    if math.prod(sizes) <= 4096:
        log_z, margs = brute(sizes, scopes, jt.split(flat))
        close(got_z, log_z)
        close(got, np.concatenate([np.ravel(m) for m in margs]))


def test_large_maps_run_as_products() -> None:
    """Small cliques whose maps exceed PRODUCT_ENTRIES pairs (a star of 300 cliques of 64
    entries, some hosting a triple) run them as CSR products, beside bincounts for the small
    maps of a chain: equal to the sparse reference."""
    rng = np.random.default_rng(11)  # not-privacy-noise
    sizes = [8] * 301 + [2] * 40 + [3] * 60
    scopes = [(0, i) for i in range(1, 301)] + [(0, i, 300 + i) for i in range(1, 41)]
    scopes += [(341 + i, 342 + i) for i in range(59)]
    jt = junction_tree(sizes, scopes)
    assert jt.factor_links is not None and jt.factor_links.forward is not None
    assert any(lv.links is not None and lv.links.forward is not None for lv in jt.levels)
    assert any(lv.links is not None and lv.links.forward is None for lv in jt.levels)
    flat = rng.normal(0, 3, size=jt.n_entries)
    flat[rng.random(jt.n_entries) < 0.05] = -np.inf
    got_z, got = jt.infer(flat)
    want_z, want = sparse_junction(jt).infer(flat)
    close(got_z, want_z)
    close(got, want)


def test_the_regime_follows_the_clique_size() -> None:
    """A star of 400 cliques of 16 entries runs on the 0/1 maps alone (no plan), a clique of
    4,096 entries on its broadcast steps alone (no map); the limit moves the boundary."""
    star = junction_tree([4] * 401, [(0, i) for i in range(1, 401)])
    assert sum(len(lv.cliques) for lv in star.levels) == 0
    assert star.factor_links is not None and star.factor_links.shape[0] == 400 * 16
    assert any(lv.links is not None for lv in star.levels)
    wide = junction_tree([2] * 12, [(a, b) for a in range(12) for b in range(a + 1, 12)])
    assert len(wide.levels[0].cliques) == 1 and wide.factor_links is None
    forced = junction_tree([4] * 401, [(0, i) for i in range(1, 401)], small_clique=0)
    assert sum(len(lv.cliques) for lv in forced.levels) == 400
    assert forced.factor_links is None


def test_the_wide_real_shapes() -> None:
    """A width-7 clique hosting all pairs of its variables beside a chain of cliques (the
    prefix tables, union tables and several levels), with −∞ entries: equal to the sparse
    products."""
    rng = np.random.default_rng(7)  # not-privacy-noise
    sizes = [2, 3, 4, 2, 3, 2, 4, 3, 2, 2, 3, 4]
    scopes = [(a, b) for a in range(7) for b in range(a + 1, 7)]
    scopes += [(6, 7, 8), (8, 9), (9, 10, 11), (11,), (5, 11), (3,)]
    jt = junction_tree(sizes, scopes, small_clique=16)  # the wide clique large, the rest small
    assert jt.width >= 6 and jt.depth >= 2
    assert jt.factor_links is not None and any(lv.cliques for lv in jt.levels)
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


def assert_caught(jt: JunctionTree, bad: JunctionTree, seed: int) -> None:
    """``jt`` agrees with the sparse reference and ``bad`` (a planted bug) does not: log Z
    and the marginals move far beyond the tolerance."""
    flat = np.random.default_rng(seed).normal(0, 2, size=jt.n_entries)  # not-privacy-noise
    want_z, want = sparse_junction(jt).infer(flat)
    close(jt.infer(flat)[1], want)
    bad_z, bad_m = bad.infer(flat)
    assert abs(bad_z - want_z) > 1e-6
    with pytest.raises(AssertionError):
        close(bad_m, want)


def test_a_planted_axis_order_bug_is_caught() -> None:
    """Large cliques: swapping two axes of one factor's read (a square table, so the shapes
    still fit) changes log Z and the marginals far beyond the tolerance: the comparisons above
    are sharp."""
    sizes, scopes = [3, 3, 2, 2], [(0, 1), (1, 2, 3), (2,), (0, 3)]
    jt = junction_tree(sizes, scopes, small_clique=0)
    bad = planted(jt)
    assert isinstance(bad.levels[0].cliques[0].steps[0].terms[0], Term)
    assert_caught(jt, bad, seed=3)


def exchanged(a: np.ndarray, x: int, y: int) -> np.ndarray:
    """``a`` with the values x and y exchanged (a map's column indices: two columns swapped)."""
    out = a.copy()
    out[a == x], out[a == y] = y, x
    return out


@pytest.mark.parametrize("where", ["factor", "message"])
def test_a_planted_map_bug_is_caught(where: str) -> None:
    """Small cliques: a factor read with two of its entries exchanged (the factor map's
    parameter columns), or a message added at another separator value (a level's map's
    message columns), changes log Z and the marginals far beyond the tolerance."""
    sizes, scopes = [3, 3, 3, 3, 3], [(0, 1), (1, 2), (2, 3), (3, 4), (4,)]
    jt = junction_tree(sizes, scopes)
    assert all(not lv.cliques for lv in jt.levels)  # every clique small
    if where == "factor":
        assert jt.factor_links is not None
        fl = jt.factor_links
        bad = dataclasses.replace(jt, factor_links=zero_one(fl.rows, exchanged(fl.cols, 0, 4),
                                                            fl.shape))
    else:
        k = next(i for i, lv in enumerate(jt.levels) if lv.links is not None)
        links = jt.levels[k].links
        assert links is not None
        levels = list(jt.levels)
        levels[k] = dataclasses.replace(
            levels[k], links=zero_one(links.rows, exchanged(links.cols, 0, 1), links.shape))
        bad = dataclasses.replace(jt, levels=tuple(levels))
    assert_caught(jt, bad, seed=5)


def test_the_compile_guard_prices_the_small_cliques_maps() -> None:
    """A star of 400 cliques of 256 entries (all small: 0/1 maps of one entry per host and
    parent entry): the guard's price bounds the measured peak of the compilation, and a limit
    below it is refused before the maps are built."""
    sizes, scopes = [16] * 401, [(0, i) for i in range(1, 401)]
    price = junction_compile_bytes(sizes, scopes)
    tracemalloc.start()
    try:
        jt = junction_tree(sizes, scopes)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert jt.factor_links is not None
    assert peak <= price  # measured 16.1 MiB against 23.6 MiB
    limit = price // 2  # far above the tables (400 · 256 entries)
    with pytest.raises(ResourceError, match="map entries"):
        junction_tree(sizes, scopes, memory_limit=limit)
    with pytest.raises(ResourceError, match="map entries"):
        check_junction(sizes, scopes, memory_limit=limit)
