"""The widgets' browser front-ends in Chromium (issue 17): with no kernel in the built book and the
slides (a precomputed grid in the page, opened from file:// and from a plain static server); through
the kernel in JupyterLab: tests/test_browser_lab.py (with the other JupyterLab tests: one server).

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

import pytest

from conftest import off_host, serve

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

# One entry of that grid (or its keys: ``key`` null), the fragment read once per box and kept in the page:
# a course grid is up to 3 MB of JSON, ~3 s through Playwright each time it crosses whole (issue 27).
GRID_ENTRY = """async (box, key) => {
  if (!box.__normlabFragment) box.__normlabFragment = (%s)(box);
  const grid = (await box.__normlabFragment).grid;
  return key === null ? Object.keys(grid) : (key in grid ? grid[key] : null);
}""" % READ_FRAGMENT


class PageGrid:
    """A static widget's grid as its page embeds it, looked up entry by entry (GRID_ENTRY)."""

    def __init__(self, box):
        self.box = box

    def get(self, key: str):
        return self.box.evaluate(GRID_ENTRY, key)

    def __getitem__(self, key: str):
        entry = self.get(key)
        if entry is None:
            raise KeyError(key)
        return entry

    def keys(self) -> list[str]:
        return self.box.evaluate(GRID_ENTRY, None)


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
# ms from the input event to the next animation frame after the view changed, or -1 (no change within
# ``frames`` frames, default 30). DRAWN_WITHIN goes on waiting for the same change (from the same input
# event) up to 30 frames in all: exercise() waits that long only where the grid says the picture changes.
SET_CONTROL = """async ([box, label, value, frames]) => {
  const labelOf = %s;
  const view = box.querySelector('.normlab-web-view') || box;
  const el = Array.from(view.querySelectorAll('select, input[type=range]')).find(e => labelOf(e) === label);
  if (!el) throw new Error('no control labelled ' + label);
  const set = box.__normlabSet = { view, before: view.innerHTML, frames: 0 };
  el.value = String(value);
  set.t0 = performance.now();
  el.dispatchEvent(new Event('input', { bubbles: true }));
  el.dispatchEvent(new Event('change', { bubbles: true }));
  return await (%s)(box, frames || 30);
}""" % (LABEL_OF, "%s")
DRAWN_WITHIN = """async (box, frames) => {
  const set = box.__normlabSet;
  for (; set.frames < frames; set.frames++) {
    await new Promise((r) => requestAnimationFrame(r));
    if (set.view.innerHTML !== set.before) return performance.now() - set.t0;
  }
  return -1;
}"""
SET_CONTROL = SET_CONTROL % DRAWN_WITHIN


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
    page.on("request", lambda r: problems.append(f"network: {r.url}") if off_host(r.url) else None)
    return problems


def widgets(page):
    """The static widgets on a page, once each has rendered (or failed)."""
    page.wait_for_function("""() => Array.from(document.querySelectorAll('.normlab-web'))
        .every(b => b.dataset.ready === '1' || b.querySelector('.normlab-web-failed'))""", timeout=20000)
    return page.locator(".normlab-web").element_handles()


def pages_with_widgets(folder: Path, pattern: str) -> list[Path]:
    """The built pages holding an explorer or a gradient-flow widget (the 先想一想 choices are on every
    lesson's page: tests/test_predictions.py drives them)."""
    return sorted(p for p in folder.glob(pattern)
                  if any(f'data-widget="{w}"' in p.read_text(encoding="utf-8") for w in ("explorer", "gradflow")))


def pick_every_prompt(page) -> None:
    """Pick an option of every 先想一想 prompt on a page of the learners' book (a click on its first option):
    a prompt's experiment, a widget among it, shows after a pick (issue 40)."""
    from conftest import bench_widgets

    page.evaluate(bench_widgets.PICK_EVERY_PROMPT)


def real_widgets(page) -> list:
    """The course's explorer and gradient-flow widgets on a page, once rendered."""
    return [b for b in widgets(page) if b.get_attribute("data-widget") in ("explorer", "gradflow")]


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
    """Move every control of one static widget through some of its values (``per_control`` of them, spread
    over its range; 1: its last), as a user would (but the controls labelled in ``skip``). After each move
    the state the page looked up (the shim's data-key) holds the new value, the drawn picture is the grid's entry for that key, and the picture changed
    when the entry did; a refused setting shows its message. Returns the number of drawn states checked."""
    name = box.get_attribute("data-widget")
    check, drawn = CHECKS[name]
    grid = PageGrid(box)
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
        picks = values if len(values) <= per_control else [values[-1]] if per_control == 1 else \
            [values[i * (len(values) - 1) // (per_control - 1)] for i in range(per_control)]
        for v in picks:
            key_before, seen_before = box.get_attribute("data-key"), drawn(box)
            ms = page.evaluate(SET_CONTROL, [box, label, v, 2])
            key = box.get_attribute("data-key")
            assert v in re.split(r"[|,]", key) or key != key_before or v in box.get_attribute("data-controls"), \
                f"{shot}: {label}={v} did not reach the model (key {key})"
            entry = grid.get(key)
            if entry is None or "__error__" in entry:      # refused or absent: a message, the picture stays
                msg = entry["__error__"] if entry else "不在预先计算的网格里"
                page.wait_for_function("([b, m]) => b.textContent.includes(m)", arg=[box, msg[:10]], timeout=5000)
                continue
            if ms < 0 and PICTURE[name](entry) != PICTURE[name](shown):   # not in the first two frames: up to 30
                ms = box.evaluate(DRAWN_WITHIN, 30)
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
        assert {k.split("|")[1] for k in PageGrid(box).keys()} == {"batchnorm"}
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


TOY_PAGE = {"99_toy": (f"# 玩具\n\n```{{code-cell}} ipython3\n{TOY_CELL}\n```\n", "玩具")}   # conftest's toy_site


@pytest.fixture(scope="module")
def toy_book(toy_site):
    """The toy's page and deck, built the way tools/book.py builds the course's (conftest's toy_site:
    execute_all with NORMLAB_STATIC=1, static_widgets, Sphinx, the slides' exporter)."""
    html, slides, nbs = toy_site
    outputs = [o for c in nbs["99_toy"].cells for o in c.get("outputs", [])]
    assert any("normlab-web" in o.get("data", {}).get("text/html", "") for o in outputs), outputs
    assert not any(WIDGET_VIEW in o.get("data", {}) for o in outputs)
    return html, slides


@pytest.mark.parametrize("where", ["book-file", "book-server", "slides-file", "slides-server"])
def test_toy_notebook_through_the_book_and_the_slides(browser, toy_book, artifacts, where):
    html, slides = toy_book
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
                check_explorer(box, PageGrid(box)[box.get_attribute("data-key")])
                moved = True
                break
        assert moved, f"{shot}: no arrow key moved the selected cell"
        page.screenshot(path=str(artifacts / f"{shot}_arrows.png"))
