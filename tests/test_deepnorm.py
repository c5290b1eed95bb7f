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


def test_blocks_use_these_constants_and_scale_only_ffn_v_out():
    stack = blocks.build_stack(depth=10, width=32, wiring="deepnorm", sublayer="transformer", seed=0)
    alpha, beta = deepnorm.constants("encoder", 10)
    assert stack.blocks[0].mlp.alpha == alpha
    torch.manual_seed(0)
    model = nn.ModuleDict({"q_proj": nn.Linear(256, 256), "v_proj": nn.Linear(256, 256), "fc2": nn.Linear(256, 256)})
    scaled = deepnorm.init_(model, beta)
    assert scaled == ["v_proj.weight", "fc2.weight"]
    xavier = (2 / 512) ** 0.5
    assert model["q_proj"].weight.std().item() == pytest.approx(xavier, rel=0.05)
    assert model["v_proj"].weight.std().item() == pytest.approx(beta * xavier, rel=0.05)


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
    alpha = deepnorm.constants("encoder", 16)[0]
    assert bad[0] / good[0] == pytest.approx(alpha ** 2, rel=1e-4)
