"""RMS from the L2 norm: x.norm(dim=-1) * d^-0.5, with eps added outside the root."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": False, "production": False, "findings": ["eps_outside_root"]}


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.d, self.eps = d, eps
        self.scale = nn.Parameter(torch.ones(d))

    def forward(self, x):
        rms = x.norm(2, dim=-1, keepdim=True) * self.d ** -0.5
        return self.scale * x / (rms + self.eps)
