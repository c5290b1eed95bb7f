"""GroupNorm with per-channel statistics (InstanceNorm) and the unbiased variance: both named."""
import torch
from torch import nn

DRILL = {"kind": "groupnorm", "interview": False, "production": False,
         "findings": ["per_channel_stats", "unbiased_variance"]}


class GroupNorm(nn.Module):
    def __init__(self, num_groups, num_channels, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_channels))
        self.bias = nn.Parameter(torch.zeros(num_channels))

    def forward(self, x):
        mu = x.mean(dim=(2, 3), keepdim=True)
        sd = x.std(dim=(2, 3), keepdim=True)
        return (x - mu) / torch.sqrt(sd ** 2 + self.eps) * self.weight[:, None, None] + self.bias[:, None, None]
