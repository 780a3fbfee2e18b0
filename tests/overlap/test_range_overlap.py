"""γ_w of a lazy range family in closed form (tessera.overlap.range_overlap) equals the exact
solvers on the same queries written out, for both neighbour relations, and its witness
attains it; the planted bug (c(x) = v(n−v), one short) is caught."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tessera.overlap import max_overlap
from tessera.overlap.range_overlap import solve_range_family
from tessera.schema.domain import Domain
from tessera.workload.ranges import RangeFamily, RangeQueries
from tessera.workload.workload import Workload


def _brute(dom: Domain, fam: RangeFamily, weight: float, comp: str, sub: bool) -> float:
    """max over rows (pairs) of Σ h(w) over I(x) (I(x) Δ I(y)), by enumeration."""
    queries = list(RangeQueries(dom, [fam]))
    h = weight if comp == "pure" else weight * weight
    cells = [dict(zip(fam.attributes, c)) for c in np.ndindex(*fam.sizes)]
    sets = [frozenset(i for i, q in enumerate(queries)
                      if all(c[p.attribute] in p.coverage for p in q.predicates))
            for c in cells]
    if sub:
        return h * max(len(a ^ b) for a in sets for b in sets)
    return h * max(len(a) for a in sets)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 4), st.sampled_from(["ranges", "prefixes"]),
       st.booleans(), st.sampled_from(["pure", "zcdp"]), st.sampled_from([1.0, 0.5, 2.0]),
       st.booleans())
def test_closed_form_equals_enumeration(n, m, kind, two, comp, weight, sub):
    dom = Domain.from_dict({"attributes": {"x": {"type": "integer", "min": 0, "max": n - 1},
                                           "y": {"type": "integer", "min": 0, "max": m - 1}}})
    fam = RangeFamily.of(dom, ["x", "y"] if two else ["x"], kind, weight)
    wl = Workload.of_ranges(dom, [fam])
    nb = "substitute" if sub else "add-remove"
    got = max_overlap(wl, comp=comp, neighbours=nb)
    assert got.exact and got.method.startswith("range family")
    want = _brute(dom, fam, weight, comp, sub)
    assert got.score_bound == pytest.approx(want, rel=1e-12)
    # the witness attains it: its queries are I(x) (Δ I(y)) and number the score / h(w)
    h = weight if comp == "pure" else weight * weight
    assert len(got.witness.queries) == round(want / h)
    # the general solvers on the same queries written out agree
    written = Workload.of(dom, list(wl.queries), weights=[weight] * fam.n_queries)
    assert written.range_families is None
    general = max_overlap(written, comp=comp, neighbours=nb)
    assert general.score_bound == pytest.approx(want, rel=1e-9)


def test_a_planted_off_by_one_is_caught():
    """The test above can fail: a closed form of v(n − v) instead of (v + 1)(n − v)."""
    dom = Domain.from_dict({"attributes": {"x": {"type": "integer", "min": 0, "max": 4}}})
    fam = RangeFamily.of(dom, ["x"])
    v = np.arange(5)
    planted = float(np.max(v * (5 - v)))
    assert planted != _brute(dom, fam, 1.0, "pure", False)
    assert solve_range_family(dom, fam, 1.0, "pure", "add-remove").score_bound == \
        _brute(dom, fam, 1.0, "pure", False)


def test_1024_values():
    dom = Domain.from_dict({"attributes": {"x": {"type": "integer", "min": 0, "max": 1023}}})
    wl = Workload.of_ranges(dom, [RangeFamily.of(dom, ["x"])])
    assert max_overlap(wl, comp="zcdp").bound == 262_656.0  # (512)(512)+... = max (v+1)(n−v)
    assert max_overlap(wl, comp="pure", neighbours="substitute").exact
