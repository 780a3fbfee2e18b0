"""The HTML release report (tessera.release.report): what it says, that every user string is
escaped and nothing is loaded from outside, and — in a real headless Chromium — that it renders
with every figure decoded and nothing wider than the window."""

from __future__ import annotations

import base64
import html
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from tessera.release import Budget, answer
from tessera.release import report as report_module
from tessera.release.answering import Release
from tessera.release.report import render_report, write_report
from tessera.schema.domain import Domain
from tessera.workload.workload import Workload
from tests.release import browser

DOMAIN = Domain.from_dict({"attributes": {
    "age": {"type": "integer", "min": 0, "max": 9},
    "sex": {"type": "categorical", "values": ["F", "M"]},
    "region": {"type": "categorical", "values": ["N", "S", "E", "W"]},
}})
HOSTILE = "<script>alert(1)</script>"
#: names from users: markup, an attribute breaker, an unbalanced mathtext '$', a long one
NAMES = [
    "young", "old", HOSTILE, "region S", "region E", "region W",
    'women "F" & <b>bold</b>', "$\\frac{1}{0 $ mathtext?",
    "old in the north, a deliberately long query name that must wrap in tables " * 2,
]
CLAUSES = [
    "age < 5", "age >= 5",
    "region = 'N'", "region = 'S'", "region = 'E'", "region = 'W'",
    "sex = 'F'", "age >= 5 AND region = 'N'", "age >= 7 AND sex = 'M'",
]
WORKLOAD = Workload.from_sql(CLAUSES, DOMAIN, names=NAMES)


def _frame(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "age": rng.integers(0, 10, n),
        "sex": rng.choice(["F", "M"], n),
        "region": rng.choice(["N", "S", "E", "W"], n),
    })


@pytest.fixture(scope="module")
def laplace() -> Release:
    """Pure ε, add/remove, seeded (NOT PRIVATE), both post-processing steps."""
    return answer(_frame(), WORKLOAD, Budget.of(epsilon=1.0), seed=7,
                  postprocess=("consistency", "nonnegative"))


@pytest.fixture(scope="module")
def gaussian() -> Release:
    """ρ-zCDP, substitution, unequal weights with one withheld query (weight 0)."""
    weights = [1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 0.5, 1.0, 0.0]
    wl = Workload.from_sql(CLAUSES, DOMAIN, names=NAMES, weights=weights)
    return answer(_frame(seed=1), wl, Budget.of(rho=0.5), neighbours="substitute", seed=3)


@pytest.fixture(scope="module")
def laplace_html(laplace: Release) -> str:
    return render_report(laplace)


@pytest.fixture(scope="module")
def gaussian_html(gaussian: Release) -> str:
    return render_report(gaussian)


def _attributes(page: str, name: str) -> list[str]:
    return re.findall(rf'\b{name}\s*=\s*"([^"]*)"', page)


def test_hostile_names_are_escaped_and_the_report_has_no_script(laplace_html: str) -> None:
    assert HOSTILE not in laplace_html
    assert html.escape(HOSTILE) in laplace_html
    assert "<script" not in laplace_html.lower()  # the shipped report needs no JavaScript
    assert "<b>bold</b>" not in laplace_html
    assert html.escape('women "F" & <b>bold</b>') in laplace_html
    assert html.escape(NAMES[7]) in laplace_html  # the '$' name is in the table, verbatim


def test_seeded_release_says_not_private(laplace: Release, laplace_html: str) -> None:
    assert not laplace.private
    assert "NOT PRIVATE (seeded test randomness)" in laplace_html
    assert 'class="banner notprivate"' in laplace_html
    title = re.search(r"<title>(.*?)</title>", laplace_html)
    assert title is not None and "NOT PRIVATE" in title.group(1)


def test_private_release_has_no_banner() -> None:
    wl = Workload.from_sql(CLAUSES[:4], DOMAIN)
    rel = answer(_frame(500), wl, Budget.of(epsilon=2.0))  # OpenDP's secure noise
    assert rel.private
    page = render_report(rel)
    assert "NOT PRIVATE" not in page and 'class="banner private"' in page


def test_names_definition_neighbours_mechanism_and_overlap(
        laplace: Release, laplace_html: str, gaussian: Release, gaussian_html: str) -> None:
    for rel, page, definition, neighbours in (
            (laplace, laplace_html, "pure ε-DP", "add/remove one row"),
            (gaussian, gaussian_html, "ρ-zCDP", "substitute one row")):
        assert definition in page
        assert neighbours in page
        assert html.escape(rel.mechanism.describe()) in page
        assert "What is not proven" in page
        assert f"tessera-dp {report_module.__version__}" in page
        assert "γ_w (calibration value)" in page and "Witness row" in page
        for section in ("guarantee", "workload", "overlap", "gain", "tradeoff", "noise",
                        "answers"):
            assert f'<section id="{section}">' in page
    # a μ target would add its 'not proven' line; the (ε, δ) conversions are named here
    assert "(ε,δ)-DP" in gaussian_html and "CKS20" in gaussian_html
    # uniform discrete Laplace: the stated gain is 1 − γ/t
    plan = laplace.plan
    gain = 1.0 - plan.total / plan.sequential
    assert f"{100 * gain:.1f}%" in laplace_html
    # post-processing is shown and explained; the withheld query is marked
    assert "after consistency" in laplace_html and "after nonnegative" in laplace_html
    assert "withheld" in gaussian_html


def test_no_external_resources(laplace_html: str, gaussian_html: str) -> None:
    for page in (laplace_html, gaussian_html):
        assert "http://" not in page and "https://" not in page
        srcs = _attributes(page, "src")
        assert len(srcs) == 3  # trade-off, noise, answers
        assert all(s.startswith("data:image/png;base64,") for s in srcs)
        assert all(h.startswith("#") for h in _attributes(page, "href"))
        assert "<link" not in page and "@import" not in page and "url(" not in page
        for s in srcs:  # every figure is a decodable PNG
            png = base64.b64decode(s.split(",", 1)[1], validate=True)
            with Image.open(io.BytesIO(png)) as im:
                assert im.format == "PNG" and im.width > 300 and im.height > 150


def test_release_report_writes_the_file_and_caps_the_table(
        laplace: Release, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(report_module, "MAX_TABLE_ROWS", 4)
    out = laplace.report(tmp_path / "r.html")  # Release.report → write_report
    assert out == tmp_path / "r.html"
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert f"Showing the first 4 of {len(WORKLOAD)} queries" in page
    assert page.count('<td class="name">') == 4


#: injected into a COPY of the report (the shipped one has no script): after load, list each
#: image's decoded size and whether the page is wider than the window
_PROBE = """<script>
window.addEventListener("load", function () {
  var out = [];
  for (var i = 0; i < document.images.length; i++) {
    var im = document.images[i];
    out.push((im.complete ? "ok" : "pending") + ":" + im.naturalWidth + "x" + im.naturalHeight);
  }
  var el = document.createElement("pre");
  el.id = "tessera-probe";
  el.textContent = "images=" + out.join(",") + ";scroll=" +
    document.documentElement.scrollWidth + ";window=" + window.innerWidth;
  document.body.appendChild(el);
});
</script>"""


def test_report_renders_in_headless_chromium(laplace: Release, tmp_path: Path) -> None:
    browser.chromium()  # fail in CI / skip locally when there is no browser
    page = write_report(laplace, tmp_path / "report.html")

    png = browser.screenshot(page, tmp_path / "report.png", 1200, 3000)
    with Image.open(png) as im:
        assert im.size == (1200, 3000)
        rgb = np.asarray(im.convert("RGB"), dtype=np.float64)
    assert rgb.std() > 20.0  # not a blank page
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    banner = (r > 150) & (g < 50) & (b < 80)  # the red NOT PRIVATE banner (#b00020)
    assert banner[:400].sum() > 20_000
    dark = (rgb.sum(axis=2) < 200)  # text and plot lines, all the way down the page
    assert dark[:1000].sum() > 2_000 and dark[2000:].sum() > 2_000

    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", _PROBE + "</body>"),
                     encoding="utf-8")
    dom = browser.dump_dom(probe, 1200, 3000)
    found = re.search(r'<pre id="tessera-probe">images=([^;]*);scroll=(\d+);window=(\d+)</pre>',
                      dom)
    assert found is not None, dom[-2000:]
    images = found.group(1).split(",")
    assert len(images) == 3
    for entry in images:
        state, size = entry.split(":")
        w, h = (int(v) for v in size.split("x"))
        assert state == "ok" and w > 0 and h > 0, images
    assert int(found.group(2)) <= int(found.group(3)), "the page is wider than the window"


def test_strategy_reports_render_with_post_processing() -> None:
    """Through a strategy the post-processed answers are W's: a tree (more measured queries than
    W) with --nonnegative, and residual contrasts (no per-query noisy answers: the residuals are
    listed instead), both render and show W's post-processed answers in the strategy section."""
    from tessera.workload.families import Partition

    tree = Workload.from_sql([f"age <= {v}" for v in range(3)], DOMAIN)
    rel = answer(_frame(), tree, Budget.of(rho=0.5), strategy="hierarchical", seed=2,
                 postprocess=("nonnegative",))
    assert rel.plan.workload.n_queries > tree.n_queries
    page = render_report(rel)
    assert "after nonnegative" in page
    marg = Workload.of_families(DOMAIN, [Partition.marginal(DOMAIN, ["age", "region"])])
    rel = answer(_frame(), marg, Budget.of(rho=0.5), strategy="residual", seed=2,
                 postprocess=("nonnegative",))
    assert rel.strategy is not None and rel.strategy.choice.chosen.contrasts is not None
    page = render_report(rel)
    assert "∅ (the total)" in page and "Δ² (exact)" in page and "after nonnegative" in page
