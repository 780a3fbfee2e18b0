"""The sparse-product passes of the compiled junction tree, kept as a reference.

:class:`tessera.engine.junction.JunctionTree` runs its passes with broadcast additions and
axis sums over each clique's table. This module builds, from a compiled tree's public
structure, the 0/1 sparse matrices an earlier implementation multiplied by instead — clique
log-potentials = ``potential_map @ flat``, messages into the parents by one sparse product per
level, factor marginals = ``marginal_map @ exp(B − log Z)`` with a gathered Hugin downward pass
— and runs those passes. Tests compare the two; the benchmark
``bench/bench_junction_passes.py`` times them. Not used by the engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tessera.engine.junction import JunctionTree, batched_projection, c_order_strides

__all__ = ["SparseJunction", "SparseLevel", "sparse_junction"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


@dataclass(frozen=True, eq=False)
class SparseLevel:
    """The cliques of one depth L ≥ 1 and how they talk to their parents (depth L − 1).

    ``lo:hi`` is their block of the flat table vector, ``plo:phi`` their parents' block and
    ``mlo:mhi`` their messages' block of the flat message vector (one entry per separator
    value, child by child). ``run`` > 0: every separator value owns ``run`` contiguous entries
    (otherwise ``runs`` per separator value and ``run_starts``). ``up``: which message entry
    (local) each parent entry (local to the parent block) receives, a 0/1 sparse matrix.
    ``down_gather``: parent entries (local), child by child, reordered separator-major, grouped
    in runs of ``down_run`` (or ``down_runs`` with ``down_starts``).
    """

    lo: int
    hi: int
    plo: int
    phi: int
    mlo: int
    mhi: int
    run: int
    runs: IntArray
    run_starts: IntArray
    up: sp.csr_array  # (parent block, level messages): 1 where the entry receives the message
    down_gather: IntArray
    down_run: int
    down_runs: IntArray
    down_starts: IntArray


def _grouped_lse(x: FloatArray, run: int, starts: IntArray, runs: IntArray) -> FloatArray:
    """log Σ exp over consecutive groups of ``x``: of ``run`` entries each (run > 0), else
    starting at ``starts`` with lengths ``runs``. An all −∞ group gives −∞ (no NaN)."""
    if run == 1:
        return x.copy()
    if run == 2:
        return np.logaddexp(x[0::2], x[1::2])
    if run > 0:
        y = x.reshape(-1, run)
        m = y.max(axis=1)
        m[~np.isfinite(m)] = 0.0
        s = np.exp(y - m[:, None]).sum(axis=1)
    else:
        m = np.maximum.reduceat(x, starts)
        m[~np.isfinite(m)] = 0.0
        s = np.add.reduceat(np.exp(x - np.repeat(m, runs)), starts)
    with np.errstate(divide="ignore"):
        return np.log(s) + m



@dataclass(frozen=True, eq=False)
class SparseJunction:
    """A compiled tree's passes as sparse 0/1 products (module docstring): the same results
    as :meth:`JunctionTree.infer` up to float rounding, with index maps of one entry per
    entry of each factor's host clique and of each clique's parent."""

    tree: JunctionTree
    levels: tuple[SparseLevel, ...]
    #: (table entries, parameters), 0/1: clique log-potentials = this @ flat parameters
    potential_map: sp.csr_array
    #: its transpose: flat factor marginals = this @ flat clique probabilities
    marginal_map: sp.csr_array

    def _upward(self, b: FloatArray) -> FloatArray:
        msg = np.empty(self.tree.n_messages)
        for lv in reversed(self.levels):
            m = _grouped_lse(b[lv.lo: lv.hi], lv.run, lv.run_starts, lv.runs)
            msg[lv.mlo: lv.mhi] = m
            b[lv.plo: lv.phi] += lv.up @ m
        return msg

    def _downward(self, b: FloatArray, msg: FloatArray) -> None:
        for lv in self.levels:
            g = b[lv.plo: lv.phi][lv.down_gather]
            sep = _grouped_lse(g, lv.down_run, lv.down_starts, lv.down_runs)
            m = msg[lv.mlo: lv.mhi]
            with np.errstate(invalid="ignore"):
                delta = np.where(m == -np.inf, 0.0, sep - m)
            if lv.run > 0:
                b[lv.lo: lv.hi] += np.repeat(delta, lv.run)
            else:
                b[lv.lo: lv.hi] += np.repeat(delta, lv.runs)

    def log_partition(self, flat: FloatArray) -> float:
        """log Z = log Σ_x exp(Σ_s φ_s(x_s)) of flat log-potentials."""
        b = np.asarray(self.potential_map @ flat, dtype=np.float64)
        self._upward(b)
        return float(b[0]) + self.tree.log_free

    def infer(self, flat: FloatArray) -> tuple[float, FloatArray]:
        """(log Z, flat marginals) of flat log-potentials, as :meth:`JunctionTree.infer`
        (log Z = −∞ gives (−∞, NaN marginals) rather than an error)."""
        b = np.asarray(self.potential_map @ flat, dtype=np.float64)
        msg = self._upward(b)
        log_z = float(b[0])
        self._downward(b, msg)
        b -= log_z
        p = np.exp(b, out=b)
        return log_z + self.tree.log_free, np.asarray(self.marginal_map @ p, dtype=np.float64)


def sparse_junction(tree: JunctionTree) -> SparseJunction:
    """The sparse maps of ``tree``'s flat layout: each factor hosted by the smallest clique
    holding its scope (the virtual root for an empty scope), each clique's separator its
    leading variables shared with its parent."""
    sizes_t, cliques, cparent = tree.sizes, tree.cliques, tree.clique_parent
    coff = list(tree.clique_offsets)
    csizes = [coff[k + 1] - coff[k] for k in range(len(cliques))]
    shape_of = [tuple(sizes_t[v] for v in c) for c in cliques]
    nsep = [len(set(c) & set(cliques[cparent[k]])) if k > 0 else 0
            for k, c in enumerate(cliques)]
    by_depth: list[list[int]] = [[0]]
    depth = [0] * len(cliques)
    for k in range(1, len(cliques)):
        depth[k] = depth[cparent[k]] + 1
        if len(by_depth) <= depth[k]:
            by_depth.append([])
        by_depth[depth[k]].append(k)
    cstrides = [c_order_strides(sh) for sh in shape_of]
    cpos = [{v: i for i, v in enumerate(c)} for c in cliques]
    levels: list[SparseLevel] = []
    mpos = 0
    for d in range(1, len(by_depth)):
        ks = by_depth[d]
        lo, hi = coff[ks[0]], coff[ks[-1] + 1]
        above = by_depth[d - 1]
        plo, phi = coff[above[0]], coff[above[-1] + 1]
        mlo = mpos
        n_sep, hosts, targets, picks = [], [], [], []
        for k in ks:
            p = cparent[k]
            sep = cliques[k][: nsep[k]]
            n_sep.append(math.prod(sizes_t[v] for v in sep))
            hosts.append(p)
            targets.append(mpos - mlo)
            picks.append([cpos[p][v] for v in sep])
            mpos += n_sep[-1]
        seg, entry, proj = batched_projection(hosts, picks, csizes, shape_of, cstrides)
        parent_entry = np.asarray([coff[p] - plo for p in hosts], dtype=np.intp)[seg] + entry
        sep_entry = np.asarray(targets, dtype=np.intp)[seg] + proj
        nsep_a = np.asarray(n_sep, dtype=np.intp)
        runs = np.repeat(np.asarray([csizes[k] for k in ks], dtype=np.intp) // nsep_a, nsep_a)
        druns = np.repeat(np.asarray([csizes[p] for p in hosts], dtype=np.intp) // nsep_a,
                          nsep_a)
        run = int(runs[0]) if runs.size and np.all(runs == runs[0]) else 0
        drun = int(druns[0]) if druns.size and np.all(druns == druns[0]) else 0
        levels.append(SparseLevel(
            lo=lo, hi=hi, plo=plo, phi=phi, mlo=mlo, mhi=mpos,
            run=run, runs=runs, run_starts=_starts(runs),
            up=_zero_one(parent_entry, sep_entry, (phi - plo, mpos - mlo)),
            down_gather=parent_entry[np.lexsort((proj, seg))], down_run=drun, down_runs=druns,
            down_starts=_starts(druns),
        ))
    fhosts = []
    for sc in tree.scopes:
        inside = [k for k, c in enumerate(cliques) if set(sc) <= set(c)]
        fhosts.append(min(inside, key=lambda k: (csizes[k], k)))
    fpicks = [[cpos[h][v] for v in sc] for h, sc in zip(fhosts, tree.scopes, strict=True)]
    seg, entry, proj = batched_projection(fhosts, fpicks, csizes, shape_of, cstrides)
    table_entry = np.asarray([coff[h] for h in fhosts], dtype=np.intp)[seg] + entry
    param_entry = np.asarray(tree.offsets[:-1], dtype=np.intp)[seg] + proj
    potential_map = _zero_one(table_entry, param_entry, (coff[-1], tree.offsets[-1]))
    return SparseJunction(tree=tree, levels=tuple(levels), potential_map=potential_map,
                          marginal_map=potential_map.T.tocsr())


def _zero_one(rows: IntArray, cols: IntArray, shape: tuple[int, int]) -> sp.csr_array:
    """The 0/1 matrix with ones at (rows[i], cols[i]) (pairs distinct), CSR."""
    return sp.csr_array((np.ones(rows.size), (rows, cols)), shape=shape)


def _starts(runs: IntArray) -> IntArray:
    return np.concatenate([[0], np.cumsum(runs)[:-1]]).astype(np.intp) if runs.size \
        else np.zeros(0, dtype=np.intp)


