"""Certificates of releases whose workload has BDD queries, verified from the command line.

``tessera verify CERT WORKLOAD --schema S`` reads the workload from a file; a BDD query had no
file syntax, so such a certificate verified from the library only. A workload file now holds a
BDD query as its canonical text (:mod:`tessera.workload.bdd`):

* save → load gives back the same queries, hence the same workload hash, in the text, YAML and
  JSON formats (symmetric queries keep their symmetric form); malformed texts are one-line
  errors naming the line;
* end to end: ``tessera answer --estimate adaptive`` on a workload file with BDD queries writes a
  certificate that ``tessera verify`` accepts untouched and rejects after a one-field edit.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.engine.bdd import at_least, bdd_manager, disjunction, from_expr, parity
from tessera.errors import TesseraError
from tessera.schema.domain import Domain
from tessera.workload.bdd import BooleanQuery
from tessera.workload.canonical import workload_hash
from tessera.workload.workload import Workload

SCHEMA = ("attributes:\n" + "".join(f"  {v}: {{type: integer, min: 0, max: 1}}\n"
                                    for v in "abcd") + "  e: {type: integer, min: 0, max: 2}\n")


def _workload(dom: Domain) -> Workload:
    mgr = bdd_manager(["a", "b", "c", "d"])
    qs = [from_expr(mgr, r"(a /\ ~b) \/ c"), disjunction(mgr, {"a": 1, "d": 0}),
          parity(mgr, ["b", "c", "d"]), at_least(mgr, ["a", "b", "c"], 2)]
    pred = Workload.from_sql(["e = 1 AND a = 0"], dom)
    return Workload.of(dom, [*pred.queries, *qs], names=["p", "f", "g", "h", "k"])


@pytest.mark.parametrize("suffix", [".sql", ".yaml", ".json"])
def test_bdd_queries_read_back_with_the_same_hash(tmp_path: Path, suffix: str) -> None:
    dom = Domain.from_dict({"a": 2, "b": 2, "c": 2, "d": 2, "e": 3})
    w = _workload(dom)
    w.save(tmp_path / f"w{suffix}")
    back = Workload.load(tmp_path / f"w{suffix}", dom)
    assert workload_hash(back) == workload_hash(w)
    assert list(back.names) == list(w.names)
    for q, r in zip(w.queries[1:], back.queries[1:]):
        assert isinstance(r, BooleanQuery) and r.symmetric == q.symmetric  # type: ignore
        assert r.canonical_text() == q.canonical_text()  # type: ignore[union-attr]


@pytest.mark.parametrize("line, says", [
    ("f: BDD[a,b](ite(a, b", "cannot read the BDD query"),
    ("f: BDD[a,e](ite(a, TRUE, e))", "'e' has 3 values"),
    ("f: BDD[a,z](a)", "'z' is not an attribute"),
    ("f: BDD[a,b](ite(a, TRUE, b)) symmetric(and, [('a', 1), ('b', 1)], 1)",
     "another function"),
])
def test_malformed_bdd_lines_are_one_line_errors(tmp_path: Path, line: str, says: str) -> None:
    dom = Domain.from_dict({"a": 2, "b": 2, "e": 3})
    (tmp_path / "w.sql").write_text(f"p: a = 1\n{line}\n")
    with pytest.raises(TesseraError, match=says) as e:
        Workload.load(tmp_path / "w.sql", dom)
    assert "w.sql:2" in str(e.value)


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "schema.yaml").write_text(SCHEMA)
    dom = Domain.load(tmp_path / "schema.yaml")
    _workload(dom).save(tmp_path / "w.sql")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({v: rng.integers(0, 2, 400) for v in "abcd"})
    frame["e"] = rng.integers(0, 3, 400)
    frame.to_csv(tmp_path / "d.csv", index=False)
    return tmp_path


def test_cli_verifies_a_bdd_certificate_and_rejects_an_edit(files: Path) -> None:
    run = CliRunner().invoke
    r = run(app, ["answer", "d.csv", "w.sql", "-s", "schema.yaml", "--rho", "1", "--estimate",
                  "adaptive", "-o", "a.csv", "--certificate", "c.json"])  # private: verifiable
    assert r.exit_code == 0, r.output
    assert "BDD[" in (files / "w.sql").read_text()
    r = run(app, ["verify", "c.json", "w.sql", "-s", "schema.yaml"])
    assert r.exit_code == 0 and "verified" in r.output, r.output
    doc = json.loads((files / "c.json").read_text())
    doc["steps"][-1]["cost"]["rho"] = 1e-9  # one edited field: the last step's cost
    (files / "edited.json").write_text(json.dumps(doc))
    r = run(app, ["verify", "edited.json", "w.sql", "-s", "schema.yaml"])
    assert r.exit_code != 0 and "NOT check out" in r.output and "Traceback" not in r.output
    # another function under the same name: the workload's hash differs, refused
    (files / "other.sql").write_text((files / "w.sql").read_text().replace(
        "ite(a, ite(b, c, TRUE), c)", "ite(a, ite(b, TRUE, c), c)"))
    r = run(app, ["verify", "c.json", "other.sql", "-s", "schema.yaml"])
    assert r.exit_code != 0 and "Traceback" not in r.output, r.output
