"""(x - mean) / x.std(): unbiased *and* no eps at all (two mistakes in one line)."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False,
         "findings": ["unbiased_variance", "eps_missing"]}


class LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        return self.weight * (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True) + self.bias
