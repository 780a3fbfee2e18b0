"""Rows whose marginals match a model's: a local search after the rounding (docs/theory.md §5,
"Rows").

n rows drawn from a model P (:func:`tessera.estimation.rows.rows_from_cliques`) have marginals
close to n·P's, but not equal: every cell count is an integer, and for a scope that cuts across
a large clique the systematic sampling's rounding errors add up (NLTCS, ε = 10: the rows' 3-way
marginals were 1.5× farther from the data than the model's own). Given the scopes s_1 … s_k
whose marginals matter (the workload's) and their targets T_s = n·P(x_s), this module lowers

    D(R) = Σ_s ‖C_s(R) − T_s‖₁,   C_s(R) = the cell counts of the rows R over s,

by changing single values: row r's attribute a from u to v moves one unit of every scope
s ∋ a from the cell of (x_r, a = u) to the cell of (x_r, a = v), so with E_s = C_s − T_s the
change of D is exactly

    Δ(r, a, v) = Σ_{s∋a} [ |E_s[c_v] + 1| − |E_s[c_v]| + |E_s[c_u] − 1| − |E_s[c_u]| ].

A *pass* visits every attribute a in random order; for a it evaluates Δ for every row (or a
random sample of ``sample`` rows: the cost of a step is rows × values × scopes ∋ a) and value
(vectorised), and applies at once the ⌈f_a · m⌉ most negative of the m improving moves (one per
row); the batch is kept only if the exact D over the scopes ∋ a fell, else undone and retried
with f_a/4 (moves of one batch interact through shared cells: the check makes every kept batch
a descent step, so D never rises); a kept batch grows f_a by 1.5. It stops after ``passes``
passes or when a pass lowers D by less than ``tolerance`` relative.

The rows keep their number and stay in the domain; nothing but the model's public marginals is
read: post-processing, no privacy cost. The search is local: D is not driven to its minimum
(its floor is the targets' own fractional parts), only lowered.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["PolishResult", "polish"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Scope = tuple[int, ...]


@dataclass(frozen=True, eq=False)
class PolishResult:
    """The polished rows (shape (n, d)) and D before the search and after each pass."""

    rows: IntArray
    before: float
    history: tuple[float, ...]

    @property
    def after(self) -> float:
        return self.history[-1] if self.history else self.before

    @property
    def passes(self) -> int:
        return len(self.history)


def polish(rows: npt.ArrayLike, sizes: Sequence[int], scopes: Sequence[Scope],
           targets: Sequence[FloatArray], rng: np.random.Generator, *, passes: int = 20,
           tolerance: float = 1e-3, sample: int | None = None) -> PolishResult:
    """Lower Σ_s ‖C_s(rows) − targets[s]‖₁ by single-value changes (module docstring).

    ``rows``: codes, shape (n, d); ``scopes[k]`` attribute indices in increasing order,
    ``targets[k]`` the wanted counts of its cells (row-major), summing to n. ``rng``:
    post-processing randomness (the attributes' order, the rows sampled). ``sample``: the
    moves of a step are sought among that many rows drawn without replacement (None: all)."""
    x = np.array(rows, dtype=np.int64, copy=True)
    n, d = x.shape
    sizes = [int(v) for v in sizes]
    if len(scopes) != len(targets):
        raise ValueError("one target per scope")
    strides: list[dict[int, int]] = []
    keys: list[IntArray] = []
    err: list[FloatArray] = []
    holding: dict[int, list[int]] = {}
    for k, (s, t) in enumerate(zip(scopes, targets, strict=True)):
        shape = [sizes[a] for a in s]
        if list(s) != sorted(set(s)) or np.asarray(t).size != math.prod(shape):
            raise ValueError(f"scope {s}: attributes must be increasing, target of its cells")
        st = {a: int(math.prod(shape[i + 1:])) for i, a in enumerate(s)}
        strides.append(st)
        key = np.zeros(n, dtype=np.int64)
        for a in s:
            key += x[:, a] * st[a]
        keys.append(key)
        err.append(np.bincount(key, minlength=math.prod(shape)) - np.asarray(t, dtype=float))
        for a in s:
            holding.setdefault(a, []).append(k)
    before = float(sum(np.abs(e).sum() for e in err))
    total = before
    share = dict.fromkeys(holding, 0.02)
    history: list[float] = []
    for _ in range(passes):
        start = total
        for a in rng.permutation(sorted(holding)).tolist():
            subset = None if sample is None or sample >= n else \
                np.sort(rng.choice(n, size=sample, replace=False))
            total += _attribute_step(a, x, sizes[a], holding[a], strides, keys, err, share,
                                     subset)
        history.append(total)
        if start - total <= tolerance * max(start, 1e-300):
            break
    return PolishResult(x, before, tuple(history))


def _attribute_step(a: int, x: IntArray, size: int, ks: list[int],
                    strides: list[dict[int, int]], keys: list[IntArray], err: list[FloatArray],
                    share: dict[int, float], rows: IntArray | None) -> float:
    """One batch of moves on attribute a (module docstring) among ``rows`` (None: all);
    returns the change of D (≤ 0). Updates x, keys, err and share[a] in place."""
    u = x[:, a] if rows is None else x[rows, a]
    n = u.size
    leave = np.zeros(n)  # the change of D from leaving the current cells
    enter = np.zeros((n, size))  # ... from entering the cell with a = v
    values = np.arange(size)
    here = []
    bases = []
    for k in ks:
        e, st = err[k], strides[k][a]
        key = keys[k] if rows is None else keys[k][rows]
        abs_e = np.abs(e)
        leave += (np.abs(e - 1.0) - abs_e)[key]  # per cell first (a few cells), then gathered
        base = key - u * st
        here.append(key)
        bases.append(base)
        enter += (np.abs(e + 1.0) - abs_e)[base[:, None] + values * st]
    delta = enter + leave[:, None]
    delta[np.arange(n), u] = 0.0
    v = np.argmin(delta, axis=1)
    best = delta[np.arange(n), v]
    improving = np.flatnonzero(best < -1e-9)
    if improving.size == 0:
        return 0.0
    order = improving[np.argsort(best[improving], kind="stable")]
    old_l1 = sum(float(np.abs(err[k]).sum()) for k in ks)
    while True:
        take = max(1, math.ceil(share[a] * order.size))
        chosen = order[:take]
        new_v = v[chosen]
        moved = []
        for k, key, base in zip(ks, here, bases, strict=True):
            e = err[k]
            change = (np.bincount(base[chosen] + new_v * strides[k][a], minlength=e.size)
                      - np.bincount(key[chosen], minlength=e.size))
            e += change
            moved.append(change)
        new_l1 = sum(float(np.abs(err[k]).sum()) for k in ks)
        if new_l1 < old_l1:
            break
        for k, change in zip(ks, moved, strict=True):  # the moves undid each other: undo
            err[k] -= change
        if take == 1:
            return 0.0
        share[a] /= 4  # and try a smaller batch
    at = chosen if rows is None else rows[chosen]
    for k, base in zip(ks, bases, strict=True):
        keys[k][at] = base[chosen] + new_v * strides[k][a]
    x[at, a] = new_v
    share[a] = min(1.0, share[a] * 1.5)
    return new_l1 - old_l1
