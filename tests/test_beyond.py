"""Lesson 07: normlab.lessons.beyond against the definitions, computed independently here."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlab.blocks import SelfAttention
from normlab.lessons import beyond
from normlab.models import SequenceModel


def test_scalenorm_definition_and_init():
    x = torch.randn(3, 16)
    sn = beyond.ScaleNorm(16)
    assert sn.g.item() == math.sqrt(16)
    assert torch.allclose(sn(x), 4 * x / torch.linalg.vector_norm(x, dim=-1, keepdim=True))


def test_powernorm_shen_uses_quadratic_mean_without_centering():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 3) + 4.0
    pn = beyond.PowerNormShen(3, warmup_steps=1)                      # first step: batch statistic
    quad = x.pow(2).mean((0, 1))
    assert torch.allclose(pn(x), x / torch.sqrt(quad + 1e-5))
    assert torch.allclose(pn.running_phi, 0.9 * torch.ones(3) + 0.1 * quad)
    y2 = pn(x)                                                        # later steps: the running statistic
    assert torch.allclose(y2, x / torch.sqrt(0.9 * torch.ones(3) + 0.1 * quad + 1e-5))
    assert pn(x).mean().item() > 0.5                                  # no mean subtraction


def test_source_powernorm_is_rms_with_eps_outside_for_p2():
    x = torch.randn(4, 8)
    y = beyond.PowerNormSourceC(8, p=2.0, eps=1e-6)(x)
    assert torch.allclose(y, x / (x.pow(2).mean(-1, keepdim=True).sqrt() + 1e-6))
    rows = x.tolist()                                                  # p = 3, one token at a time in plain Python
    pmean = [(sum(abs(v) ** 3 for v in r) / 8) ** (1 / 3) + 1e-6 for r in rows]
    expected = torch.tensor([[v / m for v in r] for r, m in zip(rows, pmean)])
    torch.testing.assert_close(beyond.PowerNormSourceC(8, p=3.0, eps=1e-6)(x).detach(), expected, atol=1e-5, rtol=1e-5)


def test_qk_attention_without_norm_equals_the_original_and_with_norm_is_bounded():
    torch.manual_seed(0)
    att = SelfAttention(32, heads=4)
    x = torch.randn(2, 6, 32)
    plain = beyond.QKNormAttention(32, 4, qk_norm=False)
    plain.load_state_dict(att.state_dict(), strict=False)
    assert torch.allclose(plain(x), att(x), atol=1e-5)
    normed = beyond.QKNormAttention(32, 4, qk_norm=True)
    with torch.no_grad():
        normed.q_proj.weight.mul_(100)
        normed.k_proj.weight.mul_(100)
    normed(x)
    assert normed.last_max_logit <= math.sqrt(8) + 1e-4                # |q.k|/sqrt(d) <= sqrt(d) with unit gains
    model = SequenceModel(8, 6, depth=2, width=32, seed=0)
    tokens = torch.randint(0, 8, (3, 6))
    with torch.no_grad():
        before = model(tokens)
        swapped = beyond.use_qk_attention(model, False)                     # same weights, no norm: same model
        assert len(swapped) == 2 and all(isinstance(b.attn.sublayer, beyond.QKNormAttention) for b in model.stack.blocks)
        torch.testing.assert_close(model(tokens), before, atol=1e-5, rtol=1e-5)


def test_dyt_definition_and_replacement():
    d = beyond.DyT(8, alpha_init=0.5)
    x = torch.randn(3, 8)
    assert torch.allclose(d(x), torch.tanh(0.5 * x))
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.Sequential(nn.LayerNorm(8)))
    assert beyond.replace_layernorms(model, beyond.DyT) == 2
    assert not any(isinstance(m, nn.LayerNorm) for m in model.modules())


def test_fit_tanh_recovers_a_tanh_and_prefers_it_over_nothing():
    x = torch.linspace(-6, 6, 400)
    a, b, r2 = beyond.fit_tanh(x, 2.0 * torch.tanh(0.8 * x), steps=600)
    assert r2 > 0.99 and abs(a - 2.0) < 0.1 and abs(b - 0.8) < 0.1
    assert beyond.fit_tanh(x, torch.randn(400))[2] < 0.1


def _heads(t, h):
    b, s, w = t.shape
    return t.view(b, s, h, w // h).transpose(1, 2)


def test_qk_norm_attention_matches_its_definition():
    # q, k RMS-normalised per head (eps 1e-6, gains g_q, g_k), then softmax(q k^T / sqrt(d)) v,
    # written here with F.linear and torch's own scaled_dot_product_attention
    torch.manual_seed(0)
    w, h = 32, 4
    d = w // h
    x = torch.randn(2, 6, w)
    rms = lambda t, g: t / torch.sqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * g
    for causal in (False, True):
        att = beyond.QKNormAttention(w, h, causal=causal, qk_norm=True)
        with torch.no_grad():
            att.q_norm.weight.copy_(torch.rand(d) + 0.5)
            att.k_norm.weight.copy_(torch.rand(d) + 0.5)
        q = rms(_heads(F.linear(x, att.q_proj.weight, att.q_proj.bias), h), att.q_norm.weight)
        k = rms(_heads(F.linear(x, att.k_proj.weight, att.k_proj.bias), h), att.k_norm.weight)
        v = _heads(F.linear(x, att.v_proj.weight, att.v_proj.bias), h)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        expected = F.linear(y.transpose(1, 2).reshape(2, 6, w), att.out_proj.weight, att.out_proj.bias)
        torch.testing.assert_close(att(x), expected, atol=1e-5, rtol=1e-5)
        logits = (q @ k.transpose(-1, -2) / math.sqrt(d))
        if causal:
            logits = logits.tril()                                    # the masked entries do not count
        assert math.isclose(att.last_max_logit, logits.abs().max().item(), rel_tol=1e-5)


def test_dyt_with_learned_affine_and_alpha():
    torch.manual_seed(0)
    d = beyond.DyT(8, alpha_init=0.7)
    with torch.no_grad():
        d.weight.copy_(torch.randn(8))
        d.bias.copy_(torch.randn(8))
    x = torch.randn(5, 8) * 4
    expected = torch.stack([torch.tensor([math.tanh(0.7 * v) for v in row]) for row in x.tolist()]) * d.weight + d.bias
    torch.testing.assert_close(d(x), expected.detach(), atol=1e-6, rtol=1e-5)
    assert sum(p.numel() for p in d.parameters()) == 1 + 8 + 8          # one alpha, per-channel gamma and beta


def test_powernorm_shen_mask_and_eval():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 3) * 2
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    pn = beyond.PowerNormShen(3, alpha=0.8, warmup_steps=1)
    real = x[mask]                                                    # (7, 3): the real tokens only
    quad = (real ** 2).mean(0)
    torch.testing.assert_close(pn(x, mask=mask), x / torch.sqrt(quad + 1e-5))
    torch.testing.assert_close(pn.running_phi, 0.8 + 0.2 * quad)
    pn.eval()                                                         # inference: the running statistic
    torch.testing.assert_close(pn(x), x / torch.sqrt(0.8 + 0.2 * quad + 1e-5))
    assert pn.steps == 1                                              # eval does not count as a step


def test_powernorm_shen_approximate_backward_against_autograd():
    """With alpha_bkw = 0 and the running estimate set to this batch's mean(g * z), the authors'
    approximate gradient equals autograd's exact gradient of x / sqrt(psi_B^2(x) + eps)."""
    torch.manual_seed(0)
    x = (torch.randn(3, 4, 5) * 2 + 1).double().requires_grad_()
    g = torch.randn(3, 4, 5, dtype=torch.double)
    exact_x = x.detach().clone().requires_grad_()
    z = exact_x / torch.sqrt(exact_x.pow(2).mean((0, 1)) + 1e-5)          # batch statistic, in the graph
    (exact,) = torch.autograd.grad(z, exact_x, g)
    pn = beyond.PowerNormShen(5, warmup_steps=1, alpha_bkw=0.0).double()
    pn.running_gz.copy_((g * z.detach()).mean((0, 1)))
    (approx,) = torch.autograd.grad(pn(x), x, g)
    torch.testing.assert_close(approx, exact)


def test_powernorm_shen_running_gz_update_and_scale():
    torch.manual_seed(1)
    x = torch.randn(2, 6, 4, requires_grad=True)
    g = torch.randn(2, 6, 4)
    pn = beyond.PowerNormShen(4, warmup_steps=0, alpha_bkw=0.9)           # uses running_phi = 1 from step 1
    pn.running_gz.fill_(0.3)
    y = pn(x)
    quad = x.detach().pow(2).mean((0, 1))
    z = x.detach() / (1 + 1e-5) ** 0.5
    (gx,) = torch.autograd.grad(y, x, g)
    g_tilde = g - 0.1 * 0.3 * z                                            # (1 - alpha_bkw) * nu * z
    torch.testing.assert_close(gx, g_tilde / torch.sqrt(quad + 1e-5))
    torch.testing.assert_close(pn.running_gz, 0.3 + (g_tilde * z).mean((0, 1)))
    plain = beyond.PowerNormShen(4, approx_backward=False)
    (g_plain,) = torch.autograd.grad(plain(x), x, g)                     # running statistic as a constant
    torch.testing.assert_close(g_plain, g / (1 + 1e-5) ** 0.5)


def test_full_width_and_layernorm_qk_variants_match_their_definitions():
    # OLMo 2: RMSNorm over the whole projection width, then the split into heads;
    # the lesson's control: LayerNorm (centred, gain, no bias) on each head's q and k (ViT-22B's has no centring: head_rms)
    torch.manual_seed(1)
    w, h = 32, 4
    d = w // h
    x = torch.randn(2, 6, w)
    full = beyond.QKNormAttention(w, h, qk_norm="full_rms")
    rms = lambda t: t / torch.sqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6)
    q = _heads(rms(F.linear(x, full.q_proj.weight, full.q_proj.bias)), h)
    k = _heads(rms(F.linear(x, full.k_proj.weight, full.k_proj.bias)), h)
    v = _heads(F.linear(x, full.v_proj.weight, full.v_proj.bias), h)
    expected = F.linear(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(2, 6, w),
                        full.out_proj.weight, full.out_proj.bias)
    torch.testing.assert_close(full(x), expected, atol=1e-5, rtol=1e-5)
    ln = beyond.QKNormAttention(w, h, qk_norm="head_ln")
    assert ln.q_norm.bias is None and ln.k_norm.bias is None      # no bias in the QK LayerNorms
    with torch.no_grad():
        ln.q_norm.weight.copy_(torch.randn(d))
    mu = lambda t: t.mean(-1, keepdim=True)
    lnf = lambda t, m: (t - mu(t)) / torch.sqrt((t - mu(t)).pow(2).mean(-1, keepdim=True) + 1e-5) * m.weight
    q = lnf(_heads(F.linear(x, ln.q_proj.weight, ln.q_proj.bias), h), ln.q_norm)
    k = lnf(_heads(F.linear(x, ln.k_proj.weight, ln.k_proj.bias), h), ln.k_norm)
    v = _heads(F.linear(x, ln.v_proj.weight, ln.v_proj.bias), h)
    expected = F.linear(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(2, 6, w),
                        ln.out_proj.weight, ln.out_proj.bias)
    torch.testing.assert_close(ln(x), expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="qk_norm"):
        beyond.QKNormAttention(w, h, qk_norm="per_token")


def test_qk_bounds_per_variant_and_full_width_exceeds_the_per_head_bound():
    # one head's slice of q and k much larger than the others: full-width RMSNorm gives that head
    # almost all of the norm sqrt(width), so its logit goes past sqrt(d_head) (the per-head bound)
    torch.manual_seed(2)
    w, h = 32, 4
    d = w // h
    x = torch.randn(1, 1, w)
    for kind in ("head_rms", "full_rms", "head_ln"):
        att = beyond.QKNormAttention(w, h, qk_norm=kind)
        with torch.no_grad():
            for proj in (att.q_proj, att.k_proj):
                proj.bias.zero_()
                proj.weight.zero_()
                proj.weight[:d] = torch.eye(d, w) * 100          # head 0 reads x[:d], the others read nothing
                proj.weight[d:] = torch.eye(w - d, w) * 1e-3
        att(x)
        assert att.last_max_logit <= att.logit_bound() * (1 + 1e-5)
        if kind == "full_rms":
            assert att.last_max_logit > 3 * math.sqrt(d)          # close to width / sqrt(d) = 4 sqrt(d)
            assert att.logit_bound() == pytest.approx(w / math.sqrt(d))
        else:
            assert att.logit_bound() == pytest.approx(math.sqrt(d))
    assert beyond.QKNormAttention(w, h, qk_norm=False).logit_bound() == math.inf
