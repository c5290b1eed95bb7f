"""Accepts eps but uses 1e-6 written into the formula."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": False, "production": False, "findings": ["eps_ignored"]}


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight).to(x.dtype)
