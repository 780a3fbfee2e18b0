"""How much a workload holds, in words for people: ``1 query``, ``33 queries``, ``66 marginals``,
``12 queries and 4 cubes`` — counts with the noun in the number they take."""

from __future__ import annotations

from collections import Counter

from tessera.workload.workload import Workload

__all__ = ["counted", "workload_size"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in the number it takes: ``1 query``, ``2 queries``, ``3 releases``
    (``plural`` for a noun the English rules below miss)."""
    many = plural or (noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou"
                      else noun + "s")
    return f"{n:,} {noun if n == 1 else many}"


def workload_size(w: Workload) -> str:
    """What ``w`` holds: its predicate queries, then its families by kind (marginal, cube,
    hierarchy, …) in the order they first appear; ``no queries`` when empty."""
    parts = [counted(len(w.queries), "query")] if w.queries else []
    kinds = Counter(p.kind for p in w.partitions)
    parts += [counted(n, kind) for kind, n in kinds.items()]
    if not parts:
        return "no queries"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
