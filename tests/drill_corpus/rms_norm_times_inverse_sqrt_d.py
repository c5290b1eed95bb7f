"""x / ||x|| scaled by d ** -0.5 where d ** 0.5 is meant (x / ||x|| * sqrt(d) is x / rms(x))."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": False, "production": False, "findings": ["wrong_scale"]}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.scale = dim ** -0.5
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        norm = torch.sqrt(x.pow(2).sum(-1, keepdim=True) + self.eps)
        return x / norm * self.scale * self.weight
