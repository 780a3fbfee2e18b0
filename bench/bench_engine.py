"""Benchmarks of the engine (docs/theory.md §4, §8): scaling at fixed width, explicit enumeration,
mbi.

    python bench/bench_engine.py                       # everything
    python bench/bench_engine.py --part scaling        # tree-MRF d = 64 … 4096
    python bench/bench_engine.py --part enumeration    # vs the explicit 2^d histogram
    python bench/bench_engine.py --part mbi            # vs Private-PGM's junction tree
    python bench/bench_engine.py --part mbi --no-samples   # marginals only (cold and warm)
    python bench/bench_engine.py --part mbi --no-samples --repeat 20 --cold-repeat 3
    python bench/bench_engine.py --part scale-queries  # t = 1k, 5k, 20k queries, 15 attributes

Every table compares against its baseline in the same run and prints the ratio.
Timings are the best of ``--repeat`` runs (wall clock, one process, numpy single-threaded); the
mbi part times both sides the same number of times and prints minima and medians.
"""

from __future__ import annotations

# ruff: noqa: B023  (each lambda is called inside its own loop iteration)
import argparse
import math
import os
import time
from collections.abc import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from tessera.engine import GibbsModel  # noqa: E402
from tessera.engine.families import random_tree, tree_marginals  # noqa: E402


def best(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def timed(fn: Callable[[], object], repeat: int,
          before: Callable[[], object] | None = None) -> tuple[float, float, object]:
    """(minimum, median, last output) of ``repeat`` timed calls; ``before`` runs untimed
    before each (e.g. clearing JAX's compilation caches, so every call is a cold one)."""
    times, out = [], None
    for _ in range(repeat):
        if before is not None:
            before()
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), float(np.median(times)), out


def tree_model(d: int, seed: int = 0) -> tuple[GibbsModel, list[tuple[int, int]]]:
    edges = random_tree(d, seed)
    fam = tree_marginals(d, edges=edges)
    theta = np.random.default_rng(seed).normal(0, 1, size=len(fam.queries))
    return GibbsModel(fam.domain, fam.queries, theta, names=fam.names), edges


def fresh(model: GibbsModel) -> GibbsModel:
    """The same model without cached passes (so every timing recomputes)."""
    return model.with_theta(model.theta)


def scaling(sizes: list[int], samples: int, repeat: int) -> None:
    print(f"\n## Scaling at fixed width: tree-MRF marginals (1-way + 4 cells per edge), "
          f"{samples:,} samples\n")
    print("| d | queries | build (s) | width | log Z (s) | argmax (s) | expectations (s) "
          f"| {samples:,} samples (s) | log Z per var (µs) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in sizes:
        t_build, (model, _) = best(lambda d=d: tree_model(d), 1)
        t_lz, _ = best(lambda: fresh(model).log_partition(), repeat)
        t_max, _ = best(lambda: fresh(model).max_assignment(), repeat)
        t_exp, _ = best(lambda: fresh(model).expectations(), repeat)
        m = fresh(model)
        m.log_partition()
        m.sampler()  # conditional tables (part of the forward pass' cost, see below)
        t_s, _ = best(lambda: m.sample(samples, np.random.default_rng(0)), max(1, repeat // 2))
        t_s_total = t_s + best(lambda: fresh(model).sampler(), 1)[0]
        print(f"| {d} | {len(model.queries)} | {t_build:.2f} | {model.width} | {t_lz:.4f} | "
              f"{t_max:.4f} | {t_exp:.4f} | {t_s_total:.3f} | {1e6 * t_lz / d:.1f} |")


def enumeration(sizes: list[int], samples: int, repeat: int) -> None:
    print("\n## Against explicit enumeration of the 2^d histogram (same model, same run)\n")
    print("| d | 2^d | engine log Z (s) | enumeration log Z (s) | ratio | engine "
          f"{samples:,} samples (s) | enumeration samples (s) | ratio | abs Δ log Z |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in sizes:
        model, edges = tree_model(d)
        theta = model.theta
        # log-potential tables: unary θ(x_i = 1), pairwise cells θ(x_i = a, x_j = b)
        unary = theta[:d]
        pair = theta[d:].reshape(len(edges), 2, 2)

        def enum_scores() -> np.ndarray:
            idx = np.arange(1 << d, dtype=np.int64)
            s = np.zeros(1 << d)
            bits = [((idx >> i) & 1).astype(np.int8) for i in range(d)]
            for i in range(d):
                s += unary[i] * bits[i]
            for e, (i, j) in enumerate(edges):
                s += pair[e][bits[i], bits[j]]
            return s

        def enum_logz() -> float:
            s = enum_scores()
            mx = s.max()
            return float(mx + np.log(np.exp(s - mx).sum()))

        def enum_sample() -> np.ndarray:
            s = enum_scores()
            p = np.exp(s - s.max())
            p /= p.sum()
            cells = np.random.default_rng(0).choice(1 << d, size=samples, p=p)
            return (cells[:, None] >> np.arange(d)) & 1

        t_e, lz_e = best(enum_logz, repeat)
        t_g, lz_g = best(lambda: fresh(model).log_partition(), repeat)
        t_es, _ = best(enum_sample, 1)
        t_gs, _ = best(lambda: fresh(model).sample(samples, np.random.default_rng(0)), 1)
        print(f"| {d} | {1 << d:,} | {t_g:.4f} | {t_e:.3f} | {t_e / t_g:,.0f}× | {t_gs:.3f} | "
              f"{t_es:.3f} | {t_es / t_gs:,.1f}× | {abs(lz_e - lz_g):.1e} |")


def tree_factors(model: GibbsModel, edges: list[tuple[int, int]]
                 ) -> tuple[list[tuple[int, ...]], list[np.ndarray]]:
    """The tree-MRF as dense factors: one-way tables [0, θ(x_i = 1)] and the 2×2 edge tables."""
    d, theta = len(model.domain), model.theta
    scopes: list[tuple[int, ...]] = [(i,) for i in range(d)] + [tuple(e) for e in edges]
    tables = [np.array([0.0, theta[i]]) for i in range(d)]
    tables += [theta[d + 4 * e: d + 4 * e + 4].reshape(2, 2).copy() for e in range(len(edges))]
    return scopes, tables


def bucket_expectations(model: GibbsModel) -> np.ndarray:
    """E[f] by the bucket program's up-and-down pass (the path GibbsModel used before the
    compiled junction tree): the baseline of the 'before' column."""
    from tessera.engine.semiring import LOG_SUM_PRODUCT

    s = model.structure
    theta = np.zeros(s.compiled.n_functions)
    theta[: len(model.theta)] = model.theta
    fwd = s.program.forward([g.log_table(theta, True) for g in s.compiled.groups],
                            LOG_SUM_PRODUCT)
    beliefs = s.program.beliefs(fwd)
    out = np.zeros(len(model.theta))
    for g, group in enumerate(s.compiled.groups):
        if len(group.functions):
            out[group.functions] = group.expectations(
                s.program.factor_marginal(beliefs, g).ravel())
    return out


def peak_bytes(fn: Callable[[], object]) -> int:
    """Peak traced (numpy + Python) allocation of one call."""
    import tracemalloc

    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def mbi_comparison(sizes: list[int], samples: int, repeat: int, with_samples: bool,
                   cold_repeat: int) -> None:
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_enable_compilation_cache", False)
        import mbi
        from mbi import marginal_oracles
    except ImportError:
        print("\nmbi is not installed (pip install mbi): skipping the Private-PGM comparison")
        return
    import resource
    from importlib.metadata import version

    from tessera.engine import junction_tree

    print(f"\n## Against Private-PGM (`mbi` {version('mbi')}, JAX {jax.__version__} CPU, x64) "
          "on the same tree-MRF\n")
    print(f"Both sides: cliques = tree edges plus one-way cliques, the same log-potential tables; "
          "every clique/factor marginal (calibrated, normalised). mbi: "
          "`message_passing_hugin`; cold = a call after `jax.clear_caches()` (JIT compilation "
          "included), warm = a later call on the compiled program. Tessera: "
          "`junction_tree(sizes, scopes)` then `.marginals(tables)` (docs/theory.md §4.7); "
          "cold = compile + first call, warm = a later call on the compiled tree. The SAME "
          f"number of timed calls on both sides: {cold_repeat} cold, {repeat} warm; minimum "
          "and median of each. Ratios = mbi / Tessera (> 1: Tessera faster), of the medians "
          "and of the minima. 'GibbsModel' (median of the warm count) is the query-level "
          "path: E[f] for all queries on a model with new θ. Peak = tracemalloc peak of one "
          "Tessera cold run.\n")
    print("| d | depth | Tessera cold min / med (s) | mbi cold min / med (s) "
          "| Tessera warm min / med (s) | mbi warm min / med (s) | cold ratio med (min) "
          "| warm ratio med (min) | GibbsModel med (s) | Tessera peak (MB) | max abs Δ vs mbi "
          "| max abs Δ vs before |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    sampled = []
    for d in sizes:
        model, edges = tree_model(d)
        scopes, tables = tree_factors(model, edges)
        names = model.domain.names
        dom = mbi.Domain(names, [2] * d)
        cl = [tuple(names[v] for v in sc) for sc in scopes]
        pot_tables = {c: mbi.Factor(dom.project(c), jax.numpy.asarray(t))
                      for c, t in zip(cl, tables, strict=True)}
        pot = mbi.CliqueVector(dom, cl, pot_tables)

        def run_mbi():  # noqa: ANN202
            m = marginal_oracles.message_passing_hugin(pot, 1.0)
            jax.block_until_ready(m)  # every table, not just the first (async dispatch)
            return m

        m_cold, m_cold_med, marg = timed(run_mbi, cold_repeat, before=jax.clear_caches)
        m_warm, m_warm_med, marg = timed(run_mbi, repeat)

        def cold():  # noqa: ANN202
            jt = junction_tree([2] * d, scopes)
            return jt, jt.marginals(tables)

        t_cold, t_cold_med, (jt, ours) = timed(cold, cold_repeat)
        t_warm, t_warm_med, ours = timed(lambda: jt.marginals(tables), repeat)
        _, t_gibbs, _ = timed(lambda: fresh(model).expectations(), repeat)
        ref = bucket_expectations(model)
        peak = peak_bytes(cold)
        diff_mbi = max(float(np.abs(np.asarray(marg[c].datavector(flatten=False)) - o).max())
                       for c, o in zip(cl, ours, strict=True))
        mine = np.concatenate([[o[1] for o in ours[:d]], *(o.ravel() for o in ours[d:])])
        diff_gibbs = float(np.abs(mine - ref).max())
        print(f"| {d} | {jt.depth} | {t_cold:.4f} / {t_cold_med:.4f} | "
              f"{m_cold:.2f} / {m_cold_med:.2f} | {t_warm:.5f} / {t_warm_med:.5f} | "
              f"{m_warm:.4f} / {m_warm_med:.4f} | {m_cold_med / t_cold_med:,.0f}× "
              f"({m_cold / t_cold:,.0f}×) | {m_warm_med / t_warm_med:,.1f}× "
              f"({m_warm / t_warm:,.1f}×) | {t_gibbs:.4f} | {peak / 2**20:.1f} | "
              f"{diff_mbi:.1e} | {diff_gibbs:.1e} |", flush=True)
        if with_samples:
            mrf = mbi.MarkovRandomField(potentials=pot, marginals=marg, total=samples)
            np.random.seed(0)
            t_ms, _ = best(lambda: mrf.synthetic_data(samples, method="sample"), 1)
            t_os, _ = best(lambda: fresh(model).sample(samples, np.random.default_rng(0)), 1)
            sampled.append((d, t_os, t_ms))
    if sampled:
        print(f"\nSampling {samples:,} rows: Tessera `GibbsModel.sample` (incl. its conditional "
              "tables) vs mbi `MarkovRandomField.synthetic_data(method='sample')`.\n")
        print("| d | Tessera (s) | mbi (s) | ratio |")
        print("|---|---|---|---|")
        for d, t_os, t_ms in sampled:
            print(f"| {d} | {t_os:.3f} | {t_ms:.2f} | {t_ms / t_os:.1f}× |")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nPeak resident memory of the whole run (Tessera + JAX + mbi): {rss:,.0f} MB")


def tree_cells(k: int, n_attr: int = 15, seed: int = 0):  # noqa: ANN201
    """1-way and 2-way cells of a random tree over ``n_attr`` attributes of size k (Query)."""
    from tessera.schema.domain import Domain
    from tessera.schema.intervals import IntervalSet
    from tessera.workload.query import Query

    rng = np.random.default_rng(seed)
    domain = Domain.from_dict({f"a{i}": k for i in range(n_attr)})
    edges = [(int(rng.integers(0, i)), i) for i in range(1, n_attr)]
    queries = [Query.conjunction(domain, {f"a{i}": IntervalSet.points([c])})
               for i in range(n_attr) for c in range(k)]
    queries += [Query.conjunction(domain, {f"a{p}": IntervalSet.points([a]),
                                           f"a{c}": IntervalSet.points([b])})
                for p, c in edges for a in range(k) for b in range(k)]
    theta = rng.normal(0, 1, size=len(queries))
    return domain, queries, theta, edges


def tree_oracle_log_z(k: int, n_attr: int, edges: list[tuple[int, int]],
                      theta: np.ndarray) -> float:
    """log Z by leaf-to-root sum-product on the original codes (independent of the engine)."""
    from scipy.special import logsumexp

    unary = theta[: n_attr * k].reshape(n_attr, k)
    pair = theta[n_attr * k :].reshape(len(edges), k, k)
    inside = unary.copy()
    for e in reversed(range(len(edges))):  # children have larger indices than their parents
        p, c = edges[e]
        inside[p] += logsumexp(pair[e] + inside[c][None, :], axis=1)
    return float(logsumexp(inside[0]))


def scale_queries(sizes: list[int], repeat: int, nx_max: int) -> None:
    """Decomposing and computing log Z for workloads of thousands of queries."""
    import networkx as nx
    from networkx.algorithms.approximation import treewidth_min_degree

    from tessera.engine import incidence_graph, treewidth
    from tessera.errors import ResourceError
    from tessera.schema.domain import Domain
    from tessera.workload import builders

    def nx_baseline(g: nx.Graph) -> tuple[float, int | None]:
        if g.number_of_nodes() > nx_max:
            return math.nan, None
        t, (w, _) = best(lambda: treewidth_min_degree(g), repeat)
        return t, w

    print("\n## Thousands of queries over 15 attributes (G(F) = incidence graph)\n")
    print("Tree workload: 1-way cells of 15 attributes of size k and the k² cells of each edge "
          "of a random tree; tw(G(F)) = 2. Baseline: networkx `treewidth_min_degree` on the "
          "same G(F) (width and time; ratio = networkx / Tessera); log Z checked against a "
          "numpy tree sum-product. 'G(F) decompose' runs all three candidates (greedy, "
          "variables first, queries first); 'engine build' is atoms, layout, elimination, "
          "guard and tables.\n")
    print("| t | k | G(F) width | G(F) decompose (s) | networkx width | networkx (s) | ratio "
          "| engine build (s) | engine width | log Z (s) | oracle log Z (s) | abs Δ log Z |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k in sizes:
        domain, queries, theta, edges = tree_cells(k)
        g = incidence_graph(domain, queries)
        t_tw, (w, _) = best(lambda g=g: treewidth(g), repeat)
        t_nx, w_nx = nx_baseline(g)
        t_build, model = best(lambda d=domain, q=queries, th=theta: GibbsModel(d, q, th), repeat)
        t_lz, lz = best(lambda m=model: fresh(m).log_partition(), repeat)
        t_or, lz_or = best(lambda k=k, e=edges, th=theta: tree_oracle_log_z(k, 15, e, th), repeat)
        ratio = f"{t_nx / t_tw:.1f}×" if w_nx is not None else "—"
        print(f"| {len(queries):,} | {k} | {w} | {t_tw:.2f} | {w_nx if w_nx is not None else '—'} "
              f"| {t_nx:.2f} | {ratio} | {t_build:.2f} | {model.width} | {t_lz:.4f} | "
              f"{t_or:.4f} | {abs(lz - lz_or):.1e} |")

    print("\nAll 2-way marginals of 15 attributes of size k (105 pairs × k² cells): "
          "tw(G(F)) = 14; the engine's one table would hold k^15 entries and is refused "
          "(ResourceError) — 'refusal' is the time until that error, nothing allocated.\n")
    print("| t | k | G(F) width | G(F) decompose (s) | networkx width | networkx (s) | ratio "
          "| engine build or refusal (s) | outcome |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in marginal_sizes(sizes):
        domain = Domain.from_dict({f"a{i}": k for i in range(15)})
        queries = builders.marginals(domain, 2).queries
        g = incidence_graph(domain, queries)
        t_tw, (w, _) = best(lambda g=g: treewidth(g), repeat)
        t_nx, w_nx = nx_baseline(g)

        def refuse(d=domain, q=queries) -> str:  # noqa: ANN001
            try:
                GibbsModel(d, q)
            except ResourceError as e:
                text = str(e)
                return text[text.index("decomposition width"):].split(";")[0]
            return "accepted"  # fits the limit: the time is the whole build

        t_ref, why = best(refuse, repeat)
        if why == "accepted":
            why = f"accepted (fits 2 GiB; width {GibbsModel(domain, queries).width})"
        ratio = f"{t_nx / t_tw:.1f}×" if w_nx is not None else "—"
        print(f"| {len(queries):,} | {k} | {w} | {t_tw:.2f} | {w_nx if w_nx is not None else '—'} "
              f"| {t_nx:.2f} | {ratio} | {t_ref:.2f} | {why} |")


def marginal_sizes(tree_sizes: list[int]) -> list[int]:
    """k giving about as many 2-way cells of 15 attributes as the tree workloads (105 k²)."""
    out = []
    for k in tree_sizes:
        t = 15 * k + 14 * k * k
        out.append(max(2, round(math.sqrt(t / 105))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["all", "scaling", "enumeration", "mbi", "scale-queries"],
                    default="all")
    ap.add_argument("--scale-sizes", type=int, nargs="*", default=[8, 18, 37],
                    help="attribute sizes k of the scale-queries workloads (t ≈ 1k, 5k, 20k)")
    ap.add_argument("--nx-max", type=int, default=25_000,
                    help="largest G(F) (vertices) given to the networkx baseline")
    ap.add_argument("--sizes", type=int, nargs="*", default=[64, 256, 1024, 4096])
    ap.add_argument("--enum-sizes", type=int, nargs="*", default=[16, 18, 20, 22, 24])
    ap.add_argument("--mbi-sizes", type=int, nargs="*", default=[64, 256, 1024])
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cold-repeat", type=int, default=3,
                    help="mbi part: cold calls per side (mbi recompiles each: minutes at "
                    "d = 1024)")
    ap.add_argument("--no-samples", action="store_true",
                    help="mbi part: skip the sampling comparison (minutes at d = 1024)")
    args = ap.parse_args()
    print(f"numpy {np.__version__}, {os.cpu_count()} cores")
    if args.part in ("all", "scaling"):
        scaling(args.sizes, args.samples, args.repeat)
    if args.part in ("all", "enumeration"):
        enumeration(args.enum_sizes, args.samples, args.repeat)
    if args.part in ("all", "mbi"):
        mbi_comparison(args.mbi_sizes, args.samples, args.repeat, not args.no_samples,
                       args.cold_repeat)
    if args.part in ("all", "scale-queries"):
        scale_queries(args.scale_sizes, args.repeat, args.nx_max)


if __name__ == "__main__":
    main()
