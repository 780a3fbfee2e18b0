"""Worker processes for the ledger's kill -9 and race tests (tests/release/test_ledger.py).

Run as ``python ledger_child.py``: it imports Tessera once (≈ 1.5 s), then reads one JSON
command per line on stdin and answers one JSON line on stdout. Every trial runs in a freshly
forked worker; this process never opens a ledger, so no SQLite state crosses a fork.

* ``{"cmd": "trial", "ledger", "answers", "n", "seed", "delay"}``: fork a worker that charges
  ``n`` releases and, after each charge returns, writes ``answers/<release_id>.json`` (the
  answers "leaving the process") and marks the release released; SIGKILL the worker ``delay``
  seconds after the fork (``null``: let it finish). Reply ``{"killed", "exit", "elapsed"}``.
* ``{"cmd": "race", "ledger", "clauses", "cost"}``: one worker per entry of ``clauses`` (a
  list of WHERE clauses each); all wait at a ``multiprocessing`` barrier, then charge their
  release at once. Reply ``{"exits": [...]}``: 0 charged, 3 refused (BudgetExceeded).

End of input ends the process.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import random
import signal
import sys
import time
import traceback
from typing import Any

from tessera.release.ledger import BudgetExceeded, Ledger
from tessera.workload.workload import Workload

REFUSED = 3


def _clauses(rng: random.Random) -> list[str]:
    """One to three range queries over the ordered attributes ``age`` and ``hours``."""
    out = []
    for _ in range(rng.randint(1, 3)):
        parts = []
        for attr in rng.sample(["age", "hours"], rng.randint(1, 2)):
            lo = rng.randint(0, 90)
            parts.append(f"{attr} BETWEEN {lo} AND {rng.randint(lo, 99)}")
        out.append(" AND ".join(parts))
    return out


def _trial_worker(ledger_path: str, answers: str, n: int, seed: int) -> None:
    rng = random.Random(seed)
    ledger = Ledger.open(ledger_path)
    for i in range(n):
        clauses = _clauses(rng)
        workload = Workload.from_sql(clauses=clauses, domain=ledger.domain)
        costs = [round(rng.uniform(0.01, 0.1), 3) for _ in clauses]
        charge = ledger.charge(workload, costs, label=f"trial {seed} release {i}",
                               mechanism="test")
        # the answers leave the process only now, after the committed charge
        target = os.path.join(answers, f"{charge.release_id}.json")
        with open(target, "w") as f:
            json.dump({"release_id": charge.release_id, "label": charge.label,
                       "answers": [rng.random() for _ in clauses]}, f)
        ledger.mark_released(charge.release_id)


def trial(cmd: dict[str, Any]) -> dict[str, Any]:
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the worker
        code = 0
        try:
            _trial_worker(cmd["ledger"], cmd["answers"], int(cmd["n"]), int(cmd["seed"]))
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            sys.stderr.flush()
            os._exit(code)
    delay = cmd.get("delay")
    if delay is not None:
        time.sleep(max(0.0, start + float(delay) - time.monotonic()))
        os.kill(pid, signal.SIGKILL)  # our own unreaped child: a no-op if it already exited
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    return {"killed": killed, "exit": os.waitstatus_to_exitcode(status),
            "elapsed": time.monotonic() - start}


def _race_worker(ledger_path: str, clauses: list[str], cost: float, label: str,
                 barrier: Any) -> None:
    ledger = Ledger.open(ledger_path)
    workload = Workload.from_sql(clauses=clauses, domain=ledger.domain)
    barrier.wait(timeout=60)
    try:
        ledger.charge(workload, [cost] * len(clauses), label=label, mechanism="test")
    except BudgetExceeded:
        sys.exit(REFUSED)


def race(cmd: dict[str, Any]) -> dict[str, Any]:
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(len(cmd["clauses"]))
    procs = [ctx.Process(target=_race_worker,
                         args=(cmd["ledger"], clauses, float(cmd["cost"]), f"racer {i}", barrier))
             for i, clauses in enumerate(cmd["clauses"])]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    return {"exits": [p.exitcode for p in procs]}


def main() -> None:
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        reply = trial(cmd) if cmd["cmd"] == "trial" else race(cmd)
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
