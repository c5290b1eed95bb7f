"""LLaMA-style RMSNorm: last dimension only (dim: int), float32 compute, rsqrt, cast back with
type_as, then the gain. The interview answer; production wants a tuple normalized_shape."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": True, "production": False, "findings": ["tuple_shape"]}


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        out = self._norm(x.float()).type_as(x)
        return out * self.weight
