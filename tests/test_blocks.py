"""normlab.blocks against formulas written out with torch.nn.functional and torch.nn modules. The models
built on a stack: tests/test_models.py; DeepNet's constants and the init: tests/test_init.py, test_deepnorm.py."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlab import blocks


def _mlp_ref(mlp, x):
    return F.linear(F.relu(F.linear(x, mlp.fc1.weight, mlp.fc1.bias)), mlp.fc2.weight, mlp.fc2.bias)


@pytest.mark.parametrize("wiring", blocks.WIRINGS)
def test_residual_wiring_matches_formula(wiring):
    torch.manual_seed(0)
    w = 8
    r = blocks.Residual(blocks.MLP(w), w, wiring=wiring, norm="layernorm", alpha=1.7)
    with torch.no_grad():
        for p in r.parameters():
            p.copy_(torch.randn_like(p))
    x = torch.randn(5, w)
    ln = lambda t, m: F.layer_norm(t, (w,), m.weight, m.bias, 1e-5)
    fx = lambda t: _mlp_ref(r.sublayer, t)
    expected = {
        "plain": lambda: ln(fx(x), r.norm),
        "post": lambda: ln(x + fx(x), r.norm),
        "pre": lambda: x + fx(ln(x, r.norm)),
        "sandwich": lambda: x + ln(fx(ln(x, r.norm)), r.norm2),
        "deepnorm": lambda: ln(1.7 * x + fx(x), r.norm),
    }[wiring]()
    torch.testing.assert_close(r(x), expected)


def test_rmsnorm_option_is_rms_without_mean():
    torch.manual_seed(0)
    r = blocks.Residual(blocks.MLP(6), 6, wiring="post", norm="rmsnorm")
    x = torch.randn(4, 6) * 3 + 2
    s = x + _mlp_ref(r.sublayer, x)
    expected = s / torch.sqrt((s ** 2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(r(x), expected)


def _torch_attention(ours: blocks.SelfAttention) -> nn.MultiheadAttention:
    """torch's own multi-head attention holding the same q/k/v/out projections."""
    ref = nn.MultiheadAttention(ours.q_proj.in_features, ours.heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        ref.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        ref.out_proj.weight.copy_(ours.out_proj.weight)
        ref.out_proj.bias.copy_(ours.out_proj.bias)
    return ref


def test_attention_matches_torch_multihead_attention():
    torch.manual_seed(0)
    w, h = 16, 4
    ours = blocks.SelfAttention(w, h)
    ref = _torch_attention(ours)
    x = torch.randn(3, 7, w)
    torch.testing.assert_close(ours(x), ref(x, x, x, need_weights=False)[0], atol=1e-5, rtol=1e-5)
    causal = blocks.SelfAttention(w, h, causal=True)
    causal.load_state_dict(ours.state_dict())
    mask = torch.triu(torch.ones(7, 7, dtype=torch.bool), 1)
    torch.testing.assert_close(causal(x), ref(x, x, x, attn_mask=mask, need_weights=False)[0], atol=1e-5, rtol=1e-5)


def test_parameter_names_for_deepnorm_init():
    stack = blocks.build_stack(2, 16, "deepnorm", sublayer="transformer")
    leaves = {n.split(".")[-2] for n, _ in stack.named_parameters() if n.endswith("weight")}
    assert {"q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"} <= leaves


def test_gpt2_scaling_shrinks_only_stream_writers():
    n = 32
    a = blocks.build_stack(n, 64, "pre", seed=0)
    b = blocks.build_stack(n, 64, "pre", scaling="gpt2", seed=0)
    fc2 = lambda s: torch.cat([blk.mlp.sublayer.fc2.weight.flatten() for blk in s.blocks]).std().item()
    fc1 = lambda s: torch.cat([blk.mlp.sublayer.fc1.weight.flatten() for blk in s.blocks]).std().item()
    assert fc2(b) / fc2(a) == pytest.approx(1 / math.sqrt(2 * n), rel=1e-5)
    assert fc1(b) == pytest.approx(fc1(a))


def test_rezero_is_identity_and_layerscale_is_small_at_init():
    x = torch.randn(4, 16)
    s = blocks.build_stack(5, 16, "pre", norm="none", scaling="rezero", final_norm=False)
    torch.testing.assert_close(s(x), x)
    ls = blocks.build_stack(5, 16, "pre", scaling="layerscale", layerscale_init=1e-5, final_norm=False)
    assert ls.blocks[0].mlp.gain.shape == (16,)
    assert (ls(x) - x).abs().max() < 1e-3


def test_final_norm_defaults():
    assert isinstance(blocks.build_stack(2, 8, "pre").final_norm, nn.LayerNorm)
    assert isinstance(blocks.build_stack(2, 8, "post").final_norm, nn.Identity)
    assert isinstance(blocks.build_stack(2, 8, "pre", norm="rmsnorm").final_norm, nn.RMSNorm)


def test_same_seed_same_stack():
    a, b = blocks.build_stack(3, 8, seed=5), blocks.build_stack(3, 8, seed=5)
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.equal(p, q)


@pytest.mark.parametrize("kwargs, word", [
    (dict(depth=3, wiring="postnorm"), "wiring"),
    (dict(depth=3, norm="batchnorm"), "norm"),
    (dict(depth=0), "depth"),
    (dict(depth=3, wiring="post", norm="none"), "norm"),
    (dict(depth=3, sublayer="conv"), "sublayer"),
])
def test_bad_input_gets_a_chinese_error(kwargs, word):
    with pytest.raises(ValueError, match=word) as err:
        blocks.build_stack(**kwargs)
    assert any("\u4e00" <= ch <= "\u9fff" for ch in str(err.value))


def test_cross_attention_matches_torch_multihead_attention():
    torch.manual_seed(0)
    w, h = 16, 4
    memory = torch.randn(1, 5, w)
    ours = blocks.CrossAttention(w, memory, h)
    ref = _torch_attention(ours)
    x = torch.randn(3, 7, w)
    mem = memory.expand(3, -1, -1)
    torch.testing.assert_close(ours(x), ref(x, mem, mem, need_weights=False)[0], atol=1e-5, rtol=1e-5)


def test_decoder_block_has_three_sublayers_sharing_one_memory():
    stack = blocks.build_stack(3, 16, "post", sublayer="decoder")
    assert all(b.attn.sublayer.causal and b.cross is not None for b in stack.blocks)
    assert stack.blocks[0].cross.sublayer.memory is stack.blocks[2].cross.sublayer.memory
    assert stack(torch.randn(2, 5, 16)).shape == (2, 5, 16)
