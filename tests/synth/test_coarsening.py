"""Coarsened measurements of the adaptive synthesizer (tessera.synth.coarsening): the groups
and the sums against their definitions, the sensitivity of a coarsened marginal by brute force,
the maximum-entropy fit with coarsened measurements against the minimum over every
distribution, and runs whose coarsened measurements are re-derived from what they released."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from tessera.data.counts import count
from tessera.estimation.maxent import FitResult, GroupMeasurement, ScopeModel, fit
from tessera.mechanisms import NoiseSource
from tessera.schema.domain import Domain
from tessera.synth.accounting import Budget, prove
from tessera.synth.adaptive import adaptive
from tessera.synth.candidates import candidate_workload, candidates
from tessera.synth.coarsening import (
    Coarsened,
    CoarseSpace,
    one_way_counts,
    value_groups,
    value_runs,
)
from tessera.synth.schedule import Schedule, noise_sd, selection_sensitivity
from tessera.synth.sensitive import SensitiveCounts
from tessera.workload.families import k_way_marginals
from tessera.workload.workload import Workload


@given(st.lists(st.floats(-50, 500), min_size=1, max_size=12), st.floats(0, 300))
def test_value_groups_keep_the_clear_values_and_merge_the_rest(counts: list[float],
                                                               tau: float) -> None:
    g = value_groups(np.array(counts), tau)
    clear = [v for v, c in enumerate(counts) if c >= tau]
    rare = [v for v, c in enumerate(counts) if c < tau]
    if len(rare) < 2:
        assert g == tuple(range(len(counts)))
    else:
        assert [g[v] for v in clear] == list(range(len(clear)))
        assert {g[v] for v in rare} == {len(clear)}


@given(st.lists(st.floats(-50, 500), min_size=1, max_size=12), st.floats(0, 300))
def test_value_runs_are_intervals_closed_at_the_threshold(counts: list[float],
                                                          tau: float) -> None:
    g = value_runs(np.array(counts), tau)
    assert g[0] == 0 and all(b - a in (0, 1) for a, b in zip(g, g[1:]))  # intervals, in order
    for k in range(g[-1] + 1):
        members = [v for v in range(len(counts)) if g[v] == k]
        if any(counts[v] >= tau for v in members):
            assert len(members) == 1  # a clear value is its own group
            continue
        clipped = [max(counts[v], 0.0) for v in members]
        assert len(members) == 1 or sum(clipped[:-1]) < tau  # closed no later than τ ...
        last = members[-1]  # ... and no earlier: at it, at a clear value or at the end
        assert sum(clipped) >= tau or last == len(counts) - 1 or counts[last + 1] >= tau


@st.composite
def coarsenings(draw: st.DrawFn) -> tuple[list[int], tuple[tuple[int, ...], ...]]:
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    groups = []
    for n in shape:
        k = draw(st.integers(1, n))
        m = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
        used = sorted(set(m))  # number the groups 0 … g − 1
        groups.append(tuple(used.index(x) for x in m))
    return shape, tuple(groups)


def _matrix(shape: list[int], groups: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """The aggregation matrix A written out cell by cell."""
    dims = [max(g) + 1 for g in groups]
    fine = list(itertools.product(*(range(n) for n in shape)))
    coarse = list(itertools.product(*(range(n) for n in dims)))
    a = np.zeros((len(coarse), len(fine)))
    for j, x in enumerate(fine):
        a[coarse.index(tuple(g[v] for g, v in zip(groups, x, strict=True))), j] = 1
    return a


@settings(max_examples=60, deadline=None)
@given(coarsenings(), st.integers(0, 2**31 - 1))
def test_coarse_sums_are_the_aggregation_matrix(design: tuple, seed: int) -> None:
    shape, groups = design
    a = _matrix(shape, groups)
    c = Coarsened.of(shape, groups)
    rng = np.random.default_rng(seed)
    ints = rng.integers(0, 100, math.prod(shape))
    floats = rng.random(math.prod(shape))
    assert c.cells == a.shape[0]
    assert c.sum(ints).dtype == np.int64
    assert np.array_equal(c.sum(ints), (a @ ints).astype(np.int64))
    assert np.allclose(c.sum(floats), a @ floats)


@settings(max_examples=60, deadline=None)
@given(coarsenings(), st.integers(0, 2**31 - 1))
def test_a_coarsened_marginal_has_the_sensitivity_of_the_marginal(design: tuple,
                                                                  seed: int) -> None:
    """One row added or removed moves the coarse counts by exactly 1 in L1 and L2; one row
    substituted by at most 2 in L1 and √2 in L2 (the calibration of docs/theory.md §5)."""
    shape, groups = design
    c = Coarsened.of(shape, groups)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 1 << 20, size=(20, len(shape))) % np.array(shape)

    def counts(r: np.ndarray) -> np.ndarray:
        idx = np.ravel_multi_index(tuple(r.T), shape) if len(r) else np.zeros(0, dtype=int)
        return c.sum(np.bincount(idx, minlength=math.prod(shape)).astype(np.int64))

    base = counts(rows)
    removed = base - counts(rows[1:])
    assert np.abs(removed).sum() == 1 and np.sqrt((removed ** 2).sum()) == 1
    swapped = base - counts(np.vstack([rows[1:], rows[:1][:, ::-1] % np.array(shape)]))
    assert np.abs(swapped).sum() <= 2 and np.sqrt((swapped ** 2).sum()) <= math.sqrt(2)


@pytest.mark.parametrize("seed", range(3))
def test_the_coarse_space_fit_reaches_the_minimum(seed: int) -> None:
    """The synthesizer's fit over group codes: fine one-way measurements enter as group sums
    with per-entry noise sd σ√|G| (:meth:`CoarseSpace.coarse`), coarsened ones as they are. The
    fit's loss Σ_m Σ_cells (N μ_c − y_m)² / 2σ_{m,cell}² is that of the best distribution over
    every coarse point (SLSQP, the per-entry sd written out here). A planted fit that takes one
    sd per measurement (the first entry's) misses the minimum."""
    rng = np.random.default_rng(seed)
    fine = Domain.from_dict({"a0": 4, "a1": 3, "a2": 3})
    groups = {0: (0, 0, 1, 1), 1: (0, 1, 1), 2: (0, 1, 2)}
    space = CoarseSpace.of(fine, groups, {a: rng.uniform(1, 50, n)
                                          for a, n in enumerate(fine.sizes)})
    total = 400.0
    fine_ms = [GroupMeasurement((0,), rng.uniform(0, 150, 4), float(rng.uniform(3, 8))),
               GroupMeasurement((1,), rng.uniform(0, 150, 3), float(rng.uniform(3, 8)))]
    coarse_ms = [GroupMeasurement(s, rng.uniform(0, 150, math.prod(space.domain.sizes[a]
                                                                   for a in s)),
                                  float(rng.uniform(3, 8)), groups=space.maps(s))
                 for s in [(0, 1), (1, 2), (0, 2)]]
    ms = [space.coarse(m) for m in fine_ms + coarse_ms]
    assert not np.isscalar(ms[0].sd) and np.allclose(ms[0].sd, fine_ms[0].sd * math.sqrt(2))
    model = ScopeModel(space.domain, [(0, 1), (1, 2), (0, 2)])
    res = fit(model, ms, total, iterations=20_000, tolerance=1e-13, momentum=True)
    sizes = space.domain.sizes
    points = np.array(list(itertools.product(*(range(n) for n in sizes))))

    def project(p: np.ndarray, scope: tuple[int, ...]) -> np.ndarray:
        idx = np.ravel_multi_index(tuple(points[:, a] for a in scope), [sizes[a] for a in scope])
        return np.bincount(idx, weights=p, minlength=math.prod(sizes[a] for a in scope))

    def loss(p: np.ndarray) -> float:
        return sum(float(np.sum((total * project(p, m.scope) - m.y) ** 2
                                / (2 * np.square(m.sd)))) for m in ms)

    best = minimize(loss, np.full(len(points), 1 / len(points)), method="SLSQP",
                    bounds=[(0, 1)] * len(points),
                    constraints=[{"type": "eq", "fun": lambda p: p.sum() - 1}],
                    options={"maxiter": 3000, "ftol": 1e-14})
    ours = sum(float(np.sum((total * model.project(res.marginals, m.scope) - m.y) ** 2
                            / (2 * np.square(m.sd)))) for m in ms)
    assert ours == pytest.approx(res.loss, rel=1e-9)
    assert best.fun <= ours * (1 + 1e-6)  # SLSQP stops within ~1e-8 of the optimum
    assert ours <= best.fun * (1 + 1e-3) + 1e-6


def test_a_coarsened_measurement_needs_one_count_per_product_of_groups() -> None:
    coarsened = GroupMeasurement((0, 1), np.zeros(4), 1.0, groups=((0, 0, 1), (0, 1)))
    with pytest.raises(ValueError, match="fit it over group codes"):  # not over fine codes
        fit(ScopeModel(Domain.from_dict({"a": 3, "b": 2}), [(0, 1)]), [coarsened], 10.0)
    with pytest.raises(ValueError, match="one count per product"):
        GroupMeasurement((0, 1), np.zeros(6), 1.0, groups=((0, 0, 1), (0, 1)))
    with pytest.raises(ValueError, match="one map"):
        GroupMeasurement((0, 1), np.zeros(2), 1.0, groups=((0, 0, 1),))


# -- runs ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["ordered", "categorical"])
def rare(request: pytest.FixtureRequest) -> tuple[Workload, pd.DataFrame]:
    """a has three frequent values, one of ~100 rows (between 1 and 2 thresholds of the test's
    run: a planted doubled threshold would merge it) and three rare ones (~5 rows each); b
    depends on a, c on b."""
    rng = np.random.default_rng(1)
    n = 6000
    a = rng.choice(7, size=n, p=[0.45, 0.3, 0.25 - 120 / n, 5 / n, 5 / n, 5 / n, 105 / n])
    b = (a + rng.integers(0, 2, n)) % 4
    c = (b > 1).astype(int) ^ (rng.random(n) < 0.1)
    frame = pd.DataFrame({"a": a, "b": b, "c": c.astype(int)})
    dom = Domain.from_dict({"a": 7, "b": 4, "c": 2})  # integer codes: ordered
    if request.param == "categorical":  # a's codes are labels: no order
        labels = [f"v{i}" for i in range(7)]
        frame["a"] = np.array(labels, dtype=object)[a]
        dom = Domain.from_dict({"attributes": {
            "a": {"type": "categorical", "values": labels},
            "b": {"type": "integer", "min": 0, "max": 3},
            "c": {"type": "integer", "min": 0, "max": 1}}})
    return Workload.of(dom, [], partitions=k_way_marginals(dom, 2)), frame


def test_a_run_measures_coarsened_marginals_of_its_rare_values(
        rare: tuple[Workload, pd.DataFrame]) -> None:
    """The groups are re-derived from what the run released (its fine one-way measurements and
    the round noise), every coarsened measurement is the coarse sum of the exact counts plus
    noise of the recorded sd (within 6 sd: a planted wrong sum fails), the history counts the
    coarse cells, and the run spends exactly its budget; with ``coarsen_sigmas = 0`` nothing is
    coarsened. Ordered attributes are grouped in runs of consecutive codes, the others by
    merging every rare value (MST's rule)."""
    w, frame = rare
    res = count(frame, candidate_workload(w))
    counts = SensitiveCounts(res.answers, res.n_rows)
    at, fine = 0, {}
    for c in candidates(w):  # the candidate workload's counts, in candidate order
        fine[c.scope] = res.answers[at: at + c.cells].astype(np.int64)
        at += c.cells
    budget = Budget.of(rho=0.05, neighbours="add-remove")
    # AIM's measurement share pinned: the planted counts sit on either side of τ = 3 σ at 0.9
    run = adaptive(w, counts, budget, source=NoiseSource.seeded(7), rng=7, measure_fraction=0.9)
    sizes = [7, 4, 2]
    coarse = [m for m in run.measurements if m.groups is not None]
    assert coarse, "the rare values of a were never merged"
    assert all(m.groups is None for m in run.measurements if len(m.scope) == 1)  # fine
    first = [m for m in run.measurements[:6] if len(m.scope) == 1]  # the initialisation
    rounds = run.record.parameters.rounds
    sched = Schedule(budget, 1.0, 1.0, selection_sensitivity(candidates(w), False),
                     run.record.parameters.measure_fraction)  # the rounds' share
    tau = 3.0 * noise_sd(sched.round(sched.total / rounds).measurement)
    dom = w.domain
    for a in range(3):
        rule = value_runs if dom[dom.names[a]].ordered else value_groups
        want = rule(one_way_counts(first, a), tau)
        for m in coarse:
            if a in m.scope:
                assert m.groups[m.scope.index(a)] == want
    assert value_runs(one_way_counts(first, 0), tau) == (0, 1, 2, 3, 3, 3, 4)
    assert value_groups(one_way_counts(first, 0), tau) == (0, 1, 2, 4, 4, 4, 3)
    a_groups = {m.groups[0] for m in coarse if m.scope[0] == 0}
    assert a_groups == {(0, 1, 2, 3, 3, 3, 4) if dom["a"].ordered else (0, 1, 2, 4, 4, 4, 3)}
    for m in coarse:
        how = Coarsened.of([sizes[a] for a in m.scope], m.groups)
        assert np.all(np.abs(m.y - how.sum(fine[m.scope])) <= 6 * m.sd)
    cells = {m.scope: Coarsened.of([sizes[a] for a in m.scope], m.groups).cells
             for m in run.measurements[-len(run.record.history):]}
    assert sorted(h.cells for h in run.record.history) == sorted(
        cells[m.scope] for m in run.measurements[-len(run.record.history):])
    value = prove(run.record.steps, budget.definition, budget.neighbours).rho
    assert value is not None and 0.05 * (1 - 1e-9) <= value <= 0.05
    plain = adaptive(w, counts, budget, source=NoiseSource.seeded(7), rng=7, coarsen_sigmas=0)
    assert all(m.groups is None for m in plain.measurements)
    assert plain.record.parameters.coarsen_sigmas == 0 and \
        run.record.parameters.coarsen_sigmas == 3.0


def _joint(model: ScopeModel, theta: np.ndarray) -> np.ndarray:
    """P_θ over every point, written out (brute force)."""
    sizes = model.domain.sizes
    points = np.array(list(itertools.product(*(range(n) for n in sizes))))
    logp = np.zeros(len(points))
    for k, s in enumerate(model.scopes):
        table = theta[model.offsets[k]: model.offsets[k + 1]].reshape(model.shapes[k])
        logp += table[tuple(points[:, a] for a in s)]
    p = np.exp(logp - logp.max())
    return (p / p.sum()).reshape(sizes)


@pytest.mark.parametrize("seed", range(4))
def test_the_expanded_model_is_the_coarse_model_times_the_within_group_factors(
        seed: int) -> None:
    """Brute force over every point: the fine model :meth:`CoarseSpace.expand` writes has the
    coarse model's distribution over groups, and within groups the factors q_a of the one-way
    counts; its marginals are those of its own joint. A planted expansion that forgets q (or adds
    it twice) fails."""
    rng = np.random.default_rng(seed)
    fine = Domain.from_dict({"a": 5, "b": 3, "c": 4})
    groups = {0: (0, 1, 1, 2, 1), 1: (0, 1, 2), 2: (0, 0, 1, 1)}
    counts = {a: rng.uniform(-5, 60, n) for a, n in enumerate(fine.sizes)}
    space = CoarseSpace.of(fine, groups, counts)
    assert space.merged and space.domain.sizes == (3, 3, 2) and set(space.log_q) == {0, 2}
    coarse_model = ScopeModel(space.domain, [(0, 1), (1, 2), (0, 2)])
    theta_c = rng.normal(0, 1, coarse_model.n_parameters)
    fitted = FitResult(theta_c, coarse_model.marginals(theta_c), 0.0, 1.0, 0, 0)
    model, res = space.expand(coarse_model, fitted)
    pf, pc = _joint(model, res.theta), _joint(coarse_model, theta_c)
    g = [np.asarray(groups[a]) for a in range(3)]
    summed = np.zeros(pc.shape)
    np.add.at(summed, np.ix_(g[0], g[1], g[2]), pf)
    assert np.allclose(summed, pc, atol=1e-12)
    for a in (0, 2):
        w = np.maximum(counts[a], CoarseSpace.FLOOR)
        q = w / np.bincount(g[a], weights=w)[g[a]]
        other = tuple(i for i in range(3) if i != a)
        assert np.allclose(pf.sum(axis=other), pc.sum(axis=other)[g[a]] * q, atol=1e-12)
    for k, s in enumerate(model.scopes):
        other = tuple(i for i in range(3) if i not in s)
        assert np.allclose(res.marginals[model.offsets[k]: model.offsets[k + 1]],
                           pf.sum(axis=other).ravel(), atol=1e-10)


def test_fine_measurements_enter_the_coarse_space_as_group_sums() -> None:
    fine = Domain.from_dict({"a": 4, "b": 2})
    space = CoarseSpace.of(fine, {0: (0, 1, 1, 1), 1: (0, 1)},
                           {0: np.array([50.0, 1, 2, 3]), 1: np.array([20.0, 30])})
    m = space.coarse(GroupMeasurement((0,), np.array([50.0, 1, 2, 3]), 2.0))
    assert m.y.tolist() == [50.0, 6.0] and np.allclose(m.sd, [2.0, 2.0 * math.sqrt(3)])
    kept = space.coarse(GroupMeasurement((1,), np.array([20.0, 30]), 2.0))
    assert kept.y.tolist() == [20.0, 30.0] and kept.sd == 2.0
    done = space.coarse(GroupMeasurement((0, 1), np.arange(4.0), 1.0,
                                         groups=((0, 1, 1, 1), (0, 1))))
    assert done.groups is None and done.y.tolist() == [0.0, 1.0, 2.0, 3.0]
    # q from new one-way counts; a one-way over groups refined within them by q
    q0 = np.exp(space.log_q[0])
    assert np.allclose(q0, [1.0, 1 / 6, 2 / 6, 3 / 6])
    moved = space.with_counts(0, np.array([50.0, 3, 3, -4]))
    total = 6 + CoarseSpace.FLOOR  # a negative count is floored
    assert np.allclose(np.exp(moved.log_q[0])[1:],
                       [3 / total, 3 / total, CoarseSpace.FLOOR / total])
    assert np.allclose(space.fine_one_way(0, np.array([40.0, 12.0])), [40, 2, 4, 6])
    assert space.fine_one_way(1, np.array([1.0, 2.0])).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="other groups"):
        space.coarse(GroupMeasurement((0, 1), np.arange(6.0), 1.0,
                                      groups=((0, 1, 2, 2), (0, 1))))


def test_a_record_with_coarsened_measurements_verifies(
        rare: tuple[Workload, pd.DataFrame]) -> None:
    """The run record names each coarsened marginal's groups; it verifies untouched, and groups
    that are not a map of the attribute's codes fail even with the digest recomputed."""
    import copy
    import json

    from tessera.release import Budget as ReleaseBudget
    from tessera.release import answer
    from tessera.release.certificate import verify_certificate
    from tessera.synth.record import sealed
    from tessera.synth.synthesizer import Synthesizer
    from tessera.synth.verify import verify_record

    w, frame = rare
    f = Synthesizer("adaptive", rows=100).fit(frame, w, ReleaseBudget.of(rho=0.05),
                                              neighbours="add-remove", answer=answer)
    rec = json.loads(json.dumps(f.run_record()))
    coarse = [s for s in rec["steps"] if "groups" in s["applied_to"]]
    assert coarse and all(len(s["applied_to"]["groups"]["a"]) == 7 for s in coarse
                          if "a" in s["applied_to"]["groups"])
    assert verify_record(rec, w, verify_certificate=verify_certificate).ok
    bad = copy.deepcopy(rec)
    step = next(s for s in bad["steps"] if "groups" in s["applied_to"])
    name = next(iter(step["applied_to"]["groups"]))
    step["applied_to"]["groups"][name] = step["applied_to"]["groups"][name][:-1]
    bad.pop("sha256", None)
    result = verify_record(sealed(bad), w, verify_certificate=verify_certificate)
    assert not result.ok and any("groups" in d for d in result.differences)
