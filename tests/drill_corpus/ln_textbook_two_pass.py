"""A textbook two-pass LayerNorm in float32 over the last dimension (int normalized_shape),
no upcast: the right interview answer; production wants tuple shapes and a float16 upcast."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": True, "production": False,
         "findings": ["tuple_shape", "half_float16"]}


class LayerNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        mu = x.mean(dim=-1, keepdim=True)
        var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
        return self.weight * (x - mu) / torch.sqrt(var + self.eps) + self.bias
