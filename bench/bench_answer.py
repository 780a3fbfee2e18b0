"""Benchmark: private answering (`tessera.answer`) — Smith et al.'s utility gain, observed, and
OpenDP.

    python bench/bench_answer.py [--reps 200] [--quick] [--opendp-polars DIR]

Data: the discretised UCI Adult (``adult.csv`` + ``adult-domain.json``, Private-PGM domain) and
NLTCS from ``../shared/data`` beside the project root (``TESSERA_SHARED_DATA`` overrides).

A. **Utility gain.** Two workloads on Adult: 1,000 random predicate queries (1–3 attributes,
   ranges and sets, seed 0) and every cell of every 2-way marginal. For each of ε = 1 (pure,
   discrete Laplace) and ρ = 0.5 (zCDP, discrete Gaussian): one end-to-end ``answer()`` (plan,
   count, noise; its timings), then the exact answers once and ``--reps`` repetitions of the
   noise from OpenDP's secure sampler at

   * Tessera's calibration (the plan's scales: b = γ_w/ε, σ² = γ_w/(2ρ)), and
   * sequential composition (b = t/ε, σ² = t/(2ρ)), through the same OpenDP samplers.

   Observed ratio MAE_seq / MAE_tessera against the prediction t/γ_w (pure) or √(t/γ_w)
   (Gaussian), and against the exact prediction E|Z_seq| / E|Z_tessera| from the noise
   distributions (discrete Laplace: E|Z| = 1/sinh(1/b); discrete Gaussian: the pmf summed).
   Standard errors from the spread of the per-repetition MAE.

B. **OpenDP side by side**, in the same run: the same workload and budget answered as an
   OpenDP 0.16 user would, with ``dp.Context.compositor(data=pl.scan_csv(...),
   privacy_unit=dp.unit_of(contributions=1), privacy_loss=dp.loss_of(epsilon=1.0) (or rho=0.5),
   split_evenly_over=t)`` and one query per workload query:
   ``context.query().filter(<predicate>).select(dp.len(signed=True)).release()`` (OpenDP's
   polars plugin has no ``is_in``/``is_between`` yet: sets and ranges become OR-ed
   comparisons). Each query costs seconds (the context binary-searches the noise scale, ~1,000
   measurement builds), so a random subset of ``--opendp-queries`` queries is released — with
   ``split_evenly_over=t``, so each gets exactly the noise it would get in the full workload —
   and the time is extrapolated to t queries. For the marginals an expert's variant is also run:
   one ``group_by(pair).agg(dp.len()).with_keys(all cells)`` query per marginal,
   ``split_evenly_over`` = the number of marginals (a subset of ``--opendp-marginals``
   marginals, time extrapolated). Errors: each resolved measurement is invoked
   ``--opendp-draws`` times on the data (the first through the context, as a user releases).
   OpenDP 0.16's polars plugin requires polars 1.36.1 exactly; when the project's polars is
   another version, give ``--opendp-polars DIR`` (or ``TESSERA_OPENDP_POLARS``) with
   ``pip install --target DIR polars==1.36.1``: the OpenDP side then runs in a subprocess with
   DIR first on its path.

C. **10⁵ queries**: ``answer()`` end to end (plan, count, noise) on 100,000 random narrow
   queries over Adult (1–3 attributes, width 1–10%) and on all 5-way marginals of NLTCS
   (139,776 cells), each in a fresh subprocess: time per stage and peak memory (ru_maxrss).

Peak memory is ``resource.getrusage(...).ru_maxrss`` of the process that did the work (the
process's peak so far for parts A and B). Timings are wall clock.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TESSERA_SHARED_DATA", ROOT.parent / "shared/data"))
EPSILON, RHO = 1.0, 0.5


def peak_mib() -> float:
    """Peak resident memory of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def markdown_table(header: list[str], rows: list[list[str]]) -> None:
    def line(cells: list[str]) -> str:  # a "|" inside a cell (E|Z|) is escaped
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    print()
    print(line(header))
    print("|" + "---|" * len(header))
    for r in rows:
        print(line(r))
    print(flush=True)


# ---------------------------------------------------------------------------------------------
# Exact mean absolute noise of the two discrete mechanisms
# ---------------------------------------------------------------------------------------------


def mean_abs_laplace(b: float) -> float:
    """E|Z| for Z ~ DLap(b), P[z] = tanh(1/(2b)) e^{−|z|/b}: with a = e^{−1/b},
    2a/(1 − a²) = 1/sinh(1/b)."""
    return 1.0 / math.sinh(1.0 / b)


def mean_abs_gaussian(sigma: float) -> float:
    """E|Z| for Z ~ N_ℤ(0, σ²): 2 Σ_{k≥1} k e^{−k²/(2σ²)} / C(σ), summed to 40σ + 50."""
    from tessera.mechanisms.discrete_gaussian import normaliser

    k = np.arange(1, math.ceil(40 * sigma) + 50, dtype=np.float64)
    return 2.0 * float(np.sum(k * np.exp(-(k * k) / (2 * sigma * sigma)))) / normaliser(sigma)


def mean_abs(mechanism: str, scales: np.ndarray) -> float:
    """Mean over queries of E|Z_q| (one evaluation per distinct scale)."""
    fn = mean_abs_laplace if mechanism == "discrete_laplace" else mean_abs_gaussian
    values, counts = np.unique(scales, return_counts=True)
    return float(np.sum([fn(float(v)) * c for v, c in zip(values, counts)]) / scales.size)


# ---------------------------------------------------------------------------------------------
# A. utility gain
# ---------------------------------------------------------------------------------------------


def workloads(quick: bool) -> list[tuple[str, Any]]:
    from tessera import Domain
    from tessera.workload.builders import marginals, random_workload

    domain = Domain.load(SHARED_DATA / "adult-domain.json")
    out = [("1,000 random predicates",
            random_workload(domain, 1000, attributes_per_query=(1, 3), seed=0))]
    attrs = list(domain.names)[:6] if quick else None
    out.append(("2-way marginals" + (" (6 attrs)" if quick else ""),
                marginals(domain, 2, attrs)))
    return out


def utility(label: str, wl: Any, csv: str, reps: int, time_limit: float,
            subset: np.ndarray, rows_a: list, rows_b: list) -> dict[str, Any]:
    """Part A for one workload; returns what part B compares against."""
    from tessera import Budget, answer, count
    from tessera.mechanisms import NoiseSource, discrete_gaussian, discrete_laplace

    t = len(wl)
    start = time.perf_counter()
    exact = count(csv, wl).answers
    t_count = time.perf_counter() - start
    source = NoiseSource.secure()
    out: dict[str, Any] = {"t": t, "exact": exact, "count": t_count}
    for budget in (Budget.of(epsilon=EPSILON), Budget.of(rho=RHO)):
        pure = budget.mechanism == "discrete_laplace"
        release = answer(csv, wl, budget, time_limit=time_limit)  # secure, end to end
        plan = release.plan
        gamma = float(plan.overlap.bound)
        b_t = np.asarray(plan.scales, dtype=np.float64)
        seq = t / EPSILON if pure else math.sqrt(t / (2.0 * RHO))
        b_s = np.full(t, seq)
        sampler = discrete_laplace.sample if pure else discrete_gaussian.sample
        mae_t, mae_s, time_t, time_s = (np.empty(reps) for _ in range(4))
        sub_abs = np.zeros(subset.size)
        for r in range(reps):
            t0 = time.perf_counter()
            noisy = sampler(exact, b_t, source).values
            time_t[r] = time.perf_counter() - t0
            err = np.abs(noisy - exact)
            mae_t[r] = err.mean()
            sub_abs += err[subset]
            t0 = time.perf_counter()
            noisy = sampler(exact, b_s, source).values
            time_s[r] = time.perf_counter() - t0
            mae_s[r] = np.abs(noisy - exact).mean()
        m_t, m_s = mae_t.mean(), mae_s.mean()
        rel_se = math.sqrt((mae_t.std(ddof=1) / m_t) ** 2 / reps
                           + (mae_s.std(ddof=1) / m_s) ** 2 / reps) if reps > 1 else math.nan
        observed = m_s / m_t
        predicted = t / gamma if pure else math.sqrt(t / gamma)
        exact_pred = mean_abs(plan.mechanism, b_s) / mean_abs(plan.mechanism, b_t)
        dev = abs(observed / predicted - 1.0)
        dev_exact = abs(observed / exact_pred - 1.0)
        name = f"ε = {EPSILON:g}" if pure else f"ρ = {RHO:g}"
        scale_t = f"{b_t[0]:.4g}" if np.all(b_t == b_t[0]) else f"{b_t.min():.4g}–{b_t.max():.4g}"
        rows_a.append([
            label, name, f"{t:,}",
            f"{gamma:g} ({'exact' if plan.overlap.exact else 'upper bound'})",
            f"{'b' if pure else 'σ'} = {scale_t} / {seq:.4g}",
            f"{predicted:.4f}", f"{exact_pred:.4f}",
            f"{observed:.4f} ± {observed * rel_se:.4f}",
            f"{dev:.2%} / {dev_exact:.2%} ({dev_exact / rel_se:.1f} SE)",
            "yes" if dev <= 0.10 else "**no**",
        ])
        tm = release.timings
        rows_b.append([
            label, name, f"{m_t:.2f}", f"{m_s:.2f}",
            f"{tm['plan']:.2f}", f"{t_count:.2f}",
            f"{1e3 * time_t.mean():.1f} / {1e3 * time_s.mean():.1f}",
            f"{tm['total']:.2f}", f"{peak_mib():.0f}",
        ])
        out[name] = {
            "plan": plan, "gamma": gamma, "total": tm["total"], "seq_scale": seq,
            "tess_scale": float(b_t[0]), "sub_mae": float(sub_abs.sum() / (reps * subset.size)),
            "mae": float(m_t), "mae_seq": float(m_s), "reps": reps,
        }
        print(f"  {label}, {name}: γ_w {gamma:g}, observed {observed:.4f}, predicted "
              f"{predicted:.4f} (exact {exact_pred:.4f}), plan {tm['plan']:.1f}s", flush=True)
    return out


# ---------------------------------------------------------------------------------------------
# B. OpenDP (in a worker process, possibly with another polars on its path)
# ---------------------------------------------------------------------------------------------


def query_spec(wl: Any, i: int) -> list[list[Any]]:
    """Query i as [[attribute, [[lo, hi), ...]], ...] in codes (= values in these domains)."""
    return [[p.attribute, [list(s) for s in p.coverage.spans]] for p in wl.queries[i].predicates]


def marginal_blocks(wl: Any, attrs: list[Any]) -> list[tuple[tuple[str, str], int, int]]:
    """(pair, first query, end) of each 2-way marginal, in the builder's order."""
    out, pos = [], 0
    for a, b in itertools.combinations(attrs, 2):
        out.append(((a.name, b.name), pos, pos + a.size * b.size))
        pos += a.size * b.size
    assert pos == len(wl), "marginal layout differs from the builder's"
    return out


def opendp_worker(job_file: str) -> None:
    """Run the OpenDP jobs of ``job_file`` and print one JSON line of results."""
    import warnings

    import opendp.prelude as dp
    import polars as pl

    warnings.filterwarnings("ignore", category=FutureWarning)
    dp.enable_features("contrib")
    job = json.loads(Path(job_file).read_text())
    lf = pl.scan_csv(job["csv"])
    results = []
    for j in job["jobs"]:
        loss = (dp.loss_of(epsilon=j["epsilon"]) if "epsilon" in j
                else dp.loss_of(rho=j["rho"]))
        ctx = dp.Context.compositor(data=lf, privacy_unit=dp.unit_of(contributions=1),
                                    privacy_loss=loss, split_evenly_over=j["split"])
        times, draws, losses = [], [], []
        for item in j["items"]:
            t0 = time.perf_counter()
            if j["kind"] == "cells":
                expr = None
                for attr, spans in item:
                    col = pl.col(attr)
                    cond = None
                    for lo, hi in spans:
                        c = (col == lo) if hi - lo == 1 else ((col >= lo) & (col < hi))
                        cond = c if cond is None else (cond | c)
                    expr = cond if expr is None else (expr & cond)
                query = ctx.query().filter(expr).select(dp.len(signed=True))
            else:
                (a, na), (b, nb) = item
                keys = pl.DataFrame(list(itertools.product(range(na), range(nb))),
                                    schema=[a, b], orient="row").cast(pl.Int64)
                query = (ctx.query().group_by([a, b]).agg(dp.len(signed=True))
                         .with_keys(keys.lazy()))
            meas = query.resolve()
            first = ctx(meas).collect()  # = query.release().collect()
            times.append(time.perf_counter() - t0)
            losses.append(float(meas.map(ctx.d_in)))
            outs = [first] + [meas(lf).collect() for _ in range(j["draws"] - 1)]
            if j["kind"] == "cells":
                draws.append([[int(o.item())] for o in outs])
            else:
                a, b = item[0][0], item[1][0]
                draws.append([o.sort([a, b])["len"].to_list() for o in outs])
        results.append({"times": times, "draws": draws, "losses": losses})
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"polars": pl.__version__, "results": results, "peak_mib": peak}))


def run_opendp(jobs: list[dict[str, Any]], csv: str, polars_dir: str | None) -> dict[str, Any]:
    job_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_answer_opendp_{os.getpid()}.json"
    job_file.write_text(json.dumps({"csv": csv, "jobs": jobs}))
    env = dict(os.environ)
    if polars_dir:
        env["PYTHONPATH"] = os.pathsep.join([polars_dir, *filter(None, [env.get("PYTHONPATH")])])
    try:
        proc = subprocess.run([sys.executable, __file__, "--opendp-worker", str(job_file)],
                              capture_output=True, text=True, env=env, check=False)
    finally:
        job_file.unlink(missing_ok=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-3:]
        raise RuntimeError("OpenDP worker failed: " + " / ".join(last))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def opendp_side(label: str, wl: Any, tess: dict[str, Any], subset: np.ndarray, args: Any,
                csv: str, rows: list) -> None:
    t = tess["t"]
    exact = tess["exact"]
    cells = [query_spec(wl, int(i)) for i in subset]
    jobs: list[dict[str, Any]] = []
    budgets = ((f"ε = {EPSILON:g}", "epsilon", EPSILON), (f"ρ = {RHO:g}", "rho", RHO))
    for name, key, total in budgets:
        jobs.append({"kind": "cells", key: total, "split": t, "items": cells,
                     "draws": args.opendp_draws, "name": name})
    blocks: list[tuple[tuple[str, str], int, int]] = []
    if "marginals" in label:
        domain = wl.domain
        pairs_all = marginal_blocks(wl, [domain[n] for n in tess["marg_attrs"]])
        pick = np.random.default_rng(2).choice(len(pairs_all), size=min(args.opendp_marginals,
                                                                         len(pairs_all)),
                                               replace=False)
        blocks = [pairs_all[int(i)] for i in sorted(pick)]
        items = [[[a, domain[a].size], [b, domain[b].size]] for (a, b), _, _ in blocks]
        for name, key, total in budgets:
            jobs.append({"kind": "marginal", key: total, "split": len(pairs_all), "items": items,
                         "draws": args.opendp_draws, "name": name, "n_blocks": len(pairs_all)})
    out = run_opendp(jobs, csv, args.opendp_polars)
    for job, res in zip(jobs, out["results"]):
        mine = tess[job["name"]]
        pure = "epsilon" in job
        loss = float(np.median(res["losses"]))
        scale = 1.0 / loss if pure else math.sqrt(1.0 / (2.0 * loss))
        if job["kind"] == "cells":
            truth = exact[subset][:, None]
            noisy = np.array([[d[0] for d in q] for q in res["draws"]], dtype=np.float64)
            n_items, whole, how = len(subset), t, "one filter + dp.len per query"
            tess_mae = mine["sub_mae"]
            tess_scale = mine["tess_scale"]
        else:
            truth = np.concatenate([exact[s:e] for _, s, e in blocks])[:, None]
            noisy = np.concatenate([np.array(q, dtype=np.float64).T for q in res["draws"]])
            n_items, whole = len(blocks), job["n_blocks"]
            how = "one group_by(pair).with_keys per marginal"
            tess_mae = mine["mae"]
            tess_scale = mine["tess_scale"]
        err = np.abs(noisy - truth)
        mae = float(err.mean())
        se = float(err.mean(axis=1).std(ddof=1) / math.sqrt(err.shape[0])) if err.shape[0] > 1 \
            else math.nan
        mech = "discrete_laplace" if pure else "discrete_gaussian"
        expected = mean_abs(mech, np.array([scale])) / mean_abs(mech, np.array([tess_scale]))
        per = float(np.mean(res["times"]))
        extrapolated = per * whole
        rows.append([
            label, job["name"], how,
            f"{n_items:,} of {whole:,} (split over {whole:,})",
            f"{'b' if pure else 'σ'} = {scale:.4g} / {tess_scale:.4g}",
            f"{mae:.2f} ± {se:.2f}", f"{tess_mae:.2f}", f"{mae / tess_mae:.3f}",
            f"{expected:.3f}",
            f"{per:.2f}", f"{extrapolated:,.0f}", f"{mine['total']:.1f}",
            f"{extrapolated / mine['total']:,.0f}×",
        ])
    print(f"  OpenDP worker: polars {out['polars']}, peak {out['peak_mib']:.0f} MiB", flush=True)
    tess["opendp_peak"] = out["peak_mib"]


# ---------------------------------------------------------------------------------------------
# C. 10^5 queries
# ---------------------------------------------------------------------------------------------


def scale_worker(spec_json: str) -> None:
    """One answer() end to end in this fresh process; prints one JSON line."""
    from tessera import Budget, Domain, answer
    from tessera.workload.builders import marginals, random_workload

    spec = json.loads(spec_json)
    t0 = time.perf_counter()
    domain = Domain.load(spec["domain"])
    if spec["kind"] == "random":
        wl = random_workload(domain, spec["n"], attributes_per_query=(1, 3),
                             width=(0.01, 0.1), seed=0)
    else:
        wl = marginals(domain, spec["k"])
    t_build = time.perf_counter() - t0
    budget = Budget.of(epsilon=EPSILON) if spec["budget"] == "epsilon" else Budget.of(rho=RHO)
    release = answer(spec["csv"], wl, budget, time_limit=spec["time_limit"])
    tm = release.timings
    ov = release.plan.overlap
    print(json.dumps({
        "t": len(wl), "build": t_build, "plan": tm["plan"], "count": tm["count"],
        "noise": tm["noise"], "total": tm["total"], "gamma": float(ov.bound),
        "achieved": float(ov.achieved), "exact": bool(ov.exact), "method": ov.method,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }))


def scale_part(args: Any) -> None:
    n = 10_000 if args.quick else args.scale_queries
    specs = [
        (f"Adult, {n:,} random narrow (1–3 attrs, width 1–10%)",
         {"kind": "random", "n": n, "domain": str(SHARED_DATA / "adult-domain.json"),
          "csv": str(SHARED_DATA / "adult.csv")}),
        ("NLTCS, all " + ("4" if args.quick else "5") + "-way marginals",
         {"kind": "marginals", "k": 4 if args.quick else 5,
          "domain": str(SHARED_DATA / "nltcs-domain.json"),
          "csv": str(SHARED_DATA / "nltcs.csv")}),
    ]
    rows = []
    for label, spec in specs:
        for budget in ("epsilon", "rho"):
            spec = {**spec, "budget": budget, "time_limit": args.time_limit}
            proc = subprocess.run([sys.executable, __file__, "--scale-worker", json.dumps(spec)],
                                  capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(proc.stderr[-2000:])
                raise RuntimeError(f"scale worker failed for {label}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            name = f"ε = {EPSILON:g}" if budget == "epsilon" else f"ρ = {RHO:g}"
            gamma = (f"{r['gamma']:g} (exact)" if r["exact"]
                     else f"≤ {r['gamma']:g} (row found: {r['achieved']:g})")
            rows.append([label, name, f"{r['t']:,}", gamma, f"{r['build']:.1f}",
                         f"{r['plan']:.1f}", f"{r['count']:.1f}", f"{r['noise']:.2f}",
                         f"{r['total']:.1f}", f"{r['peak_mib']:.0f}"])
            print(f"  {label}, {name}: total {r['total']:.1f}s ({r['method']})", flush=True)
    print("\nC. 10⁵ queries: answer() end to end, each in a fresh process (secure noise)")
    markdown_table(["workload", "budget", "t", "γ_w", "build s", "plan s", "count s", "noise s",
                    "answer() total s", "peak MiB"], rows)


# ---------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=None, help="noise repetitions (default 200)")
    ap.add_argument("--quick", action="store_true", help="smoke run: fewer reps and queries")
    ap.add_argument("--time-limit", type=float, default=60.0, help="overlap solver limit (s)")
    ap.add_argument("--opendp-queries", type=int, default=None,
                    help="OpenDP: queries released per workload and budget (default 40)")
    ap.add_argument("--opendp-marginals", type=int, default=None,
                    help="OpenDP group-by variant: marginals released (default 8)")
    ap.add_argument("--opendp-draws", type=int, default=None,
                    help="OpenDP: draws of each resolved measurement (default 20)")
    ap.add_argument("--opendp-polars", default=os.environ.get("TESSERA_OPENDP_POLARS"),
                    help="directory with polars==1.36.1 (pip install --target) for OpenDP")
    ap.add_argument("--scale-queries", type=int, default=100_000)
    ap.add_argument("--skip", nargs="*", default=[], choices=["utility", "opendp", "scale"])
    ap.add_argument("--opendp-worker", help=argparse.SUPPRESS)
    ap.add_argument("--scale-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.opendp_worker:
        opendp_worker(args.opendp_worker)
        return
    if args.scale_worker:
        scale_worker(args.scale_worker)
        return
    reps = args.reps if args.reps is not None else (10 if args.quick else 200)
    args.opendp_queries = args.opendp_queries or (4 if args.quick else 40)
    args.opendp_marginals = args.opendp_marginals or (1 if args.quick else 8)
    args.opendp_draws = args.opendp_draws or (3 if args.quick else 20)
    csv = str(SHARED_DATA / "adult.csv")
    from importlib.metadata import version

    print(f"Adult: {csv}; {reps} repetitions; OpenDP {version('opendp')}; "
          f"{os.cpu_count()} CPUs; secure OpenDP noise throughout", flush=True)
    rows_a: list[list[str]] = []
    rows_b: list[list[str]] = []
    rows_c: list[list[str]] = []
    for label, wl in ([] if "utility" in args.skip else workloads(args.quick)):
        subset = np.sort(np.random.default_rng(1).choice(len(wl), size=min(
            args.opendp_queries, len(wl)), replace=False))
        tess = utility(label, wl, csv, reps, args.time_limit, subset, rows_a, rows_b)
        tess["marg_attrs"] = sorted({a for q in wl.queries for a in q.scope},
                                    key=wl.domain.index)
        if "opendp" not in args.skip:
            try:
                opendp_side(label, wl, tess, subset, args, csv, rows_c)
            except RuntimeError as e:
                print(f"  OpenDP side skipped: {e}", flush=True)
    if rows_a:
        print(f"\nA. Utility gain: MAE under sequential composition / MAE under Tessera's "
              f"calibration ({reps} repetitions, ± one standard error)")
        markdown_table(["workload", "budget", "t", "γ_w", "scale Tessera / sequential",
                        "predicted t/γ_w (√ for ρ)", "predicted exactly (E|Z|)", "observed",
                        "|obs/pred − 1| / vs exact", "within 10%?"], rows_a)
        print("MAE and time (noise per repetition: Tessera's scales / sequential scales, both "
              "OpenDP's secure samplers)")
        markdown_table(["workload", "budget", "MAE Tessera", "MAE sequential", "plan s",
                        "count s", "noise ms/rep (Tessera / sequential)", "answer() total s",
                        "peak MiB"], rows_b)
    if rows_c:
        print("B. OpenDP 0.16 Context (split_evenly_over), same workload and budget: MAE on the "
              "released queries (± SE) vs Tessera's MAE on the same queries, time per query "
              "and for the whole workload (extrapolated) vs Tessera's answer()")
        markdown_table(["workload", "budget", "OpenDP queries", "released", "scale OpenDP / "
                        "Tessera", "MAE OpenDP", "MAE Tessera", "ratio", "expected (E|Z|)",
                        "OpenDP s/query",
                        "OpenDP whole s", "Tessera answer() s", "time ratio"], rows_c)
    if "scale" not in args.skip:
        scale_part(args)


if __name__ == "__main__":
    main()
