"""The dynamic program: variable elimination over the buckets of a tree decomposition
(docs/theory.md §4).

For an elimination order π of the compiled variables, step t eliminates v = π_t. Its bucket
table lives on the bag X_t = {v} ∪ N⁺(v) (axes sorted by elimination position, v first):

    B_t = ⊗ {factors whose first-eliminated variable is v} ⊗ ⊗ {messages of the children of t}
    m_t = ⊕_v B_t                              (a table over X_t ∖ {v}, sent to the parent)

with (⊕, ⊗) one of the semirings of :mod:`tessera.engine.semiring`. The messages of the roots
(empty separators; one per connected component) multiply to the answer: max_x Σ_f θ_f f(x) in
max-plus, log Z in log-sum-product. Tables are dense numpy arrays; ⊗ is broadcasting addition.

From the kept bucket tables:

* **argmax** (max-plus): walking π backwards, v takes argmax_v B_t(v, x_sep) given the already
  chosen separator values; standard VE decoding, exact.
* **perfect sampling** (Ghazi et al. §6): walking π backwards, v ~ exp(B_t(v, x_sep) − m_t(x_sep)).
  The product of these conditionals telescopes to exp(Σ log φ)/Z: exact Gibbs samples. All m rows
  are drawn together: one gather and one comparison with uniforms per step (vectorised over rows).
* **marginals / expectations** (beyond the paper): a downward pass computes the outside message
  O_c = ⊕_{X_t ∖ X_c⁻} (B_t ⊗ O_t ⊘ m_c) for each child c of t ("⊘" is subtraction in log space,
  with −∞ ⊘ −∞ := −∞ where the message vanishes); the belief B_t ⊗ O_t is the bag's marginal
  times Z. E[f] sums f's evaluation factor against the marginal of its bag.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tessera.engine.semiring import LOG_SUM_PRODUCT, MAX_PLUS, FloatArray, Semiring, logsumexp

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class FactorPlacement:
    """Where a factor table (axes in its own scope order) goes in a bag."""

    perm: tuple[int, ...]  # transpose into bag (position) order
    shape: tuple[int, ...]  # broadcast shape in the bag (1 where the variable is absent)
    axes_absent: tuple[int, ...]  # bag axes not in the factor's scope


@dataclass(frozen=True)
class Program:
    """The compiled elimination: bags, parents, factor placement. Independent of θ."""

    sizes: tuple[int, ...]
    order: tuple[int, ...]
    bags: tuple[tuple[int, ...], ...]
    parent: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]
    factor_step: tuple[int, ...]
    factor_placement: tuple[FactorPlacement, ...]
    message_shape: tuple[tuple[int, ...], ...]  # shape of m_t inside the parent's bag

    @staticmethod
    def build(
        sizes: Sequence[int],
        scopes: Sequence[Sequence[int]],
        order: Sequence[int],
        bags: Sequence[Sequence[int]],
        parents: Sequence[int],
    ) -> Program:
        position = {v: i for i, v in enumerate(order)}
        children: list[list[int]] = [[] for _ in order]
        for t, p in enumerate(parents):
            if p >= 0:
                children[p].append(t)
        steps, placements = [], []
        for sc in scopes:
            t = min(position[v] for v in sc)
            bag = bags[t]
            perm = tuple(sorted(range(len(sc)), key=lambda i: position[sc[i]]))
            inside = set(sc)
            shape = tuple(sizes[u] if u in inside else 1 for u in bag)
            absent = tuple(i for i, u in enumerate(bag) if u not in inside)
            steps.append(t)
            placements.append(FactorPlacement(perm, shape, absent))
        message_shape = []
        for t, p in enumerate(parents):
            sep = set(bags[t][1:])
            message_shape.append(
                tuple(sizes[u] if u in sep else 1 for u in bags[p]) if p >= 0 else ()
            )
        return Program(
            tuple(sizes), tuple(order), tuple(tuple(b) for b in bags), tuple(parents),
            tuple(tuple(c) for c in children), tuple(steps), tuple(placements),
            tuple(message_shape),
        )

    def bag_shape(self, t: int) -> tuple[int, ...]:
        return tuple(self.sizes[u] for u in self.bags[t])

    # -- upward pass -------------------------------------------------------------------------
    def forward(self, tables: Sequence[FloatArray], semiring: Semiring) -> Forward:
        """Bucket tables B_t and messages m_t for the log-potential ``tables`` of the factors."""
        at_step: list[list[int]] = [[] for _ in self.order]
        for g, t in enumerate(self.factor_step):
            at_step[t].append(g)
        buckets: list[FloatArray] = []
        messages: list[FloatArray] = []
        for t in range(len(self.order)):
            acc = np.zeros(self.bag_shape(t))
            for g in at_step[t]:
                lay = self.factor_placement[g]
                acc += np.transpose(tables[g], lay.perm).reshape(lay.shape)
            for c in self.children[t]:
                acc += messages[c].reshape(self.message_shape[c])
            buckets.append(acc)
            messages.append(semiring.reduce(acc, 0))
        roots = [t for t, p in enumerate(self.parent) if p < 0]
        total = float(sum(float(messages[t]) for t in roots))
        return Forward(semiring, buckets, messages, roots, total)

    # -- decoding ----------------------------------------------------------------------------
    def argmax(self, fwd: Forward) -> IntArray:
        """A maximising assignment of the compiled variables (max-plus forward pass)."""
        if fwd.semiring is not MAX_PLUS:
            raise ValueError("argmax needs a max-plus forward pass")
        x = np.zeros(len(self.sizes), dtype=np.int64)
        for t in reversed(range(len(self.order))):
            bag = self.bags[t]
            column = fwd.buckets[t][(slice(None), *(int(x[u]) for u in bag[1:]))]
            x[bag[0]] = int(np.argmax(column))
        return x

    def sampler(self, fwd: Forward) -> Sampler:
        """Per-step conditional CDFs P(v ≤ k | x_sep), from a sum-product forward pass."""
        if fwd.semiring is not LOG_SUM_PRODUCT:
            raise ValueError("sampling needs a log-sum-product forward pass")
        if not math.isfinite(fwd.total):
            raise ValueError("the distribution is empty (every point has probability 0)")
        cdfs = []
        for t in range(len(self.order)):
            b = fwd.buckets[t]
            b2 = b.reshape(b.shape[0], -1)
            m = fwd.messages[t].reshape(1, -1)
            with np.errstate(invalid="ignore"):
                p = np.exp(np.where(np.isfinite(m), b2 - m, -np.inf))
            cdf = np.cumsum(p, axis=0)
            last = cdf[-1:]
            cdf = np.divide(cdf, last, out=np.ones_like(cdf), where=last > 0)
            cdfs.append(cdf[:-1])  # P(v ≤ k), k < |v| − 1
        return Sampler(self, tuple(cdfs))

    # -- downward pass -----------------------------------------------------------------------
    def beliefs(self, fwd: Forward) -> list[FloatArray]:
        """log P(x_bag) per bag (normalised per connected component), sum-product only."""
        if fwd.semiring is not LOG_SUM_PRODUCT:
            raise ValueError("marginals need a log-sum-product forward pass")
        n = len(self.order)
        outside: list[FloatArray | None] = [None] * n
        beliefs: list[FloatArray] = [np.empty(0)] * n
        root_of = [0] * n
        for t in reversed(range(n)):
            p = self.parent[t]
            if p < 0:
                outside[t] = np.zeros(self.bag_shape(t)[1:])
                root_of[t] = t
            else:
                root_of[t] = root_of[p]
            full = fwd.buckets[t] + outside[t].reshape((1, *outside[t].shape))  # type: ignore[union-attr]
            log_z = float(fwd.messages[root_of[t]])
            beliefs[t] = full - log_z
            for c in self.children[t]:
                msg = fwd.messages[c].reshape(self.message_shape[c])
                with np.errstate(invalid="ignore"):
                    div = np.where(np.isneginf(msg), -np.inf, full - msg)
                sep = set(self.bags[c][1:])
                axes = tuple(i for i, u in enumerate(self.bags[t]) if u not in sep)
                outside[c] = logsumexp(div, axes) if axes else div
        return beliefs

    def factor_marginal(self, beliefs: Sequence[FloatArray], g: int) -> FloatArray:
        """P over factor g's scope, axes in the factor's own order (flattened C order)."""
        t = self.factor_step[g]
        lay = self.factor_placement[g]
        marg = logsumexp(beliefs[t], lay.axes_absent) if lay.axes_absent else beliefs[t]
        inverse = np.argsort(lay.perm)
        return np.exp(np.transpose(marg, inverse))


@dataclass
class Forward:
    """Result of an upward pass: bucket tables, messages and the total (max or log Z)."""

    semiring: Semiring
    buckets: list[FloatArray]
    messages: list[FloatArray]
    roots: list[int]
    total: float


@dataclass(frozen=True)
class Sampler:
    """Vectorised ancestral sampling along the reversed elimination order."""

    program: Program
    cdfs: tuple[FloatArray, ...]

    def sample(self, m: int, rng: np.random.Generator) -> npt.NDArray[np.integer]:
        """m i.i.d. assignments of the compiled variables, shape (n_variables, m)."""
        prog = self.program
        dtype = _small_int(max(prog.sizes, default=1))
        x = np.zeros((len(prog.sizes), m), dtype=dtype)
        for t in reversed(range(len(prog.order))):
            bag = prog.bags[t]
            cdf = self.cdfs[t]
            if cdf.shape[0] == 0:  # a variable with one value
                continue
            if len(bag) == 1:
                idx = np.zeros(m, dtype=np.int64)
            else:
                shape = [prog.sizes[u] for u in bag[1:]]
                idx = x[bag[-1]].astype(np.int64)
                stride = shape[-1]
                for u, s in zip(reversed(bag[1:-1]), reversed(shape[:-1]), strict=True):
                    idx = idx + stride * x[u].astype(np.int64)
                    stride *= s
            u = rng.random(m)
            if cdf.shape[0] == 1:
                x[bag[0]] = cdf[0, idx] < u
            else:
                x[bag[0]] = (cdf[:, idx] < u).sum(axis=0)
        return x


def _small_int(n_values: int) -> type[np.integer]:
    for dt in (np.int8, np.int16, np.int32):
        if n_values <= np.iinfo(dt).max + 1:
            return dt
    return np.int64
