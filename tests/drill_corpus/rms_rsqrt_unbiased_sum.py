"""Multiplies by the RMS (divides by rsqrt) and averages x² over n − 1: two mistakes in one line."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": False, "production": False, "findings": ["times_rms", "unbiased_variance"]}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        ms = x.pow(2).sum(-1, keepdim=True) / (x.shape[-1] - 1)
        return x / torch.rsqrt(ms + self.eps) * self.weight
