"""Lesson 03 (LayerNorm): how a normalization layer computes its variance — the numerics.

Three ways to get Var[x] over the last dim. Each runs like a naive single-thread kernel:
one element at a time, every running sum and every intermediate rounded to ``dtype`` (the
precision the kernel keeps its numbers in). (``torch.mean`` sums pairwise and in float32
for half inputs, which would hide part of the effect.)

    one-pass   E[x^2] - E[x]^2                 one read of x; cancels catastrophically
    two-pass   E[(x - E[x])^2]                 reads x twice; what normlab.norms does
    Welford    m_k = m + (x_k - m)/k,  M2 += (x_k - m)(x_k - m_k)   one read, stable
               (Welford 1962; PyTorch's CPU kernels merge such partial results with
               ``AddMoments`` in aten/src/ATen/native/cpu/moments_utils.h)

``normlab.variants.layer_norm(x.to(dtype), variance=variance_one_pass)`` is LayerNorm with one of them. The
other places eps goes ((x - mu)/(std + eps), ...) are formulas in ``normlab.variants``. The invariance
table of lessons 03 and 04 is ``normlab.lessons.invariance``.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["sequential_mean", "variance_one_pass", "variance_two_pass", "variance_welford", "VARIANCE_METHODS",
           "METHOD_LABELS", "representable", "eps_changes_var"]


def _prepare(x: Tensor, dtype: torch.dtype | None, who: str) -> Tensor:
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"{who} 期望浮点张量 (floating-point torch.Tensor)，实际收到 "
                        f"{type(x).__name__ if not isinstance(x, Tensor) else x.dtype}。({who} expected a float tensor.)")
    if x.dim() == 0 or x.shape[-1] < 1:
        raise ValueError(f"{who} 沿最后一维 (last dim) 求方差，输入形状 {tuple(x.shape)} 没有元素。"
                         f"({who} reduces over the last dim, which is empty.)")
    return x.to(dtype or x.dtype)


def sequential_mean(v: Tensor) -> Tensor:
    """Mean over the last dim with a running sum s += v_k, rounded to v.dtype at every step."""
    s = torch.zeros(v.shape[:-1], dtype=v.dtype)
    for k in range(v.shape[-1]):
        s = s + v[..., k]                   # s_k = round(s_{k-1} + v_k)
    return s / v.shape[-1]


def variance_one_pass(x: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """Var = E[x^2] - E[x]^2 over the last dim, computed in ``dtype`` (biased)."""
    x = _prepare(x, dtype, "variance_one_pass")
    mean_sq = sequential_mean(x * x)           # E[x^2]
    mean = sequential_mean(x)                  # E[x]
    return mean_sq - mean * mean            # E[x^2] - E[x]^2: two big, nearly equal numbers


def variance_two_pass(x: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """Var = E[(x - E[x])^2] over the last dim, computed in ``dtype`` (biased)."""
    x = _prepare(x, dtype, "variance_two_pass")
    mean = sequential_mean(x).unsqueeze(-1)    # pass 1: E[x]
    d = x - mean
    return sequential_mean(d * d)              # pass 2: E[(x - E[x])^2]


def variance_welford(x: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """Welford's streaming variance over the last dim, every step rounded to ``dtype`` (biased)."""
    x = _prepare(x, dtype, "variance_welford")
    mean = torch.zeros(x.shape[:-1], dtype=x.dtype)
    m2 = torch.zeros(x.shape[:-1], dtype=x.dtype)
    for k in range(x.shape[-1]):            # one element at a time, as a streaming kernel
        xk = x[..., k]
        delta = xk - mean                   # x_k - m_{k-1}
        mean = mean + delta / (k + 1)       # m_k = m_{k-1} + (x_k - m_{k-1}) / k
        m2 = m2 + delta * (xk - mean)       # M2 += (x_k - m_{k-1}) (x_k - m_k)
    return m2 / x.shape[-1]                 # biased: M2 / n


VARIANCE_METHODS = {"one_pass": variance_one_pass, "two_pass": variance_two_pass, "welford": variance_welford}
METHOD_LABELS = {"one_pass": "one-pass E[x²]−E[x]²", "two_pass": "two-pass E[(x−μ)²]", "welford": "Welford"}


def representable(value: float, dtype: torch.dtype) -> float:
    """The number ``dtype`` actually stores for ``value`` (1e-12 in float16 is 0.0)."""
    return float(torch.tensor(value, dtype=dtype))


def eps_changes_var(var: float, eps: float, dtype: torch.dtype) -> bool:
    """Does var + eps differ from var once both are rounded to ``dtype``?"""
    v = torch.tensor(var, dtype=dtype)
    return bool(v + torch.tensor(eps, dtype=dtype) != v)
