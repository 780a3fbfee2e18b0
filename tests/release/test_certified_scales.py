"""Every certificate a release writes is one ``verify`` accepts: the release proves its scales'
spend with verify's own re-check, from the scales as the certificate states them, and widens
them when that proof needs a margin (:func:`tessera.release.plan.certify`).

The re-check bounds max over one neighbour change of Σ c_q with a solver on costs rounded up to
a grid (the exact costs' 2^-k multiples below ``SCORE_LIMIT``, then ToulBar2's 2^40 integers),
so its bound can lie above the row the calibration's own oracle bounded by more than the
calibration's rounding margin (``widened``: 1e-12 + 8t ulp). A release that accepted such a
plan on its calibration's proof wrote a certificate ``verify`` could not prove ("the stated
noise re-checks at ≤ 1.000000000007276, which does not prove the budget 1"). Here the re-check
is made coarse — ``SCORE_LIMIT`` lowered, and no exact enumeration to settle it
(``REFINE_MAX_SETS`` 0): a coarser grid is still a proven upper bound, so both the release and
verify stay sound, and the disagreement shows on small workloads in under a second. The
property test draws random workloads, budgets in every definition, both neighbour relations,
every strategy and allocation, and the re-check's coarseness.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from fractions import Fraction
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import tessera.overlap.routes as routes
import tessera.release.exact_costs as exact_costs
import tessera.release.plan as plan_module
from tessera.errors import TesseraError
from tessera.release import Budget, Ledger, answer, verify_certificate
from tessera.release.certificate import digest
from tessera.schema.domain import Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.families import Partition
from tessera.workload.query import Query
from tessera.workload.ranges import RangeFamily
from tessera.workload.workload import Workload

DOMAIN = Domain.from_dict({"a": 4, "b": 3, "c": 2})
#: one busy row and lonely queries: the optimal split is far from uniform
CLAUSES = ["a = 0", "b = 0", "a = 0 AND c = 0", "a <= 1 AND b = 0", "a = 3", "b = 2 AND a >= 2",
           "c = 1 AND a = 2"]
#: the exact costs on a 2^-k grid with Σ < 2^24 (shipped: 2^51): a bound ~1e-7 above its row
COARSE = 2**24


def _frame(dom: Domain, seed: int = 0, n: int = 60) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({a.name: rng.integers(0, a.size, n) for a in dom})


@contextmanager
def _coarse(score_limit: int = COARSE) -> Iterator[None]:
    """The re-check's bound on a coarse grid, not settled by enumeration (module docs)."""
    with mock.patch.object(exact_costs, "SCORE_LIMIT", score_limit), \
            mock.patch.object(exact_costs, "REFINE_MAX_SETS", 0):
        yield


def _released(data: pd.DataFrame, wl: Workload, budget: Budget, **options: Any
              ) -> dict[str, Any]:
    """The certificate as the file holds it (JSON written and read back)."""
    return json.loads(json.dumps(answer(data, wl, budget, **options).certificate))


def _scales(cert: dict[str, Any]) -> list[float | None]:
    return [q["scale"] for q in [*cert["queries"], *cert["families"]]]


# -- the failure as reported, on a small workload -------------------------------------------------

CASES = [(rel, budget, repeat)
         for rel in ("add-remove", "substitute")
         for budget in (Budget.of(epsilon=1.0), Budget.of(rho=0.3))
         for repeat in (False, True)]


@pytest.mark.filterwarnings("ignore::tessera.errors.QueryWarning")  # generated names repeat
@pytest.mark.parametrize(("neighbours", "budget", "repeat"), CASES,
                         ids=[f"{n}-{b.definition.value}-{'strategy' if r else 'plan'}"
                              for n, b, r in CASES])
def test_a_certificate_verifies_when_the_recheck_is_coarser_than_the_calibration(
        neighbours: str, budget: Budget, repeat: bool) -> None:
    """The optimal split of 7 predicate queries (``repeat``: one twice, so the strategy
    chooser's ``direct`` measures them), the re-check coarse. Before the fix the release
    accepted the calibration's scales on the calibration's own proof and 6 of these 8
    certificates failed ``verify`` ("... does not prove the budget ..."; the other two, under
    substitution through the chooser, measure the uniform split, which verify recomputes).
    Now the release widens its scales by the re-check's own margin — each the same or larger,
    by less than 1e-5 — and verify proves them; the calibration's scales in their place still
    fail: verify was not weakened."""
    wl = Workload.from_sql(CLAUSES + CLAUSES[:1] if repeat else CLAUSES, DOMAIN)
    shipped = _released(_frame(DOMAIN), wl, budget, neighbours=neighbours)  # the fine re-check
    assert "widened" not in shipped["allocation"]["method"]
    with _coarse():
        cert = _released(_frame(DOMAIN), wl, budget, neighbours=neighbours)
        result = verify_certificate(cert, wl)
        assert result.ok, result.differences
        assert "widened" in cert["allocation"]["method"], cert["allocation"]["method"]
        calibrated = np.array(_scales(shipped), dtype=float)
        widened = np.array(_scales(cert), dtype=float)
        assert np.all(widened >= calibrated)
        assert 0 < np.max(widened / calibrated - 1) < 1e-5  # the grid's size, no utility lost
        doc = json.loads(json.dumps(cert))  # the calibration's scales, stated as they were
        for q, scale in zip([*doc["queries"], *doc["families"]], _scales(shipped)):
            q["scale"] = scale
        doc["digest"] = digest(doc)
        unwidened = verify_certificate(doc, wl).differences
        if shipped["allocation"]["kind"] == "optimal":  # (verify recomputes a uniform split)
            assert any("does not prove" in d for d in unwidened), unwidened
        else:
            assert unwidened


def test_a_plan_the_recheck_cannot_prove_is_refused_before_the_charge(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A re-check that never proves the budget (every widening still unproven): the release is
    refused with the re-check's figure and a hint, and the ledger charges nothing."""
    book = Ledger.init(tmp_path / "L.db", total=5.0, definition="pure",
                       neighbours="add-remove", domain=DOMAIN, dataset="d")
    wl = Workload.from_sql(CLAUSES, DOMAIN)

    def never(workload, costs, neighbours, total, time_limit, **_):  # type: ignore[no-untyped-def]
        raise plan_module.Unproven("the stated noise re-checks at ≤ 2, which does not prove "
                                   "the budget 1", hint="", bound=Fraction(2),
                                   achieved=Fraction(1, 2))

    with mock.patch.object(plan_module, "recheck_spent", never), \
            pytest.raises(TesseraError, match="nothing was charged") as err:
        answer(_frame(DOMAIN), wl, Budget.of(epsilon=1.0), ledger=book)
    assert "--time-limit" in str(err.value)
    assert book.spent() == 0


# -- the reported shape: 200 random conjunctions over 9 attributes -----------------------------


def _random_conjunctions(seed: int, n_attrs: int = 9, t: int = 200, p: float = 0.3) -> Workload:
    """t random conjunctions (ranges or value sets on each attribute with probability p)."""
    rng = np.random.default_rng(seed)
    dom = Domain.from_dict({f"a{i}": int(rng.integers(2, 9)) for i in range(n_attrs)})
    queries = []
    for _ in range(t):
        cover = {}
        for attr in dom:
            if rng.random() < p:
                k = attr.size
                if rng.random() < 0.5:
                    lo = int(rng.integers(0, k))
                    cover[attr.name] = IntervalSet.range(lo, int(rng.integers(lo + 1, k + 1)))
                else:
                    cover[attr.name] = IntervalSet.points(
                        np.flatnonzero(rng.random(k) < 0.5).tolist() or [0])
        queries.append(Query.conjunction(dom, cover))
    return Workload.of(dom, queries, names=[f"q{i}" for i in range(t)])


#: the branch and bound's wall-clock warm-up before ToulBar2 takes over, as shipped and as on a
#: loaded machine (where 200 queries do not get proved in the 1 s)
SHIPPED, LOADED = routes.TOULBAR2_WARMUP_SECONDS, 0.05


@pytest.mark.slow
@pytest.mark.parametrize(("seed", "budget", "neighbours", "release_warmup", "verify_warmup"), [
    (0, Budget.of(epsilon=1.0), "add-remove", LOADED, LOADED),
    (0, Budget.of(epsilon=1.0), "add-remove", SHIPPED, LOADED),
    (1, Budget.of(rho=0.3), "substitute", SHIPPED, SHIPPED),
], ids=["eps-1-loaded", "eps-1-verified-loaded", "rho-0.3-substitute"])
def test_the_reported_release_verifies(seed: int, budget: Budget, neighbours: str,
                                       release_warmup: float, verify_warmup: float) -> None:
    """200 random conjunctions over 9 attributes, strategy direct (its optimal split). Before the
    fix each certificate failed verify: "the stated noise re-checks at ≤ …, which does not prove
    the budget". ε = 1, released and verified as on a loaded machine: at ≤ 1.0000000000014744,
    ToulBar2's bound, ~1.9e-10 above its row on costs rounded to its 2^40 grid (γ_w 51, exact);
    released on an idle machine (the branch and bound proves the maximum exactly, spent
    1 − 2.9e-12) and verified on a loaded one: at ≤ 1.000000000186148, ToulBar2's again.
    ρ = 0.3 under substitution: at ≤ 0.306–0.372 (with the time it got), the route over > 60
    queries and > 6 attributes, min(2·S_add/remove, Σ). 10–90 s each."""
    wl = _random_conjunctions(seed)
    with mock.patch.object(routes, "TOULBAR2_WARMUP_SECONDS", release_warmup):
        cert = _released(_frame(wl.domain, n=300), wl, budget, neighbours=neighbours,
                         strategy="direct")
    with mock.patch.object(routes, "TOULBAR2_WARMUP_SECONDS", verify_warmup):
        result = verify_certificate(cert, wl)
    assert result.ok, result.differences
    assert cert["strategy"]["direct_split"] == "optimal"


# -- the property: verify accepts every untouched certificate ------------------------------------

BUDGETS = st.one_of(
    st.floats(0.2, 4.0).map(lambda e: Budget.of(epsilon=round(e, 3))),
    st.floats(0.05, 2.0).map(lambda r: Budget.of(rho=round(r, 3))),
    st.tuples(st.floats(0.3, 4.0), st.sampled_from([1e-5, 1e-6, 1e-9])).map(
        lambda ed: Budget.of(epsilon=round(ed[0], 3), delta=ed[1])),
    st.floats(0.2, 3.0).map(lambda m: Budget.of(mu=round(m, 3))),
)


def _predicates(rng: np.random.Generator, weights: str, repeat: bool) -> Workload:
    """2–8 random conjunctions over 1–3 attributes of size 2–5 (ranges and value sets, some
    empty); ``weights`` equal, varied, or with a 0 (not released); ``repeat``: one query twice."""
    dom = Domain.from_dict({f"a{i}": int(rng.integers(2, 6))
                            for i in range(int(rng.integers(1, 4)))})
    queries = []
    for _ in range(int(rng.integers(2, 9))):
        cover = {}
        for attr in dom:
            if rng.random() < 0.6:
                k = attr.size
                if rng.random() < 0.5:
                    lo = int(rng.integers(0, k))
                    cover[attr.name] = IntervalSet.range(lo, int(rng.integers(lo, k + 1)))
                else:
                    cover[attr.name] = IntervalSet.points(
                        np.flatnonzero(rng.random(k) < 0.5).tolist())
        queries.append(Query.conjunction(dom, cover))
    if repeat:
        queries.append(queries[0])
    w = {"equal": np.ones(len(queries)),
         "varied": rng.choice([0.5, 1.0, 2.0, 3.0], len(queries)),
         "zero": np.r_[0.0, np.ones(len(queries) - 1)]}[weights]
    return Workload.of(dom, queries, names=[f"q{i}" for i in range(len(queries))],
                       weights=[float(x) for x in w])


def _marginals(rng: np.random.Generator) -> Workload:
    """1–3 marginals (weights 0.5–2) over 2–3 attributes of size 2–4."""
    dom = Domain.from_dict({f"a{i}": int(rng.integers(2, 5))
                            for i in range(int(rng.integers(2, 4)))})
    names = [a.name for a in dom]
    fams = []
    for k in range(int(rng.integers(1, 4))):
        scope = sorted(rng.choice(names, int(rng.integers(1, len(names) + 1)), replace=False))
        fams.append(Partition.marginal(dom, list(scope), float(rng.choice([0.5, 1.0, 2.0])),
                                       name=f"m{k}"))
    return Workload.of_families(dom, fams)


def _ranges(rng: np.random.Generator) -> Workload:
    """Every range (or prefix) over one attribute of size 4–24, or over two of size 3–6."""
    kind = str(rng.choice(["ranges", "prefixes"]))
    if rng.random() < 0.7:
        dom = Domain.from_dict({"x": int(rng.integers(4, 25))})
        return Workload.of_ranges(dom, [RangeFamily.of(dom, ["x"], kind)])
    dom = Domain.from_dict({"x": int(rng.integers(3, 7)), "y": int(rng.integers(3, 7))})
    return Workload.of_ranges(dom, [RangeFamily.of(dom, ["x", "y"], kind)])


@st.composite
def releases(draw: st.DrawFn) -> tuple[Workload, Budget, dict[str, Any], int]:
    """(W, budget, answer's options, the re-check's SCORE_LIMIT)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["predicates", "marginals", "ranges"]))
    options: dict[str, Any] = {
        "neighbours": draw(st.sampled_from(["add-remove", "substitute"])),
        "objective": draw(st.sampled_from(["total", "max"])),
    }
    if kind == "predicates":
        wl = _predicates(rng, draw(st.sampled_from(["equal", "varied", "zero"])),
                         draw(st.booleans()))
        options["strategy"] = draw(st.sampled_from(["auto", "direct"]))
        options["allocation"] = draw(st.sampled_from(
            ["auto", "auto", "uniform", "shares", "optimal", "importance"]))
    elif kind == "marginals":
        wl = _marginals(rng)
        options["strategy"] = draw(st.sampled_from(["auto", "direct", "identity", "residual"]))
    else:
        wl = _ranges(rng)
        options["strategy"] = draw(st.sampled_from(["auto", "direct", "identity",
                                                    "hierarchical"]))
    # the re-check's grid: as shipped, or coarser (a bound further above its row)
    score_limit = draw(st.sampled_from([exact_costs.SCORE_LIMIT, 2**30, 2**24]))
    return wl, draw(BUDGETS), options, score_limit


def _verifies(case: tuple[Workload, Budget, dict[str, Any], int]) -> None:
    wl, budget, options, score_limit = case
    event(f"definition {budget.definition.value}, {options['neighbours']}")
    event(f"re-check grid 2^{score_limit.bit_length() - 1}")
    with _coarse(score_limit) if score_limit != exact_costs.SCORE_LIMIT else nullcontext():
        try:
            cert = _released(_frame(wl.domain), wl, budget, **options)
        except TesseraError as e:
            # refused before anything is released, as documented: a workload whose every
            # query is a contradiction (γ_w = 0) or of weight 0 releases nothing
            if any(s in str(e) for s in ("nothing would be released",
                                         "no noise scale can be calibrated")):
                event("refused: nothing to release")
                return
            raise
        result = verify_certificate(cert, wl)
    chosen = cert.get("strategy", {}).get("chosen", "W as given")
    event(f"measured: {chosen}, allocation {cert['allocation']['kind']}")
    event("scales widened" if "widened" in cert["allocation"]["method"] else "not widened")
    assert result.ok, (options, budget, result.differences)


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(releases())
def test_verify_accepts_every_untouched_certificate(
        case: tuple[Workload, Budget, dict[str, Any], int]) -> None:
    _verifies(case)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(releases())
def test_verify_accepts_every_untouched_certificate_many(
        case: tuple[Workload, Budget, dict[str, Any], int]) -> None:
    _verifies(case)
