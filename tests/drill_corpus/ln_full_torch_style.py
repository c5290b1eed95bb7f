"""A drop-in LayerNorm: tuple normalized_shape, float32 upcast, torch's default eps."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": True, "production": True, "findings": []}


class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))

    def forward(self, x):
        dims = tuple(range(-len(self.normalized_shape), 0))
        h = x.float()
        var, mean = torch.var_mean(h, dim=dims, unbiased=False, keepdim=True)
        y = (h - mean) * torch.rsqrt(var + self.eps)
        return (y * self.weight + self.bias).to(x.dtype)
