"""Written for (N, H, W, C) inputs (TensorFlow's layout): statistics over every axis but the last."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": False, "production": False, "findings": ["channels_last"]}


class BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        dims = (0, 1, 2)
        if self.training:
            mu, var = x.mean(dims), x.var(dims, unbiased=False)
            with torch.no_grad():
                n = x.numel() // x.shape[-1]
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mu)
                self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * n / (n - 1))
        else:
            mu, var = self.running_mean, self.running_var
        return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias
