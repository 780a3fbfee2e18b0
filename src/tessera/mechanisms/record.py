"""What a mechanism run was: frozen records that travel with every noisy value (docs/theory.md §7).

A release must be able to say exactly which mechanism produced a number, under which privacy
definition, with which parameter, and whether the randomness was private at all. Every sampler
in :mod:`tessera.mechanisms` therefore returns its output *together with* a
:class:`MechanismRecord`; a seeded run (tests only) carries ``private=False`` so that callers
can label its output "NOT PRIVATE" and never mistake it for a release.

The module also holds the two directed float roundings the privacy maps use: a privacy
parameter computed from exact rationals is rounded *up* (``float_at_least``), so that a
reported ε or ρ is never smaller than the true one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tessera.privacy import Definition

__all__ = [
    "MechanismRecord",
    "NoisyRelease",
    "Selection",
    "float_at_least",
]


@dataclass(frozen=True)
class MechanismRecord:
    """Which mechanism ran: name, privacy definition, parameter, and whether it was private.

    ``name`` names the distribution and the sampler, e.g. ``"discrete Laplace (OpenDP
    make_laplace)"``; ``parameter`` names the noise parameter as the papers write it (``"scale
    b"``, ``"σ"``, ``"ε"``) and ``value`` is its value, or ``None`` when one call used several
    values (each output's own value is then in the release, e.g.
    :attr:`NoisyRelease.parameters`). ``private`` is ``False`` exactly when the randomness was a
    seeded test source (:meth:`tessera.mechanisms.NoiseSource.seeded`).
    """

    name: str
    definition: Definition
    parameter: str
    value: float | None
    private: bool

    def describe(self) -> str:
        """One line for a report, e.g. ``'discrete Laplace (…), pure ε-DP, scale b = 2'``."""
        value = "per query" if self.value is None else f"{self.value:.6g}"
        text = f"{self.name}, {self.definition.label}, {self.parameter} = {value}"
        return text if self.private else text + " — NOT PRIVATE (seeded test randomness)"


@dataclass(frozen=True, eq=False)
class NoisyRelease:
    """Noisy integer answers, the noise parameter each one used, and the mechanism record.

    ``values[i]`` = true answer i + noise with parameter ``parameters[i]`` (a scale b or a σ).
    Equality is identity: the arrays are not hashable.
    """

    values: np.ndarray
    parameters: np.ndarray
    mechanism: MechanismRecord

    @property
    def private(self) -> bool:
        """``False`` for seeded test output, which must be labelled NOT PRIVATE."""
        return self.mechanism.private


@dataclass(frozen=True, eq=False)
class Selection:
    """Indices chosen by a private selection, one per independent run, and the record.

    ``indices`` has one entry per run; :attr:`index` is the single answer of a single run.
    """

    indices: np.ndarray
    mechanism: MechanismRecord

    @property
    def index(self) -> int:
        """The selected index of a single run (an error for several runs)."""
        if self.indices.size != 1:
            raise ValueError(f"{self.indices.size} runs: use .indices")
        return int(self.indices[0])

    @property
    def private(self) -> bool:
        """``False`` for seeded test output, which must be labelled NOT PRIVATE."""
        return self.mechanism.private


def float_at_least(x: Fraction | int) -> float:
    """The smallest float ≥ x (``inf`` beyond the largest float).

    ``float(Fraction)`` rounds to nearest, which can be below x; one step up then restores
    ``result ≥ x``. Privacy maps report ε, ρ through this, so they are never understated.
    """
    x = Fraction(x)
    try:
        f = float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.nextafter(math.inf, 0.0)
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f
