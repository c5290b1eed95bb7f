"""Norm formulas as pure functions, each written once: the forms real models use, and the wrong
forms the source material writes, so the lessons and the companion can measure them side by side.

The modules learners build on are in ``normlab.norms`` (element-wise equal to ``torch.nn``); here
every function is one formula over the last dim (``batch_rms_norm`` and ``bn_over_be_plane`` aside),
checked against its definition in tests/test_variants.py.

RMSNorm, y = x / rms(x) * gain:
    rms_norm                 x * rsqrt(mean(x^2) + eps) [* w], all in x's dtype (no upcast)
    rms_llama                float32 inside, cast back to x's dtype, THEN times w        (HF LlamaRMSNorm)
    rms_t5                   variance in float32, cast only for a half-precision weight   (HF T5LayerNorm)
    rms_gemma                float32 throughout, gain (1 + w), one cast at the end         (Gemma)
    rms_partial              RMS from the first p*d features, eps outside the root         (pRMSNorm)
    rms_eps_outside          x / (sqrt(mean(x^2)) + eps) [* w]                            (rmsnorm_torch.py)
    rms_upcast_then_weight   float32, cast back, then times a float32 w: promotes to float32 ([A] §2.4)
LayerNorm, y = (x - mu) / sqrt(var + eps):
    layer_norm               two-pass, in x's dtype (no upcast)
    layer_norm_eps_outside   (x - mu) / (std + eps): eps outside the root
    add_layer_norm           LN(x + residual) * w + b in separate eager ops ([C]'s "FusedAddLayerNorm")
Batch statistics:
    batch_rms_norm           x / sqrt(mean over every dim but the last of x^2 + eps): BN without mu,
                             the training forward of Shen et al.'s PowerNorm
    bn_over_be_plane         text (B, S, E) normalised over (B, E): one statistic per position ([E] §1)
    power_norm_source_c      x / (mean(|x|^p)^(1/p) + eps) per token: what [C] calls PowerNorm
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["rms_norm", "rms_llama", "rms_t5", "rms_gemma", "rms_partial", "rms_eps_outside",
           "rms_upcast_then_weight", "layer_norm", "layer_norm_eps_outside", "add_layer_norm",
           "batch_rms_norm", "bn_over_be_plane", "power_norm_source_c"]


# --- RMSNorm ------------------------------------------------------------------------------------

def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """x * rsqrt(mean(x^2) + eps) [* weight], in x's own dtype. In float16, |x| > 256 makes x^2
    overflow to inf. Also LayerNorm's formula (2) with mu removed, and T5's norm as a formula."""
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)     # x / sqrt(mean(x^2) + eps)
    return y if weight is None else y * weight


def rms_llama(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """LLaMA / Qwen (HF LlamaRMSNorm): compute in float32, cast back to x's dtype, THEN multiply by
    the weight (in the weight's dtype)."""
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def rms_t5(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """T5 (HF T5LayerNorm, "no bias and no subtraction of mean"): the variance in float32; cast to
    the weight's dtype only when the weight is half precision."""
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    h = x * torch.rsqrt(variance + eps)
    if weight.dtype in (torch.float16, torch.bfloat16):
        h = h.to(weight.dtype)
    return weight * h


def rms_gemma(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """Gemma: the stored weight w starts at 0 and the gain is (1 + w); everything in float32, one
    cast back at the very end."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return (h * (1.0 + weight.float())).to(x.dtype)


def rms_partial(x: Tensor, weight: Tensor, p: float = 0.0625, eps: float = 1e-8) -> Tensor:
    """pRMSNorm (Zhang & Sennrich 2019): the RMS of the first k = int(p * d) features only (at least
    1), and, as the authors' rmsnorm_torch.py does, x / (rms + eps): eps outside the root."""
    k = max(1, int(x.shape[-1] * p))
    return rms_eps_outside(x, weight, eps, features=k)


def rms_eps_outside(x: Tensor, weight: Tensor | None = None, eps: float = 1e-8, features: int | None = None) -> Tensor:
    """x / (sqrt(mean(x^2)) + eps) [* weight]: eps OUTSIDE the root (the RMSNorm authors'
    rmsnorm_torch.py). ``features``: estimate the RMS from the first k features only."""
    part = x if features is None else x[..., :features]
    rms = part.pow(2).mean(-1, keepdim=True).sqrt()                 # sqrt(mean(x^2))
    y = x / (rms + eps)
    return y if weight is None else y * weight


def rms_upcast_then_weight(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """[A] §2.4: normalise in float32, cast back, *then* multiply by a float32 weight, which
    promotes the result back to float32."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * y.type_as(x)


# --- LayerNorm ----------------------------------------------------------------------------------

def layer_norm(x: Tensor, eps: float = 1e-5, variance: Callable[[Tensor], Tensor] | None = None) -> Tensor:
    """LayerNorm in x's own dtype (no float32 upcast): (x - mu) / sqrt(var + eps), var two-pass
    mean((x-mu)^2), or ``variance(x)`` (e.g. ``normlab.lessons.layernorm.variance_one_pass``)."""
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True) if variance is None else variance(x).unsqueeze(-1)
    return (x - mu) / torch.sqrt(var + eps)


def layer_norm_eps_outside(x: Tensor, eps: float = 1e-6) -> Tensor:
    """(x - mu) / (std + eps), eps outside the root, std biased ([A] §2.3.1, several hand-written LNs)."""
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / (x.std(-1, keepdim=True, unbiased=False) + eps)


def add_layer_norm(x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-12) -> Tensor:
    """LN(x + residual) * weight + bias as separate eager ops: the same kernels as unfused code."""
    s = x + residual
    mean = s.mean(dim=-1, keepdim=True)
    var = s.var(dim=-1, unbiased=False, keepdim=True)
    return weight * ((s - mean) / torch.sqrt(var + eps)) + bias


# --- batch statistics ---------------------------------------------------------------------------

def batch_rms_norm(x: Tensor, eps: float = 1e-5) -> Tensor:
    """Each feature divided by its quadratic mean over the batch (every dim but the last), no mean
    subtracted: BatchNorm's formula without mu, and Shen et al.'s PowerNorm in training without
    its running average. Batch-dependent, so not RMSNorm."""
    return x / torch.sqrt(x.pow(2).mean(dim=tuple(range(x.dim() - 1)), keepdim=True) + eps)


def bn_over_be_plane(x: Tensor, eps: float = 1e-5) -> Tensor:
    """Text (B, S, E) normalised over the (B, E) plane: one statistic per position s ([E] §1)."""
    mu = x.mean(dim=(0, 2), keepdim=True)
    var = x.var(dim=(0, 2), keepdim=True, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps)


def power_norm_source_c(x: Tensor, p: float = 2.0, eps: float = 1e-6) -> Tensor:
    """What [C] calls PowerNorm: per token x / (mean(|x|^p)^(1/p) + eps), no batch statistics. For
    p = 2, RMSNorm with eps outside the root (an LN-family method, not the BN-family PowerNorm)."""
    return x / (x.abs().pow(p).mean(-1, keepdim=True).pow(1 / p) + eps)
