"""A privacy guarantee as a value: its definition, parameters and neighbour relation
(docs/theory.md §1, §3).

Every guarantee Tessera prints names both *which definition* (pure ε-DP, (ε,δ)-DP, μ-GDP,
ρ-zCDP, f-DP) and *which neighbour relation* (add/remove one row, or substitute one row): the
same mechanism has different costs under the two relations (docs/theory.md §1), so a number
without its relation is not a guarantee.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tessera.accounting.tradeoff import (
    EpsDelta,
    Exactness,
    GaussianDP,
    PiecewiseLinear,
    TradeOff,
    round_up,
)
from tessera.errors import TesseraError
from tessera.privacy import ONE_ROW, Definition, Neighbours, PrivacyUnit


def _finite_nonneg(name: str, v: float) -> float:
    x = float(v)
    if not (math.isfinite(x) and x >= 0.0):
        raise TesseraError(f"{name} must be finite and ≥ 0, got {v!r}")
    return x


@dataclass(frozen=True)
class Guarantee:
    """A privacy guarantee. Build with :meth:`pure`, :meth:`approx`, :meth:`gdp`,
    :meth:`zcdp` or :meth:`fdp`.

    ``basis`` says how the parameter was obtained (``exact`` or ``upper bound``); a guarantee
    is never built from an approximation (the CLT result is a different type). ``unit``: whose
    presence the relation adds, removes or substitutes — one row, or one person of at most K
    rows (docs/theory.md §3.13).
    """

    definition: Definition
    neighbours: Neighbours
    epsilon: float | None = None
    delta: float | None = None
    mu: float | None = None
    rho: float | None = None
    tradeoff: TradeOff | None = None
    basis: str = "exact"
    note: str = ""
    unit: PrivacyUnit = ONE_ROW

    # -- constructors ---------------------------------------------------------------------

    @staticmethod
    def pure(eps: float, neighbours: Neighbours = Neighbours.ADD_REMOVE, **kw: Any) -> Guarantee:
        return Guarantee(Definition.PURE, neighbours, epsilon=_finite_nonneg("ε", eps), **kw)

    @staticmethod
    def approx(
        eps: float, delta: float, neighbours: Neighbours = Neighbours.ADD_REMOVE, **kw: Any
    ) -> Guarantee:
        d = float(delta)
        if not 0.0 <= d < 1.0:
            raise TesseraError(f"δ must be in [0, 1), got {delta!r}")
        return Guarantee(
            Definition.APPROX, neighbours, epsilon=_finite_nonneg("ε", eps), delta=d, **kw
        )

    @staticmethod
    def gdp(mu: float, neighbours: Neighbours = Neighbours.ADD_REMOVE, **kw: Any) -> Guarantee:
        return Guarantee(Definition.GDP, neighbours, mu=_finite_nonneg("μ", mu), **kw)

    @staticmethod
    def zcdp(rho: float, neighbours: Neighbours = Neighbours.ADD_REMOVE, **kw: Any) -> Guarantee:
        return Guarantee(Definition.ZCDP, neighbours, rho=_finite_nonneg("ρ", rho), **kw)

    @staticmethod
    def fdp(f: TradeOff, neighbours: Neighbours = Neighbours.ADD_REMOVE, **kw: Any) -> Guarantee:
        if not isinstance(f, TradeOff):
            raise TesseraError(
                "an f-DP guarantee needs a trade-off function (not an approximation)"
            )
        if f.exactness is Exactness.APPROXIMATION:
            raise TesseraError("an approximation is not a privacy guarantee")
        kw.setdefault("basis", "exact" if f.exactness is Exactness.EXACT else "safe lower bound")
        return Guarantee(Definition.FDP, neighbours, tradeoff=f, **kw)

    # -- conversions ----------------------------------------------------------------------

    def as_tradeoff(self) -> TradeOff:
        """The f this guarantee implies (exact for pure/(ε,δ)/GDP/f-DP; for ρ-zCDP the safe
        lower bound max_ε f_{ε,δ(ε)} with δ(ε) = exp(−(ε − ρ)²/(4ρ)), Bun–Steinke Prop. 1.3)."""
        d = self.definition
        if d is Definition.PURE:
            return EpsDelta(self.epsilon or 0.0, 0.0)
        if d is Definition.APPROX:
            return EpsDelta(self.epsilon or 0.0, self.delta or 0.0)
        if d is Definition.GDP:
            return GaussianDP(self.mu or 0.0)
        if d is Definition.FDP:
            assert self.tradeoff is not None
            return self.tradeoff
        rho = self.rho or 0.0
        if rho == 0.0:
            return EpsDelta(0.0, 0.0)
        eps = np.linspace(rho, rho + 40.0 * math.sqrt(rho) + 10.0, 2049)
        deltas = np.minimum(np.exp(-((eps - rho) ** 2) / (4.0 * rho)), 1.0)
        return PiecewiseLinear.from_profile(eps, deltas)

    def epsilon_at(self, delta: float) -> float:
        """ε such that the guarantee implies (ε, δ)-DP (exact or an upper bound)."""
        d = self.definition
        if d is Definition.PURE:
            return self.epsilon or 0.0
        if d is Definition.ZCDP:
            rho = self.rho or 0.0
            if delta <= 0.0:
                return math.inf
            return round_up(rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)))
        return self.as_tradeoff().epsilon(delta)

    def at_delta(self, delta: float) -> Guarantee:
        """The implied (ε, δ)-DP guarantee at this δ, same neighbour relation."""
        basis = "exact" if self.definition in (Definition.GDP, Definition.APPROX) else "upper bound"
        if self.definition is Definition.FDP and self.tradeoff is not None:
            basis = "exact" if self.tradeoff.exactness is Exactness.EXACT else "upper bound"
        if self.basis != "exact":  # a conversion is never more exact than its input
            basis = "upper bound"
        return Guarantee.approx(
            self.epsilon_at(delta),
            delta,
            self.neighbours,
            basis=basis,
            note=f"from {self.text()}",
            unit=self.unit,
        )

    # -- rendering ------------------------------------------------------------------------

    def parameter_text(self) -> str:
        d = self.definition
        if d is Definition.PURE:
            return f"ε = {self.epsilon:.6g}"
        if d is Definition.APPROX:
            return f"ε = {self.epsilon:.6g}, δ = {self.delta:.3g}"
        if d is Definition.GDP:
            return f"μ = {self.mu:.6g}"
        if d is Definition.ZCDP:
            return f"ρ = {self.rho:.6g}"
        assert self.tradeoff is not None
        return f"f = {self.tradeoff.describe()}"

    def text(self) -> str:
        """E.g. ``μ-GDP with μ = 0.5 (add/remove one row; exact)``."""
        extra = f"; {self.note}" if self.note else ""
        return (
            f"{self.definition.label} with {self.parameter_text()} "
            f"({self.unit.label(self.neighbours)}; {self.basis}{extra})"
        )

    def __str__(self) -> str:
        return self.text()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record for a privacy certificate."""
        out: dict[str, Any] = {
            # words for people, tokens (tessera.privacy) for programs
            "definition": self.definition.label,
            "definition_token": self.definition.value,
            "neighbours": self.unit.label(self.neighbours),
            "neighbours_token": self.neighbours.value,
            "basis": self.basis,
        }
        if not self.unit.is_row:
            out["privacy_unit"] = self.unit.to_dict()
        for name in ("epsilon", "delta", "mu", "rho"):
            v = getattr(self, name)
            if v is not None:
                out[name] = v
        if self.tradeoff is not None:
            out["tradeoff"] = self.tradeoff.describe()
            out["tradeoff_exactness"] = self.tradeoff.exactness.value
        if self.note:
            out["note"] = self.note
        return out
