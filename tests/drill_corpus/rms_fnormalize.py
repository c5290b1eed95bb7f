"""RMSNorm through F.normalize(x, dim=-1) * sqrt(d): no eps at all (F.normalize only clamps the norm
at 1e-12) and no eps argument."""
import torch
import torch.nn.functional as F
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": False, "production": False, "findings": ["eps_missing", "signature"]}


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = dim ** 0.5
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.normalize(x, dim=-1) * self.scale * self.weight
