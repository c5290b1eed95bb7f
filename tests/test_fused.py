"""The optional Triton Add + RMSNorm kernel, run by Triton's interpreter on the CPU, against
torch's own ``x + r`` and ``F.rms_norm`` (skipped where the optional ``triton`` is missing)."""

import pytest
import torch
import torch.nn.functional as F

from normlab import fused

needs_triton = pytest.mark.skipif(not fused.available(), reason="optional extra triton not installed")


@needs_triton
@pytest.mark.parametrize("shape", [(3, 48), (2, 5, 64), (4, 1), (1, 7, 100)])
def test_add_rmsnorm_matches_torch_float32(shape):
    g = torch.Generator().manual_seed(0)
    x, r = torch.randn(shape, generator=g) * 3, torch.randn(shape, generator=g)
    w = torch.rand(shape[-1], generator=g) + 0.5
    h, y = fused.add_rmsnorm(x, r, w, eps=1e-6)
    assert torch.equal(h, x + r)
    torch.testing.assert_close(y, F.rms_norm(x + r, (shape[-1],), w, 1e-6), rtol=1e-5, atol=1e-6)
    assert y.shape == x.shape and y.dtype == x.dtype


@needs_triton
def test_add_rmsnorm_float16_upcasts_like_llama():
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(4, 96, generator=g) * 300).half()   # x² overflows float16 (max 65504)
    r = torch.randn(4, 96, generator=g).half()
    w = torch.ones(96, dtype=torch.float16)
    h, y = fused.add_rmsnorm(x, r, w)
    hf = (x + r).float()
    ref = (hf * torch.rsqrt(hf.pow(2).mean(-1, keepdim=True) + 1e-6)).half()
    assert torch.equal(h, x + r) and y.dtype == torch.float16
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y, ref, rtol=2e-3, atol=2e-3)


@needs_triton
def test_tiny_input_shows_eps_inside_the_root():
    x, r = torch.full((2, 8), 1e-4), torch.zeros(2, 8)
    _, y = fused.add_rmsnorm(x, r, torch.ones(8), eps=1e-6)
    torch.testing.assert_close(y, x / torch.sqrt(torch.tensor(1e-8 + 1e-6)))   # not x / (1e-4 + 1e-6)


@needs_triton
def test_bad_input_is_named():
    x = torch.randn(2, 8)
    with pytest.raises(ValueError, match="形状必须相同"):
        fused.add_rmsnorm(x, torch.randn(2, 9), torch.ones(8))
    with pytest.raises(ValueError, match="weight"):
        fused.add_rmsnorm(x, torch.randn(2, 8), torch.ones(9))


def test_without_triton_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setattr(fused, "triton", None)
    assert not fused.available()
    with pytest.raises(RuntimeError, match=r"\.\[fused\]"):
        fused.add_rmsnorm(torch.randn(2, 8), torch.randn(2, 8), torch.ones(8))
