"""The answerability constraint decides exactly what the answers do (docs/theory.md §10.5,
:mod:`tessera.synth.answerable`).

On random small structures (3–5 attributes of 2–4 codes; random measured scopes and, at times,
a measured wide query), workloads (none, or 1–3 conjunctions; 1–2 families) and tight engine memory
limits (log-uniform over 0.2–100 KB; the clique tree's message limit at times tiny, so that
families fall through to the grown model), :meth:`Answerable.refusal` says "answerable" iff
actually reading every answer from the real model of that structure succeeds — the query pass
(:meth:`tessera.synth.adaptive_record.AdaptiveResult.answers`) and the families
(:func:`tessera.synth.adaptive_record.model_counts`), run on a :class:`ScopeModel` of the
structure at a random θ. Planted bugs — the families not checked, the clique tree's limits
ignored, the query pass's halving replaced by one all-or-nothing plan — each disagree with the
real answers on some of the first 300 seeded cases, so the property can fail.
"""

from __future__ import annotations

import functools
import math
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera.estimation.tree_marginals as tree_marginals
import tessera.synth.answerable as answerable
from tessera.errors import ResourceError
from tessera.estimation.maxent import FitResult, ScopeModel
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.synth.adaptive_record import AdaptiveResult, model_counts
from tessera.synth.answerable import Answerable
from tessera.synth.model_view import model_structure
from tessera.workload.families import Partition
from tessera.workload.query import Query
from tessera.workload.workload import Workload

Case = tuple[Workload, tuple, int, int]


def case(seed: int) -> Case:
    """(workload, structure, memory limit, the clique tree's message limit)."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(3, 6))
    dom = Domain.from_dict({f"a{i}": int(rng.integers(2, 5)) for i in range(d)})
    queries = []
    for _ in range(int(rng.integers(1, 4)) if rng.random() < 0.6 else 0):
        attrs = sorted(rng.choice(d, int(rng.integers(2, min(d, 4) + 1)), replace=False))
        queries.append(Query.conjunction(dom, {
            dom.names[a]: IntervalSet.of([(0, int(rng.integers(1, dom.sizes[a])))])
            for a in attrs}))
    families = []
    for _ in range(int(rng.integers(1, 3))):
        attrs = sorted(rng.choice(d, int(rng.integers(2, min(d, 3) + 1)), replace=False))
        families.append(Partition.marginal(dom, [dom.names[a] for a in attrs]))
    w = Workload.of(dom, queries, names=[f"q{j}" for j in range(len(queries))],
                    partitions=families)
    keys: list[tuple[tuple[int, ...], int | None]] = [((a,), None) for a in range(d)]
    for _ in range(int(rng.integers(0, 4))):
        attrs = rng.choice(d, int(rng.integers(2, 4)), replace=False)
        keys.append((tuple(sorted(int(a) for a in attrs)), None))
    if queries and rng.random() < 0.3:
        keys.append(((), int(rng.integers(len(queries)))))
    limit = int(math.exp(rng.uniform(math.log(200), math.log(100_000))))
    messages = int(rng.choice([4, 16, 1 << 24]))
    return w, model_structure(keys), limit, messages


def delivered(w: Workload, structure: tuple, limit: int, seed: int) -> bool:
    """Whether every answer is read from the real model of ``structure`` at a random θ."""
    scopes, wide = structure
    model = ScopeModel(w.domain, scopes, [(j, w.queries[j]) for j in wide])
    theta = np.random.default_rng(seed).normal(0.0, 0.5, model.n_parameters)
    fitted = FitResult(theta, model.marginals(theta), 0.0, 1.0, 0, 0)
    # the fitted run, as far as model_counts reads it: the real answers of the real model
    run = types.SimpleNamespace(model=model, fit=fitted, total=1.0)
    run.answers = functools.partial(AdaptiveResult.answers, run)
    try:
        model_counts(run, w, memory_limit=limit)  # type: ignore[arg-type]
    except ResourceError:
        return False
    return True


def agrees(seed: int, keeper_type: type[Answerable] = Answerable) -> bool:
    w, structure, limit, messages = case(seed)
    saved = tree_marginals.MAX_MESSAGE_CELLS
    tree_marginals.MAX_MESSAGE_CELLS = messages
    try:
        said = keeper_type(w, limit).refusal(structure) is None
        return said == delivered(w, structure, limit, seed)
    finally:
        tree_marginals.MAX_MESSAGE_CELLS = saved


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_the_verdict_is_the_answers(seed: int) -> None:
    assert agrees(seed)


def test_both_verdicts_occur() -> None:
    """The cases exercise refusals of the query pass and of the families, and acceptances."""
    seen = {"yes": 0, "query": 0, "family": 0}
    for seed in range(200):
        w, structure, limit, messages = case(seed)
        saved = tree_marginals.MAX_MESSAGE_CELLS
        tree_marginals.MAX_MESSAGE_CELLS = messages
        try:
            r = Answerable(w, limit).refusal(structure)
        finally:
            tree_marginals.MAX_MESSAGE_CELLS = saved
        seen["yes" if r is None else "family" if "family" in r.message else "query"] += 1
    assert min(seen.values()) >= 5, seen


class NoFamilies(Answerable):  # planted: the families hole left open
    def _family_refusal(self, structure: tuple) -> ResourceError | None:
        return None


class NoTreeLimits(Answerable):  # planted: the clique tree taken as always readable
    def refusal(self, structure: tuple) -> ResourceError | None:
        feasible = answerable.tree_feasible
        answerable.tree_feasible = lambda *a, **k: True  # type: ignore[assignment]
        try:
            return super().refusal(structure)
        finally:
            answerable.tree_feasible = feasible


class AllOrNothing(Answerable):  # planted: no halving, one plan for every pending query
    def _query_refusal(self, structure: tuple) -> ResourceError | None:
        from tessera.engine.model import GibbsModel
        from tessera.estimation.maxent import gibbs_functions

        scopes, wide = structure
        rest = self.pending(structure)
        if not rest:
            return None
        dom = self.workload.domain
        functions = gibbs_functions(dom, scopes, [(j, self.workload.queries[j]) for j in wide])
        try:
            GibbsModel.plan_of(dom, [*functions, *(self.functions[j] for j in rest)],
                               memory_limit=self.memory_limit)
        except ResourceError as e:
            return e
        return None


@pytest.mark.parametrize("planted", [NoFamilies, NoTreeLimits, AllOrNothing])
def test_planted_bugs_are_caught(planted: type[Answerable]) -> None:
    assert not all(agrees(seed, planted) for seed in range(300)), planted.__name__
