"""IPMWU (docs/theory.md §5): selection law, accounting, parameters, inputs, sign convention.

Trajectory tests against the explicit-histogram baseline are in ``test_mwem.py``.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from tessera.engine import GibbsModel
from tessera.engine.families import hierarchical_disjunctions, tree_marginals
from tessera.errors import TesseraError
from tessera.mechanisms import NoiseSource
from tessera.privacy import Definition, Neighbours
from tessera.schema.domain import Domain
from tessera.synth import accounting
from tessera.synth.accounting import Budget, plan, prove, select
from tessera.synth.ipmwu import ipmwu
from tessera.synth.parameters import MAX_DEFAULT_ROUNDS, default_parameters
from tessera.synth.sensitive import Evaluator, sensitive_counts
from tessera.workload.workload import Workload
from tests.mechanisms.checks import P_REJECT, categorical_chi_square


def data_for(family, n: int, seed: int = 0) -> np.ndarray:  # noqa: ANN001
    rng = np.random.default_rng(seed)
    model = GibbsModel(family.domain, family.queries, rng.normal(size=len(family.queries)))
    return model.sample(n, rng)


# -- the exponential mechanism of a round -------------------------------------------------------

N = 100
COUNTS = np.array([10, 40, 25, 5, 33, 20])  # q_f(X)
SYNTHETIC = np.array([0.2, 0.2, 0.5, 0.1, 0.3, 0.4])  # v_f = f(S_t) or ⟨f, h_t⟩


def paper_law(eps0: float, factor: float) -> np.ndarray:
    """P[f] ∝ exp(ε₀ · |f(X) − v_f| / (factor · Δ)) on normalised answers, Δ = 1/n:
    factor 2 is the corrected law (docs/theory.md §5), factor 1 paper 2's printed one."""
    score = np.abs(COUNTS / N - SYNTHETIC)
    u = eps0 * score / (factor * (1.0 / N))
    w = np.exp(u - u.max())
    return w / w.sum()


def round_selection(epsilon: float, rounds: int):  # noqa: ANN201
    """The selection mechanism IPMWU calibrates for this budget (ε₀ = ε/(2T))."""
    mech = plan(Budget.of(epsilon=epsilon), rounds).selection
    assert mech.epsilon == pytest.approx(epsilon / (2 * rounds), rel=1e-15)
    return mech


def test_selection_follows_exp_eps_score_over_2_delta_seeded() -> None:
    mech = round_selection(epsilon=5.0, rounds=5)  # ε₀ = 0.5
    idx, step = select(mech, COUNTS, SYNTHETIC, N, NoiseSource.seeded(1), runs=100_000)
    assert not step.mechanism.private
    assert categorical_chi_square(idx, paper_law(0.5, 2)) > P_REJECT
    # planted: paper 2's printed exp(ε·score/Δ) is rejected by the same test
    assert categorical_chi_square(idx, paper_law(0.5, 1)) < P_REJECT


def test_selection_follows_exp_eps_score_over_2_delta_secure() -> None:
    """The same law through OpenDP's make_noisy_max (secure randomness)."""
    mech = round_selection(epsilon=5.0, rounds=5)
    idx, step = select(mech, COUNTS, SYNTHETIC, N, NoiseSource.secure(), runs=4_000)
    assert step.mechanism.private
    assert categorical_chi_square(idx, paper_law(0.5, 2)) > P_REJECT
    assert categorical_chi_square(idx, paper_law(0.5, 1)) < P_REJECT


# -- accounting -----------------------------------------------------------------------------

BUDGETS = [
    {"epsilon": 1.0},
    {"epsilon": 0.7, "neighbours": "add-remove"},
    {"rho": 0.3},
    {"rho": 0.05, "neighbours": "add-remove"},
]


def by_hand(steps, definition: Definition) -> Fraction:  # noqa: ANN001
    """Σ of the step costs from their noise parameters, exactly (no per-step rounding)."""
    total = Fraction(0)
    for s in steps:
        m = s.mechanism
        if m.parameter == "ε":  # exponential mechanism, score sensitivity 1
            e = Fraction(m.value)
            total += e if definition is Definition.PURE else e * e / 8
        elif m.parameter == "scale b":  # discrete Laplace: ε = 1/b
            total += 1 / Fraction(m.value)
        else:  # discrete Gaussian: ρ = 1/(2σ²)
            total += 1 / (2 * Fraction(m.value) ** 2)
    return total


@pytest.mark.parametrize("budget", BUDGETS)
def test_spent_equals_what_the_accounting_proves(budget: dict) -> None:
    fam = tree_marginals(8, seed=2)
    X = data_for(fam, 1000)
    T = 15
    r = ipmwu(fam.domain, fam.queries, X, rounds=T, expectations="exact",
              source=NoiseSource.seeded(3), **budget)
    rec = r.record
    definition = Definition.PURE if "epsilon" in budget else Definition.ZCDP
    neighbours = Neighbours.parse(budget.get("neighbours", "substitute"))
    value = budget.get("epsilon", budget.get("rho"))
    assert rec.spent == rec.proved() == prove(rec.steps, definition, neighbours)
    assert rec.spent.definition is definition and rec.spent.neighbours is neighbours
    assert rec.budget == Budget.of(**budget).guarantee()
    # every mechanism that ran is a step: [total,] then a selection and a measurement per round
    roles = [(s.role, s.round) for s in rec.steps]
    total = [("total", 0)] if neighbours is Neighbours.ADD_REMOVE else []
    assert roles == total + [(k, t) for t in range(1, T + 1)
                             for k in ("selection", "measurement")]
    assert len(rec.transcript) == T
    # the spend: exactly the sum of the step costs (rounded up once per step), within budget
    spent = rec.spent.epsilon if definition is Definition.PURE else rec.spent.rho
    exact = by_hand(rec.steps, definition)
    assert Fraction(spent) >= exact and spent <= value
    assert spent == pytest.approx(float(exact), rel=1e-12)
    assert spent >= value * (1 - 1e-9)  # the split uses the whole budget
    if definition is Definition.PURE and neighbours is Neighbours.SUBSTITUTE:
        assert [s.mechanism.value for s in rec.steps[::2]] == [value / (2 * T)] * T
    # the proof sees every step: without the last one it proves less
    assert prove(rec.steps[:-1], definition, neighbours) != rec.spent
    assert not rec.private and "NOT PRIVATE" in rec.describe()


def test_zcdp_selection_is_bounded_range() -> None:
    """ρ/(2T) per step: the selection's ε²/8 and the measurement's 1/(2σ²) each fit it."""
    p = plan(Budget.of(rho=0.25), 10)
    share = Fraction(0.25) / 20
    assert Fraction(p.selection.rho()) <= share and Fraction(p.measurement.rho()) <= share
    assert p.selection.epsilon == pytest.approx(math.sqrt(8 * 0.25 / 20), rel=1e-12)
    assert p.planned.rho <= 0.25


def test_a_mismatch_between_plan_and_mechanisms_fails_closed(monkeypatch) -> None:  # noqa: ANN001
    """A measurement applied with the wrong sensitivity: the proof differs, nothing is released."""
    from tessera.synth import rounds as module

    real = module.measure

    def wrong(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        value, step = real(*args, **kwargs)
        return value, accounting.Step(step.role, step.round, step.mechanism, 2.0)

    monkeypatch.setattr(module, "measure", wrong)
    fam = tree_marginals(6)
    with pytest.raises(TesseraError, match="accounting mismatch"):
        ipmwu(fam.domain, fam.queries, data_for(fam, 100), epsilon=1.0, rounds=3,
              expectations="exact", source=NoiseSource.seeded(0))


def test_secure_run_is_private() -> None:
    fam = tree_marginals(6)
    r = ipmwu(fam.domain, fam.queries, data_for(fam, 300), epsilon=1.0, rounds=3, rng=0)
    assert r.private and r.record.spent == r.record.proved()
    assert "NOT PRIVATE" not in r.record.describe()
    assert "OpenDP" in r.record.source


def test_add_remove_normalises_by_the_noisy_total() -> None:
    fam = tree_marginals(6)
    X = data_for(fam, 500)
    r = ipmwu(fam.domain, fam.queries, X, epsilon=1.0, neighbours="add-remove",
              expectations="exact", source=NoiseSource.seeded(1))
    tr = r.record.transcript
    assert r.record.steps[0].role == "total" and tr.noisy_total is not None
    assert tr.normaliser == max(1, tr.noisy_total)
    assert r.record.parameters.normaliser == tr.normaliser  # defaults from n̂, not n
    np.testing.assert_array_equal(tr.answers, tr.noisy_counts / tr.normaliser)


# -- parameters --------------------------------------------------------------------------------


def test_default_parameters_follow_paper_2() -> None:
    L, F, n, eps = 64 * math.log(2), 316, 10_000, 1.0
    p = default_parameters(log_domain_size=L, n_queries=F, normaliser=n,
                           definition=Definition.PURE, value=eps)

    def alpha(t: int) -> float:
        return (L * math.log(F * t) / (n * eps)) ** (1 / 3)

    T = p.rounds  # the smallest T with ⌈L/α(T)²⌉ ≤ T
    assert math.ceil(L / alpha(T) ** 2) <= T
    assert math.ceil(L / alpha(T - 1) ** 2) > T - 1
    assert p.alpha == pytest.approx(alpha(T))
    assert p.step == pytest.approx(math.sqrt(L / T))
    assert p.sample_size == math.ceil(math.log(F * T) / alpha(T) ** 2)
    assert p.rows == round(n)  # N rows, like the data (issue 20 item 3)
    assert set(p.defaulted) == {"rounds", "step", "sample_size", "rows"}
    # zCDP: α = (√L ln(|F|T)/(2n√ρ))^{1/2}
    q = default_parameters(log_domain_size=L, n_queries=F, normaliser=n,
                           definition=Definition.ZCDP, value=0.5)
    a = (math.sqrt(L) * math.log(F * q.rounds) / (2 * n * math.sqrt(0.5))) ** 0.5
    assert q.alpha == pytest.approx(a) and math.ceil(L / a**2) <= q.rounds
    # overrides are kept; caps are reported
    o = default_parameters(log_domain_size=L, n_queries=F, normaliser=n,
                           definition=Definition.PURE, value=eps, rounds=7, step=0.5,
                           sample_size=11, rows=3)
    assert (o.rounds, o.step, o.sample_size, o.rows, o.defaulted) == (7, 0.5, 11, 3, ())
    big = default_parameters(log_domain_size=L, n_queries=F, normaliser=1e15,
                             definition=Definition.PURE, value=10.0)
    assert big.rounds == MAX_DEFAULT_ROUNDS and "rounds (capped)" in big.defaulted


def test_budget_must_be_one_of_epsilon_or_rho() -> None:
    fam = tree_marginals(4)
    X = data_for(fam, 50)
    with pytest.raises(TesseraError, match="exactly one budget"):
        ipmwu(fam.domain, fam.queries, X)
    with pytest.raises(TesseraError, match="exactly one budget"):
        ipmwu(fam.domain, fam.queries, X, epsilon=1.0, rho=0.1)
    r = ipmwu(fam.domain, fam.queries, X, epsilon=1.0, rounds=2, source=NoiseSource.seeded(0))
    with pytest.raises(TesseraError, match="spends no budget"):
        ipmwu(fam.domain, fam.queries, replay=r.record.transcript, epsilon=1.0)


# -- inputs ---------------------------------------------------------------------------------


def test_sensitive_counts_agree_across_inputs() -> None:
    fam = tree_marginals(6, seed=1)  # predicate conjunctions
    X = data_for(fam, 400)
    from_codes = sensitive_counts(fam.domain, fam.queries, X)
    brute = [int(q.evaluate(fam.domain, X).sum()) for q in fam.queries]
    assert from_codes.counts.tolist() == brute and from_codes.n == 400
    frame = pd.DataFrame(X.astype(np.int64), columns=list(fam.domain.names))
    workload = Workload.of(fam.domain, list(fam.queries), names=list(fam.names))
    assert sensitive_counts(fam.domain, workload, frame).counts.tolist() == brute
    assert sensitive_counts(fam.domain, fam.queries, frame).counts.tolist() == brute
    hier = hierarchical_disjunctions(9)  # Boolean queries: the compiled evaluator
    Y = data_for(hier, 300)
    ev = Evaluator(hier.domain, hier.queries)
    assert ev.counts(Y).tolist() == [int(f.evaluate(hier.domain, Y).sum()) for f in hier.queries]


# -- the multiplicative-weights step ----------------------------------------------------------


@pytest.mark.parametrize("update", ["unit", "mwem"])
def test_step_moves_the_selected_answer_towards_the_measurement(update: str) -> None:
    fam = tree_marginals(8, seed=5)
    r = ipmwu(fam.domain, fam.queries, data_for(fam, 2000), epsilon=4.0, rounds=6,
              expectations="exact", update=update, source=NoiseSource.seeded(6))
    rec = r.record
    for t in range(6):
        j, a, v = rec.transcript.selections[t], rec.transcript.answers[t], rec.synthetic[t]
        expected = (-rec.parameters.step * np.sign(v - a) if update == "unit"
                    else (a - v) / 2)
        assert rec.theta_steps[t] == expected
        assert r.theta(t + 1)[j] - r.theta(t)[j] == pytest.approx(expected, abs=1e-15)
        after = r.distribution(t + 1).expectations()[j]
        assert np.sign(after - v) == np.sign(a - v)  # h_{t+1} moved f_t towards a_t


def test_ipmwu_answers_track_the_data() -> None:
    """A sanity check of the theory's scale (α is an approximation, not a guarantee)."""
    fam = tree_marginals(10)
    X = data_for(fam, 20_000)
    truth = sensitive_counts(fam.domain, fam.queries, X).counts / 20_000
    uniform = np.abs(truth - GibbsModel(fam.domain, fam.queries).expectations()).max()
    r = ipmwu(fam.domain, fam.queries, X, epsilon=1.0, expectations="exact",
              source=NoiseSource.seeded(1), rng=2)
    err = np.abs(r.average_answers() - truth).max()
    assert err <= r.record.parameters.alpha and err < uniform / 4


def test_one_round_on_a_64_variable_tree_mrf() -> None:
    """Paper 2 §7.3's family (tw 2) at d = 64: a round is one engine pass plus m samples."""
    fam = tree_marginals(64)
    X = data_for(fam, 5000)
    t0 = time.perf_counter()
    r = ipmwu(fam.domain, fam.queries, X, epsilon=1.0, rounds=1, sample_size=2000, rows=2000,
              source=NoiseSource.seeded(0), rng=0)
    assert time.perf_counter() - t0 < 10
    assert r.rows.shape == (2000, 64) and r.record.width <= 3
    assert r.record.timings.rounds[0] < 2.0


def test_all_queries_at_once_count_as_one_by_one() -> None:
    """The round's all-queries count (table look-ups, an AND per query by reduceat) equals the
    per-query evaluation on random conjunctions, clauses and the tautology (brute force)."""
    import yaml

    domain = Domain.from_dict(yaml.safe_load("""attributes:
  a: {type: integer, min: 0, max: 6}
  b: {type: categorical, values: [x, y, z]}
  c: {type: boolean}
  d: {type: integer, min: 0, max: 3}
"""))
    rng = np.random.default_rng(11)
    texts = ["TRUE", "a < 3", "a >= 2 AND b = 'y'", "c = true AND d = 1 AND a = 6",
             "b = 'x' OR d >= 2", "NOT (c = true) AND a <= 4", "a = 0 OR a = 5 OR b = 'z'"]
    for _ in range(30):
        lo = int(rng.integers(0, 7))
        texts.append(f"a >= {lo} AND d < {int(rng.integers(1, 4))}"
                     + (" AND c = false" if rng.random() < 0.5 else ""))
    texts = list(dict.fromkeys(texts))  # distinct names
    w = Workload.from_sql(texts, domain)
    ev = Evaluator(domain, w.queries)
    for n in (0, 1, 7, 500):
        codes = np.column_stack([rng.integers(0, s, n) for s in domain.sizes])
        got = ev.counts(codes)
        one_by_one = ev.counts(codes, np.arange(len(texts)))
        brute = np.array([int(np.count_nonzero(q.evaluate(domain, codes))) for q in w.queries])
        np.testing.assert_array_equal(got, brute)
        np.testing.assert_array_equal(one_by_one, brute)
