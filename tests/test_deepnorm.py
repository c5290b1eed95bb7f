"""Lesson 05: DeepNorm stacks (normlab.blocks + normlab.init) and normlab.lessons.deepnorm (the wrong
versions, the branch share, the first step at init) against Wang et al. 2022 §4.2-4.3's formulas, torch's
F.layer_norm, autograd and a by-hand Adam step. The constants and the init alone: tests/test_init.py."""

from __future__ import annotations

import pytest
import torch

from normlab import blocks
from normlab.lessons import deepnorm


def test_the_stacks_the_notebooks_train_use_the_papers_alpha_and_beta():
    """normlab.blocks builds the DeepNorm stacks: alpha on the identity branch, beta as the Xavier gain."""
    depth, width = 10, 32
    stack = blocks.build_stack(depth=depth, width=width, wiring="deepnorm", sublayer="transformer", seed=0)
    alpha, beta = (2 * depth) ** 0.25, (8 * depth) ** -0.25    # encoder-only, §4.3
    assert all(b.attn.alpha == pytest.approx(alpha) and b.mlp.alpha == pytest.approx(alpha) for b in stack.blocks)
    layers = {"q_proj": (1.0, "attn"), "k_proj": (1.0, "attn"), "v_proj": (beta, "attn"), "out_proj": (beta, "attn"),
              "fc1": (beta, "mlp"), "fc2": (beta, "mlp")}
    for name, (gain, part) in layers.items():
        lins = [getattr(getattr(b, part).sublayer, name) for b in stack.blocks]
        w = torch.cat([lin.weight.flatten() for lin in lins])   # pooled over the 10 blocks
        xavier = gain * (2 / (lins[0].in_features + lins[0].out_features)) ** 0.5
        assert w.std().item() == pytest.approx(xavier, rel=0.05), name


def test_a_decoder_stack_uses_the_encoder_decoder_decoders_constants():
    """Three sublayers per layer (self-attention, cross-attention, FFN): §4.3's enc-dec decoder row."""
    depth, width = 8, 32
    stack = blocks.build_stack(depth=depth, width=width, wiring="deepnorm", sublayer="decoder", seed=0)
    alpha, beta = (3 * depth) ** 0.25, (12 * depth) ** -0.25
    for b in stack.blocks:
        assert b.attn.alpha == b.cross.alpha == b.mlp.alpha == pytest.approx(alpha)
    xavier = (2 / (2 * width)) ** 0.5
    for part, name, gain in (("cross", "v_proj", beta), ("cross", "q_proj", 1.0), ("attn", "out_proj", beta)):
        w = torch.cat([getattr(getattr(b, part).sublayer, name).weight.flatten() for b in stack.blocks])
        assert w.std().item() == pytest.approx(gain * xavier, rel=0.05), (part, name)


def test_beta_on_input_keeps_an_unscaled_init_and_bad_variants_are_refused():
    depth, width = 12, 32
    model = deepnorm.variant_model("beta_on_input", depth, width=width)
    assert all(b.mlp.beta == pytest.approx((8 * depth) ** -0.25) for b in model.stack.blocks)
    fc1 = torch.cat([b.mlp.r.sublayer.fc1.weight.flatten() for b in model.stack.blocks])
    assert fc1.std().item() == pytest.approx((2 / (width + 4 * width)) ** 0.5, rel=0.05)   # Xavier, gain 1
    with pytest.raises(ValueError, match="variant"):
        deepnorm.variant_model("deepnet", 2)


def test_wrong_versions_compute_what_they_claim():
    torch.manual_seed(0)
    res = blocks.Residual(blocks.MLP(8), 8, wiring="deepnorm", alpha=2.0)
    x = torch.randn(3, 8)
    ln = torch.nn.functional.layer_norm
    assert torch.allclose(res(x), ln(2.0 * x + res.sublayer(x), (8,), res.norm.weight, res.norm.bias))
    assert torch.allclose(deepnorm.AlphaOnBranch(res)(x), ln(x + 2.0 * res.sublayer(x), (8,), res.norm.weight, res.norm.bias))
    assert torch.allclose(deepnorm.BetaOnInput(res, 0.5)(x), ln(2.0 * x + res.sublayer(0.5 * x), (8,), res.norm.weight, res.norm.bias))


def test_branch_share_is_alpha_squared_larger_when_alpha_is_misplaced():
    x = torch.randn(64, 64)
    good = deepnorm.branch_share(deepnorm.variant_model("deepnorm", 16), x)
    bad = deepnorm.branch_share(deepnorm.variant_model("alpha_on_branch", 16), x)
    alpha = 32 ** 0.25                                          # (2N)^(1/4), N = 16
    assert bad[0] / good[0] == pytest.approx(alpha ** 2, rel=1e-4)


def test_first_step_gradients_and_update_by_hand():
    """first_step against autograd and a by-hand Adam first step (each weight moves by ~lr * sign(grad))."""
    import copy

    import torch.nn.functional as F

    torch.manual_seed(0)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    model = deepnorm.variant_model("deepnorm", 4, width=8, seed=0)
    ref = copy.deepcopy(model)
    out = deepnorm.first_step(model, x, y, x, lr=1e-3)
    fc1 = [b.mlp.sublayer.fc1.weight for b in ref.stack.blocks]
    fc2 = [b.mlp.sublayer.fc2.weight for b in ref.stack.blocks]
    grads = torch.autograd.grad(F.cross_entropy(ref(x), y), fc1 + fc2)
    assert out["grad_fc1"] == pytest.approx([g.norm().item() for g in grads[:4]], rel=1e-5)
    assert out["grad_fc2"] == pytest.approx([g.norm().item() for g in grads[4:]], rel=1e-5)
    # Adam's first step is lr * g / (|g| + eps): sign(g) * lr wherever g is not tiny; only branch weights move
    for (name, p_new), (_, p_old) in zip(model.named_parameters(), ref.named_parameters()):
        moved = (p_new - p_old).abs().max().item()
        if ".sublayer." in name:
            assert moved == pytest.approx(1e-3, rel=1e-2), name
        else:
            assert moved == 0.0, name                      # LN gains, embedding and head stay fixed
    with torch.no_grad():
        change = (model(x) - ref(x)).norm()
        assert out["update"] == pytest.approx(change.item() / 32 ** 0.5, rel=1e-5)
        assert out["relative_update"] == pytest.approx((change / ref(x).norm()).item(), rel=1e-5)


def test_first_step_works_through_the_wrong_versions():
    x, y = torch.randn(16, 64), torch.randint(0, 10, (16,))
    for variant in ("post", "alpha_on_branch", "beta_on_input"):
        out = deepnorm.first_step(deepnorm.variant_model(variant, 3, width=8), x, y, x)
        assert len(out["grad_fc1"]) == 3 and out["relative_update"] > 0
