r"""Heavy rows by batched local search: a heuristic for the weighted maximum overlap that only
**proposes** rows, never bounds (docs/theory.md §3.11, §10.4).

Problem: rows x with a large load ℓ_y(x) = Σ_{q∈I(x)} y_q (y ≥ 0, predicate queries). Every row
found is genuine and its load is evaluated exactly, so ℓ_y(x) is a **lower** bound on
L(y) = max_x ℓ_y(x); no result of this module may calibrate noise — a certificate needs the
exact or upper-bounding solvers of :func:`~tessera.overlap.solve.max_overlap`. What it is for:
the cutting-plane allocation (:mod:`tessera.calibration.allocation`) needs *some* row with
ℓ_v(x) > 1 to cut off its master's point v, and any such row is a valid cut; only when none is
found must the exact solver be asked (to certify, or for the cut the heuristic missed).

Structure (value classes, docs/theory.md §2): q(x) = ∏_a [x_a ∈ φ_{q,a}] depends on x_a only
through the value class (atom) of x_a, so a row is one atom per constrained attribute. With
M_a[c, q] = [atom c of a ⊆ φ_{q,a}] (1 when q does not constrain a) and the miss count
m_q(x) = Σ_a (1 − M_a[x_a, q]), q ∈ I(x) iff m_q(x) = 0, and for attribute a the load of every
choice of its atom with the rest of x fixed is

    ℓ_y(x with x_a = c) = Σ_q y_q [m_q(x) − (1 − M_a[x_a, q]) = 0] · M_a[c, q],

one matrix product for a whole batch of K rows: (K × t) · (t × atoms_a). Coordinate ascent
re-picks each attribute's best atom until no row improves (a local maximum: no single attribute
change raises the load); an iterated local search perturbs the best rows found (random atoms
on a few attributes) and climbs again. Batches start from rows the caller supplies (e.g. the
cuts of earlier rounds: the weights move a little between rounds, so yesterday's heavy rows
are the best starts), inside the heaviest queries, and at random atoms (a seeded generator:
search randomness, not privacy randomness).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.schema.domain import Domain
from tessera.workload.query import Query
from tessera.workload.value_classes import workload_value_classes

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: Rows climbed at once (the batch of every matrix product).
BATCH = 64
#: Sweeps over the attributes before an ascent stops even if a row still improves.
MAX_SWEEPS = 30
#: Rows per matrix product in :meth:`RowSearch.ascend` (bounds its rows × t float arrays).
CHUNK = 256
#: Largest membership table (atoms × queries, summed over attributes) built; beyond it
#: :meth:`RowSearch.of` returns None and the caller separates with the exact solver only.
MAX_CELLS = 20_000_000


@dataclass(frozen=True, eq=False)
class HeavyRows:
    """Rows found (atom indices ``atoms``, one column per constrained attribute), their loads
    (exact for the weights searched) and their sets I(x) as a (rows × t) mask, heaviest first,
    distinct sets only."""

    atoms: IntArray
    loads: FloatArray
    sets: BoolArray


@dataclass(frozen=True, eq=False)
class RowSearch:
    """The local search of one workload (module docs), built once and reused for any weights.

    ``member[j]``: (atoms of attribute j) × t, True where the atom lies in the query's
    predicate or the query does not constrain the attribute; ``positions[j]`` the attribute's
    index in the domain; ``representative[j]`` a code of each atom; ``class_of[j]`` maps codes
    to atoms (for rows given as codes, e.g. an exact solver's witness)."""

    n_queries: int
    n_attributes: int
    positions: tuple[int, ...]
    member: tuple[BoolArray, ...]
    member_f: tuple[FloatArray, ...]
    representative: tuple[IntArray, ...]
    starts: tuple[IntArray, ...]
    class_of_segment: tuple[IntArray, ...]

    @staticmethod
    def of(domain: Domain, queries: Sequence[Query]) -> RowSearch | None:
        """The search for ``queries`` (predicate conjunctions) over ``domain``, or None when
        its tables would exceed :data:`MAX_CELLS`."""
        t = len(queries)
        member, member_f, reps, positions, starts, segs = [], [], [], [], [], []
        attributes = workload_value_classes(domain, queries)
        if sum(ca.classes.n_classes for ca in attributes) * t > MAX_CELLS:
            return None
        for ca in attributes:
            vc = ca.classes
            full = np.ones((vc.n_classes, t), dtype=bool)
            full[:, ca.queries] = vc.membership
            member.append(full)
            member_f.append(full.astype(np.float64))
            reps.append(np.asarray(vc.representative, dtype=np.int64))
            positions.append(ca.position)
            starts.append(np.asarray(vc.starts, dtype=np.int64))
            segs.append(np.asarray(vc.class_of_segment, dtype=np.int64))
        return RowSearch(t, len(domain), tuple(positions), tuple(member), tuple(member_f),
                         tuple(reps), tuple(starts), tuple(segs))

    @property
    def n_constrained(self) -> int:
        return len(self.member)

    def _miss(self, x: IntArray) -> npt.NDArray[np.int16]:
        miss = np.zeros((x.shape[0], self.n_queries), dtype=np.int16)
        for j, mb in enumerate(self.member):
            miss += ~mb[x[:, j]]
        return miss

    def sets(self, x: IntArray) -> BoolArray:
        """I(x) of each row (rows × t): exact evaluation through the value classes."""
        return self._miss(x) == 0

    def loads(self, x: IntArray, y: npt.ArrayLike) -> FloatArray:
        """ℓ_y(x) = Σ_{q∈I(x)} y_q of each row (exact sets; float sums)."""
        return np.asarray(self.sets(x) @ np.asarray(y, dtype=np.float64))

    def atoms_of_codes(self, codes: npt.ArrayLike) -> IntArray:
        """Rows given as domain codes (rows × attributes) as atom indices."""
        c = np.atleast_2d(np.asarray(codes, dtype=np.int64))
        out = np.empty((c.shape[0], self.n_constrained), dtype=np.int64)
        for j, pos in enumerate(self.positions):
            seg = np.searchsorted(self.starts[j], c[:, pos], side="right") - 1
            out[:, j] = self.class_of_segment[j][seg]
        return out

    def row_meeting(self, queries: Sequence[int]) -> IntArray | None:
        """A row (atom indices) in every query of ``queries`` — e.g. an exact solver's witness
        set, to start the next searches from its neighbourhood — or None if they share none."""
        idx = np.asarray(list(queries), dtype=np.int64)
        x = np.empty(self.n_constrained, dtype=np.int64)
        for j, mb in enumerate(self.member):
            ok = np.flatnonzero(np.all(mb[:, idx], axis=1))
            if ok.size == 0:
                return None
            x[j] = ok[0]
        return x

    def codes(self, x: IntArray) -> IntArray:
        """Rows as domain codes (an atom's representative; 0 on unconstrained attributes)."""
        out = np.zeros((x.shape[0], self.n_attributes), dtype=np.int64)
        for j, pos in enumerate(self.positions):
            out[:, pos] = self.representative[j][x[:, j]]
        return out

    def ascend(self, x: IntArray, y: FloatArray) -> tuple[IntArray, FloatArray]:
        """Coordinate ascent of every row of ``x`` (rows × constrained attributes) at weights
        ``y``: each attribute in turn takes the atom of largest load given the others, until no
        row changes (or :data:`MAX_SWEEPS`). Returns the local maxima and their loads."""
        if x.shape[0] > CHUNK:
            parts = [self.ascend(x[i : i + CHUNK], y) for i in range(0, x.shape[0], CHUNK)]
            return (np.concatenate([p[0] for p in parts]),
                    np.concatenate([p[1] for p in parts]))
        x = np.array(x, dtype=np.int64, copy=True)
        k = x.shape[0]
        rows = np.arange(k)
        miss = self._miss(x)
        for _ in range(MAX_SWEEPS):
            changed = False
            for j, (mb, mf) in enumerate(zip(self.member, self.member_f, strict=True)):
                off = ~mb[x[:, j]]
                ok = (miss - off) == 0  # q holds on every other attribute
                scores = (ok * y) @ mf.T  # (k, atoms_j): load with x_j = c
                best = np.argmax(scores, axis=1)
                cur = scores[rows, x[:, j]]
                top = scores[rows, best]
                up = top > cur + 1e-12 * np.maximum(np.abs(cur), 1.0)
                if np.any(up):
                    changed = True
                    r = rows[up]
                    x[r, j] = best[r]
                    miss[r] = miss[r] - off[r] + ~mb[x[r, j]]
            if not changed:
                break
        return x, np.asarray((miss == 0) @ y)

    def search(
        self,
        y: npt.ArrayLike,
        starts: IntArray | None = None,
        *,
        n_random: int = BATCH,
        n_inside: int | None = None,
        generations: int = 2,
        seed: int = 0,
    ) -> HeavyRows:
        """Heavy rows at weights ``y``: coordinate ascent from ``starts`` (rows of atom
        indices), from inside the ``n_inside`` heaviest queries (default ``n_random // 2``; a
        random atom of each predicate) and from ``n_random`` random rows, then ``generations``
        rounds of perturbing the best rows on 1–3 attributes and climbing again. Distinct sets,
        heaviest first; the loads are lower bounds on L(y), never upper bounds."""
        yv = np.asarray(y, dtype=np.float64)
        m = self.n_constrained
        if m == 0:
            x0 = np.zeros((1, 0), dtype=np.int64)
            return HeavyRows(x0, self.loads(x0, yv), self.sets(x0))
        rng = np.random.default_rng(seed)  # search heuristic only: not privacy randomness
        sizes = np.array([mb.shape[0] for mb in self.member])
        batch = [] if starts is None or len(starts) == 0 else [np.asarray(starts, np.int64)]
        n_in = max(1, n_random // 2) if n_inside is None else max(1, n_inside)
        heavy = np.argsort(-yv, kind="stable")[:n_in]
        inside = np.empty((heavy.size, m), dtype=np.int64)
        for j, mb in enumerate(self.member):  # some atom inside each heavy query's predicate
            cols = mb[:, heavy].T  # (heavy, atoms_j)
            pick = rng.random(cols.shape) * cols
            inside[:, j] = np.argmax(pick, axis=1)
        batch.append(inside)
        batch.append((rng.random((n_random, m)) * sizes).astype(np.int64))
        x, loads = self.ascend(np.concatenate(batch), yv)
        for _ in range(generations):
            order = np.argsort(-loads, kind="stable")[:BATCH]
            base = x[order]
            mut = base.copy()
            for r in range(mut.shape[0]):
                cols = rng.choice(m, size=min(m, int(rng.integers(1, 4))), replace=False)
                mut[r, cols] = (rng.random(cols.size) * sizes[cols]).astype(np.int64)
            xm, lm = self.ascend(mut, yv)
            x, loads = np.concatenate([x, xm]), np.concatenate([loads, lm])
        order = np.argsort(-loads, kind="stable")
        x, loads = x[order], loads[order]
        sets = self.sets(x)
        _, first = np.unique(np.packbits(sets, axis=1), axis=0, return_index=True)
        keep = np.sort(first)
        return HeavyRows(x[keep], loads[keep], sets[keep])
