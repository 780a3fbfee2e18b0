"""The Tumult comparison's builders (bench/bench_tumult.py) on tiny tables.

The tables, workloads, true answers, Tumult's copies and the reading of Tumult's answers are
checked against brute force (Tessera's own exact counts, a groupby per copy); the Tumult run
itself needs ``tmlt.analytics`` (in this interpreter, or the one ``TESSERA_TUMULT_PYTHON`` names)
and starts Spark, so it is skipped without it and marked slow."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tessera.data.counts import count
from tessera.overlap.solve import max_overlap
from tessera.privacy import PrivacyUnit
from tessera.release.budget import Budget
from tests.bench.scripts import load_bench


@pytest.fixture(scope="module")
def bt():  # noqa: ANN201
    return load_bench("bench_tumult")


def raw_nlswork(people: int = 12, seed: int = 1) -> pd.DataFrame:
    """A made-up frame in nlswork's raw layout (idcode, year, race, collgrad, hours)."""
    rng = np.random.default_rng(seed)
    per = rng.integers(1, 6, people)
    n = int(per.sum())
    years = [68, 69, 70, 71, 72, 73, 75, 77, 78, 80, 82, 83, 85, 87, 88]
    hours = rng.integers(0, 120, n).astype(float)
    hours[0] = np.nan  # a missing value reads as 0
    return pd.DataFrame({"idcode": np.repeat(np.arange(1, people + 1), per),
                         "year": rng.choice(years, n), "race": rng.integers(1, 4, n),
                         "collgrad": rng.integers(0, 2, n), "hours": hours})


@pytest.fixture(scope="module")
def tables(bt):  # noqa: ANN001, ANN201
    return [bt.transactions_table(people=15, seed=3), bt.nlswork_table(raw_nlswork())]


def test_workloads_are_group_bys_over_one_two_and_three_keys(bt, tables) -> None:  # noqa: ANN001
    t = tables[0]
    w = bt.count_workloads(t)
    assert w["1 key"] == (("category",),)
    assert w["3 keys"] == (("category", "amount", "channel"),)
    assert len(w["1+2-way"]) == 6 and len(set(w["1+2-way"])) == 6
    assert w["2 keys per category"][0] == ("category=grocery", "amount", "channel")
    # a row touches one group of each statement (γ_w = 6), or of one filtered statement
    assert max_overlap(bt.tessera_workload(t, w["1+2-way"])).bound == 6
    assert max_overlap(bt.tessera_workload(t, w["2 keys per category"])).bound == 1
    assert bt.sum_workloads(t) == {}  # no sum column
    assert set(bt.sum_workloads(tables[1])) == {"sum 1 key", "sum 2 keys", "sum 1 key per year"}


def test_true_answers_are_tesseras_exact_counts_in_its_order(bt, tables) -> None:  # noqa: ANN001
    for t in tables:
        for statements in bt.count_workloads(t).values():
            wl = bt.tessera_workload(t, statements)
            exact = count(t.frame[list(t.keys)], wl).answers
            assert np.array_equal(bt.true_answers(t, statements), exact)
            assert len(exact) == sum(len(bt.cells(t, s)) for s in statements)


def test_sums_clamp_each_row_and_missing_hours_read_as_zero(bt, tables) -> None:  # noqa: ANN001
    t = tables[1]
    lo, hi = t.bounds
    assert t.frame["hours"].iloc[0] == 0
    got = bt.true_answers(t, [("race",)], "sum")
    brute = [sum(min(max(h, lo), hi) for h, r in zip(t.frame["hours"], t.frame["race"]) if r == v)
             for v in t.keys["race"]]
    assert got.tolist() == brute
    # Tessera's sums: its groups in the bench's order (checked inside against the exact
    # sums), its bounded truth at most the clamped sums of every row (values are ≥ 0)
    wl = bt.tessera_sum_workload(t, [("race",)])
    run = bt.tessera_sum_run(t, [("race",)], wl, 2, Budget.of(epsilon=1.0), 2)
    assert run.answers.shape == (2, len(t.keys["race"]))
    assert (run.bounded <= got).all() and run.bounded.sum() > 0
    # the filtered statements (WHERE year = y GROUP BY race) too, in the bench's order
    per = bt.sum_workloads(t)["sum 1 key per year"]
    run = bt.tessera_sum_run(t, per, bt.tessera_sum_workload(t, per), 2,
                             Budget.of(epsilon=1.0), 1)
    assert run.answers.shape == (1, len(bt.true_answers(t, per, "sum")))


def test_tumult_copies_hold_each_statement_once_per_repeat(bt, tables) -> None:  # noqa: ANN001
    for t in tables:
        statements = list(dict.fromkeys(s for w in bt.count_workloads(t).values() for s in w))
        repeats = 3
        copies = bt.tumult_copies(t, statements, repeats)
        # a copy per (statement, repeat), holding the statement's rows (a filtered one's only)
        assert len(copies) == repeats * sum(bt.true_answers(t, [s]).sum() for s in statements)
        # every person is in exactly one copy: ids never repeat across copies
        prefix = copies[t.id_column].str.split("|", n=1).str[0]
        assert (copies.groupby(t.id_column)["cell"].apply(lambda c: c.str.split("#").str[0]
                                                          .nunique()) == 1).all()
        assert prefix.nunique() == len(statements) * repeats
        # a groupby per copy is the statement's exact answers, read back in their order
        counts = copies.groupby("cell").size().to_dict()
        got = {c: float(counts.get(c, 0)) for si in range(len(statements))
               for r in range(repeats) for c in bt.copy_cells(t, statements, si, r)}
        for w in bt.count_workloads(t).values():
            m = bt.tumult_matrix(t, statements, w, repeats, got)
            assert np.array_equal(m, np.tile(bt.true_answers(t, w), (repeats, 1)))


def test_parallel_program_splits_the_merged_statement_by_its_filter(bt, tables) -> None:  # noqa: ANN001
    t = tables[1]
    per, ways = bt.count_workloads(t)["2 keys per year"], bt.count_workloads(t)["1+2-way"]
    assert bt.disjoint_filtered(per) and not bt.disjoint_filtered(ways)
    assert bt.disjoint_filtered(bt.sum_workloads(t)["sum 1 key per year"])
    assert not bt.disjoint_filtered(per[:1]) and not bt.disjoint_filtered(per[:1] * 2)
    assert {bt.merged(s) for s in per} == {("year", "race", "collgrad")}
    statements, repeats = [*per, bt.merged(per[0])], 2
    copies = bt.tumult_copies(t, statements, repeats)
    job = bt.parallel_job(t, statements, per, repeats, {"id": "p"})
    assert list(job["partition"]) == list(t.keys["year"])
    # each part's groups are the merged copies' cells of that year, every repeat's
    copy = copies["cell"].str.split("#").str[0]
    for year, part in job["partition"].items():
        rows = copies[copy.isin({c.split("#")[0] for c in part})]
        held = set(rows.loc[rows["part"] == year, "cell"])
        assert held <= set(part) and len(part) == repeats * 3 * 2
        assert (rows.loc[rows["cell"].isin(part), "part"] == year).all()
    # a groupby per copy, read back from the merged copies: the disjoint statements' answers
    counts = copies.groupby("cell").size().to_dict()
    got = {c: float(counts.get(c, 0)) for c in job["cells"]}
    m = bt.tumult_matrix(t, statements, per, repeats, got, parallel=True)
    assert np.array_equal(m, np.tile(bt.true_answers(t, per), (repeats, 1)))


def test_errors_are_mae_and_rmse_per_repeat(bt) -> None:  # noqa: ANN001
    mae, rmse = bt.errors(np.array([[1.0, 3.0], [0.0, 0.0]]), np.array([0.0, 0.0]))
    assert mae.tolist() == [2.0, 0.0]
    assert rmse.tolist() == [pytest.approx(np.sqrt(5.0)), 0.0]


def test_tessera_runs_repeats_and_reports_its_bounded_truth(bt, tables) -> None:  # noqa: ANN001
    t = tables[0]
    wl = bt.tessera_workload(t, bt.count_workloads(t)["2 keys"])
    run = bt.tessera_run(t, wl, 2, Budget.of(epsilon=1.0), repeats=2)
    assert run.answers.shape == (2, wl.n_queries)
    unit = PrivacyUnit(t.id_column, 2)
    assert np.array_equal(run.bounded, count(t.frame[[t.id_column, *t.keys]], wl,
                                             unit=unit).answers)
    assert run.bounded.sum() < len(t.frame)  # K = 2 cut someone's rows


@pytest.mark.slow
def test_tumult_runner_answers_every_copy(bt, tables) -> None:  # noqa: ANN001
    python = bt.tumult_python()  # TESSERA_TUMULT_PYTHON, or this interpreter if it has tmlt
    if python is None:
        pytest.skip("tmlt.analytics is not importable (set TESSERA_TUMULT_PYTHON)")
    t = tables[0]
    w = bt.count_workloads(t)["1 key"]
    per = bt.count_workloads(t)["2 keys per category"]
    statements = [*w, *per, bt.merged(per[0])]
    cells = [c for si in range(len(statements)) for c in bt.copy_cells(t, statements, si, 0)]
    jobs = [{"id": f"truth{k}", "k": k, "definition": "pure", "budget": "inf",
             "aggregate": "count", "cells": cells, "value": None, "bounds": None}
            for k in (1, 50)]
    # the parallel program at an infinite budget: the same truncation as one query's
    jobs.append(bt.parallel_job(t, statements, per, 1, {
        "id": "parallel", "k": 1, "definition": "pure", "budget": "inf",
        "aggregate": "count", "value": None, "bounds": None}))
    with tempfile.TemporaryDirectory() as tmp:
        got, record, _ = bt.run_tumult(python, t, statements, jobs, 1, Path(tmp))
    m = bt.tumult_matrix(t, statements, w, 1, got["truth50"])
    assert np.array_equal(m[0], bt.true_answers(t, w))  # K = 50 keeps every row: exact
    one = bt.tumult_matrix(t, statements, per, 1, got["truth1"], parallel=True)
    assert np.array_equal(bt.tumult_matrix(t, statements, per, 1, got["parallel"], parallel=True),
                          one)
    assert one.sum() == t.frame[t.id_column].nunique()  # K = 1: one row a person in all


def test_people_arm_counts_distinct_people_where_they_are_rows(bt, tables) -> None:  # noqa: ANN001
    t = tables[1]
    # made-up person-years: at most one row a woman and year, as in nlswork
    frame = t.frame.drop_duplicates([t.id_column, "year"]).reset_index(drop=True)
    t = bt.PersonTable(t.name, frame, t.id_column, t.keys, t.value, t.bounds)
    per, ways = bt.count_workloads(t)["2 keys per year"], bt.count_workloads(t)["1+2-way"]
    # brute force: distinct ids per group, in the bench's group order
    rows = list(frame[[t.id_column, "year", "race", "collgrad"]].itertuples(index=False))
    brute = [float(len({i for i, *ks in rows if tuple(ks) == g}))  # g: (year, race, collgrad)
             for s in per for g in bt.cells(t, s)]
    assert bt.true_people(t, per).tolist() == brute
    assert bt.people_are_rows(t, per)  # one row a year: people are rows, group by group
    assert not bt.people_are_rows(t, ways)  # GROUP BY race: a woman's years share her race
    k = int(t.rows_per_person().max())
    wl = bt.tessera_workload(t, per)
    pr = bt.tessera_people_run(t, per, wl, k, Budget.of(epsilon=1.0), repeats=1)
    assert pr.run.answers.shape == (1, wl.n_queries)
    # nothing cut at K = the most rows anyone has: the bounded truth is the unbounded one
    assert np.array_equal(pr.run.bounded, bt.true_answers(t, per))
    # disjoint statements, a person in at most one group of each: C_K = min(K, statements met)
    years = frame.groupby(t.id_column)["year"].nunique().max()
    assert pr.coverage == min(k, years) and pr.scale == pytest.approx(pr.coverage)
    # under ρ = 0.5 a change of 0 or 1 per query: σ = √C_K (counting rows: K·√γ_w = K)
    assert k > 1
    rho = bt.tessera_people_run(t, per, wl, k, Budget.of(rho=0.5), repeats=1)
    assert rho.scale == pytest.approx(np.sqrt(rho.coverage)) and rho.scale < k
    # with a woman's two rows in one year, the bounded truth counts her once
    twice = bt.PersonTable(t.name, pd.concat([frame, frame.iloc[:1]], ignore_index=True),
                           t.id_column, t.keys, t.value, t.bounds)
    assert bt.true_people(twice, per).sum() < bt.true_answers(twice, per).sum()
    assert not bt.people_are_rows(twice, per)
    many = bt.tessera_people_run(twice, per, bt.tessera_workload(twice, per),
                                 int(twice.rows_per_person().max()), Budget.of(epsilon=1.0), 1)
    assert np.array_equal(many.run.bounded, bt.true_people(twice, per))


def test_people_arm_sums_each_persons_total(bt, tables) -> None:  # noqa: ANN001
    """The sums counted per person (one row a woman a year): the bounded truth at K = the most
    rows anyone has is the bench's clamped sums, and a person costs the coverage of the years
    she can meet, at the clamp's top: b = 80·C_K (ε), σ = 80·√C_K (ρ)."""
    t = tables[1]
    frame = t.frame.drop_duplicates([t.id_column, "year"]).reset_index(drop=True)
    t = bt.PersonTable(t.name, frame, t.id_column, t.keys, t.value, t.bounds)
    per = bt.sum_workloads(t)["sum 1 key per year"]
    assert bt.people_are_rows(t, per)
    wl = bt.tessera_sum_workload(t, per)
    k = int(t.rows_per_person().max())
    years = frame.groupby(t.id_column)["year"].nunique().max()
    pr = bt.tessera_sum_people_run(t, per, wl, k, Budget.of(epsilon=1.0), repeats=1)
    assert np.array_equal(pr.run.bounded, bt.true_answers(t, per, "sum"))
    assert pr.coverage == pytest.approx(min(k, years), rel=1e-6)
    assert pr.scale == pytest.approx(80 * pr.coverage, rel=1e-6)
    rho = bt.tessera_sum_people_run(t, per, wl, k, Budget.of(rho=0.5), repeats=1)
    assert rho.scale == pytest.approx(80 * np.sqrt(rho.coverage), rel=1e-6)
