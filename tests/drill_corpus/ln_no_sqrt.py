"""Divides by the variance instead of the standard deviation."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False, "findings": ["no_sqrt"]}


class LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / (var + self.eps) * self.weight + self.bias
