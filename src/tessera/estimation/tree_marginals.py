"""P(x_s) for any set of variables s from the calibrated clique marginals of a junction tree
(docs/theory.md §4.7, §10.5), without compiling a new tree.

A junction tree's clique marginals determine the distribution (Lauritzen, *Graphical Models*,
1996, §3.2; Koller & Friedman, *Probabilistic Graphical Models*, 2009, Thm. 10.4): for any
connected subtree T (with the running-intersection property),

    P(x_{∪_{C∈T} C}) = Π_{C∈T} P(x_C) / Π_{C∈T, C≠root(T)} P(x_{S_C}),   S_C = C ∩ parent(C).

Pick, for every variable of s, one clique that holds it; T is the union of their paths to the
root of the forest (a virtual empty clique joins the trees, separators ∅, P(∅) = 1: different
trees are independent). Summing the product over every variable of T not in s, children before
parents, gives P(x_s): each clique C multiplies P(x_C)/P(x_{S_C}) (0 where P(x_{S_C}) = 0) by
its children's messages and sums out what neither its separator nor s needs — one
``numpy.einsum`` per clique, each message a table over S_C ∪ (s's variables below C).
Variables in no clique are uniform and independent of the rest.

The result is exact (the same numbers as a tree compiled with s as a scope, up to rounding:
``tests/routes/test_adaptive_route.py`` checks it against the joint on small domains).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["CALL_CELLS", "MAX_MESSAGE_CELLS", "MAX_PRODUCT_VARIABLES", "holders", "tree_cost",
           "tree_evidence", "tree_feasible", "tree_marginal"]

FloatArray = npt.NDArray[np.float64]
#: Largest message (cells) :func:`tree_marginal` builds; above it, it returns None.
MAX_MESSAGE_CELLS = 1 << 24
#: The fixed cost of one clique's product (``numpy.einsum``'s call and path search, ~40 µs
#: measured on Adult's models) in cells of its arithmetic (0.1–1 ns each), for
#: :func:`tree_cost`.
CALL_CELLS = 80_000
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: Most distinct variables in one product (``numpy.einsum``'s letters).
MAX_PRODUCT_VARIABLES = len(_LETTERS)


def holders(cliques: Sequence[tuple[tuple[int, ...], FloatArray]]) -> dict[int, int]:
    """Variable → the first clique holding it."""
    holder: dict[int, int] = {}
    for k, (variables, _) in enumerate(cliques):
        for v in variables:
            holder.setdefault(v, k)
    return holder


def _subtree(cliques: Sequence[tuple[tuple[int, ...], FloatArray]], parents: Sequence[int],
             scope: Sequence[int], holder: dict[int, int] | None = None
             ) -> tuple[dict[int, int], list[int], set[int]]:
    """(variable → the first clique holding it, the scope's variables held by a clique, the
    cliques of T: the union of those cliques' paths to their roots)."""
    holder = holders(cliques) if holder is None else holder
    inside = [v for v in scope if v in holder]
    keep: set[int] = set()
    for v in inside:
        k = holder[v]
        while k >= 0 and k not in keep:
            keep.add(k)
            k = parents[k]
    return holder, inside, keep


def tree_cost(cliques: Sequence[tuple[tuple[int, ...], FloatArray]], parents: Sequence[int],
              sizes: Sequence[int], scope: Sequence[int],
              holder: dict[int, int] | None = None) -> int:
    """The work of :func:`tree_marginal` for ``scope``, in cells: each clique C of T makes one
    product over C's variables and at most the scope's others (its children's messages hold
    their separator, inside C, and scope variables),
    Σ_{C∈T} (|X_C| · Π_{v∈scope∖C} |X_v| + :data:`CALL_CELLS`). Public (the cliques' shapes
    and the scope). ``holder``: :func:`holders` of ``cliques``, when already known."""
    _, _, keep = _subtree(cliques, parents, scope, holder)
    out = 0
    for k in keep:
        variables = set(cliques[k][0])
        out += cliques[k][1].size * math.prod(int(sizes[v]) for v in scope
                                              if v not in variables) + CALL_CELLS
    return out


def tree_feasible(cliques: Sequence[tuple[tuple[int, ...], object]], parents: Sequence[int],
                  sizes: Sequence[int], scope: Sequence[int],
                  holder: dict[int, int] | None = None) -> bool:
    """Whether :func:`tree_marginal` computes P(x_scope) rather than returning None: no message
    exceeds :data:`MAX_MESSAGE_CELLS` cells and no product names more than 52 distinct
    variables. A function of the cliques' *variables* and parents, the sizes and the scope only
    (``cliques[k]`` = (variables, anything): the tables are not read), so a caller can decide it
    for a model structure without a fitted model (:mod:`tessera.synth.answerable`,
    docs/theory.md §10.5); :func:`tree_marginal` itself decides by this function."""
    scope = tuple(int(v) for v in scope)
    holder, inside, keep = _subtree(cliques, parents, scope, holder)  # type: ignore[arg-type]
    if not inside:
        return True
    children: dict[int, list[int]] = {}
    for k in keep:
        children.setdefault(parents[k], []).append(k)
    wanted = set(inside)

    def message(k: int) -> tuple[tuple[int, ...], set[int]] | None:
        """(the variables clique k sends its parent, the scope variables below k), or None."""
        parts: list[tuple[int, ...]] = []
        here: set[int] = set()
        sep: set[int] = set()
        if k >= 0:
            variables = tuple(cliques[k][0])
            if parents[k] >= 0:
                sep = set(variables) & set(cliques[parents[k]][0])
            parts.append(variables)
            here = set(variables)
        sub = wanted & here
        for c in sorted(children.get(k, ())):
            got = message(c)
            if got is None:
                return None
            parts.append(got[0])
            sub |= got[1]
        out = tuple(sorted(sep | sub))
        if math.prod(sizes[v] for v in out) > MAX_MESSAGE_CELLS:
            return None
        if len({v for vs in parts for v in vs}) > MAX_PRODUCT_VARIABLES:
            return None
        return out, sub

    return message(-1) is not None


def tree_marginal(cliques: Sequence[tuple[tuple[int, ...], FloatArray]],
                  parents: Sequence[int], sizes: Sequence[int], scope: Sequence[int],
                  holder: dict[int, int] | None = None) -> FloatArray | None:
    """P(x_scope) (``scope``'s order, flat row-major) from clique marginals (module docs):
    ``cliques[k]`` = (variables, P over them, axes in that order), ``parents[k]`` the index of
    k's parent or −1 for a root. None when a message would exceed :data:`MAX_MESSAGE_CELLS`
    cells or the tree needs more than 52 distinct variables in one product. ``holder``:
    :func:`holders` of ``cliques``, when already known."""
    scope = tuple(int(v) for v in scope)
    holder = holders(cliques) if holder is None else holder
    if not tree_feasible(cliques, parents, sizes, scope, holder):
        return None
    holder, inside, keep = _subtree(cliques, parents, scope, holder)
    children: dict[int, list[int]] = {}
    for k in keep:
        children.setdefault(parents[k], []).append(k)
    wanted = set(inside)
    below: dict[int, set[int]] = {}  # scope variables in k's subtree

    def message(k: int) -> tuple[tuple[int, ...], FloatArray]:
        """(variables, table) sent by clique k to its parent (k = −1: the final marginal);
        within the limits (:func:`tree_feasible` decided it)."""
        parts: list[tuple[tuple[int, ...], FloatArray]] = []
        here: set[int] = set()
        if k >= 0:
            variables, table = cliques[k]
            sep = set(variables) & set(cliques[parents[k]][0]) if parents[k] >= 0 else set()
            axes = tuple(i for i, v in enumerate(variables) if v not in sep)
            p_sep = table.sum(axis=axes, keepdims=True) if axes else table
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(p_sep > 0, table / np.where(p_sep > 0, p_sep, 1.0), 0.0)
            parts.append((tuple(variables), ratio))
            here = set(variables)
        else:
            sep = set()
        sub = wanted & here
        for c in sorted(children.get(k, ())):
            parts.append(message(c))
            sub |= below[c]
        below[k] = sub
        out = tuple(sorted(sep | sub))
        letters: dict[int, str] = {}
        for variables, _ in parts:
            for v in variables:
                letters.setdefault(v, _LETTERS[len(letters)])
        spec = ",".join("".join(letters[v] for v in vs) for vs, _ in parts)
        spec += "->" + "".join(letters[v] for v in out)
        return out, np.einsum(spec, *(t for _, t in parts), optimize=True)

    if inside:
        variables, table = message(-1)
    else:
        variables, table = (), np.ones(())
    # the scope's variables in no clique: uniform, independent of the rest
    for v in scope:
        if v not in holder:
            table = np.multiply.outer(table, np.full(sizes[v], 1.0 / sizes[v]))
            variables = (*variables, v)
    order = [variables.index(v) for v in scope]
    return np.ascontiguousarray(np.transpose(table, order)).ravel()


def tree_evidence(cliques: Sequence[tuple[tuple[int, ...], FloatArray]],
                  parents: Sequence[int], sizes: Sequence[int],
                  evidence: dict[int, FloatArray],
                  holder: dict[int, int] | None = None) -> FloatArray:
    """Σ_x P(x) Π_v e_v[b, x_v] for every row b of the evidence (``evidence[v]``: shape
    (B, |X_v|), the same B for every v) — for 0/1 evidence the probability of a conjunction
    Π_v [x_v ∈ φ_v] — from the clique marginals (module docs) with every message over its
    separator alone: each clique of T multiplies P(x_C)/P(x_{S_C}), the evidence of the
    variables it holds first (:func:`holders`) and its children's messages, and sums out all
    but its separator (one ``numpy.einsum`` per clique, batched over b). No message exceeds a
    separator of the tree; a product names at most the clique's variables and the batch.
    Variables in no clique are uniform: their factor is the mean of e_v over X_v."""
    if not evidence:
        return np.ones(1)
    batch = next(iter(evidence.values())).shape[0]
    holder = holders(cliques) if holder is None else holder
    out = np.ones(batch)
    for v, e in evidence.items():
        if v not in holder:
            out = out * e.mean(axis=1)
    inside = [v for v in evidence if v in holder]
    if not inside:
        return out
    _, _, keep = _subtree(cliques, parents, inside, holder)
    children: dict[int, list[int]] = {}
    for k in keep:
        children.setdefault(parents[k], []).append(k)
    held: dict[int, list[int]] = {}
    for v in inside:
        held.setdefault(holder[v], []).append(v)

    def message(k: int) -> tuple[tuple[int, ...], FloatArray]:
        parts: list[tuple[tuple[int, ...], FloatArray, bool]] = []
        sep: tuple[int, ...] = ()
        if k >= 0:
            variables, table = cliques[k]
            if parents[k] >= 0:
                other = set(cliques[parents[k]][0])
                sep = tuple(v for v in variables if v in other)
            axes = tuple(i for i, v in enumerate(variables) if v not in sep)
            p_sep = table.sum(axis=axes, keepdims=True) if axes else table
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(p_sep > 0, table / np.where(p_sep > 0, p_sep, 1.0), 0.0)
            parts.append((tuple(variables), ratio, False))
            parts.extend(((v,), evidence[v], True) for v in held.get(k, ()))
        for c in sorted(children.get(k, ())):
            got = message(c)
            parts.append((got[0], got[1], True))
        letters: dict[int, str] = {}
        for variables, _, _ in parts:
            for v in variables:
                letters.setdefault(v, _LETTERS[len(letters)])
        spec = ",".join(("..." if batched else "") + "".join(letters[v] for v in vs)
                        for vs, _, batched in parts)
        spec += "->..." + "".join(letters[v] for v in sep)
        return sep, np.einsum(spec, *(t for _, t, _ in parts), optimize=True)

    _, root = message(-1)
    return out * np.broadcast_to(root, (batch,))
