"""The gradient-flow widget: curves() against autograd, the data its browser front-end draws
(live compute() = curves()), the precomputed grid of the book (keys, refused settings, size, the
shipped file against a fresh recomputation) and what a notebook cell shows."""

import base64
import json
import math
import random
import re

import pytest
import torch

import normlab
from normlab import blocks, probes
from normlab.widgets import gradflow, web_host

normlab.setup()   # the CJK font, as in the notebooks


def rounded(values):
    """4 significant digits, as the front-end's data (web_host.plain)."""
    return [float(f"{v:.4g}") for v in values]


# --- curves(): the numbers, checked independently --------------------------------------------------

def test_curves_match_autograd_on_the_same_stack():
    c = gradflow.curves(depth=6, wiring="post", norm="layernorm", width=16)
    stack = blocks.build_stack(6, 16, "post", "layernorm", seed=0)
    x = torch.randn(gradflow.BATCH, 16, generator=torch.Generator().manual_seed(1))
    hs = [x]
    for b in stack.blocks:
        hs.append(b(hs[-1]))
    grads = torch.autograd.grad(probes.default_loss(stack.final_norm(hs[-1])), hs[1:])
    assert c.grad_norm == pytest.approx([g.norm().item() for g in grads], rel=1e-4)
    assert c.act_std == pytest.approx([h.std().item() for h in hs[1:]], rel=1e-5)


def test_same_settings_same_curves():
    gradflow.curves.cache_clear()
    first = gradflow.curves(depth=10, wiring="pre")
    gradflow.curves.cache_clear()                      # recompute from scratch, not from the cache
    second = gradflow.curves(depth=10, wiring="pre")
    assert first == second and first is not second
    assert first != gradflow.curves(depth=10, wiring="post")


def test_rezero_identity_stack_passes_the_gradient_unchanged():
    # every block is x + 0 * F(x) at init: dL/dh_i is the same vector at every layer
    c = gradflow.curves(depth=12, wiring="pre", norm="none", scaling="rezero", width=16)
    assert max(c.grad_norm) == pytest.approx(min(c.grad_norm), rel=1e-6)


def test_known_shapes_of_the_curves():
    plain = gradflow.curves(depth=32, wiring="plain", norm="none", width=32)
    pre = gradflow.curves(depth=32, wiring="pre", width=32)
    post = gradflow.curves(depth=32, wiring="post", width=32)
    assert plain.act_std[-1] < 1e-3 * plain.act_std[0]          # relu + xavier, no skip: the signal dies
    assert pre.act_std[-1] > 2 * pre.act_std[0]                 # Pre-LN: the stream grows with depth
    assert post.act_std[-1] == pytest.approx(1.0, abs=0.05)     # Post-LN: every output is normalised
    assert pre.grad_ratio > 2                                   # Pre-LN: each branch adds to the identity path's gradient
    assert 0.2 < post.grad_ratio < 5 and post.grad_ratio < pre.grad_ratio   # Post-LN: fluctuates, no blow-up


def test_static_figure_has_one_line_per_setting():
    fig = gradflow.static_figure(depth=4, width=16)
    assert len(fig.axes[0].lines) == 6


# --- the live widget: compute() is curves(), refused settings give the Chinese error ----------------

def test_compute_returns_the_curves_rounded_and_the_caption():
    g = gradflow.GradFlow(depth=6, width=16, wiring="sandwich", norm="rmsnorm", scaling="layerscale", seed=3)
    controls = dict(depth=9, wiring="post", norm="layernorm", scaling="gpt2", width=32)
    data = g.compute(controls)
    c = gradflow.curves(9, "post", "layernorm", "gpt2", 32, seed=3)
    assert data["act"] == rounded(c.act_std) and data["grad"] == rounded(c.grad_norm)
    assert len(data["act"]) == len(data["grad"]) == 9
    ratio = c.grad_norm[0] / c.grad_norm[-1]                     # computed here, from autograd's curves
    assert data["caption"].startswith("Post-Norm · LayerNorm · 缩放 GPT-2 1/√(2N) · N=9 · 宽 width=32")
    assert data["caption"].endswith(f"= {ratio:.3g}")
    json.dumps(data, allow_nan=False)                           # plain JSON: what the trait syncs
    assert g.data == g.compute(g.controls)                      # the first data: the widget's own setting
    assert g.caption() == g.data["caption"]                     # the caption line is the same text


def test_a_control_change_recomputes_and_the_state_follows():
    g = gradflow.GradFlow(depth=8, width=16)
    first = g.curves
    g.controls = dict(g.controls, depth=12, wiring="post")      # what the front-end does on input
    assert g.error == "" and len(g.data["act"]) == 12
    assert g.state == dict(gradflow.DEFAULTS, depth=12, wiring="post", width=16)
    assert g.curves == gradflow.curves(12, "post", width=16) and g._previous == first
    assert g.data["grad"][-1] == rounded([g.curves.grad_norm[-1]])[0]
    c = g.update(scaling="rezero")                              # the same from Python
    assert c.act_std == gradflow.curves(12, "post", scaling="rezero", width=16).act_std
    assert g.controls["scaling"] == "rezero" and g.data["caption"] == g.caption()
    assert g.png()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("wiring", ["post", "sandwich", "deepnorm"])
def test_a_norm_free_post_norm_is_refused_in_chinese(wiring):
    g = gradflow.GradFlow(depth=8, width=16)
    data, state = g.data, dict(g.state)
    g.controls = dict(g.controls, wiring=wiring, norm="none")    # from the front-end: the error trait
    assert re.search(r"[\u4e00-\u9fff]", g.error) and "(needs a norm)" in g.error and wiring in g.error
    assert g.data == data and g.state == state                  # the last good picture stays
    g.controls = dict(g.controls, norm="rmsnorm")
    assert g.error == "" and g.state["wiring"] == wiring
    with pytest.raises(ValueError, match="需要一个归一化层"):       # from Python: raised, state kept
        g.update(norm="none")
    assert g.state["norm"] == "rmsnorm"
    with pytest.raises(ValueError, match="需要一个归一化层"):
        gradflow.GradFlow(wiring="post", norm="none")
    with pytest.raises(TypeError, match="unknown settings"):
        gradflow.GradFlow(heads=4)


def test_spec_is_bilingual_and_describes_the_grid():
    s = gradflow.spec()
    assert s["control_order"] == list(gradflow.CONTROL_ORDER) == [c["name"] for c in s["controls"]]
    for c in s["controls"]:
        assert re.search(r"[\u4e00-\u9fff]", c["label"]) and re.search(r"[a-z]", c["label"])
        if c["kind"] == "select":
            for value, label in c["options"]:
                assert label == gradflow.LABELS.get(value, str(value))
    depth, width = s["controls"][0], s["controls"][-1]
    assert depth["kind"] == "range" and (depth["min"], depth["max"]) == gradflow.DEPTH_RANGE
    assert depth["grid_values"] == list(gradflow.GRID["depth"])
    assert all(depth["min"] <= d <= depth["max"] for d in depth["grid_values"])
    assert set(width["grid_values"]) <= {o[0] for o in width["options"]}
    for n in ("wiring", "norm", "scaling"):                     # every choice of these is in the grid
        assert [o[0] for o in s["controls"][s["control_order"].index(n)]["options"]] == list(gradflow.GRID[n])


# --- the precomputed grid (book, slides) ----------------------------------------------------------------

def test_grid_keys_follow_the_contract_and_refused_states_carry_their_message():
    g = gradflow.grid()
    states = gradflow.grid_controls()
    keys = ["|".join(str(st[n]) for n in gradflow.CONTROL_ORDER) for st in states]   # the contract's key rule
    assert set(g) == set(keys) and len(g) == math.prod(len(v) for v in gradflow.GRID.values())
    assert keys == [web_host.grid_key(st, gradflow.spec()["control_order"]) for st in states]
    refused = {k for k, e in g.items() if web_host.ERROR_KEY in e}
    assert refused == {k for k, st in zip(keys, states) if st["norm"] == "none"
                       and st["wiring"] in ("post", "sandwich", "deepnorm")}
    key, st = next((k, st) for k, st in zip(keys, states) if k in refused)
    with pytest.raises(ValueError) as err:
        gradflow.curve_data(st)
    assert g[key][web_host.ERROR_KEY] == str(err.value)
    for k, st in zip(keys, states):
        if k not in refused:
            assert len(g[k]["act"]) == len(g[k]["grad"]) == st["depth"]


def test_shipped_grid_equals_a_fresh_recomputation():
    """The file in the package cannot rot: its header matches GRID, and sampled entries (plus the
    default and the deepest, widest setting) are what curve_data computes now. Regenerate with
    ``python -m normlab.widgets.gradflow --write-grid``."""
    doc = gradflow.read_grid_file()
    assert doc["seed"] == gradflow.GRID_SEED and doc["control_order"] == list(gradflow.CONTROL_ORDER)
    assert doc["axes"] == {n: list(v) for n, v in gradflow.GRID.items()}
    g = doc["grid"]
    valid = sorted(k for k, e in g.items() if web_host.ERROR_KEY not in e)
    sample = random.Random(17).sample(valid, 6) + ["24|pre|layernorm|none|64", "128|post|rmsnorm|gpt2|128"]
    for key in sample:
        st = dict(zip(gradflow.CONTROL_ORDER, key.split("|")))
        st["depth"], st["width"] = int(st["depth"]), int(st["width"])
        fresh = gradflow.curve_data(st, seed=doc["seed"])
        # one unit in the 4th digit: another CPU may round a last bit differently
        assert g[key]["act"] == pytest.approx(fresh["act"], rel=2e-3, abs=1e-30), key
        assert g[key]["grad"] == pytest.approx(fresh["grad"], rel=2e-3, abs=1e-30), key
        head, _, ratio = g[key]["caption"].rpartition("= ")
        assert fresh["caption"].startswith(head) and float(fresh["caption"].rpartition("= ")[2]) == pytest.approx(
            float(ratio), rel=1e-2), key


def test_grid_fits_in_a_page():
    g = gradflow.grid()
    raw = json.dumps(g, ensure_ascii=False, separators=(",", ":"))
    w = gradflow.GradFlow()
    page = web_host.static_html("gradflow", w.spec, g, w.controls)
    assert len(raw.encode()) < 2 * 2**20                        # the JSON itself
    assert len(page.encode()) < 2**20                           # what a page embeds (gzip + base64)


# --- what a notebook cell shows --------------------------------------------------------------------

def test_a_cell_shows_the_widget_live_and_the_grid_in_the_book(monkeypatch):
    g = gradflow.GradFlow(depth=20, wiring="plain", norm="none")   # depth 20: not a grid depth
    monkeypatch.delenv("NORMLAB_STATIC", raising=False)
    data, _ = g._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data and data["text/plain"] == g.caption()
    assert base64.b64decode(data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    monkeypatch.setenv("NORMLAB_STATIC", "1")
    data, _ = g._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" not in data and "image/png" in data
    page = data["text/html"]
    assert 'data-widget="gradflow"' in page and web_host.GRID_BADGE in page
    grid = g.static_grid()
    assert grid["20|plain|none|none|64"] == g.data               # the cell's own setting is added
    assert grid["24|pre|layernorm|none|64"] == gradflow.grid()["24|pre|layernorm|none|64"]


# --- the front-end in a real browser (the static page, no kernel) ------------------------------------

DRAWN = """() => {
  const view = document.querySelector('[data-widget="gradflow"] .normlab-web-view');
  const cur = (k) => view.querySelector(`path.nl-gf-curve[data-kind="${k}"]`);
  return { act: cur('act').dataset.lastAct, grad: cur('grad').dataset.lastGrad, n: Number(cur('act').dataset.n),
           d: cur('grad').getAttribute('d'), ms: view.dataset.lastUpdateMs || '',
           error: view.querySelector('.nl-gf-error').textContent, caption: view.querySelector('.nl-gf-caption').textContent,
           depth: view.querySelector('input[name=depth]').value, text: view.textContent };
}"""


def test_front_end_in_chromium_without_a_kernel(browser, artifacts, tmp_path):
    """Every control on the static page: the last point of each drawn curve is the grid's value for the
    controls shown, a refused setting shows its Chinese message, the depth slider (mouse or arrow keys)
    moves between the grid's depths, Chinese renders as glyphs, nothing is fetched."""
    from test_browser_book import GLYPH_CHECK

    g = gradflow.GradFlow()
    grid = g.static_grid()
    from conftest import open_static_widget

    page, problems = open_static_widget(browser, tmp_path, g, "gradflow")
    page.wait_for_selector('[data-widget="gradflow"][data-ready="1"]')
    controls, times = dict(g.controls), []

    def check():
        d = page.evaluate(DRAWN)
        entry = grid[web_host.grid_key(controls, gradflow.CONTROL_ORDER)]
        if web_host.ERROR_KEY in entry:
            assert d["error"] == entry[web_host.ERROR_KEY] and "(needs a norm)" in d["error"]
            return d
        assert d["error"] == "" and d["caption"] == entry["caption"] and d["n"] == controls["depth"]
        assert float(d["act"]) == entry["act"][-1] and float(d["grad"]) == entry["grad"][-1]
        if d["ms"]:
            times.append(float(d["ms"]))
        return d

    assert "预先计算的网格" in check()["text"]
    for name, value in [("wiring", "post"), ("norm", "rmsnorm"), ("scaling", "gpt2"), ("width", "128"),
                        ("wiring", "plain"), ("norm", "none"), ("scaling", "rezero"), ("wiring", "sandwich"),
                        ("norm", "layernorm"), ("width", "16"), ("wiring", "deepnorm")]:
        before = page.evaluate(DRAWN)["d"]
        page.select_option(f"select[name={name}]", value)
        controls[name] = int(value) if name == "width" else value
        d = check()
        assert d["error"] or d["d"] != before, (name, value)          # the picture changed
    for depth, shown in [(96, 96), (50, 48), (2, 2)]:                  # mouse / typed: the nearest grid depth
        page.locator("input[name=depth]").fill(str(depth))
        controls["depth"] = shown
        assert check()["depth"] == str(shown)
    page.focus("input[name=depth]")
    for key, depth in [("ArrowRight", 4), ("ArrowRight", 8), ("ArrowLeft", 4), ("End", 128)]:
        page.keyboard.press(key)
        controls["depth"] = depth
        assert check()["depth"] == str(depth), key
    assert page.evaluate(GLYPH_CHECK.replace("document.body", "document.querySelector('.nl-gradflow')"))
    page.locator('[data-widget="gradflow"]').screenshot(path=str(artifacts / "gradflow_static.png"))
    page.close()
    assert not problems, problems
    assert times and max(times) < 200, times                           # a sanity bound, not the benchmark


def test_a_lesson_can_offer_fewer_controls_and_name_them_its_way():
    """Lesson 01 has taught depth, width and 'residual or not' only: the other controls are not shown,
    the static grid holds just those states, and the caption leaves out what is not shown."""
    g = gradflow.GradFlow(depth=8, wiring="plain", norm="none", width=32,
                          options={"wiring": ("plain", "pre"), "norm": ("none",), "scaling": ("none",)},
                          labels={"pre": "残差 residual x + F(x)"})
    assert [c["name"] for c in g.spec["controls"]] == ["depth", "wiring", "width"]
    assert g.spec["controls"][1]["options"] == [["plain", "无残差 plain"], ["pre", "残差 residual x + F(x)"]]
    grid = g.static_grid()
    assert len(grid) == len(gradflow.GRID["depth"]) * 2 * len(gradflow.GRID["width"])
    assert all(k.split("|")[1] in ("plain", "pre") and k.split("|")[2:4] == ["none", "none"] for k in grid)
    g.update(wiring="pre")
    c = gradflow.curves(8, "pre", "none", "none", 32)
    assert g.caption() == f"残差 residual x + F(x) · N=8 · 宽 width=32    ||∂L/∂h_1|| / ||∂L/∂h_N|| = {c.grad_norm[0] / c.grad_norm[-1]:.3g}"
    with pytest.raises(ValueError, match="options"):
        gradflow.GradFlow(wiring="pre", options={"wiring": ("plain",)})   # the current value must be offered
