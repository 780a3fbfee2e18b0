"""A made-up sales table with several rows per customer, for docs/aggregates.md.

    python examples/aggregates/make_sales.py OUT_DIR [--seed 7]

Writes into OUT_DIR (nothing is written to the repository):

* ``sales.csv`` — 5,000 sales of 2,000 customers: ``customer`` (the privacy id, not in the
  schema), ``region``, ``channel`` and ``amount`` (whole currency units, 0 to 500);
* ``schema.yaml`` — the public schema (``amount`` an integer attribute: sums clamp to 0..500);
* ``workload.sql`` — a count, a total count and sum, and per region the count, a clamped sum
  and a clamped mean of web sales;
* ``receipts.csv``, ``receipts.yaml``, ``receipts.sql`` — the same sales as paid, with cents
  (``paid``, e.g. 37.45: a *measure*, a numeric column outside the schema), the schema of the
  region and channel alone, and sums and means of ``paid`` with stated clamps.

The data are synthetic and random (seeded): no real person is in them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

SCHEMA = """# Public schema of sales.csv (from the shop's published lists, never from the data)
attributes:
  region:  {type: categorical, values: [north, south, east, west]}
  channel: {type: categorical, values: [web, store]}
  amount:  {type: integer, min: 0, max: 500}
"""

WORKLOAD = """# counts, sums and means of sales (docs/aggregates.md)
web: channel = 'web'
total: SELECT COUNT(*), SUM(amount) FROM sales
by_region: SELECT region, COUNT(*), SUM(CLAMP(amount, 0, 200)) AS revenue, AVG(CLAMP(amount, 0, 200)) AS mean_amount FROM sales WHERE channel = 'web' GROUP BY region
"""

RECEIPTS_SCHEMA = """# Public schema of receipts.csv ('paid' is a measure: summed, not in it)
attributes:
  region:  {type: categorical, values: [north, south, east, west]}
  channel: {type: categorical, values: [web, store]}
"""

RECEIPTS = """# sums and means of a column with cents, clamped to public bounds (docs/aggregates.md)
total: SELECT COUNT(*), SUM(CLAMP(paid, 0, 250)) AS revenue FROM receipts
by_region: SELECT region, SUM(CLAMP(paid, 0, 250)) AS revenue, \
AVG(CLAMP(paid, 0, 250)) AS mean_paid FROM receipts GROUP BY region
"""


def make(out: Path, seed: int = 7, n: int = 5000, customers: int = 2000) -> None:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "customer": rng.integers(0, customers, n),
        "region": rng.choice(["north", "south", "east", "west"], n),
        "channel": rng.choice(["web", "store"], n, p=[0.6, 0.4]),
        "amount": np.minimum(rng.gamma(2.0, 30.0, n).astype(int), 500),
    })
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "sales.csv", index=False)
    (out / "schema.yaml").write_text(SCHEMA, encoding="utf-8")
    (out / "workload.sql").write_text(WORKLOAD, encoding="utf-8")
    cents = rng.integers(0, 100, n) / 100  # drawn last: sales.csv is as before
    receipts = frame.drop(columns="amount").assign(paid=np.round(frame["amount"] + cents, 2))
    receipts.to_csv(out / "receipts.csv", index=False)
    (out / "receipts.yaml").write_text(RECEIPTS_SCHEMA, encoding="utf-8")
    (out / "receipts.sql").write_text(RECEIPTS, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    make(args.out, args.seed)
    print(f"{args.out}: 5,000 sales of 2,000 customers")


if __name__ == "__main__":
    main()
