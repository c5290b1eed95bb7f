"""Statistics over the sequence axis (dim=1) of a (B, T, D) input: a BatchNorm-like slip."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False, "findings": ["wrong_axis"]}


class LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        mu = x.mean(1, keepdim=True)
        var = x.var(1, unbiased=False, keepdim=True)
        return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias
