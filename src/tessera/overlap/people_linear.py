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
                       k: int | None = None) -> tuple[Fraction, tuple[Record, ...]]:
    """The largest :func:`person_change` found for removing a person whose records lie in the
    same queries as ``rows``, and those records: each record moved within its
    :func:`regions` on every summed attribute, to one of the :func:`candidate_codes`, and —
    with ``k`` — the rows padded to ``k`` records by copies of theirs (a person's total in a
    group may need several rows to reach a clamp bound; copies cover nothing new). Every
    combination is tried when there are at most :data:`MAX_COMBINATIONS`; else the records'
    smallest, largest and largest-|value| codes, improved one choice at a time until no change
    helps. A search, not a proof: the value is a real person's, possibly below the maximum."""
    rows = [tuple(int(c) for c in x) for x in rows]
    if not rows:
        return Fraction(0), ()
    best = _best_values(domain, linear, costs, p, rows)
    if k is not None and len(rows) < k:
        padded = rows + [rows[j % len(rows)] for j in range(k - len(rows))]
        more = _best_values(domain, linear, costs, p, padded)
        if more[0] > best[0]:
            best = more
    return best


def _best_values(domain: Domain, linear: Sequence[LinearQuery], costs: Sequence[Fraction],
                 p: int, rows: list[Record]) -> tuple[Fraction, tuple[Record, ...]]:
    cuts = regions(domain, linear)
    choices: list[tuple[int, int, tuple[int, ...]]] = []  # (row, attribute index, codes)
    for r, x in enumerate(rows):
        for name, bounds in cuts.items():
            i = domain.index(name)
            if not 0 <= x[i] < domain[name].n_values:  # the missing value: nothing to move
                continue
            j = bisect.bisect_right(bounds, x[i])
            codes = candidate_codes(domain, linear, name, bounds[j - 1], bounds[j])
            if len(codes) > 1:
                choices.append((r, i, codes))

    def placed(pick: Sequence[int]) -> tuple[Record, ...]:
        moved = [list(x) for x in rows]
        for (r, i, _), code in zip(choices, pick):
            moved[r][i] = code
        return tuple(tuple(x) for x in moved)

    def score(pick: Sequence[int]) -> Fraction:
        return person_change(domain, linear, costs, p, placed(pick))

    if math.prod(len(c) for _, _, c in choices) <= MAX_COMBINATIONS:
        picks = list(itertools.product(*(codes for _, _, codes in choices)))
        scored = [(score(pk), pk) for pk in picks]
        value, pick = max(scored, key=lambda s: s[0])
        return value, placed(pick)
    # a local search from the three plain starts
    starts = [[codes[0] for _, _, codes in choices], [codes[-1] for _, _, codes in choices],
              [max(codes, key=lambda c, n=i: abs(numeric_value(domain.attributes[n], c)))
               for _, i, codes in choices]]
    value, pick = max(((score(s), s) for s in starts), key=lambda s: s[0])
    for _ in range(4):  # passes
        improved = False
        for j, (_, _, codes) in enumerate(choices):
            for code in codes:
                if code == pick[j]:
                    continue
                trial = [*pick[:j], code, *pick[j + 1:]]
                v = score(trial)
                if v > value:
                    value, pick, improved = v, trial, True
        if not improved:
            break
    return value, placed(pick)


__all__ = ["MAX_COMBINATIONS", "best_person_change", "candidate_codes", "person_change",
           "person_term", "regions"]
