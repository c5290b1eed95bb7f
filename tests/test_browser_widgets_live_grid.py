"""The live widgets answer from the precomputed grid in the browser (issue 36: in JupyterLab a control took
62-65 ms, the kernel's round trip, whatever it computed; the same front-end answered from its grid in 12 ms
in the book).

The front-end runs in Chromium with a *live* model whose kernel never answers (save_changes only records
the controls sent): a state the grid holds is drawn from the grid at once (``el.dataset.lastAnswer`` is
"grid", the drawn title or caption is that state's), and the controls still go to the kernel; a state
outside the grid is not drawn until the kernel answers (here: never). Without the grid path nothing
redraws here at all. Python's side: the ``grid`` trait unpacks to the widget's static grid, and the kernel
answers a grid state with the grid's entry (what the browser drew), not a fresh computation.
The momentum widget's grid is all its states (m = 0.01 .. 0.99): every slider position is drawn from it;
the control is the same page without the grid trait, where nothing redraws. About 4 s (one page per widget,
the momentum control a second one)."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from normlab.widgets import explorer, gradflow, grid_file, momentum
from normlab.widgets.web_host import esm_text

PAGE = """<!doctype html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'></head>
<body style='width:1100px'><div id='view'></div>
<script type='application/json' id='state'>__STATE__</script>
<script type='application/json' id='esm'>__ESM__</script>
<script type='module'>
const state = JSON.parse(document.getElementById('state').textContent);
const listeners = new Map();
window.sent = [];
const model = {
  get: (n) => state[n],
  set(n, v) { state[n] = v; for (const cb of Array.from(listeners.get('change:' + n) || [])) cb(model, v); },
  save_changes() { window.sent.push(JSON.stringify(state.controls)); },     // a kernel that never answers
  on(e, cb) { if (!listeners.has(e)) listeners.set(e, new Set()); listeners.get(e).add(cb); },
  off() {},
};
const url = URL.createObjectURL(new Blob([JSON.parse(document.getElementById('esm').textContent)],
                                         { type: 'text/javascript' }));
const mod = await import(url);
await mod.default.render({ model, el: document.getElementById('view') });
window.ready = true;
</script></body></html>"""

# set one control (a select by value, or a slider), then wait up to `ms` for the next redraw
CHANGE = """async ([name, value, ms]) => {
  const view = document.getElementById('view');
  delete view.dataset.lastUpdateMs; delete view.dataset.lastAnswer;
  const el = view.querySelector(`select[name="${name}"], input[name="${name}"]`);
  if (!el) return { error: 'no control ' + name };
  el.value = String(value);
  el.dispatchEvent(new Event('input', { bubbles: true }));
  el.dispatchEvent(new Event('change', { bubbles: true }));
  const t0 = performance.now();
  while (performance.now() - t0 < ms) {
    await new Promise((r) => requestAnimationFrame(r));
    if (view.dataset.lastUpdateMs) return { answer: view.dataset.lastAnswer, ms: Number(view.dataset.lastUpdateMs),
                                            text: view.innerText, sent: window.sent.slice() };
  }
  return { answer: null, text: view.innerText, sent: window.sent.slice() };
}"""


def live_page(browser, tmp_path, w, grid: bool = True):
    """``w``'s front-end over a live model (a kernel that never answers); ``grid`` False: without the grid trait."""
    state = {"controls": w.controls, "data": w.data, "spec": w.spec, "source": "live", "error": "",
             "grid": w.grid if grid else "", "grid_meta": w.grid_meta if grid else {}}
    html = (PAGE.replace("__STATE__", json.dumps(state, ensure_ascii=False).replace("<", "\\u003c"))
            .replace("__ESM__", json.dumps(esm_text(w.web_name)).replace("<", "\\u003c")))
    path = tmp_path / f"{w.web_name}-live.html"
    path.write_text(html, encoding="utf-8")
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.as_uri())
    page.wait_for_function("() => window.ready === true", timeout=20000)
    page.wait_for_timeout(300)                     # the grid unpacks (DecompressionStream) after render
    return page, errors


def squeezed(text: str) -> str:
    return " ".join(text.split())


def unpacked(w) -> dict:
    return json.loads(gzip.decompress(base64.b64decode(w.grid)).decode())["grid"]


def test_the_grid_trait_is_the_static_grid_and_the_kernel_answers_from_it():
    w = gradflow.GradFlow()
    assert w.grid_meta == {"order": list(gradflow.CONTROL_ORDER), "fixed": {}}
    assert unpacked(w) == w.static_grid()
    w.set_controls(depth=48, norm="rmsnorm")       # a grid state: the grid's entry, as the browser drew it
    assert w.data == w.static_grid()["48|pre|rmsnorm|none|64"]
    assert not gradflow.GradFlow(seed=3).grid      # another seed's grid would take minutes: the kernel answers
    e = explorer.AxesExplorer(layout="text", norm="layernorm_text")
    assert e.grid_meta["fixed"] == {"seed": 0} and unpacked(e) == e.static_grid()
    assert grid_file.entry(e.static_grid(), {**e.controls, "seed": 1}, e.grid_meta["order"], {"seed": 0}) is None


def test_gradflow_draws_a_grid_state_without_the_kernel(browser, tmp_path):
    w = gradflow.GradFlow()
    page, errors = live_page(browser, tmp_path, w)
    try:
        got = page.evaluate(CHANGE, ["norm", "rmsnorm", 2000])
        want = w.static_grid()["24|pre|rmsnorm|none|64"]
        assert got["answer"] == "grid" and squeezed(want["caption"]) in squeezed(got["text"]), got
        assert json.loads(got["sent"][-1])["norm"] == "rmsnorm"              # the kernel is told all the same
        outside = page.evaluate(CHANGE, ["depth", 25, 600])                  # not in the grid: waits for the kernel
        assert outside["answer"] is None and json.loads(outside["sent"][-1])["depth"] == 25, outside
    finally:
        page.close()
    assert not errors, errors


def test_the_explorer_draws_a_grid_state_without_the_kernel(browser, tmp_path):
    w = explorer.AxesExplorer(layout="text", norm="layernorm_text")
    page, errors = live_page(browser, tmp_path, w)
    try:
        got = page.evaluate(CHANGE, ["norm", "rmsnorm", 2000])
        key = "|".join(str({**w.controls, "norm": "rmsnorm"}[n]) for n in w.grid_meta["order"])
        assert got["answer"] == "grid" and squeezed(w.static_grid()[key]["title"]) in squeezed(got["text"]), got
    finally:
        page.close()
    assert not errors, errors


def momentum_lab():
    import normlab
    from normlab.lessons import batchnorm as bn_lab

    normlab.setup()
    return momentum.MomentumLab(trace=bn_lab.running_trace, conventions=bn_lab.CONVENTIONS, seed=0)   # as lesson 02


def test_the_momentum_grid_is_every_state_and_the_kernel_answers_from_it():
    w = momentum_lab()
    assert w.grid_meta == {"order": ["m100"], "fixed": {}}
    grid = unpacked(w)
    assert grid == w.static_grid() and sorted(map(int, grid)) == list(range(1, 100))
    assert grid["37"]["panels"][0]["trace"] == pytest.approx(w.series(0.37, "pytorch"), rel=1e-3)   # the lesson's numbers
    w.update(m=0.37)
    assert w.data == grid["37"]


def test_momentum_draws_every_slider_position_from_the_grid_without_the_kernel(browser, tmp_path):
    w = momentum_lab()
    grid = w.static_grid()
    page, errors = live_page(browser, tmp_path, w)
    try:
        for m100 in (37, 99, 1):
            got = page.evaluate(CHANGE, ["m100", m100, 2000])
            assert got["answer"] == "grid" and squeezed(grid[str(m100)]["caption"]) in squeezed(got["text"]), got
            assert json.loads(got["sent"][-1]) == {"m100": m100}                # the kernel is told all the same
    finally:
        page.close()
    control, more = live_page(browser, tmp_path, w, grid=False)     # the control: no grid, the kernel never answers
    try:
        got = control.evaluate(CHANGE, ["m100", 37, 600])
        assert got["answer"] is None and squeezed(grid["37"]["caption"]) not in squeezed(got["text"]), got
    finally:
        control.close()
    assert not errors and not more, errors + more
