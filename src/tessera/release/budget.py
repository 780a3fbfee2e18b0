"""A release budget as the user states it, and what it is calibrated as (docs/theory.md §3, §7).

The user asks for one of: pure ε-DP, ρ-zCDP, μ-GDP or (ε, δ)-DP. Tessera releases integers
with discrete noise from OpenDP (never floating-point noise, Mironov 2012), so each target maps
to a mechanism and a *calibration definition* whose per-query costs add up over the queries a
row touches:

===========  ======================  =====================  ================================
target       mechanism               calibrated as          proven for what ran
===========  ======================  =====================  ================================
ε            discrete Laplace        pure ε (Σ 1/b_q)       ε-DP exactly
ρ            discrete Gaussian       ρ-zCDP (Σ 1/(2σ_q²))   ρ-zCDP exactly [CKS20]
(ε, δ)       discrete Gaussian       ρ-zCDP with the        ρ-zCDP, hence (ε, δ) by the
                                     largest ρ ⇒ (ε, δ)     CKS20 conversion
μ            discrete Gaussian       ρ = μ²/2-zCDP          ρ-zCDP; μ-GDP is **not** proven
                                                            for a discrete Gaussian
===========  ======================  =====================  ================================

(A continuous Gaussian with the same σ's would be exactly μ-GDP; the discrete one is within
a small, proven margin of it but not exactly, so the certificate states ρ-zCDP and the (ε, δ)
it implies, and says that μ-GDP is the target, not a theorem.)
"""

from __future__ import annotations

from dataclasses import dataclass

from tessera.accounting.zcdp import rho_for_epsilon_delta
from tessera.errors import TesseraError
from tessera.privacy import Definition, check_budget

#: Mechanism names, as the certificate spells them.
DISCRETE_LAPLACE = "discrete_laplace"
DISCRETE_GAUSSIAN = "discrete_gaussian"


def _positive(name: str, value: float | None) -> float:
    """A finite positive value inside Tessera's accepted range (:data:`BUDGET_RANGES`)."""
    return check_budget(name, value)


@dataclass(frozen=True)
class Budget:
    """A privacy target: ``definition`` and its parameters (ε; ρ; μ; or ε and δ)."""

    definition: Definition
    epsilon: float | None = None
    delta: float | None = None
    rho: float | None = None
    mu: float | None = None

    @staticmethod
    def of(
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        mu: float | None = None,
    ) -> Budget:
        """Exactly one of ε, ρ, μ (δ only with ε): a clear error otherwise."""
        given = [n for n, v in (("epsilon", epsilon), ("rho", rho), ("mu", mu)) if v is not None]
        if len(given) != 1:
            raise TesseraError(
                "give exactly one budget: --epsilon E, --rho R, --mu M or --epsilon E --delta D",
                hint="e.g. --epsilon 1 (pure ε-DP, discrete Laplace) or --rho 0.5 (zCDP)",
            )
        if delta is not None and epsilon is None:
            raise TesseraError("--delta goes with --epsilon: (ε, δ)-DP")
        if epsilon is not None:
            eps = _positive("ε", epsilon)
            if delta is None or delta == 0:
                return Budget(Definition.PURE, epsilon=eps)
            if not 0.0 < delta < 1.0:
                raise TesseraError(f"δ must be in (0, 1), got {delta!r}")
            return Budget(Definition.APPROX, epsilon=eps, delta=float(delta))
        if rho is not None:
            return Budget(Definition.ZCDP, rho=_positive("ρ", rho))
        return Budget(Definition.GDP, mu=_positive("μ", mu))

    @property
    def mechanism(self) -> str:
        """The discrete mechanism that answers under this target."""
        return DISCRETE_LAPLACE if self.definition is Definition.PURE else DISCRETE_GAUSSIAN

    @property
    def calibration(self) -> Definition:
        """The additive definition the per-query costs are calibrated in: PURE or ZCDP."""
        return Definition.PURE if self.definition is Definition.PURE else Definition.ZCDP

    @property
    def total(self) -> float:
        """The total in the calibration definition: ε for pure, else ρ (μ²/2 for μ-GDP; the
        largest ρ with ρ-zCDP ⇒ (ε, δ) for an (ε, δ) target)."""
        d = self.definition
        if d is Definition.PURE:
            return float(self.epsilon)  # type: ignore[arg-type]
        if d is Definition.ZCDP:
            return float(self.rho)  # type: ignore[arg-type]
        if d is Definition.GDP:
            return float(self.mu) ** 2 / 2.0  # type: ignore[operator]
        return rho_for_epsilon_delta(float(self.epsilon), float(self.delta))  # type: ignore[arg-type]

    def text(self) -> str:
        d = self.definition
        if d is Definition.PURE:
            return f"ε = {self.epsilon:g} (pure ε-DP)"
        if d is Definition.ZCDP:
            return f"ρ = {self.rho:g} (ρ-zCDP)"
        if d is Definition.GDP:
            return f"μ = {self.mu:g} (μ-GDP target)"
        return f"ε = {self.epsilon:g}, δ = {self.delta:g} ((ε,δ)-DP)"

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"definition": self.definition.value}
        for name in ("epsilon", "delta", "rho", "mu"):
            v = getattr(self, name)
            if v is not None:
                out[name] = v
        return out

    @staticmethod
    def from_dict(doc: dict[str, object]) -> Budget:
        d = Definition.parse(str(doc["definition"]))
        kw = {k: float(doc[k]) for k in ("epsilon", "delta", "rho", "mu") if k in doc}  # type: ignore[arg-type]
        return Budget(d, **kw)
