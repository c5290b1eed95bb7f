"""The widgets' browser front-ends in Chromium (issue 17): with no kernel in the built book and the
slides (a precomputed grid in the page, opened from file:// and from a plain static server), and
through the kernel in JupyterLab.

Every check reads the page: the grid and the spec the page embeds (normlab/widgets/web_host.py's
static fragment), the controls by their <label>, and what the front-end drew through the data
attributes of the contract (explorer cells: data-cell, data-group, class selected/same; gradflow
curves: data-last-grad, data-last-act). A control change must change the picture and the picture
must be the grid's entry for the new control state.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlparse

import pytest

from conftest import serve

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "build" / "book" / "html"
SLIDES = ROOT / "build" / "slides"
GRID_BADGE = "预先计算的网格"
LIVE_BADGE = "实时计算"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# --- reading a static widget ---------------------------------------------------------------------

# The grid, spec and controls a fragment embeds (gzip-compressed grids are unpacked in the page).
READ_FRAGMENT = """async (box) => {
  const part = (cls) => box.querySelector(':scope > script.normlab-web-' + cls);
  let text = part('grid').textContent;
  if (part('grid').dataset.encoding === 'gzip-base64') {
    const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
    text = await new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'))).text();
  }
  return { grid: JSON.parse(text), spec: JSON.parse(part('spec').textContent),
           controls: JSON.parse(part('controls').textContent) };
}"""

# The widget's native controls, as a user finds them: each <select> and <input type=range> with the
# text of its <label> (Chinese + English term) and the values it offers.
LABEL_OF = "(e) => e.labels && e.labels[0] ? Array.from(e.labels[0].childNodes).filter(n => n.nodeType === 3)" \
           ".map(n => n.textContent).join('').trim() : ''"
LIST_CONTROLS = """(box) => {
  const labelOf = %s;
  const view = box.querySelector('.normlab-web-view') || box;
  return Array.from(view.querySelectorAll('select, input[type=range]'))
    .filter(e => !e.disabled && e.offsetParent !== null)
    .map(e => ({ label: labelOf(e),
                 kind: e.tagName === 'SELECT' ? 'select' : 'range', value: e.value,
                 values: e.tagName === 'SELECT' ? Array.from(e.options).filter(o => !o.disabled).map(o => o.value)
                   : Array.from({ length: Math.round((Number(e.max) - Number(e.min)) / Number(e.step || 1)) + 1 },
                                (_, i) => String(Number(e.min) + i * Number(e.step || 1))) }));
}""" % LABEL_OF

# Set the control with this label as a user would (value, then input and change events); returns the
# ms from the input event to the next animation frame after the picture changed, or -1 (no change).
SET_CONTROL = """async ([box, label, value]) => {
  const labelOf = %s;
  const view = box.querySelector('.normlab-web-view') || box;
  const el = Array.from(view.querySelectorAll('select, input[type=range]')).find(e => labelOf(e) === label);
  if (!el) throw new Error('no control labelled ' + label);
  const before = view.innerHTML;
  el.value = String(value);
  const t0 = performance.now();
  el.dispatchEvent(new Event('input', { bubbles: true }));
  el.dispatchEvent(new Event('change', { bubbles: true }));
  for (let i = 0; i < 30; i++) {
    await new Promise((r) => requestAnimationFrame(r));
    if (view.innerHTML !== before) return performance.now() - t0;
  }
  return -1;
}""" % LABEL_OF


def located(folder: Path, rel: str, via: str):
    """(url, server) of folder/rel opened from file:// (server None) or from a local static server."""
    if via == "file":
        return (folder / rel).as_uri(), None
    base, server = serve(folder)
    return f"{base}/{rel}", server


def watch(page) -> list[str]:
    """Record console errors, page errors, failed requests and any request leaving 127.0.0.1/file."""
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))

    def request(r):
        u = urlparse(r.url)
        if u.scheme not in ("file", "data", "blob", "about") and u.hostname != "127.0.0.1":
            problems.append(f"network: {r.url}")
    page.on("request", request)
    return problems


def widgets(page):
    """The static widgets on a page, once each has rendered (or failed)."""
    page.wait_for_function("""() => Array.from(document.querySelectorAll('.normlab-web'))
        .every(b => b.dataset.ready === '1' || b.querySelector('.normlab-web-failed'))""", timeout=20000)
    return page.locator(".normlab-web").element_handles()


def badge_text(box) -> str:
    return box.evaluate("b => Array.from(b.querySelectorAll('*')).filter(e => e.offsetParent !== null || "
                        "getComputedStyle(e).position === 'fixed').map(e => e.textContent).join(' ')")


# --- what a front-end drew, per widget ---------------------------------------------------------------

# What each front-end drew, read from the contract's data attributes (one JS function per widget).
DRAWN = {
    "_toy": """b => ({ bars: Array.from(b.querySelectorAll('svg rect')).map(r => Number(r.dataset.value)),
                      colors: Array.from(b.querySelectorAll('svg rect')).map(r => r.getAttribute('fill')) })""",
    "explorer": """b => {
      const cells = Array.from(b.querySelectorAll('[data-cell]'));
      const sel = cells.filter(c => c.classList.contains('selected'));
      return { n: cells.length, selected: sel.map(c => c.dataset.cell),
               group: sel.length ? sel[0].dataset.group : null,
               lit: cells.filter(c => c.classList.contains('selected') || c.classList.contains('same')).map(c => c.dataset.cell).sort(),
               same_group: sel.length ? cells.filter(c => c.dataset.group === sel[0].dataset.group).map(c => c.dataset.cell).sort() : [],
               groups: Object.fromEntries(cells.map(c => [c.dataset.cell, c.dataset.group])) };
    }""",
    "gradflow": """b => ({
      grad: Array.from(b.querySelectorAll('[data-last-grad]')).map(e => Number(e.dataset.lastGrad)),
      act: Array.from(b.querySelectorAll('[data-last-act]')).map(e => Number(e.dataset.lastAct)),
      curves: Array.from(b.querySelectorAll('[data-last-grad], [data-last-act]'))
        .map(e => e.getAttribute('d') || e.getAttribute('points') || '') })""",
}


def drawn_toy(box) -> dict:
    return box.evaluate(DRAWN["_toy"])


def check_toy(box, entry: dict) -> None:
    assert drawn_toy(box) == {"bars": entry["bars"], "colors": [entry["color"]] * len(entry["bars"])}


def drawn_explorer(box) -> dict:
    return box.evaluate(DRAWN["explorer"])


def check_explorer(box, entry: dict) -> None:
    """The highlighted cells are exactly the selected element's group, and every cell's group is the
    grid's (``entry['groups']``: the group id of each cell in the order of ``entry['cells']``, or a
    {cell: group} mapping)."""
    d = drawn_explorer(box)
    assert d["n"] > 0 and len(d["selected"]) == 1, d["selected"]
    assert d["lit"] == d["same_group"], "the highlighted cells are not the selected cell's group"
    expected = grid_groups(entry)
    if expected is not None:
        assert d["groups"] == expected, "the drawn groups differ from the grid's"


def grid_groups(entry: dict) -> dict | None:
    """{"k,r,c": "g"} from an explorer grid entry: ``ids`` is the group of each element, flattened in
    the (slices, rows, cols) order of ``blocks``."""
    if "ids" not in entry or "blocks" not in entry:
        return None
    n, rows, cols = entry["blocks"]
    return {f"{k},{r},{c}": str(entry["ids"][(k * rows + r) * cols + c])
            for k in range(n) for r in range(rows) for c in range(cols)}


def drawn_gradflow(box) -> dict:
    return box.evaluate(DRAWN["gradflow"])


def check_gradflow(box, entry: dict) -> None:
    """The last point of the drawn gradient and activation curves is the grid's last value."""
    d = drawn_gradflow(box)
    assert d["grad"] and d["act"], "no curve carries data-last-grad / data-last-act"
    grad = entry.get("grad_norm") or entry.get("grad")
    act = entry.get("act_std") or entry.get("act")
    if grad:
        assert d["grad"][0] == pytest.approx(grad[-1], rel=1e-3)
    if act:
        assert d["act"][0] == pytest.approx(act[-1], rel=1e-3)


# The part of a grid entry the picture is drawn from (two entries may differ only in a caption).
PICTURE = {"_toy": lambda e: e, "explorer": lambda e: (e.get("ids"), e.get("blocks")),
           "gradflow": lambda e: (e.get("act"), e.get("grad"))}

CHECKS = {"_toy": (check_toy, drawn_toy), "explorer": (check_explorer, drawn_explorer),
          "gradflow": (check_gradflow, drawn_gradflow)}


def exercise(page, box, artifacts: Path, shot: str, per_control: int = 3, skip: tuple[str, ...] = ()) -> int:
    """Move every control of one static widget through some of its values, as a user would (but the
    controls labelled in ``skip``). After each move the state the page looked up (the shim's data-key)
    holds the new value, the drawn picture is the grid's entry for that key, and the picture changed
    when the entry did; a refused setting shows its message. Returns the number of drawn states checked."""
    name = box.get_attribute("data-widget")
    check, drawn = CHECKS[name]
    frag = box.evaluate(READ_FRAGMENT)
    grid = frag["grid"]
    assert GRID_BADGE in badge_text(box), f"{shot}: the widget does not say {GRID_BADGE}"
    check(box, grid[box.get_attribute("data-key")])
    shown = grid[box.get_attribute("data-key")]        # the entry the picture shows (errors keep it)
    labels = [c["label"] for c in box.evaluate(LIST_CONTROLS)]
    assert labels and all(labels), f"{shot}: controls without a <label>: {labels}"
    labels = [x for x in labels if x not in skip]
    done = 0
    for label in labels:
        now = {c["label"]: c for c in box.evaluate(LIST_CONTROLS)}
        if label not in now:                      # e.g. a size slider of the other layout
            continue
        values = [v for v in now[label]["values"] if v != now[label]["value"]]
        picks = values if len(values) <= per_control else [values[i * (len(values) - 1) // (per_control - 1)]
                                                             for i in range(per_control)]
        for v in picks:
            key_before, seen_before = box.get_attribute("data-key"), drawn(box)
            ms = page.evaluate(SET_CONTROL, [box, label, v])
            key = box.get_attribute("data-key")
            assert v in re.split(r"[|,]", key) or key != key_before or v in box.get_attribute("data-controls"), \
                f"{shot}: {label}={v} did not reach the model (key {key})"
            entry = grid.get(key)
            if entry is None or "__error__" in entry:      # refused or absent: a message, the picture stays
                msg = entry["__error__"] if entry else "不在预先计算的网格里"
                page.wait_for_function("([b, m]) => b.textContent.includes(m)", arg=[box, msg[:10]], timeout=5000)
                continue
            check(box, entry)
            if PICTURE[name](entry) != PICTURE[name](shown):
                assert drawn(box) != seen_before, f"{shot}: {label}={v}: a new grid entry, the same picture"
                assert ms >= 0, f"{shot}: {label}={v}: no frame showed the change"
            shown = entry
            done += 1
    box.scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / f"{shot}.png"), full_page=False)
    return done


# --- the toy front-end in a generated page (the host alone, before any real widget) -----------------

@pytest.fixture(scope="module")
def toy_page(tmp_path_factory):
    """A page with two toy widgets (one with a compressed grid), as the book would embed them."""
    from test_web_host import Toy

    d = tmp_path_factory.mktemp("toy")
    a, b = Toy(), Toy(n=2, color="blue")
    from normlab.widgets.web_host import static_html
    body = (static_html("_toy", a.spec, a.static_grid(), a.controls, compress=False)
            + "<p>中间的段落</p>"
            + static_html("_toy", b.spec, b.static_grid(), b.controls, compress=True))
    (d / "toy.html").write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>toy</title><link rel='icon' href='data:,'></head>"
                                f"<body>{body}</body></html>", encoding="utf-8")
    return d


@pytest.mark.parametrize("via", ["file", "server"])
def test_toy_widgets_work_with_no_kernel(browser, toy_page, artifacts, via):
    url, server = located(toy_page, "toy.html", via)
    try:
        page = browser.new_page(viewport={"width": 1000, "height": 700})
        problems = watch(page)
        page.goto(url, wait_until="load")
        boxes = widgets(page)
        assert len(boxes) == 2 and len({b.get_attribute("id") for b in boxes}) == 2
        for i, box in enumerate(boxes):
            assert exercise(page, box, artifacts, f"widgets_toy_{via}_{i}") >= 4
            assert float(box.evaluate("b => b.querySelector('.normlab-web-view').dataset.lastUpdateMs")) >= 0
        # a refused setting: the error shows and the last picture stays
        box = boxes[0]
        bars = drawn_toy(box)
        page.evaluate(SET_CONTROL, [box, "颜色 (color)", "none"])
        assert "颜色不能是 none" in box.inner_text() and drawn_toy(box) == bars
        page.close()
        assert not problems, problems
    finally:
        if server:
            server.shutdown()


# --- the real front-ends in a generated page (before the book is built) -----------------------------

def real_widget(name: str):
    """The course's widget ``name`` at its notebook's settings, or skip while its front-end is not there.
    "explorer-batchnorm" is lesson 02's explorer: BatchNorm alone (``norms=("batchnorm",)``), both layouts."""
    from normlab.widgets import web_host

    if not (web_host.WEB_DIR / f"{name.split('-')[0]}.js").exists():
        pytest.skip(f"no front-end web/{name}.js yet")
    if name == "explorer":
        from normlab.widgets import explorer
        w = explorer.AxesExplorer(layout="text", norm="layernorm_text")
    elif name == "explorer-batchnorm":
        from normlab.widgets import explorer
        w = explorer.AxesExplorer(layout="image", norm="batchnorm", norms=("batchnorm",))
    else:
        from normlab.widgets import gradflow
        w = gradflow.GradFlow(depth=32, wiring="plain", norm="none")
    if not isinstance(w, web_host.WebWidget):
        pytest.skip(f"{name} is not a WebWidget yet")
    return w


@pytest.mark.parametrize("name", ["explorer", "explorer-batchnorm", "gradflow"])
def test_real_widget_in_a_generated_page(browser, tmp_path, artifacts, name):
    from normlab.widgets.web_host import static_html

    w = real_widget(name)
    body = static_html(w.web_name, w.spec, w.static_grid(), w.controls, png=w.png())
    (tmp_path / "page.html").write_text(f"<!doctype html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'>"
                                        f"</head><body style='width:1100px'>{body}</body></html>", encoding="utf-8")
    print(f"{name}: fragment {len(body.encode()) / 2**20:.2f} MiB")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = watch(page)
    page.goto((tmp_path / "page.html").as_uri(), wait_until="load")
    boxes = widgets(page)
    assert len(boxes) == 1 and not page.locator(".normlab-web-failed").count()
    if name == "explorer-batchnorm":        # the sizes of one layout, the layout, the other layout's sizes
        layout = ("布局 (layout)",)
        done = [exercise(page, boxes[0], artifacts, f"widgets_page_{name}_{i}", skip=layout if i != 1 else ())
                for i in range(3)]
        assert done[0] >= 3 and done[1] >= 1 and done[2] >= 3, done
    else:
        assert exercise(page, boxes[0], artifacts, f"widgets_page_{name}") >= 3
    if name.startswith("explorer"):
        explorer_arrow_keys(page, boxes, artifacts, f"widgets_page_{name}")
    if name == "explorer-batchnorm":        # BatchNorm is shown, not offered (disabled); layouts and sizes are
        box = boxes[0]
        labels = [c["label"] for c in box.evaluate(LIST_CONTROLS)]
        assert "布局 (layout)" in labels and "归一化 (norm)" not in labels and not any("组数 G" in x for x in labels)
        assert box.evaluate("b => Array.from(b.querySelector('select[name=norm]').options).map(o => o.value)") \
            == ["batchnorm"]
        assert {k.split("|")[1] for k in box.evaluate(READ_FRAGMENT)["grid"]} == {"batchnorm"}
    page.close()
    assert not problems, problems


# --- the toy through the book's own executor, Jupyter Book and the slides' exporter -----------------

TOY_CELL = """from normlab.widgets.web_host import WebWidget

spec = {"title": "玩具 toy", "controls": [
    {"name": "n", "label": "条数 (bars)", "kind": "range", "min": 1, "max": 5, "step": 1},
    {"name": "color", "label": "颜色 (color)", "kind": "select", "options": [["red", "红 red"], ["blue", "蓝 blue"]]}]}
toy = WebWidget("_toy", spec=spec, controls={"n": 3, "color": "red"},
                compute=lambda c: {"bars": list(range(1, c["n"] + 1)), "color": c["color"]},
                grid_controls=lambda: [{"n": n, "color": c} for n in range(1, 6) for c in ("red", "blue")])
toy"""


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory):
    """A one-notebook book and deck built the way tools/book.py builds the course's (conftest's
    build_toy_site: execute_all with NORMLAB_STATIC=1, static_widgets, Sphinx, the slides' exporter)."""
    from conftest import build_toy_site

    html, slides, nb = build_toy_site(tmp_path_factory.mktemp("toysite"), "99_toy",
                                      f"# 玩具\n\n```{{code-cell}} ipython3\n{TOY_CELL}\n```\n", "玩具")
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    assert any("normlab-web" in o.get("data", {}).get("text/html", "") for o in outputs), outputs
    assert not any(WIDGET_VIEW in o.get("data", {}) for o in outputs)
    return html, slides


@pytest.mark.parametrize("where", ["book-file", "book-server", "slides-file", "slides-server"])
def test_toy_notebook_through_the_book_and_the_slides(browser, toy_site, artifacts, where):
    html, slides = toy_site
    folder, rel = (html, "notebooks/99_toy.html") if where.startswith("book") else (slides, "99_toy.slides.html")
    url, server = located(folder, rel, "file" if where.endswith("file") else "server")
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        problems = watch(page)
        page.goto(url, wait_until="load")
        if where.startswith("slides"):
            page.wait_for_selector(".reveal.ready", timeout=15000)
            page.locator(".normlab-web").first.scroll_into_view_if_needed()   # reveal.js's scroll view
            page.wait_for_timeout(200)
        boxes = widgets(page)
        assert len(boxes) == 1
        assert exercise(page, boxes[0], artifacts, f"widgets_toy_{where}") >= 4
        page.close()
        assert not problems, problems
    finally:
        if server:
            server.shutdown()


# --- the built book and slides: tests/test_browser_widgets_course.py ---------------------------------


def show_slide(page, box) -> None:
    """Advance the deck (Space, as the speaker does) until the widget's slide is the one shown: from the
    slide before it (reveal.js's own navigation gets there; Space through every earlier slide only
    repeated the slide changes test_slides_readable already walks)."""
    box.evaluate("""b => { const R = require("vendor/reveal.js/dist/reveal.js");
                          const i = R.getIndices(b.closest("section"));
                          if (!b.closest("section").classList.contains("present")) { R.slide(i.h, i.v, -1); R.prev(); } }""")
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    for _ in range(400):
        if box.evaluate("b => b.closest('section').classList.contains('present') && "
                        "getComputedStyle(b).visibility === 'visible' && b.getBoundingClientRect().height > 0"):
            page.wait_for_timeout(200)
            return
        page.keyboard.press("Space")
    raise AssertionError("the widget's slide never came up")


def explorer_arrow_keys(page, boxes, artifacts: Path, shot: str) -> None:
    """Arrow keys move the explorer's selected cell; the highlight follows the new cell's group."""
    for box in boxes:
        if box.get_attribute("data-widget") != "explorer":
            continue
        before = drawn_explorer(box)["selected"]
        box.evaluate("""b => { const f = b.querySelector('[tabindex]:not([tabindex="-1"])') || b.querySelector('.selected');
                               if (f) f.focus(); }""")
        moved = False
        for key in ("ArrowRight", "ArrowDown", "ArrowLeft", "ArrowUp"):
            page.keyboard.press(key)
            page.wait_for_timeout(50)
            after = drawn_explorer(box)
            if after["selected"] != before:
                assert after["lit"] == after["same_group"]
                check_explorer(box, box.evaluate(READ_FRAGMENT)["grid"][box.get_attribute("data-key")])
                moved = True
                break
        assert moved, f"{shot}: no arrow key moved the selected cell"
        page.screenshot(path=str(artifacts / f"{shot}_arrows.png"))


# --- JupyterLab: the same front-end, through the kernel --------------------------------------------

LAB_NOTEBOOKS = {"03_layernorm": "explorer", "01_residuals": "gradflow"}
LAB_SETTINGS = {"gradflow": dict(depth=32, wiring="plain", norm="none")}   # 01's GradFlow(...) cell


def live_view(page):
    """The output area that holds an anywidget front-end (its native controls)."""
    view = page.locator(".jp-OutputArea-output:has(select)").first
    view.wait_for(timeout=30000)
    view.scroll_into_view_if_needed()
    return view


def change_live_control(page, name: str, widget: str, artifacts: Path) -> None:
    """Pick another option of the widget's first <select>; the picture must change, which only the
    kernel can make happen (the front-end draws on change:data, and data comes from Python)."""
    from test_browser_lab import errors_in

    view = live_view(page)
    page.wait_for_timeout(500)
    page.screenshot(path=str(artifacts / f"widgets_lab_{name}_before.png"))
    assert LIVE_BADGE in view.text_content(), f"{name}: the widget does not say {LIVE_BADGE}"
    assert GRID_BADGE not in view.text_content()
    before = view.evaluate(DRAWN[widget])
    assert any(before.values()), f"{name}: the front-end drew nothing the test can read: {before}"
    select = view.locator("select").first
    current = select.input_value()
    target = next(v for v in select.evaluate("s => Array.from(s.options).map(o => o.value)") if v != current)
    select.select_option(target)
    page.wait_for_function(f"([el, before]) => JSON.stringify(({DRAWN[widget]})(el)) !== JSON.stringify(before)",
                           arg=[view.element_handle(), before], timeout=30000)
    page.wait_for_selector(".jp-StatusBar-TextItem:has-text('| Idle')", timeout=60000)
    page.wait_for_timeout(200)
    page.screenshot(path=str(artifacts / f"widgets_lab_{name}_after.png"))
    assert not errors_in(page), errors_in(page)
    assert LIVE_BADGE in view.text_content()
    if widget in KERNEL_ANSWER:
        KERNEL_ANSWER[widget](view)
    slider_moves_with_arrow_keys(page, view, name, widget)


def slider_moves_with_arrow_keys(page, view, name: str, widget: str) -> None:
    """Keyboard-operable in JupyterLab too: an arrow key on a focused slider moves it and the kernel
    redraws. (The notebook takes the keys that bubble out of an output in command mode: a front-end
    must keep its keys, ``keydown`` -> ``stopPropagation()``.)"""
    slider = view.locator("input[type=range]").first
    before_value, before = slider.input_value(), view.evaluate(DRAWN[widget])
    slider.focus()
    key = "ArrowLeft" if before_value == slider.get_attribute("max") else "ArrowRight"
    page.keyboard.press(key)
    page.wait_for_timeout(300)
    assert slider.input_value() != before_value, f"{name}: {key} on the slider did not move it in JupyterLab"
    page.wait_for_function(f"([el, before]) => JSON.stringify(({DRAWN[widget]})(el)) !== JSON.stringify(before)",
                           arg=[view.element_handle(), before], timeout=30000)


def dom_controls(view) -> dict:
    """{label text: value} of the widget's visible controls, as the page shows them."""
    return {c["label"]: c["value"] for c in view.evaluate(LIST_CONTROLS)}


def answer_explorer(view) -> None:
    """The drawn groups are what normlab computes for the settings the page shows (the kernel drew them)."""
    from normlab.widgets import explorer

    c = dom_controls(view)
    layout, norm = c["布局 (layout)"], c["归一化 (norm)"]
    dims = sorted((d for d in explorer.SPEC["controls"] if d.get("part_of") == "shape" and d["layout"] == layout),
                  key=lambda d: d["index"])
    shape = [int(c[d["label"]]) for d in dims]
    g = int(next((v for k, v in c.items() if k.startswith("组数 G")), 2) or 2)
    data = explorer.explorer_data(norm, layout, shape, g)
    drawn = drawn_explorer(view.element_handle())
    assert drawn["groups"] == grid_groups(data), f"{layout} {norm} {shape}: the drawn groups are not the kernel's"
    assert drawn["lit"] == drawn["same_group"]


def answer_gradflow(view) -> None:
    """The last drawn points are gradflow.curve_data() for the settings the page shows (seed 0 in 01)."""
    from normlab.widgets import gradflow

    values = view.evaluate("v => Object.fromEntries(Array.from(v.querySelectorAll('select[name], input[name]'))"
                           ".map(e => [e.name, e.value]))")
    fixed = gradflow.DEFAULTS | LAB_SETTINGS["gradflow"]             # controls a lesson does not show
    controls = {n: int(values.get(n, fixed[n])) if n in ("depth", "width") else values.get(n, fixed[n])
                for n in gradflow.CONTROL_ORDER}
    data = gradflow.curve_data(controls, seed=0)
    drawn = drawn_gradflow(view.element_handle())
    assert drawn["grad"][0] == pytest.approx(data["grad"][-1], rel=1e-3), controls
    assert drawn["act"][0] == pytest.approx(data["act"][-1], rel=1e-3), controls


KERNEL_ANSWER = {"explorer": answer_explorer, "gradflow": answer_gradflow}


def test_lab_toy_redraws_through_the_kernel(browser, lab, artifacts):
    """The host alone in JupyterLab: anywidget loads the toy module, a control change goes to the
    kernel, compute() answers, the front-end redraws. Beside it a 先想一想 choice and its answer fold
    (marked as the export marks it): the fold stays shut until a pick, which the kernel records."""
    import nbformat

    from normlab import predictions as P
    from test_browser_lab import run_all

    store = lab["dir"] / "predictions 99.json"                 # not the tester's own ~/.normlab
    store.unlink(missing_ok=True)
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(f"import os\nos.environ['NORMLAB_PREDICTIONS'] = {str(store)!r}\n"
                                  'from normlab.widgets import predict\npredict.ask("01", "depth-std")'),
        nbformat.v4.new_markdown_cell(f"<details><summary>答案 (answer){P.answer_marker('01.depth-std')}</summary>\n\n"
                                      "depth-std 的答案\n\n</details>"),
        nbformat.v4.new_code_cell(TOY_CELL)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab["dir"] / "99_toy.ipynb")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems = watch(page)
    run_all(page, lab, "99_toy")
    answer_shut_until_a_pick(page, store, artifacts)
    change_live_control(page, "99_toy", "_toy", artifacts)
    page.close()
    assert not [p for p in problems if p.startswith("network")], problems


def answer_shut_until_a_pick(page, store: Path, artifacts: Path) -> None:
    """JupyterLab's sanitizer keeps the fold's marker; a click on the fold before a pick leaves it shut
    and says why; the kernel's reply to a pick (data-saved, the file written) opens it."""
    ask, fold = page.locator(".nl-pr-ask"), page.locator(".jp-MarkdownCell details:has(.nl-answer-for-01-depth-std)")
    ask.wait_for(timeout=30000)
    fold.scroll_into_view_if_needed()
    assert ask.get_attribute("data-lock") == "1" and not store.exists()
    fold.locator("summary").click()
    page.wait_for_timeout(200)
    assert not fold.evaluate("d => d.open")
    assert "先在上面选一个预测再看答案" in fold.locator(".nl-answer-why").inner_text()
    page.screenshot(path=str(artifacts / "predict_lab_locked.png"))
    ask.get_by_role("radio", name="(B)").click()
    page.wait_for_selector(".nl-pr-ask[data-saved='1'][data-lock='0']", timeout=3000)   # before the 4 s fail-open
    assert '"01.depth-std"' in store.read_text(encoding="utf-8")
    fold.locator("summary").click()
    page.wait_for_timeout(200)
    assert fold.evaluate("d => d.open") and fold.locator(".nl-answer-why").count() == 0
    page.screenshot(path=str(artifacts / "predict_lab_opened.png"))


WIDGET_CALL = {"explorer": "AxesExplorer(", "gradflow": "GradFlow("}


def up_to_widget(folder: Path, name: str, widget: str) -> str:
    """A copy of the lesson that ends with the cell that shows ``widget`` (every cell before it kept, in
    order: the widget sees the kernel state a learner's Run All gives it). The cells after it are no
    part of this test: nbval runs every cell of the lesson in this run (solution and learner copies),
    and running them here too made JupyterLab execute 01 and 03 a fourth time (01: 45 s)."""
    import nbformat

    nb = nbformat.read(folder / f"{name}.ipynb", 4)
    last = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and WIDGET_CALL[widget] in c.source)
    nb.cells = nb.cells[:last + 1]
    nbformat.write(nb, folder / f"{name}_widget.ipynb")
    return f"{name}_widget"


@pytest.mark.parametrize("name", list(LAB_NOTEBOOKS))
def test_lab_widget_redraws_through_the_kernel(browser, lab, artifacts, name):
    from test_browser_lab import errors_in, run_all

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    problems = watch(page)
    run_all(page, lab, up_to_widget(lab["dir"], name, LAB_NOTEBOOKS[name]))
    assert not errors_in(page), errors_in(page)
    change_live_control(page, name, LAB_NOTEBOOKS[name], artifacts)
    page.close()
    assert not [p for p in problems if p.startswith("network")], problems
