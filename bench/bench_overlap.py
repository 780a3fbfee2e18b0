"""Benchmark: maximum overlap γ(Q) on random Adult workloads (SPEC §3).

For each workload size t, in the same run:
* Tessera's solver (``max_overlap``, anytime branch and bound with ``--time-limit``): time, the
  calibration bound, what the witness attains, exact or not;
* the Lagrangian split bound and the greedy colouring bound (time and looseness = bound/witness);
* the baseline: overlap graph + exact max-weight clique (``networkx.max_weight_clique``) in a
  subprocess with the same time limit (ω ≥ γ; = γ for ranges).

Usage: python bench/bench_overlap.py [--sizes 1000 10000 100000] [--time-limit 30]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import networkx as nx
import numpy as np

from tessera.builders import random_workload
from tessera.domain import Domain
from tessera.overlap import max_overlap, overlap_graph, split_bound
from tessera.overlap.colouring import colour_class_bound, greedy_colouring

ADULT = "/work/shared/data/adult-domain.json"


def _clique(adj: np.ndarray, queue: mp.Queue) -> None:
    g = nx.from_numpy_array(adj.astype(np.int8))
    _, weight = nx.max_weight_clique(g, weight=None)
    queue.put(weight)


def networkx_clique(adj: np.ndarray, limit: float) -> tuple[float | None, float]:
    queue: mp.Queue = mp.Queue()
    start = time.perf_counter()
    proc = mp.Process(target=_clique, args=(adj, queue))
    proc.start()
    proc.join(limit)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return None, time.perf_counter() - start
    return queue.get(), time.perf_counter() - start


def run(label: str, domain: Domain, wl, limit: float, baselines: bool) -> list[str]:  # type: ignore[no-untyped-def]
    t = len(wl)
    ones = np.ones(t)
    start = time.perf_counter()
    res = max_overlap(wl, ones, time_limit=limit)
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    split = split_bound(domain, wl.queries, ones)
    t_split = time.perf_counter() - start
    row = [label, f"{t:,}", f"{t_ours:.2f}", f"{res.bound:g}", f"{res.achieved:g}",
           "yes" if res.exact else "no", f"{split:.0f} ({t_split:.2f}s)"]
    if baselines and t <= 20_000:
        start = time.perf_counter()
        adj = overlap_graph(domain, wl.queries)
        t_graph = time.perf_counter() - start
        start = time.perf_counter()
        colour = greedy_colouring(adj, ones, "greedy")
        greedy = colour_class_bound(colour, ones)
        t_greedy = time.perf_counter() - start + t_graph
        row.append(f"{greedy:g} ({t_greedy:.2f}s, ×{greedy / res.achieved:.1f})")
        if t <= 2_000:
            omega, t_nx = networkx_clique(adj, limit)
            row.append(f"{omega:g} ({t_nx + t_graph:.2f}s)" if omega is not None
                       else f"timeout >{limit:g}s")
        else:
            row.append("skipped (t > 2,000)")
    else:
        row += ["skipped (graph t² too large)", "skipped"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    domain = Domain.load(ADULT)
    header = ["workload", "t", "ours s", "γ bound", "witness", "exact", "split bound",
              "greedy colouring", "networkx ω"]
    rows = []
    for t in args.sizes:
        wl = random_workload(domain, t, attributes_per_query=(1, 4), kind="mixed",
                             seed=args.seed, max_queries=10**6)
        rows.append(run("mixed 1–4 attrs", domain, wl, args.time_limit, True))
        print(" | ".join(rows[-1]), flush=True)
    for t in args.sizes:
        wl = random_workload(domain, t, attributes_per_query=(1, 2), kind="range",
                             attributes=["age", "hours-per-week"], seed=args.seed,
                             max_queries=10**6)
        rows.append(run("ranges age×hours", domain, wl, args.time_limit, True))
        print(" | ".join(rows[-1]), flush=True)
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")


if __name__ == "__main__":
    main()
