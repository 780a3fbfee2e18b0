"""The figures of the release report (:mod:`tessera.release.report`), drawn with matplotlib's
Agg backend and returned as inline PNG ``<img>`` tags (base64 ``data:`` URIs: no file, no URL).

* :func:`privacy_figure`: the trade-off curves the guarantees imply, and the (ε, δ) profile;
* :func:`noise_figure`: the noise scale and the 95% half-width per query, sorted;
* :func:`answers_figure`: the first answers with their 95% noise intervals.

User strings (query names) are drawn with every ``$`` escaped, so a name can never switch on
mathtext; sorted curves are subsampled to at most :data:`CURVE_POINTS` points, so a figure of
10⁵ queries stays cheap to draw. Each function returns (img tag, caption).

matplotlib is the optional ``plot`` extra (``pip install 'tessera-dp[plot]'``), imported only
when a figure is drawn; without it (:func:`available` false) the report is written without its
figures, each replaced by :func:`omitted` (the figures show what the report's tables list).
"""

from __future__ import annotations

import base64
import importlib.util
import io
import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from tessera.accounting.guarantee import Guarantee
from tessera.accounting.tradeoff import EpsDelta, GaussianDP
from tessera.accounting.zcdp import delta_for_epsilon
from tessera.privacy import Definition
from tessera.release.budget import DISCRETE_LAPLACE
from tessera.release.plan import NoisePlan
from tessera.release.report_html import esc, shorten
from tessera.software import require

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from tessera.release.view import ReleaseView

__all__ = ["CURVE_POINTS", "INSTALL_HINT", "answers_figure", "available", "noise_figure",
           "omitted", "privacy_figure"]

#: How to get the figures.
INSTALL_HINT = "pip install 'tessera-dp[plot]'"

#: Points of a sorted per-query curve (the extremes are always kept).
CURVE_POINTS = 2000
#: exp(ε) overflows a float beyond ε ≈ 709; trade-off curves are drawn at min(ε, this).
_EPS_DRAW_CAP = 700.0


def _mpl_label(text: str) -> str:
    """A user string as a matplotlib label: every '$' escaped, so a name can never switch on
    mathtext (an unbalanced or hostile '$…$' would otherwise fail to draw)."""
    return shorten(text).replace("$", r"\$")


def available() -> bool:
    """Whether matplotlib (the ``plot`` extra) is installed, so the figures can be drawn."""
    return importlib.util.find_spec("matplotlib") is not None


def omitted() -> tuple[str, str]:
    """What stands in a figure's place when matplotlib is not installed: (note, caption)."""
    return ('<p class="note">Figure not drawn: matplotlib is not installed '
            f"(<code>{esc(INSTALL_HINT)}</code> adds it).</p>", "")


def _figure(width: float, height: float) -> Figure:
    figure = require("matplotlib.figure", "plot", "the report's figures")
    agg = require("matplotlib.backends.backend_agg", "plot", "the report's figures")
    fig = figure.Figure(figsize=(width, height), dpi=100)
    agg.FigureCanvasAgg(fig)
    return fig  # type: ignore[no-any-return]


def _img(fig: Figure, alt: str) -> str:
    """The figure as an inline PNG ``<img>`` (no file, no URL). One Agg draw, encoded by
    Pillow (matplotlib's own dependency) as RGB: ``savefig`` would draw a second time."""
    from PIL import Image

    canvas = fig.canvas
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing glyphs of exotic names: drawn as boxes
        canvas.draw()
    rgb = np.ascontiguousarray(np.asarray(canvas.buffer_rgba())[..., :3])
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="png", compress_level=6)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    h, w = rgb.shape[:2]
    return f'<img src="data:image/png;base64,{data}" alt="{esc(alt)}" width="{w}" height="{h}">'


def _curve_sample(values: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64],
                                                             npt.NDArray[np.float64]]:
    """(rank, value) of a sorted array, at most :data:`CURVE_POINTS` points, ends kept."""
    n = values.size
    if n <= CURVE_POINTS:
        idx = np.arange(n)
    else:
        idx = np.unique(np.linspace(0, n - 1, CURVE_POINTS).round().astype(np.int64))
    return idx.astype(np.float64) + 1.0, values[idx]



def _pure_curve(eps: float, alpha: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return EpsDelta(min(eps, _EPS_DRAW_CAP), 0.0)(alpha)


def _zcdp_curve(rho: float, alpha: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return np.asarray(Guarantee.zcdp(rho).as_tradeoff()(alpha), dtype=np.float64)


def _zcdp_profile(rho: float, deltas: tuple[float, float]) -> tuple[list[float], list[float]]:
    """(δ, ε) points of the CKS20 conversion of ρ-zCDP (the certificate's conversion), drawn
    by computing δ(ε) on an ε grid that spans the δ range (cheap: no inversion)."""
    lo_d, hi_d = deltas
    # Bun–Steinke ε(δ) ≥ the CKS20 one: an ε range that covers [lo_d, hi_d]
    eps_hi = rho + 2.0 * math.sqrt(rho * math.log(1.0 / lo_d))
    eps_lo = max(rho * 0.5, 1e-12)
    xs, ys = [], []
    for eps in np.geomspace(eps_lo, eps_hi * 1.05, 90):
        d = delta_for_epsilon(rho, float(eps))
        if lo_d <= d <= hi_d:
            xs.append(d)
            ys.append(float(eps))
    return xs, ys


def privacy_figure(plan: NoisePlan, gs: Sequence[Guarantee]) -> tuple[str, str]:
    """Left: trade-off functions implied by the guarantees; right: ε(δ). Returns (img, caption)."""
    laplace = plan.mechanism == DISCRETE_LAPLACE
    spent, seq = plan.spent, plan.sequential
    finite = plan.costs[np.isfinite(plan.scales)]
    one = float(finite.max()) if finite.size else 0.0
    sym = "ε" if laplace else "ρ"
    alpha = np.linspace(0.0, 1.0, 801)
    fig = _figure(11.0, 6.0)
    ax, bx = fig.subplots(1, 2)
    ax.plot(alpha, 1.0 - alpha, color="0.65", lw=1, ls=":", label="Id (perfect privacy)")
    curve = _pure_curve if laplace else _zcdp_curve
    ax.plot(alpha, curve(one, alpha), color="0.45", lw=1.3, ls="-.",
            label=f"one query alone (largest c_q): {sym} = {one:.4g}")
    ax.plot(alpha, curve(spent, alpha), color="#0b5cad", lw=2.2,
            label=f"THIS RELEASE (overlap accounting): {sym} = {spent:.4g}")
    ax.plot(alpha, curve(seq, alpha), color="#c2410c", lw=1.8,
            label=f"same noise, sequential composition: {sym} = {seq:.4g}")
    if not laplace:
        mu = math.sqrt(2.0 * spent)
        ax.plot(alpha, GaussianDP(mu)(alpha), color="#0b5cad", lw=1.2, ls="--",
                label=f"reference only: continuous Gaussian, μ = √(2ρ) = {mu:.4g} "
                      "(not proven for the discrete Gaussian)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("type I error α of a test 'is the individual in the data?'")
    ax.set_ylabel("smallest type II error β = f(α)")
    ax.set_title("Trade-off curves implied by the guarantees\n(higher = more private)",
                 fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8, frameon=False)

    deltas = (1e-12, 1e-2)
    grid = np.geomspace(*deltas, 60)
    drawn: list[float] = []
    if laplace:
        for value, colour, lw, text in (
                (spent, "#0b5cad", 2.2, f"THIS RELEASE: ε = {spent:.4g} for every δ ≥ 0"),
                (seq, "#c2410c", 1.8, f"same noise, sequential composition: ε = {seq:.4g}")):
            bx.plot(grid, np.full_like(grid, value), color=colour, lw=lw, label=text)
            drawn.append(value)
    else:
        for value, colour, lw, text in (
                (spent, "#0b5cad", 2.2, f"THIS RELEASE, from ρ = {spent:.4g}"),
                (seq, "#c2410c", 1.8, f"same noise, sequential composition, from ρ = {seq:.4g}")):
            x, y = _zcdp_profile(value, deltas)
            bx.plot(x, y, color=colour, lw=lw, label=text)
            drawn.extend(y)
    pts = [g for g in gs if g.definition is Definition.APPROX]
    if pts:
        bx.scatter([g.delta for g in pts], [g.epsilon for g in pts], color="black", zorder=5,
                   s=18, label="(ε, δ) stated in the certificate")
        drawn.extend(float(g.epsilon or 0.0) for g in pts)
    bx.set_xscale("log")
    bx.set_xlim(*deltas)
    positive = [v for v in drawn if v > 0]
    if positive and max(positive) / min(positive) > 30:
        bx.set_yscale("log")
    else:
        bx.set_ylim(0, (max(positive) if positive else 1.0) * 1.12)
    bx.set_xlabel("δ")
    bx.set_ylabel("ε such that the release is (ε, δ)-DP")
    bx.set_title("Privacy profile (lower = more private)", fontsize=11)
    bx.grid(alpha=0.3, which="both")
    bx.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8, frameon=False)
    fig.subplots_adjust(left=0.06, right=0.98, bottom=0.26, top=0.92, wspace=0.25)
    if laplace:
        caption = (
            "Left: the trade-off function f_{ε,0} of ε-DP (Dong, Roth, Su 2019): any test of "
            "whether one individual's row is in the data, with type I error α, has type II "
            "error at least f(α). Blue: this release's proven ε; orange: the ε the same noise "
            "would cost under sequential composition (Σ_q c_q); grey: one query alone. These "
            "are the curves of the stated pure-DP guarantees; the discrete Laplace's own curve "
            "lies on or above them. Right: pure ε-DP implies (ε, δ)-DP for every δ; the dots are "
            "the (ε, δ) stated in the certificate (which can be tighter than ε when the "
            "composed discrete-Laplace privacy loss is accounted by its distribution).")
    else:
        caption = (
            "Left: a safe lower bound on the trade-off function implied by ρ-zCDP (Bun and "
            "Steinke 2016, Prop. 1.3, as the envelope of (ε, δ(ε))-DP): any test of whether "
            "one individual's row is in the data, with type I error α, has type II error at "
            "least this. Blue: this release's proven ρ; orange: the ρ the same noise would cost "
            "under sequential composition (Σ_q c_q); grey: one query alone. The dashed blue "
            "curve is the exact curve of a continuous Gaussian with the same σ's: a "
            "reference, not a guarantee for the discrete Gaussian that ran. Right: ε(δ) by "
            "the Canonne–Kamath–Steinke conversion (CKS20 Cor. 13), the one the certificate "
            "uses; the dots are the certificate's stated (ε, δ).")
    return _img(fig, "trade-off curves and privacy profile"), caption


def noise_figure(plan: NoisePlan, ratio: float) -> tuple[str, str]:
    """Sorted noise scale (this plan and the sequential-composition equivalent) and sorted 95%
    half-widths, subsampled."""
    released = np.isfinite(plan.scales)
    scales = np.sort(plan.scales[released])[::-1]
    widths = np.sort(plan.halfwidths[released].astype(np.float64))[::-1]
    laplace = plan.mechanism == DISCRETE_LAPLACE
    param = "scale b" if laplace else "σ"
    fig = _figure(11.0, 3.9)
    ax, bx = fig.subplots(1, 2)
    x, y = _curve_sample(scales)
    ax.plot(x, y, color="#0b5cad", lw=2, marker="o" if x.size <= 60 else None, ms=3,
            label=f"this release ({param})")
    if ratio > 0 and math.isfinite(ratio):
        ax.plot(x, y / ratio, color="#c2410c", lw=1.6, ls="--",
                label=f"sequential composition, same total budget ({param} ÷ {ratio:.3g})")
    ax.set_xlabel("queries, sorted by noise (rank)")
    ax.set_ylabel(f"noise {param}")
    ax.set_title(f"Noise {param} per query", fontsize=11)
    x, y = _curve_sample(widths)
    bx.plot(x, y, color="#0b5cad", lw=2, marker="o" if x.size <= 60 else None, ms=3,
            label="exact 95% half-width of the noise")
    bx.set_xlabel("queries, sorted by noise (rank)")
    bx.set_ylabel("± counts (95%)")
    bx.set_title("95% noise half-width per query", fontsize=11)
    for a, v in ((ax, np.concatenate([scales, scales / ratio]) if ratio > 0 else scales),
                 (bx, widths)):
        positive = v[v > 0]
        if positive.size and positive.max() / positive.min() > 50:
            a.set_yscale("log")
        else:
            a.set_ylim(0, float(v.max()) * 1.15 if v.size and v.max() > 0 else 1)
        if scales.size > 1:
            a.set_xlim(1, scales.size)
        a.grid(alpha=0.3, which="both")
        a.legend(loc="best", fontsize=8)
    fig.subplots_adjust(left=0.065, right=0.985, bottom=0.14, top=0.91, wspace=0.2)
    n = int(released.sum())
    sub = (f" Curves drawn at {CURVE_POINTS:,} of the {n:,} sorted values (extremes kept)."
           if n > CURVE_POINTS else "")
    caption = (
        f"Left: the noise {param} of each released query, largest first, and (dashed) the "
        f"{param} that sequential composition would need for the same allocation shape and "
        f"the same total budget (section 5). Right: the exact 95% half-width of the discrete "
        f"noise: each noisy answer is within ± this of the exact count with probability 95% "
        f"(noise only; no sampling or measurement error)." + sub)
    return _img(fig, "noise per query"), caption


def answers_figure(release: ReleaseView, shown: npt.NDArray[np.int64],
                   post: bool = True) -> tuple[str, str]:
    """Left: noisy answers ± 95% half-width (and, with ``post``, post-processed answers —
    indexed like the measured queries only when W itself was measured); right: the same
    intervals centred on the noisy answer, where the noise is visible whatever the counts."""
    plan = release.plan
    names = [_mpl_label(plan.workload.name_of(int(i))) for i in shown]
    noisy = release.noisy[shown].astype(np.float64)
    hw = plan.halfwidths[shown].astype(np.float64)
    n = shown.size
    height = max(3.0, 0.26 * n + 1.9)
    fig = _figure(11.0, height)
    longest = max((len(t.replace(r"\$", "$")) for t in names), default=4)
    left = min(0.36, (0.25 + 0.064 * longest) / 11.0)
    grid = fig.add_gridspec(1, 2, width_ratios=(1.6, 1.0), left=left, right=0.985,
                            bottom=0.95 / height, top=1.0 - 0.45 / height, wspace=0.06)
    ax = fig.add_subplot(grid[0, 0])
    bx = fig.add_subplot(grid[0, 1], sharey=ax)
    y = np.arange(n)[::-1].astype(np.float64)
    blue = "#0b5cad"
    ax.errorbar(noisy, y, xerr=hw, fmt="o", color=blue, ecolor=blue, ms=4, capsize=3, lw=1.3,
                label="noisy answer ± 95% noise half-width")
    bx.errorbar(np.zeros(n), y, xerr=hw, fmt="o", color=blue, ecolor=blue, ms=4, capsize=3,
                lw=1.3)
    markers = ("D", "x", "s", "^")
    colours = ("#c2410c", "#2da44e", "#8250df", "#57606a")
    for k, (step, values) in enumerate(release.postprocessed.items() if post else ()):
        style = {"ls": "none", "marker": markers[k % 4], "ms": 5, "color": colours[k % 4],
                 "mfc": "none" if k == 0 else colours[k % 4]}
        ax.plot(values[shown], y, label=f"after post-processing: {step}", **style)
        bx.plot(values[shown] - noisy, y, **style)
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=8)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("count")
    ax.grid(alpha=0.3, axis="x")
    ax.set_title(f"First {n} released queries (workload order)", fontsize=11)
    bx.tick_params(axis="y", labelleft=False)
    bx.axvline(0.0, color="0.5", lw=0.8)
    bx.set_xlabel("difference from the noisy answer (counts)")
    bx.grid(alpha=0.3, axis="x")
    bx.set_title("95% noise interval, centred", fontsize=11)
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda i: not labels[i].startswith("noisy"))
    fig.legend([handles[i] for i in order], [labels[i] for i in order], loc="lower center",
               ncol=3, fontsize=8, frameon=False, bbox_to_anchor=(0.5 * (left + 0.985), 0.0))
    caption = (
        "Left: each noisy answer ± the exact 95% half-width of the discrete noise that was "
        "added (the interval covers the exact count with probability 95%). Right: the same "
        "intervals centred on the noisy answer, so that they are visible at any count; "
        "post-processed answers are drawn as their difference from the noisy one. Long "
        "names are shortened here; the table below has them in full.")
    return _img(fig, "answers with 95% noise intervals"), caption

