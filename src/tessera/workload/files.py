"""Workload files: reading and writing the text, YAML and JSON formats (docs/guide.md).

The readers return the parts of a workload (:class:`WorkloadParts`);
:meth:`tessera.workload.workload.Workload.load` and ``save`` are the public entry points.

File formats
------------
* **Text** (``.sql``, ``.txt``, anything not YAML/JSON): one WHERE clause per line; ``#`` starts a
  comment (outside quoted literals); an optional ``name:`` prefix names the query (any other
  name in double quotes: ``"young adults": age < 30``). A Boolean (BDD) query over binary
  attributes is written as its canonical text, ``f: BDD[a,b,c](ite(a, TRUE, c))`` (optionally
  followed by `` symmetric(or, [('a', 1), ('c', 1)], 1)``; :mod:`tessera.workload.bdd`), which is
  what ``Workload.save`` writes for it, so a saved workload reads back with the same hash.
* **YAML / JSON**: ``{"queries": [{"name": ..., "where": ..., "weight": ...}, ...]}`` (or the list
  alone). Weights are importance weights ≥ 0 (default 1). Structured families
  (:mod:`tessera.workload.families`) sit beside the queries and are never expanded to text::

      marginals:                    # a listed set of attribute sets, or all k-way ones
        - {attributes: [age, sex], weight: 2}
        - {all: 3}                  # every 3-way marginal (of ``over:`` attributes, default all)
      cubes:
        - {attributes: [age, sex, race]}        # every subset's marginal, the total included
      hierarchies:
        - {attributes: [age, hours], branching: 2, depth: 4}
      partitions: [...]             # explicit families, as ``Workload.save`` writes them
      prefixes:                     # prefix (dominance) ranges: a <= v (and b <= u)
        - {attributes: [age]}
      ranges:                       # every range lo <= age <= hi (1-D) ...
        - {attributes: [age]}       # (``{attribute: age}`` is the same)
        - {attributes: [age, hours]}  # ... or every axis-aligned rectangle (2-D)

  A file of range blocks only is kept compact (:mod:`tessera.workload.ranges`: lazy
  families, never built as query objects); beside other queries or families the blocks
  are expanded to predicate queries (up to 10⁶).

  Cells are queries too: ``len(workload)`` counts the predicate queries,
  :attr:`Workload.n_queries` every query, and :meth:`Workload.expanded` materialises the
  cells as predicate queries (lazily, on request, with a size guard).

Every error names ``file:line`` (or ``file:queries[i]``) and comes with a hint; all errors of a file
are reported together.

Why this module is long (about 330 lines): the two formats share the name and weight rules, the
error collection (every error of a file, ``file:line`` each) and the structured blocks; a third
of it is the text reader's fast loop for 10⁶-line files.
"""

from __future__ import annotations

import gc
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tessera.errors import (
    QueryError,
    ResourceError,
    TesseraError,
    capped_lines,
    read_text,
    syntax_error,
)
from tessera.schema.domain import Domain
from tessera.workload.bdd import BooleanQuery, is_bdd_text, parse_bdd
from tessera.workload.clause import BooleanClause
from tessera.workload.families import (
    MAX_PREFIX_QUERIES,
    Partition,
    cube,
    hierarchy,
    k_way_marginals,
)
from tessera.workload.fastparse import FastParser
from tessera.workload.query import Query
from tessera.workload.ranges import RangeFamily, RangeQueries

#: Most lines :meth:`Workload.load` reads from a text workload by default: a parsed query costs
#: about 0.6 KB (10⁶ random conjunctions: 0.7 GiB peak with the statistics), so 5·10⁶ is
#: ~3 GiB. Counted before parsing, in a streaming pass that keeps no line.
TEXT_MAX_QUERIES = 5_000_000
#: Largest YAML workload file :meth:`Workload.load` parses: PyYAML keeps ~35 bytes per byte of
#: input (10⁵ queries, 7.3 MB: 0.25 GiB above the interpreter), so 64 MiB is ~2 GiB. JSON is
#: parsed in C, at a fraction of that, and has no such limit.
YAML_MAX_BYTES = 64 * 2**20

#: A bare query name: a letter (any script) or underscore, then word characters, ``.``, ``-``.
_NAME = re.compile(r"^\s*([^\W\d][\w.\-]*)\s*:(?!:)\s*(.*)$")
_QUOTED_NAME = re.compile(r'^\s*"((?:[^"]|"")*)"\s*:(?!:)\s*(.*)$')
_QUOTED = re.compile(r"('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")")


def require_at_most(n: int, limit: int, what: str, hint: str) -> None:
    """Refuse ``n`` queries above ``limit`` with the resource guards' one message,
    ``{what} {n:,} queries, above the limit of {limit:,}``, and a hint naming how to raise it."""
    if n > limit:
        raise ResourceError(f"{what} {n:,} queries, above the limit of {limit:,}", hint=hint)


#: Suffixes of data files: a text workload with one of them that is mostly errors is probably
#: the data, given in the workload's place.
DATA_SUFFIXES = (".csv", ".tsv", ".parquet", ".data", ".duckdb")


class WorkloadError(TesseraError):
    """All the errors found in one workload, one per line: the first
    :data:`~tessera.errors.MAX_ERRORS_SHOWN`, then how many more (``errors`` keeps them all)."""

    def __init__(self, errors: Sequence[TesseraError]) -> None:
        self.errors = list(errors)
        super().__init__(capped_lines(self.errors))

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class WorkloadParts:
    """What a workload file holds, as :meth:`~tessera.workload.workload.Workload.of` takes it."""

    domain: Domain
    queries: Sequence[Query | BooleanClause]
    names: Sequence[str]
    weights: Sequence[float] | None = None
    sources: Sequence[str] | None = None
    partitions: Sequence[Partition] = ()
    warnings: Sequence[str] = ()


def read_workload(path: str | Path, domain: Domain, *,
                  max_queries: int = TEXT_MAX_QUERIES) -> WorkloadParts:
    """Read a text, YAML or JSON workload file (see the module docstring). A text file of
    more than ``max_queries`` lines is refused before it is parsed (a
    :class:`ResourceError`); structured families are never expanded, at any size."""
    p = Path(path)
    structured = p.suffix in (".yaml", ".yml", ".json")
    try:
        if p.suffix in (".yaml", ".yml") and p.stat().st_size > YAML_MAX_BYTES:
            raise ResourceError(
                f"{p}: a YAML workload of {p.stat().st_size:,} bytes, above the limit of "
                f"{YAML_MAX_BYTES:,} (the YAML parser keeps ~35 bytes a byte)",
                hint="write the queries as JSON (same keys) or as text lines, and families "
                "compactly (marginals: [{all: k}])")
        if not structured:
            require_at_most(count_lines(p), max_queries, f"{p}: the text workload has",
                            "write marginals, cubes and hierarchies compactly as YAML "
                            "(tessera workload build ... -o W.yaml), split the file, or "
                            "raise the limit: Workload.load(..., max_queries=N)")
    except OSError as e:
        raise QueryError(f"cannot read workload: {e.strerror}", where=str(p)) from None
    text = read_text(p, "workload", QueryError)
    if structured:
        return _load_structured(p, text, domain)
    return _load_text(p, text, domain)



def write_workload(path: str | Path, domain: Domain,
                   queries: Sequence[Query | BooleanClause | BooleanQuery],
                   names: Sequence[str], weights: Sequence[float],
                   partitions: Sequence[Partition]) -> None:
    """Write as text (``name: WHERE``) or, for .yaml/.json, structured with weights."""
    p = Path(path)
    if partitions and p.suffix not in (".yaml", ".yml", ".json"):
        raise QueryError("structured families are written compactly in YAML or JSON only",
                         where=str(p), hint="save as .yaml or .json")
    if p.suffix in (".yaml", ".yml", ".json"):
        doc: dict[str, Any] = {}
        if isinstance(queries, RangeQueries):  # lazy range families: their compact blocks
            for f in queries.families:
                doc.setdefault(f.kind, []).append(f.to_dict())
            entries = []
        else:
            entries = [
                {"name": n, "where": query_text(q, domain), "weight": w}
                for q, n, w in zip(queries, names, weights)
            ]
        if entries:
            doc["queries"] = entries
        if partitions:
            doc["partitions"] = [f.to_dict() for f in partitions]
        p.write_text(
            json.dumps(doc, indent=1)
            if p.suffix == ".json"
            else yaml.safe_dump(doc, sort_keys=False, width=200)
        )
        return
    lines = []
    for q, n in zip(queries, names):
        sql = query_text(q, domain)
        if n == sql:
            lines.append(sql)
        elif re.fullmatch(r"[^\W\d][\w.\-]*", n):
            lines.append(f"{n}: {sql}")
        elif "\n" in n or "\r" in n:
            raise QueryError(
                f"query name {n!r} spans several lines: the text format cannot hold it",
                hint="save as .yaml or .json",
            )
        else:
            lines.append('"' + n.replace('"', '""') + f'": {sql}')
    p.write_text("\n".join(lines) + "\n")


def query_text(q: Query | BooleanClause | BooleanQuery, domain: Domain) -> str:
    """The text a workload file holds for ``q``: its SQL WHERE clause, or a BDD query's
    canonical text (:meth:`~tessera.workload.bdd.BooleanQuery.canonical_text`, read back by
    :func:`~tessera.workload.bdd.parse_bdd`)."""
    if isinstance(q, BooleanQuery):
        return q.canonical_text()
    return q.to_sql(domain)


def count_lines(p: str | Path) -> int:
    """Lines of a text file (an upper bound on the queries it holds), counted in 16 MiB blocks
    without keeping any: what the size guards check before parsing."""
    lines, last = 0, b"\n"
    with Path(p).open("rb") as f:
        while block := f.read(2**24):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def split_line(raw: str) -> tuple[str, str] | None:
    """(name, text) of one line of a text workload: its comment removed, its ``name:`` prefix
    (bare or double-quoted) split off (the name is the text itself without one); ``None`` for a
    blank line."""
    line = (_strip_comment(raw) if "#" in raw else raw).strip()
    if not line:
        return None
    quoted = _QUOTED_NAME.match(line) if ":" in line else None
    if quoted:
        return quoted.group(1).replace('""', '"'), quoted.group(2)
    m = _NAME.match(line) if ":" in line else None
    if m:
        return m.group(1), m.group(2)
    return line, line


def _strip_comment(line: str) -> str:
    pieces = _QUOTED.split(line)
    for i in range(0, len(pieces), 2):
        if "#" in pieces[i]:
            return "".join(pieces[:i]) + pieces[i].split("#", 1)[0]
    return line


def _load_text(p: Path, text: str, domain: Domain) -> WorkloadParts:
    """One query per line; simple conjunctions take :mod:`tessera.workload.fastparse` (same queries,
    identical predicates shared), everything else -- and every error -- ``parse_query``."""
    queries: list[Query | BooleanClause | BooleanQuery] = []
    names: list[str] = []
    sources: list[str] = []
    errors: list[TesseraError] = []
    warnings: list[str] = []
    notes: list[str] = []
    fast = FastParser(domain)
    managers: dict[str, Any] = {}  # BDD queries of one variable order share a manager
    where = f"{p}:"
    # Millions of acyclic objects: the cycle collector would only rescan them, so it is off
    # while loading, except right after the main parser, whose sqlglot trees (and errors'
    # tracebacks) are cyclic garbage: a young-generation pass frees them.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for lineno, raw in enumerate(text.splitlines(), start=1):
            line = (_strip_comment(raw) if "#" in raw else raw).strip()
            if not line:
                continue
            quoted = m = None
            if ":" in line:  # both name prefixes end with a colon
                quoted = _QUOTED_NAME.match(line)
                m = None if quoted else _NAME.match(line)
            if quoted:
                name, clause = quoted.group(1).replace('""', '"'), quoted.group(2)
            elif m:
                name, clause = m.group(1), m.group(2)
            else:
                name, clause = line, line
            if is_bdd_text(clause):  # a BDD query, as BooleanQuery.canonical_text writes it
                try:
                    queries.append(parse_bdd(clause, domain, managers))
                except QueryError as e:
                    errors.append(e.located(f"{where}{lineno}"))
                    continue
                names.append(name)
                sources.append(f"{where}{lineno}")
                continue
            query = fast.try_parse(clause, notes)
            if notes:
                warnings.extend(f"{where}{lineno}: {note}" for note in notes)
                notes.clear()
            if query is None:
                try:
                    query = fast.parse(clause, notes)
                except QueryError as e:
                    errors.append(e.located(f"{where}{lineno}"))
                warnings.extend(f"{where}{lineno}: {note}" for note in notes)
                notes.clear()
                if collecting:
                    gc.collect(0)
                if query is None:
                    continue
            queries.append(query)
            names.append(name)
            sources.append(f"{where}{lineno}")
    finally:
        if collecting:
            gc.enable()
    if errors and p.suffix.lower() in DATA_SUFFIXES and len(errors) > len(queries):
        errors.insert(0, QueryError(
            f"{len(errors):,} of {len(errors) + len(queries):,} lines are not queries: is this "
            "the data?", where=str(p),
            hint="commands take DATA first, then WORKLOAD (tessera answer DATA WORKLOAD ...)"))
    if errors:
        raise WorkloadError(errors)
    if not queries:
        raise QueryError(
            "the workload has no queries",
            where=str(p),
            hint="one WHERE clause per line, e.g. age >= 30",
        )
    return WorkloadParts(domain, queries, names, sources=sources, warnings=warnings)


def _load_structured(p: Path, text: str, domain: Domain) -> WorkloadParts:
    try:
        doc: Any = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise syntax_error(p, p.suffix[1:].upper().replace("YML", "YAML"), e,
                           QueryError) from None
    errors: list[TesseraError] = []
    families: list[Partition] = []
    if isinstance(doc, dict):
        unknown = set(doc) - {"queries", "prefixes", "ranges", *FAMILY_KEYS}
        if unknown:
            raise QueryError(f"unknown key {sorted(unknown)[0]!r}", where=str(p),
                             hint="top-level keys are queries, prefixes, ranges, "
                             + ", ".join(FAMILY_KEYS))
        families = _load_families(p, doc, domain, errors)
    entries = doc.get("queries", []) if isinstance(doc, dict) else doc
    if not isinstance(entries, list) or not (entries or families or errors
                                             or (isinstance(doc, dict) and (doc.get("prefixes")
                                                                            or doc.get("ranges")))):
        raise QueryError(
            "expected a non-empty list of queries (or structured families)",
            where=str(p),
            hint='{"queries": [{"name": "q1", "where": "age >= 30", "weight": 1}]} or '
            '{"marginals": [{"all": 2}]}',
        )
    queries: list[Query | BooleanClause | BooleanQuery] = []
    names: list[str] = []
    weights: list[float] = []
    sources: list[str] = []
    warnings: list[str] = []
    fast = FastParser(domain)
    managers: dict[str, Any] = {}  # BDD queries of one variable order share a manager
    for i, entry in enumerate(entries):
        where = f"{p}:queries[{i}]"
        if isinstance(entry, str):
            entry = {"where": entry}
        if not isinstance(entry, dict) or "where" not in entry:
            errors.append(
                QueryError(
                    "each query needs a 'where' clause",
                    where=where,
                    hint="{name: q1, where: 'age >= 30', weight: 1}",
                )
            )
            continue
        unknown = set(entry) - {"name", "where", "weight"}
        if unknown:
            errors.append(
                QueryError(
                    f"unknown key {sorted(unknown)[0]!r}",
                    where=where,
                    hint="keys are name, where, weight",
                )
            )
            continue
        try:
            weight = float(entry.get("weight", 1.0))
            if not (math.isfinite(weight) and weight >= 0):
                raise ValueError
        except (TypeError, ValueError):
            errors.append(
                QueryError(f"weight {entry.get('weight')!r} is not a number ≥ 0", where=where)
            )
            continue
        notes: list[str] = []
        try:  # (the fast path for simple conjunctions, identical predicates shared)
            text = str(entry["where"])
            queries.append(parse_bdd(text, domain, managers) if is_bdd_text(text)
                           else fast.parse(text, notes))
        except QueryError as e:
            errors.append(e.located(where))
            continue
        warnings.extend(f"{where}: {note}" for note in notes)
        names.append(str(entry.get("name", entry["where"])))
        weights.append(weight)
        sources.append(where)
    ranges = list(_range_blocks(p, doc, domain, errors))
    if errors:
        raise WorkloadError(errors)
    if ranges and not queries and not families:
        # only compact range blocks: the lazy families, never built as query objects
        return WorkloadParts(domain, RangeQueries(domain, [f for f, _ in ranges]),
                             (), None, None, (), warnings)
    total = len(queries) + sum(f.n_queries for f, _ in ranges)
    if ranges and total > MAX_PREFIX_QUERIES:
        raise QueryError(f"the range blocks beside other queries or families make {total:,} "
                         f"predicate queries, above {MAX_PREFIX_QUERIES:,}", where=str(p),
                         hint="put the ranges or prefixes in a file of their own (a file of "
                              "range blocks only is kept compact, never expanded)")
    for fam, where in ranges:
        for q, name in zip(RangeQueries(domain, [fam]), fam.names(domain).tolist()):
            queries.append(q)
            names.append(name)
            weights.append(fam.weight)
            sources.append(where)
    return WorkloadParts(domain, queries, names, weights, sources, families, warnings)


def _range_blocks(p: Path, doc: Any, domain: Domain, errors: list[TesseraError]
                  ) -> Iterator[tuple[RangeFamily, str]]:
    """The families of the compact range blocks (``ranges: [{attribute: age}]`` or
    ``[{attributes: [age, hours]}]``, ``prefixes: [{attributes: [age]}]``), each with its place
    (``file:ranges[i]``); errors collected, each naming the entry and the attribute."""
    for key in ("ranges", "prefixes"):
        block = doc.get(key) if isinstance(doc, dict) else None
        if block is None:
            continue
        shape = "{attributes: [age], weight: 1} or {attributes: [age, hours]}"
        if not isinstance(block, list):
            errors.append(QueryError(f"'{key}' must be a list", where=f"{p}:{key}",
                                     hint=f"{key}: [{shape}]"))
            continue
        for i, entry in enumerate(block):
            where = f"{p}:{key}[{i}]"
            try:
                if not isinstance(entry, dict) or not set(entry) <= {"attribute", "attributes",
                                                                     "weight"}:
                    raise QueryError(f"an entry of '{key}' has keys attributes (or "
                                     f"attribute) and weight", hint=f"{key}: [{shape}]")
                attrs = entry.get("attributes", entry.get("attribute"))
                if isinstance(attrs, str):
                    attrs = [attrs]
                if ("attribute" in entry) == ("attributes" in entry) or not (
                        isinstance(attrs, list) and all(isinstance(a, str) for a in attrs)):
                    raise QueryError(f"an entry of '{key}' names its attributes once",
                                     hint=f"{key}: [{shape}]")
                weight = float(entry.get("weight", 1.0))
                yield RangeFamily.of(domain, attrs, key, weight), where
            except TesseraError as e:
                errors.append(e.located(where))
            except (TypeError, ValueError) as e:
                errors.append(QueryError(f"malformed entry: {e}", where=where,
                                         hint=f"{key}: [{shape}]"))


#: The structured blocks of a YAML/JSON workload (module docstring).
FAMILY_KEYS = ("marginals", "cubes", "hierarchies", "partitions")
_FAMILY_FIELDS = {
    "marginals": {"attributes", "all", "over", "weight", "name"},
    "cubes": {"attributes", "min_order", "weight"},
    "hierarchies": {"attributes", "branching", "depth", "weight", "name"},
    "partitions": {"name", "kind", "attributes", "groups", "weight"},
}


def _load_families(p: Path, doc: dict[str, Any], domain: Domain,
                   errors: list[TesseraError]) -> list[Partition]:
    """The structured blocks, each entry checked; errors collected with their place."""
    out: list[Partition] = []
    for key in FAMILY_KEYS:
        block = doc.get(key)
        if block is None:
            continue
        if not isinstance(block, list):
            errors.append(QueryError(f"'{key}' must be a list", where=f"{p}:{key}"))
            continue
        for i, entry in enumerate(block):
            where = f"{p}:{key}[{i}]"
            try:
                out.extend(_family(key, entry, domain))
            except TesseraError as e:
                errors.append(e.located(where))
            except (TypeError, ValueError) as e:
                errors.append(QueryError(f"malformed entry: {e}", where=where,
                                         hint=f"keys: {', '.join(sorted(_FAMILY_FIELDS[key]))}"))
    return out


def _family(key: str, entry: Any, domain: Domain) -> tuple[Partition, ...]:
    if not isinstance(entry, dict):
        raise QueryError(f"each entry of '{key}' is a mapping",
                         hint=f"keys: {', '.join(sorted(_FAMILY_FIELDS[key]))}")
    unknown = set(entry) - _FAMILY_FIELDS[key]
    if unknown:
        raise QueryError(f"unknown key {sorted(unknown)[0]!r}",
                         hint=f"keys: {', '.join(sorted(_FAMILY_FIELDS[key]))}")
    weight = float(entry.get("weight", 1.0))
    if not (math.isfinite(weight) and weight >= 0):
        raise QueryError(f"weight {entry.get('weight')!r} is not a number ≥ 0")
    attrs = entry.get("attributes")
    if attrs is not None and not (isinstance(attrs, list) and all(isinstance(a, str)
                                                                  for a in attrs)):
        raise QueryError("'attributes' must be a list of attribute names")
    if key == "marginals":
        if ("all" in entry) == (attrs is not None):
            raise QueryError("a marginal gives either 'attributes' or 'all: k'",
                             hint="{attributes: [age, sex]} or {all: 2}")
        if attrs is not None:
            return (Partition.marginal(domain, attrs, weight, entry.get("name")),)
        return k_way_marginals(domain, int(entry["all"]), entry.get("over"), weight)
    if attrs is None:
        raise QueryError(f"an entry of '{key}' needs 'attributes'")
    if key == "cubes":
        return cube(domain, attrs, weight, int(entry.get("min_order", 0)))
    if key == "hierarchies":
        depth = entry.get("depth")
        return hierarchy(domain, attrs, int(entry.get("branching", 2)),
                         None if depth is None else int(depth), weight, entry.get("name"))
    return (Partition.from_dict(domain, entry | {"weight": weight}),)
