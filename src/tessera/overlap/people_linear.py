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

from tessera.overlap.linear import attaining, condition_atoms
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
                       costs: Sequence[Fraction], p: int, rows: Sequence[Record]
                       ) -> tuple[Fraction, tuple[Record, ...]]:
    """The largest :func:`person_change` of removing a person whose records lie in the same
    queries as ``rows`` (each record moved within its :func:`regions` on every summed
    attribute, to one of the :func:`candidate_codes`), and those records. Every combination is
    tried when there are at most :data:`MAX_COMBINATIONS`; else the ends of largest |value|,
    and the smallest and the largest codes."""
    rows = [tuple(int(c) for c in x) for x in rows]
    if not rows:
        return Fraction(0), ()
    cuts = regions(domain, linear)
    choices: list[tuple[int, int, tuple[int, ...]]] = []  # (row, attribute index, codes)
    for r, x in enumerate(rows):
        for name, bounds in cuts.items():
            i = domain.index(name)
            if not 0 <= x[i] < domain[name].n_values:  # the missing value: nothing to move
                continue
            k = bisect.bisect_right(bounds, x[i])
            codes = candidate_codes(domain, linear, name, bounds[k - 1], bounds[k])
            if len(codes) > 1:
                choices.append((r, i, codes))
    candidates: list[list[Record]] = []
    if math.prod(len(c) for _, _, c in choices) <= MAX_COMBINATIONS:
        for pick in itertools.product(*(codes for _, _, codes in choices)):
            moved = [list(x) for x in rows]
            for (r, i, _), code in zip(choices, pick):
                moved[r][i] = code
            candidates.append([tuple(x) for x in moved])
    else:
        candidates.append([attaining(domain, linear, x) for x in rows])
        for side in (0, -1):
            moved = [list(x) for x in rows]
            for r, i, codes in choices:
                moved[r][i] = codes[side]
            candidates.append([tuple(x) for x in moved])
    best = (Fraction(-1), tuple(rows))
    for cand in candidates:
        v = person_change(domain, linear, costs, p, cand)
        if v > best[0]:
            best = (v, tuple(cand))
    return best


__all__ = ["MAX_COMBINATIONS", "best_person_change", "candidate_codes", "person_change",
           "person_term", "regions"]
