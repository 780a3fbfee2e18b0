"""``tessera answer --estimate adaptive``: the selection never grows the model past what the
answers need (docs/theory.md §10.5, :mod:`tessera.synth.answerable`).

Six attributes of 4 values, the 15 two-way marginals and a Boolean clause over all six
(``wide``: 4,096 cells, over ``max_cells`` = 16; with the scope reads limited to 16 cells
(:data:`tessera.synth.query_reads.MAX_READ_CELLS`, fixture ``engine_reads``) it is read by an
engine pass, as a query over more than 2^24 cells would be). Under an
engine memory limit of 263,000 bytes its pass fits beside the one-way marginals (compiling its
junction tree 261,696 bytes) but not beside some two-way selections (264,960 bytes to compile
with (a0, a1) alone; 142,208 with (a0, a3), whose attributes lie in one of the clause's
conjunctions; far more once the clause itself is measured):

* with the constraint the run completes, every model the rounds built leaves the real answer
  pass within the limit (checked by running it: :func:`added_query_probabilities`), the answers
  equal brute force over the 4,096 points, and the record says what the constraint withheld;
* planted bug — the constraint not applied: the same seeded run fails *after* the charge
  (the ledger keeps an aborted charge), so the test that it completes can fail;
* without ``answer_memory`` the synthesizer never builds the constraint (its cost and its
  outputs are those of the method alone);
* families (below ``family_case``): a family read only through the model grown by its scope —
  without the family check the run charges and then fails; with it the run withholds the
  selection that would break it and delivers the brute-force answers; a family no model can
  read is refused before the charge.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

import tessera.estimation.tree_marginals as tree_marginals
import tessera.synth.answerable as answerable
import tessera.synth.query_reads as query_reads
from tessera.errors import ResourceError, TesseraError
from tessera.estimation.maxent import ScopeModel, added_query_probabilities
from tessera.release import Budget, Ledger
from tessera.routes.adaptive import answer_adaptive, check_workload
from tessera.schema.domain import Domain
from tessera.synth.model_view import model_structure
from tessera.synth.sensitive import Evaluator, query_functions
from tessera.synth.synthesizer import Synthesizer
from tessera.workload.families import Partition
from tessera.workload.workload import Workload

LIMIT = 263_000
CLAUSE = "(a0 = 1 AND a3 = 1) OR (a1 = 1 AND a4 = 1) OR (a2 = 1 AND a5 = 1)"
#: The planted-bug runs below need a seeded selection that, unconstrained, grows a model the
#: answers cannot be read from: AIM's schedule (annealing step 2, measurement share 0.9) gives
#: one at seed 0.
OPTIONS = {"max_cells": 16, "anneal": 2, "measure_fraction": 0.9}


@pytest.fixture(autouse=True)
def engine_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries over more than 16 cells are read by an engine pass, not through their scope's
    marginal (the wide clause's 4,096 cells stand for a scope past the real limit)."""
    monkeypatch.setattr(query_reads, "MAX_READ_CELLS", 16)


@pytest.fixture(scope="module")
def case() -> tuple[Workload, np.ndarray]:
    dom = Domain.from_dict({f"a{i}": 4 for i in range(6)})
    families = [Partition.marginal(dom, [f"a{i}", f"a{j}"])
                for i, j in itertools.combinations(range(6), 2)]
    w = Workload.of(dom, list(Workload.from_sql([CLAUSE], dom).queries), names=["wide"],
                    partitions=families)
    rng = np.random.default_rng(0)
    z = rng.integers(0, 4, 2000)  # correlated attributes: the selection wants two-way scopes
    codes = np.stack([np.where(rng.random(2000) < 0.7, z, rng.integers(0, 4, 2000))
                      for _ in range(6)], axis=1)
    return w, codes


def _pass_fits(w: Workload, keys: list[tuple[tuple[int, ...], int | None]]) -> bool:
    """Whether the real answer pass of ``wide`` runs beside the model of these measurements."""
    scopes, queries = model_structure(keys)
    model = ScopeModel(w.domain, scopes, [(j, w.queries[j]) for j in queries])
    try:
        added_query_probabilities(model, model.zero(), [w.queries[0]], memory_limit=LIMIT)
    except ResourceError:
        return False
    return True


def test_the_limit_breaks_some_two_way_selections(case: tuple[Workload, np.ndarray]) -> None:
    """The setting is the one described: the least model fits, some single pairs do not."""
    w, _ = case
    least = [((a,), None) for a in range(6)]
    assert _pass_fits(w, least)
    check_workload(w, 16, LIMIT)  # refused before the charge otherwise
    broken = [p for p in itertools.combinations(range(6), 2)
              if not _pass_fits(w, [*least, (p, None)])]
    assert (0, 1) in broken and (0, 3) not in broken and 0 < len(broken) < 15


@pytest.mark.parametrize("seed", [0, 1])
def test_the_run_keeps_the_wide_query_answerable(case: tuple[Workload, np.ndarray],
                                                 seed: int, tmp_path: Path) -> None:
    w, codes = case
    book = Ledger.init(tmp_path / "L.db", total=10.0, definition="zcdp",
                         neighbours="add-remove", domain=w.domain, dataset="d")
    rel = answer_adaptive(codes, w, Budget.of(rho=1.0), seed=seed, memory_limit=LIMIT,
                          ledger=book, **OPTIONS)
    result = rel.fitted.result
    keys = [(m.scope, m.query) for m in result.measurements]
    # every model the rounds built (each prefix of the measurements) keeps the real pass in
    for k in range(6, len(keys) + 1):
        assert _pass_fits(w, keys[:k]), keys[:k]
    # the answers are the fitted model's, exactly (brute force over the 4,096 points)
    joint = result.model.joint(result.fit.theta, w.domain.size)
    assert joint is not None
    points = np.array(list(itertools.product(range(4), repeat=6)), dtype=np.int64)
    functions, _ = query_functions(w.domain, w)
    want = result.total * (Evaluator(w.domain, functions).matrix(points).astype(np.float64)
                           @ joint.ravel())
    np.testing.assert_allclose(rel.answers, want, rtol=1e-9, atol=1e-7)
    # the record says the constraint ran and what it withheld
    params = rel.certificate["parameters"]
    assert params["answer_memory"] == LIMIT and params["answerable"] == 1
    assert result.record.withheld > 0 and sum(params["withheld"].values()) == \
        result.record.withheld
    assert "answerable within 263,000 bytes" in result.record.describe()
    assert [c.status for c in book.summary().releases] == ["released"]


def test_planted_bug_constraint_not_applied_fails_after_the_charge(
        case: tuple[Workload, np.ndarray], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    w, codes = case
    monkeypatch.setattr(answerable.Answerable, "offered",
                        lambda self, offered, cands, keys: list(offered))
    book = Ledger.init(tmp_path / "L.db", total=10.0, definition="zcdp",
                         neighbours="add-remove", domain=w.domain, dataset="d")
    with pytest.raises(TesseraError, match="internal error.*query 'wide'"):
        answer_adaptive(codes, w, Budget.of(rho=1.0), seed=0, memory_limit=LIMIT,
                        ledger=book, **OPTIONS)
    s = book.summary()
    assert [c.status for c in s.releases] == ["aborted"] and s.spent == pytest.approx(1.0)


def test_planted_bug_without_the_internal_check_the_answers_fail(
        case: tuple[Workload, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the filter nor the run's own check: the answer pass itself is refused (the
    route reports it as an internal error, after the charge)."""
    w, codes = case
    monkeypatch.setattr(answerable.Answerable, "offered",
                        lambda self, offered, cands, keys: list(offered))
    monkeypatch.setattr(answerable.Answerable, "confirm", lambda *a, **k: None)
    with pytest.raises(TesseraError, match="internal error: the answers did not fit"):
        answer_adaptive(codes, w, Budget.of(rho=1.0), seed=0, memory_limit=LIMIT, **OPTIONS)


def test_without_answer_memory_nothing_of_it_is_built(case: tuple[Workload, np.ndarray],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    w, codes = case

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the constraint was built without answer_memory")

    monkeypatch.setattr(answerable.Answerable, "__init__", refuse)
    fitted = Synthesizer("adaptive", rows=0, **OPTIONS).fit(codes, w, Budget.of(rho=1.0),
                                                            seed=0)
    p = fitted.result.record.parameters
    assert p.answer_memory is None and fitted.result.record.withheld == 0


def test_a_bad_limit_is_refused_before_anything(case: tuple[Workload, np.ndarray]) -> None:
    w, codes = case
    with pytest.raises(TesseraError, match="answer_memory must be a positive integer"):
        Synthesizer("adaptive", answer_memory=0).fit(codes, w, Budget.of(rho=1.0), seed=0)
    with pytest.raises(TesseraError, match="sets answer_memory itself"):
        answer_adaptive(codes, w, Budget.of(rho=1.0), seed=0, answer_memory=LIMIT)
    with pytest.raises(ResourceError, match="query 'wide'.*nothing was charged"):
        answer_adaptive(codes, w, Budget.of(rho=1.0), seed=0, memory_limit=10_000, **OPTIONS)


# -- families (the hole closed: a family read only through the model grown by its scope) ------
#
# a0 and a5 have 8 codes, a1–a4 four; the families are the path a0–a1–…–a5 and F = (a0, a5)
# (64 cells, over max_cells = 32: never measured). The clique tree's message limit is set to
# one cell, so a family in no measured scope and no clique is read from the model grown by its
# scope. At 64,000 bytes that grown tree fits beside the one-way marginals (17,040 bytes to
# compile) and beside any four pairs of the path (≤ 38,480), not beside all five (143,440: the
# grown graph is a 6-cycle).

FAMILY_LIMIT = 64_000


@pytest.fixture(scope="module")
def family_case() -> tuple[Workload, np.ndarray]:
    dom = Domain.from_dict({f"a{i}": s for i, s in enumerate([8, 4, 4, 4, 4, 8])})
    families = [Partition.marginal(dom, [f"a{i}", f"a{i + 1}"]) for i in range(5)]
    w = Workload.of(dom, [], partitions=[*families, Partition.marginal(dom, ["a0", "a5"])])
    rng = np.random.default_rng(0)
    z = rng.integers(0, 4, 2000)  # correlated: the selection wants the pairs of the path
    codes = np.stack([np.where(rng.random(2000) < 0.7, z, rng.integers(0, 4, 2000))
                      for _ in range(6)], axis=1)
    return w, codes


@pytest.fixture
def tiny_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tree_marginals, "MAX_MESSAGE_CELLS", 1)


def test_families_without_the_check_fail_after_the_charge(
        family_case: tuple[Workload, np.ndarray], tiny_messages: None, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted bug — the families not checked (as before): the run measures the whole path,
    and the family (a0, a5) cannot be read after the charge."""
    w, codes = family_case
    monkeypatch.setattr(answerable.Answerable, "_family_refusal", lambda self, s: None)
    book = Ledger.init(tmp_path / "L.db", total=10.0, definition="zcdp",
                       neighbours="add-remove", domain=w.domain, dataset="d")
    with pytest.raises(TesseraError, match=r"internal error.*family 'marginal\(a0,a5\)'"):
        answer_adaptive(codes, w, Budget.of(rho=1.0), seed=0, memory_limit=FAMILY_LIMIT,
                        ledger=book, max_cells=32)
    s = book.summary()
    assert [c.status for c in s.releases] == ["aborted"] and s.spent == pytest.approx(1.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_families_are_kept_answerable(family_case: tuple[Workload, np.ndarray],
                                      tiny_messages: None, seed: int, tmp_path: Path) -> None:
    w, codes = family_case
    book = Ledger.init(tmp_path / "L.db", total=10.0, definition="zcdp",
                       neighbours="add-remove", domain=w.domain, dataset="d")
    rel = answer_adaptive(codes, w, Budget.of(rho=1.0), seed=seed, memory_limit=FAMILY_LIMIT,
                          ledger=book, max_cells=32)
    result = rel.fitted.result
    assert result.record.withheld > 0  # the constraint bound: some pair was withheld
    keys = [(m.scope, m.query) for m in result.measurements]
    assert answerable.Answerable(w, FAMILY_LIMIT).refusal(model_structure(keys)) is None
    # the answers are the fitted model's, exactly (brute force over the 16,384 points)
    joint = result.model.joint(result.fit.theta, w.domain.size)
    assert joint is not None
    want = []
    for p in w.partitions:
        axes = [w.domain.index(a) for a in p.attributes]
        want.append(joint.sum(axis=tuple(a for a in range(6) if a not in axes)).ravel())
    np.testing.assert_allclose(rel.answers, result.total * np.concatenate(want),
                               rtol=1e-9, atol=1e-7)
    assert [c.status for c in book.summary().releases] == ["released"]


def test_a_family_no_model_can_read_is_refused_before_the_charge(
        family_case: tuple[Workload, np.ndarray], tiny_messages: None, tmp_path: Path) -> None:
    w, codes = family_case
    book = Ledger.init(tmp_path / "L.db", total=10.0, definition="zcdp",
                       neighbours="add-remove", domain=w.domain, dataset="d")
    with pytest.raises(ResourceError, match="family 'marginal.*nothing was charged"):
        answer_adaptive(codes, w, Budget.of(rho=1.0), seed=0, memory_limit=1_000,
                        ledger=book, max_cells=32)
    summary = book.summary()
    assert summary.spent == 0 and not summary.releases
