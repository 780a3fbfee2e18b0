"""Paired A/B runs of the adaptive synthesizer (issue 20 item 1): seeded, NOT PRIVATE.

    python bench/ab_synth.py run --label base --data nltcs --eps 10 --seeds 0 1 2 3 4 \
        --out /tmp/ab.jsonl [--opt final_iterations=3000 ...]
    python bench/ab_synth.py compare --out /tmp/ab.jsonl --a base --b exact

``run`` fits ``tessera.Synthesizer("adaptive", **opts)`` with the test-only ``seed=s`` (OpenDP's
seeded sampler: the outputs are NOT PRIVATE, and two variants given the same seed draw the same
noise for as long as they make the same choices) on the same data, workload and budget as
``bench/bench_synth.py`` (``--part nltcs``: all 3-way marginals; ``--part adult``: all 2-way
marginals + 1,000 predicate queries; (ε, δ = 1e-9), add/remove) and measures the rows with
bench_synth's own ``errors`` (mean marginal L1, mean predicate-query error). It also records
the error of the fitted model's exact marginals (``tessera.synth.model_answers.model_counts``:
no rows), the run's CPU time, rounds and final loss. One JSON line per run is appended to
``--out``; a variant is whatever code ``PYTHONPATH`` points at plus ``--opt`` settings.

``compare`` pairs the runs of labels A and B by (data, ε, seed) and prints, per setting, the
mean ± sd of each and the paired mean ratio mean_s(B_s / A_s) with its standard error.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
warnings.filterwarnings("ignore", message="query .* already used")  # the random workload's names
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_synth as bs  # noqa: E402
import numpy as np  # noqa: E402

import tessera as ts  # noqa: E402
from tessera.synth.evaluate import Evaluation  # noqa: E402
from tessera.workload.builders import marginal_families, random_workload  # noqa: E402


def setting(data: str) -> tuple[Any, ts.Workload, np.ndarray, int]:
    """(frame, workload, real fractions, n) exactly as bench_synth's part ``data`` builds them."""
    domain, frame = bs.load_real(data)
    if data == "nltcs":
        w = marginal_families(domain, 3)
    else:
        marg = marginal_families(domain, 2)
        preds = random_workload(domain, bs.ADULT_QUERIES, attributes_per_query=(1, 2),
                                kind="mixed", width=(0.05, 0.5), seed=bs.ADULT_QUERY_SEED)
        w = ts.Workload.of(domain, list(preds.queries), partitions=marg.partitions)
    real, n = bs.real_fractions(frame, w)
    return frame, w, real, n


def model_error(result: Any, workload: ts.Workload, real: np.ndarray, n: int) -> float:
    """Mean marginal L1 of the fitted model's exact marginals (no rows)."""
    from tessera.synth.model_answers import model_counts

    marg = ts.Workload.of_families(workload.domain, list(workload.partitions))
    counts = model_counts(result, marg)
    k = len(workload.queries)
    ev = Evaluation(marg, real[k:], counts / result.total, n, n)
    return float(ev.mean_family_l1)


def parse_opt(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, _, value = item.partition("=")
        out[key] = json.loads(value)
    return out


def run(args: argparse.Namespace) -> None:
    frame, w, real, n = setting(args.data)
    opts = parse_opt(args.opt)
    for s in args.seeds:
        t0, c0 = time.perf_counter(), time.process_time()
        fitted = ts.Synthesizer("adaptive", **opts).fit(
            frame, w, bs.budget(args.eps), neighbours=bs.NEIGHBOURS, seed=s)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        l1, q, mx = bs.errors(real, n, np.asarray(fitted.rows), w)
        res = fitted.result
        extra = {}
        if args.also_polish:  # the same model's rows polished here (the run had passes = 0)
            from tessera.synth.adaptive import polish_rows
            from tessera.synth.candidates import candidates
            from tessera.synth.model_view import maximal_scopes

            c1 = time.process_time()
            scopes = maximal_scopes([c.scope for c in candidates(w) if c.is_marginal])
            rows = polish_rows(np.asarray(fitted.rows), res.model, res.fit, scopes,
                               args.also_polish, np.random.default_rng(s))
            extra["polish_cpu"] = time.process_time() - c1
            extra["l1_polished"], q2, _ = bs.errors(real, n, rows, w)
            extra["query_polished"] = None if math.isnan(q2) else q2
        line = {"label": args.label, "data": args.data, "eps": args.eps, "seed": s,
                "opts": opts, "l1": l1, "query": None if math.isnan(q) else q, "max": mx,
                "model_l1": model_error(res, w, real, n), "wall": wall, "cpu": cpu,
                "rounds": len(res.record.history), "loss": res.fit.loss,
                "fit_iterations": res.fit.iterations,
                "width": res.model.width, "load": os.getloadavg()[0],
                "when": time.strftime("%H:%M:%S", time.gmtime())} | extra
        with open(args.out, "a") as f:
            f.write(json.dumps(line) + "\n")
        print(json.dumps(line), flush=True)


def compare(args: argparse.Namespace) -> None:
    rows = [json.loads(x) for x in Path(args.out).read_text().splitlines() if x.strip()]
    by: dict[tuple[str, str, float, int], dict[str, Any]] = {}
    for r in rows:
        by[r["label"], r["data"], r["eps"], r["seed"]] = r  # the last run of a key wins
    settings = sorted({(d, e) for (lab, d, e, _) in by if lab == args.b})
    print(f"| data | ε | seeds | {args.a} | {args.b} | paired ratio {args.b}/{args.a} "
          f"(± se) | model-marginal ratio | CPU s {args.a} / {args.b} |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for d, e in settings:
        seeds = sorted(s for (lab, dd, ee, s) in by
                       if lab == args.b and dd == d and ee == e and (args.a, d, e, s) in by)
        if not seeds:
            continue
        a = [by[args.a, d, e, s] for s in seeds]
        b = [by[args.b, d, e, s] for s in seeds]
        for key in (["l1", "query"] if d == "adult" else ["l1"]):
            ra = [x[key] for x in a]
            rb = [x[key + "_polished" if args.polished else key] for x in b]
            ratios = [y / x for x, y in zip(ra, rb, strict=True)]
            mr = [y["model_l1"] / x["model_l1"] for x, y in zip(a, b, strict=True)]
            se = statistics.stdev(ratios) / math.sqrt(len(ratios)) if len(ratios) > 1 else 0
            print(f"| {d} ({key}) | {e:g} | {len(seeds)} | {fmt(ra)} | {fmt(rb)} | "
                  f"{statistics.fmean(ratios):.3f} ± {se:.3f} | {statistics.fmean(mr):.3f} | "
                  f"{statistics.fmean(x['cpu'] for x in a):.1f} / "
                  f"{statistics.fmean(x['cpu'] for x in b):.1f} "
                  f"(max {max(x['cpu'] for x in b):.1f}) |")


def fmt(v: list[float]) -> str:
    if len(v) == 1:
        return f"{v[0]:.5f}"
    return f"{statistics.fmean(v):.5f} ± {statistics.stdev(v):.5f}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--label", required=True)
    r.add_argument("--data", choices=("nltcs", "adult"), required=True)
    r.add_argument("--eps", type=float, required=True)
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    r.add_argument("--opt", nargs="*", default=[], help="adaptive() settings, key=JSON")
    r.add_argument("--out", required=True)
    r.add_argument("--also-polish", type=int, default=0, metavar="PASSES",
                   help="also polish the run's rows here (run it with polish_passes=0)")
    c = sub.add_parser("compare")
    c.add_argument("--out", required=True)
    c.add_argument("--a", required=True)
    c.add_argument("--b", required=True)
    c.add_argument("--polished", action="store_true",
                   help="B's rows polished by --also-polish (l1_polished, query_polished)")
    args = p.parse_args()
    (run if args.cmd == "run" else compare)(args)


if __name__ == "__main__":
    main()
