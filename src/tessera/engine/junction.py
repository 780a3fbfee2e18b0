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

with a fixed number of vectorised numpy operations **per level** of the tree (no Python work
per clique or per entry): the cliques of one depth are processed together.

Layout. All clique tables live in one flat float64 vector, cliques ordered by depth (a virtual
root of empty scope first; the roots of the components are its children), each clique's entries
in C order with its *separator* variables (those shared with its parent) leading. So the entries
with one separator value are contiguous, and the message to the parent

    m_c(x_S) = log Σ_{x_C∖S} exp B_c(x_C)

is a grouped log-sum-exp over contiguous runs (max-shift, exp, sum, log). The parents' tables
receive their children's messages by one sparse 0/1 product per level (precomputed). The
downward (Hugin) pass forms each separator's calibrated belief from the parent's final table
(one gather into child-separator-major order, one grouped log-sum-exp) and adds the correction
β_S − m_c to the child's table (one ``np.repeat``). Factor tables enter their host cliques (the
smallest clique containing the scope) by one sparse 0/1 product, and the marginals leave by its
transpose applied to exp(B − log Z).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

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

__all__ = ["COMPILE_BYTES_PER_ENTRY", "JunctionTree", "check_compile", "check_junction",
           "compile_bytes", "junction_bags", "junction_compile_bytes", "junction_tree"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]

#: Peak bytes of a compilation per index entry (:attr:`_Skeleton.compile_entries`): the
#: projections' int64 arrays and their temporaries, the 0/1 maps as COO, then CSR, and the
#: transposed marginal map. Measured with tracemalloc at 65.5–72.8 B (one clique of 2^16 or
#: 2^20 entries hosting 120–560 scopes, a chain of nine 4,096-entry cliques): 80 with margin.
COMPILE_BYTES_PER_ENTRY = 80


@dataclass(frozen=True, eq=False)
class Level:
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
    #: (table entries, parameters), 0/1: clique log-potentials = this @ flat parameters
    potential_map: sp.csr_array
    #: its transpose: flat factor marginals = this @ flat clique probabilities
    marginal_map: sp.csr_array
    log_free: float  # Σ log |X_v| over variables in no scope
    width: int  # largest clique size − 1

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
        """The flat parameter vector of a list of tables (or a flat vector, checked)."""
        if isinstance(log_potentials, np.ndarray) and log_potentials.ndim == 1 \
                and log_potentials.dtype == np.float64:
            flat = log_potentials
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
            flat = np.asarray(log_potentials, dtype=np.float64).reshape(-1)
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
    def _tables(self, flat: FloatArray) -> FloatArray:
        """Clique log-potentials: Σ of the factors each clique hosts, broadcast (one sparse
        product; −∞ entries stay −∞: the map is 0/1 and no +∞ is allowed)."""
        return np.asarray(self.potential_map @ flat, dtype=np.float64)

    def _upward(self, b: FloatArray) -> FloatArray:
        """Collect: messages m_c to the parents, added into ``b`` in place; returns them."""
        msg = np.empty(self.n_messages)
        for lv in reversed(self.levels):
            m = _grouped_lse(b[lv.lo: lv.hi], lv.run, lv.run_starts, lv.runs)
            msg[lv.mlo: lv.mhi] = m
            b[lv.plo: lv.phi] += lv.up @ m
        return msg

    def _downward(self, b: FloatArray, msg: FloatArray) -> None:
        """Distribute (Hugin): every table becomes log P(x_C) + log Z, in place."""
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

    def log_partition(self, log_potentials: Sequence[npt.ArrayLike] | npt.ArrayLike) -> float:
        """log Z = log Σ_x exp(Σ_s φ_s(x_s)) (−∞ if every assignment has a −∞ entry)."""
        b = self._tables(self.flatten(log_potentials))
        self._upward(b)
        return float(b[0]) + self.log_free

    def infer(self, log_potentials: Sequence[npt.ArrayLike] | npt.ArrayLike
              ) -> tuple[float, FloatArray]:
        """(log Z, flat marginals): P(x_s) for every scope s, concatenated like the
        parameters (see :meth:`split`). One upward and one downward pass. The flat marginals
        are also the gradient of log Z with respect to the flat log-potentials (∂ log Z /
        ∂φ_s(x_s) = P(x_s)), the gradient of a maximum-entropy dual."""
        b = self._tables(self.flatten(log_potentials))
        msg = self._upward(b)
        log_z = float(b[0])
        if log_z == -np.inf:
            raise QueryError("every assignment has probability 0 (the −∞ entries exclude all)")
        self._downward(b, msg)
        b -= log_z
        p = np.exp(b, out=b)
        return log_z + self.log_free, np.asarray(self.marginal_map @ p, dtype=np.float64)

    def marginals(self, log_potentials: Sequence[npt.ArrayLike] | npt.ArrayLike
                  ) -> list[FloatArray]:
        """P(x_s) for every scope s, as tables of shape ``shapes[s]`` (each sums to 1)."""
        return self.split(self.infer(log_potentials)[1])

    def clique_marginals(self, log_potentials: Sequence[npt.ArrayLike] | npt.ArrayLike
                         ) -> list[tuple[tuple[int, ...], FloatArray]]:
        """(variables, P over them) for every clique of the tree, axes in the listed order."""
        b = self._tables(self.flatten(log_potentials))
        msg = self._upward(b)
        if b[0] == -np.inf:
            raise QueryError("every assignment has probability 0 (the −∞ entries exclude all)")
        self._downward(b, msg)
        p = np.exp(b - b[0])
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
) -> JunctionTree:
    """Compile the junction tree of P(x) ∝ exp(Σ_s φ_s(x_s)) over variables with ``sizes``,
    for factors over ``scopes`` (tuples of distinct variable indices; a scope may repeat, or be
    empty). Raises :class:`~tessera.errors.QueryError` on bad scopes and
    :class:`~tessera.errors.ResourceError` when a clique table would exceed ``memory_limit``
    bytes (docs/theory.md §4.7).

    ``order``: an elimination order to use instead of the ``heuristic``'s (it must list every
    variable of the scopes; variables it lists beyond them get cliques of their own).

    The guard also prices the compilation itself, before any array of it exists: its index
    maps hold one entry per entry of each factor's host clique and of each clique's parent
    (:attr:`_Skeleton.compile_entries`), so k factors in one clique of M entries cost k·M —
    28,699 two-way cell queries beside a width-4 Adult model asked > 23 GiB while the tables
    took 389 MiB. Refused (:func:`check_compile`) when :func:`compile_bytes` of them exceeds
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
    sk = _skeleton(sizes_t, scopes_t, heuristic, memory_limit, order)
    if compile_guard:
        check_compile(sk.compile_entries, max(sk.csizes), memory_limit)
    order, cliques, cparent, csizes = sk.order, sk.cliques, sk.cparent, sk.csizes
    nsep, by_depth, fhosts = sk.nsep, sk.by_depth, sk.fhosts
    coff = [0, *np.cumsum(csizes).tolist()]
    shape_of = [tuple(sizes_t[v] for v in c) for c in cliques]

    # -- levels ------------------------------------------------------------------------------
    cstrides = [_strides(sh) for sh in shape_of]
    cpos = [{v: i for i, v in enumerate(c)} for c in cliques]
    levels: list[Level] = []
    mpos = 0
    first = 1
    for d in range(1, len(by_depth)):
        ks = list(range(first, first + len(by_depth[d])))
        first += len(ks)
        lo, hi = coff[ks[0]], coff[ks[-1] + 1]
        plo, phi = coff[first - len(ks) - len(by_depth[d - 1])], lo  # the level above
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
        # every parent entry (per child) and the separator value it projects to
        seg, entry, proj = _batched_projection(hosts, picks, csizes, shape_of, cstrides)
        parent_entry = np.asarray([coff[p] - plo for p in hosts], dtype=np.intp)[seg] + entry
        sep_entry = np.asarray(targets, dtype=np.intp)[seg] + proj
        nsep_a = np.asarray(n_sep, dtype=np.intp)
        runs = np.repeat(np.asarray([csizes[k] for k in ks], dtype=np.intp) // nsep_a, nsep_a)
        druns = np.repeat(np.asarray([csizes[p] for p in hosts], dtype=np.intp) // nsep_a,
                          nsep_a)
        run = int(runs[0]) if runs.size and np.all(runs == runs[0]) else 0
        drun = int(druns[0]) if druns.size and np.all(druns == druns[0]) else 0
        levels.append(Level(
            lo=lo, hi=hi, plo=plo, phi=phi, mlo=mlo, mhi=mpos,
            run=run, runs=runs, run_starts=_starts(runs),
            up=_zero_one(parent_entry, sep_entry, (phi - plo, mpos - mlo)),
            # child by child, separator value major (stable: entries keep their order)
            down_gather=parent_entry[np.lexsort((proj, seg))], down_run=drun, down_runs=druns,
            down_starts=_starts(druns),
        ))

    # -- factors: hosted by the smallest clique containing their scope (_skeleton) -----------
    fpicks = [[cpos[h][v] for v in sc] for h, sc in zip(fhosts, scopes_t, strict=True)]
    seg, entry, proj = _batched_projection(fhosts, fpicks, csizes, shape_of, cstrides)
    table_entry = np.asarray([coff[h] for h in fhosts], dtype=np.intp)[seg] + entry
    param_entry = np.asarray(offsets[:-1], dtype=np.intp)[seg] + proj
    potential_map = _zero_one(table_entry, param_entry, (coff[-1], offsets[-1]))
    marginal_map = potential_map.T.tocsr()
    for lv in levels:  # the structure is frozen: so are its index arrays
        _freeze(lv.runs, lv.run_starts, lv.down_gather, lv.down_runs, lv.down_starts,
                lv.up.data, lv.up.indices, lv.up.indptr)
    _freeze(potential_map.data, potential_map.indices, potential_map.indptr,
            marginal_map.data, marginal_map.indices, marginal_map.indptr)

    occurs = set(order)
    log_free = math.fsum(math.log(sizes_t[v]) for v in range(len(sizes_t)) if v not in occurs)
    return JunctionTree(
        sizes=sizes_t, scopes=scopes_t, shapes=shapes, offsets=offsets,
        cliques=tuple(cliques), clique_parent=tuple(cparent), clique_offsets=tuple(coff),
        levels=tuple(levels), n_messages=mpos,
        potential_map=potential_map, marginal_map=marginal_map,
        log_free=log_free, width=max((len(c) for c in cliques), default=0) - 1,
    )


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

    @property
    def compile_entries(self) -> int:
        """Index entries the compilation builds beyond the tables: one per entry of a
        clique's parent table for every clique (the upward maps and downward gathers), and
        one per entry of its host clique for every factor scope (the potential and marginal
        maps): Σ_{C ≠ root} |X_parent(C)| + Σ_s |X_host(s)|. Not the tables' size: k factor
        scopes hosted by one clique of M entries cost k·M."""
        return sum(self.csizes[p] for p in self.cparent[1:]) + \
            sum(self.csizes[h] for h in self.fhosts)


def _skeleton(sizes_t: tuple[int, ...], scopes_t: tuple[tuple[int, ...], ...], heuristic: str,
              memory_limit: int, order: Sequence[int] | None) -> _Skeleton:
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
    return _Skeleton(order, cliques, cparent, csizes, nsep, by_depth, fhosts)


def compile_bytes(entries: int) -> int:
    """Bytes a junction tree's compilation peaks at for ``entries`` index entries
    (:attr:`_Skeleton.compile_entries`): :data:`COMPILE_BYTES_PER_ENTRY` each."""
    return COMPILE_BYTES_PER_ENTRY * entries


def junction_compile_bytes(sizes: Sequence[int], scopes: Sequence[Sequence[int]], *,
                           order: Sequence[int] | None = None, heuristic: str = "min-fill",
                           memory_limit: int = DEFAULT_MEMORY_LIMIT) -> int:
    """The peak bytes of compiling :func:`junction_tree` with these arguments
    (:func:`compile_bytes` of its index entries), decided without allocating an array; raises
    the tables' :class:`~tessera.errors.ResourceError` when :func:`junction_tree` would."""
    sizes_t = tuple(int(s) for s in sizes)
    scopes_t = tuple(tuple(int(v) for v in sc) for sc in scopes)
    return compile_bytes(_skeleton(sizes_t, scopes_t, heuristic, memory_limit, order)
                         .compile_entries)


def check_junction(sizes: Sequence[int], scopes: Sequence[Sequence[int]], *,
                   memory_limit: int = DEFAULT_MEMORY_LIMIT,
                   heuristic: str = "min-fill") -> None:
    """Raise :func:`junction_tree`'s :class:`~tessera.errors.ResourceError` (its tables or its
    compilation, :func:`check_compile`) exactly when it would, without allocating an array."""
    sizes_t = tuple(int(s) for s in sizes)
    scopes_t = tuple(tuple(int(v) for v in sc) for sc in scopes)
    sk = _skeleton(sizes_t, scopes_t, heuristic, memory_limit, None)
    check_compile(sk.compile_entries, max(sk.csizes), memory_limit)


def check_compile(entries: int, largest: int, limit: int) -> None:
    """Refuse (:class:`~tessera.errors.ResourceError`) a compilation of ``entries`` index
    entries (:attr:`_Skeleton.compile_entries`; ``largest``: the largest clique's entries)
    whose peak (:func:`compile_bytes`) exceeds ``limit`` bytes."""
    need = compile_bytes(entries)
    if need <= limit:
        return
    raise ResourceError(
        f"compiling the junction tree needs {format_bytes(need)} (limit "
        f"{format_bytes(limit)}): {entries:,} index entries, one per entry of each factor's "
        f"host clique (largest {largest:,} entries) and of each clique's parent",
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


def _zero_one(rows: IntArray, cols: IntArray, shape: tuple[int, int]) -> sp.csr_array:
    """The 0/1 matrix with ones at (rows[i], cols[i]) (pairs distinct), CSR."""
    data = np.ones(rows.size)
    return sp.csr_array((data, (rows, cols)), shape=shape)


def _freeze(*arrays: npt.NDArray) -> None:
    for a in arrays:
        a.flags.writeable = False


def _strides(shape: Sequence[int]) -> list[int]:
    """C-order strides (in entries) of a table of ``shape``."""
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= n
    return out[::-1]


def _batched_projection(
    hosts: Sequence[int],
    picks: Sequence[Sequence[int]],
    csizes: Sequence[int],
    shapes: Sequence[Sequence[int]],
    strides: Sequence[Sequence[int]],
) -> tuple[IntArray, IntArray, IntArray]:
    """For items i (a host table ``hosts[i]`` and the axes ``picks[i]`` of it): every entry e of
    the host table (C order) and the C-order index of its coordinates at those axes, for all
    items at once: (item of each row, e, index). One vectorised pass, no per-item numpy call."""
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
        fs_rows.append(_strides([shapes[h][a] for a in pk]) + [0] * pad)
    st = np.asarray(st_rows, dtype=np.intp)
    sz = np.asarray(sz_rows, dtype=np.intp)
    fs = np.asarray(fs_rows, dtype=np.intp)
    for j in range(width):
        proj += (entry // st[seg, j]) % sz[seg, j] * fs[seg, j]
    return seg, entry, proj


def _starts(runs: IntArray) -> IntArray:
    return np.concatenate([[0], np.cumsum(runs)[:-1]]).astype(np.intp) if runs.size \
        else np.zeros(0, dtype=np.intp)


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
