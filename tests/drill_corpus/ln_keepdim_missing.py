"""mean/var without keepdim=True: (B, T) statistics broadcast against the last axis — an error on
most shapes, silently wrong on a square (D, D) input."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False, "findings": ["keepdim_missing"]}


class LayerNorm(nn.Module):
    def __init__(self, features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        mean = x.mean(-1)
        var = x.var(-1, unbiased=False)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
