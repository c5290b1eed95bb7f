"""normlab.deepnorm against the formulas of Wang et al. 2022 §4.3, computed here independently."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from normlab import blocks, deepnorm


@pytest.mark.parametrize("arch,N,M,alpha,beta", [
    ("encoder", 6, 0, 12 ** 0.25, 48 ** -0.25),
    ("encoder", 1000, 0, 2000 ** 0.25, 8000 ** -0.25),
    ("decoder", 0, 24, 48 ** 0.25, 192 ** -0.25),
    ("encdec_encoder", 18, 18, 0.81 * 18 ** (5 / 16), 0.87 * 18 ** (-5 / 16)),
    ("encdec_encoder", 6, 12, 0.81 * (6 ** 4 * 12) ** 0.0625, 0.87 * (6 ** 4 * 12) ** -0.0625),
    ("encdec_decoder", 6, 12, 36 ** 0.25, 144 ** -0.25),
])
def test_constants_match_the_paper(arch, N, M, alpha, beta):
    a, b = deepnorm.constants(arch, N, M)
    assert a == pytest.approx(alpha, rel=1e-12) and b == pytest.approx(beta, rel=1e-12)


def test_decoder_accepts_a_single_count_and_bad_input_is_clear():
    assert deepnorm.constants("decoder", 24) == deepnorm.constants("decoder", 0, 24)
    with pytest.raises(ValueError, match="unknown architecture"):
        deepnorm.constants("encoder_decoder", 6, 6)
    with pytest.raises(ValueError, match="positive integer"):
        deepnorm.constants("encoder", 0)


def test_init_scales_ffn_v_out_by_beta_and_leaves_q_k():
    beta = 0.3
    torch.manual_seed(0)
    model = nn.ModuleDict({name: nn.Linear(256, 256) for name in ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2")})
    scaled = deepnorm.init_(model, beta)
    assert scaled == ["v_proj.weight", "out_proj.weight", "fc1.weight", "fc2.weight"]
    xavier = (2 / 512) ** 0.5                                   # Xavier-normal std for 256 -> 256
    for name, lin in model.items():
        gain = beta if name in ("v_proj", "out_proj", "fc1", "fc2") else 1.0
        assert lin.weight.std().item() == pytest.approx(gain * xavier, rel=0.05), name
        assert torch.all(lin.bias == 0)


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


def test_init_probe_gradients_and_update_by_hand():
    """init_probe against autograd and a by-hand Adam first step (each weight moves by ~lr * sign(grad))."""
    import copy

    import torch.nn.functional as F

    torch.manual_seed(0)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    model = deepnorm.variant_model("deepnorm", 4, width=8, seed=0)
    ref = copy.deepcopy(model)
    out = deepnorm.init_probe(model, x, y, x, lr=1e-3)
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


def test_init_probe_works_through_the_wrong_versions():
    x, y = torch.randn(16, 64), torch.randint(0, 10, (16,))
    for variant in ("post", "alpha_on_branch", "beta_on_input"):
        out = deepnorm.init_probe(deepnorm.variant_model(variant, 3, width=8), x, y, x)
        assert len(out["grad_fc1"]) == 3 and out["relative_update"] > 0
