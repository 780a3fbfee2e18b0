"""``tessera answer --strategy`` on GROUP BY sums: the summary and the certificate name each
summed quantity's strategy, ``tessera verify`` recomputes the choice and re-derives the spend,
and a tampered certificate is refused."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from tessera.cli.main import app

SCHEMA = """attributes:
  region: {type: categorical, values: [n, s, e, w]}
  channel: {type: categorical, values: [web, store]}
  tier: {type: categorical, values: [a, b, c]}
  amount: {type: integer, min: 0, max: 500}
"""
WORKLOAD = """SELECT SUM(CLAMP(amount, 0, 200)) AS rev FROM t
SELECT region, SUM(CLAMP(amount, 0, 200)) AS rev, AVG(CLAMP(amount, 0, 200)) AS mean \
FROM t GROUP BY region
SELECT channel, SUM(CLAMP(amount, 0, 200)) AS rev FROM t GROUP BY channel
SELECT tier, channel, SUM(CLAMP(amount, 0, 200)) AS rev FROM t GROUP BY tier, channel
SELECT region, tier, SUM(CLAMP(amount, 0, 200)) AS rev, COUNT(*) FROM t GROUP BY region, tier
"""


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(5)
    n = 500
    df = pd.DataFrame({"region": rng.choice(["n", "s", "e", "w"], n),
                       "channel": rng.choice(["web", "store"], n),
                       "tier": rng.choice(["a", "b", "c"], n),
                       "amount": rng.integers(0, 501, n), "pid": rng.integers(0, 200, n)})
    (tmp_path / "d.csv").write_text(df.to_csv(index=False))
    (tmp_path / "s.yaml").write_text(SCHEMA)
    (tmp_path / "w.sql").write_text(WORKLOAD)
    return tmp_path


def run(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def answer(files, *more):
    return run("answer", files / "d.csv", files / "w.sql", "--schema", files / "s.yaml",
               "--extra-columns", "ignore", "--seed", "3", "--certificate", files / "c.json",
               "-o", files / "o.csv", *more)


def verify(files):
    return run("verify", files / "c.json", files / "w.sql", "--schema", files / "s.yaml")


@pytest.mark.parametrize("budget", [["--epsilon", "1"],
                                    ["--rho", "0.5", "--privacy-id", "pid", "--max-rows", "2"]])
def test_answer_verify_and_tamper(files, budget):
    res = answer(files, *budget)
    assert res.exit_code == 0, res.output
    assert "strategy: SUM(CLAMP(amount, 0, 200)):" in res.output
    assert "strategy: COUNT:" in res.output
    doc = json.loads((files / "c.json").read_text())
    chosen = [f["chosen"] for f in doc["strategy"]["families"]]
    assert chosen[0] in ("identity", "residual")
    out = pd.read_csv(files / "o.csv", keep_default_na=False, comment="#")
    assert len(out) == 1 + 4 * 2 + 2 + 6 + 12 * 2
    means = out[out["aggregate"] == "mean"]
    assert ((means["ci95_low"] >= 0) & (means["ci95_high"] <= 200)).all()
    res = verify(files)
    assert res.exit_code == 0 and "verified" in res.output, res.output
    # a smaller scale on one measured query: the spend re-derived exceeds the budget
    bad = json.loads((files / "c.json").read_text())
    bad["strategy"]["measured_queries"][0]["scale"] /= 2
    (files / "c.json").write_text(json.dumps(bad))
    res = verify(files)
    assert res.exit_code != 0 and "exceeds the budget" in res.output, res.output
    # another strategy stated than the public inputs choose
    bad = json.loads(json.dumps(doc))
    bad["strategy"]["families"][0]["chosen"] = "direct"
    (files / "c.json").write_text(json.dumps(bad))
    res = verify(files)
    assert res.exit_code != 0 and "chosen" in res.output, res.output
    # the strategy section dropped: the linear queries have no scales of their own
    bad = json.loads(json.dumps(doc))
    del bad["strategy"]
    (files / "c.json").write_text(json.dumps(bad))
    res = verify(files)
    assert res.exit_code != 0 and "scale is missing" in res.output, res.output


def test_direct_keeps_the_direct_release(files):
    res = answer(files, "--epsilon", "1", "--strategy", "direct")
    assert res.exit_code == 0, res.output
    doc = json.loads((files / "c.json").read_text())
    assert "strategy" not in doc
    assert verify(files).exit_code == 0


def test_named_strategy_and_refusals(files):
    res = answer(files, "--epsilon", "1", "--strategy", "residual")
    assert res.exit_code == 0, res.output
    doc = json.loads((files / "c.json").read_text())
    assert {f["chosen"] for f in doc["strategy"]["families"]} == {"residual"}
    assert verify(files).exit_code == 0
    res = answer(files, "--epsilon", "1", "--strategy", "residual", "--neighbours", "substitute")
    assert res.exit_code == 0, res.output
    doc = json.loads((files / "c.json").read_text())
    assert doc["neighbours"] == "substitute"
    assert {f["chosen"] for f in doc["strategy"]["families"]} == {"residual"}
    assert verify(files).exit_code == 0
    res = answer(files, "--epsilon", "1", "--strategy", "identity", "--consistency")
    assert res.exit_code != 0 and "--consistency cannot be used" in res.output
    res = answer(files, "--epsilon", "1", "--consistency")  # auto: measured directly then
    assert res.exit_code == 0 and "strategy: direct" in res.output, res.output


def test_ledger_is_charged_before_a_strategy_release(files):
    """A ledger of ε = 1: a strategy release of ε = 0.6 is charged (the ledger re-solves the
    measured sums' levels), a second is refused before anything is released."""
    led = files / "l.ledger"
    res = run("ledger", "init", led, "--schema", files / "s.yaml", "--epsilon", "1")
    assert res.exit_code == 0, res.output
    res = answer(files, "--epsilon", "0.6", "--ledger", led)
    assert res.exit_code == 0, res.output
    assert "strategy: SUM(CLAMP(amount, 0, 200)): " in res.output
    assert "spent 0 → 0.6" in res.output
    (files / "o.csv").unlink()
    res = answer(files, "--epsilon", "0.6", "--ledger", led)
    assert res.exit_code != 0 and "budget" in res.output.lower()
    assert not (files / "o.csv").exists()


FOUR_SCHEMA = SCHEMA.replace("  amount:", "  weekday: {type: categorical, values: [mo, tu, we, th, "
                                        "fr, sa, su]}\n  amount:")
FOUR_ATTRS = ["region", "channel", "tier", "weekday"]


@pytest.mark.parametrize("budget", [["--epsilon", "1"],
                                    ["--rho", "0.5", "--privacy-id", "pid", "--max-rows", "2"]])
def test_substitution_auto_verify_and_tamper(files, budget):
    """Every 1- and 2-way GROUP BY sum of 4 columns under substitute neighbours: ``auto``
    measures a strategy, ``tessera verify`` recomputes it and refuses a tampered scale."""
    rng = np.random.default_rng(9)
    n = 400
    df = pd.DataFrame({"region": rng.choice(["n", "s", "e", "w"], n),
                       "channel": rng.choice(["web", "store"], n),
                       "tier": rng.choice(["a", "b", "c"], n),
                       "weekday": rng.choice(["mo", "tu", "we", "th", "fr", "sa", "su"], n),
                       "amount": rng.integers(0, 501, n), "pid": rng.integers(0, 250, n)})
    (files / "d.csv").write_text(df.to_csv(index=False))
    (files / "s.yaml").write_text(FOUR_SCHEMA)
    groups = [[a] for a in FOUR_ATTRS] + [list(p) for p in itertools.combinations(FOUR_ATTRS, 2)]
    (files / "w.sql").write_text("".join(
        f"SELECT {', '.join(g)}, SUM(CLAMP(amount, 0, 200)) AS rev FROM t GROUP BY "
        f"{', '.join(g)}\n" for g in groups))
    res = answer(files, *budget, "--neighbours", "substitute", "--strategy", "auto")
    assert res.exit_code == 0, res.output
    assert "strategy: SUM(CLAMP(amount, 0, 200)):" in res.output
    doc = json.loads((files / "c.json").read_text())
    assert doc["neighbours"] == "substitute"
    fam = doc["strategy"]["families"][0]
    assert fam["chosen"] in ("identity", "residual")
    # the chooser's budget: B_f/(2M) under ε, B_f/(2M²) under ρ (one-signed clamp, M = 200)
    t = 2 * 200 if budget[0] == "--epsilon" else 2 * 200**2
    assert fam["counting_budget"] == pytest.approx(fam["budget"] / t)
    assert fam["counting_neighbours"] == "add-remove"
    assert float(doc["spent"]["value"]) <= float(budget[1])
    res = verify(files)
    assert res.exit_code == 0 and "verified" in res.output, res.output
    bad = json.loads(json.dumps(doc))
    bad["strategy"]["measured_queries"][0]["scale"] /= 2
    (files / "c.json").write_text(json.dumps(bad))
    res = verify(files)
    assert res.exit_code != 0 and "exceeds the budget" in res.output, res.output
    # an add/remove release stated as substitute: its scales spend about twice the budget
    res = answer(files, *budget, "--strategy", "auto")
    assert res.exit_code == 0, res.output
    bad = json.loads((files / "c.json").read_text())
    bad["neighbours"] = "substitute"
    (files / "c.json").write_text(json.dumps(bad))
    res = verify(files)
    assert res.exit_code != 0 and "exceeds the budget" in res.output, res.output


def test_substitution_refuses_empty_data(files):
    (files / "d.csv").write_text("region,channel,tier,amount,pid\n")
    res = answer(files, "--epsilon", "1", "--neighbours", "substitute", "--strategy", "auto")
    assert res.exit_code != 0 and "n is public" in res.output, res.output
