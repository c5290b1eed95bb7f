"""torch.var's default is unbiased: the most common slip in a from-scratch LayerNorm."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False, "findings": ["unbiased_variance"]}


class LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d))
        self.beta = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True)
        return self.gamma * (x - mean) / torch.sqrt(var + self.eps) + self.beta
