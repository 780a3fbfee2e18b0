"""Benchmark: maximum overlap γ(Q) on random Adult workloads (docs/theory.md §3).

For each workload family and size t, in the same run:
* Tessera (``max_overlap``, method auto, ``--time-limit``): wall time, the calibration bound,
  what the witness attains, exact or not, and which method answered;
* the Lagrangian split bound and the greedy colouring bound of the overlap graph (time and
  looseness = bound / witness);
* baselines with the same time limit: exact max-weight clique of the overlap graph
  (``networkx.max_weight_clique``, ω ≥ γ, = γ for ranges; in a subprocess), and, when
  ``ortools`` is installed (bench only, not a dependency), CP-SAT on the one-hot model
  (z[a,c] one class per attribute, y_q ⇒ OR of the classes of φ_{q,a}, max Σ y_q), 2 workers,
  hinted with our witness: its proven bound and best solution; and, when ``pytoulbar2`` is
  installed (bench extra), the exact weighted-CSP solver ToulBar2 on the y-encoding (one
  variable per attribute, a Boolean per query, hard binary constraints): best row and proven
  bound, set-up included.

With ``--hardness`` it instead follows the wide mixed family as t grows (default sizes
300 1,000 3,000 10,000; use a long ``--time-limit`` such as 60): ours and ToulBar2 with the same
limit, and the plateau around the best row — rows within 1% of it reachable by one-attribute
moves, and distinct local optima of 200 random-start coordinate ascents — i.e. what any exact
search must refute.

With ``--substitution`` it instead measures substitution neighbours (max_{x,y} Σ [q(x) ≠ q(y)])
with and without the ToulBar2 route on random wide and low-width workloads.

With ``--mini-bucket`` it instead compares, on the two random mixed families, the search alone
(``max_point``: best-first with owner and colour-class bounds) against the mini-bucket-guided
search (``mbe_point``) at i-bounds 2, 3, 4, 8, each with the same time limit: proven bound, best
row, wall time (compilation included), nodes.

Usage: python bench/bench_overlap.py [--sizes 1000 10000 100000] [--time-limit 5]
                                     [--mini-bucket | --hardness | --substitution]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time
from pathlib import Path

import networkx as nx
import numpy as np

from tessera.overlap import max_overlap, max_point, overlap_graph, split_bound
from tessera.overlap.atoms import undominated, workload_atoms
from tessera.overlap.branch_bound import (
    active_part,
    ascent,
    build_component,
    independent_parts,
)
from tessera.overlap.colouring import colour_class_bound, greedy_colouring
from tessera.overlap.mini_bucket import mbe_point
from tessera.schema.domain import Domain
from tessera.workload.builders import random_workload

ADULT = str(Path(__file__).resolve().parents[1].parent / "shared/data/adult-domain.json")


def _clique(adj: np.ndarray, queue: mp.Queue) -> None:
    g = nx.from_numpy_array(adj.astype(np.int8))
    _, weight = nx.max_weight_clique(g, weight=None)
    queue.put(weight)


def markdown_table(header: list[str], rows: list[list[str]]) -> None:
    """Print the rows as the Markdown table that goes into docs/benchmarks.md."""
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")


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


def cpsat(domain: Domain, queries, hint_x, limit: float) -> str:  # type: ignore[no-untyped-def]
    try:
        from ortools.sat.python import cp_model
    except ImportError:
        return "not installed"
    start = time.perf_counter()
    model = cp_model.CpModel()
    z = {}
    for at in workload_atoms(domain, queries):
        keep = undominated(at)
        lits = [model.NewBoolVar("") for _ in keep]
        model.AddExactlyOne(lits)
        z[at.name] = (at, keep, lits)
    y = [model.NewBoolVar("") for _ in queries]
    for at, keep, lits in z.values():
        mem = at.membership[keep]
        for i, q in enumerate(at.queries):
            inside = [lits[c] for c in np.flatnonzero(mem[:, i])]
            if len(inside) < len(lits):
                model.AddBoolOr([*inside, y[q].Not()])
    model.Maximize(sum(y))
    if hint_x is not None:
        for at, keep, lits in z.values():
            code = hint_x[at.position]
            for c, lit in zip(keep, lits):
                lo = at.representative[c]
                model.AddHint(lit, bool(lo == code))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 2
    solver.parameters.max_time_in_seconds = max(0.1, limit - (time.perf_counter() - start))
    status = solver.Solve(model)
    took = time.perf_counter() - start
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return f"no solution ({took:.1f}s)"
    tag = "optimal" if status == cp_model.OPTIMAL else f"bound {solver.BestObjectiveBound():g}"
    return f"{solver.ObjectiveValue():g}, {tag} ({took:.1f}s)"


def toulbar2(domain: Domain, queries, limit: float) -> tuple[str, float | None, float | None]:  # type: ignore[no-untyped-def]
    """ToulBar2 (exact weighted-CSP solver; ``pytoulbar2``, bench extra) on the same problem as
    a cost minimisation: one variable per attribute (its undominated value classes), a Boolean
    y_q per query with unary cost 1 − y_q, and hard binary constraints y_q = 1 ⇒ x_a ∈ φ_{q,a}.
    Returns (cell text, best row score, proven upper bound) with the time limit, set-up
    included."""
    try:
        import pytoulbar2
    except ImportError:
        return "not installed", None, None
    start = time.perf_counter()
    atoms = [(at, undominated(at)) for at in workload_atoms(domain, queries)]
    t = len(queries)
    cfn = pytoulbar2.CFN(t + 1, vac=1)  # ub = t + 1 acts as infinity (hard constraints)
    cfn.Option.verbose = -1
    cfn.Option.showSolutions = 0
    for i, (_, keep) in enumerate(atoms):
        cfn.AddVariable(f"x{i}", range(len(keep)))
    for q in range(t):
        cfn.AddVariable(f"y{q}", [0, 1])
        cfn.AddFunction([len(atoms) + q], [1, 0])
    for i, (at, keep) in enumerate(atoms):
        mem = at.membership[keep]
        for j, q in enumerate(at.queries):
            # costs over (x_i, y_q) in lexicographic order: y=1 forbidden outside φ_{q,a}
            costs = np.zeros((len(keep), 2), dtype=np.int64)
            costs[~mem[:, j], 1] = t + 1
            cfn.AddFunction([i, len(atoms) + int(q)], costs.ravel().tolist())
    left = max(1, int(round(limit - (time.perf_counter() - start))))
    res = cfn.Solve(timeLimit=left)
    took = time.perf_counter() - start
    best = None if res is None else t - float(res[1])
    dual = float(cfn.GetDDualBound()) if hasattr(cfn, "GetDDualBound") else None
    upper = None if dual is None else t - dual
    if best is not None and upper is not None and upper <= best + 0.5:
        return f"{best:g}, optimal ({took:.1f}s)", best, best
    bound = "?" if upper is None else f"{upper:g}"
    return f"{'—' if best is None else f'{best:g}'}, bound {bound} ({took:.1f}s)", best, upper


def run(label: str, domain: Domain, wl, limit: float) -> list[str]:  # type: ignore[no-untyped-def]
    t = len(wl)
    ones = np.ones(t)
    start = time.perf_counter()
    res = max_overlap(wl, ones, time_limit=limit)
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    split = split_bound(domain, wl.queries, ones)
    t_split = time.perf_counter() - start
    method = res.method.split(" (")[0]
    row = [label, f"{t:,}", f"{t_ours:.2f}", f"{res.bound:g}", f"{res.achieved:g}",
           "yes" if res.exact else "no", method, f"{split:.0f} ({t_split:.2f}s)"]
    if t <= 20_000:
        start = time.perf_counter()
        adj = overlap_graph(domain, wl.queries)
        colour = greedy_colouring(adj, ones, "greedy")
        greedy = colour_class_bound(colour, ones)
        t_greedy = time.perf_counter() - start
        row.append(f"{greedy:g} ({t_greedy:.2f}s, ×{greedy / max(res.achieved, 1):.2f})")
        if t <= 2_000:
            omega, t_nx = networkx_clique(adj, limit)
            row.append(f"{omega:g} ({t_nx:.2f}s)" if omega is not None else f"timeout >{limit:g}s")
        else:
            row.append("skipped (t > 2,000)")
        del adj
        row.append(cpsat(domain, wl.queries, res.witness.x if res.witness else None, limit))
        row.append(toulbar2(domain, wl.queries, limit)[0])
    else:
        row += ["skipped (t² graph)", "skipped", "skipped (t > 20,000)", "skipped (t > 20,000)"]
    return row


def _plateau(domain: Domain, queries, within: float, cap: int = 100_000,  # type: ignore[no-untyped-def]
             restarts: int = 200) -> tuple[float, int, int, int]:
    """How flat the landscape is around the best row coordinate ascent finds (unit weights).

    Returns (best score s*, rows scoring ≥ (1 − within)·s* reachable from the best row by
    changing one attribute at a time through such rows (breadth-first, capped at ``cap``),
    distinct local optima among ``restarts`` random-start ascents, how many of those score
    ≥ (1 − within)·s*). Every such row is one a branch and bound must refute with a bound
    that is tighter than ``within``.
    """
    part = active_part(domain, queries, np.ones(len(queries)))
    (cols, local), = list(independent_parts(part.atoms, len(part.active), part.scopes))
    comp = build_component(local, np.arange(len(cols), dtype=np.int64), part.scores[cols])
    m = len(comp.atoms)
    rng = np.random.default_rng(0)  # search heuristic only
    optima: dict[tuple[int, ...], float] = {}
    for _ in range(restarts):
        x0 = np.array([rng.integers(a.n_atoms) for a in comp.atoms], dtype=np.int64)
        v, x = ascent(comp, x0)
        optima[tuple(int(c) for c in x)] = v
    best_x = max(optima, key=optima.__getitem__)
    best = optima[best_x]
    floor = (1.0 - within) * best
    seen = {best_x}
    frontier = [np.array(best_x, dtype=np.int64)]
    while frontier and len(seen) < cap:
        nxt = []
        for x in frontier:
            sat = np.stack([comp.member[j][x[j]] for j in range(m)], axis=1)
            nsat = sat.sum(axis=1)
            for j in range(m):
                others = (nsat - sat[:, j]) == m - 1
                scores = comp.member[j][:, others].astype(np.float64) @ comp.s[others]
                for c in np.flatnonzero(scores >= floor):
                    y = x.copy()
                    y[j] = c
                    key = tuple(int(v) for v in y)
                    if key not in seen:
                        seen.add(key)
                        nxt.append(y)
        frontier = nxt
    near = sum(1 for v in optima.values() if v >= floor)
    return best, len(seen), len(optima), near


def hardness_table(domain: Domain, sizes: list[int], limit: float, seed: int) -> None:
    """Wide random mixed workloads as t grows: ours and ToulBar2 with the same (long) limit, and
    the plateau of near-best rows that any exact search has to refute."""
    header = ["t", "ours: bound / row (s)", "ToulBar2: row, bound (s)", "best of 200 ascents",
              "rows within 1% (connected)", "distinct local optima (within 1%)"]
    rows = []
    for t in sizes:
        wl = random_workload(domain, t, attributes_per_query=(1, 4), kind="mixed", seed=seed,
                             max_queries=10**6)
        start = time.perf_counter()
        res = max_overlap(wl, np.ones(t), time_limit=limit)
        took = time.perf_counter() - start
        ours = f"{'exact ' if res.exact else ''}{res.bound:g} / {res.achieved:g} ({took:.1f}s)"
        tb = toulbar2(domain, wl.queries, limit)[0]
        best, n_near, n_opt, n_opt_near = _plateau(domain, wl.queries, 0.01)
        rows.append([f"{t:,}", ours, tb, f"{best:g}",
                     f"{n_near:,}{'+' if n_near >= 100_000 else ''}", f"{n_opt} ({n_opt_near})"])
        print(" | ".join(rows[-1]), flush=True)
    markdown_table(header, rows)


def substitution_table(domain: Domain, limit: float, seed: int) -> None:
    """Substitution neighbours: max_overlap with ToulBar2 (auto) against the same call without
    it (the fallback: exact enumeration up to 6,000 overlap patterns, else min(2·S, Σ h(w)))."""
    from tessera.overlap import routes as solve_mod  # the routes' portfolio asks for ToulBar2

    header = ["workload", "t", "with ToulBar2: bound / pair (s)", "without: bound / pair (s)"]
    rows = []
    cases = [("mixed 1–4 attrs, width 5–50%", t, {}) for t in (30, 100, 1000)] + [
        ("mixed 1–3 of age/education/occupation", t,
         {"attributes": ["age", "education", "occupation"], "attributes_per_query": (1, 3)})
        for t in (300, 1000)]
    real = solve_mod.wcsp_available
    for label, t, kw in cases:
        kw = {"attributes_per_query": (1, 4), **kw}
        wl = random_workload(domain, t, kind="mixed", seed=seed, **kw)  # type: ignore[arg-type]
        row = [label, f"{t:,}"]
        for on in (True, False):
            solve_mod.wcsp_available = real if on else (lambda: False)  # type: ignore[assignment]
            start = time.perf_counter()
            res = max_overlap(wl, neighbours="substitute", time_limit=limit)
            took = time.perf_counter() - start
            row.append(f"{'exact ' if res.exact else ''}{res.bound:g} / {res.achieved:g} "
                       f"({took:.1f}s)")
        solve_mod.wcsp_available = real
        rows.append(row)
        print(" | ".join(row), flush=True)
    markdown_table(header, rows)


def mini_bucket_table(domain: Domain, sizes: list[int], limit: float, seed: int) -> None:
    header = ["workload", "t", "branch-bound", "MBE i=2", "MBE i=3", "MBE i=4", "MBE i=8"]
    rows = []
    for label, kw in [("mixed 1–4 attrs, width 5–50%", {}),
                      ("mixed 1–4 attrs, width 1–10%", {"width": (0.01, 0.1)})]:
        for t in sizes:
            wl = random_workload(domain, t, attributes_per_query=(1, 4), kind="mixed", seed=seed,
                                 max_queries=10**6, **kw)  # type: ignore[arg-type]
            ones = np.ones(t)
            row = [label, f"{t:,}"]
            for ib in (0, 2, 3, 4, 8):
                start = time.perf_counter()
                sol = (max_point(domain, wl.queries, ones, time_limit=limit) if ib == 0 else
                       mbe_point(domain, wl.queries, ones, time_limit=limit, ibound=ib,
                                 order="score", moment_matching=False))
                took = time.perf_counter() - start
                mark = "exact " if sol.exact else ""
                row.append(f"{mark}{sol.upper:.0f} / {sol.lower:.0f} "
                           f"({took:.1f}s, {sol.nodes} nodes)")
            rows.append(row)
            print(" | ".join(row), flush=True)
    markdown_table(header, rows)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mini-bucket", action="store_true")
    ap.add_argument("--hardness", action="store_true")
    ap.add_argument("--substitution", action="store_true")
    args = ap.parse_args()
    domain = Domain.load(ADULT)
    if args.mini_bucket:
        mini_bucket_table(domain, args.sizes, args.time_limit, args.seed)
        return
    if args.hardness:
        hardness_table(domain, args.sizes, args.time_limit, args.seed)
        return
    if args.substitution:
        substitution_table(domain, args.time_limit, args.seed)
        return
    families = [
        ("mixed 1–4 attrs, width 5–50%",
         dict(attributes_per_query=(1, 4), kind="mixed")),
        ("mixed 1–4 attrs, width 1–10%",
         dict(attributes_per_query=(1, 4), kind="mixed", width=(0.01, 0.1))),
        ("mixed 1–3 of age/education/occupation",
         dict(attributes_per_query=(1, 3), kind="mixed",
              attributes=["age", "education", "occupation"])),
        ("ranges age×hours",
         dict(attributes_per_query=(1, 2), kind="range", attributes=["age", "hours-per-week"])),
    ]
    header = ["workload", "t", "ours s", "γ bound", "witness", "exact", "method", "split bound",
              "greedy colouring", "networkx ω", "CP-SAT (2 workers)", "ToulBar2"]
    rows = []
    for label, kw in families:
        for t in args.sizes:
            wl = random_workload(domain, t, seed=args.seed, max_queries=10**6, **kw)  # type: ignore[arg-type]
            rows.append(run(label, domain, wl, args.time_limit))
            print(" | ".join(rows[-1]), flush=True)
    markdown_table(header, rows)


if __name__ == "__main__":
    main()
