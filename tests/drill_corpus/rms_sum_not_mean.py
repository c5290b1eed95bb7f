"""Divides by sqrt(sum x^2 + eps): the L2 norm, not the root mean square."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": False, "production": False, "findings": ["sum_not_mean"]}


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + self.eps) * self.weight
