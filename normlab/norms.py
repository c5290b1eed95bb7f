"""Reference normalization layers, written from scratch and matching ``torch.nn``.

Every class here computes its statistics with plain tensor arithmetic (no
``F.batch_norm`` / ``F.layer_norm`` / ``F.rms_norm``), keeps PyTorch's parameter and
buffer names (so a ``state_dict`` loads into the matching ``torch.nn`` module and
back), and is tested against ``torch.nn`` in ``tests/test_norms.py``.

Which elements share one mean and variance, for an input of shape (N, C, H, W):

    BatchNorm     over (N, H, W)  -> one statistic per channel C
    LayerNorm     over the trailing ``normalized_shape`` dims, per sample
    GroupNorm     over (C/G, H, W) -> one statistic per (sample, group)
    InstanceNorm  over (H, W)     -> one statistic per (sample, channel)
    RMSNorm       like LayerNorm, but no mean: only the root mean square

Half-precision inputs (float16 / bfloat16) are computed in float32 and cast back to
the input dtype at the end, as PyTorch's CPU kernels do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

__all__ = ["BatchNorm", "LayerNorm", "RMSNorm", "GroupNorm", "InstanceNorm"]

_HALF = (torch.float16, torch.bfloat16)


def _as_tensor(x: object, who: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{who} 期望输入一个 torch.Tensor，实际收到 {type(x).__name__}。"
                        f" ({who} expected a torch.Tensor, got {type(x).__name__}.)")
    if not x.is_floating_point():
        raise TypeError(f"{who} 期望浮点张量 (floating-point tensor)，实际 dtype 为 {x.dtype}。"
                        f" 可先用 x.float() 转换。({who} expected a floating-point tensor, got {x.dtype}.)")
    return x


def _compute_dtype(x: Tensor) -> torch.dtype:
    """float16/bfloat16 are computed in float32 (the 'op-math' type); others as they are."""
    return torch.float32 if x.dtype in _HALF else x.dtype


def _affine(y: Tensor, weight: Tensor | None, bias: Tensor | None, shape: Sequence[int]) -> Tensor:
    """y * gamma + beta, with gamma/beta reshaped to broadcast over ``shape``."""
    if weight is not None:
        y = y * weight.to(y.dtype).reshape(shape)
    if bias is not None:
        y = y + bias.to(y.dtype).reshape(shape)
    return y


class _NormBase(nn.Module):
    """What BatchNorm and InstanceNorm share: gamma / beta of size C (``affine``) as parameters, and
    the running statistics as buffers (``track_running_stats``): saved in the state_dict, moved by
    ``.to()``, never given a gradient. The names are PyTorch's, so state_dicts load both ways."""

    def __init__(self, num_features: int, eps: float, momentum: float | None, affine: bool,
                 track_running_stats: bool, device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.register_parameter("weight", nn.Parameter(torch.ones(num_features, **factory)) if affine else None)  # gamma
        self.register_parameter("bias", nn.Parameter(torch.zeros(num_features, **factory)) if affine else None)   # beta
        stats = track_running_stats
        self.register_buffer("running_mean", torch.zeros(num_features, **factory) if stats else None)
        self.register_buffer("running_var", torch.ones(num_features, **factory) if stats else None)
        self.register_buffer("num_batches_tracked",
                             torch.tensor(0, dtype=torch.long, device=device) if stats else None)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm(_NormBase):
    r"""Batch normalization (Ioffe & Szegedy 2015) for (N, C), (N, C, L), (N, C, H, W).

    Training:  mu_c = mean over (N, *spatial) of x[:, c]
               var_c = mean((x - mu_c)^2)                    (biased, to normalise)
               y = (x - mu_c) / sqrt(var_c + eps) * gamma_c + beta_c
               running_mean <- (1 - momentum) * running_mean + momentum * mu_c
               running_var  <- (1 - momentum) * running_var  + momentum * var_c * m/(m-1)
               (m = elements per channel; momentum=None -> cumulative average 1/t)
    Eval:      the same formula with running_mean / running_var instead of mu_c / var_c.
    The mode comes from ``self.training`` (``model.eval()``), never from autograd state.
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        x = _as_tensor(x, "BatchNorm")
        if x.dim() not in (2, 3, 4):
            raise ValueError(f"BatchNorm 期望 2 到 4 维输入 (N, C)、(N, C, L) 或 (N, C, H, W)，实际收到 "
                             f"{x.dim()} 维，形状 {tuple(x.shape)}。(BatchNorm expected a 2D-4D input.)")
        if x.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm 期望通道维 (channel dim, dim=1) 大小为 num_features={self.num_features}，"
                             f"实际为 {x.shape[1]}，输入形状 {tuple(x.shape)}。(wrong number of channels)")
        dims = [0] + list(range(2, x.dim()))             # every axis except the channel axis
        shape = [1, -1] + [1] * (x.dim() - 2)            # broadcast a (C,) vector over x
        m = x.numel() // x.shape[1]                      # elements per channel
        use_batch_stats = self.training or self.running_mean is None
        if self.training and m <= 1:
            raise ValueError(f"BatchNorm 训练模式 (training mode) 下每个通道至少需要 2 个值，实际输入形状 "
                             f"{tuple(x.shape)} 每通道只有 {m} 个：方差为 0。可增大 batch，或先 model.eval()。"
                             f"(Expected more than 1 value per channel when training.)")
        xc = x.to(_compute_dtype(x))
        if use_batch_stats:
            mean = xc.mean(dim=dims)                                    # mu_c
            var = ((xc - mean.reshape(shape)) ** 2).mean(dim=dims)      # biased variance
            if self.training and self.running_mean is not None:
                self._update_running_stats(mean.detach(), var.detach(), m)
        else:
            mean, var = self.running_mean.to(xc.dtype), self.running_var.to(xc.dtype)
        y = (xc - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + self.eps)
        return _affine(y, self.weight, self.bias, shape).to(x.dtype)

    @torch.no_grad()
    def _update_running_stats(self, mean: Tensor, var: Tensor, m: int) -> None:
        self.num_batches_tracked += 1
        f = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        unbiased_var = var * m / (m - 1)                                # Bessel's correction
        self.running_mean.mul_(1 - f).add_(f * mean.to(self.running_mean.dtype))
        self.running_var.mul_(1 - f).add_(f * unbiased_var.to(self.running_var.dtype))


def _shape_tuple(normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    return (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)


def _check_trailing(x: Tensor, shape: tuple[int, ...], who: str) -> None:
    if x.dim() < len(shape) or tuple(x.shape[-len(shape):]) != shape:
        raise ValueError(f"{who} 期望输入的最后 {len(shape)} 维为 normalized_shape={shape}，"
                         f"实际输入形状为 {tuple(x.shape)}。({who} expected trailing shape {shape}.)")


class LayerNorm(nn.Module):
    r"""Layer normalization (Ba et al. 2016) over the trailing ``normalized_shape`` dims.

    mu  = mean(x)                     over the last len(normalized_shape) dims, per sample
    var = mean((x - mu)^2)            (biased)
    y   = (x - mu) / sqrt(var + eps) * gamma + beta      (eps inside the square root)
    The same computation in training and in eval: there are no running statistics.
    """

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape, **factory))
            self.bias = nn.Parameter(torch.zeros(self.normalized_shape, **factory)) if bias else None
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        x = _as_tensor(x, "LayerNorm")
        _check_trailing(x, self.normalized_shape, "LayerNorm")
        dims = tuple(range(-len(self.normalized_shape), 0))
        xc = x.to(_compute_dtype(x))
        mean = xc.mean(dim=dims, keepdim=True)
        var = ((xc - mean) ** 2).mean(dim=dims, keepdim=True)
        y = (xc - mean) / torch.sqrt(var + self.eps)
        return _affine(y, self.weight, self.bias, self.normalized_shape).to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class RMSNorm(nn.Module):
    r"""Root-mean-square normalization (Zhang & Sennrich 2019), as ``torch.nn.RMSNorm``.

    rms = sqrt(mean(x^2) + eps)       over the trailing dims (eps inside the root)
    y   = x / rms * gamma             no mean subtraction, no bias beta; the gain gamma stays
    eps=None uses the machine epsilon of the *compute* dtype: float32's (1.19e-7) for
    float16/bfloat16 inputs, because they are upcast to float32 first. (PyTorch's docs say
    ``finfo(x.dtype).eps``; its CPU kernel in 2.13 does what is written here.)
    """

    def __init__(self, normalized_shape: int | Sequence[int], eps: float | None = None,
                 elementwise_affine: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def forward(self, x: Tensor) -> Tensor:
        x = _as_tensor(x, "RMSNorm")
        _check_trailing(x, self.normalized_shape, "RMSNorm")
        dims = tuple(range(-len(self.normalized_shape), 0))
        xc = x.to(_compute_dtype(x))
        eps = torch.finfo(xc.dtype).eps if self.eps is None else self.eps
        y = xc / torch.sqrt((xc ** 2).mean(dim=dims, keepdim=True) + eps)
        return _affine(y, self.weight, None, self.normalized_shape).to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(nn.Module):
    r"""Group normalization (Wu & He 2018) for (N, C, *) inputs.

    Split the C channels into G groups of C/G; per sample and group:
    mu, var over (C/G, *spatial);  y = (x - mu) / sqrt(var + eps) * gamma_c + beta_c
    G = 1 is LayerNorm over (C, *spatial) (with per-channel gamma); G = C is InstanceNorm.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups != 0:
            raise ValueError(f"GroupNorm 要求通道数 num_channels={num_channels} 能被组数 num_groups={num_groups} "
                             f"整除。(num_channels must be divisible by num_groups.)")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        if affine:
            self.weight = nn.Parameter(torch.ones(num_channels, device=device, dtype=dtype))
            self.bias = nn.Parameter(torch.zeros(num_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        x = _as_tensor(x, "GroupNorm")
        if x.dim() < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm 期望输入形状 (N, C, *)，C = num_channels = {self.num_channels}，"
                             f"实际输入形状 {tuple(x.shape)}。(GroupNorm expected (N, {self.num_channels}, *).)")
        xc = x.to(_compute_dtype(x))
        per_group = x.shape[1:].numel() // self.num_groups         # C/G * spatial (explicit: N may be 0)
        g = xc.reshape(x.shape[0], self.num_groups, per_group)      # (N, G, C/G * spatial)
        mean = g.mean(dim=-1, keepdim=True)
        var = ((g - mean) ** 2).mean(dim=-1, keepdim=True)
        y = ((g - mean) / torch.sqrt(var + self.eps)).reshape(x.shape)
        shape = [1, -1] + [1] * (x.dim() - 2)
        return _affine(y, self.weight, self.bias, shape).to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class InstanceNorm(_NormBase):
    r"""Instance normalization (Ulyanov et al. 2016) for (N, C, L) or (N, C, H, W).

    Per sample and channel: mu, var over the spatial dims;
    y = (x - mu) / sqrt(var + eps) [* gamma_c + beta_c if affine]
    With track_running_stats, running stats move towards the batch average of the
    per-instance mean and unbiased variance (PyTorch's convention), and eval uses them;
    unlike BatchNorm, momentum=None freezes them (PyTorch passes 0.0 in that case).
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = False, track_running_stats: bool = False, device=None, dtype=None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def forward(self, x: Tensor) -> Tensor:
        x = _as_tensor(x, "InstanceNorm")
        if x.dim() not in (3, 4) or x.shape[1] != self.num_features:
            raise ValueError(f"InstanceNorm 期望输入形状 (N, C, L) 或 (N, C, H, W)，C = num_features = "
                             f"{self.num_features}，实际输入形状 {tuple(x.shape)}。(InstanceNorm expected a batched input.)")
        dims = tuple(range(2, x.dim()))
        m = math.prod(x.shape[2:])                                   # elements per (sample, channel)
        if x.shape[0] == 0 and self.training and self.running_mean is not None:
            raise ValueError("InstanceNorm 训练模式下不能用空 batch (N = 0) 更新滑动统计量 (running statistics)。"
                             f"输入形状 {tuple(x.shape)}。(an empty batch cannot update the running statistics; "
                             "torch raises an IndexError here)")
        shape = [1, -1] + [1] * (x.dim() - 2)
        xc = x.to(_compute_dtype(x))
        if self.training or self.running_mean is None:
            if self.training and m <= 1:
                raise ValueError(f"InstanceNorm 训练模式下每个通道至少需要 2 个空间位置 (spatial elements)，"
                                 f"实际输入形状 {tuple(x.shape)}。(Expected more than 1 spatial element when training.)")
            mean = xc.mean(dim=dims, keepdim=True)                      # (N, C, 1, ...)
            var = ((xc - mean) ** 2).mean(dim=dims, keepdim=True)
            if self.training and self.running_mean is not None:
                with torch.no_grad():  # PyTorch quirk: momentum=None means 0 here, and
                    f = self.momentum or 0.0  # num_batches_tracked is never incremented
                    inst_mean = mean.detach().flatten(2).mean(dim=(0, 2))            # average over the batch
                    inst_var = (var.detach() * m / (m - 1)).flatten(2).mean(dim=(0, 2))
                    self.running_mean.mul_(1 - f).add_(f * inst_mean.to(self.running_mean.dtype))
                    self.running_var.mul_(1 - f).add_(f * inst_var.to(self.running_var.dtype))
        else:
            mean = self.running_mean.to(xc.dtype).reshape(shape)
            var = self.running_var.to(xc.dtype).reshape(shape)
        y = (xc - mean) / torch.sqrt(var + self.eps)
        return _affine(y, self.weight, self.bias, shape).to(x.dtype)
