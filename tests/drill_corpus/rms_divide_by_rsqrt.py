"""Divides by torch.rsqrt(...): rsqrt is already 1/sqrt, so the output is multiplied by the RMS."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": False, "production": False, "findings": ["times_rms"]}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x / torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
