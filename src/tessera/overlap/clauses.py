"""Boolean clauses in the overlap solvers: each clause as disjoint predicate terms (docs/theory.md
§2, §3).

A :class:`~tessera.workload.clause.BooleanClause` c is a union of pairwise disjoint boxes (the
accepting paths of its automaton over value classes:
:meth:`~tessera.workload.clause.BooleanClause.disjoint_terms`), c(x) = Σ_k q_k(x) with each term q_k
a predicate query. Give every term the clause's score s_c:

* **add/remove**: Σ_{q∈I(x)} s_q is *the same function of x* for the workload and for its
  expansion (a point lies in at most one term of a clause, and in one iff the clause holds).
  Every solver for predicate queries (sweep, branch and bound, ToulBar2, enumeration, the engine,
  the colouring and split bounds) answers the expansion, and its answer, exact or a proven bound,
  is the workload's; the witness is re-checked on the clauses themselves.
* **substitution**: [c(x) ≠ c(y)] ≤ Σ_k [q_k(x) ≠ q_k(y)] (if c(x) = 1 and c(y) = 0, x's term
  holds at x only), so the expansion's S_sub is an upper bound; it is exact where no pair puts x
  and y in two different terms of one clause. The exact route enumerates the realisable sets
  I(x) of the expansion (:func:`~.substitution.realisable_sets`) and ORs each clause's terms back
  into one bit (:meth:`Expansion.collapse`) before taking the best pair.

A clause whose expansion would exceed its share of :data:`EXPAND_MAX_TERMS` is *relaxed*: its open
paths become terms whose boxes contain the clause's points below them (still disjoint, c(x) ≤
Σ_k q_k(x); at worst the one term TRUE, "the clause touches every row"). Then the add/remove
answer of the expansion is an upper bound only (exact when the re-checked witness attains it),
and substitution falls back to min(2·S, Σ h(w)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.overlap.substitution import (
    MAX_PAIR_STATES,
    MAX_STATES,
    best_pair,
    maximal_rows,
    realisable_sets,
)
from tessera.schema.domain import Domain
from tessera.workload.clause import BooleanClause
from tessera.workload.query import Query

#: Terms of all the clauses of a workload together (beyond: the largest clauses are relaxed).
EXPAND_MAX_TERMS = 200_000
#: Terms of one clause at most.
CLAUSE_MAX_TERMS = 4_096
#: ... and at least this many when the workload has many clauses.
CLAUSE_MIN_TERMS = 64


def has_clauses(queries: Sequence[object]) -> bool:
    return any(isinstance(q, BooleanClause) for q in queries)


@dataclass(frozen=True, eq=False)
class Expansion:
    """A workload with every clause replaced by its disjoint terms (in place, in order).

    ``owner[e]`` is the workload query of expanded query e; ``starts[j]:starts[j+1]`` are the
    expanded queries of workload query j (one for a predicate query, none for a clause that is
    a contradiction). ``exact``: no clause was relaxed.
    """

    queries: tuple[Query, ...]
    owner: npt.NDArray[np.int64]
    starts: npt.NDArray[np.int64]
    exact: bool
    n_clauses: int
    n_relaxed: int

    def scores(self, s: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """Every term takes its clause's score."""
        return np.asarray(s, dtype=np.float64)[self.owner]

    def collapse(self, incidence: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """Rows of expanded incidence (n, len(queries)) → rows over the workload: a clause is
        in I(x) iff one of its terms is."""
        inc = np.asarray(incidence, dtype=np.int64)
        cum = np.concatenate([np.zeros((inc.shape[0], 1), np.int64), np.cumsum(inc, axis=1)],
                             axis=1)
        return (cum[:, self.starts[1:]] - cum[:, self.starts[:-1]]) > 0

    def describe(self) -> str:
        n_terms = len(self.queries) - (len(self.starts) - 1 - self.n_clauses)
        text = (f"{self.n_clauses:,} Boolean clauses as {n_terms:,} disjoint predicate terms")
        if self.n_relaxed:
            text += (f" ({self.n_relaxed:,} relaxed: their terms contain them, so the answer is "
                     "an upper bound unless the witness attains it)")
        return text


def expand(queries: Sequence[Query | BooleanClause], max_terms: int = EXPAND_MAX_TERMS
           ) -> Expansion:
    """The workload with each clause as disjoint predicate terms (module docstring)."""
    clauses = [q for q in queries if isinstance(q, BooleanClause)]
    cap = min(CLAUSE_MAX_TERMS, max(CLAUSE_MIN_TERMS, max_terms // max(1, len(clauses))))
    out: list[Query] = []
    owner: list[int] = []
    starts = [0]
    relaxed = 0
    for j, q in enumerate(queries):
        if isinstance(q, BooleanClause):
            terms, exact = q.disjoint_terms(cap)
            relaxed += not exact
            out.extend(terms)
            owner.extend([j] * len(terms))
        else:
            out.append(q)
            owner.append(j)
        starts.append(len(out))
    return Expansion(tuple(out), np.asarray(owner, dtype=np.int64),
                     np.asarray(starts, dtype=np.int64), relaxed == 0, len(clauses), relaxed)


def exact_pair(
    domain: Domain, expansion: Expansion, scores: npt.ArrayLike
) -> tuple[float, tuple[int, ...], tuple[int, ...]]:
    """max_{x,y} Σ_q s_q [q(x) ≠ q(y)] over the workload (clauses included) and a maximising
    pair: the realisable sets of the (exact) expansion, collapsed. Raises ResourceError beyond
    :data:`~.substitution.MAX_PAIR_STATES` patterns of the expansion."""
    assert expansion.exact, "a relaxed expansion does not give the clauses' sets"
    sets = realisable_sets(domain, expansion.queries, max_states=MAX_PAIR_STATES)
    inc = expansion.collapse(sets.incidence)
    _, first = np.unique(np.packbits(inc, axis=1), axis=0, return_index=True)
    return best_pair(inc[first], sets.points[first], scores)


def maximal_sets(domain: Domain, expansion: Expansion, max_sets: int = MAX_STATES
                 ) -> npt.NDArray[np.bool_]:
    """The maximal realisable sets I(x) of the workload (rows over its queries).

    Dominated atoms may be skipped on the expansion: moving x_a to a dominating atom only adds
    terms, hence only adds clauses (OR is monotone), so every maximal set of the workload is
    still realised."""
    assert expansion.exact, "a relaxed expansion does not give the clauses' sets"
    sets = realisable_sets(domain, expansion.queries, max_states=max_sets, only_maximal=True)
    inc = expansion.collapse(sets.incidence)
    _, first = np.unique(np.packbits(inc, axis=1), axis=0, return_index=True)
    inc = inc[np.sort(first)]
    return inc[maximal_rows(inc)]
