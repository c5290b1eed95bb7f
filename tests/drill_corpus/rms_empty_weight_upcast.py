"""Issue 37 (false premise): an RMSNorm that upcasts to float32 correctly but leaves its weight uninitialised
(torch.empty). The report must name the weight, never a missing upcast."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": False, "production": False, "findings": ["params_weight"]}


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(dim).normal_())

    def forward(self, x):
        x32 = x.to(torch.float32)
        inv = torch.rsqrt(x32.square().mean(dim=-1, keepdim=True) + self.eps)
        return self.weight * (x32 * inv).type_as(x)
