"""A BatchNorm2d-only module whose running statistics keep the autograd graph."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": False, "production": False, "findings": ["stats_graph"]}


class BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        assert x.dim() == 4, "BatchNorm2d expects (N, C, H, W)"
        if self.training:
            mu = x.mean((0, 2, 3))
            var = x.var((0, 2, 3), unbiased=False)
            n = x.numel() // x.shape[1]
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var * n / (n - 1)
        else:
            mu, var = self.running_mean, self.running_var
        y = (x - mu[None, :, None, None]) / torch.sqrt(var[None, :, None, None] + self.eps)
        return y * self.weight[None, :, None, None] + self.bias[None, :, None, None]
