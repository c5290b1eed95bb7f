"""Lesson 02's momentum widget (normlab/widgets/momentum.py): compute() gives the lesson's trace
function's numbers (and, independently, nn.BatchNorm1d's running_mean on the same batches), the
book's grid holds the 99 states m = 0.01 .. 0.99, the static fragment embeds them, bad input gets a
Chinese ValueError with the English term, and a cell shows the widget live and the grid in the book."""

from __future__ import annotations

import base64

import pytest
import torch

import normlab
from normlab.lessons import batchnorm as bn_lab
from normlab.widgets import momentum, web_host
from test_web_host import fragment_parts

normlab.setup()   # the CJK font, as in the notebooks

SEED = 3


def lab(**kw) -> momentum.MomentumLab:
    return momentum.MomentumLab(trace=bn_lab.running_trace, conventions=bn_lab.CONVENTIONS, seed=SEED, **kw)


def rounded(values):
    """4 significant digits, as the front-end's data (web_host.plain)."""
    return [float(f"{v:.4g}") for v in values]


def batchnorm_running_mean(momentum_: float, seed: int, steps: int = 60, batch: int = 16, true_mean: float = 5.0):
    """nn.BatchNorm1d's running_mean after each training step, on the batches running_trace draws
    (``batch`` values from N(true_mean, 1) per step, one generator seeded with ``seed``)."""
    g = torch.Generator().manual_seed(seed)
    bn = torch.nn.BatchNorm1d(1, momentum=momentum_).train()
    out = []
    with torch.no_grad():
        for _ in range(steps):
            bn(torch.randn(batch, generator=g).add(true_mean).view(batch, 1))
            out.append(bn.running_mean.item())
    return out


# --- the numbers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("m100", [1, 10, 50, 90, 99])
def test_compute_is_the_trace_functions_numbers(m100):
    w = lab()
    data = w.compute({"m100": m100})
    m = m100 / 100
    assert data["m"] == m
    assert [p["convention"] for p in data["panels"]] == ["pytorch", "old_weight"]
    for p in data["panels"]:
        tr = bn_lab.running_trace(m, p["convention"], seed=SEED)
        assert len(p["trace"]) == 60 and p["trace"] == rounded(tr.tolist())
    assert f"m = {m:.2f}" in data["caption"] and "running_mean" in data["caption"]


@pytest.mark.parametrize("m", [0.1, 0.37, 0.9])
def test_pytorch_panel_is_batchnorm1d_running_mean_and_old_weight_is_momentum_1_minus_m(m):
    """Independent of the lesson's formula: torch's own BatchNorm1d on the same batches. In PyTorch's
    convention momentum=m; the old-value-weight convention with m is BatchNorm1d's momentum=1-m."""
    pytorch, old = lab(m=m).data["panels"]
    assert pytorch["trace"] == pytest.approx(batchnorm_running_mean(m, SEED), rel=1e-3, abs=1e-4)
    assert old["trace"] == pytest.approx(batchnorm_running_mean(1 - m, SEED), rel=1e-3, abs=1e-4)


def test_the_lessons_point_is_visible_in_the_data():
    small, large = lab(m=0.01).data["panels"], lab(m=0.99).data["panels"]
    assert small[0]["trace"][-1] < 3 and abs(small[1]["trace"][-1] - 5) < 1       # PyTorch 0.01: slow
    assert abs(large[0]["trace"][-1] - 5) < 1 and large[1]["trace"][-1] < 3       # Keras 0.99: slow


def test_a_slider_change_recomputes_and_the_previous_setting_is_kept_for_the_picture():
    w = lab()
    assert w.controls == {"m100": 10} and w.m == 0.1
    first = w.data
    w.set_controls(m100=75)                                     # as the front-end would
    assert w.data == w.compute({"m100": 75}) and w.error == "" and w._previous == first
    assert w.update(0.2) == w.compute({"m100": 20}) and w.controls == {"m100": 20}
    png = w.png()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


# --- the grid of the book --------------------------------------------------------------------------

def test_grid_holds_exactly_the_99_states():
    w = lab()
    grid = w.static_grid()
    assert list(grid) == [str(k) for k in range(1, 100)]
    assert all(web_host.ERROR_KEY not in e for e in grid.values())
    assert grid["1"]["m"] == 0.01 and grid["99"]["m"] == 0.99
    assert grid["37"] == w.compute({"m100": 37})
    assert grid[web_host.grid_key(w.controls, w.spec["control_order"])] == w.data


def test_static_fragment_embeds_the_grid_and_the_spec(monkeypatch):
    w = lab(m=0.25)
    monkeypatch.setenv("NORMLAB_STATIC", "1")
    data, _ = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" not in data
    assert base64.b64decode(data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"
    page = data["text/html"]
    assert 'data-widget="momentum"' in page and web_host.GRID_BADGE in page
    parts = fragment_parts(page)
    assert parts["grid"] == w.static_grid() and len(parts["grid"]) == 99
    assert parts["controls"] == {"m100": 25}
    assert parts["esm"] == web_host.esm_text("momentum")
    spec = parts["spec"]
    assert spec["control_order"] == ["m100"] and spec["controls"][0]["label"] == "动量 momentum m"
    assert [p["rule"] for p in spec["panels"]] == ["running = (1 - m) * running + m * batch",
                                                   "running = m * running + (1 - m) * batch"]
    assert len(page.encode()) < 300_000


def test_live_cell_shows_the_widget_view_the_picture_and_a_caption(monkeypatch):
    monkeypatch.delenv("NORMLAB_STATIC", raising=False)
    w = lab()
    data, _ = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data and data["text/plain"] == w.caption()
    assert base64.b64decode(data["image/png"])[:8] == b"\x89PNG\r\n\x1a\n"


# --- bad input ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("m", [0, 0.0, 1, 1.0, -0.1, 0.995, 0.105, float("nan"), "0.1", True, None])
def test_bad_m_is_refused_in_chinese(m):
    with pytest.raises(ValueError, match=r"动量 momentum m.*\(m must be"):
        lab(m=m)
    w = lab()
    with pytest.raises(ValueError, match="动量 momentum m"):
        w.update(m)
    assert w.controls == {"m100": 10}


@pytest.mark.parametrize("m100", [0, 100, 150, 2.5, "10"])
def test_a_bad_control_value_shows_the_error_and_keeps_the_picture(m100):
    w = lab()
    before = w.data
    w.set_controls(m100=m100)
    assert "m100" in w.error and "(m100 must be an int in [1, 99])" in w.error and w.data == before


def test_unknown_convention_is_refused_in_chinese():
    with pytest.raises(ValueError, match=r"未知的滑动平均写法 \(unknown convention\)：'keras'"):
        lab(panels=("pytorch", "keras"))
    with pytest.raises(ValueError, match=r"unknown convention"):
        lab().series(0.1, "keras")
    with pytest.raises(ValueError, match=r"conventions"):
        momentum.MomentumLab(trace=bn_lab.running_trace, conventions={})
    one = lab(panels=("old_weight",))                     # one panel is fine
    assert [p["convention"] for p in one.data["panels"]] == ["old_weight"]
