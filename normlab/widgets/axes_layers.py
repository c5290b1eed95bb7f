"""The norms the axes explorer knows, and the real layer behind each name.

Norms (``NORMS``) and what "channel" means in each layout:
    image (N, C, H, W): channel axis C.   text (B, S, E): channel axis E (the features),
    so BatchNorm/InstanceNorm/GroupNorm see the text as (B, E, S), as ``nn.BatchNorm1d``
    does after ``x.transpose(1, 2)``.
    layernorm_image  LayerNorm over everything but the batch axis: (C, H, W) or (S, E)
    layernorm_text   LayerNorm over the channel axis only: E per token, or C per pixel
    rmsnorm          RMSNorm over the layout's usual LayerNorm axes: (C, H, W) or E

``normalizer`` builds the layer (from ``normlab.norms`` or ``torch.nn``); ``module_line`` is the
``torch.nn`` call a learner would type for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from .. import norms

__all__ = ["NORMS", "LAYOUTS", "LABELS", "AXES", "DEFAULT_SHAPE", "check_input", "axis_sizes",
           "normalizer", "module_line"]

NORMS = ("batchnorm", "layernorm_image", "layernorm_text", "instancenorm", "groupnorm", "rmsnorm")
LAYOUTS = ("image", "text")
LABELS = {"batchnorm": "BatchNorm", "layernorm_image": "LayerNorm (图像式 image form)",
          "layernorm_text": "LayerNorm (Transformer 式 text form)", "instancenorm": "InstanceNorm",
          "groupnorm": "GroupNorm", "rmsnorm": "RMSNorm"}
AXES = {"image": ("N", "C", "H·W"), "text": ("B", "S", "E")}
DEFAULT_SHAPE = {"image": (4, 6, 3, 3), "text": (4, 6, 8)}


def check_input(norm: str, layout: str, shape: Sequence[int], num_groups: int) -> tuple[int, ...]:
    """The shape as a tuple of ints, or a Chinese ValueError saying what is wrong."""
    if layout not in LAYOUTS:
        raise ValueError(f"未知的布局 layout={layout!r}：应为 'image' (N, C, H, W) 或 'text' (B, S, E)。"
                         f"(layout must be 'image' or 'text'.)")
    if norm not in NORMS:
        raise ValueError(f"未知的归一化 norm={norm!r}：可选 {', '.join(NORMS)}。(unknown norm name)")
    shape = tuple(int(s) for s in shape)
    want = 4 if layout == "image" else 3
    if len(shape) != want or min(shape) < 1:
        names = "(N, C, H, W)" if layout == "image" else "(B, S, E)"
        raise ValueError(f"布局 {layout!r} 期望 {want} 维形状 {names}，每维至少 1，实际收到 {shape}。"
                         f"(expected a {want}-D shape {names}.)")
    channels = shape[1] if layout == "image" else shape[2]
    if norm == "groupnorm" and (num_groups < 1 or channels % num_groups):
        raise ValueError(f"GroupNorm 的组数 num_groups={num_groups} 必须整除通道数 {channels}"
                         f"（{'C' if layout == 'image' else 'E'}）。(num_groups must divide the channel count.)")
    return shape


def axis_sizes(layout: str, shape: tuple[int, ...], num_groups: int) -> dict[str, int]:
    """The size names the torch lines use: {'N': .., 'C': .., 'H': .., 'W': .., 'G': ..} or B, S, E, G."""
    names = ("N", "C", "H", "W") if layout == "image" else ("B", "S", "E")
    return dict(zip(names, shape)) | {"G": num_groups}


def normalizer(norm: str, layout: str, shape: Sequence[int], num_groups: int = 2,
               impl: str = "normlab", dtype: torch.dtype = torch.float32) -> Callable[[Tensor], Tensor]:
    """The layer ``norm`` as a function x -> y for this layout (training mode, default init).

    impl="normlab" builds it from normlab.norms, impl="torch" from torch.nn.
    """
    shape = check_input(norm, layout, shape, num_groups)
    if impl not in ("normlab", "torch"):
        raise ValueError(f"impl 应为 'normlab' 或 'torch'，实际 {impl!r}。(impl must be 'normlab' or 'torch'.)")
    lib = norms if impl == "normlab" else nn
    spatial = 2 if layout == "image" else 1
    bn = lib.BatchNorm if impl == "normlab" else {1: nn.BatchNorm1d, 2: nn.BatchNorm2d}[spatial]
    inorm = lib.InstanceNorm if impl == "normlab" else {1: nn.InstanceNorm1d, 2: nn.InstanceNorm2d}[spatial]
    ch = shape[1] if layout == "image" else shape[2]
    kw = {"dtype": dtype}
    channel_first = {  # layers that want the channel on axis 1
        "batchnorm": lambda: bn(ch, **kw),
        "instancenorm": lambda: inorm(ch, **kw),
        "groupnorm": lambda: lib.GroupNorm(num_groups, ch, **kw),
    }
    if norm in channel_first:
        m = channel_first[norm]()
        if layout == "image":
            return m
        return lambda x: m(x.transpose(1, 2)).transpose(1, 2)           # (B, S, E) -> (B, E, S) and back
    if norm == "layernorm_image" or (norm == "rmsnorm" and layout == "image"):
        cls = lib.LayerNorm if norm == "layernorm_image" else lib.RMSNorm
        return cls(list(shape[1:]), **kw)
    if norm == "rmsnorm":
        return lib.RMSNorm(shape[-1], **kw)
    m = lib.LayerNorm(ch, **kw)                                        # layernorm_text: over the channel axis
    if layout == "text":
        return m
    return lambda x: m(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)     # per pixel over C


def module_line(norm: str, layout: str) -> str:
    """The torch.nn call for this norm and layout (what the learner would write in a model)."""
    t = ".transpose(1, 2)"
    return {
        ("batchnorm", "image"): "nn.BatchNorm2d(C)(x)", ("batchnorm", "text"): f"nn.BatchNorm1d(E)(x{t}){t}",
        ("layernorm_image", "image"): "nn.LayerNorm([C, H, W])(x)", ("layernorm_image", "text"): "nn.LayerNorm([S, E])(x)",
        ("layernorm_text", "image"): "nn.LayerNorm(C)(x.permute(0, 2, 3, 1))",
        ("layernorm_text", "text"): "nn.LayerNorm(E)(x)",
        ("instancenorm", "image"): "nn.InstanceNorm2d(C)(x)", ("instancenorm", "text"): f"nn.InstanceNorm1d(E)(x{t}){t}",
        ("groupnorm", "image"): "nn.GroupNorm(G, C)(x)", ("groupnorm", "text"): f"nn.GroupNorm(G, E)(x{t}){t}",
        ("rmsnorm", "image"): "nn.RMSNorm([C, H, W])(x)", ("rmsnorm", "text"): "nn.RMSNorm(E)(x)",
    }[(norm, layout)]
