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
import numpy.typing as npt

from tessera.overlap.linear import condition_atoms
from tessera.schema.domain import Domain
from tessera.schema.measures import MeasureGrid, numeric_value, value_code
from tessera.workload.aggregates import LinearQuery

#: At most this many combinations of a witness's records' values are evaluated.
MAX_COMBINATIONS = 4096
#: At most this many copies of a witness's records are added (towards K records).
MAX_PADDING = 16
#: The value search stops after this many element operations (records × sums per evaluation).
MAX_WORK = 20_000_000

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
    :func:`candidate_codes` — and, with ``k``, ``rows`` also padded towards ``k`` records by
    copies of theirs, at most :data:`MAX_PADDING` (a person's total in a group may need several
    rows to reach a clamp bound; copies cover nothing new). Returns (the change, exactly; the
    old records; the new ones). Every combination is tried when there are at most
    :data:`MAX_COMBINATIONS`; else the records' smallest, largest and largest-|value| codes,
    improved one choice at a time until no change helps or :data:`MAX_WORK` is spent. A search,
    not a proof: the value is a real person's, possibly below the maximum."""
    old = [tuple(int(c) for c in x) for x in rows]
    fresh = [tuple(int(c) for c in x) for x in new]
    if not old and not fresh:
        return Fraction(0), (), ()
    tries = [old]
    if k is not None and old and len(old) < k:
        extra = min(k - len(old), MAX_PADDING)
        tries.append(old + [old[j % len(old)] for j in range(extra)])
        pool = variants(domain, linear, old)
        if pool:
            tries.append(old + [pool[j % len(pool)] for j in range(extra)])
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


def variants(domain: Domain, linear: Sequence[LinearQuery], rows: Sequence[Record]
             ) -> list[Record]:
    """Records that cover nothing ``rows`` do not: each record moved, on one summed attribute,
    to another of its :func:`regions` (at the code of largest |value| there), kept when every
    query it lies in is one the rows cover — further rows of the same person that can bring a
    total to its clamp bound where copies cannot (a condition caps the copies' values)."""
    if not rows:
        return []
    points = np.array(rows, dtype=np.int64)
    covered = np.array([lq.query.evaluate(domain, points).any() for lq in linear], dtype=bool)
    out: list[Record] = []
    for name, bounds in regions(domain, linear).items():
        i = domain.index(name)
        for start, stop in zip(bounds, bounds[1:]):
            codes = candidate_codes(domain, linear, name, start, stop)
            best = max(codes, key=lambda c: abs(float(_values(domain, i, np.array([c]))[0])))
            for x in rows:
                if start <= x[i] < stop:
                    continue
                y = (*x[:i], best, *x[i + 1:])
                inside = np.array([lq.query(domain, y) for lq in linear], dtype=bool)
                if inside.any() and not np.any(inside & ~covered) and y not in out:
                    out.append(y)
    return out


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
        self.points = points
        self.inside_o = self.member[:n_old].any(axis=0)
        self.inside_n = self.member[n_old:].any(axis=0)
        self.work = 0
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

    def placed(self, pick: Sequence[int]) -> npt.NDArray[np.int64]:
        moved = self.points.copy()
        for (r, i, _), code in zip(self.choices, pick):
            moved[r, i] = code
        return moved

    def score(self, pick: Sequence[int]) -> float:
        """Σ_q c_q |t_q(new) − t_q(old)|^p, in floats (the search's guide only)."""
        self.work += self.member.size + 1
        if not len(self.c):
            return self.fixed
        moved = self.placed(pick)
        vals = np.column_stack([_values(self.domain, i, moved[:, i]) for i in self.attr])
        part = self.member * vals  # (records, sums)
        t_o = np.where(self.inside_o, np.clip(part[:self.n_old].sum(axis=0), self.lo, self.hi),
                       0.0)
        t_n = np.where(self.inside_n, np.clip(part[self.n_old:].sum(axis=0), self.lo, self.hi),
                       0.0)
        return self.fixed + float(self.c @ np.abs(t_n - t_o) ** self.p)

    def best(self) -> tuple[float, tuple[Record, ...], tuple[Record, ...]]:
        def split(pick: Sequence[int]) -> tuple[float, tuple[Record, ...], tuple[Record, ...]]:
            moved = [tuple(int(c) for c in x) for x in self.placed(pick)]
            return self.score(pick), tuple(moved[:self.n_old]), tuple(moved[self.n_old:])

        options = [codes for _, _, codes in self.choices]
        combos = math.prod(len(c) for c in options)
        if combos <= MAX_COMBINATIONS and combos * (self.member.size + 1) <= MAX_WORK:
            pick = max(itertools.product(*options), key=self.score)
            return split(pick)
        starts = [[c[0] for c in options], [c[-1] for c in options],
                  [max(c, key=lambda code, n=i: abs(int(_values(self.domain, n,
                                                                np.array([code]))[0])))
                   for (_, i, _), c in zip(self.choices, options)]]
        pick = list(max(starts, key=self.score))
        value = self.score(pick)
        for _ in range(4):  # passes of one choice at a time
            improved = False
            for j, codes in enumerate(options):
                for code in codes:
                    if code == pick[j] or self.work > MAX_WORK:
                        continue
                    trial = [*pick[:j], code, *pick[j + 1:]]
                    v = self.score(trial)
                    if v > value:
                        value, pick, improved = v, trial, True
            if not improved or self.work > MAX_WORK:
                break
        return split(pick)


def _values(domain: Domain, i: int, codes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    """The values of attribute i's ``codes`` in a total (the missing value adds 0)."""
    attr = domain.attributes[i]
    present = (codes >= 0) & (codes < attr.n_values)
    safe = np.where(present, codes, 0)
    if isinstance(attr, MeasureGrid):
        vals = np.asarray(attr.points, dtype=np.float64)[safe]
    else:
        vals = np.array([numeric_value(attr, 0)], dtype=np.float64) + safe
    return np.where(present, vals, 0.0)


__all__ = ["MAX_COMBINATIONS", "MAX_PADDING", "MAX_WORK", "best_person_change",
           "candidate_codes", "person_change", "person_term", "regions", "variants"]
