"""Canonical forms of a workload, and its hash (docs/certificate.md).

Certificates, strategy sections and run records name a workload by :func:`workload_hash`: two
files that parse to the same workload (same schema, same queries in the same order with the same
names and weights, same families) have the same hash, whatever their format or spelling.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tessera.schema.domain import Domain
from tessera.workload.query import Query
from tessera.workload.workload import Workload


def _sql(q: Any, domain: Any, memo: dict[int, str]) -> str:
    if isinstance(q, Query):
        return q.to_sql(domain, memo)
    if hasattr(q, "to_sql"):  # a Boolean clause
        return q.to_sql(domain)  # type: ignore[no-any-return]
    return q.canonical_text()  # type: ignore[no-any-return]  # a BDD query (engine.bdd)


def workload_hash(workload: Workload) -> str:
    """SHA-256 of the canonical workload: the schema, and each query's canonical SQL, name and
    weight, in order. Two files that parse to the same workload have the same hash. A workload
    of lazy range families (:mod:`tessera.workload.ranges`) is hashed from the families'
    compact description (their queries and names follow from it)."""
    ranges = workload.range_families
    if ranges is not None:  # lazy range families: hashed by their compact description
        return sha256_of({"domain": workload.domain.to_dict(),
                          "ranges": [f.to_dict() | {"kind": f.kind, "weight": f.weight}
                                     for f in ranges]})
    memo: dict[int, str] = {}  # predicates shared by many queries are printed once
    doc: dict[str, Any] = {
        "domain": workload.domain.to_dict(),
        "queries": [[_sql(q, workload.domain, memo), n, float(w)]
                    for q, n, w in zip(workload.queries, workload.names, workload.weights)],
    }
    if workload.partitions:  # (absent for predicate workloads: their hashes stay as they were)
        doc["families"] = [p.to_dict() | {"weight": p.weight} for p in workload.partitions]
    return hashlib.sha256(canonical_json(doc).encode()).hexdigest()


def canonical_json(doc: Any) -> str:
    """``doc`` as canonical JSON (sorted keys, no spaces, no NaN): what the hashes hash."""
    return json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False)


def sha256_of(doc: Any) -> str:
    """SHA-256 (hex) of :func:`canonical_json` of ``doc``."""
    return hashlib.sha256(canonical_json(doc).encode()).hexdigest()


def schema_hash(domain: Domain) -> str:
    """SHA-256 of the canonical schema (its attributes, types and values): what a synthesis
    record names its schema by (:mod:`tessera.synth.verify`)."""
    return sha256_of(domain.to_dict())
