"""Subtracts the mean inside torch.var but not from x: x / sqrt(var(x) + eps), unbiased var too."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False, "findings": ["not_centered", "unbiased_variance"]}


class LayerNorm(nn.Module):
    def __init__(self, features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        return x / torch.sqrt(x.var(-1, keepdim=True) + self.eps) * self.weight + self.bias
