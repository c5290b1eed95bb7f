"""Gemma-style: the gain is stored as zeros and applied as (1 + weight)."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": False, "production": False,
         "findings": ["one_plus_weight", "params_weight"]}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (h * (1.0 + self.weight.float())).type_as(x)
