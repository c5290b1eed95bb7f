"""Subtracts the mean (that is LayerNorm) and carries a bias RMSNorm does not have."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": False, "production": False, "findings": ["centered", "no_bias"]}


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        c = x - x.mean(-1, keepdim=True)
        return c / torch.sqrt(c.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight + self.bias
