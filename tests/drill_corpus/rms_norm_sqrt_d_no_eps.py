"""x / ||x|| * sqrt(d) — the right scale, but no eps anywhere: a zero vector gives NaN."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": False, "production": False, "findings": ["eps_missing"]}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x / x.norm(dim=-1, keepdim=True) * x.shape[-1] ** 0.5 * self.weight
