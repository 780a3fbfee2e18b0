"""``tessera answer --estimate adaptive``: no charge for a release the engine cannot deliver.

* queries the model reads by one more engine pass are answered in groups that fit the
  engine's memory guard (:func:`tessera.estimation.maxent.added_query_probabilities`): with a
  limit that refuses the whole group but fits each query, the answers equal the joint
  distribution's (brute force); a version that runs the group in one pass is refused;
* a query that fits no model (a Boolean clause whose automaton alone needs > 2 GiB) is refused
  before the charge, from the CLI, with a one-line error naming it: the ledger has no entry
  (a version whose check runs after the charge leaves an aborted entry and fails).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.errors import ResourceError
from tessera.estimation.maxent import ScopeModel, added_query_probabilities
from tessera.release import Ledger
from tessera.schema.domain import Domain
from tessera.synth.sensitive import Evaluator
from tessera.workload.workload import Workload


def _conjunctions(dom: Domain, k: int, width: int, seed: int) -> list:  # type: ignore[type-arg]
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(k):
        attrs = rng.choice(len(dom), width, replace=False)
        lines.append(" AND ".join(f"{dom.names[a]} = {int(rng.integers(0, 2))}" for a in attrs))
    return list(Workload.from_sql(lines, dom).queries)


def test_queries_answered_in_groups_that_fit_equal_the_joint() -> None:
    """8 binary attributes, a model over a chain of pairs with random θ, 12 conjunctions of 5
    attributes: with a memory limit under the 12 queries' one-pass need but over each one's,
    every P_θ(q) equals Σ_x P_θ(x) q(x) (brute force over the 256 points)."""
    dom = Domain.from_dict({f"x{i}": 2 for i in range(8)})
    model = ScopeModel(dom, [(i, i + 1) for i in range(7)])
    theta = np.random.default_rng(5).normal(0, 1.0, model.n_parameters)
    queries = _conjunctions(dom, 12, 5, seed=7)
    limit = 128 << 10  # each query alone: ≤ 4.3 KiB of tables, ≤ 100.3 KiB to compile;
    # all 12 in one pass: 22.5 KiB of tables, 939 KiB to compile
    with pytest.raises(ResourceError):  # the group in one pass does not fit this limit
        ScopeModel(dom, model.scopes, [(-1 - j, q) for j, q in enumerate(queries)],
                   memory_limit=limit)
    got = added_query_probabilities(model, theta, queries, memory_limit=limit)
    joint = model.joint(theta, dom.size)
    assert joint is not None
    points = np.array(list(itertools.product(range(2), repeat=8)), dtype=np.int64)
    want = Evaluator(dom, queries).matrix(points).astype(np.float64) @ joint.ravel()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_a_single_query_that_never_fits_is_named() -> None:
    dom = Domain.from_dict({f"x{i}": 2 for i in range(8)})
    model = ScopeModel(dom, [(i,) for i in range(8)])
    queries = _conjunctions(dom, 3, 5, seed=1)
    with pytest.raises(ResourceError, match="^query a: the dynamic program needs"):
        added_query_probabilities(model, model.zero(), queries, ["a", "b", "c"],
                                  memory_limit=8)


K = 13  # (x_i AND y_i) OR … over 13 pairs, read x0…x12 then y0…y12: 2^13 states, 8.7 GiB


@pytest.fixture
def clause_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    names = [f"x{i}" for i in range(K)] + [f"y{i}" for i in range(K)]
    (tmp_path / "schema.yaml").write_text(
        "attributes:\n" + "".join(f"  {n}: {{type: integer, min: 0, max: 1}}\n" for n in names))
    rng = np.random.default_rng(0)
    pd.DataFrame({n: rng.integers(0, 2, 60) for n in names}).to_csv(tmp_path / "d.csv",
                                                                      index=False)
    clause = " OR ".join(f"(x{i} = 1 AND y{i} = 1)" for i in range(K))
    (tmp_path / "w.sql").write_text(f"pairs: {clause}\nsmall: x0 = 1 AND y0 = 0\n")
    r = CliRunner().invoke(app, ["ledger", "init", "L.db", "-s", "schema.yaml", "--rho", "1"])
    assert r.exit_code == 0, r.output
    return tmp_path


def test_a_query_no_model_can_answer_is_refused_before_the_charge(clause_files: Path) -> None:
    r = CliRunner().invoke(app, ["answer", "d.csv", "w.sql", "-s", "schema.yaml", "--rho", "0.5",
                                 "--estimate", "adaptive", "--ledger", "L.db", "--seed", "1"])
    assert r.exit_code != 0
    assert "Traceback" not in r.output
    assert "query 'pairs'" in r.output and "nothing was charged" in r.output, r.output
    assert "--estimate gls" in r.output
    s = Ledger.open(clause_files / "L.db").summary()
    assert len(s.releases) == 0 and s.spent == 0, [c.status for c in s.releases]
