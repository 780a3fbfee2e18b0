"""``tessera answer --estimate adaptive`` on predicate workloads: the cost stays that of the
synthesizer (:mod:`tessera.synth.query_reads`; docs/theory.md §10.5). Counted, not timed (the
times are in bench/bench_model_route.py).

Six attributes of 3–5 codes and 60 random conjunctions of 1–3 attributes (many outside every
measured scope and clique):

* the run plans **no** engine pass (neither the selection's answerability constraint nor the
  answers: :meth:`GibbsModel.plan_of` is never called) and the answers read one marginal per
  distinct scope — and equal brute force over the 3,600 points of the domain;
* planted bug — the scope reads switched off (every query outside a clique read by an engine
  pass, as before): the same seeded run plans engine passes, so the count can fail;
* :class:`ScopeReads` reads each distinct scope once, however many queries share it, and agrees
  with one query at a time;
* the cost estimate before the charge: none for such a workload; a workload whose queries need
  engine passes is refused with the estimate and the cheaper route unless accepted.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

import tessera.estimation.tree_marginals as tree_marginals
import tessera.synth.query_reads as query_reads
from tessera.engine.factors import scope
from tessera.engine.junction import junction_cliques, junction_tree
from tessera.engine.model import GibbsModel
from tessera.errors import ResourceError
from tessera.estimation.maxent import FitResult, ScopeModel
from tessera.release import Budget
from tessera.routes.adaptive import answer_adaptive, route_cost
from tessera.schema.domain import Domain
from tessera.synth.query_reads import ScopeReads, readable_scopes, tree_readable
from tessera.synth.sensitive import Evaluator, query_functions
from tessera.workload.builders import random_workload
from tessera.workload.workload import Workload

SIZES = [3, 4, 5, 3, 4, 5]


@pytest.fixture(scope="module")
def case() -> tuple[Workload, np.ndarray]:
    dom = Domain.from_dict({f"a{i}": s for i, s in enumerate(SIZES)})
    w = random_workload(dom, 60, seed=3)
    rng = np.random.default_rng(0)
    z = rng.integers(0, 3, 3000)  # correlated: the selection measures two- and three-way scopes
    codes = np.stack([np.where(rng.random(3000) < 0.6, z % s, rng.integers(0, s, 3000))
                      for s in SIZES], axis=1)
    return w, codes


class Plans:
    """Counts the engine's plans (every engine pass and every answerability check plans)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = GibbsModel.plan_of

        def counted(*args: object, **kwargs: object) -> object:
            self.calls += 1
            return real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(GibbsModel, "plan_of", staticmethod(counted))


def engine_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every query outside a clique read by an engine pass: no scope read (one cell at most)
    and no tree product of more than one variable (no evidence pass, no tree walk)."""
    monkeypatch.setattr(query_reads, "MAX_READ_CELLS", 1)
    monkeypatch.setattr(tree_marginals, "MAX_PRODUCT_VARIABLES", 1)


def _brute_force(w: Workload, model: ScopeModel, theta: np.ndarray) -> np.ndarray:
    joint = model.joint(theta, w.domain.size)
    assert joint is not None
    points = np.array(list(itertools.product(*(range(s) for s in SIZES))), dtype=np.int64)
    functions, _ = query_functions(w.domain, w)
    return Evaluator(w.domain, functions).matrix(points).astype(np.float64) @ joint.ravel()


def test_narrow_queries_plan_no_engine_pass(case: tuple[Workload, np.ndarray],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    w, codes = case
    plans = Plans(monkeypatch)
    rel = answer_adaptive(codes, w, Budget.of(rho=0.2), seed=0, prior_scale=0.0)
    assert plans.calls == 0
    result = rel.fitted.result
    # some queries lie in no measured scope: they were read from the clique tree
    measured = [frozenset(s) for s in result.model.scopes]
    outside = [f for f in query_functions(w.domain, w)[0]
               if not any(frozenset(scope(w.domain, f)) <= m for m in measured)]
    assert outside
    want = result.total * _brute_force(w, result.model, result.fit.theta)
    np.testing.assert_allclose(rel.answers, want, rtol=1e-9, atol=1e-7)


def test_planted_bug_engine_reads_plan_passes(case: tuple[Workload, np.ndarray],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The scope reads off (queries over more than one cell go to engine passes; no evidence
    pass): the count above sees the plans."""
    w, codes = case
    engine_reads(monkeypatch)
    plans = Plans(monkeypatch)
    answer_adaptive(codes, w, Budget.of(rho=0.2), seed=0, accept_cost=True,
                    prior_scale=0.0)
    assert plans.calls > 0


@pytest.mark.parametrize("messages", [1 << 24, 1])
def test_one_marginal_per_distinct_scope(case: tuple[Workload, np.ndarray], messages: int,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Each distinct scope read once — its marginal, or (the tree's messages limited to one
    cell) its conjunctions by evidence passes — equal to brute force and to one query at a
    time."""
    monkeypatch.setattr(tree_marginals, "MAX_MESSAGE_CELLS", messages)
    w, _ = case
    dom = w.domain
    model = ScopeModel(dom, [(0,), (1,), (2,), (3,), (4,), (5,), (0, 1), (1, 2, 3), (3, 4)])
    theta = np.random.default_rng(1).normal(0.0, 0.5, model.n_parameters)
    fitted = FitResult(theta, model.marginals(theta), 0.0, 1.0, 0, 0)
    functions, _ = query_functions(dom, w)
    scopes = [scope(dom, f) for f in functions]
    reads = ScopeReads(model, fitted, model.clique_tree(theta))
    got, rest = reads.probabilities(functions, scopes)
    assert rest == [] and reads.marginals_read + reads.evidence_groups == len(set(scopes)) \
        < len(functions)
    assert (reads.evidence_groups > 0) == (messages == 1)
    np.testing.assert_allclose(got, _brute_force(w, model, theta), rtol=1e-10, atol=1e-12)
    one = [ScopeReads(model, fitted, model.clique_tree(theta)).probabilities([f], [s])[0][0]
           for f, s in zip(functions, scopes)]
    np.testing.assert_allclose(got, one, rtol=1e-12, atol=1e-15)


def test_no_cost_warning_for_narrow_queries(case: tuple[Workload, np.ndarray]) -> None:
    w, _ = case
    cost = route_cost(w)
    assert cost.engine_queries == 0 and not cost.expensive


def test_engine_read_workloads_are_refused_with_the_estimate(
        case: tuple[Workload, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    w, codes = case
    engine_reads(monkeypatch)
    cost = route_cost(w)
    assert cost.engine_queries > 0 and cost.expensive
    with pytest.raises(ResourceError, match="--estimate gls") as e:
        answer_adaptive(codes, w, Budget.of(rho=0.2), seed=0, prior_scale=0.0)
    assert "--accept-cost" in (e.value.hint or "") and "nothing was charged" in e.value.message


@pytest.mark.parametrize("seed", range(5))
def test_junction_cliques_is_the_compiled_trees_structure(seed: int) -> None:
    """The answerability constraint's tree (no table) is the one the model compiles."""
    rng = np.random.default_rng(seed)
    sizes = [int(s) for s in rng.integers(2, 5, 7)]
    scopes = [tuple(sorted(int(a) for a in rng.choice(7, int(rng.integers(1, 4)),
                                                      replace=False))) for _ in range(6)]
    tree = junction_tree(sizes, scopes)
    cliques, parents = junction_cliques(sizes, scopes)
    assert cliques == [tuple(c) for c in tree.cliques[1:]]
    assert parents == [tree.clique_parent[k] - 1 for k in range(1, len(tree.cliques))]


@pytest.mark.parametrize("messages", [1, 16, 200, 1 << 24])
def test_readable_scopes_is_scope_reads_verdict(messages: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The constraint's vectorised verdict (containment, the separator bound, the walk) is the
    reads' own, scope by scope, on random trees — with the tree's message limit at times tiny,
    so the bound fails and the walk decides. Planted bug caught: the bound over the separators
    without the scope's own cells (the last message, S = ∅) fails this test."""
    monkeypatch.setattr(tree_marginals, "MAX_MESSAGE_CELLS", messages)
    for seed in range(40):
        rng = np.random.default_rng(seed)
        d = 7
        dom = Domain.from_dict({f"a{i}": int(rng.integers(2, 6)) for i in range(d)})
        scopes = [tuple(sorted(int(a) for a in rng.choice(d, int(rng.integers(1, 4)),
                                                          replace=False))) for _ in range(5)]
        cliques, parents = junction_cliques(dom.sizes, scopes)
        asked = [tuple(sorted(int(a) for a in rng.choice(d, int(rng.integers(0, 5)),
                                                         replace=False))) for _ in range(30)]
        got = readable_scopes(dom, asked, cliques, parents)
        tree = [(c, None) for c in cliques]
        want = [any(set(s) <= set(c) for c in cliques) or tree_readable(dom, s, tree, parents)
                for s in asked]
        assert got.tolist() == want, seed


def test_cli_says_the_cost_and_refuses_without_accept_cost(
        case: tuple[Workload, np.ndarray], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI prints the estimate before the run; an expensive workload is refused before
    anything is read or charged, naming the cheaper route and the option."""
    import pandas as pd
    from typer.testing import CliRunner

    from tessera.cli.main import app

    w, codes = case
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schema.json").write_text(
        "{" + ", ".join(f'"a{i}": {s}' for i, s in enumerate(SIZES)) + "}")
    (tmp_path / "w.sql").write_text("".join(f"q{n}: {q.to_sql(w.domain)}\n"
                                            for n, q in enumerate(w.queries)))
    pd.DataFrame(codes, columns=[f"a{i}" for i in range(6)]).to_csv("d.csv", index=False)
    base = ["answer", "d.csv", "w.sql", "-s", "schema.json", "--rho", "0.2", "--estimate",
            "adaptive", "--seed", "0"]
    r = CliRunner().invoke(app, base)
    assert r.exit_code == 0, r.output
    assert "no engine pass" in r.output
    engine_reads(monkeypatch)
    r = CliRunner().invoke(app, base)
    assert r.exit_code != 0 and "--estimate gls" in r.output and "--accept-cost" in r.output
    assert "Traceback" not in r.output
    r = CliRunner().invoke(app, ["answer", "d.csv", "w.sql", "-s", "schema.json", "-e", "1",
                                 "--accept-cost"])
    assert r.exit_code != 0 and "goes with --estimate adaptive" in r.output
