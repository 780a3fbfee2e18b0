"""A self-contained HTML report of a release, for a disclosure-review team (docs/theory.md §3,
§7, §9).

:func:`write_report` writes ONE file: inline CSS, figures as base64 PNG ``data:`` URIs, no
script, no external resource — it can be archived, mailed and opened offline. Its sections:

1. header — private or a red **NOT PRIVATE** banner (seeded randomness), library version, times;
2. the guarantees (definition, parameter, neighbour relation, exact or upper bound), the
   mechanism that actually ran, and what is *not* proven;
3. the workload: queries, attributes used, scopes;
4. the overlap structure: γ_w (exact or a proven upper bound), the witness row and the queries
   it touches, and how the budget was split (allocation, spent vs total, sequential cost);
5. the utility gain over sequential composition (the formula is stated in the report);
6. a figure of the trade-off curves and the (ε, δ) profile the guarantees imply;
7. a figure of the noise per query (sorted);
8. the answers with their 95% noise intervals (a figure of the first 50) and a table.

Every user-supplied string (query names, attribute values) is HTML-escaped, and drawn by
matplotlib with mathtext off, so a name can neither inject markup nor break a figure. Figures
are subsampled, so a report of 10⁵ queries takes about a second.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import math
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
import numpy.typing as npt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from tessera import __version__
from tessera.accounting.guarantee import Guarantee
from tessera.accounting.tradeoff import EpsDelta, GaussianDP
from tessera.accounting.zcdp import delta_for_epsilon
from tessera.privacy import Definition, Neighbours
from tessera.release.budget import DISCRETE_LAPLACE
from tessera.release.plan import NoisePlan
from tessera.workload import WorkloadStats

if TYPE_CHECKING:
    from tessera.release.answer import Release

__all__ = ["MAX_TABLE_ROWS", "MAX_PLOTTED_ANSWERS", "render_report", "write_report"]

#: Rows of the per-query table (the full answers are in the release's CSV/Parquet file).
MAX_TABLE_ROWS = 2000
#: Queries drawn with error bars.
MAX_PLOTTED_ANSWERS = 50
#: Points of a sorted per-query curve (the extremes are always kept).
_CURVE_POINTS = 2000
#: Queries listed for the witness row.
_MAX_WITNESS_QUERIES = 100
#: exp(ε) overflows a float beyond ε ≈ 709; trade-off curves are drawn at min(ε, this).
_EPS_DRAW_CAP = 700.0
_LABEL_CHARS = 48

_DEFINITIONS = {
    Definition.PURE: (
        "pure ε-differential privacy: for every pair of neighbouring data sets D, D′ and every "
        "set S of outputs, P[M(D) ∈ S] ≤ e^ε · P[M(D′) ∈ S] (Dwork, McSherry, Nissim, Smith "
        "2006)."),
    Definition.APPROX: (
        "(ε, δ)-differential privacy: for every pair of neighbouring data sets D, D′ and every "
        "set S of outputs, P[M(D) ∈ S] ≤ e^ε · P[M(D′) ∈ S] + δ."),
    Definition.ZCDP: (
        "ρ-zero-concentrated differential privacy: for every pair of neighbouring data sets "
        "D, D′ and every order α > 1, the Rényi divergence D_α(M(D) ‖ M(D′)) ≤ ρ·α (Bun and "
        "Steinke 2016). It implies (ε, δ)-DP for every δ > 0 (Canonne, Kamath, Steinke 2020)."),
    Definition.GDP: (
        "μ-Gaussian differential privacy: distinguishing M(D) from M(D′) is at least as hard "
        "as distinguishing N(0, 1) from N(μ, 1) (Dong, Roth, Su 2019)."),
    Definition.FDP: (
        "f-differential privacy: every test of M(D) against M(D′) with type I error α has "
        "type II error at least f(α)."),
}
_NEIGHBOURS = {
    Neighbours.ADD_REMOVE: (
        "add/remove one row: D′ is D with one individual's row added or removed (unbounded "
        "DP); each counting query changes by at most 1."),
    Neighbours.SUBSTITUTE: (
        "substitute one row: D′ is D with one individual's row replaced by another (bounded "
        "DP); a row moving from x to y changes the queries in I(x) Δ I(y)."),
}

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;
 color:#1b1b1b;background:#fff;margin:0;line-height:1.45;font-size:15px}
main{max-width:1120px;margin:0 auto;padding:18px 28px 40px}
h1{font-size:26px;margin:6px 0 4px}
h2{font-size:20px;margin:30px 0 10px;padding-bottom:4px;border-bottom:2px solid #d0d7de}
h3{font-size:16px;margin:18px 0 6px}
p,li{max-width:90ch}
code,.mono{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:13px}
.banner{font-weight:700;text-align:center;border-radius:6px;padding:14px 18px;margin:12px 0}
.banner.notprivate{background:#b00020;color:#fff;font-size:30px;letter-spacing:.5px}
.banner.notprivate small{display:block;font-size:15px;font-weight:400;margin-top:4px}
.banner.private{background:#e6f4ea;color:#0d5222;border:2px solid #0d5222;font-size:18px}
.summary{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.card{flex:1 1 200px;border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;
 background:#f6f8fa}
.card .k{font-size:12.5px;color:#57606a}
.card .v{font-size:19px;font-weight:600;word-break:break-word}
table{border-collapse:collapse;margin:6px 0 12px;font-size:13.5px}
th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f0f3f6;font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.kv th{min-width:260px;max-width:340px}
.wrap{overflow-x:auto;max-width:100%}
td.name{max-width:380px;overflow-wrap:anywhere}
td.name .sql{display:block;color:#57606a;font-size:12px}
tr.hit td{background:#fff8c5}
.note{color:#57606a;font-size:13px}
.warn{background:#fff1f0;border-left:4px solid #b00020;padding:8px 12px;margin:8px 0}
.ok{background:#f0f7f1;border-left:4px solid #2da44e;padding:8px 12px;margin:8px 0}
.formula{background:#f6f8fa;border:1px solid #d0d7de;border-radius:4px;padding:8px 12px;
 font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:13px;white-space:pre-wrap}
figure{margin:10px 0 16px}
figure img{max-width:100%;height:auto;border:1px solid #d0d7de}
figcaption{font-size:13px;color:#57606a;max-width:100ch}
nav ol{columns:2;font-size:14px}
footer{margin-top:36px;font-size:12px;color:#57606a;border-top:1px solid #d0d7de;
 padding-top:8px}
"""


# -- small helpers -------------------------------------------------------------------------

def _e(value: Any) -> str:
    """HTML-escaped text of anything (every user string goes through here)."""
    return html.escape(str(value), quote=True)


def _num(x: float | int | None, digits: int = 6) -> str:
    if x is None:
        return "—"
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    x = float(x)
    if math.isnan(x):
        return "—"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.{digits}g}"


def _big(n: int) -> str:
    """An exact integer of any size: with separators, or as ≈ m × 10^k when long."""
    n = int(n)
    if abs(n) < 10**15:
        return f"{n:,}"
    k = len(str(abs(n))) - 1
    return f"≈ {int(str(abs(n))[:3]) / 100:.2f} × 10^{k}"


def _count(x: float, whole: bool) -> str:
    """A (possibly post-processed, non-integer) count with thousands separators."""
    if not math.isfinite(x):
        return _num(x)
    return f"{int(x):,}" if whole else f"{x:,.2f}"


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f}%"


def _kv(rows: Iterable[tuple[str, str]], raw: bool = False) -> str:
    """A two-column table; values are escaped unless ``raw`` (then they are built HTML)."""
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v if raw else _e(v)}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>'


def _table(head: Sequence[str], rows: Iterable[Sequence[str]],
           numeric: frozenset[int] | set[int] = frozenset(),
           classes: Sequence[str] | None = None, name_column: int | None = None) -> str:
    """A table whose cells are already-escaped HTML; ``numeric`` columns are right-aligned,
    ``classes`` are row classes, ``name_column`` wraps long names."""
    ths = "".join(f"<th>{_e(h)}</th>" for h in head)
    kinds = {j: ' class="n"' for j in numeric}
    if name_column is not None:
        kinds[name_column] = ' class="name"'
    out = []
    for i, row in enumerate(rows):
        cls = f' class="{classes[i]}"' if classes is not None and classes[i] else ""
        tds = "".join(f"<td{kinds.get(j, '')}>{c}</td>" for j, c in enumerate(row))
        out.append(f"<tr{cls}>{tds}</tr>")
    return f'<div class="wrap"><table><thead><tr>{ths}</tr></thead><tbody>{"".join(out)}' \
           "</tbody></table></div>"


def _short(text: str, limit: int = _LABEL_CHARS) -> str:
    """A name on one line, at most ``limit`` characters (escape it for HTML separately)."""
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _mpl_label(text: str) -> str:
    """A user string as a matplotlib label: every '$' escaped, so a name can never switch on
    mathtext (an unbalanced or hostile '$…$' would otherwise fail to draw)."""
    return _short(text).replace("$", r"\$")


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


def _img(fig: Figure, alt: str) -> str:
    """The figure as an inline PNG ``<img>`` (no file, no URL). One Agg draw, encoded by
    Pillow (matplotlib's own dependency) as RGB: ``savefig`` would draw a second time."""
    canvas = fig.canvas
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing glyphs of exotic names: drawn as boxes
        canvas.draw()
    rgb = np.ascontiguousarray(np.asarray(canvas.buffer_rgba())[..., :3])
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="png", compress_level=6)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    h, w = rgb.shape[:2]
    return f'<img src="data:image/png;base64,{data}" alt="{_e(alt)}" width="{w}" height="{h}">'


def _curve_sample(values: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64],
                                                             npt.NDArray[np.float64]]:
    """(rank, value) of a sorted array, at most :data:`_CURVE_POINTS` points, ends kept."""
    n = values.size
    if n <= _CURVE_POINTS:
        idx = np.arange(n)
    else:
        idx = np.unique(np.linspace(0, n - 1, _CURVE_POINTS).round().astype(np.int64))
    return idx.astype(np.float64) + 1.0, values[idx]


# -- figures --------------------------------------------------------------------------------

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


def _privacy_figure(plan: NoisePlan, gs: Sequence[Guarantee]) -> tuple[str, str]:
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


def _noise_figure(plan: NoisePlan, ratio: float) -> tuple[str, str]:
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
    sub = (f" Curves drawn at {_CURVE_POINTS:,} of the {n:,} sorted values (extremes kept)."
           if n > _CURVE_POINTS else "")
    caption = (
        f"Left: the noise {param} of each released query, largest first, and (dashed) the "
        f"{param} that sequential composition would need for the same allocation shape and "
        f"the same total budget (section 5). Right: the exact 95% half-width of the discrete "
        f"noise: each noisy answer is within ± this of the exact count with probability 95% "
        f"(noise only; no sampling or measurement error)." + sub)
    return _img(fig, "noise per query"), caption


def _answers_figure(release: Release, shown: npt.NDArray[np.int64]) -> tuple[str, str]:
    """Left: noisy answers ± 95% half-width (and post-processed answers); right: the same
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
    for k, (step, values) in enumerate(release.postprocessed.items()):
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


# -- sections -------------------------------------------------------------------------------

def _header(release: Release, now: str, gs: Sequence[Guarantee]) -> str:
    cert = release.certificate
    plan = release.plan
    if release.private:
        banner = ('<div class="banner private">Private release: noise from OpenDP\'s secure '
                  "sampler</div>")
    else:
        banner = ('<div class="banner notprivate">NOT PRIVATE (seeded test randomness)<small>'
                  "The noise came from a seeded, reproducible generator: anyone with the seed "
                  "can remove it. None of the guarantees below apply to these numbers. Do not "
                  "publish.</small></div>")
    head = gs[0]
    cards = [
        ("Guarantee", head.definition.label + ", " + head.parameter_text()),
        ("Neighbours", plan.neighbours.label),
        ("Queries", f"{len(plan.workload):,}"),
        ("γ_w (" + ("exact" if plan.overlap.exact else "upper bound") + ")",
         _num(plan.overlap.bound)),
    ]
    card_html = "".join(f'<div class="card"><div class="k">{_e(k)}</div>'
                        f'<div class="v">{_e(v)}</div></div>' for k, v in cards)
    meta = _kv([
        ("Library", f"tessera-dp {__version__}"),
        ("Report generated", now),
        ("Release certified at", str(cert.get("created", "—"))),
        ("Budget requested", plan.budget.text()),
        ("Certificate digest (SHA-256)", str(cert.get("digest", "—"))),
        ("Workload SHA-256", str(cert.get("workload", {}).get("sha256", "—"))),
    ])
    nav = ("<nav><ol>"
           '<li><a href="#guarantee">Privacy guarantee and mechanism</a></li>'
           '<li><a href="#workload">Workload</a></li>'
           '<li><a href="#overlap">Overlap structure and budget split</a></li>'
           '<li><a href="#gain">Utility gain over sequential composition</a></li>'
           '<li><a href="#tradeoff">Trade-off curves</a></li>'
           '<li><a href="#noise">Noise per query</a></li>'
           '<li><a href="#answers">Answers</a></li>'
           "</ol></nav>")
    return (f"<header><h1>Tessera release report</h1>{banner}"
            f'<div class="summary">{card_html}</div>{meta}{nav}</header>')


def _guarantee_section(release: Release, gs: Sequence[Guarantee]) -> str:
    plan = release.plan
    cert = release.certificate
    rows = [[_e(g.definition.label), _e(g.parameter_text()), _e(g.neighbours.label),
             _e(g.basis), _e(g.note or "")] for g in gs]
    table = _table(["definition", "parameter", "neighbour relation", "basis", "how"], rows)
    defs = list(dict.fromkeys([g.definition for g in gs] + [plan.budget.definition]))
    proven = {g.definition for g in gs}
    glossary = "".join(
        f"<li><b>{_e(d.label)}</b> — {_e(_DEFINITIONS[d])}"
        + ("" if d in proven else " <b>Requested as the target only: not proven for the "
           "mechanism that ran (see below).</b>") + "</li>" for d in defs)
    glossary += (f"<li><b>Neighbours: {_e(plan.neighbours.label)}</b> — "
                 f"{_e(_NEIGHBOURS[plan.neighbours])}</li>")
    mech = cert.get("mechanism", {})
    laplace = plan.mechanism == DISCRETE_LAPLACE
    mech_rows = [
        ("Mechanism that ran", release.mechanism.describe()),
        ("Distribution", "discrete Laplace (integer noise, P[Z = z] ∝ exp(−|z|/b))" if laplace
         else "discrete Gaussian (integer noise, P[Z = z] ∝ exp(−z²/(2σ²)))"),
        ("Randomness", str(mech.get("randomness", "OpenDP secure" if release.private
                                    else "seeded (NOT PRIVATE)"))),
        ("Sensitivity", "1 per counting query (one row changes a count by at most 1)"),
        ("Calibrated as", f"{plan.budget.calibration.label}, total {_num(plan.total, 10)} "
                          f"(requested: {plan.budget.text()})"),
    ]
    not_proven = [str(x) for x in cert.get("not_proven", [])]
    items = [f"<li>{_e(x)}</li>" for x in not_proven]
    if not release.private:
        items.insert(0, "<li><b>Nothing at all for these numbers:</b> the noise is seeded test "
                        "randomness (NOT PRIVATE). The guarantees describe what the same plan "
                        "would give with OpenDP's secure sampler.</li>")
    if not plan.spent_exact:
        items.append("<li>The spent budget is a proven <i>upper bound</i>, not an exact value: "
                     "the true cost may be lower (never higher).</li>")
    scope = (
        "<li>Scope of every guarantee: one individual contributes at most one row, under the "
        f"relation <i>{_e(plan.neighbours.label)}</i>; groups of k rows, or other releases on "
        "the same data, are not covered except through composition (a budget ledger) or group "
        "privacy.</li>"
        "<li>The 95% intervals describe the added noise only, not sampling, coverage or "
        "measurement error of the data.</li>")
    if not not_proven:
        lead = ("<p>The certificate lists nothing as not proven about the plan: every "
                "guarantee in the table is a theorem about its mechanism. Limits that apply:</p>")
    else:
        lead = "<p>Stated as <b>not proven</b> by the certificate, and limits that apply:</p>"
    return (
        '<section id="guarantee"><h2>1. Privacy guarantee and mechanism</h2>'
        "<p>The mechanism that ran provably satisfies every guarantee below, for the "
        "neighbour relation named (rows after the first are conversions of it; quote the one "
        "your policy is written in):</p>"
        f"{table}<h3>Definitions</h3><ul>{glossary}</ul>"
        f"<h3>The mechanism that actually ran</h3>{_kv(mech_rows)}"
        f"<h3>What is not proven</h3>{lead}<ul>{''.join(items)}{scope}</ul></section>")


def _workload_section(release: Release, stats: WorkloadStats) -> str:
    wl = release.workload
    released = int(np.isfinite(release.plan.scales).sum())
    dom = wl.domain
    rows = [
        ("Queries", f"{stats.n_queries:,}"),
        ("Released (noisy answer published)", f"{released:,}"),
        ("Withheld (weight 0: no budget, no answer)", f"{stats.n_queries - released:,}"),
        ("Range queries", f"{stats.n_range_queries:,}"),
        ("Total weight", _num(stats.total_weight)),
        ("Weights", "all equal" if len(set(wl.weights) | {f.weight for f in wl.partitions}) <= 1
         else "unequal"),
        ("Structured families", f"{len(wl.partitions):,} ({wl.n_cells:,} cells)"),
        ("Attributes in the schema", f"{len(dom)} (domain size {_big(dom.size)})"),
        ("Attributes used by the workload", f"{len(stats.attributes_used)}"),
    ]
    if stats.contradictions:
        rows.append(("Contradictions (always 0)", f"{len(stats.contradictions):,}"))
    if stats.tautologies:
        rows.append(("Tautologies (count every row)", f"{len(stats.tautologies):,}"))
    if stats.duplicates:
        rows.append(("Groups of duplicate queries", f"{len(stats.duplicates):,}"))
    attrs = _table(
        ["attribute", "values in the schema", "queries constraining it"],
        [[_e(a), _num(dom[a].size), _num(n)] for a, n in stats.attributes_used.items()],
        numeric={1, 2})
    scopes = sorted(wl.scopes().items(), key=lambda kv: (-len(kv[1]), kv[0]))
    shown = scopes[:20]
    scope_rows = [[_e(", ".join(s) if s else "(none: whole table)"), _num(len(s)),
                   _num(len(ix)), _e(_short(wl.names[ix[0]], 60))] for s, ix in shown]
    scope_table = _table(["scope (attributes constrained)", "size", "queries", "e.g."],
                         scope_rows, numeric={1, 2})
    more = (f'<p class="note">{len(scopes) - len(shown):,} more scopes not listed.</p>'
            if len(scopes) > len(shown) else "")
    sizes = ", ".join(f"{k}-way: {v:,}" for k, v in stats.scope_sizes.items())
    return (
        '<section id="workload"><h2>2. Workload</h2>'
        f"{_kv(rows)}<h3>Attributes used</h3>{attrs}"
        f"<h3>Scopes</h3><p>Queries by number of constrained attributes: {_e(sizes)}.</p>"
        f"{scope_table}{more}</section>")


def _overlap_section(release: Release, stats: WorkloadStats) -> str:
    plan = release.plan
    ov = plan.overlap
    wl = plan.workload
    dom = wl.domain
    status = "exact" if ov.exact else "proven upper bound"
    rows = [
        ("γ_w (calibration value)", f"{_num(ov.bound, 10)} ({status})"),
        ("Achieved by the witness row (lower bound)", _num(ov.achieved, 10)),
        ("Composition measured in", ov.comp.label),
        ("Neighbour relation", ov.neighbours.label),
        ("Solver", ov.method),
        ("Sequential figure comp(Q)", _num(ov.sequential, 10)),
    ]
    what = ("the largest total weight of queries a single row can be counted in"
            if ov.neighbours is Neighbours.ADD_REMOVE else
            "the largest total weight of queries that change when one row is replaced")
    text = (f"<p>γ_w is {_e(what)} (for unit weights: the number of such queries). The noise "
            "is calibrated to γ_w rather than to the number of queries: a row outside a query "
            "does not change it, so only the queries one row can touch compose.</p>")
    witness_html = '<p class="note">No witness row was recorded by the solver.</p>'
    if ov.witness is not None:
        used = set(stats.attributes_used)
        xs = ov.witness.x
        ys = ov.witness.y
        head = ["attribute", "value (row x)"] + (["value (row y)"] if ys is not None else [])
        wrows, classes = [], []
        for j, a in enumerate(dom):
            row = [_e(a.name), _e(a.label(xs[j]))]
            if ys is not None:
                row.append(_e(a.label(ys[j])))
            wrows.append(row)
            classes.append("hit" if a.name in used else "")
        touched = list(ov.witness.queries)
        names = ", ".join(f"<code>{_e(wl.name_of(i))}</code>"
                          for i in touched[:_MAX_WITNESS_QUERIES])
        extra = (f" … and {len(touched) - _MAX_WITNESS_QUERIES:,} more"
                 if len(touched) > _MAX_WITNESS_QUERIES else "")
        kind = ("the queries it is counted in, I(x)" if ys is None else
                "the queries that change when x is replaced by y, I(x) Δ I(y)")
        short = ", ".join(f"{a.name} = {a.label(xs[j])}" for j, a in enumerate(dom)
                          if a.name in used)
        if ys is not None:
            short += " → " + ", ".join(f"{a.name} = {a.label(ys[j])}" for j, a in enumerate(dom)
                                       if a.name in used and ys[j] != xs[j])
        witness_html = (
            "<h3>Witness row</h3><p>A row of the domain (not necessarily of the data: it is "
            "computed from the schema and the workload alone) that attains "
            f"{_num(ov.achieved, 8)}: <code>{_e(short)}</code>. The table has every attribute; "
            "highlighted: attributes the workload uses.</p>"
            f"{_table(head, wrows, classes=classes)}"
            f"<p>{_e(kind[0].upper() + kind[1:])}: {len(touched):,} queries.</p>"
            f"<p>{names}{_e(extra)}</p>")
    costs = plan.costs[np.isfinite(plan.scales)]
    sym = "ε" if plan.mechanism == DISCRETE_LAPLACE else "ρ"
    split = [
        ("Allocation", plan.allocation),
        ("Method", plan.method),
        (f"Total budget ({sym})", _num(plan.total, 10)),
        ("Spent (re-checked max over one neighbour change of Σ c_q)",
         f"{_num(plan.spent, 10)} ({'exact' if plan.spent_exact else 'proven upper bound'}; "
         f"{_pct(plan.spent / plan.total) if plan.total > 0 else '—'} of the total)"),
        ("Sequential cost of the same noise (Σ_q c_q)",
         f"{_num(plan.sequential, 10)} ({_num(plan.sequential / plan.total, 4)} × the total)"),
    ]
    if costs.size:
        split.append(("Per-query cost c_q: min / median / max",
                      f"{_num(costs.min())} / {_num(float(np.median(costs)))} / "
                      f"{_num(costs.max())}"))
    if release.charge is not None:
        ch = release.charge
        split.append(("Ledger", f"release {ch.release_id}: spent before {_num(ch.spent_before)}, "
                                f"after {_num(ch.spent_after)} "
                                f"({'exact' if ch.exact else 'upper bound'})"))
    formula = ("c_q = 1/b_q (discrete Laplace, in ε)" if sym == "ε"
               else "c_q = 1/(2σ_q²) (discrete Gaussian, in ρ)")
    return (
        '<section id="overlap"><h2>3. Overlap structure and budget split</h2>'
        f"{text}{_kv(rows)}{witness_html}<h3>How the budget was split</h3>"
        f"<p>Per-query cost {_e(formula)}. After calibration the plan is re-checked: the costs "
        "of the queries one neighbour change can touch add up to at most the total.</p>"
        f"{_kv(split)}</section>")


def _gain(plan: NoisePlan) -> tuple[float, float]:
    """(k, r): k = Σ c_q / total; r = this plan's noise scale ÷ the sequential one."""
    total, seq = plan.total, plan.sequential
    if total <= 0 or seq <= 0:
        return 1.0, 1.0
    k = seq / total
    return k, (1.0 / k if plan.mechanism == DISCRETE_LAPLACE else 1.0 / math.sqrt(k))


def _gain_section(plan: NoisePlan) -> str:
    k, r = _gain(plan)
    laplace = plan.mechanism == DISCRETE_LAPLACE
    var = r * r
    ov = plan.overlap
    # U from the overlap figures alone, in noise-scale terms: scale ∝ 1/ε_q (pure) or 1/μ_q
    # (GDP), so U = 1 − γ_w/comp(Q); σ ∝ ρ_q^(−1/2) under zCDP, so U = 1 − √(γ_w/comp(Q)).
    ratio = ov.bound / ov.sequential if ov.sequential > 0 else 1.0
    zcdp = ov.comp is Definition.ZCDP
    u = 1.0 - (math.sqrt(ratio) if zcdp else ratio)
    u_text = "U = 1 − √(γ_w / comp(Q))" if zcdp else "U = 1 − γ_w / comp(Q)"
    weights = {"uniform": "unit weights", "importance": "unit weights"}.get(
        plan.allocation, "the workload's weights")
    formula = (
        "Sequential composition charges every query: it needs Σ_q c_q ≤ B (B = total budget).\n"
        "Keeping this plan's allocation shape, every cost c_q would be scaled by B / Σ_q c_q:\n"
        f"  k = Σ_q c_q / B = {_num(plan.sequential, 8)} / {_num(plan.total, 8)} = {_num(k, 6)}\n"
        + ("  scale ratio r = b_q(this release) / b_q(sequential) = 1/k     "
           "(discrete Laplace: c_q = 1/b_q)\n" if laplace else
           "  scale ratio r = σ_q(this release) / σ_q(sequential) = 1/√k    "
           "(discrete Gaussian: c_q = 1/(2σ_q²))\n")
        + f"  r = {_num(r, 6)}    noise reduction 1 − r = {_pct(1.0 - r)}    "
          f"variance ratio r² = {_num(var, 6)}\n"
        + ("Uniform case (one row touches γ of the t queries): 1 − r = 1 − γ/t."
           if laplace else
           "Uniform case (one row touches γ of the t queries): 1 − r = 1 − √(γ/t)."))
    if r < 1.0:
        lead = (f"at the same total budget, sequential composition would need noise "
                f"{_num(1.0 / r, 4)}× larger on every query:")
    else:
        lead = ("here the overlap accounting gives no gain: one neighbour change can touch "
                "(up to the proven bound) as much as all queries together.")
    cards = [("noise scale, relative to sequential", _pct(r)),
             ("noise reduction 1 − r", _pct(1.0 - r)),
             ("variance, relative to sequential", _pct(var)),
             (u_text, _pct(u))]
    card_html = "".join(f'<div class="card"><div class="k">{_e(c)}</div>'
                        f'<div class="v">{_e(v)}</div></div>' for c, v in cards)
    return (
        '<section id="gain"><h2>4. Utility gain over sequential composition</h2>'
        "<p>The same per-query noise, accounted by sequential composition (every query "
        "charged), would cost Σ_q c_q; accounting by overlap charges only what one neighbour "
        f"change can touch. Equivalently, {_e(lead)}</p>"
        f'<div class="summary">{card_html}</div>'
        f'<div class="formula">{_e(formula)}</div>'
        f'<p class="note">{_e(u_text)} is the same gain computed from the overlap figures '
        f"alone (γ_w = {_num(ov.bound, 8)}, comp(Q) = {_num(ov.sequential, 8)}, in "
        f"{_e(ov.comp.label)}, with {_e(weights)}); r is computed from the per-query costs "
        "that actually ran. The two agree for a uniform allocation.</p>"
        "</section>")


def _answers_section(release: Release) -> str:
    plan = release.plan
    wl = plan.workload
    n = wl.n_queries
    released = np.flatnonzero(np.isfinite(plan.scales))
    shown = released[:MAX_PLOTTED_ANSWERS]
    fig = ""
    if shown.size:
        img, cap = _answers_figure(release, shown)
        fig = f"<figure>{img}<figcaption>{_e(cap)}</figcaption></figure>"
    laplace = plan.mechanism == DISCRETE_LAPLACE
    param = "b" if laplace else "σ"
    post = list(release.postprocessed)
    head = (["#", "query (name; WHERE clause below when different)", "weight", param, "c_q",
             "± 95%", "noisy answer", "95% interval"] + [f"after {p}" for p in post])
    rows = []
    m = min(n, MAX_TABLE_ROWS)
    # a column of whole numbers is printed as integers, any other with 2 decimals throughout
    post_values = [(v, bool(np.all(np.mod(v[np.isfinite(v)], 1.0) == 0.0)))
                   for v in release.postprocessed.values()]
    for i in range(m):
        name = wl.name_of(i)
        sql = wl.queries[i].to_sql(wl.domain) if i < len(wl.queries) else name
        cell = _e(name) + (f'<span class="sql">{_e(sql)}</span>' if sql != name else "")
        if np.isfinite(plan.scales[i]):
            hw = int(plan.halfwidths[i])
            ans = int(release.noisy[i])
            vals = [_num(plan.scales[i]), _num(float(plan.costs[i])), _num(hw), _num(ans),
                    f"[{ans - hw:,}, {ans + hw:,}]"]
        else:
            vals = ["∞", "0", "—", "withheld", "—"]
        extra = [_count(float(v[i]), whole) for v, whole in post_values]
        rows.append([_num(i + 1), cell, _num(wl.weight_of(i)), *vals, *extra])
    numeric = {0, 2, 3, 4, 5, 6, 7} | {8 + j for j in range(len(post))}
    table = _table(head, rows, numeric=numeric, name_column=1)
    cap = (f'<p class="note">Showing the first {m:,} of {n:,} queries. The full answers are '
           "in the release's CSV/Parquet file (<code>Release.write</code>).</p>"
           if n > m else "")
    notes = "".join(f"<li><b>{_e(k)}</b>: {_e(v)}</li>"
                    for k, v in release.postprocessing_notes.items())
    notes_html = (f"<h3>Post-processing (no privacy cost)</h3><ul>{notes}</ul>" if notes else
                  "<p>No post-processing was applied: the published answers are the noisy "
                  "ones.</p>")
    return (
        '<section id="answers"><h2>7. Answers</h2>'
        f"{fig}{notes_html}<h3>All queries</h3>{cap}{table}{cap}</section>")


# -- entry points ---------------------------------------------------------------------------

def render_report(release: Release, *, now: dt.datetime | None = None) -> str:
    """The report as one HTML string (see the module docstring)."""
    plan = release.plan
    stamp = (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds")
    _, r = _gain(plan)
    stats = plan.workload.stats()
    gs = plan.guarantees()  # computed once: it may run a privacy-loss accountant
    title = ("NOT PRIVATE — " if not release.private else "") + "Tessera release report"
    with matplotlib.rc_context({"text.usetex": False, "font.family": "DejaVu Sans"}):
        privacy_img, privacy_cap = _privacy_figure(plan, gs)
        noise_img, noise_cap = _noise_figure(plan, r)
        answers = _answers_section(release)
    body = [
        _header(release, stamp, gs),
        _guarantee_section(release, gs),
        _workload_section(release, stats),
        _overlap_section(release, stats),
        _gain_section(plan),
        '<section id="tradeoff"><h2>5. Trade-off curves</h2>'
        f"<figure>{privacy_img}<figcaption>{_e(privacy_cap)}</figcaption></figure></section>",
        '<section id="noise"><h2>6. Noise per query</h2>'
        f"<figure>{noise_img}<figcaption>{_e(noise_cap)}</figcaption></figure></section>",
        answers,
        f"<footer>Generated by tessera-dp {_e(__version__)} at {_e(stamp)}. This file is "
        "self-contained: no scripts, no external resources. The certificate (JSON) is the "
        "machine-checkable record; <code>tessera verify</code> recomputes it from the schema "
        "and workload alone.</footer>",
    ]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>"
            + "".join(body) + "</main></body></html>\n")


def write_report(release: Release, path: str | Path) -> Path:
    """Write the HTML report of ``release`` to ``path`` and return the path."""
    out = Path(path)
    out.write_text(render_report(release), encoding="utf-8")
    return out
