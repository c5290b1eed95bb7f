"""normlab.init against DeepNet §4.3's formulas (Wang et al. 2022, arXiv 2203.00555) typed here, and
against Xavier-normal's std sqrt(2 / (fan_in + fan_out)) and GPT-2's 1/sqrt(2N) computed here."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from normlab import init

NAMES = ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2", "head")


@pytest.mark.parametrize("arch,N,M,alpha,beta", [
    ("encoder", 6, 0, 12 ** 0.25, 48 ** -0.25),                       # (2N)^(1/4), (8N)^(-1/4)
    ("encoder", 1000, 0, 2000 ** 0.25, 8000 ** -0.25),
    ("decoder", 0, 24, 48 ** 0.25, 192 ** -0.25),                     # (2M)^(1/4), (8M)^(-1/4)
    ("encdec_encoder", 18, 18, 0.81 * 18 ** (5 / 16), 0.87 * 18 ** (-5 / 16)),
    ("encdec_encoder", 6, 12, 0.81 * (6 ** 4 * 12) ** 0.0625, 0.87 * (6 ** 4 * 12) ** -0.0625),
    ("encdec_decoder", 6, 12, 36 ** 0.25, 144 ** -0.25),              # (3M)^(1/4), (12M)^(-1/4)
])
def test_deepnorm_constants_match_the_paper(arch, N, M, alpha, beta):
    a, b = init.deepnorm_constants(arch, N, M)
    assert a == pytest.approx(alpha, rel=1e-12) and b == pytest.approx(beta, rel=1e-12)


def test_decoder_accepts_a_single_count_and_bad_input_is_clear():
    assert init.deepnorm_constants("decoder", 24) == pytest.approx((48 ** 0.25, 192 ** -0.25), rel=1e-12)
    for args, word in ((("encoder_decoder", 6, 6), "unknown architecture"), (("encoder", 0), "positive integer"),
                       (("encdec_encoder", 6, 0), "positive integer"), (("encoder", 2.5), "positive integer")):
        with pytest.raises(ValueError, match=word) as err:
            init.deepnorm_constants(*args)
        assert any("\u4e00" <= ch <= "\u9fff" for ch in str(err.value)), args


def _layers(width: int = 256, seed: int = 0) -> nn.ModuleDict:
    torch.manual_seed(seed)
    return nn.ModuleDict({name: nn.Linear(width, width) for name in NAMES})


def _xavier_std(lin: nn.Linear) -> float:
    return math.sqrt(2 / (lin.in_features + lin.out_features))           # Glorot & Bengio 2010, normal


def test_init_weights_scales_exactly_fc1_fc2_v_out_by_beta():
    beta = 0.3
    model = _layers()
    scaled = init.init_weights_(model, depth=4, deepnorm_beta=beta)
    assert scaled == ["v_proj.weight", "out_proj.weight", "fc1.weight", "fc2.weight"]   # model order
    for name, lin in model.items():
        gain = beta if name in ("v_proj", "out_proj", "fc1", "fc2") else 1.0          # §4.3: q, k keep gain 1
        assert lin.weight.std().item() / _xavier_std(lin) == pytest.approx(gain, rel=0.03), name
        assert lin.weight.mean().abs().item() < 0.05 * gain * _xavier_std(lin), name          # centred
        assert torch.count_nonzero(lin.bias) == 0, name


def test_init_weights_without_beta_is_plain_xavier_and_scales_nothing():
    model = _layers(seed=1)
    assert init.init_weights_(model, depth=4) == []
    for name, lin in model.items():
        assert lin.weight.std().item() / _xavier_std(lin) == pytest.approx(1.0, rel=0.03), name
    rect = nn.ModuleDict({"fc1": nn.Linear(512, 128)})                     # fan_in + fan_out, not 2 * fan_in
    init.init_weights_(rect, depth=1)
    assert rect["fc1"].weight.std().item() == pytest.approx(math.sqrt(2 / 640), rel=0.03)


@pytest.mark.parametrize("depth", [1, 12])
def test_gpt2_scaling_divides_the_stream_writers_by_sqrt_2n(depth):
    a, b = _layers(seed=2), _layers(seed=2)
    torch.manual_seed(5)
    init.init_weights_(a, depth)
    torch.manual_seed(5)
    init.init_weights_(b, depth, scaling="gpt2")                           # same draws, then fc2, out_proj / sqrt(2N)
    for name in NAMES:
        factor = 1 / math.sqrt(2 * depth) if name in ("fc2", "out_proj") else 1.0
        torch.testing.assert_close(b[name].weight, a[name].weight * factor, rtol=1e-6, atol=0)
        assert b[name].weight.std().item() == pytest.approx(factor * _xavier_std(b[name]), rel=0.03), name


def test_init_weights_leaves_non_linear_modules_alone():
    model = nn.ModuleDict({"fc1": nn.Linear(8, 8), "norm": nn.LayerNorm(8), "emb": nn.Embedding(5, 8)})
    with torch.no_grad():
        model["norm"].weight.fill_(2.0)
    emb = model["emb"].weight.clone()
    init.init_weights_(model, 2, deepnorm_beta=0.5)
    assert torch.equal(model["norm"].weight, torch.full((8,), 2.0)) and torch.equal(model["emb"].weight, emb)


def test_torchscale_init_matches_its_code_read_by_hand():
    """torchscale (@4d1e0e82: architecture/encoder.py, component/*.py) against bounds computed here.
    MultiheadAttention.reset_parameters is never called on torchscale's path, so every Linear keeps
    nn.Linear's documented default U(+-1/sqrt(fan_in)) (weights and biases); then weights AND biases of
    fc1, fc2, v_proj, out_proj are divided by the init scale."""
    d, scale = 256, (8 * 12) ** 0.25
    model = nn.ModuleDict({"q_proj": nn.Linear(d, d), "k_proj": nn.Linear(d, d), "v_proj": nn.Linear(d, d),
                           "out_proj": nn.Linear(d, d), "fc1": nn.Linear(d, 4 * d), "fc2": nn.Linear(4 * d, d)})
    init.torchscale_init_(model, scale, seed=3)
    for name, lin in model.items():
        div = scale if name in ("v_proj", "out_proj", "fc1", "fc2") else 1.0
        bound = 1 / math.sqrt(lin.in_features)                              # torch.nn.Linear's documented init
        w, b = lin.weight * div, lin.bias * div                             # undo the division
        assert w.abs().max().item() <= bound * (1 + 1e-6), name
        assert w.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.03), name   # uniform: std = bound/sqrt 3
        assert b.abs().max().item() <= bound * (1 + 1e-6) and b.abs().max().item() > 0.8 * bound, name
    # against Figure 2's xavier_normal_(gain=beta) std beta*sqrt(2/(fan_in+fan_out)): out_proj and v_proj
    # are 1/sqrt 3 of it, fc1 sqrt(5/6), fc2 sqrt(5/24) (4x FFN)
    fig2 = lambda lin: (1 / scale) * math.sqrt(2 / (lin.in_features + lin.out_features))
    for name, want in [("out_proj", 1 / math.sqrt(3)), ("v_proj", 1 / math.sqrt(3)), ("fc1", math.sqrt(5 / 6)),
                       ("fc2", math.sqrt(5 / 24))]:
        assert model[name].weight.std().item() / fig2(model[name]) == pytest.approx(want, rel=0.03), name


def test_torchscale_bert_init_is_normal_002_then_divided():
    """args.bert_init: utils.init_bert_params gives every Linear weight N(0, 0.02) and bias 0 before the
    DeepNorm division."""
    d, scale = 256, 3.0
    model = nn.ModuleDict({"q_proj": nn.Linear(d, d), "out_proj": nn.Linear(d, d), "fc1": nn.Linear(d, 4 * d)})
    init.torchscale_init_(model, scale, seed=1, bert_init=True)
    assert model["q_proj"].weight.std().item() == pytest.approx(0.02, rel=0.03)
    for name in ("out_proj", "fc1"):
        assert model[name].weight.std().item() == pytest.approx(0.02 / scale, rel=0.03), name
    assert all(torch.count_nonzero(lin.bias) == 0 for lin in model.values())


def test_torchscale_init_keeps_the_callers_random_stream_and_rejects_a_bad_scale():
    model = nn.ModuleDict({"fc1": nn.Linear(4, 4)})
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    init.torchscale_init_(model, 2.0, seed=9)
    assert torch.equal(torch.rand(3), expected)
    with pytest.raises(ValueError, match="positive"):
        init.torchscale_init_(nn.ModuleDict({"fc1": nn.Linear(4, 4)}), 0.0)
