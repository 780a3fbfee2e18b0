"""Private-PGM's AIM and MST for ``bench/bench_synth.py``: loading, running, caching.

The mechanisms are not in the ``mbi`` package on PyPI; they are scripts in the upstream
repository (``mechanisms/aim.py``, ``mst.py``, ``mechanism.py``, ``cdp2adp.py``). Put those four
files in a directory (not committed here) and pass it as ``--pgm-path DIR`` (or set
``TESSERA_PGM_PATH``)::

    git clone https://github.com/ryan112358/mbi /tmp/mbi-src     # or ryan112358/private-pgm
    mkdir -p /tmp/private-pgm && cp /tmp/mbi-src/mechanisms/{aim,mst,mechanism,cdp2adp}.py \\
        /tmp/private-pgm/

They run unchanged except for two API shims applied here (the scripts trail the ``mbi`` 2.0 wheel
on PyPI): ``Domain.attrs`` (removed in 2.0: the tuple of attribute names) and
``MirrorDescent.estimate(potentials=...)`` (renamed ``warm_start=`` in 2.0). AIM's candidate
selection (``worst_approximated``: one ``model.project`` per candidate clique) runs under
``jax.disable_jit()``: compiled, every candidate's projection is a separate XLA program and the
process exceeds the kernel's memory-map limit (``vm.max_map_count``) on NLTCS 3-way marginals.
**The numpy-era AIM.** ``--pgm-path`` may instead name a whole private-pgm tree from before
its JAX rewrite (``ryan112358/private-pgm`` before 395885b, 2024-11-09; ``mechanisms/`` beside
its own numpy ``src/mbi``; a ``SOURCE`` file in it names the commit, e.g.
``ryan112358/private-pgm@93b2947``). That is AIM as published (McKenna et al., VLDB 2022) on the
backend it was published with, and it is several times faster here than the JAX port: ~12 s of
CPU a round on NLTCS 3-way against 27–52 s, so that AIM at NLTCS ε = 10 finishes within a
session. Its scripts run unchanged; two imports they do not use are stubbed
(``hdmm.matrix.Identity``, the marginal's measurement matrix, becomes a sparse identity, and
``autodp``'s calibrator, which AIM and MST never call), and its ``GraphicalModel.synthetic_data``
needs pandas < 3 (``groupby.apply`` passing the grouping columns), so the run can take another
interpreter: ``TESSERA_BASELINE_PYTHON=/path/to/python`` (numpy, scipy, pandas 2.2, networkx,
matplotlib). Its runs are cached and summarised under ``mbi = "np-<commit>"``, apart from the
wheel's: ``bench_synth.py`` compares against the runs of the implementation it is pointed at.
ε → ρ is the mechanisms' own ``cdp2adp.cdp_rho(ε, δ)``; AIM keeps its defaults
(``max_model_size=80`` MB, ``max_iters=1000``, ``rounds=16·d``). Their randomness is numpy's
global generator, seeded per run (``np.random.seed(seed)``). That alone does not make a run
reproducible: AIM iterates Python sets of attribute-name tuples, whose order follows the
process's string-hash seed, random per process unless ``PYTHONHASHSEED`` is set. So every process
that runs AIM or MST runs under ``PYTHONHASHSEED=0`` (:data:`HASH_SEED`): the subprocess of each
run gets it in its environment (:func:`baseline_env`), a ``run`` started by hand re-executes
itself under it (:func:`ensure_hash_seed`, as ``bench/ab_synth.py baseline`` does), and each run
records it (``python_hash_seed`` in its cache record, the summary and bench_synth's results;
summary entries without it predate it and ran hash-randomised).

Every run is one subprocess (``python bench/bench_synth_baselines.py run ...``: its peak memory is
its own) and is cached as JSON plus the synthetic rows (``.tsv.gz``, codes) under
``/tmp/tessera-bench-cache`` (``TESSERA_BENCH_CACHE``), keyed by (dataset, workload, method, ε,
seed, mbi version). The JAX port's AIM runs take an exclusive file lock: two of them never run at
once (4.5 GB each on NLTCS); the numpy-era AIM's 0.2 GB do not need it.

The /tmp cache does not survive the machine; AIM takes minutes to hours a run here. So every run
``bench/bench_synth.py`` evaluates is also summarised in the committed file
``bench/baselines/synth_baselines.json`` (``SUMMARY``; numbers only, never rows or data): per
(dataset, workload, method, ε, seed, mbi version) its errors as bench_synth.py measures them, wall
and CPU time, peak memory, machine, load, versions, date and the command. ``--reuse-baselines``
reads a run from the /tmp cache when its rows are there, else from this summary.
"""

from __future__ import annotations

import argparse
import datetime
import fcntl
import gzip
import hashlib
import importlib.metadata
import itertools
import json
import math
import os
import platform
import re
import resource
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("TESSERA_SHARED_DATA", REPO.parent / "shared" / "data"))
CACHE = Path(os.environ.get("TESSERA_BENCH_CACHE", "/tmp/tessera-bench-cache"))
#: the benchmark panel's tables (bench/panel.py), written as codes + domain JSON here
PANEL_DATA = Path(os.environ.get("TESSERA_PANEL_DATA", "/tmp/tessera-panel"))
PANEL_TABLES = ("quakes", "arrests", "health_insurance", "alcohol", "nass_cds", "cps1988",
                "movielens", "flights", "birthdays", "military", "males", "wages")
SUMMARY = Path(os.environ.get("TESSERA_BASELINE_SUMMARY",
                              REPO / "bench" / "baselines" / "synth_baselines.json"))
SUMMARY_FIELDS = ("dataset", "workload", "method", "epsilon", "delta", "seed", "rho", "time_s",
                  "cpu_s", "peak_rss_mb", "load_start", "load_end", "rows", "mbi", "jax",
                  "pgm_source", "measured_at", "machine", "command", "options",
                  "python_hash_seed")
DELTA = 1e-9
#: ``PYTHONHASHSEED`` of every process that runs AIM or MST (module docs): string hashing, and so
#: the order AIM iterates its sets of attribute names in, is then the same in every run.
HASH_SEED = "0"
PGM_FILES = ("aim.py", "mst.py", "mechanism.py", "cdp2adp.py")
HOW_TO_GET = (
    "Private-PGM's AIM/MST scripts are needed for the baselines (not on PyPI, not committed "
    "here):\n"
    "    git clone https://github.com/ryan112358/mbi /tmp/mbi-src\n"
    "    mkdir -p /tmp/private-pgm && cp /tmp/mbi-src/mechanisms/{aim,mst,mechanism,cdp2adp}.py "
    "/tmp/private-pgm/\n"
    "then pass --pgm-path /tmp/private-pgm (or set TESSERA_PGM_PATH). Or pass a whole "
    "private-pgm tree of the numpy era (module docs)."
)
#: the numpy-era private-pgm tree (``mechanisms/`` beside ``src/mbi`` with FactoredInference)
NUMPY_TREE_FILES = tuple(f"mechanisms/{f}" for f in PGM_FILES) + ("src/mbi/inference.py",)


def is_numpy_tree(p: Path) -> bool:
    """Whether ``p`` is a numpy-era private-pgm tree (its own ``mbi`` under ``src/``)."""
    return all((p / f).is_file() for f in NUMPY_TREE_FILES)


_IMPLEMENTATION: list[str] = []  # set by pgm_path: the numpy tree's label, when one is used


def pgm_path(arg: str | None) -> Path | None:
    """The directory holding the mechanisms' scripts (flat, for the ``mbi`` wheel; or a
    numpy-era private-pgm tree), or None when missing. Which one also decides
    ``mbi_version()``: the two implementations' runs are cached and summarised apart."""
    raw = arg or os.environ.get("TESSERA_PGM_PATH")
    if not raw:
        return None
    p = Path(raw)
    if is_numpy_tree(p):
        source = (p / "SOURCE").read_text() if (p / "SOURCE").is_file() else ""
        commit = source.split("@", 1)[1].split()[0] if "@" in source else "unknown"
        _IMPLEMENTATION[:] = [f"np-{commit}"]
        return p
    _IMPLEMENTATION.clear()
    return p if all((p / f).is_file() for f in PGM_FILES) else None


def mbi_version() -> str:
    """The baselines' implementation: ``np-<commit>`` for a numpy-era private-pgm tree (see
    ``pgm_path``), else the installed ``mbi`` wheel's version."""
    if _IMPLEMENTATION:
        return _IMPLEMENTATION[0]
    try:
        return importlib.metadata.version("mbi")
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def dataset_dir(dataset: str) -> Path:
    """Where a data set's ``NAME.csv`` and ``NAME-domain.json`` are: the panel's directory for a
    panel table (``bench/panel.py write`` puts them there), else the shared data."""
    return PANEL_DATA if dataset in PANEL_TABLES else SHARED_DATA


def baseline_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a baseline's process: ``environ`` (default this process's) with
    ``PYTHONHASHSEED`` fixed to :data:`HASH_SEED` (module docs)."""
    return {**(os.environ if environ is None else environ), "PYTHONHASHSEED": HASH_SEED}


def ensure_hash_seed(argv: list[str]) -> None:
    """Re-execute this script (``argv``: its ``sys.argv``) under ``PYTHONHASHSEED`` =
    :data:`HASH_SEED` unless it already runs under it: the hash seed is read once, when the
    interpreter starts, so it cannot be set from inside."""
    if os.environ.get("PYTHONHASHSEED") != HASH_SEED:
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, *argv], baseline_env())


def workload_cliques(dataset: str, k: int) -> list[tuple[str, ...]]:
    """All k-way attribute sets of a shared data set, in its domain file's order."""
    names = list(json.loads((dataset_dir(dataset) / f"{dataset}-domain.json").read_text()))
    return list(itertools.combinations(names, k))


def cache_key(dataset: str, workload: str, method: str, epsilon: float, seed: int) -> str:
    raw = json.dumps([dataset, workload, method, float(epsilon), int(seed), mbi_version()])
    digest = hashlib.sha256(raw.encode()).hexdigest()[:12]
    return f"{dataset}-{workload}-{method}-eps{epsilon:g}-seed{seed}-mbi{mbi_version()}-{digest}"


def cached(dataset: str, workload: str, method: str, epsilon: float,
           seed: int) -> dict[str, Any] | None:
    """The cached record of a run (with ``rows_path``), or None."""
    path = CACHE / (cache_key(dataset, workload, method, epsilon, seed) + ".json")
    if not path.is_file():
        return None
    rec: dict[str, Any] = json.loads(path.read_text())
    return rec if Path(rec.get("rows_path", "")).is_file() else None


def _same_run(entry: dict[str, Any], dataset: str, workload: str, method: str, epsilon: float,
              seed: int) -> bool:
    return (entry.get("dataset"), entry.get("workload"), entry.get("method"),
            entry.get("seed"), entry.get("mbi")) == (dataset, workload, method, int(seed),
                                                     mbi_version()) and \
        abs(float(entry.get("epsilon", math.nan)) - float(epsilon)) <= 1e-12 * max(1.0, epsilon)


def summary_runs(path: Path | None = None) -> list[dict[str, Any]]:
    """Every run of the committed summary file (empty when it does not exist)."""
    p = path or SUMMARY
    if not p.is_file():
        return []
    runs: list[dict[str, Any]] = json.loads(p.read_text())["runs"]
    return runs


def summarised(dataset: str, workload: str, method: str, epsilon: float, seed: int,
               path: Path | None = None) -> dict[str, Any] | None:
    """The summary of a run (its errors under ``errors``; no rows), or None."""
    for entry in summary_runs(path):
        if _same_run(entry, dataset, workload, method, epsilon, seed):
            return entry
    return None


def recorded_seeds(dataset: str, workload: str, method: str, epsilon: float,
                   path: Path | None = None) -> list[int]:
    """The seeds of every run of (dataset, workload, method, ε) on record here — the /tmp
    cache with its rows, or the committed summary — in order. ``bench_synth.py`` compares
    against all of them: one AIM run is AIM's luck of the draw (its seeds differ by up to 1.2×,
    docs/benchmarks.md)."""
    seeds = {int(e["seed"]) for e in summary_runs(path)
             if _same_run(e, dataset, workload, method, epsilon, int(e.get("seed", -1)))}
    prefix = f"{dataset}-{workload}-{method}-eps{epsilon:g}-seed"
    for f in CACHE.glob(prefix + "*.json") if CACHE.is_dir() else ():
        seed = f.name[len(prefix):].split("-", 1)[0]
        if seed.isdigit() and cached(dataset, workload, method, epsilon, int(seed)) is not None:
            seeds.add(int(seed))
    return sorted(seeds)


def record_summary(rec: dict[str, Any], errors: dict[str, Any],
                   path: Path | None = None) -> dict[str, Any]:
    """Add (or replace) the summary of a run: ``rec`` is its cache record, ``errors`` what
    bench_synth.py measured from its rows. Written under an exclusive lock, sorted, atomically."""
    p = path or SUMMARY
    entry = {k: rec.get(k) for k in SUMMARY_FIELDS}
    if isinstance(entry.get("command"), str):  # an older cache names the script by its path
        entry["command"] = re.sub(r"^\S*/(bench/\S+\.py)", r"\1", entry["command"])
    entry["errors"] = errors
    p.parent.mkdir(parents=True, exist_ok=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "summary.lock", "w") as lock:  # not beside the committed file
        fcntl.flock(lock, fcntl.LOCK_EX)
        runs = [e for e in summary_runs(p)
                if not _same_run(e, entry["dataset"], entry["workload"], entry["method"],
                                 entry["epsilon"], entry["seed"])]
        runs.append(entry)
        runs.sort(key=lambda e: (e["dataset"], e["workload"], e["method"], e["epsilon"],
                                 e["seed"], e["mbi"]))
        doc = {"about": ("Private-PGM baseline runs measured by bench/bench_synth.py (see "
                         "bench/bench_synth_baselines.py): errors counted by tessera.count from "
                         "each run's synthetic rows (rows not kept here); time_s wall, cpu_s "
                         "the run's own CPU, peak_rss_mb its peak memory, load_start/load_end "
                         "the 1-minute load average around it, python_hash_seed the "
                         "PYTHONHASHSEED the run's process had (runs without it predate it and "
                         "ran hash-randomised; AIM's order of set iteration depends on it)."),
               "runs": runs}
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")
        tmp.replace(p)
    return entry


def read_rows(rec: dict[str, Any]) -> tuple[list[str], list[list[int]]]:
    """The synthetic rows of a cached run: (column names, rows of codes)."""
    with gzip.open(rec["rows_path"], "rt") as f:
        header = f.readline().rstrip("\n").split("\t")
        rows = [[int(v) for v in line.rstrip("\n").split("\t")] for line in f if line.strip()]
    return header, rows


def run_cached(dataset: str, k: int, method: str, epsilon: float, seed: int, pgm: Path,
               reuse: bool, log: Path | None = None,
               timeout: float | None = None) -> dict[str, Any]:
    """The run's record: from the cache with ``reuse``, else a fresh subprocess (cached),
    stopped after ``timeout`` seconds of wall time (``TimeoutError``)."""
    workload = f"{k}way"
    if reuse:
        rec = cached(dataset, workload, method, epsilon, seed)
        if rec is not None:
            rec["reused"] = True
            return rec
    python = os.environ.get("TESSERA_BASELINE_PYTHON", sys.executable)  # module docs
    cmd = [python, str(Path(__file__).resolve()), "run", "--dataset", dataset,
           "--k", str(k), "--method", method, "--epsilon", repr(float(epsilon)),
           "--seed", str(seed), "--pgm-path", str(pgm)]
    CACHE.mkdir(parents=True, exist_ok=True)
    out = log or CACHE / (cache_key(dataset, workload, method, epsilon, seed) + ".log")
    with open(out, "w") as f:
        try:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False,
                                  timeout=timeout,
                                  env=baseline_env())  # the fixed hash seed: module docs
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{method} stopped after {timeout:g} s; log {out}") from None
    if proc.returncode != 0:
        tail = out.read_text().splitlines()[-15:]
        raise RuntimeError(f"{method} failed (exit {proc.returncode}); log {out}:\n"
                           + "\n".join(tail))
    rec = cached(dataset, workload, method, epsilon, seed)
    if rec is None:
        raise RuntimeError(f"{method} wrote no cache entry; log {out}")
    rec["reused"] = False
    return rec


# -- inside the subprocess ----------------------------------------------------------------------


def load_numpy_mechanisms(pgm: Path) -> tuple[types.ModuleType, types.ModuleType]:
    """aim and mst of a numpy-era private-pgm tree, its own ``mbi`` first on the path. Two
    imports that AIM and MST do not use are stubbed (module docs): ``hdmm.matrix.Identity``, the
    measurement matrix of a marginal (a sparse identity: what FactoredInference accepts), and
    ``autodp`` (imported by ``mechanism.py`` for a calibrator AIM and MST never call)."""
    import scipy.sparse

    hdmm = types.ModuleType("hdmm")
    matrix = types.ModuleType("hdmm.matrix")
    matrix.Identity = lambda n: scipy.sparse.identity(n, format="csr")  # type: ignore[attr-defined]
    hdmm.matrix = matrix  # type: ignore[attr-defined]
    autodp = types.ModuleType("autodp")
    autodp.privacy_calibrator = None  # type: ignore[attr-defined]
    sys.modules.update({"hdmm": hdmm, "hdmm.matrix": matrix, "autodp": autodp})
    sys.path[:0] = [str(pgm / "src"), str(pgm / "mechanisms"), str(pgm)]
    import aim
    import mbi
    import mst

    assert Path(mbi.__file__).resolve().is_relative_to(pgm.resolve()), mbi.__file__
    return aim, mst


def load_mechanisms(pgm: Path) -> tuple[types.ModuleType, types.ModuleType]:
    """aim and mst modules with the two mbi 2.0 shims (module docs)."""
    if is_numpy_tree(pgm):
        return load_numpy_mechanisms(pgm)
    import jax

    jax.config.update("jax_enable_compilation_cache", False)
    import mbi
    from mbi import estimation

    if not hasattr(mbi.Domain, "attrs"):  # removed in mbi 2.0; the scripts still use it
        mbi.Domain.attrs = property(lambda self: tuple(self.attributes))  # type: ignore[attr-defined]

    class MirrorDescent(estimation.MirrorDescent):  # type: ignore[misc]
        def estimate(self, *args: Any, potentials: Any = None, **kwargs: Any) -> Any:
            if potentials is not None:
                kwargs["warm_start"] = potentials
            return super().estimate(*args, **kwargs)

    sys.path.insert(0, str(pgm))
    import aim
    import mst

    shim = types.SimpleNamespace(MirrorDescent=MirrorDescent)
    aim.estimation = shim
    mst.estimation = shim
    return aim, mst


def _run(args: argparse.Namespace) -> None:
    import numpy as np
    import pandas as pd

    pgm = pgm_path(args.pgm_path)
    if pgm is None:
        sys.exit(HOW_TO_GET)
    aim, mst = load_mechanisms(pgm)
    CACHE.mkdir(parents=True, exist_ok=True)
    import cdp2adp
    from mbi import Dataset, Domain

    numpy_tree = is_numpy_tree(pgm)
    config = json.loads((dataset_dir(args.dataset) / f"{args.dataset}-domain.json").read_text())
    domain = Domain.fromdict(config)
    frame = pd.read_csv(dataset_dir(args.dataset) / f"{args.dataset}.csv", usecols=list(config))
    data = Dataset(frame, domain) if numpy_tree else \
        Dataset({c: frame[c].to_numpy() for c in config}, domain)
    cliques = workload_cliques(args.dataset, args.k)
    workload = f"{args.k}way"
    np.random.seed(args.seed)  # not-privacy-noise: the baselines' own (numpy) randomness

    lock = None
    if args.method == "aim" and not numpy_tree:  # memory: module docs
        CACHE.mkdir(parents=True, exist_ok=True)
        lock = open(CACHE / "aim.lock", "w")  # noqa: SIM115  (held for the whole run)
        fcntl.flock(lock, fcntl.LOCK_EX)  # never two AIM processes at once
    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    if args.method == "aim" and numpy_tree:  # numpy: nothing to compile, run as published
        _, synth = aim.AIM(args.epsilon, DELTA).run(data, [(cl, 1.0) for cl in cliques])
    elif args.method == "aim":
        import jax

        class AIM(aim.AIM):  # type: ignore[misc,name-defined]
            def worst_approximated(self, *a: Any, **k: Any) -> Any:
                with jax.disable_jit():
                    return super().worst_approximated(*a, **k)

        _, synth = AIM(args.epsilon, DELTA).run(data, [(cl, 1.0) for cl in cliques])
    elif args.method == "mst":
        synth = mst.MST(data, args.epsilon, DELTA)
    else:
        sys.exit(f"unknown baseline {args.method!r}")
    elapsed = time.perf_counter() - t0
    columns = {c: synth.df[c].to_numpy() for c in config} if numpy_tree else synth.to_dict()
    names = list(config)
    table = np.column_stack([np.asarray(columns[c]) for c in names]).astype(np.int64)
    key = cache_key(args.dataset, workload, args.method, args.epsilon, args.seed)
    rows_path = CACHE / f"{key}.tsv.gz"
    with gzip.open(rows_path, "wt") as f:
        f.write("\t".join(names) + "\n")
        for r in table:
            f.write("\t".join(map(str, r.tolist())) + "\n")
    rec = {
        "dataset": args.dataset, "workload": workload, "method": args.method,
        "epsilon": args.epsilon, "delta": DELTA, "seed": args.seed,
        "rho": float(cdp2adp.cdp_rho(args.epsilon, DELTA)),
        "time_s": elapsed, "cpu_s": _cpu_seconds(), "load_start": load_start,
        "load_end": os.getloadavg()[0], "rows": int(table.shape[0]), "rows_path": str(rows_path),
        "mbi": mbi_version(),
        "jax": None if numpy_tree else importlib.metadata.version("jax"),
        "pgm_source": (pgm / "SOURCE").read_text().strip() if (pgm / "SOURCE").is_file()
        else str(pgm),
        "measured_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.node()} ({os.cpu_count()} cores, shared)",
        # the script named from the repository's root, not by this machine's path to it
        "command": " ".join([f"bench/{Path(sys.argv[0]).name}", *sys.argv[1:]]),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "options": {"max_model_size": 80, "max_iters": 1000} if args.method == "aim" else {},
        "python_hash_seed": os.environ.get("PYTHONHASHSEED"),
    }
    (CACHE / f"{key}.json").write_text(json.dumps(rec, indent=1) + "\n")
    if lock is not None:
        lock.close()
    print(json.dumps(rec))


def _cpu_seconds() -> float:
    """This process's user + system CPU time (all its threads)."""
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="one baseline run (cached)")
    r.add_argument("--dataset", choices=("nltcs", "adult", *PANEL_TABLES),
                   required=True)
    r.add_argument("--k", type=int, required=True)
    r.add_argument("--method", choices=("aim", "mst"), required=True)
    r.add_argument("--epsilon", type=float, required=True)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--pgm-path", default=None)
    args = ap.parse_args()
    ensure_hash_seed(sys.argv)  # (run by hand, not by run_cached): module docs
    _run(args)


if __name__ == "__main__":
    main()
