"""Benchmarks of private synthetic data (docs/theory.md §5, §6, §9; docs/synth.md).

    python bench/bench_synth.py --part nltcs      # 560 3-way marginals, ε ∈ {0.1, 1, 10}
    python bench/bench_synth.py --part adult      # 105 2-way marginals + 1,000 predicate queries
    python bench/bench_synth.py --part dimension  # tree-MRF workload, d = 64, 256, 1024
    python bench/bench_synth.py --part rates      # IPMWU's error against Ghazi et al.'s α(n)
    python bench/bench_synth.py --part all --pgm-path /tmp/private-pgm --reuse-baselines

Tessera's methods (``tessera.Synthesizer``: ``adaptive`` — the default, reported ``pending``
while it is not implemented —, ``ipmwu``, ``mwem``, ``lp``) against Private-PGM's AIM and MST
(``bench/bench_synth_baselines.py``: how to get them, the shims, the cache; each AIM/MST run is
a subprocess under ``PYTHONHASHSEED=0``, recorded as ``python_hash_seed`` in the results, since
AIM's set iteration order, and so its run, depends on it). Every run is
(ε, δ = 1e-9) under add/remove neighbours (AIM and MST's own relation): Tessera gets
``tessera.Budget.of(epsilon=ε, delta=1e-9)`` (calibrated as the largest ρ-zCDP that implies it);
the baselines convert with their own ``cdp2adp.cdp_rho``. Tessera's noise is OpenDP's secure
sampler (no ``seed=``: the runs are private, and repeated runs differ); "seed" s of a Tessera
method is only the s-th repetition.

Error (the issue's metric): for each marginal, the L1 distance between the real and the
synthetic marginal, both normalised to sum 1, averaged over the workload's marginals; for
predicate queries, the mean |real fraction − synthetic fraction|. Both are counted by
``tessera.count`` (``tessera.synth.evaluate.Evaluation``) from the rows each method outputs.
Tessera's methods output as many rows as the data has (``rows=n``; rows are post-processing).

A run of a Tessera method that exceeds ``--run-seconds`` is stopped from its progress callback
and reported as such, with the rounds done and the projected total (rounds × seconds per round);
no further repetitions of that cell are started. The machine is shared (2 cores, other
engineers' jobs): every table states the load average.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_synth_baselines as baselines  # noqa: E402

import tessera as ts  # noqa: E402
from tessera.engine.families import binary_domain, random_tree  # noqa: E402
from tessera.errors import TesseraError  # noqa: E402
from tessera.synth.charge import Target  # noqa: E402
from tessera.synth.evaluate import Evaluation  # noqa: E402
from tessera.synth.fitted import decode_rows  # noqa: E402
from tessera.workload.builders import marginal_families, random_workload  # noqa: E402
from tessera.workload.families import Partition  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DATA = baselines.SHARED_DATA
DOCS = REPO / "docs"
PLOTS = [DOCS]  # where the PNGs go (--plots)
DELTA = baselines.DELTA
RESULTS = baselines.CACHE / "results"
RESULTS_DIR = [RESULTS]  # --results
TESSERA_METHODS = ("adaptive", "ipmwu", "mwem", "lp")
NLTCS_EPS = (0.1, 1.0, 10.0)
NLTCS_AIM_EPS = (0.1, 1.0, 10.0)
ADULT_EPS = (0.3, 1.0)
ADULT_MST_SEEDS = 3
ADULT_QUERIES = 1000
ADULT_QUERY_SEED = 0
#: AIM's marginal L1 from earlier sessions' runs of this benchmark (docs/benchmarks.md:
#: 2026-12-01, one run per ε; NLTCS ε = 10 the issue's own figure). Drawn as hollow reference
#: markers, labelled so, where this run has no AIM of its own — never used in a ratio.
AIM_EARLIER = {"nltcs": {0.1: 0.0904, 1.0: 0.0140, 10.0: 0.0031},
               "adult": {0.3: 0.0998, 1.0: 0.0533}}
NEIGHBOURS = "add-remove"


class TimeUp(Exception):  # noqa: N818  (a control signal, not an error)
    """Raised from a progress callback when a run exceeds its time cap."""


@dataclass
class Run:
    """One run of one method: status, time, errors, and what the run said of itself."""

    method: str
    epsilon: float
    seed: int
    status: str = "ok"  # ok | pending | time cap | failed | refused
    seconds: float = math.nan
    marginal_l1: float = math.nan
    query_error: float = math.nan
    rounds: int | None = None
    rounds_planned: int | None = None
    per_round: float | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


# -- data, workloads, errors --------------------------------------------------------------------


def load_real(name: str) -> tuple[ts.Domain, pd.DataFrame]:
    domain = ts.Domain.load(DATA / f"{name}-domain.json")
    frame = pd.read_csv(DATA / f"{name}.csv", usecols=list(domain.names))[list(domain.names)]
    return domain, frame


def real_fractions(frame_or_codes: Any, workload: ts.Workload) -> tuple[np.ndarray, int]:
    if not isinstance(frame_or_codes, pd.DataFrame) and marginals_only(workload):
        codes = np.asarray(frame_or_codes, dtype=np.int64)
        return marginal_counts(codes, workload) / float(codes.shape[0]), int(codes.shape[0])
    res = ts.count(_as_frame(frame_or_codes, workload.domain), workload)
    return res.answers / float(res.n_rows), int(res.n_rows)


def marginals_only(workload: ts.Workload) -> bool:
    """Whether the workload is plain marginals (no predicate queries, no grouped axes)."""
    return not workload.queries and all(
        p.kind == "marginal" and all(g is None for g in p.groups) for p in workload.partitions)


def marginal_counts(codes: np.ndarray, workload: ts.Workload) -> np.ndarray:
    """The cells of a marginals-only workload counted from rows of codes by ``np.bincount``
    (row-major over each family's attributes, as ``tessera.count``): decoding d = 1,024 columns
    of 100,000 rows to values and encoding them again took minutes of the benchmark."""
    dom = workload.domain
    out = np.zeros(workload.n_queries, dtype=np.int64)
    for part, cells in workload.family_slices():
        idx = [dom.index(a) for a in part.attributes]
        shape = tuple(dom.sizes[i] for i in idx)
        keys = np.ravel_multi_index(tuple(codes[:, i] for i in idx), shape)
        out[cells] = np.bincount(keys, minlength=math.prod(shape))
    return out


def _as_frame(x: Any, domain: ts.Domain) -> pd.DataFrame:
    if isinstance(x, pd.DataFrame):
        return x
    return decode_rows(domain, np.asarray(x, dtype=np.int64))


def errors(real: np.ndarray, n: int, codes: np.ndarray, workload: ts.Workload) -> tuple[
        float, float, float]:
    """(mean marginal L1, mean predicate-query error, max error over every query and cell) of
    synthetic rows (codes)."""
    synth, m = real_fractions(codes, workload)
    ev = Evaluation(workload, real, synth, n, m)
    l1 = ev.mean_family_l1
    k = len(workload.queries)
    q = float(np.mean(ev.errors[:k])) if k else math.nan
    return (math.nan if l1 is None else float(l1)), q, ev.max_error


def family_errors(real: np.ndarray, codes: np.ndarray, workload: ts.Workload) -> list[float]:
    """Each marginal's L1 distance between the real fractions and those of synthetic rows."""
    synth, _ = real_fractions(codes, workload)
    return [float(np.abs(real[cells] - synth[cells]).sum()) for _, cells in
            workload.family_slices()]


def release_errors(real: np.ndarray, noisy: np.ndarray, n: int,
                   workload: ts.Workload) -> tuple[float, float]:
    """Errors of answering directly: predicate queries as noisy/n; each marginal clipped at 0
    and normalised to sum 1 (post-processing) before its L1 distance."""
    k = len(workload.queries)
    q = float(np.mean(np.abs(real[:k] - noisy[:k] / n))) if k else math.nan
    l1s = []
    for _, cells in workload.family_slices():
        est = np.clip(noisy[cells], 0.0, None)
        est = est / est.sum() if est.sum() > 0 else np.full(est.size, 1.0 / est.size)
        l1s.append(float(np.abs(real[cells] - est).sum()))
    return (float(np.mean(l1s)) if l1s else math.nan), q


def edge_workload(domain: ts.Domain, edges: Sequence[tuple[int, int]]) -> ts.Workload:
    """The tree-MRF workload: the 2-way marginal of every tree edge (docs/theory.md §8)."""
    names = domain.names
    return ts.Workload.of_families(domain, [
        Partition.marginal(domain, [names[i], names[j]]) for i, j in edges])


def tree_data(d: int, n: int, seed: int = 0) -> tuple[ts.Domain, list[tuple[int, int]],
                                                     np.ndarray]:
    """n rows of d binary attributes from a known tree model (a random recursive tree, seed):
    x_0 ~ Bernoulli(p), each child copies its parent and flips it with its own probability in
    [0.05, 0.45]."""
    rng = np.random.default_rng(seed)  # not-privacy-noise: the synthetic population
    edges = random_tree(d, seed)
    flip = rng.uniform(0.05, 0.45, size=d)
    codes = np.zeros((n, d), dtype=np.int64)
    codes[:, 0] = rng.random(n) < rng.uniform(0.2, 0.8)
    for parent, child in edges:  # parent < child: parents are drawn first
        codes[:, child] = codes[:, parent] ^ (rng.random(n) < flip[child])
    return binary_domain(d), edges, codes


# -- running one method ------------------------------------------------------------------------


def budget(eps: float) -> Any:
    return ts.Budget.of(epsilon=eps, delta=DELTA)


def warm_up(data: Any, workload: ts.Workload, target: Any, rows: int = 64) -> None:
    """One untimed adaptive fit on the first ``rows`` rows at the same budget ``target``, so
    that no timed run pays a process's one-time costs (the modules a fit imports on first use,
    the memoised (ε, δ) → ρ conversion): every seed is timed alike (``bench/bench_panel.py``,
    ``bench/ab_synth.py``)."""
    ts.Synthesizer("adaptive").fit(data.head(rows), workload, target, neighbours=NEIGHBOURS)


def run_tessera(method: str, eps: float, seed: int, data: Any, workload: ts.Workload,
                real: np.ndarray, n: int, limit: float,
                options: dict[str, Any] | None = None) -> Run:
    """One fit of ``tessera.Synthesizer(method)`` (``lp``: a ``tessera.answer`` release of the
    workload plus ``TRUE`` — the LP takes n from it under add/remove —, then the LP), timed, its
    rows evaluated; ``pending`` when the method is not implemented yet."""
    run = Run(method, eps, seed)
    opts = dict(options or {})
    try:
        synth = ts.Synthesizer(method, **opts)
    except TesseraError as e:
        if "not implemented" in str(e):
            run.status, run.note = "pending", str(e).splitlines()[0]
            return run
        raise
    t0 = time.perf_counter()
    c0 = time.process_time()  # this process's CPU time: what an idle machine would take
    ticks: list[float] = []
    planned: list[int] = []

    def progress(p: Any) -> None:
        if p.step not in ("round", "iteration"):  # the counting, setup, final fit, sampling
            if time.perf_counter() - t0 > limit:
                raise TimeUp
            return
        ticks.append(time.perf_counter())
        total = getattr(p, "rounds", None)
        if isinstance(total, int):
            planned[:] = [total]
        if time.perf_counter() - t0 > limit:
            raise TimeUp

    try:
        if method == "lp":
            lp_w = ts.Workload.of(workload.domain, [*workload.queries,
                                                    *ts.Workload.from_sql(["TRUE"],
                                                                          workload.domain)],
                                  partitions=workload.partitions)
            release = ts.answer(data, lp_w, budget(eps), neighbours=NEIGHBOURS)
            run.extra["release_s"] = time.perf_counter() - t0
            fitted = synth.fit(data, lp_w, release=release, progress=progress)
        else:
            fitted = synth.fit(data, workload, budget(eps), neighbours=NEIGHBOURS,
                               progress=progress)
        codes = np.asarray(fitted.rows)
        run.seconds = time.perf_counter() - t0
        run.extra["cpu_seconds"] = time.process_time() - c0
    except TimeUp:
        run.status = "time cap"
        run.seconds = time.perf_counter() - t0
        run.extra["cpu_seconds"] = time.process_time() - c0
        run.rounds = len(ticks)
        run.rounds_planned = planned[0] if planned else None
        if len(ticks) > 1:
            run.per_round = (ticks[-1] - ticks[0]) / (len(ticks) - 1)
        proj = ""
        if run.per_round and run.rounds_planned:
            proj = f"; projected ≥ {run.per_round * run.rounds_planned:,.0f} s"
        run.note = (f"stopped at {limit:g} s after {run.rounds} of "
                    f"{run.rounds_planned or '?'} rounds{proj}")
        return run
    except TesseraError as e:
        run.status = "refused"
        run.seconds = time.perf_counter() - t0
        run.note = " ".join(str(e).split())[:300]
        return run
    except Exception as e:  # noqa: BLE001  (reported precisely, never hidden)
        run.status = "failed"
        run.seconds = time.perf_counter() - t0
        run.note = f"{type(e).__name__}: {e}"[:300]
        run.extra["traceback"] = traceback.format_exc()
        print(run.extra["traceback"], file=sys.stderr)
        return run
    try:
        rec = fitted.run_record()
        t = rec.get("timings", {})
        run.rounds = t.get("n_rounds") or (len(ticks) or None)
        run.per_round = t.get("mean_round")
        run.extra["timings"] = t
        run.extra["width"] = rec.get("width")
        run.extra["parameters"] = {k: v for k, v in rec.get("parameters", {}).items()
                                   if k in ("rounds", "step", "sample_size", "rows", "alpha",
                                            "expectations", "update")}
    except Exception as e:  # noqa: BLE001
        run.extra["record_error"] = f"{type(e).__name__}: {e}"
    if run.per_round is None and len(ticks) > 1:
        run.per_round = (ticks[-1] - ticks[0]) / (len(ticks) - 1)
    run.marginal_l1, run.query_error, run.extra["max_error"] = errors(real, n, codes, workload)
    if workload.partitions:
        run.extra["family_l1"] = family_errors(real, codes, workload)
    run.extra["synthetic_rows"] = int(codes.shape[0])
    return run


def run_baseline(method: str, dataset: str, k: int, eps: float, seed: int,
                 args: argparse.Namespace, domain: ts.Domain, workload: ts.Workload,
                 real: np.ndarray, n: int) -> Run:
    """One AIM/MST run: its rows from the /tmp cache (``--reuse-baselines``) or a fresh run
    (``--pgm-path``), evaluated here and summarised in the committed summary file
    (``baselines.SUMMARY``); without rows, ``--reuse-baselines`` takes the errors the summary
    recorded."""
    run = Run(method.upper(), eps, seed)
    workload_name = f"{k}way"
    pgm = baselines.pgm_path(args.pgm_path)
    rec = baselines.cached(dataset, workload_name, method, eps, seed) \
        if args.reuse_baselines else None
    if rec is None and args.reuse_baselines:
        entry = baselines.summarised(dataset, workload_name, method, eps, seed)
        if entry is not None:
            return from_summary(run, entry)
    if rec is not None:
        rec["reused"] = True
    elif pgm is None:
        run.status, run.note = "not run", ("not cached, not in the summary and no --pgm-path"
                                           if args.reuse_baselines else "no --pgm-path")
        return run
    else:
        try:
            rec = baselines.run_cached(dataset, k, method, eps, seed, pgm, reuse=False)
        except RuntimeError as e:
            run.status, run.note = "failed", str(e)[:500]
            return run
    header, rows = baselines.read_rows(rec)
    table = np.asarray(rows, dtype=np.int64)
    codes = table[:, [header.index(a) for a in domain.names]]
    run.seconds = float(rec["time_s"])
    run.marginal_l1, run.query_error, max_error = errors(real, n, codes, workload)
    baselines.record_summary(rec, {
        "marginal_l1": run.marginal_l1,
        "query_error": None if math.isnan(run.query_error) else run.query_error,
        "max_error": max_error, "workload": workload_text(dataset, k, workload)})
    run.note = ("cached: " if rec.get("reused") else "") + (
        f"measured {rec['measured_at']} on {rec['machine']}, peak {rec['peak_rss_mb']:.0f} MB")
    run.extra = {k: rec[k] for k in ("measured_at", "machine", "command", "peak_rss_mb", "mbi",
                                     "jax", "pgm_source", "rho", "reused", "cpu_s", "load_start",
                                     "load_end", "python_hash_seed") if k in rec}
    run.extra["max_error"] = max_error
    return run


def aim_runs(dataset: str, k: int, eps: float, args: argparse.Namespace, domain: ts.Domain,
             workload: ts.Workload, real: np.ndarray, n: int) -> list[Run]:
    """AIM at ε: seed 0 (run here when it is not on record and ``--pgm-path`` is given) and,
    with ``--reuse-baselines``, every other seed on record (``baselines.recorded_seeds``)."""
    seeds = [0]
    if args.reuse_baselines:
        seeds = sorted({0, *baselines.recorded_seeds(dataset, f"{k}way", "aim", eps)})
    # one repeat per seed: a seed not on record ("not run") must not stop the others
    return [r for s in seeds for r in repeat("AIM", eps, [s], lambda s: run_baseline(
        "aim", dataset, k, eps, s, args, domain, workload, real, n))]


def aim_mean(aim: Sequence[Run], field: str) -> float:
    """The mean of a field over AIM's finished runs (the ratios' denominator)."""
    return statistics.fmean(getattr(r, field) for r in aim)


def from_summary(run: Run, entry: dict[str, Any]) -> Run:
    """A baseline run taken from the committed summary (its rows are gone)."""
    err = entry["errors"]
    run.seconds = float(entry["time_s"])
    run.marginal_l1 = float(err["marginal_l1"])
    q = err.get("query_error")
    run.query_error = math.nan if q is None else float(q)
    peak = entry.get("peak_rss_mb")
    run.note = (f"summary: measured {entry['measured_at']} on {entry['machine']}, peak "
                + (f"{peak:.0f} MB" if peak is not None else "memory not recorded"))
    run.extra = {k: entry.get(k) for k in ("measured_at", "machine", "command", "peak_rss_mb",
                                           "mbi", "jax", "cpu_s", "load_start", "load_end",
                                           "python_hash_seed")}
    run.extra["reused"] = "summary"
    run.extra["max_error"] = err.get("max_error")
    return run


def workload_text(dataset: str, k: int, workload: ts.Workload) -> str:
    """What the summary's errors were measured on."""
    text = f"all {len(workload.partitions)} {k}-way marginals of {dataset}"
    if workload.queries:
        text += (f" + {len(workload.queries)} predicate queries (random_workload seed "
                 f"{ADULT_QUERY_SEED})")
    return text


# -- reporting ---------------------------------------------------------------------------------


def machine_note() -> str:
    la = os.getloadavg()
    return (f"Machine: {platform.node()}, {os.cpu_count()} cores **shared** with other engineers' "
            f"jobs (load average {la[0]:.1f} / {la[1]:.1f} / {la[2]:.1f} when the part started), "
            f"Python {platform.python_version()}, numpy {np.__version__}, mbi "
            f"{baselines.mbi_version()}; Tessera at {tessera_commit()}; "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.")


def tessera_commit() -> str:
    """The checkout's commit, and whether src/ differs from it (others edit it meanwhile)."""
    import subprocess

    def git(*a: str) -> str:
        r = subprocess.run(["git", "-C", str(REPO), *a], capture_output=True, text=True,
                           check=False)
        return r.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", "src/tessera/synth")
    return head + (" (src/tessera/synth modified in the working tree)" if dirty else "")


def peak_memory(part: str) -> str:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return (f"Peak memory (ru_maxrss) after part {part}: this process {own:,.0f} MB; its child "
            f"processes (baseline runs started now, solvers) {kids:,.0f} MB; cached baseline "
            "runs: their own peak in the notes.")


def mean_sd(values: Sequence[float]) -> str:
    v = [x for x in values if not math.isnan(x)]
    if not v:
        return "—"
    if len(v) == 1:
        return f"{v[0]:.4f}"
    return f"{statistics.fmean(v):.4f} ± {statistics.stdev(v):.4f}"


def cell_summary(runs: Sequence[Run], value: Callable[[Run], float]) -> str:
    ok = [r for r in runs if r.status == "ok"]
    if not ok:
        return "—"
    return mean_sd([value(r) for r in ok])


def status_text(runs: Sequence[Run]) -> str:
    ok = sum(r.status == "ok" for r in runs)
    other = [r for r in runs if r.status != "ok"]
    parts = [f"{ok} ok"] if ok else []
    for r in other[:1]:
        parts.append(f"{r.status}: {r.note}")
    return "; ".join(parts)


def save(part: str, runs: list[Run], extra: dict[str, Any] | None = None) -> None:
    RESULTS_DIR[0].mkdir(parents=True, exist_ok=True)
    doc = {"part": part, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "command": " ".join(sys.argv),
           "runs": [{k: v for k, v in r.__dict__.items() if k != "extra"}
                    | {"extra": {k: v for k, v in r.extra.items() if k != "traceback"}}
                    for r in runs]}
    doc.update(extra or {})
    (RESULTS_DIR[0] / f"{part}.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")


def load_runs(part: str) -> dict[tuple[str, float], list[Run]]:
    """Tessera runs saved by an earlier run of a part (``--reuse-tessera``): only the tables
    are made again."""
    path = RESULTS_DIR[0] / f"{part}.json"
    out: dict[tuple[str, float], list[Run]] = {}
    if not path.is_file():
        return out
    for doc in json.loads(path.read_text())["runs"]:
        if doc["method"] in (*TESSERA_METHODS, "tessera.answer"):
            r = Run(**doc)
            out.setdefault((r.method, r.epsilon), []).append(r)
    return out


def reusable(previous: dict[tuple[str, float], list[Run]], method: str, eps: float,
             args: argparse.Namespace) -> bool:
    """Whether ``--reuse-tessera`` takes a cell from the last run: not when it was ``pending``
    or is named by ``--rerun METHOD@EPS``."""
    if (method, eps) not in previous or previous[method, eps][0].status == "pending":
        return False
    return f"{method}@{eps:g}" not in (args.rerun or [])


def chosen_methods(args: argparse.Namespace) -> tuple[str, ...]:
    """The Tessera methods to run (``--methods``; default all, and ``tessera.answer``)."""
    if args.methods is None:
        return (*TESSERA_METHODS, "tessera.answer")
    return tuple(args.methods)


def chosen_eps(values: Sequence[float], args: argparse.Namespace) -> tuple[float, ...]:
    """The budgets of a part to run (``--eps``; default all of them)."""
    return tuple(e for e in values if not args.eps or any(math.isclose(e, x) for x in args.eps))


def repeat(method: str, eps: float, seeds: int | Sequence[int],
           fn: Callable[[int], Run]) -> list[Run]:
    """Up to ``seeds`` runs (seeds 0, 1, …, or the given ones); stops at the first that is not
    ``ok`` (a pending, refused or time-capped method is not run again)."""
    out = []
    for s in (range(seeds) if isinstance(seeds, int) else seeds):
        r = fn(s)
        out.append(r)
        print(f"  {method} ε={eps:g} #{s}: {r.status} {r.seconds:.1f} s "
              f"(CPU {r.extra.get('cpu_seconds', math.nan):.1f} s) L1 {r.marginal_l1:.4f} "
              f"q {r.query_error:.5f} {r.note} (load average {os.getloadavg()[0]:.1f})",
              file=sys.stderr, flush=True)
        if r.status != "ok":
            break
    return out


# -- parts -------------------------------------------------------------------------------------


def part_nltcs(args: argparse.Namespace) -> None:
    print("\n### NLTCS: all 560 3-way marginals (d = 16, n = 21,574)\n")
    print(machine_note() + "\n")
    domain, frame = load_real("nltcs")
    w = marginal_families(domain, 3)
    real, n = real_fractions(frame, w)
    runs: dict[tuple[str, float], list[Run]] = {}
    previous = load_runs("nltcs") if args.reuse_tessera else {}
    for eps in chosen_eps(NLTCS_EPS, args):  # Tessera first (the baselines may still be
        for method in chosen_methods(args):  # filling the cache)
            if reusable(previous, method, eps, args):
                runs[method, eps] = previous[method, eps]
                continue
            opts = {} if method == "adaptive" else {"rows": n}
            runs[method, eps] = repeat(method, eps, args.seeds, lambda s, m=method, o=opts, e=eps:
                                       run_tessera(m, e, s, frame, w, real, n, args.run_seconds,
                                                   o))
            save("nltcs", [r for rs in runs.values() for r in rs])
    for eps in chosen_eps(NLTCS_EPS, args):
        runs["MST", eps] = repeat("MST", eps, args.baseline_seeds or args.seeds,
                                  lambda s, e=eps: run_baseline("mst", "nltcs", 3, e, s, args,
                                                                domain, w, real, n))
        if eps in NLTCS_AIM_EPS:
            runs["AIM", eps] = aim_runs("nltcs", 3, eps, args, domain, w, real, n)
    print("| method | ε | runs | mean L1 error (mean ± sd) | time (s, mean ± sd) | rounds (lp: "
          "iterations) | s / round | notes |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for (method, eps), rs in runs.items():
        ok = [r for r in rs if r.status == "ok"]
        rounds = ", ".join(sorted({str(r.rounds) for r in rs if r.rounds})) or "—"
        per = [r.per_round for r in rs if r.per_round]
        print(f"| {method} | {eps:g} | {len(ok)}/{len(rs)} | "
              f"{cell_summary(rs, lambda r: r.marginal_l1)} "
              f"| {cell_summary(rs, lambda r: r.seconds)} | {rounds} | "
              f"{(f'{statistics.fmean(per):.3f}' if per else '—')} | {status_text(rs)} |")
    print("\nRatios against AIM (same run, cache or summary: the mean of every AIM run on "
          "record, seeds listed):\n")
    print("| method | ε | error / AIM's mean | time / AIM's mean | target (≤ 0.95× error, "
          "≤ 0.05× time) | AIM seeds |")
    print("|---|---:|---:|---:|---|---|")
    for eps in chosen_eps(NLTCS_AIM_EPS, args):
        aim = [r for r in runs.get(("AIM", eps), []) if r.status == "ok"]
        for method in chosen_methods(args):
            ok = [r for r in runs[method, eps] if r.status == "ok"]
            if not aim or not ok:
                why = "AIM missing" if not aim else (runs[method, eps][0].status
                                                     if runs[method, eps] else "not run")
                print(f"| {method} | {eps:g} | — | — | {why} | — |")
                continue
            er = statistics.fmean(r.marginal_l1 for r in ok) / aim_mean(aim, "marginal_l1")
            tr = statistics.fmean(r.seconds for r in ok) / aim_mean(aim, "seconds")
            met = ("met" if er <= 0.95 and tr <= 0.05 else
                   "error met, time not" if er <= 0.95 else "not met")
            print(f"| {method} | {eps:g} | {er:.2f}× | {tr:.3f}× | {met} | "
                  f"{', '.join(str(r.seed) for r in aim)} |")
    print("\n" + peak_memory("nltcs"))
    flat = [r for rs in runs.values() for r in rs]
    save("nltcs", flat)
    plot_nltcs(runs)


def log_axes(ax: Any, ylabel: str) -> None:
    """Log-log axes against ε, grid and legend (the plots of error against ε)."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("ε (δ = 1e-9)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)


def plot_earlier_aim(ax: Any, points: Sequence[tuple[float, float]]) -> None:
    """Earlier sessions' AIM errors (``AIM_EARLIER``) as hollow, labelled reference markers."""
    ax.plot([e for e, _ in points], [v for _, v in points], linestyle="none", marker="s",
            markerfacecolor="none", color="k", label="AIM, earlier sessions' runs (not this run)")


def plot_nltcs(runs: dict[tuple[str, float], list[Run]]) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    ax, bx = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    methods = sorted({m for m, _ in runs})
    for method in methods:
        xs, ys, es, ts_, tes = [], [], [], [], []
        for eps in NLTCS_EPS:
            ok = [r for r in runs.get((method, eps), []) if r.status == "ok"]
            if not ok:
                continue
            v = [r.marginal_l1 for r in ok]
            t = [r.seconds for r in ok]
            xs.append(eps)
            ys.append(statistics.fmean(v))
            es.append(statistics.stdev(v) if len(v) > 1 else 0.0)
            ts_.append(statistics.fmean(t))
            tes.append(statistics.stdev(t) if len(t) > 1 else 0.0)
        if xs:
            ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=method)
            bx.errorbar(xs, ts_, yerr=tes, marker="o", capsize=3, label=method)
    earlier = [(e, v) for e, v in AIM_EARLIER["nltcs"].items()
               if not any(r.status == "ok" for r in runs.get(("AIM", e), []))]
    if earlier:
        plot_earlier_aim(ax, earlier)
    for a, label in ((ax, "mean L1 error over 560 3-way marginals"), (bx, "time (s)")):
        log_axes(a, label)
    ax.set_title("NLTCS, 3-way marginals: error")
    bx.set_title("time (2 shared cores)")
    fig.tight_layout()
    fig.savefig(PLOTS[0] / "bench_synth_nltcs.png")


def part_adult(args: argparse.Namespace) -> None:
    print("\n### Adult: 105 2-way marginals + 1,000 random predicate queries (n = 48,842)\n")
    print(machine_note() + "\n")
    domain, frame = load_real("adult")
    marg = marginal_families(domain, 2)
    preds = random_workload(domain, ADULT_QUERIES, attributes_per_query=(1, 2), kind="mixed",
                            width=(0.05, 0.5), seed=ADULT_QUERY_SEED)
    w = ts.Workload.of(domain, list(preds.queries), partitions=marg.partitions)
    real, n = real_fractions(frame, w)
    print(f"Workload: {len(w.partitions)} marginals ({marg.n_queries:,} cells) + "
          f"{len(w.queries):,} predicate queries (`tessera.random_workload(domain, 1000, "
          f"attributes_per_query=(1, 2), kind='mixed', width=(0.05, 0.5), seed=0)`: ranges and "
          "value sets covering 5–50 % of an attribute's values).\n")
    runs: dict[tuple[str, float], list[Run]] = {}
    previous = load_runs("adult") if args.reuse_tessera else {}

    def tessera_cell(method: str, eps: float, seeds: int, fn: Callable[[int], Run]) -> None:
        if reusable(previous, method, eps, args):
            runs[method, eps] = previous[method, eps]
        else:
            runs[method, eps] = repeat(method, eps, seeds, fn)
        save("adult", [r for rs in runs.values() for r in rs])

    methods = chosen_methods(args)
    for eps in chosen_eps(ADULT_EPS, args):  # Tessera first (the baselines may still be
        if "adaptive" in methods:  # filling the cache)
            tessera_cell("adaptive", eps, args.seeds, lambda s, e=eps: run_tessera(
                "adaptive", e, s, frame, w, real, n, args.run_seconds))
        if "ipmwu" in methods:
            tessera_cell("ipmwu", eps, 1, lambda s, e=eps: run_tessera(
                "ipmwu", e, s, frame, w, real, n, args.run_seconds, {"rows": n}))
        if "tessera.answer" in methods:
            tessera_cell("tessera.answer", eps, args.seeds, lambda s, e=eps: run_answer(
                e, s, frame, w, real, n))
    for eps in chosen_eps(ADULT_EPS, args):
        runs["AIM", eps] = aim_runs("adult", 2, eps, args, domain, w, real, n)
        runs["MST", eps] = repeat("MST", eps, args.baseline_seeds or ADULT_MST_SEEDS,
                                  lambda s, e=eps: run_baseline("mst", "adult", 2, e, s, args,
                                                                domain, w, real, n))
    print("| method | ε | runs | marginal L1 (mean ± sd) | query error (mean ± sd) | "
          "time (s) | notes |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for (method, eps), rs in runs.items():
        ok = [r for r in rs if r.status == "ok"]
        print(f"| {method} | {eps:g} | {len(ok)}/{len(rs)} | "
              f"{cell_summary(rs, lambda r: r.marginal_l1)} | "
              f"{cell_summary(rs, lambda r: r.query_error)} | "
              f"{cell_summary(rs, lambda r: r.seconds)} | {status_text(rs)} |")
    print("\nRatios against AIM (the mean of every AIM run on record, seeds listed; target "
          "≤ 0.95× error, ≤ 0.05× time):\n")
    print("| method | ε | marginal error / AIM's mean | query error / AIM's mean | "
          "time / AIM's mean | AIM seeds |")
    print("|---|---:|---:|---:|---:|---|")
    for eps in chosen_eps(ADULT_EPS, args):
        aim = [r for r in runs.get(("AIM", eps), []) if r.status == "ok"]
        ok = [r for r in runs.get(("adaptive", eps), []) if r.status == "ok"]
        if aim and ok:
            er, qr, tr = (statistics.fmean(getattr(r, f) for r in ok) / aim_mean(aim, f)
                          for f in ("marginal_l1", "query_error", "seconds"))
            print(f"| adaptive | {eps:g} | {er:.2f}× | {qr:.2f}× | {tr:.3f}× | "
                  f"{', '.join(str(r.seed) for r in aim)} |")
    print("\n" + peak_memory("adult"))
    save("adult", [r for rs in runs.values() for r in rs])
    plot_adult(runs, chosen_eps(ADULT_EPS, args))


def plot_adult(runs: dict[tuple[str, float], list[Run]], eps_values: Sequence[float]) -> None:
    """Error against ε on Adult for every method with a finished run: the marginals' L1 and
    the predicate queries' error (mean ± sd over runs)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for method in sorted({m for m, _ in runs}):
        for ax, value in zip(axes, (lambda r: r.marginal_l1, lambda r: r.query_error),
                             strict=True):
            pts = []
            for eps in eps_values:
                v = [value(r) for r in runs.get((method, eps), []) if r.status == "ok"]
                if v:
                    pts.append((eps, statistics.fmean(v),
                                statistics.stdev(v) if len(v) > 1 else 0.0))
            if pts:
                ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts],
                            marker="o", capsize=3, label=method)
    earlier = [(e, v) for e, v in AIM_EARLIER["adult"].items()
               if e in eps_values or len(eps_values) == 1]
    earlier = [(e, v) for e, v in earlier
               if not any(r.status == "ok" for r in runs.get(("AIM", e), []))]
    if earlier:
        plot_earlier_aim(axes[0], earlier)
    for ax, label in zip(axes, ("mean L1 over 105 2-way marginals",
                                "mean error of 1,000 predicate queries"), strict=True):
        log_axes(ax, label)
    axes[0].set_title("Adult: marginals")
    axes[1].set_title("Adult: predicate queries (not fitted to)")
    fig.tight_layout()
    fig.savefig(PLOTS[0] / "bench_synth_adult.png")


def run_answer(eps: float, seed: int, frame: pd.DataFrame, w: ts.Workload, real: np.ndarray,
               n: int) -> Run:
    """Answering the whole workload directly (``tessera.answer``, overlap-calibrated noise)."""
    run = Run("tessera.answer", eps, seed)
    t0 = time.perf_counter()
    try:
        rel = ts.answer(frame, w, budget(eps), neighbours=NEIGHBOURS)
    except TesseraError as e:
        run.status, run.note = "refused", " ".join(str(e).split())[:300]
        return run
    run.seconds = time.perf_counter() - t0
    run.marginal_l1, run.query_error = release_errors(real, rel.answers, n, w)
    return run


def part_dimension(args: argparse.Namespace) -> None:
    print("\n### Dimension: tree-MRF workload on synthetic binary data (100,000 rows)\n")
    print(machine_note() + "\n")
    print("Data: a known tree model (random recursive tree, seed 0; each child copies its parent "
          "and flips with its own probability in [0.05, 0.45]). Workload: the 2-way marginal of "
          f"every tree edge (d − 1 marginals of 4 cells). ε = {args.dim_epsilon:g}, δ = 1e-9. "
          f"IPMWU runs `rounds={args.dim_rounds}` (its theory default is capped at 10,000 rounds "
          "here), exact `sample` expectations as the paper; rows = n. The explicit MWEM cannot "
          "run at all: its histogram has 2^d cells (2^64 already), and `Synthesizer('mwem')` "
          "refuses above 2^20 — shown in the table.\n")
    print("| d | method | status | time (s) | CPU (s) | rounds | s / round | mean L1 error | width "
          "| notes |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|---|")
    all_runs = []
    for d in args.dims:
        domain, edges, codes = tree_data(d, args.dim_rows, seed=0)
        w = edge_workload(domain, edges)
        real, n = real_fractions(codes, w)
        for method, opts in (("adaptive", {}),
                             ("ipmwu", {"rounds": args.dim_rounds, "rows": n}),
                             ("mwem", {"rounds": args.dim_rounds, "rows": n})):
            if method not in chosen_methods(args):
                continue
            r = run_tessera(method, args.dim_epsilon, 0, codes, w, real, n, args.run_seconds,
                            opts)
            r.extra["d"] = d
            all_runs.append(r)
            per = f"{r.per_round:.4f}" if r.per_round else "—"
            err = f"{r.marginal_l1:.4f}" if not math.isnan(r.marginal_l1) else "—"
            secs = "—" if math.isnan(r.seconds) else f"{r.seconds:.1f}"
            cpu = r.extra.get("cpu_seconds")
            print(f"| {d} | {method} | {r.status} | {secs} | "
                  f"{'—' if cpu is None else f'{cpu:.1f}'} | {r.rounds or '—'} | {per} "
                  f"| {err} | {r.extra.get('width', '—')} | {r.note[:160]} |", flush=True)
            print(f"  load average {os.getloadavg()[0]:.1f} at the end of d = {d} {method}",
                  file=sys.stderr, flush=True)
    print("\n" + peak_memory("dimension"))
    save("dimension", all_runs)


def part_rates(args: argparse.Namespace) -> None:
    from tessera.synth.parameters import default_parameters

    d = args.rates_d
    eps = args.rates_epsilon
    print(f"\n### Ghazi et al.'s rate: IPMWU's error as n grows (d = {d}, tree-MRF workload, "
          f"ε = {eps:g}, δ = 1e-9)\n")
    print(machine_note() + "\n")
    target = Target.of(budget(eps))
    print("IPMWU with every parameter at its paper-2 default (T, β, m; rows = m: the paper's "
          "output), `sample` expectations, add/remove neighbours. Bound drawn: the α(n) of "
          "ipmwu.py's `default_parameters` (docs/theory.md §5; SPEC §5), ρ-zCDP form "
          "α = (√L · ln(|F|T) / (2n√ρ))^{1/2} with L = d ln 2, |F| the workload's cells, "
          f"T its default, ρ = {target.value:.4g} (the largest ρ implying (ε, 1e-9)); up to the "
          "constants the paper leaves out. Measured: the maximum error over the cells (what α "
          "bounds) and the mean marginal L1, mean ± sd over seeds.\n")
    print("| n | T | m | α(n) (theory) | max cell error (mean ± sd) | mean L1 (mean ± sd) | "
          "time (s) | runs |")
    print("|---:|---:|---:|---:|---:|---:|---:|---|")
    rows = []
    all_runs = []
    for n in args.rates_n:
        domain, edges, codes = tree_data(d, n, seed=1)
        w = edge_workload(domain, edges)
        real, n_real = real_fractions(codes, w)
        p = default_parameters(log_domain_size=d * math.log(2), n_queries=w.n_queries,
                               normaliser=n, definition=target.definition, value=target.value)
        maxes, l1s, secs, runs = [], [], [], []
        for s in range(args.rates_seeds):
            r = run_tessera("ipmwu", eps, s, codes, w, real, n_real, args.run_seconds)
            runs.append(r)
            all_runs.append(r)
            if r.status != "ok":
                break
            maxes.append(r.extra.get("max_error", math.nan))
            l1s.append(r.marginal_l1)
            secs.append(r.seconds)
        rows.append((n, p.alpha, maxes, l1s))
        print(f"| {n:,} | {p.rounds} | {p.sample_size} | {p.alpha:.4f} | {mean_sd(maxes)} | "
              f"{mean_sd(l1s)} | {mean_sd(secs)} | {status_text(runs)} |", flush=True)
    print("\n" + peak_memory("rates"))
    save("rates", all_runs, {"alpha": [(n, a) for n, a, _, _ in rows]})
    plot_rates(rows, d, eps)


def plot_rates(rows: list[tuple[int, float, list[float], list[float]]], d: int,
               eps: float) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ns = [r[0] for r in rows]
    ax.plot(ns, [r[1] for r in rows], "k--", label="Ghazi et al.'s α(n) (no constants)")
    for idx, label in ((2, "measured max cell error"), (3, "measured mean marginal L1")):
        pts = [(r[0], statistics.fmean(r[idx]), statistics.stdev(r[idx]) if len(r[idx]) > 1
                else 0.0) for r in rows if r[idx]]
        if pts:
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts],
                        marker="o", capsize=3, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n (rows)")
    ax.set_ylabel("error")
    ax.set_title(f"IPMWU, tree-MRF d = {d}, ε = {eps:g}, δ = 1e-9")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(PLOTS[0] / "bench_synth_rates.png")


PARTS: dict[str, Callable[[argparse.Namespace], None]] = {
    "nltcs": part_nltcs, "adult": part_adult, "dimension": part_dimension, "rates": part_rates,
}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=(*PARTS, "all"), default="all")
    ap.add_argument("--seeds", type=int, default=5, help="runs per Tessera/MST cell (NLTCS)")
    ap.add_argument("--run-seconds", type=float, default=600.0,
                    help="time cap of one Tessera run (stopped and reported beyond)")
    ap.add_argument("--pgm-path", default=os.environ.get("TESSERA_PGM_PATH"),
                    help="directory with Private-PGM's aim.py, mst.py, mechanism.py, cdp2adp.py")
    ap.add_argument("--reuse-baselines", action="store_true",
                    help="reuse AIM/MST runs: their rows from the /tmp cache, else their errors "
                         "from bench/baselines/synth_baselines.json")
    ap.add_argument("--reuse-tessera", action="store_true",
                    help="take Tessera's runs from the last run of the part (results JSON), "
                         "re-running only 'pending' methods; the tables are made again")
    ap.add_argument("--rerun", nargs="*", metavar="METHOD@EPS",
                    help="with --reuse-tessera: run these cells again (e.g. adaptive@10)")
    ap.add_argument("--methods", nargs="*", choices=(*TESSERA_METHODS, "tessera.answer"),
                    help="Tessera methods to run (default all; none: the baselines only)")
    ap.add_argument("--baseline-seeds", type=int, default=None,
                    help="MST runs per cell (default: --seeds on NLTCS, 3 on Adult; AIM: seed "
                    "0, and with --reuse-baselines every seed on record)")
    ap.add_argument("--eps", type=float, nargs="+", help="only these ε of the part")
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--dim-rows", type=int, default=100_000)
    ap.add_argument("--dim-rounds", type=int, default=100)
    ap.add_argument("--dim-epsilon", type=float, default=1.0)
    ap.add_argument("--rates-d", type=int, default=8)
    ap.add_argument("--rates-n", type=int, nargs="+",
                    default=[1_000, 3_000, 10_000, 30_000, 100_000])
    ap.add_argument("--rates-seeds", type=int, default=3)
    ap.add_argument("--rates-epsilon", type=float, default=1.0)
    ap.add_argument("--plots", type=Path, default=DOCS, help="directory of the PNG plots")
    ap.add_argument("--results", type=Path, default=RESULTS,
                    help="directory of the per-part results JSON")
    args = ap.parse_args(argv)
    PLOTS[0] = args.plots
    RESULTS_DIR[0] = args.results
    if baselines.pgm_path(args.pgm_path) is None and args.part in ("nltcs", "adult", "all"):
        print(baselines.HOW_TO_GET, file=sys.stderr)
    given = sys.argv[1:] if argv is None else list(argv)
    print(f"Command: `python bench/bench_synth.py {' '.join(given)}`")
    for name, fn in PARTS.items():
        if args.part in (name, "all"):
            fn(args)


if __name__ == "__main__":
    main()
