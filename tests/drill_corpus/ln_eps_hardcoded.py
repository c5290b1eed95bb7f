"""Takes eps and then writes 1e-5 into the formula."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False, "findings": ["eps_ignored"]}


class LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = x.var(-1, unbiased=False, keepdim=True)
        return (x - mu) / torch.sqrt(var + 1e-5) * self.weight + self.bias
