"""Synthetic rows from the calibrated clique marginals of a junction tree (docs/theory.md §5).

Given P over every clique C of a junction tree (each clique's parent listed before it), rows are
generated top-down: the root cliques' variables first, then for every clique C with separator
S = C ∩ parent(C) the variables C ∖ S of each row from P(x_{C∖S} | x_S) = P(x_C)/P(x_S). By the
running-intersection property the variables of C already assigned are exactly S, so this is
forward sampling from P (a perfect sampler).

``method="iid"`` draws each row independently: n i.i.d. rows from P. ``method="rounding"``
(the default for synthetic data, in the spirit of Private-PGM's rounding ``synthetic_data``,
McKenna et al. 2019) splits the n_g rows that share a separator value g by *systematic
sampling*: value v gets ⌊n_g P(v | g)⌋ or ⌈n_g P(v | g)⌉ rows (in expectation exactly
n_g P(v | g)), assigned to the group's rows in random order. Every group's conditional counts
are within 1 of their expectation, so the marginals of the output are much closer to P's than
those of n i.i.d. rows (whose error is of order √n per cell). Both
are post-processing of the model: no sensitive value is read, and the randomness (a numpy
``Generator``) needs no secure source.

>>> import numpy as np
>>> cliques = [((0, 1), np.array([[0.4, 0.1], [0.1, 0.4]]))]
>>> x = rows_from_cliques(cliques, [-1], [2, 2], 100, np.random.default_rng(0))
>>> np.bincount(x[:, 0] * 2 + x[:, 1], minlength=4).tolist()
[40, 10, 10, 40]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = ["rows_from_cliques"]

Method = Literal["rounding", "iid"]
FloatArray = npt.NDArray[np.float64]


def rows_from_cliques(
    cliques: Sequence[tuple[tuple[int, ...], FloatArray]],
    parents: Sequence[int],
    sizes: Sequence[int],
    n: int,
    rng: np.random.Generator,
    method: Method = "rounding",
    columns: bool = False,
) -> npt.NDArray[np.int64]:
    """n rows (codes, shape (n, len(sizes)); with ``columns``, shape (len(sizes), n): one
    contiguous row per variable) from the clique marginals (module docstring).

    ``cliques[k]`` = (variables, P over them with axes in that order); ``parents[k]`` the index
    of k's parent in ``cliques`` (earlier in the list) or −1 for a root. Variables in no clique
    are uniform."""
    if method not in ("rounding", "iid"):
        raise ValueError(f"unknown method {method!r}: 'rounding' or 'iid'")
    # one contiguous row per variable; every row is written below (a clique's variables, then
    # the uniform rest) before it is read, so no fill (d = 1,024, n = 19,531: a 160 MB fill
    # per model sample was most of the sampling time)
    out = np.empty((len(sizes), n), dtype=np.int64)
    done: set[int] = set()
    for k, (variables, table) in enumerate(cliques):
        parent = parents[k]
        sep = [v for v in variables if v in done] if parent >= 0 or done else []
        rest = [v for v in variables if v not in done]
        if not rest:
            continue
        order = [variables.index(v) for v in sep + rest]
        p = np.transpose(np.asarray(table, dtype=np.float64), order)
        n_sep = int(np.prod([sizes[v] for v in sep])) if sep else 1
        cond = p.reshape(n_sep, -1)
        key = (np.ravel_multi_index(tuple(out[v] for v in sep), [sizes[v] for v in sep])
               if sep else np.zeros(n, dtype=np.int64))
        values = _draw(cond, key, rng, method)
        if len(rest) == 1:
            out[rest[0]] = values
        else:
            for v, dgt in zip(rest, np.unravel_index(values, [sizes[v] for v in rest])):
                out[v] = dgt
        done.update(rest)
    for v in range(len(sizes)):
        if v not in done:
            out[v] = rng.integers(0, sizes[v], size=n)  # not-privacy-noise: post-processing
    return out if columns else np.ascontiguousarray(out.T)


def _draw(cond: FloatArray, key: npt.NDArray[np.int64], rng: np.random.Generator,
          method: Method) -> npt.NDArray[np.int64]:
    """For every row, a value v with probability cond[key, v] / Σ_v cond[key, v].

    Vectorised inverse-CDF: u ∈ [0, 1) per row, v = the first value whose cumulative
    probability exceeds u (one ``searchsorted`` on the rows' CDFs laid end to end, row g
    shifted by g). ``iid``: u uniform. ``rounding``: the rows of a group g (m_g of them, in
    random order) take u_j = (j + U_g)/m_g, j = 0 … m_g − 1, one uniform U_g per group
    (systematic sampling): value v then gets ⌊m_g P(v|g)⌋ or ⌈m_g P(v|g)⌉ rows, and each with
    the right probability."""
    n = key.size
    n_values = cond.shape[1]
    mass = cond.sum(axis=1, keepdims=True)
    prob = np.where(mass > 0, cond / np.where(mass > 0, mass, 1.0), 1.0 / n_values)
    cdf = np.cumsum(prob, axis=1)
    cdf[:, -1] = 1.0  # exactly, against rounding in the sum
    if method == "iid":
        u = rng.random(n)  # not-privacy-noise: post-processing
        rows = np.arange(n)
    else:
        rows = np.lexsort((rng.random(n), key))  # not-privacy-noise: random order in groups
        _, starts, counts = np.unique(key[rows], return_index=True, return_counts=True)
        group = np.repeat(np.arange(starts.size), counts)
        position = np.arange(n) - starts[group]
        offset = rng.random(starts.size)  # not-privacy-noise: post-processing
        u = (position + offset[group]) / counts[group]
    k = key[rows]
    out = np.empty(n, dtype=np.int64)
    if n_values <= 16:  # a few comparisons per row beat a binary search; one column of
        v = np.zeros(n, dtype=np.int64)  # the CDF gathered at a time (no n × values copy)
        for j in range(n_values - 1):
            v += u >= np.ascontiguousarray(cdf[:, j]).take(k)
    else:
        flat = (cdf + np.arange(cdf.shape[0])[:, None]).ravel()
        v = np.searchsorted(flat, u + k, side="right") - k * n_values
    out[rows] = np.minimum(v, n_values - 1)
    return out
