"""Workloads: named, weighted lists of predicate queries over one domain (SPEC §2).

File formats
------------
* **Text** (``.sql``, ``.txt``, anything not YAML/JSON): one WHERE clause per line; ``#`` starts a
  comment (outside quoted literals); an optional ``name:`` prefix names the query (any other
  name in double quotes: ``"young adults": age < 30``).
* **YAML / JSON**: ``{"queries": [{"name": ..., "where": ..., "weight": ...}, ...]}`` (or the list
  alone). Weights are importance weights ≥ 0 (default 1).

Every error names ``file:line`` (or ``file:queries[i]``) and comes with a hint; all errors of a file
are reported together.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tessera.domain import Domain
from tessera.errors import QueryError, TesseraError
from tessera.parse import parse_query
from tessera.query import Query

_NAME = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*:(?!:)\s*(.*)$")
_QUOTED_NAME = re.compile(r'^\s*"((?:[^"]|"")*)"\s*:(?!:)\s*(.*)$')
_QUOTED = re.compile(r"('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")")


class WorkloadError(TesseraError):
    """All the errors found in one workload, one per line."""

    def __init__(self, errors: Sequence[TesseraError]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Workload:
    """Queries q_1..q_t over ``domain`` with names and importance weights w_q ≥ 0."""

    domain: Domain
    queries: tuple[Query, ...]
    names: tuple[str, ...]
    weights: tuple[float, ...]
    #: Where each query was written (``file:line``), when it was read from a file.
    sources: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not (len(self.queries) == len(self.names) == len(self.weights)):
            raise ValueError("queries, names and weights must have the same length")
        if self.sources is not None and len(self.sources) != len(self.queries):
            raise ValueError("sources must name one place per query")
        for name, w in zip(self.names, self.weights):
            if not (math.isfinite(w) and w >= 0):
                raise QueryError(f"query {name!r}: weight {w!r} must be a finite number ≥ 0")

    # -- construction -------------------------------------------------------------------------
    @staticmethod
    def of(
        domain: Domain,
        queries: Sequence[Query],
        names: Sequence[str] | None = None,
        weights: Sequence[float] | None = None,
        sources: Sequence[str] | None = None,
    ) -> Workload:
        """A workload from queries; default names are the queries' SQL, default weights 1."""
        qs = tuple(queries)
        return Workload(
            domain,
            qs,
            tuple(names) if names is not None else tuple(q.to_sql(domain) for q in qs),
            tuple(float(w) for w in weights) if weights is not None else (1.0,) * len(qs),
            tuple(sources) if sources is not None else None,
        )

    def describe(self, i: int) -> str:
        """Query i as a user can find it: its name, and ``file:line`` when known."""
        return f"{self.names[i]} ({self.sources[i]})" if self.sources else self.names[i]

    @staticmethod
    def from_sql(
        domain: Domain,
        clauses: Sequence[str],
        names: Sequence[str] | None = None,
        weights: Sequence[float] | None = None,
    ) -> Workload:
        """Parse WHERE clauses; errors name the clause index."""
        queries, errors = [], []
        for i, text in enumerate(clauses):
            try:
                queries.append(parse_query(text, domain))
            except QueryError as e:
                errors.append(e.located(f"query {i + 1} ({text.strip()!r})"))
        if errors:
            raise WorkloadError(errors)
        return Workload.of(
            domain, queries, names if names is not None else [c.strip() for c in clauses], weights
        )

    @staticmethod
    def load(path: str | Path, domain: Domain) -> Workload:
        """Read a text, YAML or JSON workload file (see the module docstring)."""
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as e:
            raise QueryError(f"cannot read workload: {e.strerror}", where=str(p)) from None
        if p.suffix in (".yaml", ".yml", ".json"):
            return _load_structured(p, text, domain)
        return _load_text(p, text, domain)

    def save(self, path: str | Path) -> None:
        """Write as text (``name: WHERE``) or, for .yaml/.json, structured with weights."""
        p = Path(path)
        if p.suffix in (".yaml", ".yml", ".json"):
            entries = [
                {"name": n, "where": q.to_sql(self.domain), "weight": w}
                for q, n, w in zip(self.queries, self.names, self.weights)
            ]
            doc = {"queries": entries}
            p.write_text(
                json.dumps(doc, indent=1)
                if p.suffix == ".json"
                else yaml.safe_dump(doc, sort_keys=False, width=200)
            )
            return
        lines = []
        for q, n in zip(self.queries, self.names):
            sql = q.to_sql(self.domain)
            if n == sql:
                lines.append(sql)
            elif re.fullmatch(r"[A-Za-z_][\w.\-]*", n):
                lines.append(f"{n}: {sql}")
            elif "\n" in n or "\r" in n:
                raise QueryError(
                    f"query name {n!r} spans several lines: the text format cannot hold it",
                    hint="save as .yaml or .json",
                )
            else:
                lines.append('"' + n.replace('"', '""') + f'": {sql}')
        p.write_text("\n".join(lines) + "\n")

    # -- container ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self) -> Iterator[Query]:
        return iter(self.queries)

    def __getitem__(self, i: int) -> Query:
        return self.queries[i]

    def scopes(self) -> dict[tuple[str, ...], list[int]]:
        """Query indices grouped by scope (constrained attributes, in domain order)."""
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, q in enumerate(self.queries):
            groups.setdefault(q.scope, []).append(i)
        return groups

    def stats(self) -> WorkloadStats:
        return WorkloadStats.of(self)


@dataclass(frozen=True)
class WorkloadStats:
    """What ``tessera workload check`` reports."""

    n_queries: int
    attributes_used: dict[str, int]
    scope_sizes: dict[int, int]
    contradictions: tuple[int, ...]
    tautologies: tuple[int, ...]
    duplicates: tuple[tuple[int, ...], ...]
    n_range_queries: int
    total_weight: float

    @staticmethod
    def of(w: Workload) -> WorkloadStats:
        used: Counter[str] = Counter()
        sizes: Counter[int] = Counter()
        seen: dict[Query, list[int]] = {}
        for i, q in enumerate(w.queries):
            used.update(q.scope)
            sizes[len(q.scope)] += 1
            if not q.is_contradiction():
                seen.setdefault(q, []).append(i)
        return WorkloadStats(
            n_queries=len(w),
            attributes_used=dict(sorted(used.items(), key=lambda kv: w.domain.index(kv[0]))),
            scope_sizes=dict(sorted(sizes.items())),
            contradictions=tuple(i for i, q in enumerate(w.queries) if q.is_contradiction()),
            tautologies=tuple(i for i, q in enumerate(w.queries) if not q.predicates),
            duplicates=tuple(tuple(ix) for ix in seen.values() if len(ix) > 1),
            n_range_queries=sum(q.is_range(w.domain) for q in w.queries),
            total_weight=float(sum(w.weights)),
        )


def _strip_comment(line: str) -> str:
    pieces = _QUOTED.split(line)
    for i in range(0, len(pieces), 2):
        if "#" in pieces[i]:
            return "".join(pieces[:i]) + pieces[i].split("#", 1)[0]
    return line


def _load_text(p: Path, text: str, domain: Domain) -> Workload:
    queries: list[Query] = []
    names: list[str] = []
    sources: list[str] = []
    errors: list[TesseraError] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        quoted = _QUOTED_NAME.match(line)
        m = _NAME.match(line)
        if quoted:
            name, clause = quoted.group(1).replace('""', '"'), quoted.group(2)
        elif m:
            name, clause = m.group(1), m.group(2)
        else:
            name, clause = line, line
        try:
            queries.append(parse_query(clause, domain))
            names.append(name)
            sources.append(f"{p}:{lineno}")
        except QueryError as e:
            errors.append(e.located(f"{p}:{lineno}"))
    if errors:
        raise WorkloadError(errors)
    if not queries:
        raise QueryError(
            "the workload has no queries",
            where=str(p),
            hint="one WHERE clause per line, e.g. age >= 30",
        )
    return Workload.of(domain, queries, names, sources=sources)


def _load_structured(p: Path, text: str, domain: Domain) -> Workload:
    try:
        doc: Any = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise QueryError(f"not valid {p.suffix[1:].upper()}: {e}", where=str(p)) from None
    entries = doc.get("queries") if isinstance(doc, dict) else doc
    if not isinstance(entries, list) or not entries:
        raise QueryError(
            "expected a non-empty list of queries",
            where=str(p),
            hint='{"queries": [{"name": "q1", "where": "age >= 30", "weight": 1}]}',
        )
    queries: list[Query] = []
    names: list[str] = []
    weights: list[float] = []
    sources: list[str] = []
    errors: list[TesseraError] = []
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
        try:
            queries.append(parse_query(str(entry["where"]), domain))
        except QueryError as e:
            errors.append(e.located(where))
            continue
        names.append(str(entry.get("name", entry["where"])))
        weights.append(weight)
        sources.append(where)
    if errors:
        raise WorkloadError(errors)
    return Workload.of(domain, queries, names, weights, sources)
