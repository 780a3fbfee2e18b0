"""What a synthesis run tells its ``progress`` callback: one typed event per step.

A run is a sequence of steps — ``"counting"`` (the exact counts the private steps read; for
``lp`` called with ``answer=``, the private release of the workload),
``"setup"`` (the model and its first measurements), the ``"round"``\\ s (for ``lp``, the
column-generation ``"iteration"``\\ s), ``"final fit"`` (the adaptive method's last fit) and
``"sampling"`` (the output rows) — and the callback sees each one: a ``"start"`` and an
``"end"`` event for every step but the rounds, which report when they end. Every event is a
:class:`ProgressEvent` carrying the step, the rounds done and the rounds the run will make,
the seconds since the run started and the budget spent; a round's event also carries the
method's own record of it (``detail``: :class:`~tessera.synth.adaptive_record.AdaptiveProgress`,
:class:`~tessera.synth.rounds.RoundProgress` or :class:`~tessera.synth.lp.Iteration`), whose
fields it also answers to (``event.query``, ``event.iteration``, …) so that a callback written
for those records keeps working.

``rounds`` is truthful: IPMWU and MWEM make exactly T rounds; the adaptive method stops when the
budget is spent, so until its final round ``rounds`` is an upper bound (``rounds_bound``), the
rounds finished plus the most the remaining budget pays for at the current round cost (exact
rational arithmetic, :func:`rounds_left`); the LP's is its iteration limit (a bound: it stops
earlier on a certified gap). Events hold DP outputs and post-processing only: safe to show.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = ["PHASES", "STEPS", "ProgressEvent", "Reporter", "rounds_left"]

#: The steps of a run, in order (a method reports those it has).
STEPS = ("counting", "setup", "round", "iteration", "final fit", "sampling")
#: A step's events: ``"start"`` and ``"end"`` (rounds and iterations: ``"end"`` only).
PHASES = ("start", "end")


@dataclass(frozen=True)
class ProgressEvent:
    """One step of a run starting or ending (module docstring)."""

    step: str  # one of STEPS
    phase: str  # "start" or "end"
    round: int  # rounds (lp: iterations) finished so far
    rounds: int  # the rounds of the run: exact, or an upper bound while ``rounds_bound``
    rounds_bound: bool  # True: ``rounds`` is an upper bound (the run may stop earlier)
    elapsed: float  # seconds since the run started
    spent: float | None = None  # ε or ρ spent so far (None: nothing calibrated, e.g. lp)
    budget: float | None = None  # ε or ρ of the run
    error: float | None = None  # a round's indicative error (the method's record says which)
    rows: int | None = None  # the rows being drawn (``"sampling"``)
    detail: Any = None  # the method's own record of a round or iteration

    @property
    def remaining(self) -> float | None:
        if self.spent is None or self.budget is None:
            return None
        return max(self.budget - self.spent, 0.0)

    def __getattr__(self, name: str) -> Any:
        # the fields of the method's round record (``detail``), for callbacks written for it;
        # never the dataclass machinery's own names (copy, pickle look them up first)
        if name.startswith("__") or name == "detail":
            raise AttributeError(name)
        detail = self.__dict__.get("detail")
        if detail is None:
            raise AttributeError(f"{type(self).__name__} of step {self.step!r} has no {name!r}")
        return getattr(detail, name)


def rounds_left(remaining: Fraction, cost: Fraction, per_round: int) -> int:
    """The most rounds a budget ``remaining`` pays for when a round makes ``per_round``
    measurements of cost at least ``cost`` each and the last round spends whatever is left
    (the adaptive method's loop): 0 when nothing is left, else max(1, ⌊remaining / (per_round ·
    cost)⌋). By induction: a round that is not the last needs remaining ≥ 2 · per_round · cost
    and leaves remaining − per_round · cost (annealing only raises the cost)."""
    if remaining <= 0:
        return 0
    if cost <= 0:
        raise ValueError("a round costs more than nothing")
    return max(1, math.floor(remaining / (per_round * cost)))


class Reporter:
    """Sends :class:`ProgressEvent`\\ s to a callback, keeping what later events repeat (the
    rounds, the budget spent) and the run's start. A callback that is already a Reporter is
    used as it is (:meth:`of`), so that a run and the methods it calls share one clock."""

    def __init__(self, callback: Callable[[ProgressEvent], None] | None,
                 start: float | None = None) -> None:
        self.callback = callback
        self.start = time.perf_counter() if start is None else start
        self.round = 0
        self.rounds = 0
        self.rounds_bound = False
        self.spent: float | None = None
        self.budget: float | None = None

    @classmethod
    def of(cls, progress: Any) -> Reporter:
        """``progress`` as a Reporter: itself, a new one around a callable, or a silent one."""
        return progress if isinstance(progress, Reporter) else cls(progress)

    def __call__(self, step: str, phase: str = "end", *, round: int | None = None,
                 rounds: int | None = None, bound: bool | None = None,
                 spent: float | None = None, budget: float | None = None,
                 error: float | None = None, rows: int | None = None,
                 detail: Any = None) -> None:
        if step not in STEPS or phase not in PHASES:
            raise ValueError(f"no step {step!r} / phase {phase!r}")
        if round is not None:
            self.round = round
        if rounds is not None:
            self.rounds = rounds
        if bound is not None:
            self.rounds_bound = bound
        if spent is not None:
            self.spent = spent
        if budget is not None:
            self.budget = budget
        if self.callback is None:
            return
        self.callback(ProgressEvent(
            step, phase, self.round, max(self.rounds, self.round), self.rounds_bound,
            time.perf_counter() - self.start, self.spent, self.budget, error, rows, detail))
