"""Where a norm's statistics and parameters live, for any layout a card allows: the statistic's groups (the
feature axis for LayerNorm/RMSNorm, batch and space per channel for BatchNorm, G groups of channels with their
space for GroupNorm), the "other" grouping a slip would use instead, and the sum that gives a parameter's
gradient. The backward cards, their fit and the GroupNorm references are written once on top of this."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Geometry:
    norm: str                       # "layernorm" | "rmsnorm" | "batchnorm" | "groupnorm"
    shape: tuple[int, ...]          # the input's shape
    groups: int = 1                 # GroupNorm's G
    centered: bool | None = None    # None: the norm's own (RMSNorm does not subtract the mean)

    @property
    def center(self) -> bool:
        return self.norm != "rmsnorm" if self.centered is None else self.centered

    def swapped(self) -> Geometry:
        """The same input with the statistic on the slip's grouping: LN/RMS over the batch, BN over the
        features, GN per channel (the whole backward written for another norm)."""
        if self.norm in ("layernorm", "rmsnorm"):
            return Geometry("batchnorm", self.shape, 1, self.center)
        if self.norm == "batchnorm":
            return Geometry("layernorm", self.shape, 1, True)
        return Geometry("groupnorm", self.shape, self.features, True)

    @property
    def channel_axis(self) -> int:
        """The axis a parameter runs along (features last for LN/RMS, channels at dim 1 for BN/GN)."""
        return len(self.shape) - 1 if self.norm in ("layernorm", "rmsnorm") else 1

    @property
    def features(self) -> int:
        return self.shape[self.channel_axis]

    @property
    def sum_axes(self) -> tuple[int, ...]:
        """The axes a parameter's gradient is summed over (all but the parameter's)."""
        return tuple(a for a in range(len(self.shape)) if a != self.channel_axis)

    @property
    def other_axes(self) -> tuple[int, ...]:
        """Where a slip puts the statistic instead: LN/RMS over the batch axes, BN over the channels,
        GN per channel (over space only: instance statistics)."""
        if self.norm in ("layernorm", "rmsnorm"):
            return self.sum_axes
        if self.norm == "batchnorm":
            return (1,)
        return tuple(range(2, len(self.shape)))

    @property
    def n_s(self) -> int:
        """Elements per statistic."""
        if self.norm in ("layernorm", "rmsnorm"):
            return self.shape[-1]
        if self.norm == "batchnorm":
            return math.prod(self.shape[a] for a in self.sum_axes)
        return math.prod(self.shape[1:]) // self.groups

    @property
    def n_o(self) -> int:
        return math.prod(self.shape[a] for a in self.other_axes) if self.other_axes else 1

    def wb(self, w: Tensor) -> Tensor:
        """A (C,) parameter shaped to broadcast against x."""
        shp = [1] * len(self.shape)
        shp[self.channel_axis] = self.features
        return w.reshape(shp)

    def mean_s(self, t: Tensor) -> Tensor:
        """Each element's statistic group averaged, broadcast back to x's shape."""
        if self.norm == "groupnorm":
            n = self.shape[0]
            return t.reshape(n, self.groups, -1).mean(-1, keepdim=True).expand(n, self.groups, self.n_s).reshape(t.shape)
        axes = (len(self.shape) - 1,) if self.norm in ("layernorm", "rmsnorm") else self.sum_axes
        return t.mean(axes, keepdim=True).expand(t.shape)

    def mean_o(self, t: Tensor) -> Tensor:
        return t.mean(self.other_axes, keepdim=True).expand(t.shape) if self.other_axes else t

    def psum(self, t: Tensor) -> Tensor:
        return t.sum(self.sum_axes)

    def stats(self, x: Tensor, eps: float, var: str = "biased", eps_kind: str = "inside") -> tuple[Tensor, Tensor]:
        """(x − μ, r = 1/σ) with μ and σ² over each statistic group; ``var`` "unbiased" divides by n − 1,
        ``eps_kind`` "none" drops ε, "outside" puts it on σ."""
        xc = x - self.mean_s(x) if self.center else x
        v = self.mean_s(xc * xc)
        if var == "unbiased":
            v = v * self.n_s / (self.n_s - 1)
        if eps_kind == "outside":
            return xc, 1 / (v.sqrt() + eps)
        return xc, 1 / torch.sqrt(v + (0.0 if eps_kind == "none" else eps))

    def forward(self, x: Tensor, w: Tensor, b: Tensor | None, eps: float) -> Tensor:
        """The norm itself in float64 (autograd of this is the backward cards' truth; tests compare it with
        F.layer_norm, F.rms_norm, F.batch_norm and F.group_norm)."""
        xc, r = self.stats(x.double(), eps)
        y = xc * r * self.wb(w.double())
        return y if b is None or not self.center else y + self.wb(b.double())

    def axes_words(self) -> tuple[str, str]:
        """(where the statistic should be, where the slip put it), in the candidate's words."""
        rank = len(self.shape)
        if self.norm in ("layernorm", "rmsnorm"):
            return "特征轴 dim=-1", ("batch 轴 dim=0" if rank == 2 else f"batch/序列轴 dim={self.sum_axes}")
        if self.norm == "batchnorm":
            right = "batch 轴 dim=0" if rank == 2 else f"batch 与空间轴 dim={self.sum_axes}（每个通道）"
            return right, ("特征轴 dim=1" if rank == 2 else "通道轴 dim=1")
        return f"每组 {self.features // self.groups} 个通道及其空间位置（每个样本 G={self.groups} 组）", \
            f"每个通道自己的空间位置 dim={self.other_axes}（每通道一个统计量）"
