"""The gradient-flow widget: its pure update function against autograd, reproducibility, controls."""

import pytest
import torch

import normlab
from normlab import blocks, probes
from normlab.widgets import gradflow

normlab.setup()   # the CJK font, as in the notebooks


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


def test_widget_builds_and_controls_update_without_a_browser():
    g = gradflow.GradFlow(depth=8, width=16)
    w = g.widget
    box = w.children[0]
    depth_slider = box.children[0].children[0]
    wiring = box.children[1].children[0]
    depth_slider.value = 12
    assert g.state["depth"] == 12 and len(g.curves.act_std) == 12
    assert len(g._act.get_xdata()) == 12 and len(g._prev_act.get_xdata()) == 8
    wiring.value = "post"
    norm = box.children[1].children[1]
    norm.value = "none"                                         # Post-Norm without a norm is refused ...
    assert "norm" in w.children[1].value and g.state["norm"] == "layernorm"   # ... with a message, state kept
    assert g.png()[:8] == b"\x89PNG\r\n\x1a\n"


def test_static_figure_has_one_line_per_setting():
    fig = gradflow.static_figure(depth=4, width=16)
    assert len(fig.axes[0].lines) == 6
