"""The compiled junction tree's passes (:class:`tessera.engine.junction.JunctionTree`: broadcast
additions and axis sums over each clique's table) against the sparse 0/1 products they replaced
(:mod:`tessera.engine.junction_sparse`), in the same run, on the same trees and log-potentials.

    python bench/bench_junction_passes.py                 # every tree, 30 repeats
    python bench/bench_junction_passes.py --repeat 100 --tree nass_cds

Trees: the last (largest) model of the adaptive synthesizer's fit of nass_cds (ε = 3, seed 0:
61 pair scopes over 14 attributes, width 9) and of movielens (ε = 1, seed 0: 7 pair scopes,
one attribute of 525 values), both as the fits compiled them (scopes recorded from the fits);
a synthetic wide tree (all pairs of 12 ternary variables: one clique of 531,441 entries);
many-clique trees: stars of 100, 400 and 1,000 pairs of 4-valued variables (that many cliques
of 16 entries on one level), a chain of 200 such pairs (200 cliques, 100 levels), and stars of
400 pairs of 16-, 32- and 64-valued variables (cliques of 256, 1,024 and 4,096 entries: where
the small cliques' 0/1 maps and the large cliques' broadcast steps cross,
:data:`~tessera.engine.junction.SMALL_CLIQUE`). Log-potentials are N(0, 2) with 2% −∞ entries
(seeded); and the tree-MRF benchmark's scopes at d = 256 (``bench_synth.py --part dimension``:
the 255 edges of a random recursive tree, seed 0, over binary attributes — the synthesizer's
model once every edge is measured: 255 cliques of 4 entries, a few dozen levels).

Each side runs ``infer`` (log Z and every factor's marginal) ``--repeat`` times after one
warm-up; the table prints the median wall and CPU time per call, their ratio (sparse / new),
the peak traced memory of one call (tracemalloc) and the largest difference of the results
(relative for log Z, absolute for the marginals). ``--regimes`` adds the engine's CPU time
with every clique taken as large (``small_clique=0``: broadcast steps only) and as small
(0/1 maps only).
"""

from __future__ import annotations

# ruff: noqa: B023  (each lambda is called inside its own loop iteration)
import argparse
import itertools
import os
import statistics
import time
import tracemalloc
from collections.abc import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from tessera.engine.families import random_tree  # noqa: E402
from tessera.engine.junction import JunctionTree, junction_tree  # noqa: E402
from tessera.engine.junction_sparse import sparse_junction  # noqa: E402

NASS_SIZES = (5, 8, 2, 2, 2, 2, 2, 8, 6, 8, 3, 2, 2, 8)
NASS_SCOPES = [
    (3, 10), (10, 12), (3, 9), (1, 13), (0, 13), (5, 10), (4, 13), (8, 9), (0, 10), (2, 13),
    (3, 4), (4, 6), (6, 13), (0, 1), (6, 11), (7, 11), (3, 6), (0, 6), (11, 12), (10, 13),
    (4, 7), (5, 13), (4, 5), (4, 9), (1, 8), (4, 11), (1, 6), (3, 7), (1, 12), (0, 4), (5, 6),
    (7, 13), (6, 7), (11, 13), (1, 4), (7, 10), (0, 5), (1, 11), (9, 11), (10, 11), (9, 12),
    (5, 8), (4, 12), (0, 7), (5, 7), (6, 9), (5, 9), (6, 8), (5, 11), (8, 10), (1, 5), (4, 8),
    (8, 12), (7, 8), (1, 7), (7, 9), (8, 13), (1, 10), (0, 11), (1, 9), (0, 8)]
MOVIELENS_SIZES = (525, 11, 20, 10, 22)
MOVIELENS_SCOPES = [(1, 4), (3, 4), (1, 2), (2, 3), (1, 3), (2, 4), (0, 4)]


def trees() -> dict[str, JunctionTree]:
    return {
        "nass_cds": junction_tree(NASS_SIZES, NASS_SCOPES),
        "movielens": junction_tree(MOVIELENS_SIZES, MOVIELENS_SCOPES),
        "wide": junction_tree([3] * 12, list(itertools.combinations(range(12), 2))),
        **{f"star{n}": junction_tree([4] * (n + 1), [(0, i) for i in range(1, n + 1)])
           for n in (100, 400, 1000)},
        "chain200": junction_tree([4] * 201, [(i, i + 1) for i in range(200)]),
        **{f"star400x{k * k}": junction_tree([k] * 401, [(0, i) for i in range(1, 401)])
           for k in (16, 32, 64)},
        "tree256": junction_tree([2] * 256, random_tree(256, 0)),
    }


def timed(f: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(median wall, median CPU) seconds of ``repeat`` calls after one warm-up."""
    f()
    wall, cpu = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        f()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(wall), statistics.median(cpu)


def peak(f: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        f()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--tree", action="append", help="only these trees (repeatable)")
    ap.add_argument("--regimes", action="store_true",
                    help="also time the engine with every clique large, then every one small")
    args = ap.parse_args()
    rng = np.random.default_rng(0)  # not-privacy-noise
    extra = " all-large cpu ms | all-small cpu ms |" if args.regimes else ""
    print("| tree | table entries | cliques | sparse ms (cpu) | new ms (cpu) | ratio wall | "
          f"ratio cpu | peak MiB sparse / new | max diff |{extra}")
    print("|---|---|---|---|---|---|---|---|---|" + "---|" * (2 * args.regimes))
    for name, jt in trees().items():
        if args.tree and name not in args.tree:
            continue
        ref = sparse_junction(jt)
        flat = rng.normal(0, 2, size=jt.n_entries)
        flat[rng.random(jt.n_entries) < 0.02] = -np.inf
        (z_old, m_old), (z_new, m_new) = ref.infer(flat), jt.infer(flat)
        diff = max(abs(z_new - z_old) / max(1.0, abs(z_old)),
                   float(np.abs(m_new - m_old).max()))
        w_old, c_old = timed(lambda: ref.infer(flat), args.repeat)
        w_new, c_new = timed(lambda: jt.infer(flat), args.repeat)
        p_old, p_new = peak(lambda: ref.infer(flat)), peak(lambda: jt.infer(flat))
        more = ""
        if args.regimes:
            for limit in (0, 2**62):
                forced = junction_tree(jt.sizes, jt.scopes, small_clique=limit, compile_guard=False)
                more += f" {1e3 * timed(lambda: forced.infer(flat), args.repeat)[1]:.3f} |"
        print(f"| {name} | {jt.table_entries:,} | {len(jt.cliques) - 1} | "
              f"{1e3 * w_old:.3f} ({1e3 * c_old:.3f}) | "
              f"{1e3 * w_new:.3f} ({1e3 * c_new:.3f}) | "
              f"{w_old / w_new:.2f} | {c_old / c_new:.2f} | "
              f"{p_old / 2**20:.1f} / {p_new / 2**20:.1f} | {diff:.1e} |{more}")


if __name__ == "__main__":
    main()
