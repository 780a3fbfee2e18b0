"""The partition bound: maximum overlap of structured families without a t² graph
(docs/theory.md §3.8–3.9; the route is :func:`tessera.overlap.solve.max_overlap`'s).

A family P (:class:`~tessera.workload.families.Partition`: the cells of a marginal, one level of a
hierarchy) is a set of pairwise-disjoint queries, so a row x lies in at most one of its cells
c_P(x). With the per-query scores s = h(w) of the workload (predicate queries first, then every
family's cells row-major: the order of :meth:`~tessera.workload.workload.Workload.expanded`)

* **add/remove**: score(x) = Σ_{q∈I(x)} s_q + Σ_P s_P(c_P(x)) ≤ S_pred + Σ_P max_c s_c — the
  predicate part bounded by the ordinary solvers, each family by its heaviest (non-empty) cell;
* **substitution**: a row moving x → y changes, per family, only c_P(x) and c_P(y), so the
  family adds s(c_P(x)) + s(c_P(y)) when they differ and 0 otherwise: at most the sum of its two
  heaviest non-empty cells, its heaviest alone when it has one non-empty cell and a row can lie
  outside every cell, and 0 when its one cell is the whole domain (the total count never
  changes).

Both bounds are attained — hence exact — when one row (pair of rows) attains the predicate part
and the families' bounds together; :class:`FamilyTable` scores any point or pair directly from the
groups' code maps (:meth:`~tessera.workload.families.Partition.code_to_group`), never by
materialising cells, and :func:`ascend` searches for such a row by coordinate and cell moves. Always
attained for uniform per-family weights and families that cover their attributes (marginals, data
cubes, hierarchies) under add/remove: every row lies in exactly one cell of each.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from tessera.schema.domain import Domain
from tessera.workload.clause import atoms_of
from tessera.workload.families import Partition
from tessera.workload.query import Query

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: At most this many candidate codes per attribute in a coordinate move of :func:`ascend`
#: (larger attributes are tried at the boundaries of their groups and predicates).
MAX_CANDIDATE_CODES = 4096
#: Cell moves of :func:`ascend` try each family's this many heaviest cells.
CELL_MOVES = 2


@dataclass(frozen=True, eq=False)
class FamilyTable:
    """One family's cells as scores: ``offset`` is the index of its first cell among all the
    workload's queries (expanded order); the score of cell c is ``uniform`` for every cell or
    ``table[c]`` (flattened, row-major)."""

    partition: Partition
    offset: int
    attrs: tuple[int, ...]  # domain indices of the family's attributes
    maps: tuple[IntArray, ...]  # per attribute: code → group (−1: in no group)
    first: tuple[IntArray, ...]  # per attribute: group → its smallest code (−1: empty group)
    shape: tuple[int, ...]
    covers: bool
    uniform: float | None
    table: FloatArray | None

    @staticmethod
    def build(domain: Domain, partition: Partition, offset: int, scores: float | FloatArray,
              cache: dict[Any, tuple[IntArray, IntArray]] | None = None) -> FamilyTable:
        """``cache`` shares the code maps of one attribute's grouping between families (all
        the marginals on an attribute cut it the same way)."""
        shape = partition.shape_in(domain)
        maps, first = [], []
        for i, n in enumerate(shape):
            key = (partition.attributes[i], partition.groups[i])
            if cache is None or key not in cache:
                m = partition.code_to_group(domain, i)
                m.setflags(write=False)
                f = np.full(n, -1, dtype=np.int64)
                inside = np.flatnonzero(m >= 0)
                groups, at = np.unique(m[inside], return_index=True)
                f[groups] = inside[at]
                f.setflags(write=False)
                if cache is None:
                    maps.append(m)
                    first.append(f)
                    continue
                cache[key] = (m, f)
            m, f = cache[key]
            maps.append(m)
            first.append(f)
        uniform: float | None = None
        table: FloatArray | None = None
        if isinstance(scores, float | int):
            uniform = float(scores)
        else:
            table = np.asarray(scores, dtype=np.float64).reshape(-1)
            if table.shape != (math.prod(shape),):
                raise ValueError(f"{table.size} scores for {math.prod(shape)} cells")
        return FamilyTable(partition, offset, tuple(domain.index(a) for a in partition.attributes),
                           tuple(maps), tuple(first), shape, partition.covers(domain), uniform,
                           table)

    @property
    def n_cells(self) -> int:
        return math.prod(self.shape)

    @property
    def n_realisable(self) -> int:
        """Cells that hold some row: every group of the cell is non-empty."""
        return math.prod(int((f >= 0).sum()) for f in self.first)

    def realisable_mask(self) -> npt.NDArray[np.bool_]:
        mask = np.ones((), dtype=bool)
        for f in self.first:
            mask = np.multiply.outer(mask, f >= 0)
        return mask.reshape(-1)

    # -- scores of cells ------------------------------------------------------------------------
    def cells(self, points: npt.NDArray[np.integer]) -> IntArray:
        """The cell (flat index) of each row of ``points`` (codes, shape (k, d)); −1 for none."""
        pts = np.asarray(points)
        idx = np.zeros(pts.shape[0], dtype=np.int64)
        ok = np.ones(pts.shape[0], dtype=bool)
        for a, m, n in zip(self.attrs, self.maps, self.shape):
            gr = m[pts[:, a]]
            ok &= gr >= 0
            idx = idx * n + gr
        return np.where(ok, idx, -1)

    def scores_of(self, cells: IntArray) -> FloatArray:
        """s(c) per cell index (0 for −1: a row in no cell)."""
        if self.uniform is not None:
            return np.where(cells >= 0, self.uniform, 0.0)
        assert self.table is not None
        return np.where(cells >= 0, self.table[np.maximum(cells, 0)], 0.0)

    def ranked(self, k: int) -> tuple[IntArray, FloatArray]:
        """The (up to) k heaviest realisable cells and their scores, heaviest first."""
        if self.uniform is not None:
            nonempty = [np.flatnonzero(f >= 0).tolist() for f in self.first]
            c = np.array([np.ravel_multi_index(combo, self.shape) if self.shape else 0
                          for combo in itertools.islice(itertools.product(*nonempty), k)],
                         dtype=np.int64)
            return c, np.full(len(c), self.uniform)
        assert self.table is not None
        vals = np.where(self.realisable_mask(), self.table, -np.inf)
        k = min(k, len(vals))
        top = np.argpartition(-vals, k - 1)[:k] if 0 < k < len(vals) else np.arange(len(vals))
        top = top[np.argsort(-vals[top], kind="stable")]
        top = top[np.isfinite(vals[top])]
        return top.astype(np.int64), vals[top]

    def add_remove_bound(self) -> list[float]:
        """The family's share of the add/remove bound: [its heaviest non-empty cell] or []."""
        if self.uniform is not None:
            return [self.uniform] if self.n_realisable else []
        _, v = self.ranked(1)
        return [float(v[0])] if len(v) else []

    def substitution_bound(self) -> list[float]:
        """Its share of the substitution bound, as the scores to add (see the module docs)."""
        if self.uniform is not None:
            v = [self.uniform] * min(self.n_realisable, 2)
        else:
            v = self.ranked(2)[1].tolist()
        if len(v) >= 2:
            return [float(v[0]), float(v[1])]
        if len(v) == 1 and not self.covers:
            return [float(v[0])]
        return []  # no non-empty cell, or one cell holding every row: never changes

    def total(self, substitution: bool) -> Fraction:
        """Σ s over the cells (exact for uniform scores, else correctly rounded); under
        substitution cells that never change (empty ones, and a lone cell holding every row)
        weigh nothing, as constant queries do."""
        if substitution:
            if self.covers and self.n_realisable == 1:
                return Fraction(0)
            if self.uniform is not None:
                return Fraction(self.uniform) * self.n_realisable
            assert self.table is not None
            return _exact_sum(self.table[self.realisable_mask()])
        if self.uniform is not None:
            return Fraction(self.uniform) * self.n_cells
        assert self.table is not None
        return _exact_sum(self.table)

    def representative(self, cell: int) -> list[tuple[int, int]]:
        """(attribute index, code) setting a row into ``cell`` (each group's smallest code)."""
        index = np.unravel_index(int(cell), self.shape) if self.shape else ()
        return [(a, int(f[j])) for a, f, j in zip(self.attrs, self.first, index)]

    def check_cell(self, cell: int, x: Sequence[int]) -> bool:
        """Whether x lies in ``cell``, from the family's groups themselves (the cell query's
        predicates: x_a = code on a marginal axis, x_a ∈ group otherwise), not its code maps."""
        index = np.unravel_index(int(cell), self.shape) if self.shape else ()
        return all(x[a] == j if g is None else x[a] in g[j]
                   for a, g, j in zip(self.attrs, self.partition.groups, map(int, index)))


@dataclass(frozen=True, eq=False)
class CellIndex:
    """Every family's cell for many points at once: families grouped by their number of
    attributes, code maps padded into one array per group (one gather per group instead of
    one small numpy call per family)."""

    tables: tuple[FamilyTable, ...]
    codes: IntArray  # every distinct code map, concatenated
    blocks: tuple[tuple[IntArray, IntArray, IntArray, IntArray], ...]  # cols, attrs, start, mult
    uniform: FloatArray  # per table: its uniform score (0 for per-cell tables, done apart)
    per_cell: tuple[int, ...]  # tables with per-cell scores

    @staticmethod
    def build(tables: Sequence[FamilyTable]) -> CellIndex:
        by_arity: dict[int, list[int]] = {}
        for j, t in enumerate(tables):
            by_arity.setdefault(len(t.attrs), []).append(j)
        starts: dict[int, int] = {}  # id of a code map → its start in ``codes``
        pieces: list[IntArray] = []
        size = 0
        blocks = []
        for k, cols in sorted(by_arity.items()):
            attrs = np.zeros((len(cols), k), dtype=np.int64)
            start = np.zeros((len(cols), k), dtype=np.int64)
            mult = np.zeros((len(cols), k), dtype=np.int64)
            for r, j in enumerate(cols):
                t = tables[j]
                strides = np.cumprod((t.shape[1:] + (1,))[::-1])[::-1]
                for i in range(k):
                    m = t.maps[i]
                    if id(m) not in starts:
                        starts[id(m)], size = size, size + len(m)
                        pieces.append(m)
                    attrs[r, i], start[r, i], mult[r, i] = t.attrs[i], starts[id(m)], strides[i]
            blocks.append((np.asarray(cols, dtype=np.int64), attrs, start, mult))
        codes = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
        uniform = np.array([t.uniform if t.uniform is not None else 0.0 for t in tables])
        per_cell = tuple(j for j, t in enumerate(tables) if t.uniform is None)
        return CellIndex(tuple(tables), codes, tuple(blocks), uniform, per_cell)

    def cells(self, points: npt.NDArray[np.integer]) -> IntArray:
        """(n, number of tables): the flat cell of each point in each family, −1 for none."""
        pts = np.asarray(points, dtype=np.int64)
        if pts.ndim == 1:
            pts = pts[None]
        out = np.empty((len(pts), len(self.tables)), dtype=np.int64)
        for cols, attrs, start, mult in self.blocks:
            f, k = attrs.shape
            if k == 0:  # no attribute: every row is in the family's one cell
                out[:, cols] = 0
                continue
            chunk = max(1, (1 << 22) // (f * k))
            flat_attrs = attrs.ravel()
            for lo in range(0, len(pts), chunk):
                part = pts[lo : lo + chunk]
                gr = self.codes[start + part[:, flat_attrs].reshape(len(part), f, k)]  # (n, f, k)
                flat = (gr * mult).sum(axis=2)
                out[lo : lo + chunk, cols] = np.where((gr >= 0).all(axis=2), flat, -1)
        return out

    def scores(self, cells: IntArray) -> FloatArray:
        """The score of every (point, family) cell; 0 where the point is in no cell."""
        out = np.where(cells >= 0, self.uniform[None, :], 0.0)
        for j in self.per_cell:
            out[:, j] = self.tables[j].scores_of(cells[:, j])
        return out


def _exact_sum(values: npt.ArrayLike) -> Fraction:
    """Σ values, correctly rounded (math.fsum) and returned as a rational for further sums."""
    return Fraction(math.fsum(np.asarray(values, dtype=np.float64).tolist()))


def upper_sum(values: Sequence[float]) -> float:
    """The smallest float ≥ the exact (rational) sum of ``values``."""
    exact = sum((Fraction(v) for v in values), Fraction(0))
    f = float(exact)
    return f if Fraction(f) >= exact else math.nextafter(f, math.inf)


# -- the objective at points and pairs --------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Objective:
    """score(x) (add/remove) or score(x, y) (substitution) over predicate queries and families."""

    domain: Domain
    queries: tuple[Query, ...]
    scores: FloatArray
    tables: tuple[FamilyTable, ...]

    def _pred(self, points: npt.NDArray[np.int64], which: Sequence[int]) -> npt.NDArray[np.bool_]:
        out = np.zeros((len(points), len(which)), dtype=bool)
        for k, j in enumerate(which):
            out[:, k] = self.queries[j].evaluate(self.domain, points)
        return out

    @cached_property
    def _queries_on(self) -> dict[int | None, list[int]]:
        """Per attribute (None: all): the weighted predicate queries on it."""
        weighted = [j for j in range(len(self.queries)) if self.scores[j] != 0]
        out: dict[int | None, list[int]] = {a: [] for a in range(len(self.domain))}
        out[None] = weighted
        for j in weighted:
            for name in self.queries[j].scope:
                out[self.domain.index(name)].append(j)
        return out

    @cached_property
    def _indices(self) -> dict[int | None, CellIndex]:
        return {}

    def _index(self, attribute: int | None) -> CellIndex:
        """The families on ``attribute`` (None: all), indexed on first use."""
        if attribute not in self._indices:
            self._indices[attribute] = CellIndex.build(
                self.tables if attribute is None else
                [t for t in self.tables if attribute in t.attrs])
        return self._indices[attribute]

    def cells(self, points: npt.NDArray[np.integer]) -> IntArray:
        """(n, families): every family's cell of every point (−1: none)."""
        return self._index(None).cells(points)

    def values(self, xs: npt.NDArray[np.int64], ys: npt.NDArray[np.int64] | None = None,
               attribute: int | None = None) -> FloatArray:
        """Score of each row of ``xs`` (of each pair (xs[i], ys[i]) under substitution). With
        ``attribute``, only the queries and families on it are counted: the rest is constant
        across rows that differ only there."""
        qs, index = self._queries_on[attribute], self._index(attribute)
        total = np.zeros(len(xs))
        if qs:
            ix = self._pred(xs, qs)
            if ys is not None:
                ix = ix ^ self._pred(ys, qs)
            total += ix.astype(np.float64) @ self.scores[qs]
        if index.tables:
            cx = index.cells(xs)
            if ys is None:
                total += index.scores(cx).sum(axis=1)
            else:
                cy = index.cells(ys)
                both = index.scores(cx) + index.scores(cy)
                total += np.where(cx != cy, both, 0.0).sum(axis=1)
        return total

    def candidate_codes(self, a: int, current: int) -> IntArray:
        size = self.domain.sizes[a]
        if size <= MAX_CANDIDATE_CODES:
            return np.arange(size, dtype=np.int64)
        name = self.domain.names[a]
        codes = {current, 0, size - 1}
        for q in self.queries:
            for p in atoms_of(q):
                if p.attribute == name:
                    for lo, hi in p.coverage.spans:
                        codes.update((lo, hi - 1, min(hi, size - 1)))
        for t in self.tables:
            if a in t.attrs:
                m = t.maps[t.attrs.index(a)]
                codes.update(np.flatnonzero(np.diff(m) != 0).tolist())
                codes.update((np.flatnonzero(np.diff(m) != 0) + 1).tolist())
        arr = np.array(sorted(codes), dtype=np.int64)
        return arr[:MAX_CANDIDATE_CODES]


def ascend(objective: Objective, x: Sequence[int], y: Sequence[int] | None = None, *,
           target: float = math.inf, deadline: float | None = None,
           max_rounds: int = 20) -> tuple[tuple[int, ...], tuple[int, ...] | None, float]:
    """Local search from x (or the pair (x, y)): coordinate moves (one attribute of x or of y to
    its best code) and cell moves (a row into one of a family's heaviest cells), while the score
    improves, until ``target`` is reached, ``max_rounds`` pass or ``deadline`` (monotonic
    seconds). Returns the best point (pair) and its score; a lower bound, never a bound."""
    d = len(objective.domain)
    rows = [np.array(x, dtype=np.int64)] + ([np.array(y, dtype=np.int64)] if y is not None else [])

    def full(rs: list[npt.NDArray[np.int64]]) -> float:
        pair = rs[1][None] if len(rs) > 1 else None
        return float(objective.values(rs[0][None], pair)[0])

    best = full(rows)

    def out_of_time() -> bool:
        if best >= target - 1e-9 * abs(target):
            return True
        return deadline is not None and time.monotonic() > deadline

    ranked = [(t, t.ranked(CELL_MOVES)[0].tolist()) for t in objective.tables]
    attrs = sorted({a for t in objective.tables for a in t.attrs}
                   | {objective.domain.index(n) for q in objective.queries for n in q.scope})
    for _ in range(max_rounds):
        improved = False
        for r in range(len(rows)):
            for a in attrs:
                if out_of_time():
                    return _packed(rows, full(rows))
                codes = objective.candidate_codes(a, int(rows[r][a]))
                if len(codes) <= 1:
                    continue
                cand = np.repeat(rows[r][None], len(codes), axis=0)
                cand[:, a] = codes
                other = None if len(rows) == 1 else np.repeat(rows[1 - r][None], len(codes), 0)
                xs, ys = (cand, other) if r == 0 else (other, cand)
                vals = objective.values(xs, ys, attribute=a)
                here = int(np.flatnonzero(codes == rows[r][a])[0]) if np.any(
                    codes == rows[r][a]) else None
                i = int(np.argmax(vals))
                base = vals[here] if here is not None else -math.inf
                if vals[i] > base:  # the rest of the score does not depend on attribute a
                    rows[r] = rows[r].copy()
                    rows[r][a] = codes[i]
                    best, improved = best + float(vals[i] - base), True
            # cell moves: put this row into one of a family's heaviest cells
            moves = []
            for t, cells in ranked:
                for c in cells:
                    trial = rows[r].copy()
                    for a, code in t.representative(c):
                        trial[a] = code
                    moves.append(trial)
            if moves and not out_of_time():
                cand = np.stack(moves)
                other = None if len(rows) == 1 else np.repeat(rows[1 - r][None], len(cand), 0)
                xs, ys = (cand, other) if r == 0 else (other, cand)
                vals = objective.values(xs, ys)
                i = int(np.argmax(vals))
                if vals[i] > best:
                    trial = [row.copy() for row in rows]
                    trial[r] = cand[i]
                    value = full(trial)
                    if value > best:
                        rows, best, improved = trial, value, True
        if not improved or d == 0:
            break
    return _packed(rows, full(rows))


def _packed(rows: list[npt.NDArray[np.int64]],
            best: float) -> tuple[tuple[int, ...], tuple[int, ...] | None, float]:
    x = tuple(int(c) for c in rows[0])
    y = tuple(int(c) for c in rows[1]) if len(rows) > 1 else None
    return x, y, best
