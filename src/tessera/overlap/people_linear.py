"""What one person moves aggregate statements that count people (docs/theory.md §3.14,
"Aggregates counting people").

With ``count="people"`` a linear query q (a statement's group, with its WHERE) answers
f_q(D) = Σ_persons t_q(R_p): t_q(R) = 0 when none of the person's kept rows R lies in q, else
1 for a count and clamp(T_q(R), lo, hi) for a sum, T_q(R) the sum of the values of R's rows in
q (a person's total in the group). So |t_q(R)| ≤ D_q (:meth:`~tessera.workload.aggregates.
LinearQuery.person_bound`) and, between two persons R, R', |t_q(R') − t_q(R)| ≤ D_q^sub, nonzero
only for queries covered by R ∪ R'. A person's cost Σ_q c_q |Δ_q|^p is therefore at most the
maximum weighted coverage of K records (2K under substitution) with the scores c_q·D_q^p
(:mod:`.coverage`); this module evaluates the *true* change of given records
(:func:`person_change`) and looks for values of a witness's records that attain the scores
(:func:`best_person_change`, a search over a few values per record, not a proof of the
maximum), so that a bound is labelled exact only when a real person reaches it.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from tessera.overlap.linear import condition_atoms
from tessera.schema.domain import Domain
from tessera.schema.measures import numeric_value, value_code
from tessera.workload.aggregates import LinearQuery

#: At most this many combinations of a witness's records' values are evaluated.
MAX_COMBINATIONS = 4096

Record = tuple[int, ...]


def person_term(domain: Domain, lq: LinearQuery, rows: Sequence[Record]) -> int:
    """t_q(R): 0 when no row of ``rows`` lies in q; else 1 (a count) or clamp(Σ value, lo, hi)
    over the rows in q (a sum; the missing value adds 0)."""
    inside = [x for x in rows if lq.query(domain, tuple(int(c) for c in x))]
    if not inside:
        return 0
    if lq.role == "count":
        return 1
    assert lq.attribute is not None and lq.lo is not None and lq.hi is not None
    attr = domain[lq.attribute]
    i = domain.index(lq.attribute)
    total = sum(numeric_value(attr, int(x[i])) for x in inside if 0 <= x[i] < attr.n_values)
    return min(max(total, lq.lo), lq.hi)


def person_change(domain: Domain, linear: Sequence[LinearQuery], costs: Sequence[Fraction],
                  p: int, old: Sequence[Record], new: Sequence[Record] = ()) -> Fraction:
    """Σ_q c_q |t_q(new) − t_q(old)|^p in exact rationals: what replacing a person's rows
    ``old`` by ``new`` costs (``new`` empty: removing the person)."""
    total = Fraction(0)
    for c, lq in zip(costs, linear):
        if c == 0:
            continue
        d = person_term(domain, lq, new) - person_term(domain, lq, old)
        if d:
            total += c * abs(d) ** p
    return total


def regions(domain: Domain, linear: Sequence[LinearQuery]) -> dict[str, list[int]]:
    """For each summed attribute, the sorted codes where a *region* starts: maximal runs of
    codes on which every linear query's condition on it is constant (the ends of the
    conditions' intervals), so that a record moved within its region lies in the same
    queries."""
    out: dict[str, list[int]] = {}
    for a in {lq.attribute for lq in linear if lq.role == "sum"}:
        assert a is not None
        cuts = {0, domain[a].n_values}
        for lq in linear:
            for cov in condition_atoms(lq.query, a):
                for lo, hi in cov.spans:
                    cuts.update((lo, hi))
        out[a] = sorted(c for c in cuts if 0 <= c <= domain[a].n_values)
    return out


def candidate_codes(domain: Domain, linear: Sequence[LinearQuery], name: str, start: int,
                    stop: int) -> tuple[int, ...]:
    """The codes of region [start, stop) of ``name`` worth trying: its ends, and the codes of
    every clamp bound of a sum of ``name`` (and of 0) that lie inside it."""
    attr = domain[name]
    out = {start, stop - 1}
    for lq in linear:
        if lq.role == "sum" and lq.attribute == name:
            assert lq.lo is not None and lq.hi is not None
            for v in (lq.lo, lq.hi, 0):
                c = value_code(attr, v)
                if start <= c < stop:
                    out.add(c)
    return tuple(sorted(out))


def best_person_change(domain: Domain, linear: Sequence[LinearQuery],
                       costs: Sequence[Fraction], p: int, rows: Sequence[Record],
                       k: int | None = None, new: Sequence[Record] = ()
                       ) -> tuple[Fraction, tuple[Record, ...], tuple[Record, ...]]:
    """The largest :func:`person_change` found for replacing a person's records ``rows`` by
    ``new`` (none: removing the person), with records that lie in the same queries as these —
    each moved within its :func:`regions` on every summed attribute, to one of the
    :func:`candidate_codes` — and, with ``k``, ``rows`` also padded to ``k`` records by copies
    of theirs (a person's total in a group may need several rows to reach a clamp bound; copies
    cover nothing new). Returns (the change, exactly; the old records; the new ones). Every
    combination is tried when there are at most :data:`MAX_COMBINATIONS`; else the records'
    smallest, largest and largest-|value| codes, improved one choice at a time until no change
    helps. A search, not a proof: the value is a real person's, possibly below the maximum."""
    old = [tuple(int(c) for c in x) for x in rows]
    fresh = [tuple(int(c) for c in x) for x in new]
    if not old and not fresh:
        return Fraction(0), (), ()
    tries = [old]
    if k is not None and old and len(old) < k:
        tries.append(old + [old[j % len(old)] for j in range(k - len(old))])
    best: tuple[float, tuple[Record, ...], tuple[Record, ...]] | None = None
    for first in tries:
        found = _Search(domain, linear, costs, p, first, fresh).best()
        if best is None or found[0] > best[0]:
            best = found
    assert best is not None
    _, a, b = best
    hit = _hit(domain, linear, [*a, *b])  # (no other query moves)
    return person_change(domain, [linear[q] for q in hit], [costs[q] for q in hit], p, a,
                         b), a, b


def _hit(domain: Domain, linear: Sequence[LinearQuery], rows: Sequence[Record]) -> list[int]:
    """The linear queries some record of ``rows`` lies in."""
    if not rows:
        return []
    points = np.array(rows, dtype=np.int64)
    return [q for q, lq in enumerate(linear) if lq.query.evaluate(domain, points).any()]


class _Search:
    """The values of records whose queries are fixed, searched in floats (module docs): the
    queries some record lies in are found once; a choice of codes changes only the sums."""

    def __init__(self, domain: Domain, linear: Sequence[LinearQuery], costs: Sequence[Fraction],
                 p: int, old: list[Record], new: list[Record]) -> None:
        self.domain, self.old, self.new = domain, old, new
        self.rows = old + new
        points = np.array(self.rows, dtype=np.int64)
        member = np.array([lq.query.evaluate(domain, points) for lq in linear],
                          dtype=bool).T  # (records, queries)
        hit = np.flatnonzero(member.any(axis=0))
        c = np.array([float(costs[q]) for q in hit])
        n_old = len(old)
        counts = [j for j, q in enumerate(hit) if linear[q].role == "count"]
        sums = [j for j, q in enumerate(hit) if linear[q].role == "sum"]
        self.fixed = float(sum(c[j] * abs(float(member[n_old:, hit[j]].any())
                                          - float(member[:n_old, hit[j]].any())) ** p
                               for j in counts))
        self.member = member[:, hit[sums]]
        self.c, self.p = c[sums], p
        self.lo = np.array([linear[hit[j]].lo for j in sums], dtype=np.float64)
        self.hi = np.array([linear[hit[j]].hi for j in sums], dtype=np.float64)
        self.attr = [domain.index(str(linear[hit[j]].attribute)) for j in sums]
        self.n_old = n_old
        cuts = regions(domain, linear)
        self.choices: list[tuple[int, int, tuple[int, ...]]] = []  # (record, attribute, codes)
        for r, x in enumerate(self.rows):
            for name, bounds in cuts.items():
                i = domain.index(name)
                if not 0 <= x[i] < domain[name].n_values:  # the missing value: nothing to move
                    continue
                j = bisect.bisect_right(bounds, x[i])
                codes = candidate_codes(domain, linear, name, bounds[j - 1], bounds[j])
                if len(codes) > 1:
                    self.choices.append((r, i, codes))

    def placed(self, pick: Sequence[int]) -> list[list[int]]:
        moved = [list(x) for x in self.rows]
        for (r, i, _), code in zip(self.choices, pick):
            moved[r][i] = code
        return moved

    def score(self, pick: Sequence[int]) -> float:
        """Σ_q c_q |t_q(new) − t_q(old)|^p, in floats (the search's guide only)."""
        if not len(self.c):
            return self.fixed
        moved = self.placed(pick)
        vals = np.array([[_value(self.domain, i, x[i]) for i in self.attr] for x in moved],
                        dtype=np.float64)  # (records, sums)
        part = self.member * vals
        inside_o = self.member[:self.n_old].any(axis=0)
        inside_n = self.member[self.n_old:].any(axis=0)
        t_o = np.where(inside_o, np.clip(part[:self.n_old].sum(axis=0), self.lo, self.hi), 0.0)
        t_n = np.where(inside_n, np.clip(part[self.n_old:].sum(axis=0), self.lo, self.hi), 0.0)
        return self.fixed + float(self.c @ np.abs(t_n - t_o) ** self.p)

    def best(self) -> tuple[float, tuple[Record, ...], tuple[Record, ...]]:
        def split(pick: Sequence[int]) -> tuple[float, tuple[Record, ...], tuple[Record, ...]]:
            moved = [tuple(x) for x in self.placed(pick)]
            return self.score(pick), tuple(moved[:self.n_old]), tuple(moved[self.n_old:])

        options = [codes for _, _, codes in self.choices]
        if math.prod(len(c) for c in options) <= MAX_COMBINATIONS:
            pick = max(itertools.product(*options), key=self.score)
            return split(pick)
        starts = [[c[0] for c in options], [c[-1] for c in options],
                  [max(c, key=lambda code, n=i: abs(_value(self.domain, n, code)))
                   for (_, i, _), c in zip(self.choices, options)]]
        pick = list(max(starts, key=self.score))
        value = self.score(pick)
        for _ in range(4):  # passes of one choice at a time
            improved = False
            for j, codes in enumerate(options):
                for code in codes:
                    if code == pick[j]:
                        continue
                    trial = [*pick[:j], code, *pick[j + 1:]]
                    v = self.score(trial)
                    if v > value:
                        value, pick, improved = v, trial, True
            if not improved:
                break
        return split(pick)


def _value(domain: Domain, i: int, code: int) -> int:
    """The value of attribute i's ``code`` in a total (the missing value adds 0)."""
    attr = domain.attributes[i]
    return numeric_value(attr, int(code)) if 0 <= code < attr.n_values else 0


__all__ = ["MAX_COMBINATIONS", "best_person_change", "candidate_codes", "person_change",
           "person_term", "regions"]
