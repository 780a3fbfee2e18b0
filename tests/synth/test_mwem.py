"""The explicit-histogram MWEM baseline validates IPMWU (docs/theory.md §5).

* With exact expectations and the same privacy randomness (one seeded source, or a replayed
  transcript) IPMWU's trajectory is MWEM's: the same selections and noisy counts, and every
  round's distribution equal to 1e-9 on every cell (d ≤ 14).
* With the perfect sampler (the paper's version) IPMWU converges to that trajectory as m grows:
  each round's sampling error is N(0, p(1 − p)/m) (χ² test), the θ error shrinks like 1/√m
  within a CLT tolerance, and unit steps stop flipping once the CLT bound says they must.
* The synthetic rows follow the average of the round distributions (χ² on 32 cells), and not
  the last round's (the same test rejects it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from tessera.engine import GibbsModel
from tessera.engine.families import (
    Family,
    binary_domain,
    hierarchical_disjunctions,
    tree_marginals,
)
from tessera.errors import ResourceError
from tessera.mechanisms import NoiseSource
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.synth.ipmwu import ipmwu
from tessera.synth.mwem import cells, mwem
from tessera.synth.rounds import iter_thetas
from tessera.workload.query import Query
from tests.mechanisms.checks import P_REJECT, categorical_chi_square

TRAJECTORY_TOLERANCE = 1e-9


def data_for(family, n: int, seed: int = 0) -> np.ndarray:  # noqa: ANN001
    """n rows from a random Gibbs model over the family's queries (a structured population)."""
    rng = np.random.default_rng(seed)
    model = GibbsModel(family.domain, family.queries, rng.normal(size=len(family.queries)))
    return model.sample(n, rng)


def round_gap(a, b) -> float:  # noqa: ANN001
    """max over rounds t = 0..T and cells x of |h_t^IPMWU(x) − h_t^MWEM(x)|."""
    worst = 0.0
    for t in range(a.record.parameters.rounds + 1):
        engine = np.exp(a.distribution(t).log_probability(b.cells))
        worst = max(worst, float(np.abs(engine - b.histograms[t]).max()))
    return worst


def product_family(seed: int = 0) -> Family:
    """A small non-binary product domain (3·4·5·2·3·4 = 1,440 cells) with 60 random range
    and set predicates on one to three attributes."""
    domain = Domain.from_dict({"a": 3, "b": 4, "c": 5, "d": 2, "e": 3, "f": 4})
    rng = np.random.default_rng(seed)
    queries = []
    for _ in range(60):
        attrs = rng.choice(len(domain), size=int(rng.integers(1, 4)), replace=False)
        cov = {}
        for i in attrs:
            size = domain.sizes[i]
            lo = int(rng.integers(0, size))
            hi = int(rng.integers(lo, size))
            cov[domain.names[i]] = (IntervalSet.range(lo, hi + 1) if rng.random() < 0.5 else
                                    IntervalSet.points(sorted({lo, hi})))
        queries.append(Query.conjunction(domain, cov))
    return Family("product", domain, tuple(queries), tuple(f"q{j}" for j in range(60)), 0)


CASES = [
    ("tree12", "unit", {"epsilon": 3.0}),
    ("tree12", "mwem", {"rho": 0.5, "neighbours": "add-remove"}),
    ("hier12", "unit", {"rho": 0.5}),
    ("tree14b", "mwem", {"epsilon": 2.0, "neighbours": "add-remove"}),
    ("product", "unit", {"epsilon": 2.0}),
]
FAMILIES = {
    "tree12": lambda: tree_marginals(12, seed=1),
    "hier12": lambda: hierarchical_disjunctions(12),  # Boolean disjunctions (BDDs)
    "tree14b": lambda: tree_marginals(14, seed=2, boolean=True),
    "product": product_family,
}


@pytest.mark.parametrize(("family", "update", "budget"), CASES)
def test_exact_ipmwu_reproduces_the_mwem_trajectory(family: str, update: str,
                                                    budget: dict) -> None:
    fam = FAMILIES[family]()
    X = data_for(fam, 2000)
    common = dict(rounds=30, expectations="exact", update=update, rng=1, **budget)
    a = ipmwu(fam.domain, fam.queries, X, source=NoiseSource.seeded(9), **common)
    b = mwem(fam.domain, fam.queries, X, source=NoiseSource.seeded(9), keep_histograms=True,
             **common)
    ta, tb = a.record.transcript, b.record.transcript
    assert np.array_equal(ta.selections, tb.selections)  # same selections ...
    assert np.array_equal(ta.noisy_counts, tb.noisy_counts)  # ... and noise draws
    assert ta.normaliser == tb.normaliser
    assert len(set(ta.selections.tolist())) > 5  # a real trajectory, not one query
    # the engine's exact ⟨f_t, h_t⟩ are the explicit dot products
    np.testing.assert_allclose(a.record.synthetic, b.record.synthetic, rtol=0,
                               atol=TRAJECTORY_TOLERANCE)
    assert round_gap(a, b) <= TRAJECTORY_TOLERANCE
    np.testing.assert_allclose(a.average_answers(), b.average_answers(), rtol=0,
                               atol=TRAJECTORY_TOLERANCE)
    assert a.record.spent == b.record.spent


def test_the_trajectory_comparison_can_fail() -> None:
    """A step size off by one part in 10^6 moves the distributions by well over 1e-9."""
    fam = tree_marginals(10, seed=1)
    X = data_for(fam, 2000)
    b = mwem(fam.domain, fam.queries, X, epsilon=3.0, rounds=20, source=NoiseSource.seeded(4),
             keep_histograms=True)
    a = ipmwu(fam.domain, fam.queries, replay=b.record.transcript, expectations="exact",
              step=b.record.parameters.step * (1 + 1e-6))
    assert round_gap(a, b) > 10 * TRAJECTORY_TOLERANCE


def test_replayed_transcript_gives_the_same_trajectory() -> None:
    """The transcript (selections, noisy counts) replayed by the other representation: no
    mechanism runs, nothing new is spent, the output keeps the transcript's guarantee."""
    fam = hierarchical_disjunctions(10)
    X = data_for(fam, 1000)
    a = ipmwu(fam.domain, fam.queries, X, epsilon=2.0, rounds=25, expectations="exact",
              source=NoiseSource.seeded(3))
    b = mwem(fam.domain, fam.queries, replay=a.record.transcript, keep_histograms=True)
    assert b.record.replayed and b.record.steps == ()
    assert b.record.spent.epsilon == 0.0
    assert b.record.guarantee == a.record.spent
    assert b.record.parameters.step == a.record.parameters.step
    assert round_gap(a, b) <= TRAJECTORY_TOLERANCE


# -- the sampler converges ----------------------------------------------------------------------

SIZES = (100, 1_000, 10_000, 100_000)
REPEATS = 3


@pytest.fixture(scope="module")
def exact_run():
    fam = tree_marginals(8, seed=3)
    X = data_for(fam, 3000)
    base = {u: mwem(fam.domain, fam.queries, X, epsilon=4.0, rounds=20, update=u,
                    source=NoiseSource.seeded(5), keep_histograms=True)
            for u in ("mwem", "unit")}
    return fam, base


def final_theta(record, n_queries: int) -> np.ndarray:  # noqa: ANN001
    *_, last = iter_thetas(record.transcript.selections, record.theta_steps, n_queries,
                           record.parameters.rounds)
    return last


def test_sampler_errors_are_clt_sized(exact_run) -> None:  # noqa: ANN001
    """Per round, f_t(S_t) − ⟨f_t, h_t⟩ ~ N(0, p(1 − p)/m): Σ z² over the rounds is χ²_T."""
    fam, base = exact_run
    m = 400
    r = ipmwu(fam.domain, fam.queries, replay=base["mwem"].record.transcript,
              expectations="sample", sample_size=m, rows=0, update="mwem", rng=11)
    sel = r.record.transcript.selections
    z = []
    for t in range(r.record.parameters.rounds):
        p = r.distribution(t).expectations()[sel[t]]  # exact, at the sampler run's own h_t
        z.append((r.record.synthetic[t] - p) / math.sqrt(p * (1 - p) / m))
    z = np.array(z)
    assert stats.chi2.sf(float(z @ z), z.size) > P_REJECT
    # planted: a sampler biased by 3 standard errors in every round is rejected
    assert stats.chi2.sf(float((z + 3) @ (z + 3)), z.size) < P_REJECT


def test_sampler_converges_to_the_exact_trajectory(exact_run) -> None:  # noqa: ANN001
    """MWEM step: ‖θ_T^(m) − θ_T‖_∞ shrinks with m, within the CLT tolerance.

    Tolerance: coordinate j takes a step (a − v)/2 each of the k_j rounds it is selected; the
    sampler changes v by a mean-zero error of standard deviation ≤ 1/(2√m), so without
    feedback θ_j is off by ≤ ½·√k_j/(2√m) standard deviations' worth; the feedback of
    multiplicative weights (v moves with θ) only pulls back. 6 of them: 1.5·√(k_j/m).
    """
    fam, base = exact_run
    record = base["mwem"].record
    exact = final_theta(record, len(fam.queries))
    k = np.bincount(record.transcript.selections, minlength=len(fam.queries)).max()
    errors = []
    for m in SIZES:
        errs = []
        for rep in range(REPEATS):
            r = ipmwu(fam.domain, fam.queries, replay=record.transcript, expectations="sample",
                      sample_size=m, rows=0, update="mwem", rng=100 + rep)
            errs.append(float(np.abs(final_theta(r.record, len(fam.queries)) - exact).max()))
        assert max(errs) <= 1.5 * math.sqrt(k / m), (m, errs)
        errors.append(np.mean(errs))
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < errors[0] / 10  # ~√1000 ≈ 32 in theory


def test_unit_steps_stop_flipping(exact_run) -> None:  # noqa: ANN001
    """Unit step: the sampler's sign(v − a) differs from the exact one only when the sampling
    error exceeds the gap |⟨f_t, h_t⟩ − a_t|; P(any flip) ≤ Σ_t 2Φ̄(gap_t/σ_t). Where that bound
    is below 1e-3 the trajectory must be the exact one."""
    fam, base = exact_run
    b = base["unit"]
    record = b.record
    a = record.transcript.answers
    p = record.synthetic  # exact ⟨f_t, h_t⟩
    gaps = np.abs(p - a)
    bound_at = {}
    for m in SIZES[:3]:
        sigma = np.sqrt(np.maximum(p * (1 - p), 1e-300) / m)
        bound_at[m] = float(np.sum(2 * stats.norm.sf(gaps / sigma)))
        r = ipmwu(fam.domain, fam.queries, replay=record.transcript, expectations="sample",
                  sample_size=m, rows=0, update="unit", rng=7)
        same = np.array_equal(r.record.theta_steps, record.theta_steps)
        if bound_at[m] < 1e-3:
            assert same, (m, bound_at[m])
            assert round_gap(r, b) <= TRAJECTORY_TOLERANCE
    assert bound_at[SIZES[2]] < 1e-3, bound_at  # the setting exercises the identical regime


# -- the output rows ----------------------------------------------------------------------------


def average_over_rounds(result, grid: np.ndarray) -> np.ndarray:  # noqa: ANN001
    T = result.record.parameters.rounds
    return np.mean([np.exp(result.distribution(t).log_probability(grid)) for t in range(T)],
                   axis=0)


def cell_index(rows: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    return np.ravel_multi_index(tuple(rows.T.astype(np.int64)), sizes)


def test_rows_follow_the_average_distribution() -> None:
    fam = tree_marginals(5, seed=4)
    X = data_for(fam, 500)
    r = ipmwu(fam.domain, fam.queries, X, epsilon=20.0, rounds=12, expectations="exact",
              update="mwem", rows=40_000, source=NoiseSource.seeded(2), rng=3)
    grid = cells(fam.domain)
    average = average_over_rounds(r, grid)
    idx = cell_index(r.rows, fam.domain.sizes)
    assert categorical_chi_square(idx, average) > P_REJECT
    # planted: the last round's distribution (what an implementation without averaging outputs)
    last = np.exp(r.distribution(r.record.parameters.rounds).log_probability(grid))
    assert categorical_chi_square(idx, last) < P_REJECT
    # the baseline's rows, from its explicit average, replaying the same transcript
    b = mwem(fam.domain, fam.queries, replay=r.record.transcript, rows=40_000, rng=5)
    np.testing.assert_allclose(b.average, average, rtol=0, atol=1e-12)
    assert categorical_chi_square(cell_index(b.rows, fam.domain.sizes), average) > P_REJECT


def test_explicit_histogram_refuses_large_domains() -> None:
    big = binary_domain(21)
    with pytest.raises(ResourceError, match="2,097,152 points.*at most 1,048,576"):
        cells(big)
    fam = tree_marginals(12)
    with pytest.raises(ResourceError, match="needs .* bytes"):
        mwem(fam.domain, fam.queries, np.zeros((5, 12), dtype=np.int64), epsilon=1.0,
             memory_limit=1000)
