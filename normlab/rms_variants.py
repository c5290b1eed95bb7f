"""RMSNorm as real models and papers write it, each checked in tests/test_rms_variants.py.

All normalise over the last dim d:  y = x / rms(x) * gain,  rms(x) = sqrt(mean(x^2) + eps)
(eps inside the root: PyTorch, LLaMA, T5, Gemma) or sqrt(mean(x^2)) + eps (outside: the paper
authors' rmsnorm_torch.py, here ``eps_outside`` and ``partial``). They differ in where the float32
upcast ends, what the gain is, and where eps goes.
"""

from __future__ import annotations

import torch
from torch import Tensor


def llama(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """LLaMA / Qwen (HF LlamaRMSNorm): compute in float32, cast back to x's dtype, THEN
    multiply by the weight (in the weight's dtype)."""
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def t5(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """T5 (HF T5LayerNorm, "no bias and no subtraction of mean"): the variance in float32;
    cast to the weight's dtype only when the weight is half precision."""
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    h = x * torch.rsqrt(variance + eps)
    if weight.dtype in (torch.float16, torch.bfloat16):
        h = h.to(weight.dtype)
    return weight * h


def gemma(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """Gemma: the stored weight w starts at 0 and the gain is (1 + w); everything in float32,
    one cast back at the very end."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (h * (1.0 + weight.float())).to(x.dtype)


def partial(x: Tensor, weight: Tensor, p: float = 0.0625, eps: float = 1e-8) -> Tensor:
    """pRMSNorm (Zhang & Sennrich 2019): estimate the RMS from the first k = int(p * d) features only
    (floor, at least 1), and, as the authors' rmsnorm_torch.py does, x / (rms + eps): eps outside the root."""
    k = max(1, int(x.shape[-1] * p))
    rms = x[..., :k].pow(2).mean(-1, keepdim=True).sqrt()
    return x / (rms + eps) * weight


def eps_outside(x: Tensor, weight: Tensor, eps: float = 1e-8) -> Tensor:
    """The paper authors' reference code (rmsnorm_torch.py): x / (rms + eps), eps OUTSIDE the root."""
    rms = x.pow(2).mean(-1, keepdim=True).sqrt()
    return x / (rms + eps) * weight


def naive(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """No upcast: x^2 in x's own dtype. In float16, |x| > 256 makes x^2 overflow to inf."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
