"""Branch and bound guided by mini-bucket elimination (MBE) heuristics (docs/theory.md §3).

Problem: S = max_x Σ_q s_q q(x), s_q ≥ 0, over the value classes (atoms) of each attribute — a
weighted CSP whose functions are f_q(x) = s_q ∏_{a∈scope(q)} [x_a ∈ φ_{q,a}] (Dechter & Rish 2003;
Kask & Dechter 2001, "A general scheme for automatic generation of search heuristics from
specification dependencies").

Compilation, along a fixed variable order v_0 … v_{m-1}:

* *Relaxation to the i-bound.* A query whose scope has more than ``ibound`` variables (or whose
  table would exceed ``max_entries``) keeps only its latest variables in the order, always
  including its last one; dropping a conjunct can only raise f_q, so f'_q ≥ f_q, and f'_q stays in
  the bucket of q's last variable.
* *Bucket elimination with mini-buckets.* Each function goes to the bucket of its latest variable.
  Buckets are processed from last to first; a bucket's functions are partitioned into mini-buckets
  of ≤ ``ibound`` variables (and ≤ ``max_entries`` table cells), and each mini-bucket's sum is
  max-marginalised over the bucket variable separately, giving a message λ to the bucket of its
  latest remaining variable. Since max_v Σ_j F_j ≤ Σ_j max_v F_j, by induction from the last
  bucket down, for every prefix assignment x_{<p}

      max_{x_{≥p}} Σ_{q: last(q) ≥ p} f_q(x) ≤ h_p(x_{<p}) = Σ_{λ: src(λ) ≥ p > dst(λ)} λ(x_{<p}),

  an admissible heuristic (empty-scope messages have dst = −1, i.e. are constants).

Search: best-first over the same order. A node fixes x_{<p}; g = Σ_{q: last(q) < p} f_q(x) is
exact (the real queries, not their relaxation), and g + h_p bounds every completion. Children are
scored for all atoms of v_p at once: h_{p+1} = h_p − Σ_{src(λ)=p} λ(x_{<p}) + Σ_{dst(λ)=p}
λ(x_{<p}, ·). At depth m, h = 0 and g is the exact value. The incumbent comes from the coordinate
ascent of :mod:`.branch_bound`; the anytime bound is max(incumbent, top of the heap), which only
decreases.

Optional moment matching (Flerova et al.): within a bucket, each mini-bucket F_j is shifted by
μ̄ − μ_j, μ_j its max-marginal on the bucket variable; the shifts sum to 0, so Σ_j F_j and every
bound above are unchanged in validity. Measured looser at i ≥ 3 on random Adult workloads, so off.

Numerics: with integral scores (and no moment matching) all sums are exact in float64, and
pruning at f ≤ incumbent + ½ is exact since the maximum is an integer (with moment matching the
tables are fractional but their rounding error, ≤ K·eps·Σs, is far below ½). Otherwise pruning
keeps a margin τ = 4(n + K + 1)·eps·Σs (n queries, K tables; every table entry is ≤ Σs) and the
reported bound adds 2τ.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.overlap.branch_bound import (
    ActivePart,
    Component,
    HeuristicCompiler,
    PointSolution,
    active_part,
    build_component,
    incumbent,
    independent_parts,
    owner_bound,
)
from tessera.schema.domain import Domain
from tessera.workload.query import Query

_EPS = float(np.finfo(np.float64).eps)
#: Largest mini-bucket table (cells).
MAX_ENTRIES = 1 << 20


@dataclass(frozen=True, eq=False)
class Message:
    """λ(x_vars) sent from bucket ``src`` to bucket ``dst`` (the latest of ``vars``, or −1)."""

    src: int
    dst: int
    vars: tuple[int, ...]  # ascending order positions; ``table`` axes in this order
    table: npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class MiniBucketHeuristic:
    """The compiled messages along ``order`` (component positions), with the root bound."""

    order: tuple[int, ...]
    messages: tuple[Message, ...]
    root: float
    n_tables: int

    def __post_init__(self) -> None:
        m = len(self.order)
        object.__setattr__(self, "_into", tuple(
            tuple(mm for mm in self.messages if mm.dst == p) for p in range(m)))
        object.__setattr__(self, "_out_of", tuple(
            tuple(mm for mm in self.messages if mm.src == p) for p in range(m)))

    def step(
        self, h: float, x: npt.NDArray[np.int64], p: int, n_atoms: int
    ) -> npt.NDArray[np.float64]:
        """h_{p+1}(x_{<p}, c) for every atom c of v_p, from h = h_p(x_{<p}) (x indexed by order
        position): h_p − Σ_{src(λ)=p} λ(x_{<p}) + Σ_{dst(λ)=p} λ(x_{<p}, c)."""
        out = np.full(n_atoms, h)
        for msg in self._out_of[p]:  # type: ignore[attr-defined]
            out -= float(msg.table[tuple(x[list(msg.vars)])])
        for msg in self._into[p]:  # type: ignore[attr-defined]
            out += msg.table[tuple(x[list(msg.vars[:-1])])]
        return out


def _query_groups(
    sizes: Sequence[int], scope: npt.NDArray[np.bool_], ibound: int, max_entries: int,
) -> dict[tuple[int, ...], npt.NDArray[np.int64]]:
    """Queries by relaxed scope S'_q: their latest ≤ ``ibound`` variables (≤ ``max_entries``
    cells), always including the last one."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for q in range(scope.shape[0]):
        kept: list[int] = []
        cells = 1
        for v in np.flatnonzero(scope[q])[::-1]:  # latest first: the last variable is always kept
            if kept and (len(kept) >= ibound or cells * sizes[v] > max_entries):
                break
            kept.append(int(v))
            cells *= sizes[v]
        groups.setdefault(tuple(sorted(kept)), []).append(q)
    return {vs: np.asarray(qs, dtype=np.int64) for vs, qs in groups.items()}


def _query_table(
    member: Sequence[npt.NDArray[np.bool_]], s: npt.NDArray[np.float64], vs: tuple[int, ...],
    qa: npt.NDArray[np.int64],
) -> npt.NDArray[np.float64]:
    """Σ_{q∈qa} s_q ∏_{v∈vs} [x_v ∈ φ_{q,v}] as a table over ``vs``."""
    # row-wise outer products (Khatri–Rao) of the first and second half of the scope,
    # contracted over the group's queries by one matrix product
    half = (len(vs) + 1) // 2
    left = s[qa, None] * _khatri_rao([member[v][:, qa].T for v in vs[:half]])
    if len(vs) > 1:
        cur = left.T @ _khatri_rao([member[v][:, qa].T for v in vs[half:]])
    else:
        cur = left.sum(axis=0)
    return cur.reshape([member[v].shape[0] for v in vs])


def _khatri_rao(mats: Sequence[npt.NDArray[np.bool_]]) -> npt.NDArray[np.float64]:
    """Row-wise outer product: (nq, A_1) … (nq, A_k) → (nq, A_1·…·A_k), C order."""
    out = mats[0].astype(np.float64)
    for mm in mats[1:]:
        out = (out[:, :, None] * mm[:, None, :]).reshape(len(out), -1)
    return out


def _broadcast(table: npt.NDArray[np.float64], vs: tuple[int, ...],
               union: tuple[int, ...]) -> npt.NDArray[np.float64]:
    """``table`` over ``vs`` viewed with axes ``union`` (size-1 axes for the missing ones)."""
    shape = [table.shape[vs.index(u)] if u in vs else 1 for u in union]
    return table.reshape(shape)


def compile_heuristic(
    comp: Component, order: Sequence[int], ibound: int = 3, max_entries: int = MAX_ENTRIES,
    moment_matching: bool = False, deadline: float = math.inf,
) -> MiniBucketHeuristic | None:
    """Mini-bucket elimination along ``order`` (component positions; see the module docstring);
    ``None`` if ``time.monotonic()`` passes ``deadline`` first (checked between buckets: a
    partly compiled heuristic bounds nothing)."""
    order = tuple(int(a) for a in order)
    member = [comp.member[a] for a in order]
    scope = comp.scope[:, list(order)]
    sizes = [mm.shape[0] for mm in member]
    if ibound < 1:
        raise ValueError("the i-bound must be at least 1")
    if time.monotonic() > deadline:
        return None
    groups = _query_groups(sizes, scope, ibound, max_entries)
    buckets: list[list[tuple[tuple[int, ...], npt.NDArray[np.float64]]]] = [[] for _ in order]
    messages: list[Message] = []
    n_tables = len(groups)
    for v in range(len(order) - 1, -1, -1):
        if time.monotonic() > deadline:
            return None
        # query tables are built bucket by bucket and dropped after it: memory is one bucket's
        funcs = buckets[v] + [(vs, _query_table(member, comp.s, vs, qa))
                              for vs, qa in groups.items() if vs[-1] == v]
        buckets[v] = []
        funcs.sort(key=lambda f: -len(f[0]))
        minis: list[tuple[set[int], list[tuple[tuple[int, ...], npt.NDArray[np.float64]]]]] = []
        for vs, tab in funcs:
            for union, members in minis:
                new = union | set(vs)
                if len(new) <= ibound and math.prod(sizes[u] for u in new) <= max_entries:
                    union |= new
                    members.append((vs, tab))
                    break
            else:
                minis.append((set(vs), [(vs, tab)]))
        sums: list[tuple[tuple[int, ...], npt.NDArray[np.float64]]] = []
        for union_set, members in minis:
            union = tuple(sorted(union_set))
            if len(members) == 1:
                total = members[0][1]  # its scope is the union: no copy needed
            else:
                total = np.zeros([sizes[u] for u in union])
                for vs, tab in members:
                    total += _broadcast(tab, vs, union)
            sums.append((union, total))
        if moment_matching and len(sums) > 1:
            # max-marginals μ_j(x_v) of the mini-buckets; shifting F_j by μ̄ − μ_j (Σ_j shifts
            # = 0, so Σ_j F_j is unchanged) equalises them and tightens Σ_j max F_j
            mus = [tab.reshape(-1, sizes[v]).max(axis=0) for _, tab in sums]
            mean = np.mean(mus, axis=0)
            sums = [(u, tab + (mean - mu)) for (u, tab), mu in zip(sums, mus)]
        for union, total in sums:
            msg = total.max(axis=-1)  # v is the latest variable of the union: the last axis
            rest = union[:-1]
            dst = rest[-1] if rest else -1
            messages.append(Message(v, dst, rest, msg))
            if rest:
                buckets[dst].append((rest, msg))
            n_tables += 1
    root = float(sum(float(m.table) for m in messages if m.dst == -1))
    return MiniBucketHeuristic(order, tuple(messages), root, n_tables)


def _search(
    comp: Component, heur: MiniBucketHeuristic, deadline: float, restarts: int, seed: int,
) -> tuple[float, float, bool, npt.NDArray[np.int64], int]:
    """Best-first search along ``heur.order``; returns (lower, upper, exact, x, nodes)."""
    order = heur.order
    m = len(order)
    member = [comp.member[a] for a in order]
    scope = comp.scope[:, list(order)]
    s = comp.s
    total = float(s.sum())
    integral = bool(np.all(s == np.round(s))) and total < 2.0**52
    tol = 0.5 if integral else 4.0 * (len(s) + heur.n_tables + 1) * _EPS * max(total, 1e-300)
    last = (m - 1 - np.argmax(scope[:, ::-1], axis=1)) if len(s) else np.zeros(0, np.int64)
    resolve = [np.flatnonzero(last == p) for p in range(m)]
    resolve_mem = [member[p][:, resolve[p]].astype(np.float64) for p in range(m)]
    best, x_comp = incumbent(comp, restarts, seed)
    best_x = np.asarray([x_comp[a] for a in order], dtype=np.int64)
    # open nodes keep their prefix as bytes: millions of small arrays cost seconds to free
    heap: list[tuple[float, int, int, float, float, bytes]] = [
        (-heur.root, 0, 0, 0.0, heur.root, np.zeros(m, dtype=np.int64).tobytes())
    ]
    counter, nodes = 1, 0
    while heap:
        if time.monotonic() > deadline:
            upper = max(best, -heap[0][0])
            return best, upper + (0.0 if integral else 2 * tol), False, best_x, nodes
        neg_f, neg_p, _, g, h, x_bytes = heapq.heappop(heap)
        if -neg_f <= best + tol:
            break  # best-first: no open node can beat the incumbent
        p = -neg_p
        nodes += 1
        x = np.frombuffer(x_bytes, dtype=np.int64).copy()
        qs = resolve[p]
        ok = s[qs].copy()
        for u in range(p):  # queries ending at v_p that the prefix keeps alive
            ok *= member[u][x[u], qs]
        g_child = g + resolve_mem[p] @ ok
        h_child = heur.step(h, x, p, member[p].shape[0])
        f = g_child + h_child
        if p + 1 == m:
            c = int(np.argmax(g_child))
            if g_child[c] > best:
                best = float(g_child[c])
                best_x = x.copy()
                best_x[p] = c
            continue
        keep = np.flatnonzero(f > best + tol)
        children = np.repeat(x[None, :], len(keep), axis=0)
        children[:, p] = keep
        for c, child in zip(keep.tolist(), children):
            heapq.heappush(heap, (-float(f[c]), -(p + 1), counter, float(g_child[c]),
                                  float(h_child[c]), child.tobytes()))
            counter += 1
    upper = best + (0.0 if integral else 2 * tol)
    return best, upper, True, best_x, nodes


def variable_order(comp: Component, how: str = "atoms") -> list[int]:
    """A branching order of the component's positions.

    ``"atoms"``: fewest value classes first (the cheap variables are branched on first and the
    large tables are eliminated first); ``"score"``: the component's own (most-constrained first).
    """
    m = len(comp.atoms)
    if how == "score":
        return list(range(m))
    return sorted(range(m), key=lambda a: (comp.atoms[a].n_atoms, a))


def mini_bucket_heuristic(ibound: int = 3, moment_matching: bool = False) -> HeuristicCompiler:
    """The mini-bucket heuristic of i-bound ``ibound`` along the branching order, as the node
    bound :func:`~.branch_bound.max_point` takes (``heuristic=``)."""

    def compiled(comp: Component, deadline: float) -> MiniBucketHeuristic | None:
        return compile_heuristic(comp, range(len(comp.atoms)), ibound,
                                 moment_matching=moment_matching, deadline=deadline)

    return compiled


def mbe_point(
    domain: Domain,
    queries: Sequence[Query],
    scores: npt.ArrayLike,
    *,
    time_limit: float | None = None,
    ibound: int = 3,
    max_entries: int = MAX_ENTRIES,
    order: str = "score",
    moment_matching: bool = False,
    restarts: int = 8,
    seed: int = 0,
    part: ActivePart | None = None,
) -> PointSolution:
    """max_x Σ_q s_q q(x) (s ≥ 0) by MBE-guided branch and bound: exact unless ``time_limit``
    runs out, then ``upper`` is the proven anytime bound.

    The time limit covers compilation: when the heuristic is not compiled in time, the answer is
    the coordinate-ascent row and the owner bound (:func:`~.branch_bound.owner_bound`). ``part``
    is :func:`~.branch_bound.active_part` of the same arguments, when the caller has it.
    """
    deadline = time.monotonic() + (math.inf if time_limit is None else float(time_limit))
    part = active_part(domain, queries, scores) if part is None else part
    constant, atoms, scopes = part.constant, part.atoms, part.scopes
    act_queries = [queries[i] for i in part.active]
    act_s = part.scores[part.active]
    x_codes = [0] * len(domain)
    lower, upper, exact, nodes = constant, constant, True, 0
    for cols, local in independent_parts(atoms, len(act_queries), scopes):
        comp = build_component(local, np.arange(len(cols), dtype=np.int64), act_s[cols])
        heur = compile_heuristic(comp, variable_order(comp, order), ibound, max_entries,
                                 moment_matching, deadline)
        if heur is None:  # out of time before the heuristic was ready: one ascent, no restarts
            lo, xc = incumbent(comp, 0, seed)
            lower += lo
            upper += max(lo, owner_bound(comp))
            exact = False
            for j, at in enumerate(comp.atoms):
                x_codes[at.position] = int(at.representative[xc[j]])
            continue
        lo, up, ex, xo, nn = _search(comp, heur, deadline, restarts, seed)
        lower += lo
        upper += up
        exact = exact and ex
        nodes += nn
        for p, a in enumerate(heur.order):
            at = comp.atoms[a]
            x_codes[at.position] = int(at.representative[xo[p]])
    return PointSolution(lower, max(upper, lower), exact, tuple(x_codes), nodes)
