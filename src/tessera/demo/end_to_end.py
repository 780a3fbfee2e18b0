"""``tessera demo``: both main jobs on data the project makes itself (no network, no shared
data): a made-up census-like table, its public schema, a workload and a ledger; then

1. a private release of the workload's answers (answers, certificate, report), and
2. private synthetic data from the same population for the same workload (the rows, the run
   record, and their evaluation against the population — NOT PRIVATE, as any evaluation).

Both are charged to the one ledger before anything is written (ε = 1 each of a total of 3,
add/remove neighbours), as the ledger composes them (docs/theory.md §9).

The table is drawn from a fixed, made-up model with a seeded generator: it stands in for
sensitive data, and nothing about real people is in it. Noise and private selection use
OpenDP's secure samplers (unless ``seed`` is given, for tests), exactly as a real run would.
This module sits above :mod:`tessera.release` and :mod:`tessera.synth`, which are independent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tessera.privacy import Neighbours
from tessera.release.answering import Release, answer
from tessera.release.budget import Budget
from tessera.release.ledger import Ledger
from tessera.schema.domain import Domain
from tessera.synth.evaluate import Evaluation, evaluate
from tessera.synth.synthesizer import FittedSynthesizer, Synthesizer
from tessera.workload.workload import Workload

REGIONS = ("North", "South", "East", "West", "Centre")
EDUCATION = ("none", "primary", "secondary", "tertiary")

SCHEMA = {
    "attributes": {
        "age": {"type": "integer", "min": 0, "max": 99},
        "sex": {"type": "categorical", "values": ["F", "M"]},
        "region": {"type": "categorical", "values": list(REGIONS)},
        "education": {"type": "categorical", "values": list(EDUCATION), "ordered": True},
        "hours": {"type": "integer", "min": 0, "max": 80},
    }
}

#: The demo workload: age pyramid by sex (disjoint bands: γ grows by one per family), regional
#: totals, and a few cross-cutting questions. A row touches at most one query of each family.
WORKLOAD_LINES = (
    *(f"age_{lo}_{lo + 9}_{s}: age BETWEEN {lo} AND {lo + 9} AND sex = '{s}'"
      for lo in range(0, 100, 10) for s in ("F", "M")),
    *(f"region_{r}: region = '{r}'" for r in REGIONS),
    *(f"edu_{e}: education = '{e}'" for e in EDUCATION),
    "full_time_adults: age >= 18 AND hours >= 35",
    "part_time_adults: age >= 18 AND hours BETWEEN 1 AND 34",
    "tertiary_over_40: education = 'tertiary' AND age > 40",
    "young_south: region = 'South' AND age < 25",
)


def synthetic_population(n: int = 20_000, seed: int = 2026) -> pd.DataFrame:
    """A made-up population (not real people): ages, sexes, regions, education, weekly hours."""
    rng = np.random.default_rng(seed)  # data generation for the demo, not privacy noise
    age = np.clip(rng.gamma(4.0, 10.0, n).round(), 0, 99).astype(int)
    sex = rng.choice(["F", "M"], n)
    region = rng.choice(REGIONS, n, p=[0.25, 0.3, 0.2, 0.15, 0.1])
    edu_p = np.where(age[:, None] < 16, [0.3, 0.7, 0.0, 0.0], [0.05, 0.25, 0.45, 0.25])
    edu = np.array([rng.choice(4, p=p) for p in edu_p])
    working = (age >= 18) & (age < 67) & (rng.random(n) < 0.75)
    weekly = rng.normal(36, 9, n)  # not-privacy-noise: made-up data for the demo
    hours = np.where(working, np.clip(weekly.round(), 1, 80), 0).astype(int)
    return pd.DataFrame({"age": age, "sex": sex, "region": region,
                         "education": np.asarray(EDUCATION)[edu], "hours": hours})


@dataclass(frozen=True)
class DemoResult:
    """Where the demo put everything, and the release it made."""

    directory: Path
    data: Path
    schema: Path
    workload: Path
    ledger: Path
    answers: Path
    certificate: Path
    report: Path
    release: Release
    synthetic: Path
    run_record: Path
    evaluation: Path
    fitted: FittedSynthesizer
    errors: Evaluation


def run_demo(
    directory: str | Path = "tessera-demo", *, epsilon: float = 1.0, total: float = 3.0,
    synth_epsilon: float = 1.0, seed: int | None = None,
) -> DemoResult:
    """Write the demo inputs to ``directory``; against a fresh ledger of ``total`` (pure,
    add/remove), answer the workload at ``epsilon`` (answers, certificate, report), then make
    synthetic rows for it at ``synth_epsilon`` with the adaptive method (rows, run record, and
    their errors against the population: ``synthetic-evaluation.json``, NOT PRIVATE)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    data = out / "population.csv"
    synthetic_population().to_csv(data, index=False)
    domain = Domain.from_dict(SCHEMA)
    schema = out / "schema.yaml"
    domain.save(schema, header="# public schema of the demo population (declared, not read "
                "off the data)\n")
    workload_path = out / "workload.sql"
    workload_path.write_text("\n".join(WORKLOAD_LINES) + "\n")
    workload = Workload.load(workload_path, domain)
    ledger_path = out / "ledger.sqlite"
    if ledger_path.exists():
        ledger_path.unlink()  # the demo starts a fresh data set each time
    book = Ledger.init(ledger_path, total=total, definition="pure",
                       neighbours=Neighbours.ADD_REMOVE, domain=domain,
                       dataset="demo population")
    release = answer(data, workload, Budget.of(epsilon=epsilon), ledger=book, label="demo",
                     postprocess=("consistency",), seed=seed)
    answers = release.write(out / "answers.csv")
    certificate = release.write_certificate(out / "certificate.json")
    report = release.report(out / "report.html")
    fitted = Synthesizer("adaptive").fit(
        data, workload, Budget.of(epsilon=synth_epsilon), neighbours=Neighbours.ADD_REMOVE,
        ledger=book, label="demo synthetic data", seed=seed)
    synthetic = fitted.write(out / "synthetic.csv")
    run_record = fitted.write_record(out / "synthetic-run.json")
    errors = evaluate(data, synthetic, workload)
    evaluation = out / "synthetic-evaluation.json"
    evaluation.write_text(json.dumps(errors.to_dict(), indent=1, ensure_ascii=False) + "\n")
    return DemoResult(out, data, schema, workload_path, ledger_path, answers, certificate,
                      report, release, synthetic, run_record, evaluation, fitted, errors)
