"""One browser front-end per widget, fed by two data sources (issue 17).

A widget's front-end is an anywidget ES module, ``normlab/widgets/web/<name>.js`` (+ ``<name>.css``):
plain DOM and SVG/canvas, no build step, nothing fetched from the network. What the widgets share comes
by concatenation, not by import: ``esm_text`` puts web/common.js before the module, ``css_text``
web/common.css before its stylesheet. It talks to a *model*
through five methods only: ``get``, ``set``, ``save_changes``, ``on("change:NAME")``, ``off``, and
five synced traits:

    controls  the current control values (ints and strings); the front-end sets it on user input
    data      everything the front-end draws for those controls (plain JSON)
    spec      the control definitions, titles, axis labels, ``control_order`` (constant)
    source    "live" (JupyterLab: Python computes ``data``) or "grid" (book, slides: a lookup table)
    error     a learner-facing Chinese message, "" when none
    grid      live, where the subclass's grid is cheap (``live_grid``): the precomputed grid, packed
              (grid_file.pack), and ``grid_meta`` its key order and fixed controls; the front-end
              answers a state it holds at once, the kernel follows

Live: ``WebWidget`` (an ``anywidget.AnyWidget``); a subclass implements ``compute(controls) -> dict``
and ``grid_controls()``; a change of ``controls`` recomputes ``data`` in the kernel.

Static: ``static_html(name, spec, grid, initial_controls, png)`` is one self-contained HTML fragment:
the CSS inline, the module's text imported through a Blob URL (works from file:// and from a plain
static server), the grid ``{key: data}`` as inline JSON (gzip + base64 when large) and a model shim
whose ``save_changes`` looks ``data`` up in the grid, key = "|".join(str(controls[n]) for n in
control_order) (``grid_key``). The same module draws both.

``mimebundle(widget)`` chooses: with ``NORMLAB_STATIC=1`` in the environment (tools/book.py sets it
for the book's and the slides' executors) the static fragment plus the PNG picture; otherwise the
anywidget view plus the PNG and a text/plain fallback (nbval and a plain nbconvert keep a picture).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import html
import itertools
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import anywidget
import traitlets

from . import grid_file

__all__ = ["WebWidget", "static_html", "mimebundle", "grid_key", "plain", "esm_text", "css_text",
           "WEB_DIR", "GRID_BADGE", "LIVE_BADGE", "MISSING_MESSAGE"]

WEB_DIR = Path(__file__).resolve().parent / "web"
GRID_BADGE = "预先计算的网格 (precomputed grid, no kernel)"
LIVE_BADGE = "实时计算 (live, kernel)"
MISSING_MESSAGE = "这个组合不在预先计算的网格里 (not in the precomputed grid)"
ERROR_KEY = "__error__"          # a grid entry {ERROR_KEY: message}: that setting is refused (error trait)
COMPRESS_ABOVE = 256 * 1024      # a grid whose JSON is larger travels gzip-compressed, base64-encoded
FONTS = '"Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Micro Hei", "Microsoft YaHei", "PingFang SC", sans-serif'


# --- the front-end's files ---------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _read(path: Path, mtime: float) -> str:   # mtime in the key: an edited file is read again
    return path.read_text(encoding="utf-8")


def esm_text(name: str) -> str:
    """The ES module of front-end ``name``: web/common.js (the helpers every widget shares, no import or
    export; its top-level names start with ``nl``/``NL_``) then web/<name>.js. One text, so it serves
    both ways: anywidget's ``_esm`` and the static page's Blob-URL import, where a relative import
    between modules would not resolve."""
    path = WEB_DIR / f"{name}.js"
    if not path.exists():
        raise FileNotFoundError(f"没有这个前端模块 (front-end module)：{path}")
    common = WEB_DIR / "common.js"
    return _read(common, common.stat().st_mtime) + "\n" + _read(path, path.stat().st_mtime)


def css_text(name: str) -> str:
    """Its stylesheet: web/common.css (what every widget shares) then web/<name>.css, "" when it has none."""
    path = WEB_DIR / f"{name}.css"
    if not path.exists():
        return ""
    common = WEB_DIR / "common.css"
    return _read(common, common.stat().st_mtime) + "\n" + _read(path, path.stat().st_mtime)


# --- data: plain JSON, the same numbers in the kernel and in the grid ------------------------------------

def plain(obj: Any, digits: int = 4) -> Any:
    """``obj`` as plain JSON values: tensors and arrays become lists, floats keep ``digits``
    significant digits, NaN and infinities become None (JSON has neither), tuples become lists."""
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return None
        return float(f"{obj:.{digits}g}") if digits else obj
    if isinstance(obj, Mapping):
        return {str(k): plain(v, digits) for k, v in obj.items()}
    if hasattr(obj, "tolist"):          # torch.Tensor, numpy arrays and numpy scalars
        return plain(obj.tolist(), digits)
    if isinstance(obj, Iterable):
        return [plain(v, digits) for v in obj]
    raise TypeError(f"不能转成 JSON 的数据 (not JSON-serialisable)：{type(obj).__name__}")


def control_order(spec: Mapping) -> list[str]:
    """The controls' names in key order: spec["control_order"], else the order of spec["controls"]."""
    if "control_order" in spec:
        return list(spec["control_order"])
    return [c["name"] for c in spec.get("controls", [])]


def grid_key(controls: Mapping, order: Sequence[str]) -> str:
    """The grid's key of a control state; the shim computes the same in JavaScript
    (``order.map(n => String(controls[n])).join("|")``), so values must be ints or strings."""
    for n in order:
        v = controls[n]
        if isinstance(v, bool) or not isinstance(v, (int, str)):
            raise TypeError(f"控件的值只能是整数或字符串 (control values must be int or str)：{n}={v!r}")
    return "|".join(str(controls[n]) for n in order)


# --- live: the anywidget -------------------------------------------------------------------------------

class WebWidget(anywidget.AnyWidget):
    """A widget whose browser front-end is ``web/<web_name>.js``; Python computes ``data``.

    Subclass it, set ``web_name`` and implement ``compute(controls) -> dict`` (raise ValueError with a
    Chinese message for a refused setting: it goes to ``error`` and ``data`` stays) and
    ``grid_controls()`` (the control states the book precomputes). ``WebWidget(name, compute=f,
    spec=..., controls=...)`` does the same without a subclass.
    """

    web_name: ClassVar[str] = ""

    controls = traitlets.Dict().tag(sync=True)
    data = traitlets.Dict().tag(sync=True)
    spec = traitlets.Dict().tag(sync=True)
    source = traitlets.Unicode("live").tag(sync=True)
    error = traitlets.Unicode("").tag(sync=True)
    grid = traitlets.Unicode("").tag(sync=True)
    grid_meta = traitlets.Dict().tag(sync=True)
    live_grid: ClassVar[bool] = False        # static_grid() is cheap (shipped): send it to the front-end
    grid_fixed: ClassVar[dict] = {}          # controls outside the grid's key that it assumes ({"seed": 0})
    _grid: Mapping = {}                      # the live grid (set in __init__ where live_grid), {} otherwise

    def __init_subclass__(cls, **kwargs) -> None:
        if cls.__dict__.get("web_name"):
            cls._esm = esm_text(cls.web_name)
            cls._css = css_text(cls.web_name) + "\n"   # multi-line: anywidget never takes it for a path
        super().__init_subclass__(**kwargs)

    def __init__(self, name: str | None = None, *, compute=None, grid_controls=None, spec: Mapping | None = None,
                 controls: Mapping | None = None, **kwargs) -> None:
        if name is not None:                       # composition: any module from web/
            self.web_name = name
        if not self.web_name:
            raise ValueError("WebWidget 需要前端模块的名字 (web_name)")
        if name is not None or not hasattr(self, "_esm"):
            self._esm = esm_text(self.web_name)
            self._css = css_text(self.web_name) + "\n"
        if compute is not None:
            self.compute = compute
        if grid_controls is not None:
            self.grid_controls = grid_controls
        super().__init__(spec=dict(spec or {}), **kwargs)
        self.controls = dict(controls or {})       # computes the first data (observer below)
        if not self.data and not self.error:
            self._recompute(self.controls)
        if self.live_grid and not static_mode():
            self._grid = self.static_grid()
            self.grid_meta = {"order": control_order(self.spec), "fixed": dict(self.grid_fixed)}
            self.grid = grid_file.pack(self._grid)

    # what a subclass provides
    def compute(self, controls: dict) -> dict:
        raise NotImplementedError

    def grid_controls(self) -> list[dict]:
        """The control states the static book precomputes (default: only the current one)."""
        return [dict(self.controls)]

    @traitlets.observe("controls")
    def _on_controls(self, change) -> None:
        self._recompute(change["new"])

    def _recompute(self, controls: Mapping) -> None:
        entry = grid_file.entry(self._grid, controls, control_order(self.spec), self.grid_fixed)   # drawn already
        try:
            if entry is not None and ERROR_KEY in entry:
                raise ValueError(entry[ERROR_KEY])
            data = dict(entry) if entry is not None else plain(self.compute(dict(controls)))
        except ValueError as err:
            self.error = str(err)                   # data unchanged: the last good picture stays
            return
        self.error = ""
        self.data = data

    def set_controls(self, **changes) -> dict:
        """Change some controls from Python (as the front-end would); returns the new data."""
        self.controls = {**self.controls, **changes}
        return self.data

    def static_grid(self) -> dict[str, dict]:
        """{grid_key(controls): data} over ``grid_controls()``; a refused setting stores its message."""
        order = control_order(self.spec)
        grid = {}
        for c in self.grid_controls():
            try:
                grid[grid_key(c, order)] = plain(self.compute(dict(c)))
            except ValueError as err:
                grid[grid_key(c, order)] = {ERROR_KEY: str(err)}
        return grid

    def static_html(self, png: bytes | None = None) -> str:
        return static_html(self.web_name, self.spec, self.static_grid(), self.controls, png=png)

    def _repr_mimebundle_(self, **kwargs):
        return mimebundle(self)


# --- static: one self-contained fragment -----------------------------------------------------------

_ids = itertools.count(1)


def _script_json(value: Any) -> str:
    """JSON safe inside <script>: no '<' can close the element or open a comment."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


HOST_CSS = f"""
.normlab-web {{ font-family: {FONTS}; font-size: 14px; margin: 0.5em 0; }}
.normlab-web .normlab-web-badge {{ display: inline-block; font-size: 14px; padding: 2px 8px; margin-bottom: 4px;
  border-radius: 4px; background: #e8f0fe; color: #1a3e72; border: 1px solid #9db6e0; }}
.normlab-web .normlab-web-failed {{ color: #b00020; font-size: 14px; }}
"""

# The shim: the five model methods over a grid, then the front-end's render(). {{id}} and the others are
# filled by static_html. Loaded modules are cached per page (several widgets share one Blob URL).
SHIM = r"""
const box = document.getElementById("__ID__");
const read = (cls) => box.querySelector(":scope > script." + cls).textContent;
const failed = (err) => {
  console.error("normlab widget __NAME__:", err);
  const msg = document.createElement("div");
  msg.className = "normlab-web-failed";
  msg.textContent = "交互图载入失败 (widget failed to load)：" + err;
  box.appendChild(msg);
  const fallback = box.querySelector(":scope > noscript");
  if (fallback) { const d = document.createElement("div"); d.innerHTML = fallback.textContent; box.appendChild(d); }
};
try {
  const spec = JSON.parse(read("normlab-web-spec"));
  const gridScript = box.querySelector(":scope > script.normlab-web-grid");
  let gridText = gridScript.textContent;
  if (gridScript.dataset.encoding === "gzip-base64") {
    const bytes = Uint8Array.from(atob(gridText), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    gridText = await new Response(stream).text();
  }
  const grid = JSON.parse(gridText);
  const order = spec.control_order;
  const keyOf = (c) => order.map((n) => String(c[n])).join("|");
  const ERROR_KEY = "__ERROR_KEY__", MISSING = "__MISSING__";
  const state = { controls: JSON.parse(read("normlab-web-controls")), data: {}, spec, source: "grid", error: "" };
  const listeners = new Map();
  const dirty = new Set();
  const model = {
    get(name) { return state[name]; },
    set(name, value) { state[name] = value; dirty.add(name); emit(name); },
    save_changes() {
      if (!dirty.has("controls")) { dirty.clear(); return; }
      dirty.clear();
      lookUp();
    },
    on(event, cb) { if (!listeners.has(event)) listeners.set(event, new Set()); listeners.get(event).add(cb); },
    off(event, cb) { if (!event) { listeners.clear(); return; }
                     if (!cb) { listeners.delete(event); return; }
                     if (listeners.has(event)) listeners.get(event).delete(cb); },
  };
  function emit(name) {
    for (const cb of Array.from(listeners.get("change:" + name) || [])) cb(model, state[name]);
    for (const cb of Array.from(listeners.get("change") || [])) cb(model);
  }
  function lookUp() {
    const key = keyOf(state.controls);
    box.dataset.key = key;                       // for the browser tests and tools/bench_widgets.py
    box.dataset.controls = JSON.stringify(state.controls);
    const entry = grid[key];
    const error = entry === undefined ? MISSING : (entry[ERROR_KEY] || "");
    const fresh = !error && entry !== state.data;    // as Backbone: no change event for the same value
    if (fresh) state.data = entry;
    if (state.error !== error) { state.error = error; emit("error"); }
    if (fresh) emit("data");
  }
  box.dataset.key = keyOf(state.controls);
  box.dataset.controls = JSON.stringify(state.controls);
  const first = grid[box.dataset.key];
  if (first === undefined) state.error = MISSING;
  else if (first[ERROR_KEY]) state.error = first[ERROR_KEY];
  else state.data = first;

  const cache = (window.__normlabModules = window.__normlabModules || {});
  const key = "__NAME__:__HASH__";
  if (!cache[key]) {
    const source = JSON.parse(read("normlab-web-esm"));
    const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
    cache[key] = import(url);
  }
  const mod = await cache[key];
  const widget = mod.default;
  const view = box.querySelector(":scope > .normlab-web-view");
  const render = typeof widget === "function" ? (await widget()).render : widget.render;
  await render({ model, el: view });
  box.dataset.ready = "1";
  // The front-end shows the source itself (contract); the host's badge stays only where it does not.
  requestAnimationFrame(() => {
    if (view.textContent.includes("预先计算的网格")) box.querySelector(":scope > .normlab-web-badge").style.display = "none";
  });
} catch (err) { failed(err); }
"""


def static_html(name: str, spec: Mapping, grid: Mapping[str, Mapping], initial_controls: Mapping,
                png: bytes | None = None, *, compress: bool | None = None) -> str:
    """One self-contained HTML fragment that runs front-end ``name`` over a precomputed ``grid``.

    ``grid`` maps ``grid_key(controls, order)`` to the data drawn for those controls (or to
    ``{"__error__": message}`` for a refused setting); floats are rounded to 4 significant digits
    here. ``png`` (the matplotlib picture) is kept in a <noscript> (no JavaScript, and shown if the
    module fails). ``compress``: gzip + base64 the grid (default: when its JSON exceeds 256 KB)."""
    spec = dict(spec)
    spec["control_order"] = control_order(spec)
    initial = {n: initial_controls[n] for n in spec["control_order"]}
    grid_key(initial, spec["control_order"])       # checks the values' types
    grid_json = json.dumps(plain(grid), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if compress is None:
        compress = len(grid_json.encode()) > COMPRESS_ABOVE
    if compress:
        grid_text = base64.b64encode(gzip.compress(grid_json.encode(), compresslevel=9, mtime=0)).decode()
        encoding = "gzip-base64"
    else:
        grid_text, encoding = grid_json.replace("<", "\\u003c"), "json"
    esm = esm_text(name)
    digest = hashlib.sha1(esm.encode()).hexdigest()[:10]
    uid = f"normlab-{name.strip('_')}-{next(_ids)}-{hashlib.sha1((grid_text + repr(initial)).encode()).hexdigest()[:8]}"
    shim = (SHIM.replace("__ID__", uid).replace("__NAME__", name).replace("__HASH__", digest)
            .replace("__ERROR_KEY__", ERROR_KEY).replace("__MISSING__", MISSING_MESSAGE))
    fallback = ""
    if png:
        alt = html.escape(str(spec.get("title", name)), quote=True)
        fallback = (f'<noscript><img alt="{alt}" style="max-width:100%" '
                    f'src="data:image/png;base64,{base64.b64encode(png).decode()}"></noscript>')
    return (f'<div class="normlab-web" id="{uid}" data-widget="{html.escape(name, quote=True)}" data-source="grid">'
            f"<style>{HOST_CSS}{css_text(name)}</style>"
            f'<div class="normlab-web-badge">{GRID_BADGE}</div>'
            f'<div class="normlab-web-view"></div>'
            f"{fallback}"
            f'<script type="application/json" class="normlab-web-spec">{_script_json(spec)}</script>'
            f'<script type="application/json" class="normlab-web-controls">{_script_json(initial)}</script>'
            f'<script type="application/json" class="normlab-web-grid" data-encoding="{encoding}">{grid_text}</script>'
            f'<script type="application/json" class="normlab-web-esm">{_script_json(esm)}</script>'
            f'<script type="module">{shim}</script>'
            f"</div>")


# --- which one a notebook cell shows -------------------------------------------------------------------

def static_mode() -> bool:
    """True in the book's and the slides' executors (tools/book.py sets NORMLAB_STATIC=1)."""
    return os.environ.get("NORMLAB_STATIC") == "1"


def mimebundle(widget: WebWidget, *, png: bytes | None = None, text: str | None = None,
               grid: Mapping | None = None) -> tuple[dict, dict]:
    """The display bundle of a widget: ``(data, metadata)`` for ``_repr_mimebundle_``.

    NORMLAB_STATIC=1: text/html = static_html(...) over ``grid`` (default ``widget.static_grid()``), plus
    image/png and text/plain; no widget view. Otherwise: the anywidget view, image/png and text/plain.
    ``png`` defaults to ``widget.png()`` where the widget has one; ``text`` to ``widget.caption()``."""
    if png is None and callable(getattr(widget, "png", None)):
        png = widget.png()
    if text is None:
        text = widget.caption() if callable(getattr(widget, "caption", None)) else f"<{type(widget).__name__}>"
    if static_mode():
        grid = widget.static_grid() if grid is None else grid
        data = {"text/html": static_html(widget.web_name, widget.spec, grid, widget.controls, png=png),
                "text/plain": text}
        metadata: dict = {}
    else:
        data, metadata = anywidget.AnyWidget._repr_mimebundle_(widget)
        data = dict(data, **{"text/plain": text})
    if png:
        data["image/png"] = base64.b64encode(png).decode()
    return data, metadata
