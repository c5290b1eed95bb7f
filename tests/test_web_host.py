"""The widgets' browser host (normlab/widgets/web_host.py) without a browser: the live widget's
traits and errors, the grid's keys, the static fragment and which bundle a cell shows."""

from __future__ import annotations

import base64
import gzip
import json
import re

import pytest

from normlab.widgets import web_host
from normlab.widgets.web_host import WebWidget, grid_key, mimebundle, plain, static_html

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 16
REFUSED = "颜色不能是 none (color)：这个设置被拒绝"


class Toy(WebWidget):
    """The toy front-end (web/_toy.js): n bars of height 1..n, in a colour."""

    web_name = "_toy"
    SPEC = {"title": "玩具 toy", "controls": [
        {"name": "n", "label": "条数 (bars)", "kind": "range", "min": 1, "max": 5, "step": 1},
        {"name": "color", "label": "颜色 (color)", "kind": "select",
         "options": [["red", "红 red"], ["blue", "蓝 blue"], ["none", "无 none"]]}]}

    def __init__(self, **controls):
        super().__init__(spec=self.SPEC, controls={"n": 3, "color": "red", **controls})

    def compute(self, controls):
        if controls["color"] == "none":
            raise ValueError(REFUSED)
        return {"bars": [i + 1 + 1 / 3 for i in range(controls["n"])], "color": controls["color"]}

    def grid_controls(self):
        return [{"n": n, "color": c} for n in range(1, 6) for c in ("red", "blue", "none")]

    def png(self):
        return PNG

    def caption(self):
        return f"toy: {self.controls}"


def fragment_parts(html: str) -> dict:
    """The inline JSON of a static fragment, by class."""
    parts = {}
    for cls, enc, text in re.findall(r'<script type="application/json" class="normlab-web-(\w+)"'
                                     r'(?: data-encoding="([\w-]+)")?>(.*?)</script>', html, flags=re.S):
        if enc == "gzip-base64":
            text = gzip.decompress(base64.b64decode(text)).decode()
        parts[cls] = json.loads(text)
    return parts


def test_live_widget_computes_data_on_a_control_change():
    w = Toy()
    assert w.source == "live" and w.error == ""
    assert w.data == {"bars": [1.333, 2.333, 3.333], "color": "red"}     # 4 significant digits
    w.controls = {"n": 5, "color": "blue"}
    assert len(w.data["bars"]) == 5 and w.data["color"] == "blue"
    assert "export default" in w._esm and w._css.strip() == ""


def test_a_refused_setting_sets_the_chinese_error_and_keeps_the_picture():
    w = Toy()
    before = dict(w.data)
    w.set_controls(color="none")
    assert w.error == REFUSED
    assert w.data == before
    w.set_controls(color="blue")
    assert w.error == "" and w.data["color"] == "blue"


def test_widget_by_name_without_a_subclass():
    w = WebWidget("_toy", compute=lambda c: {"bars": [c["n"]]}, spec=Toy.SPEC, controls={"n": 2, "color": "red"})
    assert w.data == {"bars": [2]}
    w.set_controls(n=4)
    assert w.data == {"bars": [4]}


def test_plain_and_grid_key():
    import numpy as np
    import torch

    assert plain({"a": torch.tensor([1.23456, float("nan")]), "b": np.float32(2.5), "c": (1, "x")}) == \
        {"a": [1.235, None], "b": 2.5, "c": [1, "x"]}
    assert grid_key({"b": 2, "a": "x"}, ["a", "b"]) == "x|2"
    with pytest.raises(TypeError):
        grid_key({"a": 0.5}, ["a"])   # floats would print differently in Python and JavaScript


def test_static_grid_keys_and_refused_settings():
    grid = Toy().static_grid()
    assert len(grid) == 15
    assert grid["2|blue"] == {"bars": [1.333, 2.333], "color": "blue"}
    assert grid["4|none"] == {"__error__": REFUSED}


@pytest.mark.parametrize("compress", [False, True])
def test_static_fragment_is_self_contained(compress):
    w = Toy()
    html = static_html("_toy", w.spec, w.static_grid(), w.controls, png=PNG, compress=compress)
    parts = fragment_parts(html)
    assert parts["grid"] == w.static_grid()
    assert parts["spec"]["control_order"] == ["n", "color"]
    assert parts["controls"] == {"n": 3, "color": "red"}
    assert parts["esm"] == web_host.esm_text("_toy")
    assert "预先计算的网格 (precomputed grid, no kernel)" in html
    assert "data:image/png;base64," + base64.b64encode(PNG).decode() in html
    assert 'type="module"' in html and "URL.createObjectURL" in html
    assert not re.search(r"\b(src|href)=\"(https?:)?//", html)        # nothing from the network
    assert html.count("</script>") == html.count("<script")          # no '</script>' inside the data


def test_script_closing_text_in_the_data_cannot_break_the_page():
    grid = {"1|red": {"label": "</script><script>alert(1)</script>"}}
    html = static_html("_toy", Toy.SPEC, grid, {"n": 1, "color": "red"}, compress=False)
    assert html.count("</script>") == 5
    assert fragment_parts(html)["grid"] == grid


def test_each_fragment_has_its_own_id():
    a = static_html("_toy", Toy.SPEC, {}, {"n": 1, "color": "red"})
    b = static_html("_toy", Toy.SPEC, {}, {"n": 1, "color": "red"})
    ida, idb = (re.search(r'class="normlab-web" id="([\w-]+)"', h).group(1) for h in (a, b))
    assert ida != idb and f'getElementById("{ida}")' in a


def test_bundle_is_static_html_in_the_book(monkeypatch):
    monkeypatch.setenv("NORMLAB_STATIC", "1")
    data, _ = Toy()._repr_mimebundle_()
    assert set(data) == {"text/html", "image/png", "text/plain"}
    assert "normlab-web" in data["text/html"] and base64.b64decode(data["image/png"]) == PNG


def test_bundle_is_the_widget_view_elsewhere_with_a_picture(monkeypatch):
    monkeypatch.delenv("NORMLAB_STATIC", raising=False)
    w = Toy()
    data, _ = w._repr_mimebundle_()
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == w.model_id
    assert base64.b64decode(data["image/png"]) == PNG
    assert data["text/plain"].startswith("toy:")
    assert "text/html" not in data


def test_ipython_display_formatter_takes_the_bundle(monkeypatch):
    """What a notebook cell does with the widget on its last line (nbval runs it without NORMLAB_STATIC)."""
    from IPython.core.formatters import DisplayFormatter

    monkeypatch.delenv("NORMLAB_STATIC", raising=False)
    data, _ = DisplayFormatter().format(Toy())
    assert "application/vnd.jupyter.widget-view+json" in data and "image/png" in data
    monkeypatch.setenv("NORMLAB_STATIC", "1")
    data, _ = DisplayFormatter().format(Toy())
    assert "text/html" in data and "application/vnd.jupyter.widget-view+json" not in data


def test_a_widget_cell_passes_nbval(tmp_path):
    """nbval (run.py test) executes every notebook with no NORMLAB_STATIC: a cell that shows a widget
    must run and keep a picture (the toy here; the course's widgets are the same class)."""
    import os
    import subprocess
    import sys

    import nbformat

    cell = ("from normlab.widgets.web_host import WebWidget\n"
            "spec = {'controls': [{'name': 'n', 'label': '条数 (bars)', 'kind': 'range', 'min': 1, 'max': 5}]}\n"
            "w = WebWidget('_toy', spec=spec, controls={'n': 2}, compute=lambda c: {'bars': [1] * c['n']})\n"
            "w.png = lambda: b'\\x89PNG\\r\\n\\x1a\\n' + bytes(16)\n"
            "w")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell), nbformat.v4.new_code_cell("w.set_controls(n=4)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "widget.ipynb")
    env = {k: v for k, v in os.environ.items() if k != "NORMLAB_STATIC"}
    run = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "-q", "-p", "no:cacheprovider",
                          str(tmp_path / "widget.ipynb")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, encoding="utf-8")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]


# --- web/common.js: the helpers the front-ends share, put before each module's text -------------------

def _top_level_names(js: str) -> set[str]:
    """The names a module's text declares at its top level (lines that start a declaration at column 0)."""
    names = set()
    for line in js.splitlines():
        m = re.match(r"(?:function\*?|class)\s+(\w+)", line)
        if m:
            names.add(m.group(1))
            continue
        m = re.match(r"(?:const|let|var)\s+(.*)", line)
        if m:       # const W = 470, H = 310;  const a = ..., b = ...
            names.update(re.findall(r"(?:^|,)\s*(\w+)\s*=(?![=>])", m.group(1)))
    return names


def test_every_module_is_common_js_then_its_own_text():
    common = (web_host.WEB_DIR / "common.js").read_text(encoding="utf-8")
    shared = _top_level_names(common)
    assert {"nlNode", "nlHtml", "nlRoundTrip"} <= shared
    assert all(n.startswith(("nl", "NL_")) for n in shared), shared           # prefixed: no clash with a module's own
    assert "export" not in re.sub(r"//.*", "", common) and not re.search(r"^\s*import\b", common, re.M)
    for path in sorted(web_host.WEB_DIR.glob("*.js")):
        if path.name == "common.js":
            continue
        own = path.read_text(encoding="utf-8")
        text = web_host.esm_text(path.stem)
        assert text.startswith(common) and text.endswith(own), path.name
        assert not shared & _top_level_names(own), f"{path.name} redefines {shared & _top_level_names(own)}"


NODE = __import__("shutil").which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("name", sorted(p.stem for p in web_host.WEB_DIR.glob("*.js") if p.name != "common.js"))
def test_every_module_parses_with_common_js_before_it(tmp_path, name):
    import subprocess

    path = tmp_path / f"{name}.mjs"
    path.write_text(web_host.esm_text(name), encoding="utf-8")
    run = subprocess.run([NODE, "--check", str(path)], capture_output=True, text=True, timeout=60, encoding="utf-8")
    assert run.returncode == 0, run.stderr[-2000:]


# The round trip over a model stub in node: live, one request at a time and the latest input queued;
# grid (the shim answers at once), every input goes out; a same-data reply settles by the timer.
ROUND_TRIP = r"""
globalThis.requestAnimationFrame = (f) => setTimeout(f, 0);
function stub(live) {
  const state = { controls: { a: 0, b: 0 }, data: {}, error: "" }, listeners = {}, sent = [];
  const fire = (n) => (listeners["change:" + n] || []).forEach((f) => f());
  const model = {
    get: (n) => state[n],
    set: (n, v) => { state[n] = v; fire(n); },
    save_changes: () => { sent.push({ ...state.controls }); if (!live) reply(); },
    on: (e, f) => { (listeners[e] = listeners[e] || []).push(f); },
    off: (e, f) => { listeners[e] = (listeners[e] || []).filter((g) => g !== f); },
  };
  const reply = (data) => { state.data = data || { ...state.controls }; fire("data"); };
  return { model, sent, reply, listeners, state };
}
const out = {};
const el = { dataset: {} };
let drawn = [], shown = [];
const s = stub(true);
const trip = nlRoundTrip(s.model, el, { live: true, shown: { a: { show: (v) => shown.push(v) } },
                                        on: { data: nlKeepPrevious((c, p) => drawn.push([c, p])) }, fallbackMs: 20 });
trip.input({ a: 1 }); trip.input({ a: 2 }); trip.input({ b: 3 });
out.beforeReply = s.sent.slice();
s.reply();
out.afterReply = s.sent.slice();
s.reply();
trip.input({ a: 5 }); trip.input({ a: 6 });  // no reply (the same data: no change event): the timer settles
out.noReply = s.sent.length;
const g = stub(false);
const gtrip = nlRoundTrip(g.model, { dataset: {} }, { live: false });
gtrip.input({ a: 1 }); gtrip.input({ a: 2 });
out.grid = g.sent;
setTimeout(() => {
  out.afterTimer = s.sent.slice(2);
  out.drawn = drawn; out.shown = shown; out.updates = el.dataset.updates; out.ms = Number(el.dataset.lastUpdateMs) >= 0;
  trip.dispose();
  out.left = Object.values(s.listeners).reduce((n, l) => n + l.length, 0);
  console.log(JSON.stringify(out));
}, 100);
"""


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_round_trip_queues_the_latest_input_while_the_kernel_works(tmp_path):
    import subprocess

    common = (web_host.WEB_DIR / "common.js").read_text(encoding="utf-8")
    (tmp_path / "trip.mjs").write_text(common + ROUND_TRIP, encoding="utf-8")
    run = subprocess.run([NODE, str(tmp_path / "trip.mjs")], capture_output=True, text=True, timeout=60, encoding="utf-8")
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout)
    assert out["beforeReply"] == [{"a": 1, "b": 0}]                          # one request in flight
    assert out["afterReply"] == [{"a": 1, "b": 0}, {"a": 2, "b": 3}]        # then the latest, merged
    assert out["grid"] == [{"a": 1, "b": 0}, {"a": 2, "b": 0}]
    first, second = {"a": 1, "b": 0}, {"a": 2, "b": 3}
    assert out["noReply"] == 3 and out["afterTimer"] == [{"a": 5, "b": 3}, {"a": 6, "b": 3}]
    assert out["drawn"] == [[{}, None], [first, {}], [second, first]]       # the start, then each reply and the one before
    assert out["shown"] == [1, 2, 5, 6] and out["updates"] == "2" and out["ms"] and out["left"] == 0
