"""``tessera demo --people``: counts, sums and means of a transactions table at the level of a
*person* (docs/people.md, docs/aggregates.md), on data the project makes itself.

The table is made up with a seeded generator (nothing about real people is in it): customers
with 1 to 50 purchases each — a customer id, a region, a channel, a category and an integer
amount of 0 to 500. Its public schema declares the purchase columns, not the id. The workload
mixes ``COUNT(*)``, ``SUM`` and ``AVG`` with one- and two-key ``GROUP BY`` and a ``WHERE``.

Against a fresh person ledger (pure ε-DP, add/remove one person of at most K rows), the
workload is answered by :func:`tessera.release.aggregates.answer_aggregates` with the unit
``PrivacyUnit("customer", K)``: each customer's rows are bounded to K before anything is
summed, and the noise (OpenDP's discrete Laplace, unless ``seed`` is given, for tests) is
calibrated to what one person can change — K times what one row can (docs/theory.md §3.13,
§3.15). The certificate is then re-checked from the workload and schema alone, as
``tessera verify`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tessera.errors import TesseraError
from tessera.privacy import ONE_ROW, Neighbours, PrivacyUnit
from tessera.release.aggregate_certificate import verify_aggregate_certificate
from tessera.release.aggregates import AggregateRelease, answer_aggregates
from tessera.release.budget import Budget
from tessera.release.ledger import Ledger
from tessera.release.linear_costs import linear_cost_bound
from tessera.schema.domain import Domain
from tessera.workload.select import read_aggregates

REGIONS = ("north", "south", "east", "west")
CHANNELS = ("web", "store")
CATEGORIES = ("grocery", "clothing", "electronics", "travel")

#: The public schema of the purchase columns (the customer id is not an attribute).
SCHEMA = {
    "attributes": {
        "region": {"type": "categorical", "values": list(REGIONS)},
        "channel": {"type": "categorical", "values": list(CHANNELS)},
        "category": {"type": "categorical", "values": list(CATEGORIES)},
        "amount": {"type": "integer", "min": 0, "max": 500},
    }
}

#: Counts, sums and means: per region, per region and channel, a filtered one, and the total.
WORKLOAD_LINES = (
    "by_region: SELECT region, COUNT(*), SUM(amount), AVG(amount) FROM purchases "
    "GROUP BY region",
    "by_region_channel: SELECT region, channel, COUNT(*), SUM(amount) FROM purchases "
    "GROUP BY region, channel",
    "web_by_category: SELECT category, COUNT(*), AVG(CLAMP(amount, 0, 200)) AS mean_amount "
    "FROM purchases WHERE channel = 'web' GROUP BY category",
    "total: SELECT COUNT(*), SUM(amount) FROM purchases",
)

#: The privacy id column of the table.
ID_COLUMN = "customer"


def transactions(people: int = 2_000, seed: int = 2026) -> pd.DataFrame:
    """A made-up purchases table (not real people): ``people`` customers with 1–50 purchases
    each (a geometric number, mean ≈ 9, capped at 50), each with a home region and a usual
    channel; amounts are integers 0..500."""
    rng = np.random.default_rng(seed)  # data generation for the demo, not privacy noise
    per = np.minimum(rng.geometric(1 / 9, people), 50)  # not-privacy-noise (made-up data)
    n = int(per.sum())
    customer = np.repeat([f"c{i:05d}" for i in range(people)], per)
    region = np.repeat(rng.integers(0, len(REGIONS), people), per)
    usual = np.repeat(rng.integers(0, len(CHANNELS), people), per)
    channel = np.where(rng.random(n) < 0.8, usual, rng.integers(0, len(CHANNELS), n))
    category = rng.integers(0, len(CATEGORIES), n)
    amount = np.minimum(rng.gamma(2.0, 30.0 + 20.0 * category), 500).astype(int)
    return pd.DataFrame({
        ID_COLUMN: customer,
        "region": np.asarray(REGIONS)[region],
        "channel": np.asarray(CHANNELS)[channel],
        "category": np.asarray(CATEGORIES)[category],
        "amount": amount,
    })


@dataclass(frozen=True)
class PeopleDemoResult:
    """Where the people demo put everything, what it released, and facts about the made-up
    table (``rows``, ``people``, ``over_k``: customers with more than K rows — NOT PRIVATE,
    read off the demo's own data to explain it)."""

    directory: Path
    data: Path
    schema: Path
    workload: Path
    ledger: Path
    answers: Path
    certificate: Path
    release: AggregateRelease
    rows: int
    people: int
    over_k: int
    per_row: float
    """The cost of the same noise with one row as the unit (ε, exact or an upper bound)."""


def run_people_demo(
    directory: str | Path = "tessera-demo-people", *, epsilon: float = 1.0,
    total: float = 3.0, max_rows: int = 10, people: int = 2_000, seed: int | None = None,
) -> PeopleDemoResult:
    """Write the made-up transactions, schema and aggregate workload to ``directory``; against
    a fresh person ledger of ``total`` (pure, add/remove one customer of at most ``max_rows``
    rows) answer the workload at ``epsilon``; write ``answers.csv`` and ``certificate.json``;
    re-check the certificate (a :class:`TesseraError` if it does not check out)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    frame = transactions(people)
    data = out / "purchases.csv"
    frame.to_csv(data, index=False)
    domain = Domain.from_dict(SCHEMA)
    schema = out / "schema.yaml"
    domain.save(schema, header="# public schema of the demo purchases (declared, not read off "
                "the data; the customer id is not an attribute)\n")
    workload_path = out / "workload.sql"
    workload_path.write_text("\n".join(WORKLOAD_LINES) + "\n", encoding="utf-8")
    workload = read_aggregates(workload_path, domain)
    unit = PrivacyUnit(ID_COLUMN, max_rows)
    ledger_path = out / "ledger.sqlite"
    if ledger_path.exists():
        ledger_path.unlink()  # the demo starts a fresh data set each time
    book = Ledger.init(ledger_path, total=total, definition="pure",
                       neighbours=Neighbours.ADD_REMOVE, domain=domain,
                       dataset="demo purchases", unit=unit)
    answers = out / "answers.csv"
    certificate = out / "certificate.json"
    release = answer_aggregates(data, workload, Budget.of(epsilon=epsilon), unit=unit,
                                ledger=book, label="demo people", seed=seed, output=answers,
                                certificate=certificate)
    diffs = verify_aggregate_certificate(release.certificate, read_aggregates(workload_path,
                                                                              domain))
    if diffs:
        raise TesseraError("the demo's certificate does not check out: " + "; ".join(diffs))
    plan = release.plan
    row = linear_cost_bound(domain, plan.linear, plan.costs, definition="pure",
                            neighbours=plan.neighbours, unit=ONE_ROW)
    per = frame.groupby(ID_COLUMN).size()
    return PeopleDemoResult(out, data, schema, workload_path, ledger_path, answers,
                            certificate, release, len(frame), int(per.size),
                            int((per > max_rows).sum()), 0.0 if row is None else row.bound)
