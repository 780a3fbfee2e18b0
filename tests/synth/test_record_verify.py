"""Issue 20 item 4: a synthesis record anyone can verify. ``tessera verify run.json WORKLOAD
--schema S`` re-proves the spend from the record alone; the untouched record passes, every
single-field edit fails (by the digest), and every privacy-relevant edit fails even with the
digest recomputed (by the re-proof itself)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.release import Budget, answer
from tessera.release.certificate import verify_certificate
from tessera.schema.domain import Domain
from tessera.synth.record import sealed
from tessera.synth.synthesizer import Synthesizer
from tessera.synth.verify import verify_record
from tessera.workload.workload import Workload

SCHEMA = """attributes:
  sex: {type: categorical, values: [F, M]}
  age: {type: integer, min: 18, max: 25}
  ok: {type: boolean}
"""
QUERIES = ["sex = 'F'", "age < 21", "ok = true", "sex = 'M' AND ok = false",
           "age >= 23 OR ok = false"]


@pytest.fixture(scope="module")
def domain() -> Domain:
    return Domain.from_dict(__import__("yaml").safe_load(SCHEMA))


@pytest.fixture(scope="module")
def workload(domain: Domain) -> Workload:
    return Workload.from_sql(QUERIES, domain)


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 300
    return pd.DataFrame({"sex": rng.choice(np.array(["F", "M"], dtype=object), n),
                         "age": rng.integers(18, 26, n), "ok": rng.random(n) < 0.4})


@pytest.fixture(scope="module")
def records(data: pd.DataFrame, workload: Workload) -> dict[str, dict[str, Any]]:
    out = {}
    for method, neighbours, budget in (("adaptive", "add-remove", Budget.of(epsilon=1.0)),
                                       ("adaptive", "substitute", Budget.of(rho=0.2)),
                                       ("ipmwu", "add-remove", Budget.of(epsilon=1.0,
                                                                         delta=1e-6)),
                                       ("mwem", "substitute", Budget.of(epsilon=0.5)),
                                       ("lp", "add-remove", Budget.of(epsilon=1.0))):
        f = Synthesizer(method, rows=50, **({"rounds": 6} if method != "lp" else {})).fit(
            data, workload, budget, neighbours=neighbours, answer=answer)  # private randomness
        out[f"{method}-{neighbours}"] = json.loads(json.dumps(f.run_record()))
    return out


def _verify(record: dict[str, Any], workload: Workload) -> Any:
    return verify_record(record, workload, verify_certificate=verify_certificate)


def _leaves(doc: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(doc, list) and doc:
        for i, v in enumerate(doc):
            yield from _leaves(v, (*path, i))
    else:
        yield path


def _edited(doc: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node = out
    for k in path[:-1]:
        node = node[k]
    v = node[path[-1]]
    if isinstance(v, bool):
        node[path[-1]] = not v
    elif isinstance(v, (int, float)):
        node[path[-1]] = v * 1.5 + 1
    elif isinstance(v, str):
        node[path[-1]] = v + "x"
    elif v is None:
        node[path[-1]] = 0
    else:
        node[path[-1]] = None
    return out


def test_an_untouched_record_verifies(records: dict[str, dict[str, Any]],
                                      workload: Workload) -> None:
    for name, rec in records.items():
        result = _verify(rec, workload)
        assert result.ok, (name, result.differences)
        if not name.startswith("lp"):
            assert result.steps == len(rec["steps"]) > 0
            for s in rec["steps"]:  # every mechanism with its sensitivity, scale and cost
                assert {"role", "round", "applied_to", "mechanism", "sensitivity",
                        "cost"} <= set(s)
                assert s["mechanism"]["parameter"] in ("ε", "scale b", "σ")
        assert rec["schema"]["sha256"] and rec["workload"]["sha256"] and rec["budget"]["asked"]


@pytest.mark.parametrize("name", ["adaptive-add-remove", "ipmwu-add-remove", "lp-add-remove"])
def test_every_single_field_edit_fails(records: dict[str, dict[str, Any]],
                                       workload: Workload, name: str) -> None:
    rec = records[name]
    paths = list(_leaves(rec))
    assert len(paths) > 30
    for path in paths:
        assert not _verify(_edited(rec, path), workload).ok, path


@pytest.mark.parametrize("name", ["adaptive-add-remove", "adaptive-substitute",
                                  "ipmwu-add-remove", "mwem-substitute"])
def test_privacy_edits_fail_even_with_the_digest_recomputed(
        records: dict[str, dict[str, Any]], workload: Workload, name: str) -> None:
    """The re-proof, not just the digest: a forger who recomputes the digest is still caught
    on every field the spend depends on."""
    rec = records[name]
    paths = [p for p in _leaves(rec)
             if p[0] in ("spent", "private", "mechanisms", "neighbours", "schema", "workload")
             and p[-1] not in ("queries", "predicate_queries", "families", "note", "basis",
                               "definition", "neighbours")
             or (p[0] == "budget" and p[1] in ("asked", "calibrated_as"))
             or (p[0] == "steps" and p[-1] in ("value", "sensitivity", "epsilon", "rho",
                                               "private", "marginal"))]
    paths += [("steps",)]  # dropping every step
    assert len(paths) > 10
    for path in paths:
        forged = sealed(_edited(rec, path))
        assert not _verify(forged, workload).ok, path
    # dropping one mechanism: the spend no longer adds up
    fewer = copy.deepcopy(rec)
    fewer["steps"] = fewer["steps"][:-1]
    assert not _verify(sealed(fewer), workload).ok


def test_another_workload_or_schema_is_refused(records: dict[str, dict[str, Any]],
                                               domain: Domain) -> None:
    other = Workload.from_sql(QUERIES[:-1], domain)
    for rec in records.values():
        assert any("workload.sha256" in d for d in _verify(rec, other).differences)


def test_cli_verify_a_run_record(tmp_path: Path, data: pd.DataFrame) -> None:
    schema, wl, csv = tmp_path / "schema.yaml", tmp_path / "w.sql", tmp_path / "data.csv"
    schema.write_text(SCHEMA)
    wl.write_text("\n".join(QUERIES) + "\n")
    data.to_csv(csv, index=False)
    runner = CliRunner()
    for method in ("ipmwu", "lp"):
        run = tmp_path / f"{method}.json"
        r = runner.invoke(app, ["synth", str(csv), str(wl), "--schema", str(schema),
                                "--epsilon", "1", "--method", method, "-o",
                                str(tmp_path / f"{method}.csv"), "--record", str(run)]
                          + (["--rounds", "8"] if method == "ipmwu" else []))
        assert r.exit_code == 0, r.output
        r = runner.invoke(app, ["verify", str(run), str(wl), "--schema", str(schema)])
        assert r.exit_code == 0 and "verified" in r.output, r.output
        doc = json.loads(run.read_text())
        doc["spent"][0]["epsilon"] = doc["spent"][0].get("epsilon", 0) / 2
        run.write_text(json.dumps(doc))
        r = runner.invoke(app, ["verify", str(run), str(wl), "--schema", str(schema)])
        assert r.exit_code != 0 and "does NOT check out" in r.output, r.output


def test_an_understated_sensitivity_is_caught_even_when_everything_else_agrees(
        records: dict[str, dict[str, Any]], workload: Workload) -> None:
    """The forger's best edit: substitute-neighbour marginals claimed at sensitivity 1 (not
    √2), every cost, the spend and the digest recomputed to match. Only the sensitivity rule
    catches it (a planted bug returning the recorded sensitivity lets it through)."""
    from tessera.privacy import Definition, Neighbours
    from tessera.synth.accounting import step_cost
    from tessera.synth.record import proved_spend, step_from_dict

    forged = copy.deepcopy(records["adaptive-substitute"])
    touched = 0
    for s in forged["steps"]:
        if "marginal" in s["applied_to"]:
            assert s["sensitivity"] == pytest.approx(2 ** 0.5)
            s["sensitivity"] = 1.0
            s["cost"] = {"rho": step_cost(step_from_dict(s), Definition.ZCDP)}
            touched += 1
    assert touched
    steps = [step_from_dict(s) for s in forged["steps"]]
    forged["spent"] = [g.to_dict() for g in proved_spend(
        steps, Definition.ZCDP, Neighbours.SUBSTITUTE, (1e-5, 1e-6, 1e-9))]
    assert forged["spent"] != records["adaptive-substitute"]["spent"]  # a smaller claim
    result = _verify(sealed(forged), workload)
    assert not result.ok and all("sensitivity" in d for d in result.differences)


def test_every_record_states_its_software_and_one_made_before_still_verifies(
        records: dict[str, dict[str, Any]], workload: Workload) -> None:
    """Each record names the versions that made it (Tessera, OpenDP, dp-accounting, Python),
    the lp record's release certificate too; a record made before they were recorded (no
    ``software``, sealed as then) still verifies."""
    from tessera.software import versions

    for name, rec in records.items():
        assert rec["software"] == versions(), name
        if name.startswith("lp"):
            assert rec["release_certificate"]["software"] == versions()
        older = sealed({k: v for k, v in rec.items() if k != "software"})
        assert _verify(older, workload).ok, (name, _verify(older, workload).differences)
