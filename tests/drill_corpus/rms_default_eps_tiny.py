"""Right formula with a float32 upcast, but the default eps is 1e-8 (neither torch's nor LLaMA's)."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": True, "production": False, "findings": ["default_eps", "tuple_shape"]}


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-8):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight
