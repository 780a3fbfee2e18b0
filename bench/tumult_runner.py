"""Tumult Analytics' side of ``bench/bench_tumult.py``, run in Tumult's own interpreter.

    TESSERA_TUMULT_PYTHON=/path/to/venv/bin/python bench/bench_tumult.py ...

``tmlt.analytics`` pins pandas < 2, numpy < 2 and pyspark < 3.6 on Python 3.11, which Tessera's
environment does not satisfy, so it lives in a virtual environment of its own and this script
runs there as a subprocess (``python bench/tumult_runner.py SPEC.json OUT.json``). It imports
only the standard library, pandas, pyspark and tmlt — never tessera.

**What it runs.** SPEC names a CSV (written by the bench outside the repository), its privacy-id
column, and *jobs*; each job is one Tumult query evaluated with its own budget::

    QueryBuilder("t").enforce(MaxRowsPerID(K)).groupby(keys).count()            # or
    QueryBuilder("t").enforce(MaxRowsPerID(K)).groupby(keys).sum(v, low=lo, high=hi)

in one ``Session`` over the table with ``protected_change=AddRowsWithID(id_column=ID)`` — one
person's rows, bounded by Tumult's own truncation (``MaxRowsPerID``: a hash order over each
person's rows, the first K kept) — under ``PureDPBudget`` or ``RhoZCDPBudget``. Such queries
compose sequentially: the bench passes each its share of the workload's budget (``ε/m`` for m
GROUP BY statements, evenly). A job with budget ``inf`` returns Tumult's exact answers on its
own truncated table (no noise): the *bounded truth*.

**Parallel composition.** A job with a ``partition`` (value → its groups) is Tumult's program
for disjoint statements ``WHERE f = v GROUP BY …``, one per value v::

    session.create_view(QueryBuilder("t").enforce(MaxRowsPerID(K)), "tk", cache=True)
    parts = session.partition_and_create("tk", budget, column="part", splits={...})
    parts[p].evaluate(QueryBuilder(p).groupby(keys).count(), budget)   # each part, in order

Tumult requires an ID table to carry ``MaxRowsPerID`` (or ``MaxGroupsPerID``) before it can be
partitioned; with ``MaxRowsPerID(K)`` a person's K kept rows fall in the parts in total, so
every part gets the *whole* budget at sensitivity K — Tessera's bounding (K rows a person,
whatever they touch). ``MaxGroupsPerID(f, G)`` would instead allow K rows in each of G parts:
another bound, not run. The session is built over the job's copies only (the copies are
disjoint sets of people, so this is the same as one table each).

**Copies, so that one Spark job carries every repeat.** A Tumult evaluation costs seconds of
Spark here whatever the table's size; 20 repeats of every query would take hours. The table is
therefore given to Tumult as C disjoint copies, one per (statement, repeat): copy c's people get
ids ``c|id`` (a person is in exactly one copy) and its rows one column ``cell = c#v1|v2…``, the
values of that copy's GROUP BY keys. One ``groupby(cell)`` then answers every copy's statement at
once: each copy is its own set of people, so a person still moves the counts of one copy only,
by at most K (a sum by K·max(|lo|, |hi|)), and Tumult calibrates the noise of every cell exactly
as for that statement alone on the original table — independent noise per cell, the scale set
by the query's budget and K. A job lists the copies it answers (its KeySet): cells of other
copies are not in the KeySet and are dropped before counting, as Tumult drops any row whose key
is not in it. Truncation hashes each copy's rows (its ids differ), so each copy keeps its own
hash-chosen K rows a person — the bounded truth is read per copy (the ``inf`` job).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
from pathlib import Path


def child_peak_rss_mb() -> float:
    """The largest peak resident set (VmHWM) of this process's children: Spark's JVM."""
    peak = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != os.getpid():
                continue
            for line in (stat.parent / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) / 1024)
        except (OSError, IndexError, ValueError):
            continue
    return peak


def main() -> None:
    spec_path, out_path = Path(sys.argv[1]), Path(sys.argv[2])
    spec = json.loads(spec_path.read_text())
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's Python workers: this interpreter
    import pandas as pd
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F  # noqa: N812 (Spark's own spelling)

    work = Path(spec["workdir"])
    spark = (SparkSession.builder.master(spec.get("master", "local[2]"))
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.default.parallelism", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.adaptive.enabled", "false")
             .config("spark.sql.warehouse.dir", str(work / "warehouse"))
             .config("spark.driver.memory", spec.get("driver_memory", "2g"))
             .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={work}")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    import tmlt.analytics as ta
    from tmlt.analytics import (
        AddRowsWithID,
        KeySet,
        MaxRowsPerID,
        PureDPBudget,
        QueryBuilder,
        RhoZCDPBudget,
        Session,
    )

    t0 = time.perf_counter()
    columns = [f"`{spec['id']}` STRING", "cell STRING", "part STRING"]
    if spec.get("value"):
        columns.append(f"`{spec['value']}` INT")
    sdf = spark.read.csv(spec["data"], header=True, schema=", ".join(columns))
    budgets = {"pure": PureDPBudget, "zcdp": RhoZCDPBudget}
    sessions = {d: Session.from_dataframe(privacy_budget=budgets[d](float("inf")), source_id="t",
                                          dataframe=sdf,
                                          protected_change=AddRowsWithID(id_column=spec["id"]))
                for d in sorted({j["definition"] for j in spec["jobs"]})}
    setup = time.perf_counter() - t0
    def aggregate(query, job):  # noqa: ANN001, ANN202 (tmlt's builders are untyped here)
        if job["aggregate"] == "count":
            return query.count(), "count"
        lo, hi = job["bounds"]
        return query.sum(job["value"], low=lo, high=hi), f"{job['value']}_sum"

    def noise_of(session, built, budget):  # noqa: ANN001, ANN202
        try:  # the noise Tumult draws (mechanism, parameter): a private helper, for the record
            return [dict(i) for i in session._noise_info(built, budget)]
        except Exception:  # noqa: BLE001 (an infinite budget has none; the record is optional)
            return []

    results = []
    for job in spec["jobs"]:
        t = time.perf_counter()
        budget = budgets[job["definition"]](float(job["budget"]))
        got_cells: list[str] = []
        got_values: list[float] = []
        if "partition" not in job:  # one query, its share of the budget (sequential)
            keys = KeySet.from_dict({"cell": job["cells"]})
            query = QueryBuilder("t").enforce(MaxRowsPerID(int(job["k"]))).groupby(keys)
            built, column = aggregate(query, job)
            session = sessions[job["definition"]]
            noise = noise_of(session, built, budget)
            answer = session.evaluate(built, budget).toPandas()
            got_cells, got_values = answer["cell"].tolist(), answer[column].tolist()
        else:  # parallel composition: cut to K rows a person, split by `part`, full budget each
            copies = sorted({c.split("#", 1)[0] for c in job["cells"]})
            mine = sdf.filter(F.split(F.col("cell"), "#").getItem(0).isin(copies))
            session = Session.from_dataframe(
                privacy_budget=budgets[job["definition"]](float("inf")), source_id="t",
                dataframe=mine, protected_change=AddRowsWithID(id_column=spec["id"]))
            session.create_view(QueryBuilder("t").enforce(MaxRowsPerID(int(job["k"]))), "tk",
                                cache=True)
            splits = {f"p{i}": v for i, v in enumerate(job["partition"])}
            parts = session.partition_and_create("tk", budget, column="part", splits=splits)
            noise = []
            for name, value in splits.items():  # in the order created, as Tumult requires
                keys = KeySet.from_dict({"cell": job["partition"][value]})
                built, column = aggregate(QueryBuilder(name).groupby(keys), job)
                noise = noise_of(parts[name], built, budget) or noise
                answer = parts[name].evaluate(built, budget).toPandas()
                got_cells += answer["cell"].tolist()
                got_values += answer[column].tolist()
                parts[name].stop()
            session.stop()
        results.append({"id": job["id"], "cells": got_cells,
                        "values": [float(v) for v in got_values],
                        "seconds": time.perf_counter() - t, "noise": str(noise)})
        print(f"tumult job {job['id']} ({job['aggregate']}, K={job['k']}, {job['definition']} "
              f"{job['budget']}{', partitioned' if 'partition' in job else ''}): "
              f"{results[-1]['seconds']:.1f} s, noise {noise}", file=sys.stderr, flush=True)
    out_path.write_text(json.dumps({
        "results": results, "setup_seconds": setup,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "jvm_peak_rss_mb": child_peak_rss_mb(),
        "versions": {"tmlt.analytics": getattr(ta, "__version__", "?"),
                     "pyspark": __import__("pyspark").__version__, "pandas": pd.__version__,
                     "python": platform.python_version()},
    }))
    spark.stop()


if __name__ == "__main__":
    main()
