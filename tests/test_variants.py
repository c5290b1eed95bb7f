"""normlab.variants: each formula against its definition written out here in float64 (or plain
Python), or against torch's own F.rms_norm / F.layer_norm / F.batch_norm, including the dtype
behaviour that tells the variants apart (where the cast sits, what overflows in float16)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from normlab import variants as V

FP16_MAX = torch.finfo(torch.float16).max               # 65504: x^2 overflows for |x| > sqrt(65504) = 255.9


def rms64(x: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm's definition in float64: x / sqrt(mean(x^2) + eps)."""
    x = x.double()
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) / x.shape[-1] + eps)


def ln64(x: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm's definition in float64: (x - mu) / sqrt(mean((x - mu)^2) + eps)."""
    x = x.double()
    mu = x.sum(-1, keepdim=True) / x.shape[-1]
    return (x - mu) / torch.sqrt(((x - mu) ** 2).sum(-1, keepdim=True) / x.shape[-1] + eps)


# --- RMSNorm --------------------------------------------------------------------------------------

def test_rms_norm_equals_torch_and_the_definition():
    torch.manual_seed(0)
    x, w = torch.randn(3, 5, 16, dtype=torch.float64) * 2 + 0.5, torch.randn(16, dtype=torch.float64)
    torch.testing.assert_close(V.rms_norm(x, w, 1e-6), F.rms_norm(x, (16,), w, 1e-6))
    torch.testing.assert_close(V.rms_norm(x, eps=1e-3), rms64(x, 1e-3))
    assert V.rms_norm(x.half()).dtype == torch.float16                     # no upcast: x's own dtype


def test_rms_norm_without_upcast_overflows_in_float16_past_sqrt_of_the_largest_half():
    limit = FP16_MAX ** 0.5                                                # 255.94
    below, above = torch.full((1, 8), 255.0, dtype=torch.float16), torch.full((1, 8), 257.0, dtype=torch.float16)
    assert 255.0 < limit < 257.0
    assert torch.isinf(above.pow(2)).all() and torch.isfinite(below.pow(2)).all()
    torch.testing.assert_close(V.rms_norm(below).float(), torch.ones(1, 8), atol=1e-3, rtol=0)
    assert torch.equal(V.rms_norm(above), torch.zeros(1, 8, dtype=torch.float16))   # x * rsqrt(inf) = 0
    # the upcasting variants compute x^2 in float32 and give the right answer
    one = torch.ones(8, dtype=torch.float16)
    for f in (V.rms_llama, V.rms_t5, lambda x, w: V.rms_gemma(x, w - 1)):
        torch.testing.assert_close(f(above, one).float(), torch.ones(1, 8), atol=1e-3, rtol=0)


def test_llama_and_t5_equal_torch_in_float32():
    torch.manual_seed(0)
    x, w = torch.randn(3, 16) * 2, torch.randn(16)
    ref = F.rms_norm(x, (16,), w, 1e-6)
    torch.testing.assert_close(V.rms_llama(x, w), ref)
    torch.testing.assert_close(V.rms_t5(x, w), ref)


def test_llama_casts_back_to_the_input_dtype_before_the_weight():
    torch.manual_seed(1)
    x = (torch.randn(64, 32) * 3).to(torch.bfloat16)
    w = (torch.randn(32) * 0.3 + 1).to(torch.bfloat16)
    normed = F.rms_norm(x.float(), (32,), None, 1e-6)                      # float32 inside (torch's own)
    assert torch.equal(V.rms_llama(x, w), w * normed.to(torch.bfloat16))   # cast, THEN times w
    assert not torch.equal(V.rms_llama(x, w), (normed * w.float()).to(torch.bfloat16))   # the order shows
    assert V.rms_llama(x, w.float()).dtype == torch.float32                # a float32 weight promotes


def test_gemma_gain_is_one_plus_w_in_float32_with_one_cast_at_the_end():
    torch.manual_seed(2)
    x = (torch.randn(64, 32) * 3).to(torch.bfloat16)
    w = (torch.randn(32) * 0.3).to(torch.bfloat16)                         # stored w; the gain is 1 + w
    expected = (rms64(x, 1e-6).float() * (1 + w.float())).to(torch.bfloat16)
    assert V.rms_gemma(x, w).dtype == torch.bfloat16
    torch.testing.assert_close(V.rms_gemma(x, w), expected, atol=0, rtol=0.008)   # within one bf16 ulp
    zero = torch.zeros(8)
    y = torch.randn(2, 8, dtype=torch.float64)
    torch.testing.assert_close(V.rms_gemma(y, zero), rms64(y, 1e-6))       # w = 0 at init: gain 1


def test_t5_computes_the_variance_in_float32_and_casts_only_for_a_half_weight():
    torch.manual_seed(2)
    xb = (torch.randn(4, 32) * 3).to(torch.bfloat16)
    exact = rms64(xb, 1e-6)
    half = V.rms_t5(xb, torch.ones(32, dtype=torch.bfloat16))
    full = V.rms_t5(xb, torch.ones(32))
    assert half.dtype == torch.bfloat16 and full.dtype == torch.float32    # T5LayerNorm's rule
    torch.testing.assert_close(full.double(), exact, atol=1e-6, rtol=1e-6)
    assert torch.equal(half, F.rms_norm(xb.float(), (32,), None, 1e-6).to(torch.bfloat16))


def test_partial_rms_uses_the_first_features_only_with_eps_outside_the_root():
    x = torch.randn(2, 16, dtype=torch.float64)
    rms = x[:, :4].pow(2).mean(-1, keepdim=True).sqrt()
    torch.testing.assert_close(V.rms_partial(x, torch.ones(16, dtype=torch.float64), p=0.25, eps=0.0), x / rms)
    # the authors' rmsnorm_torch.py: partial_size = int(d * p) (floor: 10 * 0.25 -> 2), x / (rms + eps)
    x, w = torch.randn(3, 10, dtype=torch.float64), torch.randn(10, dtype=torch.float64)
    ref = x / (x[:, :2].norm(2, dim=-1, keepdim=True) * 2 ** -0.5 + 1e-8) * w
    torch.testing.assert_close(V.rms_partial(x, w, p=0.25), ref)
    ref1 = x / (x[:, :1].abs() + 1e-8) * w                                 # p * d < 1: at least one feature
    torch.testing.assert_close(V.rms_partial(x, w, p=0.01), ref1)


def test_eps_outside_matches_the_reference_formula_and_differs_from_torch():
    x = torch.randn(2, 8, dtype=torch.float64) * 1e-4
    ref = x / (x.pow(2).mean(-1, keepdim=True).sqrt() + 1e-6)
    torch.testing.assert_close(V.rms_eps_outside(x, torch.ones(8, dtype=torch.float64), 1e-6), ref)
    torch.testing.assert_close(V.rms_eps_outside(x, None, 1e-6), ref)
    assert (ref - F.rms_norm(x, (8,), None, 1e-6)).abs().max() > 1e-2    # eps inside the root differs a lot
    ref_k = x / (x[:, :3].pow(2).mean(-1, keepdim=True).sqrt() + 1e-6)
    torch.testing.assert_close(V.rms_eps_outside(x, None, 1e-6, features=3), ref_k)


def test_upcast_then_weight_promotes_a_half_input_to_float32():
    torch.manual_seed(3)
    x, w = (torch.randn(4, 16) * 2).half(), torch.randn(16)
    y = V.rms_upcast_then_weight(x, w, 1e-6)
    assert y.dtype == torch.float32                                        # [A] §2.4: not x's dtype
    assert torch.equal(y, w * F.rms_norm(x.float(), (16,), None, 1e-6).half().float())   # cast back, then times w


# --- LayerNorm ------------------------------------------------------------------------------------

def test_layer_norm_equals_torch_and_stays_in_the_input_dtype():
    torch.manual_seed(4)
    x = torch.randn(3, 7, 16, dtype=torch.float64) * 0.3 + 2
    for eps in (1e-5, 1e-2):
        torch.testing.assert_close(V.layer_norm(x, eps), F.layer_norm(x, (16,), eps=eps))
        torch.testing.assert_close(V.layer_norm(x, eps), ln64(x, eps))
    assert V.layer_norm(x.half()).dtype == torch.float16


def test_layer_norm_takes_a_variance_function():
    torch.manual_seed(5)
    x = torch.randn(4, 16, dtype=torch.float64)
    half_var = lambda t: t.var(-1, unbiased=False) / 4                       # any variance(x) -> shape x[..., 0]
    mu = x.mean(-1, keepdim=True)
    torch.testing.assert_close(V.layer_norm(x, 0.0, variance=half_var), (x - mu) / (x.var(-1, unbiased=False, keepdim=True) / 4).sqrt())


def test_layer_norm_eps_outside_is_std_plus_eps():
    x = torch.randn(5, 16, dtype=torch.float64) * 0.01
    mu = x.sum(-1, keepdim=True) / 16
    sd = (((x - mu) ** 2).sum(-1, keepdim=True) / 16).sqrt()               # biased std
    torch.testing.assert_close(V.layer_norm_eps_outside(x, 1e-3), (x - mu) / (sd + 1e-3))
    assert (V.layer_norm_eps_outside(x, 1e-3) - F.layer_norm(x, (16,), eps=1e-3)).abs().max() > 0.1


def test_add_layer_norm_equals_torch_layer_norm_of_the_sum():
    torch.manual_seed(6)
    x, r = torch.randn(3, 32, dtype=torch.float64), torch.randn(3, 32, dtype=torch.float64)
    w, b = torch.randn(32, dtype=torch.float64), torch.randn(32, dtype=torch.float64)
    torch.testing.assert_close(V.add_layer_norm(x, r, w, b), F.layer_norm(x + r, (32,), w, b, 1e-12))
    torch.testing.assert_close(V.add_layer_norm(x, r, w, b, eps=0.1), F.layer_norm(x + r, (32,), w, b, 0.1))


# --- batch statistics -----------------------------------------------------------------------------

def test_batch_rms_norm_by_hand_in_plain_python():
    torch.manual_seed(7)
    x = torch.randn(3, 4, 2, dtype=torch.float64) + 1                      # (B, S, C): statistics over (B, S)
    rows = x.reshape(-1, 2).tolist()
    quad = [sum(r[c] ** 2 for r in rows) / len(rows) for c in range(2)]
    expected = torch.tensor([[r[c] / (quad[c] + 1e-5) ** 0.5 for c in range(2)] for r in rows], dtype=torch.float64)
    torch.testing.assert_close(V.batch_rms_norm(x), expected.reshape(3, 4, 2))
    y = V.batch_rms_norm(x[0])                                               # 2-D: over the rows
    torch.testing.assert_close(y, x[0] / (x[0].pow(2).mean(0) + 1e-5).sqrt())
    assert y.mean().item() > 0.3                                             # no mean subtracted


def test_bn_over_be_plane_is_torch_batch_norm_with_positions_as_channels():
    torch.manual_seed(8)
    x = torch.randn(4, 6, 8, dtype=torch.float64) * 2 + 1                  # (B, S, E)
    # F.batch_norm on (N, C, L) = (B, S, E) normalises each channel s over (B, E)
    torch.testing.assert_close(V.bn_over_be_plane(x), F.batch_norm(x, None, None, training=True, eps=1e-5))


def test_power_norm_source_c_is_a_per_token_p_mean():
    x = torch.randn(4, 8, dtype=torch.float64)
    torch.testing.assert_close(V.power_norm_source_c(x, 2.0, 1e-6), x / (x.pow(2).mean(-1, keepdim=True).sqrt() + 1e-6))
    rows = x.tolist()                                                        # p = 3, one token at a time
    expected = [[v / ((sum(abs(u) ** 3 for u in r) / 8) ** (1 / 3) + 1e-6) for v in r] for r in rows]
    torch.testing.assert_close(V.power_norm_source_c(x, 3.0, 1e-6), torch.tensor(expected, dtype=torch.float64))


@pytest.mark.parametrize("name", V.__all__)
def test_every_formula_keeps_the_shape(name):
    f = getattr(V, name)
    x = torch.randn(2, 3, 8)
    args = {"rms_llama": (torch.ones(8),), "rms_t5": (torch.ones(8),), "rms_gemma": (torch.zeros(8),),
            "rms_partial": (torch.ones(8),), "rms_upcast_then_weight": (torch.ones(8),),
            "add_layer_norm": (torch.randn(2, 3, 8), torch.ones(8), torch.zeros(8))}.get(name, ())
    y = f(x, *args)
    assert y.shape == x.shape and torch.isfinite(y).all()
