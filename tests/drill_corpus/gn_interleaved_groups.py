"""GroupNorm whose groups run over the wrong axis: channels c, c + G, c + 2G … share statistics."""
import torch
from torch import nn

DRILL = {"kind": "groupnorm", "interview": False, "production": False, "findings": ["groups_wrong_axis"]}


class GroupNorm(nn.Module):
    def __init__(self, num_groups, num_channels, eps=1e-5):
        super().__init__()
        self.g, self.eps = num_groups, eps
        self.weight = nn.Parameter(torch.ones(num_channels))
        self.bias = nn.Parameter(torch.zeros(num_channels))

    def forward(self, x):
        n, c, h, w = x.shape
        xg = x.view(n, c // self.g, self.g, h * w).permute(0, 2, 1, 3).reshape(n, self.g, -1)
        mu, var = xg.mean(-1, keepdim=True), xg.var(-1, unbiased=False, keepdim=True)
        y = ((xg - mu) / torch.sqrt(var + self.eps)).view(n, self.g, c // self.g, h * w).permute(0, 2, 1, 3)
        return y.reshape(n, c, h, w) * self.weight.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)
