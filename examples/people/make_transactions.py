"""A made-up transactions table with several rows per person, for docs/people.md.

    python examples/people/make_transactions.py OUT_DIR [--people 2000] [--seed 0]

Writes into OUT_DIR (nothing is written to the repository):

* ``transactions.csv`` — one row per purchase: ``customer`` (the person: ``c00001`` …, the
  privacy id; it is not in the schema), ``category``, ``amount`` (a band), ``weekday``,
  ``channel``. Each customer has between 1 and 50 purchases (a geometric number, mean ≈ 9,
  capped at 50), and their purchases share a favourite category and channel, as real ones do;
* ``schema.yaml`` — the public schema of the purchase columns (not of the customer id);
* ``workload.sql`` — purchases by category, by amount band, by channel, two cross-tabs and
  the total.

The data are synthetic and random (seeded): no real person is in them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

CATEGORIES = ["grocery", "fuel", "restaurants", "clothing", "electronics", "travel", "health"]
AMOUNTS = ["<10", "10-50", "50-200", "200-1000", ">1000"]
WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
CHANNELS = ["store", "online", "phone"]
#: Query names of the amount bands (a name is an identifier).
AMOUNT_NAMES = ["under_10", "10_to_50", "50_to_200", "200_to_1000", "over_1000"]

AMOUNT_VALUES = ", ".join(f'"{a}"' for a in AMOUNTS)  # quoted: '<' and '>' start YAML tokens
SCHEMA = f"""# Public schema of the purchase columns of transactions.csv (written from the shop's
# published lists, never from the data). The customer id is not an attribute: it is read only
# to group a person's rows (--privacy-id customer) and is never released.
attributes:
  category: {{type: categorical, values: [{", ".join(CATEGORIES)}]}}
  amount: {{type: categorical, values: [{AMOUNT_VALUES}]}}
  weekday: {{type: categorical, values: [{", ".join(WEEKDAYS)}]}}
  channel: {{type: categorical, values: [{", ".join(CHANNELS)}]}}
"""

WORKLOAD = "\n".join(
    ["# Purchases by category, amount band and channel, two cross-tabs, and the total."]
    + [f"{c}: category = '{c}'" for c in CATEGORIES]
    + [f"amount_{n}: amount = '{a}'" for n, a in zip(AMOUNT_NAMES, AMOUNTS)]
    + [f"{c}: channel = '{c}'" for c in CHANNELS]
    + [f"online_{c}: channel = 'online' AND category = '{c}'" for c in CATEGORIES]
    + [f"weekend_{n}: weekday IN ('Sat', 'Sun') AND amount = '{a}'"
       for n, a in zip(AMOUNT_NAMES, AMOUNTS)]
    + ["total: TRUE"]) + "\n"


def transactions(people: int, seed: int) -> pd.DataFrame:
    """``people`` customers with 1–50 purchases each (module docs)."""
    rng = np.random.default_rng(seed)
    per = np.minimum(rng.geometric(1 / 9, people), 50)
    customer = np.repeat([f"c{i:05d}" for i in range(people)], per)
    n = int(per.sum())
    favourite = np.repeat(rng.integers(0, len(CATEGORIES), people), per)
    category = np.where(rng.random(n) < 0.5, favourite, rng.integers(0, len(CATEGORIES), n))
    channel = np.where(rng.random(n) < 0.7, np.repeat(rng.integers(0, 3, people), per),
                       rng.integers(0, 3, n))
    amount = np.minimum(rng.poisson(1.3, n), len(AMOUNTS) - 1)
    return pd.DataFrame({
        "customer": customer,
        "category": np.array(CATEGORIES)[category],
        "amount": np.array(AMOUNTS)[amount],
        "weekday": np.array(WEEKDAYS)[rng.integers(0, 7, n)],
        "channel": np.array(CHANNELS)[channel],
    }).sample(frac=1.0, random_state=seed).reset_index(drop=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--people", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    frame = transactions(args.people, args.seed)
    frame.to_csv(args.out / "transactions.csv", index=False)
    (args.out / "schema.yaml").write_text(SCHEMA)
    (args.out / "workload.sql").write_text(WORKLOAD)
    per = frame.groupby("customer").size()
    print(f"{args.out}: {len(frame):,} purchases of {len(per):,} customers "
          f"({per.min()}–{per.max()} each, median {int(per.median())})")


if __name__ == "__main__":
    main()
