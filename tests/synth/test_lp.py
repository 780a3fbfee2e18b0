"""The LP approach (docs/theory.md §6): column generation against the explicit LP, the corrected
dual, the certified gap, the 2‖f̂ − f(X)‖ guarantee, rows, and the release end to end."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tessera.engine import GibbsModel
from tessera.engine.bdd import BinaryEncoding, at_least, bdd_manager, from_expr, parity
from tessera.engine.families import (
    binary_domain,
    hierarchical_disjunctions,
    partitioned_marginals,
    tree_marginals,
)
from tessera.errors import ResourceError, TesseraError
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.synth.lp import (
    default_accuracy,
    sample_size,
    sampling_accuracy,
    solve_lp,
    synthesize,
)
from tessera.synth.lp_master import Master, domain_points, explicit_lp
from tessera.synth.lp_targets import QueryEvaluator, Targets, release_targets
from tessera.workload.families import k_way_marginals
from tessera.workload.query import Query
from tessera.workload.workload import Workload

TOL = 1e-7


# -- instances (d ≤ 12) -----------------------------------------------------------------------


def _random_conjunctions(domain: Domain, k: int, rng: np.random.Generator) -> list[Query]:
    """k random conjunctions of 1–3 set predicates (value sets, not only intervals)."""
    out = []
    for _ in range(k):
        names = rng.choice(domain.names, size=int(rng.integers(1, 4)), replace=False)
        cov = {}
        for a in names:
            size = domain[a].size
            codes = rng.choice(size, size=int(rng.integers(1, size)), replace=False)
            cov[str(a)] = IntervalSet.points(sorted(int(c) for c in codes))
        out.append(Query.conjunction(domain, cov))
    return out


def _categorical(rng: np.random.Generator) -> tuple[Domain, list, list]:
    domain = Domain.from_dict({"a": 3, "b": 4, "c": 5, "d": 2, "e": 3, "u": 4})  # u: unused
    queries = _random_conjunctions(Domain.from_dict({k: domain[k].size for k in "abcde"}), 30,
                                   rng)
    return domain, queries, []


def _boolean(rng: np.random.Generator) -> tuple[Domain, list, list]:
    """BDD queries (parity, thresholds, an expression) on 10 bits."""
    domain = binary_domain(10)
    mgr = bdd_manager(domain.names)
    n = domain.names
    queries = [parity(mgr, [n[i], n[(i + 3) % 10]]) for i in range(10)]
    queries += [at_least(mgr, list(n[i:i + 4]), 2) for i in range(0, 7, 2)]
    queries += [from_expr(mgr, rf"({n[0]} /\ ~{n[5]}) \/ ({n[7]} ^ {n[9]})")]
    return domain, queries, []


def _encoded(rng: np.random.Generator) -> tuple[Domain, list, list]:
    """Attributes of sizes 3, 5, 6 as 8 bits with validity constraints."""
    enc = BinaryEncoding.of(Domain.from_dict({"p": 3, "q": 5, "r": 6}))
    mgr, bits = enc.manager, [b for group in enc.bits for b in group]
    queries = [from_expr(mgr, rf"{bits[i]} /\ ~{bits[j]}")
               for i, j in itertools.combinations(range(len(bits)), 2) if (i + j) % 3 == 0]
    queries += [at_least(mgr, bits[:5], 2), parity(mgr, bits[3:])]
    return enc.binary, queries, list(enc.validity())


INSTANCES = {
    "tree d=12": lambda rng: (tree_marginals(12, seed=3).domain,
                              list(tree_marginals(12, seed=3).queries), []),
    "hierarchical d=12": lambda rng: (hierarchical_disjunctions(12).domain,
                                      list(hierarchical_disjunctions(12).queries), []),
    "partitioned d=12 k=3": lambda rng: (partitioned_marginals(12, 3).domain,
                                         list(partitioned_marginals(12, 3).queries), []),
    "conjunctions d=12": lambda rng: (binary_domain(12),
                                      _random_conjunctions(binary_domain(12), 40, rng), []),
    "categorical": _categorical,
    "boolean d=10": _boolean,
    "encoded (constraints)": _encoded,
}


def _targets(domain: Domain, queries: list, constraints: list, rng: np.random.Generator,
             noise: float, n: int = 300) -> tuple[Targets, np.ndarray]:
    """f(X) of n random valid rows, plus Laplace noise of the given scale."""
    points = domain_points(domain)
    if constraints:
        points = points[np.all(QueryEvaluator(domain, constraints)(points), axis=1)]
    # a skewed data set: a few heavy points and uniform rest
    heavy = points[rng.integers(0, len(points), 5)]
    rows = np.vstack([heavy[rng.integers(0, 5, n // 2)],
                      points[rng.integers(0, len(points), n - n // 2)]])
    truth = QueryEvaluator(domain, queries)(rows).mean(axis=0)
    fhat = truth + rng.laplace(scale=noise, size=len(truth))
    return Targets.of(domain, queries, fhat), truth


# -- the pricing oracle -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["categorical", "boolean d=10", "hierarchical d=12"])
def test_max_plus_pricing_takes_signed_weights(name: str) -> None:
    """The engine's max-plus argmax with weights of either sign equals brute force: the LP's
    pricing θ = y⁻ − y⁺ needs no transformation to non-negative weights."""
    rng = np.random.default_rng(0)
    domain, queries, _ = INSTANCES[name](rng)
    points = domain_points(domain)
    values = QueryEvaluator(domain, queries)(points).astype(float)
    model = GibbsModel(domain, queries)
    for _ in range(10):
        theta = rng.normal(size=len(queries)) * (rng.random(len(queries)) < 0.7)
        v, x = model.with_theta(theta).max_assignment()
        assert v == pytest.approx((values @ theta).max(), abs=1e-12)
        assert QueryEvaluator(domain, queries)(x[None])[0].astype(float) @ theta == \
            pytest.approx(v, abs=1e-12)


# -- column generation against the explicit LP ------------------------------------------------


@pytest.mark.parametrize("name", list(INSTANCES))
@pytest.mark.parametrize("noise", [0.01, 0.05])
def test_column_generation_reaches_the_explicit_optimum(name: str, noise: float) -> None:
    """d ≤ 12: the certified column-generation optimum equals the explicit LP's to 1e-7, every
    iteration's bounds bracket it, and the histogram is sparse (≤ |F| + 1 points)."""
    rng = np.random.default_rng(hash((name, noise)) % 2**32)
    domain, queries, constraints = INSTANCES[name](rng)
    targets, _ = _targets(domain, queries, constraints, rng, noise)
    ref = explicit_lp(targets, constraints=constraints)
    sol = solve_lp(targets, constraints=constraints)
    assert sol.status == "optimal" and sol.certified, (sol.status, sol.gap)
    assert abs(sol.alpha - ref.alpha) <= TOL
    assert sol.lower_bound <= ref.alpha + 1e-9 <= sol.alpha + 2e-9
    for it in sol.history:  # each round's primal is ≥ the optimum, each bound ≤ it
        assert it.lower_bound <= ref.alpha + 1e-9
        assert it.alpha >= ref.alpha - 1e-9
    assert len(sol.weights) <= len(queries) + 1
    assert np.all(sol.weights > 0) and math.isclose(sol.weights.sum(), 1.0, abs_tol=1e-12)
    fitted = QueryEvaluator(domain, queries)(sol.support).T.astype(float) @ sol.weights
    assert np.allclose(fitted, sol.fitted, atol=1e-12)
    assert np.max(np.abs(fitted - targets.values)) == pytest.approx(sol.alpha, abs=1e-12)
    if constraints:
        assert np.all(QueryEvaluator(domain, constraints)(sol.support))


def test_master_duals_follow_the_derived_signs() -> None:
    """y⁻ = dual(L_f) ≥ 0, y⁺ = −dual(U_f) ≥ 0, Σ(y⁺ + y⁻) ≤ 1, μ free; the reduced cost
    −(θ·f(x) + μ) of each master column matches HiGHS's and the master's objective is
    Σ f̂θ + μ (strong duality)."""
    rng = np.random.default_rng(5)
    domain, queries, _ = INSTANCES["tree d=12"](rng)
    targets, _ = _targets(domain, queries, [], rng, 0.1)
    evaluate = QueryEvaluator(domain, queries)
    master = Master(targets.values)
    columns = domain_points(domain)[rng.choice(4096, 25, replace=False)]
    master.add(evaluate(columns))
    sol = master.solve()
    assert np.all(sol.y_minus >= -1e-12) and np.all(sol.y_plus >= -1e-12)
    assert sol.y_minus.sum() + sol.y_plus.sum() <= 1 + 1e-9
    theta = sol.y_minus - sol.y_plus
    reduced = -(evaluate(columns).astype(float) @ theta + sol.mu)
    highs_reduced = np.asarray(master.highs.getSolution().col_dual)[1:]
    assert np.allclose(reduced, highs_reduced, atol=1e-9)
    assert np.all(reduced >= -1e-9)
    assert sol.objective == pytest.approx(float(targets.values @ theta) + sol.mu, abs=1e-9)


# -- the corrected dual -----------------------------------------------------------------------


def test_pricing_without_mu_stops_at_a_wrong_master() -> None:
    """One attribute x ∈ {0, 1}, F = {[x = 1], [x = 0]}, f̂ = (0.3, 0.3); start from x = 1.

    The master has α = 0.7 with y⁺ = (1, 0) and μ = 1. The pricing max_x θ·f(x) is 0 (at
    x = 0). Paper 2's printed test (no μ) asks "0 > 0?" and stops at α = 0.7; the corrected
    test "0 + μ > 0?" adds x = 0 and reaches the optimum 0.2."""
    domain = Domain.from_dict({"x": 2})
    queries = [Query.conjunction(domain, {"x": IntervalSet.points([1])}),
               Query.conjunction(domain, {"x": IntervalSet.points([0])})]
    targets = Targets.of(domain, queries, [0.3, 0.3])
    master = Master(targets.values)
    master.add(QueryEvaluator(domain, queries)(np.array([[1]])))
    sol = master.solve()
    assert sol.objective == pytest.approx(0.7)
    assert sol.mu == pytest.approx(1.0)
    assert np.allclose(sol.y_plus, [1, 0]) and np.allclose(sol.y_minus, [0, 0])
    v_star, x_star = GibbsModel(domain, queries, sol.y_minus - sol.y_plus).max_assignment()
    assert v_star == pytest.approx(0.0) and x_star.tolist() == [0]
    assert not v_star > 1e-9  # the seed's rule (μ dropped): "optimal" at α = 0.7
    assert v_star + sol.mu > 1e-9  # the corrected rule: x = 0 enters
    full = solve_lp(targets, initial=[[1]])
    assert full.alpha == pytest.approx(0.2, abs=1e-12) and full.certified
    assert full.history[0].pricing == pytest.approx(1.0)  # v* + μ at the first master
    assert explicit_lp(targets).alpha == pytest.approx(0.2, abs=1e-12)


def test_dual_without_mu_is_the_unnormalised_lp() -> None:
    """docs/theory.md §6: F = {x₁}, f̂ = 2. The LP over the simplex has optimum 1; dropping
    Σ h = 1 (the LP whose dual is the printed eq. (2)) has optimum 0."""
    domain = Domain.from_dict({"x1": 2})
    targets = Targets.of(domain, [Query.conjunction(domain, {"x1": IntervalSet.points([1])})],
                         [2.0])
    assert explicit_lp(targets).alpha == pytest.approx(1.0)
    assert explicit_lp(targets, normalised=False).alpha == pytest.approx(0.0)
    sol = solve_lp(targets, initial=[[0]])
    assert sol.alpha == pytest.approx(1.0) and sol.lower_bound == pytest.approx(1.0)
    assert sol.mu == pytest.approx(-1.0)  # y⁻ = 1, μ = −1: the corrected dual's optimum


# -- guarantee, limits ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_fit_is_within_twice_the_noise(seed: int) -> None:
    """‖⟨f, h*⟩ − f(X)‖_∞ ≤ 2‖f̂ − f(X)‖_∞, and α* ≤ ‖f̂ − f(X)‖_∞ (X's histogram is feasible)."""
    rng = np.random.default_rng(100 + seed)
    name = list(INSTANCES)[seed % len(INSTANCES)]
    domain, queries, constraints = INSTANCES[name](rng)
    targets, truth = _targets(domain, queries, constraints, rng, noise=float(rng.uniform(0.01,
                                                                                         0.3)))
    sol = solve_lp(targets, constraints=constraints)
    noise = np.max(np.abs(targets.values - truth))
    assert sol.alpha <= noise + 1e-9
    assert np.max(np.abs(sol.fitted - truth)) <= 2 * noise + 1e-9


def test_limits_return_valid_bounds() -> None:
    rng = np.random.default_rng(9)
    domain, queries, _ = INSTANCES["conjunctions d=12"](rng)
    targets, _ = _targets(domain, queries, [], rng, 0.05)
    ref = explicit_lp(targets).alpha
    short = solve_lp(targets, max_iterations=3)
    assert short.status == "iteration limit" and short.iterations == 3 and not short.certified
    assert short.lower_bound <= ref + 1e-9 <= short.alpha + 1e-9
    timed = solve_lp(targets, time_limit=0.0)
    assert timed.status == "time limit" and timed.iterations == 1
    assert timed.lower_bound <= ref + 1e-9 <= timed.alpha + 1e-9


def test_stalled_master_runs_are_solved_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A master run over its time allowance (here: every run) is re-solved from scratch by the
    dual simplex; the result is the same optimum."""
    import tessera.synth.lp_master as lp

    monkeypatch.setattr(lp, "STALL_SECONDS", 0.0)
    monkeypatch.setattr(lp, "STALL_FACTOR", 0.0)
    rng = np.random.default_rng(4)
    domain, queries, _ = INSTANCES["partitioned d=12 k=3"](rng)
    targets, _ = _targets(domain, queries, [], rng, 0.02)
    sol = solve_lp(targets)
    assert sol.restarts >= sol.iterations - 1 > 1 and sol.certified
    assert abs(sol.alpha - explicit_lp(targets).alpha) <= TOL


def test_explicit_lp_refuses_large_domains() -> None:
    fam = tree_marginals(20)
    with pytest.raises(ResourceError):
        explicit_lp(Targets.of(fam.domain, fam.queries, np.zeros(len(fam.queries))))


# -- rows -------------------------------------------------------------------------------------


def test_sample_size_is_hoeffding_with_a_union_bound() -> None:
    m = sample_size(100, 0.05, 0.05)
    assert m == math.ceil(math.log(2 * 100 / 0.05) / (2 * 0.05**2))
    assert sampling_accuracy(100, m, 0.05) <= 0.05
    assert sampling_accuracy(100, m - 1, 0.05) > 0.05


def test_rows_keep_every_answer_of_f_and_spread_unused_attributes() -> None:
    """A sampled row agrees on every f ∈ F with a support point (codes are drawn uniformly
    within value classes); an attribute no query reads takes all its codes; the rows' answers
    are within the Hoeffding accuracy of ⟨f, h⟩."""
    rng = np.random.default_rng(11)
    domain, queries, _ = INSTANCES["categorical"](rng)
    targets, _ = _targets(domain, queries, [], rng, 0.05)
    sol = solve_lp(targets)
    m = sample_size(len(queries), 0.02, 1e-3)
    rows = sol.sample(m, np.random.default_rng(0))
    evaluate = QueryEvaluator(domain, queries)
    support = {tuple(r) for r in evaluate(sol.support)}
    assert {tuple(r) for r in evaluate(rows)} <= support
    assert set(rows[:, domain.index("u")].tolist()) == {0, 1, 2, 3}
    assert np.max(np.abs(evaluate(rows).mean(axis=0) - sol.fitted)) <= 0.02


# -- from a release ---------------------------------------------------------------------------

SCHEMA = {"attributes": {
    "age": {"type": "integer", "min": 0, "max": 9},
    "sex": {"type": "categorical", "values": ["F", "M"]},
    "region": {"type": "categorical", "values": ["N", "S", "E", "W"]},
}}


def _frame(n: int = 2000, seed: int = 0):  # noqa: ANN202
    import pandas as pd

    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(0, 10, n), "sex": rng.choice(["F", "M"], n),
                         "region": rng.choice(["N", "S", "E", "W"], n, p=[.4, .3, .2, .1])})


def _workload(domain: Domain, with_total: bool) -> Workload:
    clauses = ["age < 5", "age >= 5", "region = 'N'", "sex = 'F' AND age >= 7"]
    base = Workload.from_sql((["TRUE"] if with_total else []) + clauses, domain)
    weights = list(base.weights)
    weights[-1] = 0.0  # not released: must not enter the LP
    families = k_way_marginals(domain, 2, ["sex", "region"])
    return Workload(domain, base.queries, base.names, tuple(weights), None, families)


def test_synthesize_from_a_release_under_add_remove() -> None:
    """n from the release's noisy total (post-processing); unreleased queries left out; the
    rows carry the release's guarantee (and its NOT PRIVATE mark when seeded)."""
    from tessera.release import Budget, answer

    domain = Domain.from_dict(SCHEMA)
    data = _frame()
    wl = _workload(domain, with_total=True)
    rel = answer(data, wl, Budget.of(epsilon=1.0), seed=3)
    syn = synthesize(rel, rng=0)
    t = syn.solution.targets
    assert t.n == float(rel.noisy[0]) and "noisy total" in t.n_source
    assert 4 not in t.indices.tolist() and len(t.values) == wl.n_queries - 1
    assert np.allclose(t.values, rel.answers[t.indices] / t.n)
    assert syn.solution.certified
    assert syn.privacy["guarantees"] == rel.certificate["guarantees"]
    assert syn.privacy["certificate_digest"] == rel.certificate["digest"]
    assert not syn.private and "NOT PRIVATE" in syn.privacy["randomness"]
    k = len(t.values)
    accuracy = max(syn.solution.alpha, float(np.max(t.scales)), 1e-3)
    assert accuracy == default_accuracy(syn.solution)
    assert syn.rows.shape == (round(t.n), 3)  # n̂ rows by default, like the data
    assert synthesize(rel, rng=0, accuracy=accuracy).rows.shape == \
        (min(sample_size(k, accuracy), 1_000_000), 3)
    frame = syn.to_frame()
    assert list(frame.columns) == ["age", "sex", "region"]
    assert set(frame["region"]) <= {"N", "S", "E", "W"} and frame.attrs["private"] is False
    on_rows = QueryEvaluator(domain, t.functions)(syn.rows).mean(axis=0)
    assert np.max(np.abs(on_rows - t.values)) <= syn.record()["rows_within"]
    # the guarantee against the data: within 2‖f̂ − f(X)‖ (+ the certified gap)
    from tessera.data.counts import count

    truth = count(data, wl).answers[t.indices] / len(data)
    noise = np.max(np.abs(t.values - truth)) + abs(t.n - len(data)) / len(data)
    assert np.max(np.abs(syn.solution.fitted - truth)) <= 2 * noise + syn.solution.gap + 1e-9


def test_n_rules() -> None:
    from tessera.release import Budget, answer

    domain = Domain.from_dict(SCHEMA)
    data = _frame(500)
    no_total = _workload(domain, with_total=False)
    rel = answer(data, no_total, Budget.of(epsilon=1.0), seed=1)
    with pytest.raises(TesseraError, match="n is needed"):
        release_targets(rel)
    with pytest.raises(TesseraError, match="private"):
        release_targets(rel, n=500)
    assert "public knowledge" in release_targets(rel, n=500, public_n=True).n_source
    sub = answer(data, no_total, Budget.of(epsilon=1.0), neighbours="substitute", seed=1)
    t = release_targets(sub, n=500)
    assert t.n == 500 and "substitution" in t.n_source
    assert np.allclose(t.scales, sub.plan.scales[t.indices] / 500)


def test_nltcs_all_two_way_marginals(shared_data) -> None:  # noqa: ANN001
    """NLTCS (d = 16, 21,574 rows), all 120 two-way marginals (480 cells), ε = 1 under
    substitution: certified optimum, and the fit is within twice the noise of the truth."""
    from tessera.data.counts import count
    from tessera.release import Budget, answer

    path = shared_data / "nltcs.csv"
    if not path.exists():
        pytest.skip(f"shared data file not found: {path}")
    domain = Domain.load(shared_data / "nltcs-domain.json")
    wl = Workload.of_families(domain, k_way_marginals(domain, 2))
    exact = count(path, wl)
    n = exact.n_rows
    rel = answer(path, wl, Budget.of(epsilon=1.0), neighbours="substitute", seed=2)
    syn = synthesize(rel, n=n, rng=0)
    sol = syn.solution
    assert sol.certified and len(sol.weights) <= wl.n_queries + 1
    truth = exact.answers / n
    noise = np.max(np.abs(sol.targets.values - truth))
    assert sol.alpha <= noise + 1e-9
    assert np.max(np.abs(sol.fitted - truth)) <= 2 * noise + 1e-9
