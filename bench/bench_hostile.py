"""Hostile and careless CLI input: every case ends with nothing charged and nothing
half-written, or charged and delivered.

    python bench/bench_hostile.py [--keep DIR] [--only SUBSTRING] [--rows 200000]

Each case runs the real command (``python -m tessera.cli.main``, a subprocess) in its own
temporary directory holding a small schema, workload and data set and, where the case charges,
a fresh ledger (ε = 3 total, add/remove unless the case says otherwise). After the run the
ledger's spent budget and release statuses are read back and every file the run left is
listed. The verdict of a row is

* ``nothing charged, nothing half-written``: the spent budget did not move, no release was
  recorded, and the run left no file (no output, no temporary file);
* ``charged and delivered``: the spent budget moved, the release is ``released``, and every
  requested file exists (and no temporary file is left);
* ``charged, aborted, nothing written``: an interruption *after* the charge (a Ctrl-C case):
  the release is ``aborted``, its budget stays spent (docs/theory.md §9.6), no requested file;
* anything else is ``VIOLATION`` and makes the script exit 1.

The Ctrl-C cases send SIGINT to the child while it reads a larger CSV (``--rows``); where the
signal lands (before or after the charge) depends on the machine's speed, and both verdicts
above are then correct — a traceback or a half-written file is not. The table also says, per
case, whether the error output is one line and free of tracebacks.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SCHEMA = """attributes:
  age: {type: integer, min: 0, max: 99}
  sex: {type: categorical, values: [F, M]}
  region: {type: categorical, values: [N, S, E, W]}
  income: {type: categorical, values: [low, high]}
"""
WORKLOAD = """a: age < 30
b: age >= 30 AND sex = 'F'
c: region = 'N'
d: income = 'high'
"""
INPUTS = {"schema.yaml", "w.sql", "d.csv", "L.db", "S.db", "big.csv"}

NOTHING = "nothing charged, nothing half-written"
DELIVERED = "charged and delivered"
ABORTED = "charged, aborted, nothing written"


@dataclass
class Case:
    """One command line (``argv`` after ``tessera``), the files it asks for, and what to set up
    (``prepare`` edits the case directory before the run)."""

    name: str
    argv: list[str]
    outputs: list[str] = field(default_factory=list)
    prepare: Callable[[Path], None] | None = None
    ledger: str = "add-remove"
    interrupt_after: float | None = None
    issue_item: str = ""


def _frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(0, 100, n), "sex": rng.choice(["F", "M"], n),
                         "region": rng.choice(list("NSEW"), n),
                         "income": rng.choice(["low", "high"], n)})


def write(name: str, content: str | bytes) -> Callable[[Path], None]:
    def prepare(d: Path) -> None:
        (d / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return prepare


def both(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def prepare(d: Path) -> None:
        for s in steps:
            s(d)
    return prepare


ANSWER = ["answer", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "--ledger", "L.db"]
SYNTH = ["synth", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "--ledger", "L.db",
         "--rows", "100"]
SUB = ["--neighbours", "substitute"]


def cases(rows: int) -> list[Case]:
    big = ["answer", "big.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "--ledger", "L.db",
           "-o", "a.csv", "--certificate", "c.json", "--report", "r.html"]
    return [
        # the happy paths
        Case("answer: answers, certificate, report", ANSWER + ["-o", "a.csv", "--certificate",
             "c.json", "--report", "r.html"], ["a.csv", "c.json", "r.html"], issue_item="1"),
        Case("synth: rows and record", SYNTH + ["-o", "s.csv", "--record", "r.json"],
             ["s.csv", "r.json"], issue_item="1, 8"),
        # item 1: outputs checked before the charge
        Case("answer -o /nonexistent/dir/a.csv", ANSWER + ["-o", "/nonexistent/dir/a.csv"],
             issue_item="1"),
        Case("answer -o answers.txt", ANSWER + ["-o", "answers.txt"], issue_item="1"),
        Case("answer --report /nonexistent/r.html", ANSWER + ["-o", "a.csv", "--report",
             "/nonexistent/r.html"], issue_item="1"),
        Case("answer --certificate into /proc", ANSWER + ["-o", "a.csv", "--certificate",
             "/proc/c.json"], issue_item="1"),
        Case("answer -o a directory", ANSWER + ["-o", "out.csv"],
             prepare=lambda d: (d / "out.csv").mkdir(), issue_item="1"),
        Case("synth -o /nonexistent/s.csv", SYNTH + ["-o", "/nonexistent/s.csv"],
             issue_item="1"),
        Case("synth --record /nonexistent/r.json", SYNTH + ["-o", "s.csv", "--record",
             "/nonexistent/r.json"], issue_item="1"),
        Case("synth -o s.txt", SYNTH + ["-o", "s.txt"], issue_item="1"),
        # item 2: Ctrl-C
        Case(f"answer, Ctrl-C while reading {rows:,} rows (early)", big,
             ["a.csv", "c.json", "r.html"], interrupt_after=0.3, issue_item="2"),
        Case(f"answer, Ctrl-C while reading {rows:,} rows (late)", big,
             ["a.csv", "c.json", "r.html"], interrupt_after=1.0, issue_item="2"),
        # item 3 (the synthesizer's preflight)
        Case("synth adaptive --rounds 1 (< 0.9 d)", SYNTH + ["-o", "s.csv", "--rounds", "1"],
             ["s.csv"], issue_item="3"),
        # item 5: budgets out of range
        Case("answer --epsilon 1e-20", ["answer", "d.csv", "w.sql", "-s", "schema.yaml", "-e",
             "1e-20", "--ledger", "L.db"], issue_item="5"),
        Case("answer --epsilon 1e-300", ["answer", "d.csv", "w.sql", "-s", "schema.yaml", "-e",
             "1e-300", "--ledger", "L.db"], issue_item="5"),
        Case("answer --rho 1e308", ["answer", "d.csv", "w.sql", "-s", "schema.yaml", "--rho",
             "1e308"], issue_item="5"),
        Case("synth --epsilon 1e-100", ["synth", "d.csv", "w.sql", "-s", "schema.yaml", "-e",
             "1e-100", "--ledger", "L.db", "-o", "s.csv"], issue_item="5"),
        # item 6: not UTF-8
        Case("answer, Latin-1 workload", ANSWER + ["-o", "a.csv"],
             prepare=write("w.sql", b"a: region = 'N\xe9'\n"), issue_item="6"),
        Case("answer, Latin-1 schema", ANSWER + ["-o", "a.csv"],
             prepare=write("schema.yaml", SCHEMA.encode() + b"  r\xe9gion2: {type: boolean}\n"),
             issue_item="6"),
        # item 7: DATA and WORKLOAD swapped
        Case("answer WORKLOAD DATA (swapped)", ["answer", "w.sql", "d.csv", "-s", "schema.yaml",
             "-e", "1", "--ledger", "L.db", "-o", "a.csv"], issue_item="7"),
        # item 8: synth on defaults with a substitute ledger
        Case("synth --ledger (substitute ledger, default neighbours)", SYNTH + ["-o", "s.csv"],
             ledger="substitute", issue_item="8"),
        # item 11: names and weights
        Case("answer, duplicate query names", ANSWER + ["-o", "a.csv"], ["a.csv"],
             prepare=write("w.sql", "a: age < 30\na: sex = 'F'\n"), issue_item="11"),
        Case("answer, every weight 0", ["answer", "d.csv", "w.yaml", "-s", "schema.yaml", "-e",
             "1", "--ledger", "L.db", "-o", "a.csv"],
             prepare=write("w.yaml", "queries:\n  - {where: 'age < 30', weight: 0}\n"),
             issue_item="11"),
        # item 12: schema mistakes
        Case("answer, schema 'tpye: integer'", ANSWER + ["-o", "a.csv"],
             prepare=write("schema.yaml", SCHEMA.replace("{type: integer", "{tpye: integer")),
             issue_item="12"),
        Case("answer, schema YAML syntax error", ANSWER + ["-o", "a.csv"],
             prepare=write("schema.yaml", SCHEMA.replace("max: 99}", "max: 99")),
             issue_item="12"),
        # item 13: empty data
        Case("answer, 0-byte CSV, substitute", ANSWER + SUB + ["-o", "a.csv"],
             prepare=write("d.csv", ""), ledger="substitute", issue_item="13"),
        Case("answer, header-only CSV, substitute", ANSWER + SUB + ["-o", "a.csv"],
             prepare=write("d.csv", "age,sex,region,income\n"), ledger="substitute",
             issue_item="13"),
        Case("answer, header-only CSV, add/remove (warns)", ANSWER + ["-o", "a.csv"], ["a.csv"],
             prepare=write("d.csv", "age,sex,region,income\n"), issue_item="13"),
        Case("answer, 0-byte CSV, add/remove (warns)", ANSWER + ["-o", "a.csv"], ["a.csv"],
             prepare=write("d.csv", ""), issue_item="13"),
        # answer without -o
        Case("answer without -o (table on stdout)", ANSWER, [], issue_item="16"),
    ]


@dataclass
class Outcome:
    case: Case
    code: int
    before: float
    after: float
    statuses: list[str]
    left: list[str]
    stderr: str
    seconds: float

    @property
    def verdict(self) -> str:
        temp = [f for f in self.left if f.startswith(".")]
        charged = self.after > self.before or bool(self.statuses)
        if not charged and not self.left:
            return NOTHING
        if (charged and self.statuses == ["released"] and self.code == 0 and not temp
                and all(o in self.left for o in self.case.outputs)):
            return DELIVERED
        if (charged and self.statuses == ["aborted"] and self.code != 0
                and not any(o in self.left for o in self.case.outputs) and not temp):
            return ABORTED
        return "VIOLATION"

    @property
    def clean(self) -> bool:
        """Errors (if any) without a traceback."""
        return "Traceback" not in self.stderr


def run_case(case: Case, root: Path, rows: int) -> Outcome:
    from tessera.release.ledger import Ledger
    from tessera.schema.domain import Domain

    d = root / "".join(c if c.isalnum() else "_" for c in case.name)[:60]
    d.mkdir()
    (d / "schema.yaml").write_text(SCHEMA)
    (d / "w.sql").write_text(WORKLOAD)
    _frame(500).to_csv(d / "d.csv", index=False)
    if case.interrupt_after is not None:
        shutil.copy(root / "big.csv", d / "big.csv")
    Ledger.init(d / "L.db", total=3.0, definition="pure", neighbours=case.ledger,
                domain=Domain.load(d / "schema.yaml"), dataset="hostile")
    if case.prepare is not None:
        case.prepare(d)
    before = Ledger.open(d / "L.db").summary().spent
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), COLUMNS="200")
    argv = [sys.executable, "-m", "tessera.cli.main", *case.argv]
    start = time.perf_counter()
    if case.interrupt_after is None:
        proc = subprocess.run(argv, cwd=d, env=env, capture_output=True, text=True,
                              timeout=900)
        code, stderr = proc.returncode, proc.stderr
    else:
        child = subprocess.Popen(argv, cwd=d, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True,
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        _wait_for_start(child, case.interrupt_after)
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=900)
        code = child.returncode
    seconds = time.perf_counter() - start
    summary = Ledger.open(d / "L.db").summary()
    left = sorted(p.name for p in d.iterdir() if p.name not in INPUTS
                  and not p.name.startswith("w.") and p.name != "out.csv")
    if (d / "out.csv").is_dir() and any((d / "out.csv").iterdir()):
        left.append("out.csv/…")
    return Outcome(case, code, before, summary.spent, [c.status for c in summary.releases],
                   left, stderr, seconds)


def _wait_for_start(child: subprocess.Popen[str], after: float) -> None:
    """Sleep ``after`` seconds once the child has imported the CLI (its interpreter is up):
    what the delay measures is the data read, not Python's start-up."""
    time.sleep(2.0)  # imports (numpy, DuckDB, typer) on a shared machine
    time.sleep(after)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, help="keep the case directories here")
    parser.add_argument("--only", help="run the cases whose name contains this text")
    parser.add_argument("--rows", type=int, default=400_000,
                        help="rows of the CSV the Ctrl-C cases read")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO / "src"))
    root = Path(tempfile.mkdtemp(prefix="tessera-hostile-")) if args.keep is None else args.keep
    root.mkdir(parents=True, exist_ok=True)
    chosen = [c for c in cases(args.rows) if args.only is None or args.only in c.name]
    if any(c.interrupt_after is not None for c in chosen):
        _frame(args.rows, seed=1).to_csv(root / "big.csv", index=False)
    print(f"# bench_hostile: {len(chosen)} CLI cases, python {sys.version.split()[0]}, "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; case directories under "
          f"{root}")
    print(f"{'item':<6} {'case':<55} {'exit':>4}  {'spent before → after':<22} "
          f"{'status':<10} {'files left':<24} {'clean':<5} verdict")
    outcomes = []
    for case in chosen:
        o = run_case(case, root, args.rows)
        outcomes.append(o)
        status = ",".join(o.statuses) or "-"
        files = ",".join(o.left) or "-"
        first = (o.stderr.strip().splitlines() or [""])[0]
        print(f"{case.issue_item:<6} {case.name[:55]:<55} {o.code:>4}  "
              f"{o.before:>6.4g} → {o.after:<12.4g} {status:<10} {files[:24]:<24} "
              f"{'yes' if o.clean else 'NO':<5} {o.verdict}", flush=True)
        if o.verdict == "VIOLATION" or not o.clean:
            print(f"       stderr: {o.stderr.strip()[-600:]}")
        elif first and o.code != 0:
            print(f"       {first[:160]}")
    bad = [o for o in outcomes if o.verdict == "VIOLATION" or not o.clean]
    print(f"# {len(outcomes) - len(bad)} of {len(outcomes)} cases: {NOTHING!r} or "
          f"{DELIVERED!r} (or, after a Ctrl-C past the charge, {ABORTED!r})")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
