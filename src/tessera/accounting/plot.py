"""Trade-off curves as PNG (matplotlib, Agg canvas; no global backend switch).

matplotlib is the optional ``plot`` extra: imported when a curve is drawn, and without it
:func:`plot_tradeoffs` fails with one line naming the extra (:func:`tessera.software.require`).

Guarantees are drawn solid; a :class:`~tessera.accounting.composition.CLTApproximation` is
drawn dashed and its legend entry says it is not a guarantee.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tessera.accounting.composition import CLTApproximation
from tessera.accounting.tradeoff import Exactness, TradeOff
from tessera.software import require

#: What needs matplotlib here, as its error says.
PURPOSE = "drawing trade-off curves"


def plot_tradeoffs(
    curves: Sequence[tuple[str, TradeOff | CLTApproximation]],
    path: str | Path,
    title: str | None = None,
    points: int = 1001,
) -> Path:
    """Write the curves α ↦ f(α) on [0, 1] (with the diagonal Id) to a PNG at ``path``."""
    figure = require("matplotlib.figure", "plot", PURPOSE)
    agg = require("matplotlib.backends.backend_agg", "plot", PURPOSE)
    alpha = np.linspace(0.0, 1.0, points)
    fig = figure.Figure(figsize=(6.0, 5.5), dpi=120)
    agg.FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(alpha, 1.0 - alpha, color="0.6", lw=1, ls=":", label="Id (no information)")
    for label, f in curves:
        if isinstance(f, CLTApproximation):
            ax.plot(
                alpha, f(alpha), ls="--", lw=1.5, label=f"{label} [approximation, not a guarantee]"
            )
        else:
            tag = "" if f.exactness is Exactness.EXACT else f" [{f.exactness.value}]"
            ax.plot(alpha, f(alpha), lw=1.8, label=f"{label}{tag}")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_aspect("equal")
    ax.set_xlabel("type I error α")
    ax.set_ylabel("type II error β = f(α)")
    ax.set_title(title or "Trade-off functions (higher is more private)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=7)
    out = Path(path)
    fig.savefig(out, format="png")
    return out
