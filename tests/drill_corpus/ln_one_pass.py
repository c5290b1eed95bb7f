"""Variance as E[x^2] - E[x]^2 (one pass): right on paper, catastrophic cancellation in float32."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False, "findings": ["one_pass_variance"]}


class LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        m = x.mean(-1, keepdim=True)
        v = (x * x).mean(-1, keepdim=True) - m * m
        return (x - m) / torch.sqrt(v + self.eps) * self.weight + self.bias
