"""Structured workloads at real size: marginals, data cubes and hierarchies, at
real scale.

Each case runs in a fresh process (so peak memory is its own) and reports: loading the
workload (compact YAML, or the text form parsed line by line), ``workload check`` statistics,
the maximum overlap γ (exact or a bound), and exact counts on the data. Baselines in the same
run: the text form solved *without* structure recovery (the general solvers, as before this
change), and counting the expanded predicate queries.

    python bench/bench_structured.py            # every case (the 2.6M-line text form included)
    python bench/bench_structured.py --quick    # skip the 2.6M-line text cases
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("TESSERA_SHARED_DATA", REPO.parent / "shared" / "data"))

CASES = {
    "adult-2way": ("adult", "marginals: [{all: 2}]\n"),
    "adult-3way": ("adult", "marginals: [{all: 3}]\n"),
    "nltcs-3way": ("nltcs", "marginals: [{all: 3}]\n"),
    "nltcs-4way": ("nltcs", "marginals: [{all: 4}]\n"),
    "hierarchy-3level": ("adult", "hierarchies: [{attributes: [age, hours-per-week, "
                         "native-country], branching: 4, depth: 3}]\n"),
    "adult-cube-4": ("adult", "cubes: [{attributes: [age, sex, race, education]}]\n"),
}


def _write_text(case: str, path: str) -> dict:
    """Runs in its own process: the text form of a case, one WHERE clause per line."""
    from tessera.schema.domain import Domain
    from tessera.workload.workload import Workload

    data, spec = CASES[case]
    domain = Domain.load(DATA / f"{data}-domain.json")
    with tempfile.TemporaryDirectory() as tmp:
        compact = Path(tmp) / "w.yaml"
        compact.write_text(spec)
        Workload.load(compact, domain).expanded(max_queries=10**7).save(path)
    return {"lines": sum(1 for _ in open(path))}


def _child(case: str, form: str, recover: bool, count: bool, time_limit: float,
           text: str | None = None) -> dict:
    """Runs inside the fresh process."""
    from tessera.data.counts import count as exact_counts
    from tessera.overlap import max_overlap
    from tessera.overlap import recover as recovery
    from tessera.schema.domain import Domain
    from tessera.workload.stats import WorkloadStats
    from tessera.workload.workload import Workload

    if not recover:
        recovery.RECOVER_MIN_QUERIES = 10**12
    data, spec = CASES[case]
    domain = Domain.load(DATA / f"{data}-domain.json")
    out: dict = {"case": case, "form": form, "recover": recover}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.yaml"
        path.write_text(spec)
        if form == "text":
            assert text is not None
            path = Path(text)
        t = time.perf_counter()
        wl = Workload.load(path, domain)
        out["load_s"] = time.perf_counter() - t
        out["queries"] = wl.n_queries
        t = time.perf_counter()
        WorkloadStats.of(wl)
        out["check_s"] = time.perf_counter() - t
        t = time.perf_counter()
        res = max_overlap(wl, time_limit=time_limit)
        out["overlap_s"] = time.perf_counter() - t
        out["gamma"] = res.bound
        out["exact"] = res.exact
        out["method"] = res.method
        if count:
            t = time.perf_counter()
            exact_counts(DATA / f"{data}.csv", wl)
            out["count_s"] = time.perf_counter() - t
    out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def _run(case: str, form: str, recover: bool, count: bool, time_limit: float,
         texts: dict[str, str]) -> dict:
    text = None
    if form == "text":
        if case not in texts:
            texts[case] = str(Path(tempfile.mkdtemp()) / f"{case}.sql")
            subprocess.run([sys.executable, __file__, "--write-text",
                            json.dumps([case, texts[case]])], check=True)
        text = texts[case]
    cmd = [sys.executable, __file__, "--child", json.dumps([case, form, recover, count,
                                                            time_limit, text])]
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"case": case, "form": form, "recover": recover,
                "error": proc.stderr.strip().splitlines()[-1:]}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - t
    return out


def _fmt(x: object, digits: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the 2.6M-line text cases")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--child")
    ap.add_argument("--write-text")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(*json.loads(args.child))))
        return
    if args.write_text:
        print(json.dumps(_write_text(*json.loads(args.write_text))))
        return
    runs = [(c, "compact", True, True) for c in CASES]
    runs += [("adult-2way", "text", True, True), ("adult-2way", "text", False, False),
             ("nltcs-3way", "text", True, False), ("nltcs-3way", "text", False, False)]
    if not args.quick:
        runs += [("adult-3way", "text", True, False)]
    texts: dict[str, str] = {}
    rows = [_run(c, f, r, k, args.time_limit, texts) for c, f, r, k in runs]
    head = ("| workload | form | structure | queries | load s | check s | overlap s | γ | "
            "exact | count s | peak MiB |")
    print(head)
    print("|" + "---|" * 11)
    for r in rows:
        if "error" in r:
            print(f"| {r['case']} | {r['form']} | | error: {r['error']} |")
            continue
        print(f"| {r['case']} | {r['form']} | {'used' if r['recover'] else 'ignored'} | "
              f"{_fmt(r['queries'])} | {_fmt(r['load_s'])} | {_fmt(r['check_s'])} | "
              f"{_fmt(r['overlap_s'])} | {r['gamma']:.6g} | {'yes' if r['exact'] else 'no'} | "
              f"{_fmt(r.get('count_s'))} | {_fmt(r['peak_mib'], 0)} |")


if __name__ == "__main__":
    main()
