"""GroupNorm with γ and β per group (G values) instead of per channel."""
import torch
from torch import nn

DRILL = {"kind": "groupnorm", "interview": False, "production": False, "findings": ["gamma_per_group"]}


class GroupNorm(nn.Module):
    def __init__(self, num_groups, num_channels, eps=1e-5):
        super().__init__()
        self.groups, self.eps = num_groups, eps
        self.gamma = nn.Parameter(torch.ones(num_groups, 1))
        self.beta = nn.Parameter(torch.zeros(num_groups, 1))

    def forward(self, x):
        n = x.shape[0]
        xg = x.reshape(n, self.groups, -1)
        xg = (xg - xg.mean(-1, keepdim=True)) / torch.sqrt(xg.var(-1, unbiased=False, keepdim=True) + self.eps)
        return (xg * self.gamma + self.beta).reshape(x.shape)
