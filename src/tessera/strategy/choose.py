"""Choose the strategy with the least expected error (docs/theory.md §10).

Every candidate of :mod:`~.candidates` that applies to W is calibrated from its own γ_w and
its expected error computed in closed form; ``auto`` keeps the least for the objective —
``total`` (Σ_q w_q Var_q, the default) or ``max`` (max_q w_q Var_q) — and ``direct`` on a tie,
so it is never worse than direct by the model. The choice uses only the schema, W, the budget
and the neighbour relation: it is public, and ``tessera verify`` recomputes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tessera.errors import TesseraError
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit
from tessera.strategy.candidates import (
    Context,
    Strategy,
    contrast_strategy,
    direct,
    interval_strategy,
    marginal_scopes,
    marginal_strategy,
    merge_duplicates,
    no_tree_reason,
    one_attribute,
    rectangle_strategy,
    worst_cell,
)
from tessera.strategy.context import Certify
from tessera.strategy.rectangles import two_attributes
from tessera.strategy.stated_shares import with_shares
from tessera.workload.workload import Workload

StrategyName = Literal["auto", "direct", "identity", "residual", "hierarchical"]
STRATEGIES = ("auto", "direct", "identity", "residual", "hierarchical")
OBJECTIVES = ("total", "max")
#: Relative margin a candidate must beat direct by to be chosen (ties go to direct).
TIE = 1e-9


@dataclass(frozen=True, eq=False)
class StrategyChoice:
    """The chosen strategy and every candidate that was evaluated (the chosen one among them)."""

    chosen: Strategy
    candidates: tuple[Strategy, ...]
    requested: str
    objective: str
    #: the estimate W's answers are read with: ``gls`` or ``model`` (GReM-LNN)
    estimate: str = "gls"
    #: under ``max``: marginal and tree candidates took the minimax split (``False``: the
    #: better of the total-optimal and the equal split)
    minimax: bool = True
    #: under ``max`` (with ``minimax``): 2-D products of trees took the minimax split of each
    #: axis (``False``: the split chosen for the total)
    minimax_rectangles: bool = True
    #: ``tessera verify`` with stated shares: for each candidate the certificate states shares
    #: of, (that candidate on the stated shares, the same candidate as recomputed here), for
    #: verify to hold the first against the second (:mod:`~.stated_shares`); the candidates
    #: list holds the first
    restated: tuple[tuple[Strategy, Strategy], ...] = ()

    def score(self, s: Strategy) -> float:
        return score(s, self.objective)

    def table(self) -> list[dict[str, Any]]:
        """One row per candidate: its γ_w, expected total / max error, RMSE, chosen or not."""
        rows = []
        for s in self.candidates:
            rows.append({
                "strategy": s.name,
                "measured_queries": s.measured.n_queries,
                "gamma_w": s.overlap.bound,
                "gamma_w_exact": s.overlap.exact,
                "expected_total": s.total,
                "expected_max": worst_cell(s),
                "rmse": s.rmse,
                "chosen": s is self.chosen,
            })
        return rows


def only_direct(workload: Workload) -> bool:
    """Whether ``direct`` on W as given is the only candidate: no other strategy applies (W is
    neither marginals only nor over one attribute) and no predicate query repeats. Checked
    without calibrating anything (``answer`` then plans W exactly as before strategies)."""
    if (marginal_scopes(workload) is not None or one_attribute(workload) is not None
            or two_attributes(workload) is not None):
        return False
    return merge_duplicates(workload)[0] is workload


def score(s: Strategy, objective: str) -> float:
    return worst_cell(s) if objective == "max" else s.total


def people_strategy(strategy: str) -> str:
    """The strategy of a release that counts people (``COUNT(DISTINCT id)``, docs/theory.md
    §3.14): ``direct`` — W measured as it is. Every other candidate reconstructs W's answers
    from other counts by least squares, which presumes that a count is the sum of the counts
    of its parts; a count of people is not (a person in two cells is one person in their
    union), so they are refused rather than silently biased. The split stays W's shares: the
    optimised split scales a row's cost by K, which is not a person's cost here."""
    if strategy not in ("auto", "direct"):
        raise TesseraError(
            f"strategy {strategy!r} reconstructs the workload from other counts, and a count "
            "of people is not a sum of other counts (a person in two cells is one person in "
            "their union)",
            hint="use --strategy direct (or auto), or count rows (--count rows)")
    return "direct"


def choose_strategy(
    workload: Workload,
    definition: Definition,
    total: float,
    *,
    neighbours: Neighbours | str = Neighbours.ADD_REMOVE,
    strategy: str = "auto",
    objective: str = "total",
    time_limit: float | None = 60.0,
    compare: bool = False,
    estimate: str = "gls",
    optimise_direct: bool = True,
    minimax: bool = True,
    minimax_rectangles: bool = True,
    direct_scales: tuple[float, ...] | None = None,
    stated_shares: Mapping[str, tuple[float, ...]] | None = None,
    unit: PrivacyUnit = ONE_ROW,
    certify: Certify | None = None,
) -> StrategyChoice:
    """The strategy to measure for W under a budget ``total`` of ``definition`` (ε or ρ).

    ``strategy``: ``auto`` (the least expected error among the candidates that apply) or one
    of them forced (a clear error when it does not apply to W); ``compare``: evaluate every
    applicable candidate even when one is forced (for ``tessera plan``); ``estimate``: ``gls``
    or ``model`` — for the model estimate, ``residual`` measures marginals, not residual
    contrasts: the contrasts' allocation is optimal for GLS and spends almost nothing on the
    total and the low-order residuals, which the non-negativity constraints then move
    (docs/benchmarks.md, "--estimate model"). ``optimise_direct``: ``False`` keeps ``direct``
    on its shares (how certificates made before the optimal split are recomputed);
    ``minimax``: ``False`` keeps, under ``max``, the better of the total-optimal and the equal
    split of marginal and tree candidates (how certificates made before the minimax split are
    recomputed); ``minimax_rectangles``: ``False`` keeps, under ``max``, the split chosen for
    the total of 2-D products of trees (how certificates made before their minimax split are
    recomputed); ``direct_scales``: ``tessera verify``'s stated optimal split of ``direct``,
    taken in place of the optimiser (:func:`~.candidates.direct`); ``stated_shares``: ``tessera
    verify``'s stated shares of each (non-direct) candidate by name, as the certificate's
    candidate table records them, which replace that candidate's own before the choice is made
    (:func:`~.stated_shares.with_shares`; the recomputed ones are kept in
    :attr:`StrategyChoice.restated`); ``unit``: one row, or one person of at most K rows,
    whose γ_w every candidate is calibrated to (K·γ under pure ε, docs/theory.md §3.13);
    ``certify``: a release's check of ``direct``'s optimised split
    (:attr:`~.context.Context.certify`). A unit that counts people measures W directly on
    its shares (:func:`people_strategy`)."""
    if strategy not in STRATEGIES:
        raise TesseraError(f"unknown strategy {strategy!r}", hint=", ".join(STRATEGIES))
    if objective not in OBJECTIVES:
        raise TesseraError(f"unknown objective {objective!r}", hint=", ".join(OBJECTIVES))
    if workload.n_queries == 0:
        raise TesseraError("the workload has no queries")
    if unit.counts_people:
        strategy, compare, optimise_direct = people_strategy(strategy), False, False
    ctx = Context(Definition.parse(definition), float(total), Neighbours.parse(neighbours),
                  time_limit, objective, optimise_direct, minimax, direct_scales,
                  minimax_rectangles, unit, certify)
    wanted = STRATEGIES[1:] if (strategy == "auto" or compare) else (strategy,)
    found: list[Strategy] = []
    for name in wanted:
        cand: Strategy | None
        if name == "direct":
            cand = direct(workload, ctx)
        elif name == "residual":
            cand = ((contrast_strategy(workload, ctx) if estimate == "gls" else None)
                    or marginal_strategy(workload, ctx, "residual"))
        elif name == "hierarchical":
            cand = (interval_strategy(workload, ctx, "hierarchical")
                    or rectangle_strategy(workload, ctx, "hierarchical"))
        else:
            cand = (marginal_strategy(workload, ctx, "identity")
                    or interval_strategy(workload, ctx, "identity")
                    or rectangle_strategy(workload, ctx, "identity"))
        if cand is not None:
            found.append(cand)
        elif name == strategy:
            reason = no_tree_reason(workload) if name == "hierarchical" else None
            raise TesseraError(
                f"strategy {strategy!r} does not apply to this workload"
                + (f": {reason}" if reason else ""),
                hint="use --strategy identity (the attribute's histogram) or auto" if reason
                else "identity/residual take marginal families; identity/hierarchical take "
                     "queries over one attribute or a ranges block over two; direct and auto "
                     "take any workload")
    restated = []
    for k, s in enumerate(found):
        if stated_shares and s.name in stated_shares and s.name != "direct":
            found[k] = with_shares(s, stated_shares[s.name], ctx)
            restated.append((found[k], s))
    if strategy == "auto":
        base = found[0]  # direct
        chosen = base
        for s in found[1:]:
            if score(s, objective) < score(chosen, objective) * (1.0 - TIE):
                chosen = s
    else:
        chosen = next(s for s in found if s.name.split("(")[0] == strategy)
    return StrategyChoice(chosen, tuple(found), strategy, objective, estimate, minimax,
                          minimax_rectangles, tuple(restated))
