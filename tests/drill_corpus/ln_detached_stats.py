"""Mean and variance detached (as if they were constants): forward right, gradients wrong."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False, "findings": ["gradients"]}


class LayerNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x):
        with torch.no_grad():
            mu = x.mean(-1, keepdim=True)
            sd = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + self.eps)
        return (x - mu) / sd * self.weight + self.bias
