"""The output rows brought closer to the fitted model: the polish of
:func:`tessera.estimation.polish.polish` towards the model's exact marginals over the workload's
scopes (post-processing; docs/theory.md §5, "the adaptive method": the rounding of N sampled
rows otherwise adds its own error, 1.5× the model's on NLTCS 3-way at ε = 10)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tessera.errors import ResourceError
from tessera.estimation.maxent import FitResult, ScopeModel
from tessera.estimation.polish import polish
from tessera.estimation.tree_marginals import holders, tree_marginal
from tessera.synth.model_answers import scope_marginal

__all__ = ["POLISH_MAX_CELLS", "POLISH_MAX_KEYS", "POLISH_SAMPLE", "polish_rows"]

#: The most target cells the rows are polished towards (public: the workload's scopes), and
#: the most (row, scope) cell keys the search holds (8 bytes each: 400 MB).
POLISH_MAX_CELLS = 10**7
POLISH_MAX_KEYS = 5 * 10**7
#: Rows sampled per attribute step of the polish (NLTCS ε = 10, one model: 30 passes of 2,048
#: rows reach 0.00225 in 4.6 s CPU, 10 passes of all 21,574 rows 0.00228 in 10.3 s).
POLISH_SAMPLE = 2048


def polish_rows(rows: npt.NDArray[np.int64], model: ScopeModel, fitted: FitResult,
                scopes: Sequence[tuple[int, ...]], passes: int,
                rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """The rows after :func:`tessera.estimation.polish.polish` towards n · P_θ(x_s) for every
    scope s (the workload's: the maximal marginal candidates, in domain order), n the rows'
    number, P_θ(x_s) exact from the clique tree, else (a message too large) from the model
    with s added at θ_s = 0 (:func:`tessera.synth.model_answers.scope_marginal`); a scope
    whose marginal is past the engine's memory guard even so is left out of the targets. The
    rows unchanged when the model has wide queries (no clique tree), or the targets would
    exceed :data:`POLISH_MAX_CELLS` cells in all or the keys :data:`POLISH_MAX_KEYS` (public
    sizes)."""
    sizes = model.domain.sizes
    if (sum(math.prod(sizes[a] for a in s) for s in scopes) > POLISH_MAX_CELLS
            or len(scopes) * rows.shape[0] > POLISH_MAX_KEYS):
        return rows
    tree = model.clique_tree(fitted.theta)
    if tree is None:
        return rows
    holder = holders(tree[0])
    kept, targets = [], []
    for s in scopes:
        p = tree_marginal(tree[0], tree[1], sizes, s, holder)
        if p is None:
            # one scope whose tree marginal needs too large a message (a pair of Adult's
            # 2-way marginals under a width-6 model, ε = 10) used to leave every row
            # unpolished: the rows lost to their own model (0.0265 against 0.0229)
            try:
                p = scope_marginal(model, fitted, tuple(s), tree)
            except ResourceError:
                continue
        kept.append(tuple(s))
        targets.append(rows.shape[0] * p)
    if not kept:
        return rows
    return polish(rows, sizes, kept, targets, rng, passes=passes, sample=POLISH_SAMPLE).rows
