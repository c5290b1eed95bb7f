"""The momentum widget's front-end (web/momentum.js) in Chromium, with no kernel: the static fragment
of the book (precomputed grid of the 99 settings) in a page opened from file:// and from a plain
static server. Moving the slider (mouse/typed value, arrow keys, Home/End) changes the drawn curves,
the curves are the grid's numbers (read back from the SVG paths' pixels), the previous setting is the
grey dashed line, Chinese renders as glyphs, and nothing logs an error or leaves the machine."""

from __future__ import annotations

import pytest

from conftest import serve
from test_browser_book import GLYPH_CHECK
from test_browser_widgets import READ_FRAGMENT, watch, widgets

# Each chart's curves back in data units: the path's y pixels through the chart's own mapping.
DRAWN = """(box) => {
  const view = box.querySelector('.normlab-web-view');
  const values = (svg, path) => {
    const lo = Number(svg.dataset.yLo), hi = Number(svg.dataset.yHi);
    const top = Number(svg.dataset.top), h = Number(svg.dataset.height);
    const d = path.getAttribute('d') || '';
    return Array.from(d.matchAll(/[ML]([-\\d.]+),([-\\d.]+)/g)).map((p) => hi - (Number(p[2]) - top) / h * (hi - lo));
  };
  return {
    charts: Array.from(view.querySelectorAll('svg.nl-mo-chart')).map((svg) => {
      const cur = svg.querySelector('path.nl-mo-curve'), prev = svg.querySelector('path.nl-mo-prev');
      return { convention: svg.dataset.convention, last: Number(cur.dataset.last), n: Number(cur.dataset.n),
               d: cur.getAttribute('d'), current: values(svg, cur), previous: values(svg, prev),
               span: Number(svg.dataset.yHi) - Number(svg.dataset.yLo) };
    }),
    slider: view.querySelector('input[type=range]').value,
    shown: view.querySelector('output').textContent,
    label: view.querySelector('input[type=range]').labels[0].textContent,
    caption: view.querySelector('.nl-mo-caption').textContent,
    error: view.querySelector('.nl-mo-error').textContent,
    text: view.textContent,
  };
}"""


@pytest.fixture(scope="module")
def momentum_page(tmp_path_factory):
    """A page with the widget's static fragment (as the book embeds it), and its grid."""
    import normlab
    from normlab.lessons import batchnorm as bn_lab
    from normlab.widgets import momentum

    normlab.setup()
    w = momentum.MomentumLab(trace=bn_lab.running_trace, conventions=bn_lab.CONVENTIONS, seed=0)
    d = tmp_path_factory.mktemp("momentum")
    (d / "momentum.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>momentum</title><link rel='icon' href='data:,'>"
        f"</head><body style='width:1100px'>{w.static_html(png=w.png())}</body></html>", encoding="utf-8")
    return d, w.static_grid()


def check(drawn: dict, entry: dict, previous: dict | None) -> None:
    """The drawn curves are the grid entry's traces (to half a pixel), the dashed ones the previous entry's."""
    assert drawn["error"] == "" and drawn["caption"] == entry["caption"]
    assert drawn["shown"] == f"{entry['m']:.2f}" and drawn["slider"] == str(round(entry["m"] * 100))
    assert [c["convention"] for c in drawn["charts"]] == [p["convention"] for p in entry["panels"]]
    for chart, panel in zip(drawn["charts"], entry["panels"]):
        tol = chart["span"] / 250 * 0.6                    # coordinates are written to 0.01 px; plot height 208 px
        assert chart["n"] == len(panel["trace"]) == 60 and chart["last"] == panel["trace"][-1]
        assert chart["current"] == pytest.approx(panel["trace"], abs=tol)
        if previous is not None:
            prev = next(p for p in previous["panels"] if p["convention"] == panel["convention"])
            assert chart["previous"] == pytest.approx(prev["trace"], abs=tol)


@pytest.fixture(params=["file", "server"])
def opened(request, momentum_page):
    """The page's address, opened from file:// or from a plain static server: (via, url, grid)."""
    folder, grid = momentum_page
    if request.param == "file":
        yield request.param, (folder / "momentum.html").as_uri(), grid
        return
    base, server = serve(folder)
    try:
        yield request.param, f"{base}/momentum.html", grid
    finally:
        server.shutdown()


def test_slider_moves_the_curves_to_the_grids_numbers(browser, opened, artifacts):
    via, url, grid = opened
    page = browser.new_page(viewport={"width": 1100, "height": 760})
    problems = watch(page)
    page.goto(url, wait_until="load")
    (box,) = widgets(page)
    assert not page.locator(".normlab-web-failed").count()
    assert box.evaluate(READ_FRAGMENT)["grid"] == grid and len(grid) == 99
    d = box.evaluate(DRAWN)
    assert d["label"] == "动量 momentum m" and "预先计算的网格" in d["text"]
    check(d, grid["10"], None)
    shown = grid["10"]

    slider = page.locator(f"#{box.get_attribute('id')} input[type=range]")
    moves = [("fill", "90", "90"), ("fill", "1", "1"), ("ArrowRight", None, "2"), ("ArrowUp", None, "3"),
             ("ArrowLeft", None, "2"), ("End", None, "99"), ("Home", None, "1"), ("fill", "50", "50")]
    for how, value, key in moves:
        before = box.evaluate(DRAWN)["charts"][0]["d"]
        if how == "fill":
            slider.fill(value)
        else:
            slider.focus()
            page.keyboard.press(how)
        page.wait_for_function("([b, k]) => b.dataset.key === k", arg=[box, key], timeout=5000)
        d = box.evaluate(DRAWN)
        assert d["charts"][0]["d"] != before, f"{how} {value}: the curve did not change"
        check(d, grid[key], shown)
        shown = grid[key]
    assert page.evaluate(GLYPH_CHECK.replace("document.body", "document.querySelector('.nl-momentum')"))
    size = box.evaluate("b => { "
                        "return Math.min(...Array.from(b.querySelectorAll('text, label, output, span'))"
                        ".filter(e => e.getClientRects().length).map(e => parseFloat(getComputedStyle(e).fontSize))); }")
    assert size >= 14, f"text under 14px: {size}"
    slider.fill("25")
    page.wait_for_function("b => b.dataset.key === '25'", arg=box, timeout=5000)
    page.locator(f"#{box.get_attribute('id')}").screenshot(path=str(artifacts / f"momentum_static_{via}.png"))
    page.close()
    assert not problems, problems


# Where each chart sits and whether any of its text runs out of it (issue 28 item 5: the prose says
# 左右并排, side by side).
LAYOUT = """(box) => {
  const charts = box.querySelector('.nl-mo-charts');
  const root = box.querySelector('.nl-momentum').getBoundingClientRect();
  const svgs = Array.from(charts.querySelectorAll('svg.nl-mo-chart'));
  return {
    cols: Number(charts.dataset.cols), width: Number(charts.dataset.chartWidth), inner: charts.clientWidth,
    rects: svgs.map((s) => { const r = s.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; }),
    root: [root.left, root.top, root.right, root.bottom],
    overflow: svgs.flatMap((s) => { const b = s.getBoundingClientRect();
      return Array.from(s.querySelectorAll('text')).filter((t) => t.textContent && t.getClientRects().length)
        .map((t) => [t.textContent, t.getBoundingClientRect()])
        .filter(([, r]) => r.left < b.left - 1 || r.right > b.right + 1).map(([text]) => text); }),
    fonts: Math.min(...Array.from(charts.querySelectorAll('text')).filter((t) => t.getClientRects().length)
      .map((t) => { const m = t.getScreenCTM(); return parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b); })),
  };
}"""


@pytest.mark.parametrize("width,cols", [(1100, 2), (900, 2), (740, 2), (560, 1)])
def test_panels_side_by_side_where_the_width_allows(browser, momentum_page, artifacts, width, cols):
    """Two panels side by side from a JupyterLab-wide output (~900 px) down to the book's column
    (740 px); stacked only on a narrow screen; drawn at their own width (no text under 14 px on
    screen, none running out of its chart), with the grid's numbers; a resize redraws them."""
    folder, grid = momentum_page
    page = browser.new_page(viewport={"width": width + 40, "height": 900})
    problems = watch(page)
    html = (folder / "momentum.html").read_text(encoding="utf-8").replace("width:1100px", f"width:{width}px")
    (folder / f"momentum_{width}.html").write_text(html, encoding="utf-8")
    page.goto((folder / f"momentum_{width}.html").as_uri(), wait_until="load")
    (box,) = widgets(page)
    page.wait_for_function("b => b.querySelector('.nl-mo-charts').dataset.cols", arg=box, timeout=5000)
    lay = box.evaluate(LAYOUT)
    assert lay["cols"] == cols, lay
    (l1, t1, r1, b1), (l2, t2, r2, b2) = lay["rects"]
    if cols == 2:
        assert abs(t1 - t2) < 1 and l2 >= r1 + 8, f"not side by side: {lay['rects']}"
    else:
        assert t2 >= b1 - 1 and abs(l1 - l2) < 1, f"not stacked: {lay['rects']}"
    assert max(r1, r2) <= lay["root"][2] + 0.5, f"a chart runs out of the widget: {lay}"
    assert not lay["overflow"], f"text out of its chart: {lay['overflow']}"
    assert lay["fonts"] >= 14, f"text under 14px on screen: {lay['fonts']}"
    check(box.evaluate(DRAWN), grid["10"], None)
    page.locator(f"#{box.get_attribute('id')}").screenshot(path=str(artifacts / f"momentum_layout_{width}.png"))
    # narrower, then wider again: the charts follow the width (ResizeObserver), still the grid's numbers
    page.evaluate("() => { document.body.style.width = '520px'; }")
    page.wait_for_function("b => b.querySelector('.nl-mo-charts').dataset.cols === '1'", arg=box, timeout=5000)
    check(box.evaluate(DRAWN), grid["10"], None)
    page.evaluate(f"() => {{ document.body.style.width = '{width}px'; }}")
    page.wait_for_function("([b, c]) => b.querySelector('.nl-mo-charts').dataset.cols === c", arg=[box, str(cols)],
                           timeout=5000)
    check(box.evaluate(DRAWN), grid["10"], None)
    page.close()
    assert not problems, problems


def test_the_true_mean_is_named_beside_the_plot_never_over_a_trace(browser, momentum_page):
    """Issue 36: the label "真实均值 true mean 5" sat on the traces. The value is written on the y axis, left
    of the plot frame, at the black line's height; the legend names the line."""
    folder, _ = momentum_page
    page = browser.new_page(viewport={"width": 1140, "height": 900})
    try:
        page.goto((folder / "momentum.html").as_uri(), wait_until="load")
        (box,) = widgets(page)
        page.wait_for_function("b => b.querySelector('.nl-mo-charts').dataset.cols", arg=box, timeout=5000)
        got = box.evaluate("""(b) => Array.from(b.querySelectorAll('.nl-mo-chart')).map((svg) => {
            const r = (e) => e.getBoundingClientRect();
            const label = svg.querySelector('.nl-mo-truelabel'), line = svg.querySelector('.nl-mo-true');
            return {text: label.textContent, right: r(label).right, mid: (r(label).top + r(label).bottom) / 2,
                    lineLeft: r(line).left, lineY: r(line).top};
        })""")
    finally:
        page.close()
    assert len(got) == 2
    for g in got:
        assert g["text"] == "5" and g["right"] <= g["lineLeft"], g           # left of the plot: no trace there
        assert abs(g["mid"] - g["lineY"]) < 3, g                              # at the line's height
