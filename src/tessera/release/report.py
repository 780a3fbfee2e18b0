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
are subsampled, so a report of 10⁵ queries takes about a second. matplotlib is the optional
``plot`` extra: without it the report is written without figures, a note in each one's place
saying how to add them (:func:`tessera.release.report_figures.omitted`).

This module writes the sections' text and tables; the figures are drawn by
:mod:`tessera.release.report_figures`, the HTML pieces (stylesheet, escaping, number formats,
tables) are in :mod:`tessera.release.report_html`.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tessera import __version__
from tessera.accounting.guarantee import Guarantee
from tessera.data.outputs import write_text
from tessera.privacy import Definition, Neighbours
from tessera.release.budget import DISCRETE_LAPLACE
from tessera.release.decimals import format_budget
from tessera.release.plan import NoisePlan
from tessera.release.report_figures import (
    INSTALL_HINT,
    answers_figure,
    available,
    noise_figure,
    omitted,
    privacy_figure,
)
from tessera.release.report_html import (
    CSS,
    esc,
    fmt_big,
    fmt_count,
    fmt_num,
    fmt_pct,
    html_table,
    kv_table,
    shorten,
)
from tessera.workload.files import query_text
from tessera.workload.stats import WorkloadStats

if TYPE_CHECKING:
    from tessera.release.view import ReleaseView

__all__ = ["MAX_TABLE_ROWS", "MAX_PLOTTED_ANSWERS", "render_report", "write_report"]

logger = logging.getLogger(__name__)

#: Rows of the per-query table (the full answers are in the release's CSV/Parquet file).
MAX_TABLE_ROWS = 2000
#: Queries drawn with error bars.
MAX_PLOTTED_ANSWERS = 50
#: Queries listed for the witness row.
_MAX_WITNESS_QUERIES = 100

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


def _unit_card(plan: NoisePlan) -> str:
    if plan.unit.is_row:
        return "one row"
    people = ", distinct people counted" if plan.unit.counts_people else ""
    return f"one person ({plan.unit.id_column}), K = {plan.unit.max_rows} rows{people}"


def _person(plan: NoisePlan) -> str:
    """What the person-level unit means, for the glossary (docs/theory.md §3.13)."""
    k = plan.unit.max_rows
    if plan.unit.counts_people:
        return (f"every row with the same value of {plan.unit.id_column!r} is one person; at "
                f"most {k} of a person's rows are kept (ordered by a hash of the row and the "
                "id: a rule that reads that person's rows alone), and every answer counts "
                "distinct people: a person with a kept row in a query adds 1 to it, however "
                "many rows they have there. A person pays the maximum weighted coverage of "
                f"{k} rows (docs/theory.md §3.14): at least a row's γ_w, at most {k} times it. "
                "The id column is read only to group and count people; it is never released.")
    factor = plan.unit.factor(plan.budget.calibration)
    return (f"every row with the same value of {plan.unit.id_column!r} is one person; at most "
            f"{k} of a person's rows are kept (ordered by a hash of the row and the id: a rule "
            f"that reads that person's rows alone). A person pays {factor} times what one row "
            f"pays (K for ε, K² for ρ), so γ_w and the noise are {k} times a row-level "
            "release's. The id column is read only to group rows; it is never counted or "
            "released.")


# -- sections -------------------------------------------------------------------------------

def _header(release: ReleaseView, now: str, gs: Sequence[Guarantee]) -> str:
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
        ("Neighbours", plan.unit.label(plan.neighbours)),
        ("Unit of privacy", _unit_card(plan)),
        ("Queries", f"{len(plan.workload):,}"),
        ("γ_w (" + ("exact" if plan.overlap.exact else "upper bound") + ")",
         fmt_num(plan.overlap.bound)),
    ]
    card_html = "".join(f'<div class="card"><div class="k">{esc(k)}</div>'
                        f'<div class="v">{esc(v)}</div></div>' for k, v in cards)
    software = cert.get("software") or {}
    meta = kv_table([
        ("Library", f"tessera-dp {__version__}"),
        ("Software (certificate)", ", ".join(f"{k} {v or 'not installed'}"
                                             for k, v in software.items()) or "—"),
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


def _guarantee_section(release: ReleaseView, gs: Sequence[Guarantee]) -> str:
    plan = release.plan
    cert = release.certificate
    rows = [[esc(g.definition.label), esc(g.parameter_text()),
             esc(g.unit.label(g.neighbours)), esc(g.basis), esc(g.note or "")] for g in gs]
    table = html_table(["definition", "parameter", "neighbour relation", "basis", "how"], rows)
    defs = list(dict.fromkeys([g.definition for g in gs] + [plan.budget.definition]))
    proven = {g.definition for g in gs}
    glossary = "".join(
        f"<li><b>{esc(d.label)}</b> — {esc(_DEFINITIONS[d])}"
        + ("" if d in proven else " <b>Requested as the target only: not proven for the "
           "mechanism that ran (see below).</b>") + "</li>" for d in defs)
    glossary += (f"<li><b>Neighbours: {esc(plan.neighbours.label)}</b> — "
                 f"{esc(_NEIGHBOURS[plan.neighbours])}</li>")
    if not plan.unit.is_row:
        glossary += (f"<li><b>Unit of privacy: {esc(plan.unit.text)}</b> — {esc(_person(plan))}"
                     "</li>")
    mech = cert.get("mechanism", {})
    laplace = plan.mechanism == DISCRETE_LAPLACE
    mech_rows = [
        ("Mechanism that ran", release.mechanism.describe()),
        ("Distribution", "discrete Laplace (integer noise, P[Z = z] ∝ exp(−|z|/b))" if laplace
         else "discrete Gaussian (integer noise, P[Z = z] ∝ exp(−z²/(2σ²)))"),
        ("Randomness", str(mech.get("randomness", "OpenDP secure" if release.private
                                    else "seeded (NOT PRIVATE)"))),
        ("Sensitivity", "1 per counting query (one row changes a count by at most 1)"
         if plan.unit.is_row else
         "1 per counting query (every answer counts distinct people: one person changes a "
         "count by at most 1); a person's cost is the coverage of their kept rows"
         if plan.unit.counts_people else
         f"{plan.unit.max_rows} per counting query (one person's at most "
         f"{plan.unit.max_rows} kept rows change a count by at most {plan.unit.max_rows})"),
        ("Calibrated as", f"{plan.budget.calibration.label}, total {fmt_num(plan.total, 10)} "
                          f"(requested: {plan.budget.text()})"),
    ]
    not_proven = [str(x) for x in cert.get("not_proven", [])]
    items = [f"<li>{esc(x)}</li>" for x in not_proven]
    if not release.private:
        items.insert(0, "<li><b>Nothing at all for these numbers:</b> the noise is seeded test "
                        "randomness (NOT PRIVATE). The guarantees describe what the same plan "
                        "would give with OpenDP's secure sampler.</li>")
    if not plan.spent_exact:
        items.append("<li>The spent budget is a proven <i>upper bound</i>, not an exact value: "
                     "the true cost may be lower (never higher).</li>")
    scope = (
        "<li>Scope of every guarantee: one individual contributes at most one row, under the "
        f"relation <i>{esc(plan.neighbours.label)}</i>; groups of k rows, or other releases on "
        "the same data, are not covered except through composition (a budget ledger) or group "
        "privacy.</li>" if plan.unit.is_row else
        "<li>Scope of every guarantee: one person (all rows with one value of the id column "
        f"<code>{esc(str(plan.unit.id_column))}</code>), under the relation "
        f"<i>{esc(plan.unit.label(plan.neighbours))}</i>, on the data as bounded (at most "
        f"{plan.unit.max_rows} rows kept per person). A person's dropped rows are not counted "
        "(a bias towards smaller counts, whose size is private and not shown); other releases "
        "on the same data are covered only through a ledger made for the same unit.</li>"
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
        f"<h3>The mechanism that actually ran</h3>{kv_table(mech_rows)}"
        f"<h3>What is not proven</h3>{lead}<ul>{''.join(items)}{scope}</ul></section>")


def _workload_section(release: ReleaseView, stats: WorkloadStats) -> str:
    wl = release.workload
    released = int(np.isfinite(release.plan.scales).sum())
    dom = wl.domain
    rows = [
        ("Queries", f"{stats.n_queries:,}"),
        ("Released (noisy answer published)", f"{released:,}"),
        ("Withheld (weight 0: no budget, no answer)", f"{stats.n_queries - released:,}"),
        ("Range queries", f"{stats.n_range_queries:,}"),
        ("Total weight", fmt_num(stats.total_weight)),
        ("Weights", "all equal" if len(set(wl.weights) | {f.weight for f in wl.partitions}) <= 1
         else "unequal"),
        ("Structured families", f"{len(wl.partitions):,} ({wl.n_cells:,} cells)"),
        ("Attributes in the schema", f"{len(dom)} (domain size {fmt_big(dom.size)})"),
        ("Attributes used by the workload", f"{len(stats.attributes_used)}"),
    ]
    if stats.contradictions:
        rows.append(("Contradictions (always 0)", f"{len(stats.contradictions):,}"))
    if stats.tautologies:
        rows.append(("Tautologies (count every row)", f"{len(stats.tautologies):,}"))
    if stats.duplicates:
        rows.append(("Groups of duplicate queries", f"{len(stats.duplicates):,}"))
    attrs = html_table(
        ["attribute", "values in the schema", "queries constraining it"],
        [[esc(a), fmt_num(dom[a].size), fmt_num(n)] for a, n in stats.attributes_used.items()],
        numeric={1, 2})
    scopes = sorted(wl.scopes().items(), key=lambda kv: (-len(kv[1]), kv[0]))
    shown = scopes[:20]
    scope_rows = [[esc(", ".join(s) if s else "(none: whole table)"), fmt_num(len(s)),
                   fmt_num(len(ix)), esc(shorten(wl.names[ix[0]], 60))] for s, ix in shown]
    scope_table = html_table(["scope (attributes constrained)", "size", "queries", "e.g."],
                         scope_rows, numeric={1, 2})
    more = (f'<p class="note">{len(scopes) - len(shown):,} more scopes not listed.</p>'
            if len(scopes) > len(shown) else "")
    sizes = ", ".join(f"{k}-way: {v:,}" for k, v in stats.scope_sizes.items())
    return (
        '<section id="workload"><h2>2. Workload</h2>'
        f"{kv_table(rows)}<h3>Attributes used</h3>{attrs}"
        f"<h3>Scopes</h3><p>Queries by number of constrained attributes: {esc(sizes)}.</p>"
        f"{scope_table}{more}</section>")


def _overlap_section(release: ReleaseView, stats: WorkloadStats) -> str:
    plan = release.plan
    ov = plan.overlap
    wl = plan.workload
    dom = wl.domain
    status = "exact" if ov.exact else "proven upper bound"
    rows = [
        ("γ_w (calibration value)", f"{fmt_num(ov.bound, 10)} ({status})"),
        ("Achieved by the witness row (lower bound)", fmt_num(ov.achieved, 10)),
        ("Composition measured in", ov.comp.label),
        ("Neighbour relation", ov.unit.label(ov.neighbours)),
        ("Solver", ov.method),
        ("Sequential figure comp(Q)", fmt_num(ov.sequential, 10)),
    ]
    what = ("the largest total weight of queries a single row can be counted in"
            if ov.neighbours is Neighbours.ADD_REMOVE else
            "the largest total weight of queries that change when one row is replaced")
    text = (f"<p>γ_w is {esc(what)} (for unit weights: the number of such queries). The noise "
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
            row = [esc(a.name), esc(a.label(xs[j]))]
            if ys is not None:
                row.append(esc(a.label(ys[j])))
            wrows.append(row)
            classes.append("hit" if a.name in used else "")
        touched = list(ov.witness.queries)
        names = ", ".join(f"<code>{esc(wl.name_of(i))}</code>"
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
            f"{fmt_num(ov.achieved, 8)}: <code>{esc(short)}</code>. The table has every attribute; "
            "highlighted: attributes the workload uses.</p>"
            f"{html_table(head, wrows, classes=classes)}"
            f"<p>{esc(kind[0].upper() + kind[1:])}: {len(touched):,} queries.</p>"
            f"<p>{names}{esc(extra)}</p>")
    costs = plan.costs[np.isfinite(plan.scales)]
    sym = "ε" if plan.mechanism == DISCRETE_LAPLACE else "ρ"
    split = [
        ("Allocation", plan.allocation),
        ("Method", plan.method),
        (f"Total budget ({sym})", fmt_num(plan.total, 10)),
        ("Spent (re-checked max over one neighbour change of Σ c_q)",
         f"{fmt_num(plan.spent, 10)} ({'exact' if plan.spent_exact else 'proven upper bound'}; "
         f"{fmt_pct(plan.spent / plan.total) if plan.total > 0 else '—'} of the total)"),
        ("Sequential cost of the same noise (Σ_q c_q)",
         f"{fmt_num(plan.sequential, 10)} "
         f"({fmt_num(plan.sequential / plan.total, 4)} × the total)"),
    ]
    if costs.size:
        split.append(("Per-query cost c_q: min / median / max",
                      f"{fmt_num(costs.min())} / {fmt_num(float(np.median(costs)))} / "
                      f"{fmt_num(costs.max())}"))
    if release.charge is not None:
        ch = release.charge
        scale = ch.spent_after if ch.spent_after > 0 else 1.0  # rounded up: still bounds

        def up(x: float) -> str:
            return format_budget(x, scale, up=True)

        split.append(("Ledger", f"release {ch.release_id}: spent before "
                                f"{up(ch.spent_before)}, after {up(ch.spent_after)} "
                                f"({'exact' if ch.exact else 'upper bound'}; rounded up to the "
                                "6th significant digit, exact in the certificate)"))
    formula = ("c_q = 1/b_q (discrete Laplace, in ε)" if sym == "ε"
               else "c_q = 1/(2σ_q²) (discrete Gaussian, in ρ)")
    return (
        '<section id="overlap"><h2>3. Overlap structure and budget split</h2>'
        f"{text}{kv_table(rows)}{witness_html}<h3>How the budget was split</h3>"
        f"<p>Per-query cost {esc(formula)}. After calibration the plan is re-checked: the costs "
        "of the queries one neighbour change can touch add up to at most the total.</p>"
        f"{kv_table(split)}</section>")


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
    weights = {"uniform": "unit weights", "importance": "unit weights",
               "optimal": "unit weights"}.get(
        plan.allocation, "the workload's weights")
    formula = (
        "Sequential composition charges every query: it needs Σ_q c_q ≤ B (B = total budget).\n"
        "Keeping this plan's allocation shape, every cost c_q would be scaled by B / Σ_q c_q:\n"
        f"  k = Σ_q c_q / B = {fmt_num(plan.sequential, 8)} / {fmt_num(plan.total, 8)} "
        f"= {fmt_num(k, 6)}\n"
        + ("  scale ratio r = b_q(this release) / b_q(sequential) = 1/k     "
           "(discrete Laplace: c_q = 1/b_q)\n" if laplace else
           "  scale ratio r = σ_q(this release) / σ_q(sequential) = 1/√k    "
           "(discrete Gaussian: c_q = 1/(2σ_q²))\n")
        + f"  r = {fmt_num(r, 6)}    noise reduction 1 − r = {fmt_pct(1.0 - r)}    "
          f"variance ratio r² = {fmt_num(var, 6)}\n"
        + ("Uniform case (one row touches γ of the t queries): 1 − r = 1 − γ/t."
           if laplace else
           "Uniform case (one row touches γ of the t queries): 1 − r = 1 − √(γ/t)."))
    if r < 1.0:
        lead = (f"at the same total budget, sequential composition would need noise "
                f"{fmt_num(1.0 / r, 4)}× larger on every query:")
    else:
        lead = ("here the overlap accounting gives no gain: one neighbour change can touch "
                "(up to the proven bound) as much as all queries together.")
    cards = [("noise scale, relative to sequential", fmt_pct(r)),
             ("noise reduction 1 − r", fmt_pct(1.0 - r)),
             ("variance, relative to sequential", fmt_pct(var)),
             (u_text, fmt_pct(u))]
    card_html = "".join(f'<div class="card"><div class="k">{esc(c)}</div>'
                        f'<div class="v">{esc(v)}</div></div>' for c, v in cards)
    return (
        '<section id="gain"><h2>4. Utility gain over sequential composition</h2>'
        "<p>The same per-query noise, accounted by sequential composition (every query "
        "charged), would cost Σ_q c_q; accounting by overlap charges only what one neighbour "
        f"change can touch. Equivalently, {esc(lead)}</p>"
        f'<div class="summary">{card_html}</div>'
        f'<div class="formula">{esc(formula)}</div>'
        f'<p class="note">{esc(u_text)} is the same gain computed from the overlap figures '
        f"alone (γ_w = {fmt_num(ov.bound, 8)}, comp(Q) = {fmt_num(ov.sequential, 8)}, in "
        f"{esc(ov.comp.label)}, with {esc(weights)}); r is computed from the per-query costs "
        "that actually ran. The two agree for a uniform allocation.</p>"
        "</section>")


def _contrasts_section(release: ReleaseView) -> str:
    """A residual-contrast release (docs/theory.md §10.6): the measured queries have no noisy
    answers of their own — each residual's integer contrasts were noised — so this section
    lists the residuals; W's answers are in the strategy section."""
    st = release.certificate.get("strategy", {})
    head = ["residual (attributes)", "contrasts", "Q per attribute", "Δ² (exact)", "σ", "ρ"]
    rows = [[esc(", ".join(r["scope"]) or "∅ (the total)"), fmt_num(r["contrasts"]),
             esc(", ".join(str(q) for q in r["precision"]) or "—"),
             fmt_num(r["l2_sensitivity_squared"]), fmt_num(r["sigma"]), fmt_num(r["rho"])]
            for r in st.get("contrasts", [])]
    notes = "".join(f"<li><b>{esc(k)}</b>: {esc(v)}</li>"
                    for k, v in release.postprocessing_notes.items())
    return ('<section id="answers"><h2>7. Answers</h2>'
            f"<p>{esc(st.get('contrasts_note', ''))}. The workload's answers, with their exact "
            "standard errors, are in the strategy section above.</p>"
            + html_table(head, rows, numeric={1, 3, 4, 5}, name_column=0)
            + (f"<h3>Post-processing (no privacy cost)</h3><ul>{notes}</ul>" if notes else "")
            + "</section>")


def _answers_section(release: ReleaseView, figures: bool = True) -> str:
    rec = release.strategy
    if rec is not None and rec.choice.chosen.contrasts is not None:
        return _contrasts_section(release)
    plan = release.plan
    wl = plan.workload
    n = wl.n_queries
    released = np.flatnonzero(np.isfinite(plan.scales))
    shown = released[:MAX_PLOTTED_ANSWERS]
    fig = ""
    if shown.size:
        # through a strategy the post-processed answers are W's, not the measured queries'
        img, cap = answers_figure(release, shown, post=rec is None) if figures else omitted()
        fig = f"<figure>{img}<figcaption>{esc(cap)}</figcaption></figure>"
    laplace = plan.mechanism == DISCRETE_LAPLACE
    param = "b" if laplace else "σ"
    post = list(release.postprocessed) if rec is None else []
    head = (["#", "query (name; WHERE clause below when different)", "weight", param, "c_q",
             "± 95%", "noisy answer", "95% interval"] + [f"after {p}" for p in post])
    rows = []
    m = min(n, MAX_TABLE_ROWS)
    # a column of whole numbers is printed as integers, any other with 2 decimals throughout
    post_values = [(v, bool(np.all(np.mod(v[np.isfinite(v)], 1.0) == 0.0)))
                   for k, v in release.postprocessed.items() if k in post]
    for i in range(m):
        name = wl.name_of(i)
        sql = query_text(wl.queries[i], wl.domain) if i < len(wl.queries) else name
        cell = esc(name) + (f'<span class="sql">{esc(sql)}</span>' if sql != name else "")
        if np.isfinite(plan.scales[i]):
            hw = int(plan.halfwidths[i])
            ans = int(release.noisy[i])
            vals = [fmt_num(plan.scales[i]), fmt_num(float(plan.costs[i])), fmt_num(hw),
                    fmt_num(ans), f"[{ans - hw:,}, {ans + hw:,}]"]
        else:
            vals = ["∞", "0", "—", "withheld", "—"]
        extra = [fmt_count(float(v[i]), whole) for v, whole in post_values]
        rows.append([fmt_num(i + 1), cell, fmt_num(wl.weight_of(i)), *vals, *extra])
    numeric = {0, 2, 3, 4, 5, 6, 7} | {8 + j for j in range(len(post))}
    table = html_table(head, rows, numeric=numeric, name_column=1)
    cap = (f'<p class="note">Showing the first {m:,} of {n:,} queries. The full answers are '
           "in the release's CSV/Parquet file (<code>Release.write</code>).</p>"
           if n > m else "")
    notes = "".join(f"<li><b>{esc(k)}</b>: {esc(v)}</li>"
                    for k, v in release.postprocessing_notes.items())
    notes_html = (f"<h3>Post-processing (no privacy cost)</h3><ul>{notes}</ul>" if notes else
                  "<p>No post-processing was applied: the published answers are the noisy "
                  "ones.</p>")
    return (
        '<section id="answers"><h2>7. Answers</h2>'
        f"{fig}{notes_html}<h3>All queries</h3>{cap}{table}{cap}</section>")


def _strategy_section(release: ReleaseView) -> str:
    """What was measured instead of W, every candidate's expected error, and W's answers
    reconstructed by least squares (docs/theory.md §10). Empty when W itself was measured."""
    rec = release.strategy
    if rec is None:
        return ""
    choice = rec.choice
    worst = choice.objective == "max"  # (the error the split minimised: its column too)
    head = ["strategy", "measured queries", "γ_w", "expected RMSE", "Σ w·Var"] + (
        ["max w·Var"] if worst else []) + ["chosen"]
    rows = [[esc(r["strategy"]), fmt_num(r["measured_queries"]), fmt_num(r["gamma_w"]),
             fmt_num(r["rmse"]), fmt_num(r["expected_total"])]
            + ([fmt_num(r["expected_max"])] if worst else []) + ["✓" if r["chosen"] else ""]
            for r in choice.table()]
    wl = rec.workload
    m = min(wl.n_queries, MAX_TABLE_ROWS)
    names = wl.all_names()
    post = release.postprocessed  # W's answers after each step
    answers = [[fmt_num(i + 1), esc(next(names)), f"{rec.answers[i]:,.2f}",
                f"{math.sqrt(rec.variances[i]):,.2f}",
                f"[{rec.answers[i] - rec.halfwidths[i]:,.2f}, "
                f"{rec.answers[i] + rec.halfwidths[i]:,.2f}]"]
               + [f"{float(v[i]):,.2f}" for v in post.values()] for i in range(m)]
    chosen = choice.chosen
    return (
        '<section id="strategy"><h2>Strategy: what was measured</h2>'
        f"<p>The workload's {wl.n_queries:,} answers are reconstructed by "
        f"{esc(chosen.reconstruction.name)} from the noisy answers of the "
        f"<b>{esc(chosen.name)}</b> strategy ({chosen.measured.n_queries:,} counting queries); "
        "sections 1–7 describe the measured queries (their γ_w, noise and cost). The choice "
        f"({esc(choice.requested)}, objective {esc(choice.objective)}) used only the schema, "
        "the workload and the budget.</p>"
        + html_table(head, rows, numeric={1, 2, 3, 4, 5} if worst else {1, 2, 3, 4},
                     name_column=0)
        + f"<h3>Workload answers (first {m:,})</h3><p class=\"note\">Exact standard errors "
        "of the least-squares estimates; 95% intervals ±1.96·sd (normal approximation, not a "
        "proven bound).</p>"
        + html_table(["#", "query", "answer", "std error", "95% interval"]
                     + [f"after {p}" for p in post], answers,
                     numeric={0, 2, 3, 4} | {5 + j for j in range(len(post))}, name_column=1)
        + "</section>")


# -- entry points ---------------------------------------------------------------------------

def render_report(release: ReleaseView, *, now: dt.datetime | None = None) -> str:
    """The report as one HTML string (see the module docstring)."""
    plan = release.plan
    stamp = (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds")
    _, r = _gain(plan)
    stats = WorkloadStats.of(plan.workload)
    gs = plan.guarantees()  # computed once: it may run a privacy-loss accountant
    title = ("NOT PRIVATE — " if not release.private else "") + "Tessera release report"
    if available():
        import matplotlib

        with matplotlib.rc_context({"text.usetex": False, "font.family": "DejaVu Sans"}):
            privacy_img, privacy_cap = privacy_figure(plan, gs)
            noise_img, noise_cap = noise_figure(plan, r)
            answers = _answers_section(release)
    else:
        logger.warning("the report's figures are not drawn: matplotlib is not installed "
                       "(%s adds it)", INSTALL_HINT)
        (privacy_img, privacy_cap), (noise_img, noise_cap) = omitted(), omitted()
        answers = _answers_section(release, figures=False)
    body = [
        _header(release, stamp, gs),
        _guarantee_section(release, gs),
        _workload_section(release, stats),
        _strategy_section(release),
        _overlap_section(release, stats),
        _gain_section(plan),
        '<section id="tradeoff"><h2>5. Trade-off curves</h2>'
        f"<figure>{privacy_img}<figcaption>{esc(privacy_cap)}</figcaption></figure></section>",
        '<section id="noise"><h2>6. Noise per query</h2>'
        f"<figure>{noise_img}<figcaption>{esc(noise_cap)}</figcaption></figure></section>",
        answers,
        f"<footer>Generated by tessera-dp {esc(__version__)} at {esc(stamp)}. This file is "
        "self-contained: no scripts, no external resources. The certificate (JSON) is the "
        "machine-checkable record; <code>tessera verify</code> recomputes it from the schema "
        "and workload alone.</footer>",
    ]
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body><main>"
            + "".join(body) + "</main></body></html>\n")


def write_report(release: ReleaseView, path: str | Path) -> Path:
    """Write the HTML report of ``release`` to ``path`` (atomically) and return the path."""
    return write_text(path, render_report(release))
