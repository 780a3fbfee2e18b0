"""``tessera overlap`` end to end (typer runner, real files, results checked by brute force)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload
from tests.oracles.overlap import points_max_score, points_max_substitution

SCHEMA = """attributes:
  age: {type: integer, min: 0, max: 9}
  sex: {type: categorical, values: [F, M]}
  region: {type: categorical, values: [N, S, E, W]}
"""

# γ = 3 at age 3..4, sex F, region N (a, b, d); c excludes F
LINES = [
    "a: age < 5 AND sex = 'F'",
    "b: age >= 3 AND region IN ('N', 'S')",
    "c: sex = 'M' AND region = 'E'",
    "d: region = 'N' OR region = 'W'",
]

WEIGHTED = """queries:
  - {name: a, where: "age < 5 AND sex = 'F'", weight: 2}
  - {name: b, where: "age >= 3 AND region IN ('N', 'S')", weight: 1}
  - {name: c, where: "sex = 'M' AND region = 'E'", weight: 3}
  - {name: d, where: "region = 'N' OR region = 'W'", weight: 0.5}
"""


def files(tmp_path: Path, lines: list[str] | None = None, text: str | None = None,
          suffix: str = ".sql") -> tuple[Path, Path]:
    (tmp_path / "s.yaml").write_text(SCHEMA)
    w = tmp_path / f"w{suffix}"
    w.write_text(text if text is not None else "\n".join(lines or LINES) + "\n")
    return w, tmp_path / "s.yaml"


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["overlap", *args])


def brute(w: Path, s: Path, comp: str = "pure") -> tuple[Workload, float, float]:
    dom = Domain.load(s)
    wl = Workload.load(w, dom)
    weights = np.asarray(wl.weights, dtype=float)
    h = weights if comp == "pure" else weights**2
    unit, _ = points_max_score(dom, wl.queries, np.ones(len(wl)))
    weighted, _ = points_max_score(dom, wl.queries, h)
    return wl, unit, weighted if comp != "gdp" else math.sqrt(weighted)


def test_table_output_names_guarantee_witness_and_queries(tmp_path: Path) -> None:
    w, s = files(tmp_path)
    res = run(str(w), "--schema", str(s))
    assert res.exit_code == 0, res.output
    _, unit, _ = brute(w, s)
    assert unit == 3.0
    out = res.stdout
    assert "γ(Q) (queries one row touches)" in out and "exact" in out
    assert "guarantee: pure ε-DP (Laplace, basic composition), add-remove neighbours" in out
    assert "calibrate with γ_w = 3 (exact)" in out
    assert "witness row: age=" in out and "sex=F" in out and "region=N" in out
    assert "queries it touches (3):" in out
    for name in ("a", "b", "d"):
        assert f"\n  {name}\n" in out
    assert "\n  c\n" not in out


def test_json_fields_match_brute_force(tmp_path: Path) -> None:
    w, s = files(tmp_path, text=WEIGHTED, suffix=".yaml")
    res = run(str(w), "--schema", str(s), "--definition", "gdp", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    wl, unit, weighted = brute(w, s, "gdp")
    assert doc["definition"] == "gdp" and doc["neighbours"] == "add-remove"
    assert doc["guarantee"].startswith("μ-GDP")
    assert doc["unweighted"]["bound"] == math.sqrt(unit) and doc["unweighted"]["exact"]
    assert math.isclose(doc["weighted"]["bound"], weighted) and doc["weighted"]["exact"]
    assert doc["weighted"]["bound"] >= doc["weighted"]["achieved"]
    assert math.isclose(doc["weighted"]["sequential"], math.sqrt(sum(x * x for x in wl.weights)))
    touched = doc["witness_queries"]
    assert touched == [wl.names[i] for i in doc["weighted"]["witness"]["queries"]]
    # the witness row, decoded, re-evaluates to exactly those queries
    dom = Domain.load(s)
    x = doc["weighted"]["witness"]["x"]
    assert [n for n, q in zip(wl.names, wl.queries) if q(dom, x)] == touched
    assert set(doc["witness_values"]) == {"age", "sex", "region"}
    assert "budget" not in doc and "scales" not in doc


def test_budget_prints_scales_that_compose_to_the_budget(tmp_path: Path) -> None:
    w, s = files(tmp_path)
    res = run(str(w), "--schema", str(s), "--budget", "0.5", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["budget"] == 0.5
    # unit weights, pure: b = γ/ε for every query
    assert all(math.isclose(b, 3 / 0.5) for b in doc["scales"].values())
    table = run(str(w), "--schema", str(s), "--budget", "0.5")
    assert table.exit_code == 0 and "per-query noise for ε = 0.5" in table.stdout
    assert "Laplace b" in table.stdout


def test_weighted_budget_zero_weight_not_released(tmp_path: Path) -> None:
    text = WEIGHTED.replace("weight: 0.5", "weight: 0")
    w, s = files(tmp_path, text=text, suffix=".yaml")
    res = run(str(w), "--schema", str(s), "--budget", "1", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["scales"]["d"] is None
    eps = {n: 1.0 / b for n, b in doc["scales"].items() if b is not None}
    dom = Domain.load(s)
    wl = Workload.load(w, dom)
    worst, _ = points_max_score(dom, wl.queries, [eps.get(n, 0.0) for n in wl.names])
    assert worst <= 1.0 + 1e-12  # every row's queries compose to at most ε = 1


def test_substitute_neighbours(tmp_path: Path) -> None:
    w, s = files(tmp_path, lines=["region = 'N'", "region = 'S'", "region IN ('E', 'W')"])
    res = run(str(w), "--schema", str(s), "--neighbours", "substitute", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    dom = Domain.load(s)
    wl = Workload.load(w, dom)
    ref, _, _ = points_max_substitution(dom, wl.queries, np.ones(3))
    assert doc["unweighted"]["bound"] == ref == 2.0 and doc["unweighted"]["exact"]
    assert doc["weighted"]["witness"]["y"] is not None
    table = run(str(w), "--schema", str(s), "--neighbours", "substitute")
    assert "substitute neighbours" in table.stdout and "substituted by:" in table.stdout


def test_bad_workload_is_one_error_line_exit_2(tmp_path: Path) -> None:
    w, s = files(tmp_path, lines=["a: age < 5", "b: colour = 'red'"])
    res = run(str(w), "--schema", str(s))
    assert res.exit_code == 2
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    assert "Traceback" not in res.output and "Traceback" not in res.stderr
    assert res.stdout == ""


def test_bad_options_are_one_error_line_exit_2(tmp_path: Path) -> None:
    w, s = files(tmp_path)
    for args in (["--definition", "renyi"], ["--neighbours", "swap"], ["--method", "magic"]):
        res = run(str(w), "--schema", str(s), *args)
        assert res.exit_code == 2, (args, res.output)
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), (args, res.stderr)
        assert "Traceback" not in res.stderr
