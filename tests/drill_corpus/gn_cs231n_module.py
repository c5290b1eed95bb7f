"""GroupNorm written as CS231n's spatial group norm, as a module: passes both levels."""
import torch
from torch import nn

DRILL = {"kind": "groupnorm", "interview": True, "production": True, "findings": []}


class GroupNorm(nn.Module):
    def __init__(self, num_groups, num_channels, eps=1e-5):
        super().__init__()
        self.num_groups, self.eps = num_groups, eps
        self.weight = nn.Parameter(torch.ones(num_channels))
        self.bias = nn.Parameter(torch.zeros(num_channels))

    def forward(self, x):
        n, c = x.shape[:2]
        xg = x.view(n, self.num_groups, -1)
        mu = xg.mean(dim=2, keepdim=True)
        var = ((xg - mu) ** 2).mean(dim=2, keepdim=True)
        out = ((xg - mu) / torch.sqrt(var + self.eps)).view_as(x)
        shape = [1, c] + [1] * (x.dim() - 2)
        return out * self.weight.view(shape) + self.bias.view(shape)
