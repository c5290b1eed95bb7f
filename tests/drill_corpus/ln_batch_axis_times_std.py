"""Statistics over the batch axis (BatchNorm's) and multiplied by the standard deviation."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False, "findings": ["wrong_axis", "times_rms"]}


class LayerNorm(nn.Module):
    def __init__(self, features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        mu = x.mean(0, keepdim=True)
        std = torch.sqrt(((x - mu) ** 2).mean(0, keepdim=True) + self.eps)
        return (x - mu) * std * self.weight + self.bias
