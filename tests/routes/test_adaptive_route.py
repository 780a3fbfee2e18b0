"""Issue 18 item 3, the adaptive route: ``tessera answer --estimate adaptive`` /
:func:`tessera.answer_adaptive`.

* the model's answers equal brute-force sums of the fitted model's joint distribution on tiny
  domains (hypothesis; families with and without groups, predicates, a BDD query; the path that
  adds an unmeasured scope to the junction tree, forced by hand);
* end to end on a small schema: seeded output says NOT PRIVATE; the ledger is charged once,
  before any file is written; a failing output path charges nothing; a failure while writing
  marks the charge aborted and leaves no file; ``tessera verify`` accepts the untouched
  certificate and rejects an edited one; clear errors for what the route cannot take.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import tessera.routes.model_files as model_files
from tessera.cli.main import app
from tessera.engine.bdd import BooleanQuery
from tessera.errors import QueryError, TesseraError
from tessera.estimation.maxent import GroupMeasurement, ScopeModel, fit
from tessera.estimation.tree_marginals import tree_marginal
from tessera.release import Budget, Ledger, answer
from tessera.routes.adaptive import MAX_SCOPE_CELLS, answer_adaptive
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.software import versions
from tessera.synth.adaptive_record import model_counts
from tessera.synth.model_answers import scope_marginal
from tessera.synth.sensitive import Evaluator, query_functions
from tessera.synth.synthesizer import Synthesizer
from tessera.synth.verify import verify_record
from tessera.workload.families import Partition, k_way_marginals
from tessera.workload.workload import Workload

SCHEMA = ("attributes:\n  age: {type: integer, min: 0, max: 9}\n"
          "  sex: {type: categorical, values: [F, M]}\n")


# -- the model's answers against brute force ----------------------------------------------------


def _points(dom: Domain) -> np.ndarray:
    return np.array(list(itertools.product(*(range(n) for n in dom.sizes))), dtype=np.int64)


def _brute_force(result, workload: Workload) -> np.ndarray:  # type: ignore[no-untyped-def]
    """N̂ Σ_x P_θ(x) q(x) over every point x of the domain, every query of the workload."""
    dom = workload.domain
    joint = result.model.joint(result.fit.theta, dom.size)
    assert joint is not None
    functions, _ = query_functions(dom, workload)
    table = Evaluator(dom, functions).matrix(_points(dom)).astype(np.float64)
    return result.total * (table @ joint.ravel())


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(2, 3), min_size=2, max_size=4), seed=st.integers(0, 10**6),
       grouped=st.booleans())
def test_model_answers_equal_brute_force(sizes: list[int], seed: int, grouped: bool) -> None:
    dom = Domain.from_dict({f"x{i}": n for i, n in enumerate(sizes)})
    rng = np.random.default_rng(seed)
    codes = np.stack([rng.integers(0, n, 200) for n in sizes], axis=1)
    codes[:, 1] = np.where(rng.random(200) < 0.7, codes[:, 0] % sizes[1], codes[:, 1])
    fams = list(k_way_marginals(dom, 2))
    if grouped:  # x0's codes in two groups, the last code in none
        fams.append(Partition.grid(dom, {"x0": [IntervalSet.points([0]),
                                                IntervalSet.points(list(range(1, sizes[0] - 1))
                                                                   or [1])],
                                         "x1": None}, name="grouped"))
    preds = Workload.from_sql(["x0 = 1 AND x1 <= 0", "x0 >= 1 OR x1 = 0"], dom)
    w = Workload.of(dom, list(preds.queries), names=["p", "q"], partitions=fams)
    fitted = Synthesizer("adaptive", rows=0).fit(codes, w, Budget.of(rho=0.5), seed=seed)
    got = model_counts(fitted.result, w)
    want = _brute_force(fitted.result, w)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * fitted.result.total)


def test_unmeasured_scope_from_the_clique_tree_and_from_a_grown_tree() -> None:
    """A chain x0 — x1 — x2 measured as (x0, x1) and (x1, x2): (x0, x2) lies in no measured
    scope and in no clique; it is read from the clique tree (the product of the clique
    marginals summed over x1) and, without the tree, from the model with (x0, x2) added at
    θ = 0: both equal the joint's marginal."""
    dom = Domain.from_dict({"x0": 3, "x1": 2, "x2": 3})
    rng = np.random.default_rng(3)
    model = ScopeModel(dom, [(0, 1), (1, 2)])
    ms = [GroupMeasurement((0, 1), rng.integers(5, 40, 6).astype(float), 1.0),
          GroupMeasurement((1, 2), rng.integers(5, 40, 6).astype(float), 1.0)]
    res = fit(model, ms, 120.0, iterations=300)
    cliques = model.clique_marginals(res.theta)
    assert model.project(res.marginals, (0, 2)) is None
    assert cliques is not None and not any({0, 2} <= set(c) for c, _ in cliques)
    joint = model.joint(res.theta, dom.size)
    assert joint is not None
    want = joint.sum(axis=1).ravel()
    tree = model.clique_tree(res.theta)
    np.testing.assert_allclose(scope_marginal(model, res, (0, 2), tree), want, rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(scope_marginal(model, res, (0, 2), None), want, rtol=1e-10,
                               atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(2, 3), min_size=2, max_size=7),
       data=st.data(), seed=st.integers(0, 10**6))
def test_tree_marginal_equals_the_joint(sizes: list[int], data: st.DataObject,
                                        seed: int) -> None:
    """Random scopes (a forest with free variables as it happens), random θ: the marginal of
    every pair and triple from the clique tree equals the joint's (brute force)."""
    d = len(sizes)
    dom = Domain.from_dict({f"x{i}": n for i, n in enumerate(sizes)})
    pairs = list(itertools.combinations(range(d), 2))
    chosen = data.draw(st.lists(st.sampled_from(pairs), min_size=1, max_size=d, unique=True))
    model = ScopeModel(dom, chosen)
    theta = np.random.default_rng(seed).normal(0, 1.5, model.n_parameters)
    tree = model.clique_tree(theta)
    joint = model.joint(theta, dom.size)
    assert tree is not None and joint is not None
    for k in (1, 2, 3):
        for scope in itertools.combinations(range(d), k):
            rest = tuple(a for a in range(d) if a not in scope)
            want = joint.sum(axis=rest).ravel() if rest else joint.ravel()
            got = tree_marginal(tree[0], tree[1], dom.sizes, scope)
            assert got is not None
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_bdd_query_answered_from_the_model() -> None:
    from tessera.workload.bdd import bdd_manager

    dom = Domain.from_dict({"a": 2, "b": 2, "c": 2})
    bdd = bdd_manager(["a", "b", "c"])  # without dd's finaliser, which asserts at collection
    f = BooleanQuery(bdd, bdd.add_expr(r"(a /\ ~b) \/ c"))
    w = Workload.of(dom, [f], names=["f"], partitions=[Partition.marginal(dom, ["a", "b"])])
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 2, (300, 3))
    fitted = Synthesizer("adaptive", rows=0).fit(codes, w, Budget.of(rho=1.0), seed=2)
    np.testing.assert_allclose(model_counts(fitted.result, w),
                               _brute_force(fitted.result, w), rtol=1e-9, atol=1e-7)
    # and through the route, whose certificate names the workload (a BDD's canonical text)
    rel = answer_adaptive(codes, w, Budget.of(rho=1.0), seed=2)
    np.testing.assert_allclose(rel.answers, _brute_force(rel.fitted.result, w), rtol=1e-9,
                               atol=1e-7)
    assert verify_record(rel.certificate, w).differences == (
        "private: the run used seeded test randomness (NOT PRIVATE)",)
    # the hash names the function: the same function spelled otherwise hashes alike, another not
    from tessera.workload.canonical import workload_hash

    same = BooleanQuery(bdd, bdd.add_expr(r"c \/ (~b /\ a)"))
    other = BooleanQuery(bdd, bdd.add_expr(r"(a /\ b) \/ c"))

    def named(q: BooleanQuery) -> Workload:
        return Workload.of(dom, [q], names=["f"], partitions=list(w.partitions))

    assert workload_hash(named(same)) == workload_hash(w) != workload_hash(named(other))


# -- end to end ---------------------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text("a: age < 5\nb: sex = 'F'\nc: age >= 3 AND sex = 'M'\n")
    rng = np.random.default_rng(0)
    pd.DataFrame({"age": rng.integers(0, 10, 300),
                  "sex": rng.choice(["F", "M"], 300)}).to_csv(tmp_path / "d.csv", index=False)
    r = CliRunner().invoke(app, ["ledger", "init", "L.db", "-s", "schema.yaml",
                                 "--epsilon", "3"])
    assert r.exit_code == 0, r.output
    return tmp_path


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


def ledger_state(path: Path) -> tuple[float, list[str]]:
    s = Ledger.open(path).summary()
    return round(s.spent, 6), [c.status for c in s.releases]


ROUTE = ("answer", "d.csv", "w.sql", "-s", "schema.yaml", "-e", "1", "--estimate", "adaptive",
         "--ledger", "L.db")


def test_cli_end_to_end_seeded_says_not_private(files: Path) -> None:
    r = run(*ROUTE, "--seed", "4", "-o", "a.csv", "--certificate", "c.json")
    assert r.exit_code == 0, r.output
    assert "NOT PRIVATE" in r.output and "no proven interval" in r.output
    assert "Traceback" not in r.output
    lines = (files / "a.csv").read_text().splitlines()
    assert lines[0].startswith("# NOT PRIVATE")
    frame = pd.read_csv(files / "a.csv", comment="#")
    assert list(frame.columns) == ["query", "answer", "std_error", "ci95_low", "ci95_high"]
    assert list(frame["query"]) == ["a", "b", "c"]
    assert frame[["std_error", "ci95_low", "ci95_high"]].isna().all().all()
    assert (frame["answer"] >= 0).all()
    doc = json.loads((files / "c.json").read_text())
    assert doc["method"] == "adaptive" and doc["private"] is False
    assert doc["answers"]["interval"] is None and doc["answers"]["estimate"] == "adaptive model"
    assert doc["software"] == versions()  # Tessera, OpenDP, dp-accounting, Python
    names = {s["mechanism"]["name"] for s in doc["steps"]}
    assert any("Laplace" in n for n in names) and any("xponential" in n for n in names)
    assert ledger_state(files / "L.db") == (1.0, ["released"])
    # without -o: the answers on stdout as CSV, after the NOT PRIVATE line
    r = run(*ROUTE, "--seed", "4")
    assert r.exit_code == 0, r.output
    assert "# NOT PRIVATE" in r.stdout and "query,answer" in r.stdout.replace('"', "")


def test_ledger_charged_once_and_before_any_file(files: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[float, list[str]]] = []
    original = model_files.write_answers

    def spy(release, path):  # type: ignore[no-untyped-def]
        seen.append(ledger_state(files / "L.db"))  # what the ledger says while writing
        return original(release, path)

    monkeypatch.setattr(model_files, "write_answers", spy)
    w = Workload.load(files / "w.sql", Domain.load(files / "schema.yaml"))
    rel = answer_adaptive(files / "d.csv", w, Budget.of(epsilon=1.0), ledger=files / "L.db",
                          seed=1, output=files / "a.parquet", certificate=files / "c.json")
    assert len(seen) == 1 and seen[0][0] == 1.0 and seen[0][1] != ["released"], seen
    assert ledger_state(files / "L.db") == (1.0, ["released"])
    assert rel.charge is not None and rel.certificate["ledger"]["status"] == "released"
    import pyarrow.parquet as pq

    meta = pq.read_schema(files / "a.parquet").metadata
    assert b"no proven interval" in meta[b"tessera.estimate"]
    assert meta[b"tessera.private"] == b"false"


def test_failing_output_path_charges_nothing(files: Path) -> None:
    for extra in (("-o", "/nonexistent/dir/a.csv"), ("--certificate", "c.csv"),
                  ("-o", "a.csv", "--report", "r.html"), ("--consistency",)):
        r = run(*ROUTE, *extra)
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
        assert r.output.startswith("error:"), r.output
    assert ledger_state(files / "L.db") == (0.0, [])
    assert not any(p.suffix in (".csv", ".json", ".html") and p.name != "d.csv"
                   for p in files.iterdir())


def test_failure_while_writing_aborts_and_leaves_nothing(files: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(release, path):  # type: ignore[no-untyped-def]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(model_files, "write_answers", broken)
    w = Workload.load(files / "w.sql", Domain.load(files / "schema.yaml"))
    with pytest.raises(TesseraError, match="cannot write the answers"):
        answer_adaptive(files / "d.csv", w, Budget.of(epsilon=1.0), ledger=files / "L.db",
                        seed=1, output=files / "a.csv", certificate=files / "c.json")
    assert ledger_state(files / "L.db") == (1.0, ["aborted"])
    assert not (files / "a.csv").exists() and not (files / "c.json").exists()


def test_verify_accepts_untouched_and_rejects_edits(files: Path) -> None:
    r = run(*ROUTE, "-o", "a.csv", "--certificate", "c.json")  # private: verify takes it
    assert r.exit_code == 0, r.output
    r = run("verify", "c.json", "w.sql", "-s", "schema.yaml")
    assert r.exit_code == 0 and "verified" in r.output and "no proven interval" in r.output, \
        r.output
    doc = json.loads((files / "c.json").read_text())
    for edit in (lambda d: d["answers"].__setitem__("interval", 1.96),
                 lambda d: d["answers"].__setitem__("total", d["answers"]["total"] + 1),
                 lambda d: d["steps"][-1]["cost"].__setitem__("epsilon", 1e-9)):
        bad = json.loads(json.dumps(doc))
        edit(bad)
        (files / "bad.json").write_text(json.dumps(bad))
        r = run("verify", "bad.json", "w.sql", "-s", "schema.yaml")
        assert r.exit_code == 2 and "does NOT check out" in r.output, r.output


def test_the_route_leaves_tessera_answer_a_function() -> None:
    """Importing the route must not load ``tessera.release.answering`` as a side effect before
    the package's lazy export is read (the package attribute would become the module)."""
    import subprocess
    import sys

    # (the module is tessera.release.answering: importing it first, as demo/end_to_end.py
    # does, can no longer bind the package attribute ``answer`` to a module)
    code = ("import tessera.release.answering, tessera.demo.end_to_end; import tessera; "
            "tessera.answer_adaptive; import tessera.release as r; "
            "print(callable(tessera.answer), callable(r.answer))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["True", "True"], out


def test_clear_errors_for_what_the_route_cannot_take(files: Path) -> None:
    (files / "true.sql").write_text("n: TRUE\n")
    r = run("answer", "d.csv", "true.sql", "-s", "schema.yaml", "-e", "1", "--estimate",
            "adaptive", "--ledger", "L.db")
    assert r.exit_code == 2 and "nothing" in r.output and "Traceback" not in r.output, r.output
    big = Domain.from_dict({"x": 300, "y": 300, "z": 300})
    w = Workload.of_families(big, [Partition.marginal(big, ["x", "y", "z"])])
    assert w.n_queries > MAX_SCOPE_CELLS
    with pytest.raises(QueryError, match="adaptive route"):
        answer_adaptive(np.zeros((1, 3), dtype=np.int64), w, Budget.of(rho=1.0),
                        ledger=files / "L.db")
    with pytest.raises(TesseraError, match="answer_adaptive"):
        answer(files / "d.csv", Workload.load(files / "w.sql",
                                              Domain.load(files / "schema.yaml")),
               Budget.of(epsilon=1.0), estimate="adaptive")
    assert ledger_state(files / "L.db") == (0.0, [])
