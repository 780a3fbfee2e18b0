"""`tessera schema`, `tessera workload` and `tessera count`: one error line each, no traceback."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from tessera.cli.main import app
from tessera.data.counts import count
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload

from .conftest import ADULT_CSV, ADULT_SCHEMA

ADULT_FLAGS = ["--no-header", "--delimiter", ", ", "--na", "?"]
BAD_LINES = {
    2: "age > 30 OR sexx = 'Male'",  # an unknown attribute inside a Boolean clause
    4: "sex = 'Femal'",
    5: "sex < 'Male'",  # unordered
    7: "agee > 3",
    8: "age >=",
}
GOOD = "\n".join(
    [
        "# a small Adult workload",
        "young: age < 30",
        "age BETWEEN 30 AND 39 AND sex = 'Female'",
        "workclass IS NULL",
        "capital-gain > 0 AND income = '>50K'",
        "age < 30",  # a duplicate of 'young'
        "age > 95",  # a contradiction
    ]
)


def run(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


def bad_workload(tmp_path: Path) -> Path:
    lines = ["# header"] + [""] * 8
    for n, text in BAD_LINES.items():
        lines[n - 1] = text
    lines[2] = "age >= 18   # fine"
    lines[5] = "sex = 'Male'"
    p = tmp_path / "bad.sql"
    p.write_text("\n".join(lines) + "\n")
    return p


def assert_one_line_errors(stderr: str, path: Path, lines: list[int]) -> None:
    out = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr
    assert len(out) == len(lines), stderr
    for text, n in zip(out, lines):
        assert text.startswith(f"error: {path}:{n}: "), text
        assert "(hint: " in text, text


def test_workload_check_reports_each_bad_line(tmp_path: Path) -> None:
    p = bad_workload(tmp_path)
    res = run("workload", "check", str(p), "--schema", str(ADULT_SCHEMA))
    assert res.exit_code == 2
    assert_one_line_errors(res.stderr, p, sorted(BAD_LINES))
    assert "did you mean 'Female'?" in res.stderr and "did you mean 'age'?" in res.stderr
    assert res.stdout == ""


def test_workload_check_prints_stats(tmp_path: Path) -> None:
    p = tmp_path / "w.sql"
    p.write_text(GOOD + "\n")
    res = run("workload", "check", str(p), "--schema", str(ADULT_SCHEMA))
    assert res.exit_code == 0, res.stderr
    assert "6 queries" in res.stdout
    # the duplicate pair, each with its line in the file
    assert re.search(r"young \(line \d+\) = age < 30 \(line \d+\)", res.stdout), res.stdout
    assert "age > 95" in res.stdout  # the contradiction


def test_workload_build_then_load(tmp_path: Path) -> None:
    out = tmp_path / "m.sql"
    res = run(
        "workload",
        "build",
        "marginals",
        "-k",
        "1",
        "--schema",
        str(ADULT_SCHEMA),
        "-a",
        "sex",
        "-a",
        "race",
        "-a",
        "workclass",
        "-o",
        str(out),
    )
    assert res.exit_code == 0, res.stderr
    w = Workload.load(out, Domain.load(ADULT_SCHEMA))
    assert len(w) == 2 + 5 + 9
    res = run(
        "workload",
        "build",
        "random",
        "--queries",
        "40",
        "--seed",
        "3",
        "--schema",
        str(ADULT_SCHEMA),
        "-o",
        str(tmp_path / "r.yaml"),
    )
    assert (
        res.exit_code == 0
        and len(Workload.load(tmp_path / "r.yaml", Domain.load(ADULT_SCHEMA))) == 40
    )
    bad = run("workload", "build", "marginal", "--schema", str(ADULT_SCHEMA), "-o", str(out))
    assert bad.exit_code != 0 and "Traceback" not in bad.output + bad.stderr
    assert "marginals" in bad.stderr  # the hint lists the families
    bad = run(
        "workload", "build", "prefix", "--schema", str(ADULT_SCHEMA), "-a", "sex", "-o", str(out)
    )
    assert bad.exit_code == 2 and "no order" in bad.stderr


def test_schema_check(tmp_path: Path) -> None:
    res = run("schema", "check", str(ADULT_SCHEMA))
    assert res.exit_code == 0, res.stderr
    assert "age" in res.stdout and "native-country" in res.stdout
    bad = tmp_path / "s.yaml"
    bad.write_text(yaml.safe_dump({"attributes": {"age": {"type": "integr", "min": 0, "max": 9}}}))
    res = run("schema", "check", str(bad))
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert lines[0].startswith(f"error: {bad}: ") and "did you mean 'integer'?" in lines[0]


@pytest.fixture
def adult_data(adult_data_path: Path) -> Path:
    return adult_data_path  # skips without the shared data


def test_count_csv_and_json(tmp_path: Path, adult_data: Path) -> None:
    p = tmp_path / "w.sql"
    p.write_text(GOOD + "\n")
    res = run("count", str(adult_data), str(p), "--schema", str(ADULT_SCHEMA), *ADULT_FLAGS)
    assert res.exit_code == 0, res.stderr
    assert "NOT PRIVATE" in res.stderr
    got = pd.read_csv(io.StringIO(res.stdout))
    w = Workload.load(p, Domain.load(ADULT_SCHEMA))
    want = count(adult_data, w, csv=ADULT_CSV)
    assert got["query"].tolist() == list(w.names)
    assert got["answer"].tolist() == want.answers.tolist()
    res = run(
        "count", str(adult_data), str(p), "--schema", str(ADULT_SCHEMA), *ADULT_FLAGS, "--json"
    )
    doc = json.loads(res.stdout)
    assert doc["rows"] == 32561 and "NOT PRIVATE" in doc["privacy"]
    assert [a["answer"] for a in doc["answers"]] == want.answers.tolist()


def test_count_bad_workload_and_bad_data(tmp_path: Path, adult_data: Path) -> None:
    p = bad_workload(tmp_path)
    res = run("count", str(adult_data), str(p), "--schema", str(ADULT_SCHEMA), *ADULT_FLAGS)
    assert res.exit_code == 2
    assert_one_line_errors(res.stderr, p, sorted(BAD_LINES))
    test = adult_data.with_name("adult.test")
    good = tmp_path / "w.sql"
    good.write_text(GOOD + "\n")
    res = run(
        "count",
        str(test),
        str(good),
        "--schema",
        str(ADULT_SCHEMA),
        *ADULT_FLAGS,
        "--skip-rows",
        "1",
    )
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert "'income'" in lines[0] and "'<=50K.' (12435 rows)" in lines[0]
    res = run(
        "count",
        str(test),
        str(good),
        "--schema",
        str(ADULT_SCHEMA),
        *ADULT_FLAGS,
        "--skip-rows",
        "1",
        "--on-invalid",
        "drop",
    )
    assert res.exit_code == 0
    assert "dropped 16,281 rows" in res.stderr
    res = run(
        "count",
        str(test),
        str(good),
        "--schema",
        str(ADULT_SCHEMA),
        *ADULT_FLAGS,
        "--on-invalid",
        "clamp",
    )
    assert res.exit_code == 2 and "'error' or 'drop'" in res.stderr


def test_real_entry_point_no_traceback(tmp_path: Path) -> None:
    """The installed command (not CliRunner): errors go to stderr as lines, exit code 2."""
    p = bad_workload(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tessera.cli.main",
            "workload",
            "check",
            str(p),
            "--schema",
            str(ADULT_SCHEMA),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert_one_line_errors(proc.stderr, p, sorted(BAD_LINES))


def test_count_writes_parquet_marked_not_private(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    schema = tmp_path / "s.yaml"
    schema.write_text("attributes:\n  a: {type: integer, min: 0, max: 3}\n")
    data = tmp_path / "d.csv"
    data.write_text("a\n0\n1\n1\n3\n")
    work = tmp_path / "w.sql"
    work.write_text("low: a <= 1\nthree: a = 3\n")
    out = tmp_path / "o.parquet"
    res = CliRunner().invoke(
        app, ["count", str(data), str(work), "--schema", str(schema), "-o", str(out)]
    )
    assert res.exit_code == 0, res.output
    table = pq.read_table(out)
    assert table.to_pydict() == {"query": ["low", "three"], "answer": [3, 1]}
    assert b"NOT PRIVATE" in table.schema.metadata[b"tessera.privacy"]
