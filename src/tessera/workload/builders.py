"""Standard workload families over a :class:`~tessera.schema.domain.Domain`.

* :func:`marginals`: all k-way marginals of chosen attributes, one query per cell.
* :func:`identity`: one query per cell of the chosen attributes' full product.
* :func:`prefixes` / :func:`all_ranges`: prefix and all-range families on an ordered attribute.
* :func:`random_workload`: random range / set / mixed conjunctions with a seed.
* :func:`marginal_families`, :func:`cube_families`, :func:`hierarchy_families`: the same
  structures as compact families (:mod:`tessera.workload.families`), never expanded.
* :func:`build`: any of them by family name (``tessera workload build``);
  :func:`build_structured` also gives the compact YAML/JSON document of a structured family.

The builders refuse (with :class:`~tessera.errors.ResourceError`) to create more than
``max_queries`` queries (or, for families, ``max_cells`` cells), so a typo cannot fill memory.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from tessera.errors import QueryError, ResourceError
from tessera.schema.domain import Attribute, Domain
from tessera.schema.intervals import IntervalSet
from tessera.workload.families import cube, hierarchy, interval_levels, k_way_marginals
from tessera.workload.query import Query
from tessera.workload.workload import Workload, unique_names

DEFAULT_MAX_QUERIES = 5_000_000
#: Cells of structured families: 8 bytes each once counted, so far more than queries.
DEFAULT_MAX_CELLS = 100_000_000


def _guard(n: int, what: str, max_queries: int) -> None:
    if n > max_queries:
        raise ResourceError(
            f"{what} has {n:,} queries, above the limit of {max_queries:,}",
            hint="choose fewer attributes or raise max_queries",
        )


def _generated(domain: Domain, queries: Sequence[Query]) -> Workload:
    """The builders' workload: each query named by its SQL, a repeat (a random query drawn
    twice; cells of one-value attributes, which print alike) renamed ``sql (2)``, … silently —
    the names are the builder's own, so a warning would ask the user to fix nothing."""
    names = unique_names([q.to_sql(domain) for q in queries], announce=False)
    return Workload.of(domain, queries, names=names)


def _attrs(domain: Domain, names: Sequence[str] | None) -> list[Attribute]:
    return [domain[n] for n in (names if names is not None else domain.names)]


def marginals(
    domain: Domain,
    k: int,
    attributes: Sequence[str] | None = None,
    *,
    max_queries: int = DEFAULT_MAX_QUERIES,
) -> Workload:
    """All k-way marginals over ``attributes`` (default: all): one query per cell.

    Cells include the missing code of attributes that declare one (``IS NULL``).
    """
    attrs = _attrs(domain, attributes)
    if not 1 <= k <= len(attrs):
        raise QueryError(f"k = {k} must be between 1 and the number of attributes ({len(attrs)})")
    subsets = list(itertools.combinations(attrs, k))
    _guard(sum(math.prod(a.size for a in s) for s in subsets), f"{k}-way marginals", max_queries)
    queries = [
        Query.conjunction(domain, {a.name: IntervalSet.points([c]) for a, c in zip(s, cell)})
        for s in subsets
        for cell in itertools.product(*(range(a.size) for a in s))
    ]
    return _generated(domain, queries)


def identity(
    domain: Domain,
    attributes: Sequence[str] | None = None,
    *,
    max_queries: int = DEFAULT_MAX_QUERIES,
) -> Workload:
    """One query per cell of the product of ``attributes`` (the histogram)."""
    attrs = _attrs(domain, attributes)
    return marginals(domain, len(attrs), [a.name for a in attrs], max_queries=max_queries)


def _ordered(domain: Domain, name: str) -> Attribute:
    attr = domain[name]
    if not attr.ordered:
        raise QueryError(
            f"attribute {name!r} ({attr.kind}) has no order; range families need one",
            hint="declare the categorical attribute with ordered: true",
        )
    return attr


def prefixes(domain: Domain, attribute: str, *, max_queries: int = DEFAULT_MAX_QUERIES) -> Workload:
    """``attr <= v`` for every value v (missing excluded)."""
    attr = _ordered(domain, attribute)
    _guard(attr.n_values, "prefix family", max_queries)
    return _generated(
        domain,
        [
            Query.conjunction(domain, {attribute: IntervalSet.range(0, c + 1)})
            for c in range(attr.n_values)
        ],
    )


def all_ranges(
    domain: Domain, attribute: str, *, max_queries: int = DEFAULT_MAX_QUERIES
) -> Workload:
    """``attr BETWEEN a AND b`` for every a ≤ b: n(n+1)/2 queries."""
    attr = _ordered(domain, attribute)
    n = attr.n_values
    _guard(n * (n + 1) // 2, "all-range family", max_queries)
    return _generated(
        domain,
        [
            Query.conjunction(domain, {attribute: IntervalSet.range(a, b + 1)})
            for a in range(n)
            for b in range(a, n)
        ],
    )


def random_workload(
    domain: Domain,
    n_queries: int,
    *,
    attributes_per_query: tuple[int, int] | None = None,
    kind: Literal["range", "set", "mixed"] = "mixed",
    width: tuple[float, float] = (0.05, 0.5),
    attributes: Sequence[str] | None = None,
    seed: int = 0,
    max_set_values: int = 256,
    max_queries: int = DEFAULT_MAX_QUERIES,
) -> Workload:
    """Random conjunctions (a public, data-independent workload; the seed makes it reproducible).

    Each query constrains between ``attributes_per_query`` attributes chosen uniformly
    (default 1 to 3, or fewer on a smaller domain); each
    predicate covers a fraction of the attribute's values drawn uniformly from ``width`` (at least
    one value): a random interval on ordered attributes when ``kind`` is ``range`` (or ``mixed``
    with probability ½), else a random value set. Unordered attributes always get sets; ordered
    attributes with more than ``max_set_values`` values always get intervals (a random set of
    half a million integers is not a query anyone writes).

    Each query is named by its SQL; a query drawn again (likely on a small domain) is kept,
    named ``sql (2)``, ``sql (3)``, … without a warning: the names are the builder's own.
    """
    _guard(n_queries, "random workload", max_queries)
    attrs = _attrs(domain, attributes)
    lo_k, hi_k = attributes_per_query or (1, min(3, len(attrs)))
    if not 1 <= lo_k <= hi_k <= len(attrs):
        raise QueryError(
            f"attributes_per_query {attributes_per_query} must lie within 1..{len(attrs)}"
        )
    rng = np.random.default_rng(seed)
    queries = []
    for _ in range(n_queries):
        k = int(rng.integers(lo_k, hi_k + 1))
        chosen = rng.choice(len(attrs), size=k, replace=False)
        coverages = {}
        for j in sorted(chosen):
            a = attrs[j]
            n = a.n_values
            size = max(1, min(n, int(round(rng.uniform(*width) * n))))
            use_range = a.ordered and (
                kind == "range" or n > max_set_values or (kind == "mixed" and rng.random() < 0.5)
            )
            if use_range:
                start = int(rng.integers(0, n - size + 1))
                coverages[a.name] = IntervalSet.range(start, start + size)
            else:
                coverages[a.name] = IntervalSet.points(
                    rng.choice(n, size=size, replace=False).tolist()
                )
        queries.append(Query.conjunction(domain, coverages))
    return _generated(domain, queries)


def _guard_cells(n: int, what: str, max_cells: int) -> None:
    if n > max_cells:
        raise ResourceError(
            f"{what} has {n:,} cells, above the limit of {max_cells:,}",
            hint="choose fewer attributes (--attribute), or raise the limit (--max-cells; "
            "max_cells= in Python)",
        )


def _elementary(sizes: Sequence[int], k: int) -> int:
    """Σ over k-subsets of ∏ sizes: the cells of all k-way marginals, without listing them."""
    e = [1] + [0] * k
    for n in sizes:
        for j in range(k, 0, -1):
            e[j] += e[j - 1] * n
    return e[k]


def marginal_families(
    domain: Domain,
    k: int,
    attributes: Sequence[str] | None = None,
    *,
    weight: float = 1.0,
    max_cells: int = DEFAULT_MAX_CELLS,
) -> Workload:
    """All k-way marginals over ``attributes`` (default: all) as families, one per attribute
    set (:func:`~tessera.workload.families.k_way_marginals`): the compact form of :func:`marginals`,
    the same cells — in the same order when ``attributes`` are listed in domain order (the
    families always take the domain's order)."""
    attrs = _attrs(domain, attributes)
    if not 1 <= k <= len(attrs):
        raise QueryError(f"k = {k} must be between 1 and the number of attributes ({len(attrs)})")
    _guard_cells(_elementary([a.size for a in attrs], k), f"{k}-way marginals", max_cells)
    return Workload.of_families(domain, k_way_marginals(domain, k, [a.name for a in attrs], weight))


def cube_families(
    domain: Domain,
    attributes: Sequence[str],
    *,
    min_order: int = 0,
    weight: float = 1.0,
    max_cells: int = DEFAULT_MAX_CELLS,
) -> Workload:
    """The data cube over ``attributes``: the marginal of every subset of ≥ ``min_order``
    attributes, the empty one (the total count) included at ``min_order`` 0."""
    attrs = _attrs(domain, attributes)
    if not attrs:
        raise QueryError("a data cube needs at least one attribute")
    if not 0 <= min_order <= len(attrs):
        raise QueryError(f"min_order {min_order} must be between 0 and {len(attrs)}")
    sizes = [a.size for a in attrs]
    n = sum(_elementary(sizes, k) for k in range(min_order, len(attrs) + 1))
    _guard_cells(n, "the data cube", max_cells)
    return Workload.of_families(domain, cube(domain, [a.name for a in attrs], weight, min_order))


def hierarchy_families(
    domain: Domain,
    attributes: Sequence[str],
    *,
    branching: int = 2,
    depth: int | None = None,
    weight: float = 1.0,
    max_cells: int = DEFAULT_MAX_CELLS,
) -> Workload:
    """Hierarchical ranges over one or more attributes
    (:func:`~tessera.workload.families.hierarchy`): per attribute a ``branching``-ary tree of code
    intervals, ``depth`` levels (default: down to single codes), and one family per combination of
    levels."""
    attrs = _attrs(domain, attributes)
    if not attrs:
        raise QueryError("a hierarchy needs at least one attribute")
    if depth is not None and depth < 1:
        raise QueryError(f"depth {depth} must be ≥ 1")
    n = math.prod(sum(len(level) for level in interval_levels(a.size, branching, depth))
                  for a in attrs)
    _guard_cells(n, "the hierarchy", max_cells)
    return Workload.of_families(domain, hierarchy(domain, [a.name for a in attrs], branching,
                                                  depth, weight))


#: The families :func:`build` makes, by the names ``tessera workload build`` takes.
FAMILIES: tuple[str, ...] = (
    "marginals", "identity", "prefix", "ranges", "random", "cube", "hierarchy",
)
#: The families with a compact structured form (:func:`build_structured`).
STRUCTURED: tuple[str, ...] = ("marginals", "identity", "cube", "hierarchy")


def build_structured(
    family: str,
    domain: Domain,
    *,
    attributes: Sequence[str] | None = None,
    k: int = 2,
    branching: int = 2,
    depth: int | None = None,
    min_order: int = 0,
    max_cells: int = DEFAULT_MAX_CELLS,
) -> tuple[Workload, dict[str, Any]]:
    """A family of :data:`STRUCTURED` as families, and its compact YAML/JSON document — a few
    lines (``{"marginals": [{"all": 3}]}``) that :meth:`Workload.load` reads back to the same
    families, in the same order."""
    names = list(attributes) if attributes else None
    if family == "marginals":
        w = marginal_families(domain, k, names, max_cells=max_cells)
        entry: dict[str, Any] = {"all": k} if names is None else {"all": k, "over": names}
        return w, {"marginals": [entry]}
    if family == "identity":
        names = names or list(domain.names)
        w = marginal_families(domain, len(names), names, max_cells=max_cells)
        return w, {"marginals": [{"attributes": list(w.partitions[0].attributes)}]}
    if family in ("cube", "hierarchy") and not names:
        raise QueryError(f"'{family}' needs --attribute (repeatable): the attributes it spans")
    assert names is not None
    if family == "cube":
        w = cube_families(domain, names, min_order=min_order, max_cells=max_cells)
        entry = {"attributes": names} | ({"min_order": min_order} if min_order else {})
        return w, {"cubes": [entry]}
    if family == "hierarchy":
        w = hierarchy_families(domain, names, branching=branching, depth=depth,
                               max_cells=max_cells)
        entry = {"attributes": names, "branching": branching}
        if depth is not None:
            entry["depth"] = depth
        return w, {"hierarchies": [entry]}
    raise QueryError(f"family {family!r} has no structured form",
                     hint=", ".join(STRUCTURED))


def build(
    family: str,
    domain: Domain,
    *,
    attributes: Sequence[str] | None = None,
    k: int = 2,
    n_queries: int = 1000,
    kind: str = "mixed",
    attributes_per_query: tuple[int, int] | None = None,
    seed: int = 0,
    branching: int = 2,
    depth: int | None = None,
    min_order: int = 0,
    structured: bool = False,
    max_queries: int = DEFAULT_MAX_QUERIES,
) -> Workload:
    """The standard family named ``family`` (one of :data:`FAMILIES`) over ``domain``.

    ``marginals`` (order ``k``) and ``identity`` use ``attributes`` (default: all), expanded
    to one predicate query per cell unless ``structured``; ``cube`` (subsets of at least
    ``min_order`` attributes) and ``hierarchy`` (``branching``, ``depth``) need
    ``attributes`` and are always families; ``prefix`` and ``ranges`` need exactly one,
    ordered, attribute; ``random`` makes ``n_queries`` queries of ``kind`` range, set or
    mixed (see :func:`random_workload`). Raises :class:`~tessera.errors.QueryError` for an
    unknown family or arguments it cannot use.
    """
    if family in ("cube", "hierarchy") or (structured and family in STRUCTURED):
        return build_structured(family, domain, attributes=attributes, k=k, branching=branching,
                                depth=depth, min_order=min_order)[0]
    if family == "marginals":
        return marginals(domain, k, attributes, max_queries=max_queries)
    if family == "identity":
        return identity(domain, attributes, max_queries=max_queries)
    if family in ("prefix", "ranges"):
        if not attributes or len(attributes) != 1:
            raise QueryError(f"'{family}' needs exactly one --attribute (an ordered attribute)")
        make = prefixes if family == "prefix" else all_ranges
        return make(domain, attributes[0], max_queries=max_queries)
    if family == "random":
        if kind not in ("range", "set", "mixed"):
            raise QueryError(f"--kind {kind!r}: use range, set or mixed")
        return random_workload(
            domain,
            n_queries,
            attributes_per_query=attributes_per_query,
            kind=kind,  # type: ignore[arg-type]
            attributes=attributes,
            seed=seed,
            max_queries=max_queries,
        )
    raise QueryError(f"unknown family {family!r}", hint=", ".join(FAMILIES))
