"""What one person costs equals brute force (docs/theory.md §3.13; tessera.privacy.PrivacyUnit).

On small domains (≤ 4 attributes, ≤ 16 points) every multiset of at most K rows (K ∈ {1, 2, 3})
is enumerated — and under substitution every pair of them — and the largest change of the
answer vector is computed directly: Σ_q c_q |Δ_q| (pure ε, the L1 sensitivity) and
Σ_q c_q Δ_q² (ρ-zCDP, the squared L2 sensitivity). Both the calibration's person γ
(:func:`tessera.overlap.max_overlap` with a unit) and the accounting's exact person cost
(:func:`tessera.release.exact_costs.cost_bound` with a unit) must equal it exactly.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.overlap import max_overlap
from tessera.overlap.result import h
from tessera.privacy import Definition, Neighbours, PrivacyUnit
from tessera.release.exact_costs import cost_bound
from tessera.schema.domain import Domain
from tessera.workload.parse import parse_query

from .cases import small_workload


def person_brute_force(dom: Domain, queries: list, costs: np.ndarray, k: int,
                       neighbours: Neighbours, squared: bool) -> int:
    """max over one person's change of Σ_q c_q |Δ_q| (or Σ_q c_q Δ_q²), by enumeration:
    add/remove — a multiset of 1..k rows against none; substitute — any two multisets of
    0..k rows (one person's rows replaced; the number of rows need not stay)."""
    points = list(itertools.product(*(range(s) for s in dom.sizes)))
    v = np.array([[int(q(dom, x)) for q in queries] for x in points], dtype=np.int64)
    v = v.reshape(len(points), len(queries))
    sums = [np.zeros(len(queries), dtype=np.int64)]
    for size in range(1, k + 1):
        for m in itertools.combinations_with_replacement(range(len(points)), size):
            sums.append(v[list(m)].sum(axis=0))
    s = np.array(sums)
    c = np.asarray(costs, dtype=np.int64)

    def score(delta: np.ndarray) -> np.ndarray:
        return (np.abs(delta) if not squared else delta * delta) @ c

    if neighbours is Neighbours.ADD_REMOVE:
        return int(score(s).max())
    return int(max(score(s - row).max() for row in s))


@st.composite
def cases(draw: st.DrawFn) -> tuple[Domain, list, np.ndarray]:
    dom, _, queries = small_workload(draw, 6)
    if draw(st.booleans()):  # a tautology: free under row substitution, not for a person
        queries.append(parse_query("TRUE", dom))
    weights = np.array([draw(st.integers(0, 3)) for _ in queries], dtype=np.float64)
    return dom, queries, weights


@settings(max_examples=120, deadline=None, derandomize=True)
@given(case=cases(), k=st.integers(1, 3),
       neighbours=st.sampled_from([Neighbours.ADD_REMOVE, Neighbours.SUBSTITUTE]),
       definition=st.sampled_from([Definition.PURE, Definition.ZCDP]))
def test_person_cost_equals_brute_force(case: tuple, k: int, neighbours: Neighbours,
                                        definition: Definition) -> None:
    dom, queries, w = case
    unit = PrivacyUnit("pid", k)
    squared = definition is Definition.ZCDP
    # calibration: γ_w's score with h(w) = w (pure) or w² (zCDP): L1 resp. squared L2
    cal = max_overlap(queries, w, domain=dom, comp=definition, neighbours=neighbours, unit=unit)
    hw = h(definition, w).astype(np.int64)
    want = person_brute_force(dom, queries, hw, k, neighbours, squared)
    assert cal.exact and cal.score_bound == want == cal.score_achieved
    assert cal.unit == unit
    # accounting: per-query costs c (ε or ρ) composed linearly, K or K² times a row's
    costs = w.astype(np.int64)
    acc = cost_bound(dom, queries, w, neighbours=neighbours, unit=unit, definition=definition)
    want_acc = person_brute_force(dom, queries, costs, k, neighbours, squared)
    assert acc.value == Fraction(want_acc) == acc.achieved_value and acc.exact


def test_row_add_remove_is_not_below_row_substitution_in_general() -> None:
    """Why a person substituted pays the larger of the two row scores: the total count costs a
    row nothing under substitution, but a person's rows may change in number (K, not 0)."""
    dom = Domain.from_dict({"a": 2})
    queries = [parse_query("TRUE", dom)]
    row = max_overlap(queries, domain=dom, neighbours=Neighbours.SUBSTITUTE)
    assert row.bound == 0.0
    person = max_overlap(queries, domain=dom, neighbours=Neighbours.SUBSTITUTE,
                         unit=PrivacyUnit("pid", 3))
    assert person.bound == 3.0 == person_brute_force(dom, queries, np.ones(1, dtype=np.int64),
                                                     3, Neighbours.SUBSTITUTE, False)


def test_gdp_gamma_grows_by_k() -> None:
    """μ-GDP: γ = √S per row, K√S per person (the ℓ2 sensitivity K·√γ(c))."""
    dom = Domain.from_dict({"a": 3, "b": 2})
    queries = [parse_query(t, dom) for t in ("a = 0", "a <= 1", "b = 1")]
    row = max_overlap(queries, domain=dom, comp="gdp")
    person = max_overlap(queries, domain=dom, comp="gdp", unit=PrivacyUnit("pid", 5))
    assert person.score_bound == 25 * row.score_bound
    assert math.isclose(person.bound, 5 * row.bound, rel_tol=1e-15)
