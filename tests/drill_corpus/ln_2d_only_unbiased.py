"""Written for (N, D) inputs only (unpacks x.shape) and with torch.var's unbiased default: the crash on
(B, T, D) is one finding, the variance is still named from the inputs that run."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False, "findings": ["layout", "unbiased_variance"]}


class LayerNorm(nn.Module):
    def __init__(self, features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        n, d = x.shape
        mean = x.sum(1, keepdim=True) / d
        var = x.var(1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias
