"""Resource guards (issue #13): large workloads are handled in bounded memory or refused before
anything is allocated, with a message naming the size, the limit and how to raise it; long
computations honour their time limit and then return a proven upper bound (checked here against
brute force on small instances) or a clear error.

Big inputs are built cheaply (a line repeated, families never expanded); the one test that
parses 10⁶ lines runs in a child process whose own peak memory (VmHWM) is asserted, and is
marked ``slow``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tessera.calibration.comparison import overlap_counts
from tessera.calibration.cost import workload_cost
from tessera.cli.main import app
from tessera.errors import QueryWarning, ResourceError
from tessera.overlap import max_overlap, routes
from tessera.overlap.quick import even_split_bound
from tessera.overlap.recover import recover_families
from tessera.overlap.result import g, h
from tessera.schema.domain import Domain
from tessera.workload.families import k_way_marginals
from tessera.workload.workload import Workload
from tests.oracles.overlap import points_max_score, points_max_substitution
from tests.overlap.cases import random_case

#: The warnings of a file that repeats a query: the first renamings, then their count.
RENAMED = r"is already used .* this query is named|more queries renamed the same way"

ROOT = Path(__file__).resolve().parents[2]


def _binary(n: int) -> Domain:
    return Domain.from_dict({f"b{i}": 2 for i in range(n)})


# -- the one-pass bound and the overlap time limit -----------------------------------------------


def test_one_pass_bound_is_never_below_brute_force() -> None:
    rng = np.random.default_rng(13)
    for case in range(1500):
        dom, queries, w = random_case(rng)
        s = h(("pure", "gdp", "zcdp")[case % 3], w)
        ref, _ = points_max_score(dom, queries, s)
        bound = even_split_bound(queries, s)
        assert bound >= ref, (dom, queries, w)
        assert bound <= np.nextafter(sum(s), np.inf) * (1 + 1e-12)  # never above Σ s


@pytest.fixture
def force_quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every workload's set-up 'needs' 10⁶ s: any time limit is too short for it."""
    monkeypatch.setattr(routes, "SETUP_FLOOR_SECONDS", 0.0)
    monkeypatch.setattr(routes, "SETUP_SECONDS_PER_PREDICATE", 1e6)


def test_time_limit_shorter_than_the_set_up_gives_a_proven_bound(force_quick: None) -> None:
    rng = np.random.default_rng(14)
    for case in range(400):
        dom, queries, w = random_case(rng)
        comp = ("pure", "gdp", "zcdp")[case % 3]
        s = h(comp, w)
        if not any(q.predicates for q in queries):
            continue
        res = max_overlap(queries, w, domain=dom, comp=comp, time_limit=5.0)
        assert res.method == "one-pass split bound (time limit)"
        assert not res.exact and res.witness is None
        assert res.bound >= g(comp, points_max_score(dom, queries, s)[0]) - 1e-12
        assert res.notes[0].startswith("time limit 5 s is shorter than the solvers' set-up for ")
        assert "raise --time-limit (time_limit=) above" in res.notes[0]
        sub = max_overlap(queries, w, domain=dom, comp=comp, neighbours="substitute",
                          time_limit=5.0)
        assert sub.method == "one-pass split bound (time limit)" and not sub.exact
        assert sub.bound >= g(comp, points_max_substitution(dom, queries, s)[0]) - 1e-12


def test_deadline_passing_during_the_set_up_gives_a_proven_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The estimate lets the solvers start (it is tiny), the 1 ns limit has passed by the first
    check: the one-pass bound, with the note saying so."""
    monkeypatch.setattr(routes, "SETUP_FLOOR_SECONDS", 0.0)
    monkeypatch.setattr(routes, "SETUP_SECONDS_PER_PREDICATE", 1e-18)
    rng = np.random.default_rng(15)
    late = 0
    for _ in range(300):
        dom, queries, w = random_case(rng)
        ref = points_max_score(dom, queries, w)[0]
        res = max_overlap(queries, w, domain=dom, time_limit=1e-9)
        assert res.bound >= ref - 1e-12
        if res.method == "one-pass split bound (time limit)":
            late += 1
            assert res.notes == (routes.LATE_NOTE,)
    assert late > 100  # (the sweep answers range workloads over ≤ 2 attributes directly)


def test_recovery_gives_up_at_its_deadline_and_on_unrecoverable_groups() -> None:
    dom = Domain.from_dict({"a": 4, "b": 4})
    cells = Workload.from_sql([f"a = {i} AND b = {j}" for i in range(4) for j in range(4)], dom)
    w = np.ones(len(cells))
    assert recover_families(dom, cells.queries, w) is not None
    assert recover_families(dom, cells.queries, w, deadline=time.monotonic() - 1) is None
    overlapping = Workload.from_sql([f"a <= {i}" for i in range(4)] * 4, dom,
                                    names=[f"q{i}" for i in range(16)])  # repeats on purpose
    assert recover_families(dom, overlapping.queries, np.ones(16)) is None


# -- structured workloads: nothing per cell ------------------------------------------------------


def test_cost_and_tradeoff_of_10_8_cells_build_nothing_per_cell() -> None:
    """Adult-sized all 4-way marginals (131,761,493 cells): before, `workload_cost` built a
    tuple of 131M weights (2.2 GiB) and the trade-off counted only the predicate queries."""
    sizes = json.loads("""{"education": 16, "age": 32, "workclass": 9, "fnlwgt": 32,
        "education-num": 16, "marital-status": 7, "occupation": 15, "relationship": 6,
        "race": 5, "sex": 2, "capital-gain": 32, "capital-loss": 32, "hours-per-week": 32,
        "native-country": 42, "income>50K": 2}""")
    code = textwrap.dedent(f"""
        from tessera.calibration.comparison import overlap_counts
        from tessera.calibration.cost import workload_cost
        from tessera.schema.domain import Domain
        from tessera.workload.families import k_way_marginals
        from tessera.workload.workload import Workload
        d = Domain.from_dict({sizes!r})
        w = Workload.of_families(d, k_way_marginals(d, 4, None, 1.0))
        assert w.unit_weights and w.n_queries == 131_761_493
        c = workload_cost(w, time_limit=30)
        assert c.weighted.exact and c.weighted.bound == 1365.0
        counts = overlap_counts(w, "substitute", 30)
        assert (counts.queries, counts.gamma, counts.changed) == (131_761_493, 1365.0, 2730)
        print(PEAK)
    """)
    peak_kib = int(_child(code).split()[-1])
    assert peak_kib < 600 * 1024, f"peak {peak_kib / 1024:.0f} MiB"


def test_weights_of_families_without_tuples() -> None:
    dom = _binary(6)
    w = Workload.of_families(dom, k_way_marginals(dom, 2, None, 2.0))
    assert not w.unit_weights
    assert np.array_equal(w.weight_array(), np.asarray(w.all_weights()))
    assert Workload.of_families(dom, k_way_marginals(dom, 2, None, 1.0)).unit_weights


def test_tradeoff_counts_every_cell() -> None:
    dom = _binary(5)
    w = Workload.of_families(dom, k_way_marginals(dom, 2, None, 1.0))
    counts = overlap_counts(w, "add-remove", 10.0)
    assert (counts.queries, counts.gamma, counts.changed, counts.exact) == (40, 10.0, 10, True)
    assert workload_cost(w).weighted.bound == 10.0


# -- refusals before allocation ------------------------------------------------------------------


def test_expanding_more_cells_than_the_limit_is_refused_up_front() -> None:
    dom = _binary(20)
    w = Workload.of_families(dom, k_way_marginals(dom, 7, None, 1.0))  # 77,520 × 128 cells
    with pytest.raises(ResourceError) as e:
        w.expanded()
    assert str(e.value) == (
        "expanding the workload gives 9,922,560 queries, above the limit of 1,000,000 (hint: "
        "use the structured form (commands and APIs take it as it is), or pass max_queries= "
        "to Workload.expanded)")
    with pytest.raises(ResourceError, match="above the limit of 10,000"):
        w.expanded(max_queries=10_000)


def test_text_workload_above_the_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "big.sql"
    path.write_text("b0 = 1\n" * 200_000)  # 1.4 MB: counted in a streaming pass
    dom = _binary(2)
    with pytest.raises(ResourceError) as e:
        Workload.load(path, dom, max_queries=150_000)
    assert str(e.value) == (
        f"{path}: the text workload has 200,000 queries, above the limit of 150,000 (hint: "
        "write marginals, cubes and hierarchies compactly as YAML (tessera workload build ... "
        "-o W.yaml), split the file, or raise the limit: Workload.load(..., max_queries=N))")
    with pytest.warns(QueryWarning, match=RENAMED):  # the same line 200,000 times
        assert len(Workload.load(path, dom, max_queries=200_000)) == 200_000


def test_treewidth_refuses_more_queries_than_its_limit(tmp_path: Path) -> None:
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"a": 3, "b": 3}))
    wl = tmp_path / "w.sql"
    wl.write_text("".join(f"a = {i % 3} AND b = {i // 3 % 3}\n" for i in range(12)))
    res = CliRunner().invoke(app, ["treewidth", str(wl), "--schema", str(schema),
                                   "--max-queries", "10"])
    assert res.exit_code == 2
    assert "the incidence graph would have a vertex for each of 12 queries, above the limit " \
           "of 10" in res.output
    assert "raise --max-queries" in res.output
    ok = CliRunner().invoke(app, ["treewidth", str(wl), "--schema", str(schema)])
    assert ok.exit_code == 0, ok.output


# -- 10⁶ queries in bounded memory (child process) -----------------------------------------------


#: The child's own peak (KiB): VmHWM of /proc/self/status belongs to the memory map exec made.
#: Not ru_maxrss, which Linux carries across fork and exec: a child forked from a large pytest
#: worker would report the worker's size.
_PEAK = ("int(next(line.split()[1] for line in open('/proc/self/status') "
         "if line.startswith('VmHWM:')))")


def _child(code: str) -> str:
    code = code.replace("PEAK", _PEAK)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=1200)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _cell_lines_code(path: Path, size: int) -> str:
    """A child's program: ``size``⁴ marginal-cell lines written to ``path``, parsed, their
    statistics (no duplicates) and the overlap (structure recovered: exact γ = 1) checked; it
    prints its own peak memory (KiB)."""
    return textwrap.dedent(f"""
        import itertools, resource
        from pathlib import Path
        from tessera.calibration.cost import workload_cost
        from tessera.schema.domain import Domain
        from tessera.workload.stats import WorkloadStats
        from tessera.workload.workload import Workload
        names = ["a", "b", "c", "d"]
        Path({str(path)!r}).write_text("".join(
            f"a = {{i}} AND b = {{j}} AND c = {{k}} AND d = {{m}}\\n"
            for i, j, k, m in itertools.product(range({size}), repeat=4)))
        w = Workload.load({str(path)!r}, Domain.from_dict({{n: {size} for n in names}}))
        s = WorkloadStats.of(w)
        assert s.n_queries == {size ** 4} and not s.duplicates
        c = workload_cost(w, time_limit=60)
        assert c.weighted.exact and c.weighted.bound == 1.0
        print(PEAK)
    """)


def test_marginal_cell_lines_load_check_and_overlap(tmp_path: Path) -> None:
    """The fast variant of the test below (the same program, in this process): 8⁴ = 4,096
    marginal-cell lines parse, have no duplicates, and their overlap is recovered exactly
    (γ = 1)."""
    code = _cell_lines_code(tmp_path / "cells.sql", 8).replace("print(PEAK)", "")
    exec(compile(code, "cell_lines", "exec"), {})


@pytest.mark.slow
def test_a_million_cell_lines_load_check_and_overlap_in_bounded_memory(tmp_path: Path) -> None:
    """32⁴ = 1,048,576 marginal-cell lines (77 MB): parse, statistics and the overlap (structure
    recovered: exact γ = 1) under 1.5 GiB peak."""
    peak_kib = int(_child(_cell_lines_code(tmp_path / "cells.sql", 32)).split()[-1])
    assert peak_kib < 1.5 * 2**20, f"peak {peak_kib / 1024:.0f} MiB"


# -- allocation (cutting planes) stopped by its time limit ---------------------------------------


def test_allocation_stopped_at_once_still_meets_the_budget() -> None:
    """Cutting planes and every overlap call get (almost) no time: the parameters still satisfy
    Σ_{q∈I(x)} h(p_q) ≤ B at every row x, checked by enumerating the rows."""
    from tessera.accounting import Guarantee
    from tessera.calibration import allocate, overlap_from_workload

    rng = np.random.default_rng(16)
    checked = 0
    for case in range(60):
        dom, queries, _ = random_case(rng, max_queries=8)
        if not queries:
            continue
        wl = Workload.of(dom, queries, [f"q{i}" for i in range(len(queries))])  # may repeat
        importance = rng.uniform(0.5, 4.0, len(queries))
        target = Guarantee.pure(1.0) if case % 2 else Guarantee.zcdp(0.5)  # h(ε) = ε, h(ρ) = ρ
        oracle = overlap_from_workload(wl, time_limit=1e-9, separation_time_limit=1e-9)
        a = allocate(len(queries), target, importance=importance, overlap=oracle,
                     time_limit=1e-9, max_rounds=2)
        worst = points_max_score(dom, queries, np.asarray(a.parameters))[0]
        assert worst <= a.budget * (1 + 1e-9), (case, worst, a.budget, a.method)
        checked += 1
    assert checked > 40


def test_scales_by_name_of_too_many_queries_are_refused() -> None:
    from tessera.calibration import cost

    dom = _binary(12)
    w = Workload.of_families(dom, k_way_marginals(dom, 4, None, 1.0))  # 495 × 16 cells
    c = workload_cost(w)
    assert len(c.to_dict(1.0)["scales"]) == 7_920
    small = cost.SCALES_MAX_QUERIES
    try:
        cost.SCALES_MAX_QUERIES = 1_000
        with pytest.raises(ResourceError) as e:
            c.to_dict(1.0)
    finally:
        cost.SCALES_MAX_QUERIES = small
    assert str(e.value).startswith("per-query scales by name would list 7,920 queries, above "
                                   "the limit of 1,000 (hint: drop --budget")


# -- PLD composition of many copies --------------------------------------------------------------


def test_composition_of_a_million_copies_is_bounded_or_refused() -> None:
    from tessera.accounting import pld
    from tessera.accounting.composition import PLD_MAX_COPIES, homogeneous_overlap
    from tessera.accounting.tradeoff import GaussianDP
    from tessera.calibration.comparison import compare_composition

    # Laplace: pure ε·k on both sides, no PLD of 10⁶ copies (it would take tens of GiB)
    cmp = compare_composition("laplace", 0.1, 1_000_000, 418_475)
    assert len(cmp.sequential.guarantees) == len(cmp.overlap.guarantees) == 1
    assert cmp.sequential.guarantees[0].epsilon == pytest.approx(100_000.0)
    assert cmp.overlap.guarantees[0].epsilon == pytest.approx(41_847.5)
    # Gaussian: closed form at any size
    assert homogeneous_overlap(GaussianDP(0.01), 10**8) == GaussianDP(0.01 * 10**4)
    # other mechanisms: refused before composing
    with pytest.raises(ResourceError) as e:
        compare_composition("discrete_gaussian", 0.5, 1_000_000, 20_000)
    assert str(e.value) == (
        f"composing 20,000 copies by privacy-loss distributions: above the limit of "
        f"{PLD_MAX_COPIES:,} copies (memory grows with the copies) (hint: Gaussian noise "
        "composes in closed form (GDP, zCDP); pure ε·k always holds for Laplace noise)")
    with pytest.raises(ResourceError, match="composing 10,001 copies"):
        homogeneous_overlap(pld.MECHANISMS["laplace"](10.0), PLD_MAX_COPIES + 1)


def test_pld_allocation_refuses_too_many_copies_before_composing() -> None:
    from tessera.accounting import Guarantee
    from tessera.calibration import allocate

    with pytest.raises(ResourceError, match="composing 20,000 copies by privacy-loss"):
        allocate(20_000, Guarantee.approx(1.0, 1e-6), via="pld", mechanism="laplace")


def test_a_release_of_too_many_cells_is_refused_before_the_plan() -> None:
    from tessera.release.budget import Budget
    from tessera.release.plan import noise_plan

    dom = _binary(20)
    w = Workload.of_families(dom, k_way_marginals(dom, 7, None, 1.0))  # 9,922,560 cells
    with pytest.raises(ResourceError) as e:
        noise_plan(w, Budget.of(epsilon=1.0), max_queries=1_000_000)
    assert str(e.value) == (
        "a release of 9,922,560 queries, above the limit of 1,000,000 (hint: answer fewer "
        "families per release (the ledger composes releases), or raise the limit: "
        "noise_plan(..., max_queries=N))")


def test_consistency_past_its_time_limit_leaves_the_answers_as_released() -> None:
    from tessera.release.consistency import consistent_answers

    dom = Domain.from_dict({"a": 4, "b": 3})
    wl = Workload.from_sql(["a <= 1", "a >= 2", "b = 0", "a <= 1 AND b = 0", "a = 3"], dom)
    noisy = np.array([10.0, 5.0, 7.0, 3.0, 2.0])
    variances = np.ones(5)
    assert consistent_answers(wl, noisy, variances).applied
    late = consistent_answers(wl, noisy, variances, time_limit=-1.0)
    assert not late.applied
    assert np.array_equal(late.answers, noisy)
    assert late.note.startswith("consistency not applied: time limit -1 s reached building the "
                                "design (")


def test_a_yaml_workload_above_the_size_limit_is_refused_before_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tessera.workload.files as workload_files

    dom = Domain.from_dict({"a": 4})
    path = tmp_path / "w.yaml"
    path.write_text("queries:\n" + "".join(f"  - where: a = {i % 4}\n" for i in range(200)))
    with pytest.warns(QueryWarning, match=RENAMED):  # 4 clauses, 200 lines
        assert len(Workload.load(path, dom)) == 200
    monkeypatch.setattr(workload_files, "YAML_MAX_BYTES", 1_000)
    with pytest.raises(ResourceError) as e:
        Workload.load(path, dom)
    assert str(e.value) == (
        f"{path}: a YAML workload of {path.stat().st_size:,} bytes, above the limit of 1,000 "
        "(the YAML parser keeps ~35 bytes a byte) (hint: write the queries as JSON (same keys) "
        "or as text lines, and families compactly (marginals: [{all: k}]))")
    json_path = tmp_path / "w.json"  # JSON: no size limit
    json_path.write_text(json.dumps({"queries": [{"where": f"a = {i % 4}"} for i in range(200)]}))
    with pytest.warns(QueryWarning, match=RENAMED):
        assert len(Workload.load(json_path, dom)) == 200
