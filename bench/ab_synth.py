"""Paired A/B runs of the adaptive synthesizer: seeded, NOT PRIVATE.

    python bench/ab_synth.py run --label base --data nltcs --eps 10 --seeds 0 1 2 3 4 \
        --out /tmp/ab.jsonl [--opt final_iterations=3000 ...]
    python bench/ab_synth.py compare --out /tmp/ab.jsonl --a base --b exact
    python bench/ab_synth.py baseline --method aim --data holdout --eps 1 --seeds 0 \
        --pgm-path /tmp/private-pgm --out /tmp/ab.jsonl   # then compare --a aim --b base

``baseline`` re-executes itself under ``PYTHONHASHSEED=0`` (AIM iterates Python sets of
attribute names, whose order follows the hash seed: ``bench_synth_baselines.py``) and records
it (``python_hash_seed``) in each line.

``run`` fits ``tessera.Synthesizer("adaptive", **opts)`` with the test-only ``seed=s`` (OpenDP's
seeded sampler: the outputs are NOT PRIVATE, and two variants given the same seed draw the same
noise for as long as they make the same choices) on the same data, workload and budget as
``bench/bench_synth.py`` (``--part nltcs``: all 3-way marginals; ``--part adult``: all 2-way
marginals + 1,000 predicate queries; (ε, δ = 1e-9), add/remove; ``--data holdout``: all 2-way
marginals of a held-out table built from ../shared/data/adult-raw, :func:`holdout`; ``--data
small``: 1,304 rows of Adult, all 3-way marginals of eight attributes, :func:`small`; ``--data
quakes`` or any table of ``bench/panel.py``: its 2-way marginals, as ``bench/bench_panel.py``)
and measures the rows with bench_synth's own ``errors`` (mean marginal L1, mean predicate-query
error; ``--hide-queries``: the run is fitted to the marginals alone and still scored on the
queries). It also records the error of the fitted model's exact marginals
(``tessera.synth.adaptive_record.model_counts``: no rows), the run's CPU time, rounds and final
loss. One JSON line per run is appended to ``--out``; a variant is whatever code ``PYTHONPATH``
points at plus ``--opt`` settings.

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
import panel  # noqa: E402

import tessera as ts  # noqa: E402
from tessera.synth.evaluate import Evaluation  # noqa: E402
from tessera.workload.builders import marginal_families, random_workload  # noqa: E402

#: A held-out table (measured off the benchmarks): UCI Adult's raw rows (train +
#: test, 48,842) with larger attributes than the discretized benchmark: age as given (74 values),
#: hours-per-week in 3-hour bins (33), fnlwgt in 501 quantile bins, and six categorical columns.
HOLDOUT_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
                   "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
                   "hours-per-week", "native-country", "income"]


#: The settings ``--data`` names: bench_synth's two parts, the held-out table, the small one and
#: the panel's tables (``bench/panel.py``, all 2-way marginals).
DATA = ("nltcs", "adult", "holdout", "small", *panel.TABLES)


def holdout() -> tuple[ts.Domain, Any]:
    """The held-out table (:data:`HOLDOUT_COLUMNS`) as codes, from ../shared/data/adult-raw."""
    import pandas as pd

    raw = bs.DATA / "adult-raw"
    parts = [pd.read_csv(raw / f, header=None, names=HOLDOUT_COLUMNS, skipinitialspace=True,
                         skiprows=k) for k, f in ((0, "adult.data"), (1, "adult.test"))]
    df = pd.concat(parts, ignore_index=True)
    out = pd.DataFrame()
    out["age"] = df["age"].rank(method="dense").astype(int) - 1
    out["hours"] = (df["hours-per-week"] - 1) // 3
    out["fnlwgt"] = pd.qcut(df["fnlwgt"].rank(method="first"), 501, labels=False)
    for c in ("workclass", "education", "marital-status", "occupation", "sex", "native-country"):
        out[c] = df[c].astype(str).rank(method="dense").astype(int) - 1
    sizes = {c: int(out[c].max()) + 1 for c in out.columns}
    return ts.Domain.from_dict(sizes), out


#: A small sparse held-out table: 1,304 rows (the size of the issue's small unseen table) drawn
#: once (seed 7) from the discretized Adult, eight attributes, all 56 3-way marginals.
SMALL_COLUMNS = ["age", "workclass", "education", "marital-status", "occupation", "sex",
                 "hours-per-week", "income>50K"]


def small() -> tuple[ts.Domain, Any]:
    """The small held-out table (:data:`SMALL_COLUMNS`)."""
    domain, frame = bs.load_real("adult")
    sizes = {c: domain.sizes[domain.index(c)] for c in SMALL_COLUMNS}
    rows = frame[SMALL_COLUMNS].sample(1304, random_state=7).reset_index(drop=True)
    return ts.Domain.from_dict(sizes), rows


def setting(data: str) -> tuple[Any, ts.Workload, np.ndarray, int]:
    """(frame, workload, real fractions, n) exactly as bench_synth's part ``data`` builds them
    (``holdout``: all 2-way marginals of :func:`holdout`; a table of ``bench/panel.py``: all its
    2-way marginals, as ``bench/bench_panel.py`` builds them)."""
    if data in panel.TABLES:
        import pandas as pd

        csv, dom = panel.materialise(data)
        domain = ts.Domain.load(dom)
        frame = pd.read_csv(csv)[list(domain.names)]
        w = marginal_families(domain, 2)
        real, n = bs.real_fractions(frame, w)
        return frame, w, real, n
    if data in ("holdout", "small"):
        domain, frame = holdout() if data == "holdout" else small()
        w = marginal_families(domain, 2 if data == "holdout" else 3)
        real, n = bs.real_fractions(frame, w)
        return frame, w, real, n
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
    from tessera.synth.adaptive_record import model_counts

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
    budget = ts.Budget.of(epsilon=args.eps) if args.pure else bs.budget(args.eps)
    bs.warm_up(frame, w, budget)  # untimed: no seed pays the one-time costs
    for s in args.seeds:
        t0, c0 = time.perf_counter(), time.process_time()
        seen = ts.Workload.of(w.domain, [], partitions=w.partitions) if args.hide_queries \
            else w  # --hide-queries: the predicate queries are scored, never shown to the run
        fitted = ts.Synthesizer("adaptive", **opts).fit(
            frame, seen, budget, neighbours=bs.NEIGHBOURS, seed=s)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        l1, q, mx = bs.errors(real, n, np.asarray(fitted.rows), w)
        res = fitted.result
        extra = {}
        if args.also_polish:  # the same model's rows polished here (the run had passes = 0)
            from tessera.synth.candidates import candidates
            from tessera.synth.model_view import maximal_scopes
            from tessera.synth.row_polish import polish_rows

            c1 = time.process_time()
            scopes = maximal_scopes([c.scope for c in candidates(w) if c.is_marginal])
            rows = polish_rows(np.asarray(fitted.rows), res.model, res.fit, scopes,
                               args.also_polish, np.random.default_rng(s))
            extra["polish_cpu"] = time.process_time() - c1
            extra["l1_polished"], q2, _ = bs.errors(real, n, rows, w)
            extra["query_polished"] = None if math.isnan(q2) else q2
        line = {"label": args.label + (" (pure)" if args.pure else "")
                + (" (queries hidden)" if args.hide_queries else ""), "data": args.data,
                "eps": args.eps, "seed": s,
                "opts": opts, "l1": l1, "query": None if math.isnan(q) else q, "max": mx,
                "model_l1": model_error(res, w, real, n), "wall": wall, "cpu": cpu,
                "rounds": len(res.record.history), "loss": res.fit.loss,
                "fit_iterations": res.fit.iterations,
                "width": res.model.width, "load": os.getloadavg()[0],
                "when": time.strftime("%H:%M:%S", time.gmtime())} | extra
        with open(args.out, "a") as f:
            f.write(json.dumps(line) + "\n")
        print(json.dumps(line), flush=True)


def baseline(args: argparse.Namespace) -> None:
    """One AIM or MST run (mbi, the scripts of ``bench_synth_baselines.py --pgm-path``, its
    shims) on the setting's marginals, measured like ``run``; numpy-seeded, under the fixed
    hash seed (module docs), NOT PRIVATE."""
    import resource

    import bench_synth_baselines as bb

    bb.ensure_hash_seed(sys.argv)
    import jax
    from mbi import Dataset, Domain

    pgm = bb.pgm_path(args.pgm_path)
    if pgm is None:
        sys.exit(bb.HOW_TO_GET)
    aim, mst = bb.load_mechanisms(pgm)
    frame, w, real, n = setting(args.data)
    names = list(w.domain.names)
    data = Dataset({c: frame[c].to_numpy() for c in names},
                   Domain.fromdict(dict(zip(names, w.domain.sizes, strict=True))))
    cliques = sorted({tuple(p.attributes) for p in w.partitions})
    for s in args.seeds:
        np.random.seed(s)  # not-privacy-noise: the baseline's own (numpy) randomness
        t0, c0 = time.perf_counter(), time.process_time()
        if args.method == "mst":
            synth = mst.MST(data, args.eps, bs.DELTA)
        else:
            class AIM(aim.AIM):  # type: ignore[misc,name-defined]
                def worst_approximated(self, *a: Any, **k: Any) -> Any:
                    with jax.disable_jit():
                        return super().worst_approximated(*a, **k)

            _, synth = AIM(args.eps, bs.DELTA).run(data, [(c, 1.0) for c in cliques])
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        columns = synth.to_dict()
        codes = np.column_stack([np.asarray(columns[c]) for c in names]).astype(np.int64)
        l1, q, mx = bs.errors(real, n, codes, w)
        line = {"label": args.method, "data": args.data, "eps": args.eps, "seed": s,
                "opts": {}, "l1": l1, "query": None if math.isnan(q) else q, "max": mx,
                "wall": wall, "cpu": cpu, "load": os.getloadavg()[0],
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "python_hash_seed": os.environ.get("PYTHONHASHSEED"),
                "when": time.strftime("%H:%M:%S", time.gmtime())}
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
    r.add_argument("--data", choices=DATA, required=True)
    r.add_argument("--eps", type=float, required=True)
    r.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    r.add_argument("--opt", nargs="*", default=[], help="adaptive() settings, key=JSON")
    r.add_argument("--out", required=True)
    r.add_argument("--pure", action="store_true",
                   help="pure ε-DP (ε, add/remove) instead of (ε, δ = 1e-9); the label gets "
                        "' (pure)'")
    r.add_argument("--hide-queries", action="store_true",
                   help="fit on the workload's marginals only; the predicate queries (Adult's "
                        "1,000) are still scored: queries the synthesizer was not fitted to; "
                        "the label gets ' (queries hidden)'")
    r.add_argument("--also-polish", type=int, default=0, metavar="PASSES",
                   help="also polish the run's rows here (run it with polish_passes=0)")
    b = sub.add_parser("baseline")
    b.add_argument("--method", choices=("aim", "mst"), required=True)
    b.add_argument("--data", choices=DATA, required=True)
    b.add_argument("--eps", type=float, required=True)
    b.add_argument("--seeds", type=int, nargs="+", default=[0])
    b.add_argument("--pgm-path", default=None)
    b.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--out", required=True)
    c.add_argument("--a", required=True)
    c.add_argument("--b", required=True)
    c.add_argument("--polished", action="store_true",
                   help="B's rows polished by --also-polish (l1_polished, query_polished)")
    args = p.parse_args()
    {"run": run, "baseline": baseline, "compare": compare}[args.cmd](args)


if __name__ == "__main__":
    main()
