"""The HTML pieces of the release report (:mod:`tessera.release.report`): its stylesheet, escaping,
number formatting, key–value and data tables.

Every user-supplied string reaches the page through :func:`esc`; the table builders take cells
that are already escaped HTML (:func:`kv_table` escapes its values unless told they are built
HTML).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "CSS",
    "esc",
    "fmt_big",
    "fmt_count",
    "fmt_num",
    "fmt_pct",
    "html_table",
    "kv_table",
    "shorten",
]

#: Longest name on one line (:func:`shorten`).
_LABEL_CHARS = 48

#: The report's stylesheet, inlined in the page (which loads nothing).
CSS = """
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



def esc(value: Any) -> str:
    """HTML-escaped text of anything (every user string goes through here)."""
    return html.escape(str(value), quote=True)


def fmt_num(x: float | int | None, digits: int = 6) -> str:
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


def fmt_big(n: int) -> str:
    """An exact integer of any size: with separators, or as ≈ m × 10^k when long."""
    n = int(n)
    if abs(n) < 10**15:
        return f"{n:,}"
    k = len(str(abs(n))) - 1
    return f"≈ {int(str(abs(n))[:3]) / 100:.2f} × 10^{k}"


def fmt_count(x: float, whole: bool) -> str:
    """A (possibly post-processed, non-integer) count with thousands separators."""
    if not math.isfinite(x):
        return fmt_num(x)
    return f"{int(x):,}" if whole else f"{x:,.2f}"


def fmt_pct(x: float) -> str:
    return f"{100.0 * x:.1f}%"


def kv_table(rows: Iterable[tuple[str, str]], raw: bool = False) -> str:
    """A two-column table; values are escaped unless ``raw`` (then they are built HTML)."""
    body = "".join(f"<tr><th>{esc(k)}</th><td>{v if raw else esc(v)}</td></tr>" for k, v in rows)
    return f'<table class="kv">{body}</table>'


def html_table(head: Sequence[str], rows: Iterable[Sequence[str]],
           numeric: frozenset[int] | set[int] = frozenset(),
           classes: Sequence[str] | None = None, name_column: int | None = None) -> str:
    """A table whose cells are already-escaped HTML; ``numeric`` columns are right-aligned,
    ``classes`` are row classes, ``name_column`` wraps long names."""
    ths = "".join(f"<th>{esc(h)}</th>" for h in head)
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


def shorten(text: str, limit: int = _LABEL_CHARS) -> str:
    """A name on one line, at most ``limit`` characters (escape it for HTML separately)."""
    one = " ".join(str(text).split())
    return one if len(one) <= limit else one[: limit - 1] + "…"
