"""Mini-bucket-guided branch and bound equals brute force; its bounds never fall below the max."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tessera.overlap import max_overlap, max_point, mbe_point
from tessera.overlap.atoms import workload_atoms
from tessera.overlap.branch_bound import build_component
from tessera.overlap.mini_bucket import compile_heuristic, mini_bucket_heuristic, variable_order
from tessera.overlap.result import h
from tests.oracles.overlap import points_max_score

from .cases import random_case, random_domain, random_query, random_weights


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _case(rng: np.random.Generator, wide: bool):  # type: ignore[no-untyped-def]
    if not wide:
        return random_case(rng, max_queries=12)
    # up to 6 attributes: buckets get several mini-buckets and messages travel several levels
    dom = random_domain(rng, max_attrs=6, max_size=4)
    queries = [random_query(rng, dom, "mixed", 0.45) for _ in range(int(rng.integers(0, 15)))]
    return dom, queries, random_weights(rng, len(queries))


@pytest.mark.parametrize("chunk", range(4))
def test_mini_bucket_search_equals_brute_force(chunk: int) -> None:
    rng = np.random.default_rng(500 + chunk)
    for case in range(150):
        dom, queries, w = _case(rng, wide=bool(case % 2))
        s = h(("pure", "gdp", "zcdp")[case % 3], w)
        ref, _ = points_max_score(dom, queries, s)
        for ibound in (1, 2, 3):
            mm = bool(case % 4 < 2)
            for sol in (
                mbe_point(dom, queries, s, ibound=ibound, moment_matching=mm,
                          order=("atoms", "score")[case % 2]),
                max_point(dom, queries, s, heuristic=mini_bucket_heuristic(ibound, mm)),
            ):
                assert sol.exact and _close(sol.lower, ref) and sol.upper >= ref - 1e-12
                hit = [i for i, q in enumerate(queries) if q(dom, sol.x)]
                assert _close(math.fsum(s[hit]), sol.lower)
            # stopped before any search: the anytime bound is still ≥ the maximum
            for stopped in (mbe_point(dom, queries, s, ibound=ibound, time_limit=0.0),
                            max_point(dom, queries, s, heuristic=mini_bucket_heuristic(ibound),
                                      time_limit=0.0)):
                assert stopped.upper >= ref - 1e-12 and stopped.lower <= ref + 1e-12


def test_heuristic_is_admissible_and_monotone_along_every_prefix() -> None:
    """h_p(x_{<p}) ≥ the best completion of x_{<p} (by brute force), and g + h never increases."""
    rng = np.random.default_rng(77)
    for case in range(120):
        dom, queries, w = _case(rng, wide=True)
        s = h("pure", w)
        active = [i for i, q in enumerate(queries) if s[i] > 0 and q.predicates
                  and not q.is_contradiction()]
        if not active:
            continue
        qs = [queries[i] for i in active]
        atoms = workload_atoms(dom, qs)
        comp = build_component(atoms, np.arange(len(qs)), s[active])
        # values per full atom assignment (component positions), by enumeration
        sizes = [a.n_atoms for a in comp.atoms]
        grid = np.stack(np.meshgrid(*[np.arange(k) for k in sizes], indexing="ij"), -1)
        grid = grid.reshape(-1, len(sizes))
        hit = np.ones((len(grid), len(qs)), dtype=bool)
        for j in range(len(sizes)):
            hit &= comp.member[j][grid[:, j]]
        value = hit.astype(float) @ comp.s
        order = variable_order(comp, ("atoms", "score")[case % 2])
        heur = compile_heuristic(comp, order, ibound=int(rng.integers(1, 4)),
                                 moment_matching=bool(case % 3))
        assert heur.root >= value.max() - 1e-9
        last = np.array([max(order.index(a) for a in np.flatnonzero(comp.scope[q]))
                         for q in range(len(qs))])
        for row in grid[rng.choice(len(grid), size=min(len(grid), 5), replace=False)]:
            x = row[list(order)]  # by order position
            hh, f_prev = heur.root, heur.root
            for p in range(len(order)):
                hv = heur.step(hh, x, p, sizes[order[p]])
                hh = float(hv[x[p]])
                prefix = np.all(grid[:, list(order[: p + 1])] == x[: p + 1], axis=1)
                g = float(comp.s[(last <= p) & hit[prefix][0]].sum()) if prefix.any() else 0.0
                rest = (hit[prefix][:, last > p].astype(float) @ comp.s[last > p]).max()
                assert hh >= rest - 1e-9
                assert g + hh <= f_prev + 1e-9
                f_prev = g + hh


def test_method_mini_bucket_through_max_overlap() -> None:
    rng = np.random.default_rng(3)
    for case in range(200):
        dom, queries, w = _case(rng, wide=bool(case % 2))
        comp = ("pure", "gdp", "zcdp")[case % 3]
        ref = max_overlap(queries, w, domain=dom, comp=comp, method="enumerate")
        res = max_overlap(queries, w, domain=dom, comp=comp, method="mini-bucket")
        assert res.exact and _close(res.bound, ref.bound)
        # stopped at once: the least of the mini-bucket and split bounds is still ≥ the maximum
        early = max_overlap(queries, w, domain=dom, comp=comp, method="mini-bucket", time_limit=0.0)
        assert early.bound >= ref.bound * (1 - 1e-12) - 1e-12
        assert early.achieved <= early.bound
