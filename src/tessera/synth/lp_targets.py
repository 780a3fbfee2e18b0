"""What the LP approach fits (docs/theory.md §6): targets f̂ from a release, and f(x) on points.

:class:`Targets` are normalised answers f̂_f = answer_f / n of the queries a release answered
(:func:`release_targets`), with n public under substitution or the noisy answer of a released
tautology under add/remove (:mod:`tessera.synth.lp`, "n, the number of rows"). The
:class:`QueryEvaluator` computes f_j(x) for every query on points (codes) at once: the columns
of the master LP (:mod:`tessera.synth.lp_master`) and the explicit reference LP.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from tessera.engine import BooleanQuery, workload_functions
from tessera.engine.factors import Function
from tessera.errors import QueryError, TesseraError
from tessera.privacy import Neighbours
from tessera.schema.domain import Domain
from tessera.workload.query import Query
from tessera.workload.workload import Workload

if TYPE_CHECKING:  # the release layer is a sibling of synth: no runtime import (lint-imports)
    from tessera.release.answering import Release

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: :class:`QueryEvaluator` tabulates a predicate over its attribute's codes up to this size.
TABLE_MAX = 1 << 16


# -- targets ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Targets:
    """What the LP fits: normalised answers f̂ of queries over ``domain``.

    ``values[j]`` = f̂ of ``functions[j]``; ``scales[j]`` its noise scale in normalised units
    (NaN if unknown); ``n`` the normaliser and ``n_source`` where it came from; ``indices[j]``
    the query's position in the release's expanded order (0..k−1 without a release).
    """

    domain: Domain
    functions: tuple[Function, ...]
    names: tuple[str, ...]
    values: FloatArray
    scales: FloatArray
    n: float
    n_source: str
    indices: IntArray

    @staticmethod
    def of(
        domain: Domain,
        queries: Sequence[Function] | Workload,
        values: npt.ArrayLike,
        *,
        names: Sequence[str] | None = None,
        n: float = 1.0,
        n_source: str = "given",
    ) -> Targets:
        """Targets from already normalised values (no release: tests, other pipelines)."""
        if isinstance(queries, Workload):
            functions, own = workload_functions(queries)
            names = own if names is None else names
        else:
            functions = tuple(queries)
        vals = np.asarray(values, dtype=np.float64).reshape(-1)
        if vals.shape != (len(functions),):
            raise QueryError(f"{vals.size} target values for {len(functions)} queries")
        if not np.all(np.isfinite(vals)):
            raise QueryError("target values must be finite")
        names = tuple(names) if names is not None else tuple(f"q{j}" for j in range(len(vals)))
        if len(functions) == 0:
            raise QueryError("the LP needs at least one query")
        return Targets(domain, tuple(functions), names, vals, np.full(len(vals), np.nan),
                       float(n), n_source, np.arange(len(vals), dtype=np.int64))


def release_targets(
    release: Release, *, n: float | None = None, public_n: bool = False,
    answers: str = "published",
) -> Targets:
    """The normalised answers f̂ = answer / n of a release's answered queries.

    ``answers``: ``"published"`` (the release's last post-processing step, else the noisy
    answers) or ``"noisy"``. ``n``: module docs (required under substitution unless the release
    answers a tautology; under add/remove only with ``public_n=True``).
    """
    plan = release.plan
    workload = release.workload  # W (answered directly or reconstructed from a strategy)
    functions, names = workload_functions(workload)
    if answers == "published":
        values = np.asarray(release.answers, dtype=np.float64)
    elif answers == "noisy":
        values = np.asarray(release.noisy, dtype=np.float64)
    else:
        raise TesseraError(f"unknown answers {answers!r}", hint="'published' or 'noisy'")
    scales = np.asarray(plan.scales if release.strategy is None
                        else np.sqrt(release.strategy.variances), dtype=np.float64)
    released = np.isfinite(scales)
    if not released.any():
        raise TesseraError("the release answers no query")
    neighbours = Neighbours.parse(plan.neighbours)
    n_value, n_source = normaliser(functions, names, values, released, neighbours, n, public_n)
    idx = np.flatnonzero(released).astype(np.int64)
    return Targets(workload.domain, tuple(functions[i] for i in idx),
                   tuple(names[i] for i in idx), values[idx] / n_value, scales[idx] / n_value,
                   n_value, n_source, idx)


def normaliser(
    functions: Sequence[Function], names: Sequence[str], values: FloatArray, released: BoolArray,
    neighbours: Neighbours, n: float | None, public_n: bool,
) -> tuple[float, str]:
    if n is not None:
        if not (math.isfinite(n) and n > 0):
            raise TesseraError(f"n must be a finite number > 0, got {n!r}")
        if neighbours is Neighbours.SUBSTITUTE:
            return float(n), "public n (substitution: neighbours have the same n)"
        if not public_n:
            raise TesseraError(
                "under add/remove neighbours the number of rows n is private: the release's "
                "guarantee does not cover an n passed in",
                hint="answer a tautology (TRUE) in the workload and let n come from its noisy "
                "answer, or pass public_n=True if n is public knowledge")
        return float(n), "n given as public knowledge (public_n=True; not covered by the release)"
    totals = [j for j, f in enumerate(functions)
              if released[j] and isinstance(f, Query) and not f.predicates]
    if not totals:
        hint = ("pass n (public under substitution)" if neighbours is Neighbours.SUBSTITUTE
                else "add a tautology (TRUE) to the workload: its noisy answer is the total")
        raise TesseraError("the number of rows n is needed to normalise the answers", hint=hint)
    j = totals[0]
    return max(float(values[j]), 1.0), (f"noisy total of query {names[j]!r} (clipped at 1; "
                                         "post-processing of the release)")


# -- evaluation -------------------------------------------------------------------------------


class QueryEvaluator:
    """f_j(x) for all j at once: predicate queries as table look-ups (one per predicate, an AND
    per query, vectorised over points and queries); other functions by their own evaluate."""

    def __init__(self, domain: Domain, functions: Sequence[Function]) -> None:
        self.domain = domain
        self.functions = tuple(functions)
        tables, attrs, owner, others = [], [], [], []
        for j, f in enumerate(self.functions):
            if isinstance(f, Query) and all(domain[p.attribute].size <= TABLE_MAX
                                            for p in f.predicates):
                for p in f.predicates:
                    a = domain.index(p.attribute)
                    tables.append(p.coverage.contains_array(np.arange(domain[p.attribute].size)))
                    attrs.append(a)
                    owner.append(j)
            else:
                others.append(j)
        self.automata: dict[int, tuple[IntArray, list[IntArray], BoolArray]] = {}
        for j in others:
            f = self.functions[j]
            layers = (f.cofactor_layers(f.scope, max_states=1 << 20)
                      if isinstance(f, BooleanQuery) and f.scope else None)
            if layers is not None:  # read once, walked for every point
                positions = np.array([domain.index(a) for a in f.scope], dtype=np.int64)
                self.automata[j] = (positions, list(layers[0]), layers[1])
        sizes = [len(t) for t in tables]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        self.flat = (np.concatenate(tables) if tables else np.zeros(0)).astype(bool)
        self.attrs = np.asarray(attrs, dtype=np.int64)
        self.owner = np.asarray(owner, dtype=np.int64)
        self.others = others

    def __call__(self, codes: npt.ArrayLike) -> BoolArray:
        """Shape (points, |F|)."""
        codes = np.atleast_2d(np.asarray(codes, dtype=np.int64))
        out = np.ones((codes.shape[0], len(self.functions)), dtype=bool)
        if len(self.attrs):
            member = self.flat[self.offsets + codes[:, self.attrs]]  # (points, predicates)
            false = ~member
            rows, cols = np.nonzero(false)
            out[rows, self.owner[cols]] = False
        for j in self.others:
            if j in self.automata:
                positions, transitions, accept = self.automata[j]
                state = np.zeros(codes.shape[0], dtype=np.int64)
                for a, table in zip(positions, transitions):
                    state = table[state, codes[:, a]]
                out[:, j] = accept[state]
            else:
                out[:, j] = self.functions[j].evaluate(self.domain, codes)
        return out


def query_values(domain: Domain, functions: Sequence[Function], codes: npt.ArrayLike) -> BoolArray:
    """f_j(x) for rows of codes: shape (rows, |F|)."""
    return QueryEvaluator(domain, functions)(codes)


