"""nanoGPT-style: F.layer_norm with an optional bias and eps fixed at 1e-5; the constructor takes
(ndim, bias) and no eps. Right at the interview level; the signature is a production note."""
import torch
import torch.nn.functional as F
from torch import nn

DRILL = {"kind": "layernorm", "interview": True, "production": False, "findings": ["signature"]}


class LayerNorm(nn.Module):
    def __init__(self, ndim, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)
