"""A compiled junction tree for repeated sum-product over a fixed set of factor scopes
(docs/theory.md §4.7).

The customer is an iterative fit (maximum entropy, mirror descent: docs/theory.md §5) that asks
for the marginals of P(x) ∝ exp(Σ_s φ_s(x_s)) hundreds of times with new log-potential tables φ_s
on the **same** scopes. :func:`junction_tree` does everything that depends only on the scopes
once — elimination order, maximal cliques, a junction tree rooted at its centre, and every index
array of the message-passing schedule — and :class:`JunctionTree` then runs

* :meth:`~JunctionTree.log_partition`: log Z = log Σ_x exp(Σ_s φ_s(x_s)) (upward pass only),
* :meth:`~JunctionTree.marginals`: P(x_s) for every factor s (upward + downward pass),
* :meth:`~JunctionTree.infer`: both from one up-and-down pass,

with a few vectorised numpy operations per large clique and per factor, and per level for the
small cliques (no Python work per table entry, no index array as large as a large table).

Layout. All clique tables live in one flat float64 vector, cliques ordered by depth (a virtual
root of empty scope first; the roots of the components are its children), each clique's entries
in C order with its *separator* variables (those shared with its parent) leading. So the entries
with one separator value are contiguous, and the message to the parent

    m_c(x_S) = log Σ_{x_C∖S} exp B_c(x_C)

is a grouped log-sum-exp over contiguous runs (max-shift, exp, sum, log), which leaves
e_c = exp(B_c − max) and s_c = Σ_{x_C∖S} e_c behind. A clique's log-table B_c is the sum of its
*terms* — the factors it hosts (the smallest clique containing the scope) and its children's
messages — each broadcast over the clique's axes (:class:`Step`: terms are added into the
smallest prefix table that holds them, so a clique of n axes holding all pairs costs a few
passes over its table, not n(n − 1)/2). The downward pass needs no exp: a root's probabilities
are e/s, a child's P(x_C) = P(x_S) · e_c(x_C) / s_c(x_S), and P(x_S) like every factor's
marginal is the parent's probability table summed over the other axes (in reverse through the
same prefix tables).

Small cliques (at most :data:`SMALL_CLIQUE` entries) skip the steps, whose few numpy calls per
term would dominate a tiny table (a star of 400 cliques of 16 entries: 6× slower than the
sparse products). They share 0/1 maps instead (:class:`ZeroOne`: bincounts over index pairs
when small, sparse products when large): B = M φ for all their factors at once
(:attr:`JunctionTree.factor_links`), per level the messages added into small parents and,
downward, a small parent's P summed into its children's P(x_S) (:attr:`Level.links`), and
μ = Mᵀ P for their factors' marginals — a few numpy calls per level, not per clique.
:mod:`tessera.engine.junction_sparse` runs every clique that way (the earlier passes, in log
space with a Hugin downward pass), as a reference for the tests and the benchmark.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from tessera.engine.decomposition import (
    DEFAULT_MEMORY_LIMIT,
    REFUSE_MARGIN_BITS,
    Aborted,
    best_elimination_order,
    check_memory,
    eliminate,
    format_bytes,
    memory_plan,
    refuse_bag,
    summarize,
)
from tessera.errors import QueryError, ResourceError

__all__ = ["COMPILE_BYTES_PER_ENTRY", "SMALL_CLIQUE", "SPARSE_BYTES_PER_ENTRY", "JunctionTree",
           "ZeroOne", "batched_projection", "check_compile", "check_junction", "compile_bytes",
           "junction_bags", "junction_compile_bytes", "junction_compile_entries",
           "c_order_strides", "junction_tree", "zero_one"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

#: Peak bytes of a compilation per index entry (:attr:`_Skeleton.compile_entries`): the
#: elimination, the skeleton and the schedule's small Python objects (a few byte strides per
#: term and clique; no array grows with a table). Measured with tracemalloc at 97–544 B (66 to
#: 900 pair scopes in one clique, a chain of 38 triples, stars of 300 and 2,000 pairs, 500
#: and 3,000 singletons, one 20-variable scope): 768 with margin.
COMPILE_BYTES_PER_ENTRY = 768

#: Peak bytes of a compilation per entry of a small clique's 0/1 maps
#: (:attr:`_Skeleton.sparse_entries`), beside :data:`COMPILE_BYTES_PER_ENTRY` per index
#: entry: the projections' int64 arrays and their temporaries, the sorted index pairs and,
#: for a large map, its CSR matrix and transpose. Measured with tracemalloc at 58–83 B per map
#: entry where the maps dominate (stars of 400 cliques of 256 entries and of 200 of 512 with
#: two factors each, a chain of 500 cliques of 256 entries, one 512-entry clique hosting all
#: pairs or all triples of its 9 variables): 112 with margin.
SPARSE_BYTES_PER_ENTRY = 112

#: A clique of at most this many entries is *small*: its table is gathered from its factors
#: and its children's messages, and marginalised back into them, by 0/1 maps shared by all
#: small cliques (one for all factors, one per level for the messages, each way),
#: not by the broadcast steps of its :class:`CliquePlan`. A plan costs a few numpy calls (≈ 1–3
#: µs each) per step and per term whatever the table's size, a map a few ns per entry and
#: term: calibrated by bench/bench_junction_passes.py on stars of 400 cliques (one factor
#: each) of 256 entries (maps 1.3 ms, steps 3.0) and of 1,024 (maps 6.6, steps 6.1).
SMALL_CLIQUE = 512

#: the most negative float64: the max-shift of an all −∞ run (−∞ − LOWEST = −∞, so e = 0 and
#: s = 0 there, m = log 0 + LOWEST = −∞; a finite max is never below it, so one maximum call
#: replaces a test and a masked write)
LOWEST = float(np.finfo(np.float64).min)

#: a small cliques' 0/1 map of more pairs runs as sparse products, a smaller one as bincounts
#: (:class:`ZeroOne`; measured: a product's dispatch ≈ 2–3 µs, a bincount's ≈ 0.8 µs, per
#: pair ≈ 2 ns and ≈ 5 ns)
PRODUCT_ENTRIES = 1024

#: a run of at most this many entries takes its max and sum column by column (a reduction
#: along a short last axis costs several µs of numpy overhead, an elementwise call a fraction)
SHORT_RUN = 4

#: a level of more segments (runs of one length) takes its log-sum-exp by one reduceat: a few
#: numpy calls per segment cost more than the reduceat's index work on small tables
MANY_SEGMENTS = 4

#: where a term's table lives: the flat parameters (marginals), or the flat messages
#: (separator marginals)
FACTOR, SEPARATOR = 0, 1


@dataclass(frozen=True, eq=False)
class Term:
    """A small table over some of a clique's variables that the clique's table receives
    (upward: a factor's log-potentials, a child's message) and that is read back from the
    clique's probabilities (downward: the factor's marginal, the child's separator marginal).

    Its entries sit in C order over its own variables at byte ``offset`` of the flat vector
    named by ``source`` (:data:`FACTOR` or :data:`SEPARATOR`). In the clique's prefix table of
    its :class:`Step` (axes in the clique's processing order), ``read_strides`` reads it
    broadcast (byte strides, 0 on the axes it lacks); its marginal is that table summed over
    ``reduce_axes`` and written through ``write_shape``/``write_strides`` (its own strides,
    in prefix-axis order). When its step sums its terms over their union first
    (:attr:`Step.union`), the same hold with the union's axes in place of the prefix's."""

    source: int
    offset: int
    read_strides: tuple[int, ...]
    reduce_axes: tuple[int, ...]
    write_shape: tuple[int, ...]
    write_strides: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Step:
    """The prefix table T_j of a clique: its table over the first j + 1 axes of the processing
    order (``shape``), and the terms whose last axis in that order is axis j.

    Upward, T_j(x_0…x_j) = T_i(x_0…x_i) + U_j(x_U) for the previous step i < j (broadcast),
    where U_j = Σ_{t at step j} t(x_t) over the union U of those terms' axes (``union``:
    prefix axes, increasing; ``union_shape``), so each term is added into a table no larger
    than it needs and T_j costs one pass; the last step is the clique's own table. Downward,
    in reverse, T_i = Σ_{x_{i+1}…x_j} T_j, U_j = T_j summed over the axes outside U, and
    each term's marginal is U_j summed over the axes it lacks. With one term, or U all of
    the prefix, U_j is T_j itself (``union`` empty)."""

    shape: tuple[int, ...]
    union: tuple[int, ...]
    union_shape: tuple[int, ...]
    terms: tuple[Term, ...]

@dataclass(frozen=True, eq=False)
class CliquePlan:
    """How clique ``clique`` (entries ``lo:hi`` of the flat tables, C order over ``shape``)
    gathers its terms and marginalises into them: its axes in processing order ``axes`` (a
    permutation of the clique's axes) and the :class:`Step` s in increasing length, the last
    being the whole clique (``axes`` long)."""

    clique: int
    lo: int
    hi: int
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    inverse: tuple[int, ...]  # argsort(axes): processing order back to the clique's order
    steps: tuple[Step, ...]
    #: (source, entry offset) when the clique's table is one term's, in the same order: the
    #: passes copy it (a slice) instead of walking the steps
    copy: tuple[int, int] | None = None


@dataclass(frozen=True, eq=False)
class ZeroOne:
    """A 0/1 matrix M of ``shape`` with ones at (``rows[i]``, ``cols[i]``) (pairs distinct,
    sorted by row), applied as M x and Mᵀ y. Small maps run as ``np.bincount`` over the pairs
    (a sparse product's Python dispatch costs a few µs, more than their arithmetic); larger
    ones (more than :data:`PRODUCT_ENTRIES` pairs) as CSR products, kept with the transpose
    (bincount scatters at about twice a product's ns per entry)."""

    rows: IntArray
    cols: IntArray
    shape: tuple[int, int]
    forward: sp.csr_array | None = None
    backward: sp.csr_array | None = None

    def times(self, x: FloatArray) -> FloatArray:
        """M x: entry r is Σ_{(r, c) a pair} x_c."""
        if self.forward is not None:
            return np.asarray(self.forward @ x, dtype=np.float64)
        return np.bincount(self.rows, x[self.cols], self.shape[0])

    def transposed_times(self, y: FloatArray) -> FloatArray:
        """Mᵀ y: entry c is Σ_{(r, c) a pair} y_r."""
        if self.backward is not None:
            return np.asarray(self.backward @ y, dtype=np.float64)
        return np.bincount(self.cols, y[self.rows], self.shape[1])


def zero_one(rows: IntArray, cols: IntArray, shape: tuple[int, int]) -> ZeroOne:
    """The :class:`ZeroOne` map of these pairs (distinct), sorted by row (its bincounts then
    write in increasing order), read-only; CSR products beyond :data:`PRODUCT_ENTRIES` pairs."""
    order = np.argsort(rows, kind="stable")
    rows, cols = rows[order], cols[order]
    rows.flags.writeable = cols.flags.writeable = False
    if rows.size <= PRODUCT_ENTRIES:
        return ZeroOne(rows, cols, shape)
    forward = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=shape)
    return ZeroOne(rows, cols, shape, forward, forward.T.tocsr())


@dataclass(frozen=True, eq=False)
class Level:
    """The cliques of one depth L ≥ 1: their plans (flat-table order), and their block in
    ``segments`` (lo, hi, run, mlo, mhi): consecutive cliques whose every separator value owns
    ``run`` contiguous table entries (``lo:hi``), with messages at ``mlo:mhi`` of the flat
    message vector (one entry per separator value, clique by clique)."""

    cliques: tuple[CliquePlan, ...]
    segments: tuple[tuple[int, int, int, int, int], ...]
    mlo: int
    mhi: int
    #: with many segments, the whole level's runs at once (``lo:hi``, each separator value's
    #: run length and start): one reduceat instead of a few numpy calls per segment
    lo: int
    hi: int
    runs: IntArray
    starts: IntArray
    #: the small cliques of the level above (their entries of the flat tables: a slice when
    #: contiguous) and, when some of them are parents of this level's cliques, the 0/1 map
    #: (parent entry among them, message among ``mlo:mhi``): upward each message is added into
    #: the parent entries holding its separator value (M m), downward each separator value's
    #: P(x_S) is the sum of its parent entries' probabilities (Mᵀ P)
    parent_small: slice | IntArray = field(default_factory=lambda: slice(0, 0))
    links: ZeroOne | None = None


def _row_reduce(op: np.ufunc, y: FloatArray, out: FloatArray) -> FloatArray:
    """``op`` reduced along each row of ``y`` into ``out``: column by column for rows of at
    most :data:`SHORT_RUN` entries (elementwise calls), else one reduction."""
    n = y.shape[1]
    if n > SHORT_RUN:
        return op.reduce(y, axis=1, out=out)
    if n == 1:
        np.copyto(out, y[:, 0])
        return out
    op(y[:, 0], y[:, 1], out=out)
    for j in range(2, n):
        op(out, y[:, j], out=out)
    return out


def _view(buffer: FloatArray, shape: tuple[int, ...], offset: int,
          strides: tuple[int, ...]) -> FloatArray:
    """The float64 array of ``shape``/``strides`` (bytes) at byte ``offset`` of ``buffer``."""
    return np.ndarray(shape, np.float64, buffer, offset, strides)


def _gather(plan: CliquePlan, b: FloatArray, sources: tuple[FloatArray, FloatArray]) -> None:
    """Clique ``plan``'s log-table Σ_t t(x_t) over its terms (factors and children's messages),
    written to its block of ``b``, prefix by prefix (:class:`Step`). The last step writes
    the clique's table in its own (C) order, its operands transposed to it: contiguous writes
    run several times faster than writes through the processing order's transposed view."""
    if plan.copy is not None:
        source, offset = plan.copy
        b[plan.lo: plan.hi] = sources[source][offset: offset + plan.hi - plan.lo]
        return
    last = len(plan.steps) - 1
    prev: FloatArray | None = None
    for i, st in enumerate(plan.steps):
        n = len(st.shape)
        parts = []
        if st.union:  # the terms summed over their union first, then broadcast once
            u = np.zeros(st.union_shape)
            for t in st.terms:
                np.add(u, _view(sources[t.source], st.union_shape, t.offset, t.read_strides),
                       out=u)
            full = [1] * n
            for a, size in zip(st.union, st.union_shape, strict=True):
                full[a] = size
            parts.append(u.reshape(full))
        else:
            parts = [_view(sources[t.source], st.shape, t.offset, t.read_strides)
                     for t in st.terms]
        if prev is not None:  # the previous prefix, constant along the new axes
            parts.insert(0, prev.reshape(prev.shape + (1,) * (n - prev.ndim)))
        if i == last:
            target = b[plan.lo: plan.hi].reshape(plan.shape)
            parts = [x.transpose(plan.inverse) for x in parts]
        else:
            target = np.empty(st.shape)
        if not parts:
            target.fill(0.0)
        elif len(parts) == 1:
            np.copyto(target, parts[0])
        else:
            np.add(parts[0], parts[1], out=target)
            for x in parts[2:]:
                np.add(target, x, out=target)
        prev = target if i < last else None


def _scatter(plan: CliquePlan, p: FloatArray, sinks: tuple[FloatArray, FloatArray]) -> None:
    """Every term's marginal of clique ``plan``'s probability table (its block of ``p``),
    written to its place in ``sinks``, from the smallest table holding its axes (its step's
    prefix table, or the union table U_j of its step)."""
    if plan.copy is not None:
        source, offset = plan.copy
        sinks[source][offset: offset + plan.hi - plan.lo] = p[plan.lo: plan.hi]
        return
    cur = p[plan.lo: plan.hi].reshape(plan.shape).transpose(plan.axes)
    for st in reversed(plan.steps):
        if cur.ndim > len(st.shape):
            cur = cur.sum(axis=tuple(range(len(st.shape), cur.ndim)))
        src = cur
        if st.union:
            src = cur.sum(axis=tuple(a for a in range(cur.ndim) if a not in st.union))
        for t in st.terms:
            np.sum(src, axis=t.reduce_axes,
                   out=_view(sinks[t.source], t.write_shape, t.offset, t.write_strides))


@dataclass(frozen=True, eq=False)
class JunctionTree:
    """A junction tree compiled for fixed factor scopes (module docstring; docs/theory.md §4.7).

    Frozen: build it with :func:`junction_tree`, then call :meth:`marginals`,
    :meth:`log_partition` or :meth:`infer` with new log-potentials as often as needed. Factor s
    has the table shape ``shapes[s]`` (the sizes of ``scopes[s]`` in the given order); its
    entries sit at ``offsets[s]:offsets[s + 1]`` of the flat parameter vector (C order).
    """

    sizes: tuple[int, ...]
    scopes: tuple[tuple[int, ...], ...]
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]  # len(scopes) + 1
    cliques: tuple[tuple[int, ...], ...]  # variables of each clique, flat-vector order
    clique_parent: tuple[int, ...]  # −1 for the virtual root (clique 0, empty scope)
    clique_offsets: tuple[int, ...]  # len(cliques) + 1
    levels: tuple[Level, ...]  # depth 1, 2, …
    n_messages: int
    #: the flat offsets of the factors with an empty scope (a constant term each)
    constants: tuple[int, ...]
    log_free: float  # Σ log |X_v| over variables in no scope
    width: int  # largest clique size − 1
    #: the entries of the small cliques (:data:`SMALL_CLIQUE`) in the flat tables (a slice
    #: when contiguous) and the 0/1 map M (small entry among them, parameter): upward B = M φ
    #: sums each small clique's factors into its table, downward μ = Mᵀ P each small-hosted
    #: factor's marginal from its host's probabilities; None without small cliques (with
    #: small cliques but no factor on them: a map without pairs)
    small: slice | IntArray = field(default_factory=lambda: slice(0, 0))
    factor_links: ZeroOne | None = None

    @property
    def n_entries(self) -> int:
        """Length of the flat parameter (and marginal) vector: Σ_s |table s|."""
        return self.offsets[-1]

    @property
    def table_entries(self) -> int:
        """Entries of all clique tables together (the work per pass is linear in this)."""
        return self.clique_offsets[-1]

    @property
    def depth(self) -> int:
        """Number of levels below the virtual root (numpy calls per pass grow with this)."""
        return len(self.levels)

    # -- parameters ------------------------------------------------------------------------
    def flatten(self, log_potentials: Sequence[npt.ArrayLike] | npt.ArrayLike) -> FloatArray:
        """The flat parameter vector of a list of tables (or a flat vector, checked); C
        contiguous (the passes read its tables through strided views)."""
        if isinstance(log_potentials, np.ndarray) and log_potentials.ndim == 1 \
                and log_potentials.dtype == np.float64:
            flat = np.ascontiguousarray(log_potentials)
        elif isinstance(log_potentials, (list, tuple)):
            if len(log_potentials) != len(self.scopes):
                raise QueryError(f"{len(log_potentials)} log-potential tables for "
                                 f"{len(self.scopes)} scopes")
            arrays = [np.asarray(t, dtype=np.float64) for t in log_potentials]
            if tuple(a.shape for a in arrays) != self.shapes:
                s = next(s for s, a in enumerate(arrays) if a.shape != self.shapes[s])
                raise QueryError(f"log-potential table #{s} has shape {arrays[s].shape}; its "
                                 f"scope {self.scopes[s]} needs {self.shapes[s]}")
            flat = np.concatenate([a.ravel() for a in arrays]) if arrays else np.zeros(0)
        else:
            flat = np.ascontiguousarray(log_potentials, dtype=np.float64).reshape(-1)
        if flat.shape != (self.n_entries,):
            raise QueryError(f"{flat.size} log-potential entries; the scopes need "
                             f"{self.n_entries}")
        if not np.all(flat < np.inf):
            raise QueryError("log-potentials must be finite or −∞ (no NaN, no +∞)",
                             hint="−∞ marks an impossible assignment")
        return flat

    def split(self, flat: FloatArray) -> list[FloatArray]:
        """A flat vector (parameters or marginals) as one table per scope (views)."""
        o = self.offsets
        return [flat[o[s]: o[s + 1]].reshape(sh) for s, sh in enumerate(self.shapes)]

    # -- passes ----------------------------------------------------------------------------
    def _upward(self, flat: FloatArray) -> tuple[float, FloatArray, FloatArray]:
        """Collect, deepest level first. Each clique's log-table B_c = Σ of its factors and
        its children's messages (:func:`_gather` for a large clique; for the small ones
        (:data:`SMALL_CLIQUE`) B = M φ before the pass and each level's messages added into
        them by its :attr:`Level.links`); with M(x_S) = max_{x_C∖S} B_c(x_C) (0 where
        that is −∞) its table becomes e_c = exp(B_c − M) in place, s_c(x_S) = Σ_{x_C∖S} e_c and
        the message m_c = log s_c + M = log Σ_{x_C∖S} exp B_c. Returns (log Z without the free
        variables, the flat tables e, s), the messages and s sharing one layout."""
        b = np.empty(self.table_entries)
        msg = np.empty(self.n_messages)
        s = np.empty(self.n_messages)
        if self.factor_links is not None:
            b[self.small] = self.factor_links.times(flat)
        with np.errstate(divide="ignore"):  # log 0 = −∞: an all −∞ run (once: µs per level)
            for lv in reversed(self.levels):
                for plan in lv.cliques:
                    _gather(plan, b, (flat, msg))
                if lv.runs.size:  # many segments: the whole level by reduceat
                    x = b[lv.lo: lv.hi]
                    top = np.maximum.reduceat(x, lv.starts)
                    np.maximum(top, LOWEST, out=top)  # an all −∞ run: e = 0, s = 0, m = −∞
                    np.subtract(x, np.repeat(top, lv.runs), out=x)
                    np.exp(x, out=x)
                    s[lv.mlo: lv.mhi] = np.add.reduceat(x, lv.starts)
                    np.log(s[lv.mlo: lv.mhi], out=msg[lv.mlo: lv.mhi])
                    msg[lv.mlo: lv.mhi] += top
                else:
                    for lo, hi, run, mlo, mhi in lv.segments:
                        y = b[lo: hi].reshape(-1, run)
                        top = _row_reduce(np.maximum, y, np.empty(mhi - mlo))
                        np.maximum(top, LOWEST, out=top)  # an all −∞ run: e = 0, m = −∞
                        np.subtract(y, top[:, None], out=y)
                        np.exp(y, out=y)
                        _row_reduce(np.add, y, s[mlo: mhi])
                        np.log(s[mlo: mhi], out=msg[mlo: mhi])
                        msg[mlo: mhi] += top
                if lv.links is not None:  # the messages into small parents (a large one
                    # gathers its own)
                    b[lv.parent_small] += lv.links.times(msg[lv.mlo: lv.mhi])
        roots = self.levels[0] if self.levels else None
        log_z = float(msg[roots.mlo: roots.mhi].sum()) if roots is not None else 0.0
        if self.constants:
            log_z += float(flat[list(self.constants)].sum())
        return log_z, b, s

    def _downward(self, e: FloatArray, s: FloatArray, out: FloatArray) -> None:
        """Distribute, top level first: P(x_C) = P(x_S) · e_c(x_C) / s_c(x_S) in place of e
        (a root: P = e / s), then every term's marginal of P(x_C) — the factors' into ``out``,
        the children's separators' P(x_S) into the next level's ratios (a small parent's by
        the next level's links, a small host's factors by the factor links at the end). No
        exp: the upward pass's e_c / s_c is the child's conditional P(x_C∖S | x_S)."""
        sep = np.empty(self.n_messages)
        if self.factor_links is not None:
            out.fill(0.0)  # the small hosts' factors: summed into at the end
        for depth, lv in enumerate(self.levels):
            m = slice(lv.mlo, lv.mhi)
            if depth == 0:  # one separator value (the empty one) each: s > 0 as Z > 0
                ratio = 1.0 / s[m]
            else:  # s ≥ 1 (its run's max gives e = 1) or s = 0, only where P(x_S) = 0 and
                # e = 0: dividing by max(s, 1) changes nothing else and never divides by 0
                ratio = sep[m] / np.maximum(s[m], 1.0)
            if lv.runs.size:
                e[lv.lo: lv.hi] *= np.repeat(ratio, lv.runs)
            else:
                for lo, hi, run, mlo, mhi in lv.segments:
                    y = e[lo: hi].reshape(-1, run)
                    np.multiply(y, ratio[mlo - lv.mlo: mhi - lv.mlo, None], out=y)
            below = self.levels[depth + 1] if depth + 1 < len(self.levels) else None
            if below is not None and below.links is not None:
                # before the large cliques' scatters: this writes 0 for their children
                sep[below.mlo: below.mhi] = below.links.transposed_times(e[below.parent_small])
            for plan in lv.cliques:
                _scatter(plan, e, (out, sep))
        if self.factor_links is not None:  # 0 at the large hosts' factors, written above
            out += self.factor_links.transposed_times(e[self.small])
        for o in self.constants:
            out[o] = 1.0
        e[0] = 1.0  # the virtual root: P of the empty assignment

    def log_partition(self, log_potentials: Sequence[npt.ArrayLike] | npt.ArrayLike) -> float:
        """log Z = log Σ_x exp(Σ_s φ_s(x_s)) (−∞ if every assignment has a −∞ entry)."""
        return self._upward(self.flatten(log_potentials))[0] + self.log_free

    def infer(self, log_potentials: Sequence[npt.ArrayLike] | npt.ArrayLike
              ) -> tuple[float, FloatArray]:
        """(log Z, flat marginals): P(x_s) for every scope s, concatenated like the
        parameters (see :meth:`split`). One upward and one downward pass. The flat marginals
        are also the gradient of log Z with respect to the flat log-potentials (∂ log Z /
        ∂φ_s(x_s) = P(x_s)), the gradient of a maximum-entropy dual."""
        log_z, e, s = self._upward(self.flatten(log_potentials))
        if log_z == -np.inf:
            raise QueryError("every assignment has probability 0 (the −∞ entries exclude all)")
        out = np.empty(self.n_entries)
        self._downward(e, s, out)
        return log_z + self.log_free, out

    def marginals(self, log_potentials: Sequence[npt.ArrayLike] | npt.ArrayLike
                  ) -> list[FloatArray]:
        """P(x_s) for every scope s, as tables of shape ``shapes[s]`` (each sums to 1)."""
        return self.split(self.infer(log_potentials)[1])

    def clique_marginals(self, log_potentials: Sequence[npt.ArrayLike] | npt.ArrayLike
                         ) -> list[tuple[tuple[int, ...], FloatArray]]:
        """(variables, P over them) for every clique of the tree, axes in the listed order."""
        log_z, p, s = self._upward(self.flatten(log_potentials))
        if log_z == -np.inf:
            raise QueryError("every assignment has probability 0 (the −∞ entries exclude all)")
        self._downward(p, s, np.empty(self.n_entries))
        o = self.clique_offsets
        return [(c, p[o[k]: o[k + 1]].reshape(tuple(self.sizes[v] for v in c)))
                for k, c in enumerate(self.cliques) if k > 0]


def junction_tree(
    sizes: Sequence[int],
    scopes: Sequence[Sequence[int]],
    *,
    heuristic: str = "min-fill",
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    order: Sequence[int] | None = None,
    compile_guard: bool = True,
    small_clique: int = SMALL_CLIQUE,
) -> JunctionTree:
    """Compile the junction tree of P(x) ∝ exp(Σ_s φ_s(x_s)) over variables with ``sizes``,
    for factors over ``scopes`` (tuples of distinct variable indices; a scope may repeat, or be
    empty). Raises :class:`~tessera.errors.QueryError` on bad scopes and
    :class:`~tessera.errors.ResourceError` when a clique table would exceed ``memory_limit``
    bytes (docs/theory.md §4.7).

    ``order``: an elimination order to use instead of the ``heuristic``'s (it must list every
    variable of the scopes; variables it lists beyond them get cliques of their own).

    Cliques of at most ``small_clique`` entries (:data:`SMALL_CLIQUE`, the default, is
    calibrated; tests lower or raise it to run either regime) run their passes through 0/1
    maps shared by all of them, the larger ones through broadcast steps of their own.

    The guard also prices the compilation itself, before any object of it exists: a few
    entries per axis of each large factor host and large parent clique, one map entry per
    table entry of each small one (:attr:`_Skeleton.compile_entries`,
    :attr:`_Skeleton.sparse_entries`; the steps broadcast and sum over the tables, so k
    factors in one large clique of M entries cost k·|clique axes| entries, not k·M). Refused
    (:func:`check_compile`) when :func:`compile_bytes` of them exceeds
    ``memory_limit``; ``compile_guard=False`` leaves that to the caller
    (:class:`tessera.engine.model.GibbsModel` prices it in its plan:
    :attr:`~tessera.engine.decomposition.MemoryPlan.compile_bytes`)."""
    sizes_t = tuple(int(s) for s in sizes)
    if any(s < 1 for s in sizes_t):
        raise QueryError(f"variable sizes must be ≥ 1, got {min(sizes_t)}")
    scopes_t = tuple(tuple(int(v) for v in sc) for sc in scopes)
    for k, sc in enumerate(scopes_t):
        if len(set(sc)) != len(sc):
            raise QueryError(f"scope #{k} {sc} repeats a variable")
        bad = [v for v in sc if not 0 <= v < len(sizes_t)]
        if bad:
            raise QueryError(f"scope #{k} {sc} names variable {bad[0]}, but there are "
                             f"{len(sizes_t)} variables")
    shapes = tuple(tuple(sizes_t[v] for v in sc) for sc in scopes_t)
    offsets = tuple(int(x) for x in np.cumsum([0, *(math.prod(sh) for sh in shapes)]))
    sk = _skeleton(sizes_t, scopes_t, heuristic, memory_limit, order, small_clique)
    if compile_guard:
        check_compile(sk.compile_entries, max(sk.csizes), memory_limit, sk.sparse_entries)
    order, cliques, cparent, csizes = sk.order, sk.cliques, sk.cparent, sk.csizes
    nsep, by_depth, fhosts = sk.nsep, sk.by_depth, sk.fhosts
    coff = [0, *np.cumsum(csizes).tolist()]

    # -- messages: one entry per separator value, level by level, clique by clique ------------
    level_ks: list[list[int]] = []
    first = 1
    for d in range(1, len(by_depth)):
        level_ks.append(list(range(first, first + len(by_depth[d]))))
        first += len(by_depth[d])
    n_sep = [math.prod(sizes_t[v] for v in c[: nsep[k]]) for k, c in enumerate(cliques)]
    mstart = [0] * len(cliques)
    mpos = 0
    for ks in level_ks:
        for k in ks:
            mstart[k] = mpos
            mpos += n_sep[k]

    # -- terms: each large clique's factors (hosted: _skeleton) and its children's separators;
    # -- a small clique's go into the 0/1 maps (SMALL_CLIQUE) --------------------------------
    small = sk.small
    terms: list[list[tuple[int, int, tuple[int, ...]]]] = [[] for _ in cliques]
    for s, (h, sc) in enumerate(zip(fhosts, scopes_t, strict=True)):
        if sc and not small[h]:
            terms[h].append((FACTOR, offsets[s], sc))
    for k in range(1, len(cliques)):
        if cparent[k] > 0 and not small[cparent[k]]:
            terms[cparent[k]].append((SEPARATOR, mstart[k], cliques[k][: nsep[k]]))
    shape_of = [tuple(sizes_t[v] for v in c) for c in cliques]
    cstrides = [c_order_strides(sh) for sh in shape_of]
    cpos = [{v: i for i, v in enumerate(c)} for c in cliques]
    sbase = [0] * len(cliques)  # a small clique's first entry among the small entries
    n_small = 0
    for k in range(len(cliques)):
        if small[k]:
            sbase[k] = n_small
            n_small += csizes[k]

    levels: list[Level] = []
    for d, ks in enumerate(level_ks):
        plans = tuple(_clique_plan(k, coff[k], coff[k + 1], cliques[k], sizes_t, terms[k])
                      for k in ks if not small[k])
        segments: list[tuple[int, int, int, int, int]] = []
        for k in ks:  # consecutive cliques with one run length share the grouped log-sum-exp
            run = csizes[k] // n_sep[k]
            if segments and segments[-1][2] == run:
                lo, _, _, mlo, _ = segments[-1]
                segments[-1] = (lo, coff[k + 1], run, mlo, mstart[k] + n_sep[k])
            else:
                segments.append((coff[k], coff[k + 1], run, mstart[k], mstart[k] + n_sep[k]))
        runs = np.zeros(0, dtype=np.intp)
        if len(segments) > MANY_SEGMENTS:
            runs = np.repeat(np.asarray([csizes[k] // n_sep[k] for k in ks], dtype=np.intp),
                             [n_sep[k] for k in ks])
        starts = np.concatenate([[0], np.cumsum(runs)[:-1]]).astype(np.intp) if runs.size \
            else runs
        runs.flags.writeable = starts.flags.writeable = False
        # the messages into small parents (the level above): rows local to its small entries
        parent_small: slice | IntArray = slice(0, 0)
        links = None
        kids = [k for k in ks if cparent[k] > 0 and small[cparent[k]]]
        if kids:
            above = [p for p in level_ks[d - 1] if small[p]]
            parent_small = _positions([coff[p] for p in above], [csizes[p] for p in above])
            local = {p: sbase[p] - sbase[above[0]] for p in above}
            hosts = [cparent[k] for k in kids]
            seg, entry, proj = batched_projection(
                hosts, [[cpos[cparent[k]][v] for v in cliques[k][: nsep[k]]] for k in kids],
                csizes, shape_of, cstrides)
            rows = np.asarray([local[p] for p in hosts], dtype=np.intp)[seg] + entry
            cols = np.asarray([mstart[k] - mstart[ks[0]] for k in kids], dtype=np.intp)[seg] \
                + proj
            links = zero_one(rows, cols, (sum(csizes[p] for p in above),
                                          mstart[ks[-1]] + n_sep[ks[-1]] - mstart[ks[0]]))
        levels.append(Level(cliques=plans, segments=tuple(segments), mlo=mstart[ks[0]],
                            mhi=mstart[ks[-1]] + n_sep[ks[-1]], lo=coff[ks[0]],
                            hi=coff[ks[-1] + 1], runs=runs, starts=starts,
                            parent_small=parent_small, links=links))

    # -- the small cliques' factors: one 0/1 map for all ---------------------------------------
    small_ks = [k for k in range(1, len(cliques)) if small[k]]
    small_pos = _positions([coff[k] for k in small_ks], [csizes[k] for k in small_ks])
    factor_links = None
    if small_ks:  # small cliques without factors (only children's messages): B starts at 0
        hosted = [s for s, (h, sc) in enumerate(zip(fhosts, scopes_t, strict=True))
                  if sc and small[h]]
        seg, entry, proj = batched_projection(
            [fhosts[s] for s in hosted], [[cpos[fhosts[s]][v] for v in scopes_t[s]]
                                           for s in hosted], csizes, shape_of, cstrides)
        hs = np.asarray([fhosts[s] for s in hosted], dtype=np.intp)
        rows = np.asarray([sbase[h] for h in hs], dtype=np.intp)[seg] + entry
        cols = np.asarray([offsets[s] for s in hosted], dtype=np.intp)[seg] + proj
        factor_links = zero_one(rows, cols, (n_small, offsets[-1]))

    occurs = set(order)
    log_free = math.fsum(math.log(sizes_t[v]) for v in range(len(sizes_t)) if v not in occurs)
    return JunctionTree(
        sizes=sizes_t, scopes=scopes_t, shapes=shapes, offsets=offsets,
        cliques=tuple(cliques), clique_parent=tuple(cparent), clique_offsets=tuple(coff),
        levels=tuple(levels), n_messages=mpos,
        constants=tuple(offsets[s] for s, sc in enumerate(scopes_t) if not sc),
        log_free=log_free, width=max((len(c) for c in cliques), default=0) - 1,
        small=small_pos, factor_links=factor_links,
    )


def _clique_plan(k: int, lo: int, hi: int, variables: tuple[int, ...],
                 sizes_t: tuple[int, ...], terms: list[tuple[int, int, tuple[int, ...]]]
                 ) -> CliquePlan:
    """The :class:`CliquePlan` of clique ``k`` (variables ``variables``, entries ``lo:hi``)
    for its ``terms`` (source, entry offset, variables in the term's own axis order).

    The processing order is chosen last axis first: the axis the fewest remaining terms hold
    (then the largest, then the latest), whose terms then sit at the last step. Adding a
    term at step j costs the size of T_j, so a clique of n axes holding all pairs costs about
    n + n/d + … clique sizes instead of n(n − 1)/2."""
    shape = tuple(sizes_t[v] for v in variables)
    pos = {v: i for i, v in enumerate(variables)}
    holds = [frozenset(pos[v] for v in vs) for _, _, vs in terms]
    remaining = set(range(len(variables)))
    left = set(range(len(terms)))
    step_of = dict.fromkeys(range(len(terms)), 0)  # a term without axes: the first step
    backwards: list[int] = []
    while remaining:
        a = min(remaining, key=lambda a: (sum(a in holds[t] for t in left), -shape[a], -a))
        remaining.remove(a)
        backwards.append(a)
        hit = {t for t in left if a in holds[t]}
        for t in hit:
            step_of[t] = len(remaining)
        left -= hit
    axes = tuple(reversed(backwards))
    at_step: dict[int, list[int]] = {}
    for t in range(len(terms)):
        at_step.setdefault(step_of[t], []).append(t)
    steps = []
    for j in sorted({*at_step, len(axes) - 1}):
        prefix = [variables[a] for a in axes[: j + 1]]
        mine = at_step.get(j, [])
        held = {v for t in mine for v in terms[t][2]}
        union = [i for i, v in enumerate(prefix) if v in held] \
            if len(mine) > 1 and len(held) < len(prefix) else []
        frame = [prefix[i] for i in union] if union else prefix  # the terms' table's axes
        made = []
        for t in mine:
            source, offset, vs = terms[t]
            own = dict(zip(vs, (8 * x for x in c_order_strides([sizes_t[v] for v in vs])),
                           strict=True))
            kept = [i for i, v in enumerate(frame) if v in own]
            made.append(Term(
                source=source, offset=8 * offset,
                read_strides=tuple(own.get(v, 0) for v in frame),
                reduce_axes=tuple(i for i, v in enumerate(frame) if v not in own),
                write_shape=tuple(sizes_t[frame[i]] for i in kept),
                write_strides=tuple(own[frame[i]] for i in kept)))
        steps.append(Step(shape=tuple(sizes_t[v] for v in prefix), union=tuple(union),
                          union_shape=tuple(sizes_t[prefix[i]] for i in union),
                          terms=tuple(made)))
    copy = None
    if len(terms) == 1 and terms[0][2] == variables:
        copy = (terms[0][0], terms[0][1])
    return CliquePlan(clique=k, lo=lo, hi=hi, shape=shape, axes=axes, copy=copy,
                      inverse=tuple(int(i) for i in np.argsort(axes)), steps=tuple(steps))


@dataclass(frozen=True)
class _Skeleton:
    """What :func:`junction_tree` decides before it allocates an array: the elimination
    order, the cliques in depth order (clique 0 the virtual root), their parents and sizes,
    the cliques of each depth, and the host clique of every factor scope."""

    order: list[int]
    cliques: list[tuple[int, ...]]
    cparent: list[int]
    csizes: list[int]
    nsep: list[int]
    by_depth: list[list[int]]
    fhosts: list[int]
    scopes: tuple[tuple[int, ...], ...]
    small_clique: int  # the largest small clique's entries (SMALL_CLIQUE)

    @property
    def small(self) -> list[bool]:
        """Whether each clique is small (at most ``small_clique`` entries, by default
        :data:`SMALL_CLIQUE`; never the virtual root): its passes run through the 0/1 maps,
        not through broadcast steps."""
        return [k > 0 and n <= self.small_clique for k, n in enumerate(self.csizes)]

    @property
    def compile_entries(self) -> int:
        """Index entries the compilation builds per term: one per axis (plus one) of the host
        clique of every factor scope and of the parent of every clique — a large clique's
        term's byte strides (:class:`Term`), and for small and large cliques alike the
        schedule's small Python objects — Σ_s (|host(s)| + 1) + Σ_{C ≠ root} (|parent(C)| + 1)
        in variables, not in table entries: the steps broadcast and sum over the tables, so
        no index array grows with a large clique's table (a small one's 0/1 maps do:
        :attr:`sparse_entries`)."""
        width = [len(c) + 1 for c in self.cliques]
        return sum(width[p] for p in self.cparent[1:]) + sum(width[h] for h in self.fhosts)

    @property
    def sparse_entries(self) -> int:
        """Entries of the small cliques' 0/1 maps: one per entry of the host clique of every
        factor scope and of the parent of every clique, when that clique is small (each ≤
        :data:`SMALL_CLIQUE` entries)."""
        small = self.small
        return sum(self.csizes[p] for p in self.cparent[1:] if small[p]) \
            + sum(self.csizes[h] for h, sc in zip(self.fhosts, self.scopes, strict=True)
                  if sc and small[h])


def _skeleton(sizes_t: tuple[int, ...], scopes_t: tuple[tuple[int, ...], ...], heuristic: str,
              memory_limit: int, order: Sequence[int] | None,
              small_clique: int = SMALL_CLIQUE) -> _Skeleton:
    """:class:`_Skeleton` of :func:`junction_tree`'s arguments (checked), refused by the
    tables' memory guard (:func:`_bags`)."""
    bags, parents, order = _bags(sizes_t, scopes_t, heuristic, memory_limit, order)
    # -- maximal cliques: a bag contained in a child's bag is absorbed by that child --------
    n = len(bags)
    sets = [frozenset(b) for b in bags]
    children: list[list[int]] = [[] for _ in range(n)]
    for t, p in enumerate(parents):
        if p >= 0:
            children[p].append(t)
    rep = list(range(n))  # bag t's clique
    parent = list(parents)
    alive = [True] * n
    for t in range(n):  # children before parents (a parent is eliminated later)
        big = next((c for c in children[t] if sets[t] <= sets[c]), None)
        if big is None:
            continue
        alive[t] = False
        rep[t] = big
        parent[big] = parent[t]
        for c in children[t]:
            if c != big:
                parent[c] = big
        if parent[t] >= 0:
            children[parent[t]] = [big if c == t else c for c in children[parent[t]]]
        children[big] = children[big] + [c for c in children[t] if c != big]
    for t in reversed(range(n)):
        while not alive[rep[t]]:
            rep[t] = rep[rep[t]]

    # -- undirected clique tree, each component re-rooted at its centre -----------------------
    nodes = [t for t in range(n) if alive[t]]
    adj: dict[int, list[int]] = {t: [] for t in nodes}
    for t in nodes:
        if parent[t] >= 0:
            adj[t].append(parent[t])
            adj[parent[t]].append(t)
    roots = []
    seen: set[int] = set()
    for t in nodes:
        if t not in seen:
            roots.append(_centre(adj, t, seen))

    # BFS from the virtual root: depth, parent, clique order by depth
    node_parent: dict[int, int] = {}
    depth_of: dict[int, int] = {}
    by_depth: list[list[int]] = [[-1]]
    queue: deque[int] = deque()
    for r in roots:
        node_parent[r] = -1
        depth_of[r] = 1
        queue.append(r)
    while queue:
        t = queue.popleft()
        d = depth_of[t]
        if len(by_depth) <= d:
            by_depth.append([])
        by_depth[d].append(t)
        for u in adj[t]:
            if u not in depth_of:
                depth_of[u] = d + 1
                node_parent[u] = t
                queue.append(u)

    # cliques in depth order; clique 0 is the virtual root (empty scope)
    index = {t: k for k, t in enumerate(t for lvl in by_depth for t in lvl)}
    ordered = [t for lvl in by_depth for t in lvl]
    cliques: list[tuple[int, ...]] = []
    cparent: list[int] = []
    for t in ordered:
        if t < 0:
            cliques.append(())
            cparent.append(-1)
            continue
        p = node_parent[t]
        sep = sorted(sets[t] & sets[p]) if p >= 0 else []
        rest = sorted(sets[t] - set(sep))
        cliques.append(tuple(sep + rest))
        cparent.append(index[p] if p >= 0 else 0)
    csizes = [math.prod(sizes_t[v] for v in c) for c in cliques]
    nsep = [len(set(c) & set(cliques[cparent[k]])) if k > 0 else 0
            for k, c in enumerate(cliques)]

    # -- factors: hosted by the smallest clique containing their scope -------------------------
    # (the bag of the first-eliminated variable always contains it; a smaller one costs less)
    position = {v: i for i, v in enumerate(order)}
    holding: dict[int, set[int]] = {}
    for k, c in enumerate(cliques):
        for v in c:
            holding.setdefault(v, set()).add(k)
    fhosts = []
    for sc in scopes_t:
        host = 0
        if sc:
            host = index[rep[min(position[v] for v in sc)]]
            if len(sc) == 1:
                inside = holding[sc[0]]
            else:
                inside = set.intersection(*(holding[v] for v in sc))
            host = min(inside, key=lambda k: (csizes[k], k != host, k))
        fhosts.append(host)
    return _Skeleton(order, cliques, cparent, csizes, nsep, by_depth, fhosts, scopes_t,
                     small_clique)


def compile_bytes(entries: int, sparse_entries: int = 0) -> int:
    """Bytes a junction tree's compilation peaks at for ``entries`` index entries of its
    broadcast steps (:attr:`_Skeleton.compile_entries`) and ``sparse_entries`` of its small
    cliques' 0/1 maps (:attr:`_Skeleton.sparse_entries`): :data:`COMPILE_BYTES_PER_ENTRY`
    and :data:`SPARSE_BYTES_PER_ENTRY` each."""
    return COMPILE_BYTES_PER_ENTRY * entries + SPARSE_BYTES_PER_ENTRY * sparse_entries


def junction_compile_entries(sizes: Sequence[int], scopes: Sequence[Sequence[int]], *,
                             order: Sequence[int] | None = None, heuristic: str = "min-fill",
                             memory_limit: int = DEFAULT_MEMORY_LIMIT
                             ) -> tuple[int, int, int]:
    """(index entries of the broadcast steps, entries of the 0/1 maps, the largest clique's
    entries) of compiling :func:`junction_tree` with these arguments, decided without
    allocating an array: :func:`check_compile`'s arguments. Raises the tables'
    :class:`~tessera.errors.ResourceError` when :func:`junction_tree` would."""
    sizes_t = tuple(int(s) for s in sizes)
    scopes_t = tuple(tuple(int(v) for v in sc) for sc in scopes)
    sk = _skeleton(sizes_t, scopes_t, heuristic, memory_limit, order)
    return sk.compile_entries, sk.sparse_entries, max(sk.csizes)


def junction_compile_bytes(sizes: Sequence[int], scopes: Sequence[Sequence[int]], *,
                           order: Sequence[int] | None = None, heuristic: str = "min-fill",
                           memory_limit: int = DEFAULT_MEMORY_LIMIT) -> int:
    """The peak bytes of compiling :func:`junction_tree` with these arguments
    (:func:`compile_bytes` of its index entries), decided without allocating an array; raises
    the tables' :class:`~tessera.errors.ResourceError` when :func:`junction_tree` would."""
    entries, sparse_entries, _ = junction_compile_entries(
        sizes, scopes, order=order, heuristic=heuristic, memory_limit=memory_limit)
    return compile_bytes(entries, sparse_entries)


def check_junction(sizes: Sequence[int], scopes: Sequence[Sequence[int]], *,
                   memory_limit: int = DEFAULT_MEMORY_LIMIT,
                   heuristic: str = "min-fill") -> None:
    """Raise :func:`junction_tree`'s :class:`~tessera.errors.ResourceError` (its tables or its
    compilation, :func:`check_compile`) exactly when it would, without allocating an array."""
    entries, sparse_entries, largest = junction_compile_entries(
        sizes, scopes, heuristic=heuristic, memory_limit=memory_limit)
    check_compile(entries, largest, memory_limit, sparse_entries)


def check_compile(entries: int, largest: int, limit: int, sparse_entries: int = 0) -> None:
    """Refuse (:class:`~tessera.errors.ResourceError`) a compilation of ``entries`` index
    entries of broadcast steps (:attr:`_Skeleton.compile_entries`) and ``sparse_entries`` of
    0/1 maps (:attr:`_Skeleton.sparse_entries`; ``largest``: the largest clique's entries)
    whose peak (:func:`compile_bytes`) exceeds ``limit`` bytes."""
    need = compile_bytes(entries, sparse_entries)
    if need <= limit:
        return
    raise ResourceError(
        f"compiling the junction tree needs {format_bytes(need)} (limit "
        f"{format_bytes(limit)}): {entries:,} index entries, one per axis of each factor's "
        f"host clique (largest {largest:,} entries) and of each clique's parent, and "
        f"{sparse_entries:,} map entries, one per table entry of the small ones",
        hint="many factors share one large clique: read fewer queries per pass, or raise the "
        "memory limit")


def junction_cliques(sizes: Sequence[int], scopes: Sequence[Sequence[int]], *,
                     heuristic: str = "min-fill", memory_limit: int = DEFAULT_MEMORY_LIMIT
                     ) -> tuple[list[tuple[int, ...]], list[int]]:
    """The cliques :func:`junction_tree` compiles for these arguments (without its virtual
    root, in its order) and each one's parent (its index in that list, −1 for a root), without
    a table or an index array: the structure of
    :meth:`tessera.estimation.maxent.ScopeModel.clique_tree`. Raises :func:`junction_tree`'s
    :class:`~tessera.errors.ResourceError` for its tables when it would."""
    sizes_t = tuple(int(s) for s in sizes)
    scopes_t = tuple(tuple(int(v) for v in sc) for sc in scopes)
    sk = _skeleton(sizes_t, scopes_t, heuristic, memory_limit, None)
    return ([tuple(c) for c in sk.cliques[1:]],
            [sk.cparent[k] - 1 for k in range(1, len(sk.cliques))])


def junction_bags(sizes: Sequence[int], scopes: Sequence[Sequence[int]], *,
                  heuristic: str = "min-fill", memory_limit: int = DEFAULT_MEMORY_LIMIT
                  ) -> list[frozenset[int]]:
    """The bags of the elimination :func:`junction_tree` compiles for these arguments (its
    cliques are the maximal ones), without a table: a set of variables lies in a clique of
    that tree iff it lies in one of these bags. Raises :func:`junction_tree`'s
    :class:`~tessera.errors.ResourceError` when it would."""
    sizes_t = tuple(int(s) for s in sizes)
    scopes_t = tuple(tuple(int(v) for v in sc) for sc in scopes)
    return [frozenset(b) for b in _bags(sizes_t, scopes_t, heuristic, memory_limit, None)[0]]


def _bags(sizes_t: tuple[int, ...], scopes_t: tuple[tuple[int, ...], ...], heuristic: str,
          memory_limit: int, order: Sequence[int] | None
          ) -> tuple[list[list[int]], list[int], list[int]]:
    """The bags, their parents and the elimination order over the variables that occur (the order
    given, else the ``heuristic``'s), refused by the memory guard."""
    covered = {v for sc in scopes_t for v in sc}
    graph = nx.Graph()
    graph.add_nodes_from(sorted(covered) if order is None else order)
    for sc in scopes_t:
        graph.add_edges_from((a, b) for i, a in enumerate(sc) for b in sc[i + 1:])

    def culprits(bag: Sequence[int]) -> str:
        return summarize("variables", [str(v) for v in bag])

    if order is None:
        cap = math.log2(max(memory_limit, 8) / 8) + REFUSE_MARGIN_BITS
        result = best_elimination_order(graph, heuristic, lambda v: math.log2(sizes_t[v]),
                                        cap=cap)
        if isinstance(result, Aborted):
            bag = result.bag
            refuse_bag([sizes_t[v] for v in bag], memory_limit, lambda: culprits(bag))
            raise AssertionError("refuse_bag always raises")  # pragma: no cover
        order = list(result.order)
    else:
        order = [int(v) for v in order]
        if len(set(order)) != len(order) or not covered <= set(order) \
                or any(not 0 <= v < len(sizes_t) for v in order):
            raise QueryError("the elimination order must list distinct variables, every "
                             "variable of the scopes among them")
    bags, parents = eliminate(graph, order)
    plan = memory_plan(sizes_t, bags)
    check_memory(plan, memory_limit, lambda: culprits(bags[plan.largest_bag]))
    return bags, parents, order


def c_order_strides(shape: Sequence[int]) -> list[int]:
    """C-order strides (in entries) of a table of ``shape``."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return out[::-1]


def _positions(starts: Sequence[int], lengths: Sequence[int]) -> slice | IntArray:
    """The flat positions of consecutive blocks (``starts``, increasing, with ``lengths``): a
    slice when they are contiguous (a view, no gather), else an index array."""
    if not starts or all(starts[i + 1] == starts[i] + lengths[i]
                         for i in range(len(starts) - 1)):
        return slice(starts[0], starts[-1] + lengths[-1]) if starts else slice(0, 0)
    idx = np.concatenate([np.arange(a, a + n, dtype=np.intp)
                          for a, n in zip(starts, lengths, strict=True)])
    idx.flags.writeable = False
    return idx


def batched_projection(
    hosts: Sequence[int],
    picks: Sequence[Sequence[int]],
    csizes: Sequence[int],
    shapes: Sequence[Sequence[int]],
    strides: Sequence[Sequence[int]],
) -> tuple[IntArray, IntArray, IntArray]:
    """For items i (a host table ``hosts[i]`` and the axes ``picks[i]`` of it): every entry e of
    the host table (C order) and the C-order index of its coordinates at those axes, for all
    items at once: (item of each row, e, index). One vectorised pass, no per-item numpy call:
    index = Σ_j ((e // stride_j) mod size_j) · (picked table's stride)_j."""
    n = np.asarray([csizes[h] for h in hosts], dtype=np.intp)
    total = int(n.sum())
    seg = np.repeat(np.arange(len(hosts), dtype=np.intp), n)
    entry = np.arange(total, dtype=np.intp) - np.repeat(np.cumsum(n) - n, n)
    width = max((len(pk) for pk in picks), default=0)
    proj = np.zeros(total, dtype=np.intp)
    if width == 0:
        return seg, entry, proj
    # per item and picked axis: host stride, axis size and the stride in the picked table
    st_rows, sz_rows, fs_rows = [], [], []
    for h, pk in zip(hosts, picks, strict=True):
        pad = width - len(pk)
        st_rows.append([strides[h][a] for a in pk] + [1] * pad)
        sz_rows.append([shapes[h][a] for a in pk] + [1] * pad)
        fs_rows.append(c_order_strides([shapes[h][a] for a in pk]) + [0] * pad)
    st = np.asarray(st_rows, dtype=np.intp)
    sz = np.asarray(sz_rows, dtype=np.intp)
    fs = np.asarray(fs_rows, dtype=np.intp)
    for j in range(width):
        proj += (entry // st[seg, j]) % sz[seg, j] * fs[seg, j]
    return seg, entry, proj


def _centre(adj: dict[int, list[int]], start: int, seen: set[int]) -> int:
    """A centre of ``start``'s component (a middle node of a longest path); marks it seen."""
    def farthest(src: int) -> tuple[int, dict[int, int]]:
        prev = {src: -1}
        queue = deque([src])
        last = src
        while queue:
            last = queue.popleft()
            for u in adj[last]:
                if u not in prev:
                    prev[u] = last
                    queue.append(u)
        return last, prev

    a, prev = farthest(start)
    seen.update(prev)
    b, prev = farthest(a)
    path = [b]
    while prev[path[-1]] != -1:
        path.append(prev[path[-1]])
    return path[len(path) // 2]
