"""Uncentred x divided by torch.var(x): the variance is centred and unbiased (n − 1) by default —
two mistakes that only show together."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": False, "production": False, "findings": ["centered", "unbiased_variance"]}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x / torch.sqrt(torch.var(x, dim=-1, keepdim=True) + self.eps) * self.weight
