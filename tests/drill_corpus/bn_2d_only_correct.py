"""A correct (N, C)-only BatchNorm written as in a course assignment: buffers, self.training,
unbiased running variance. Passes the interview level; production says (N, C, H, W) is missing."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": True, "production": False, "findings": ["layouts"]}


class BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        if x.dim() != 2:
            raise ValueError("expected (N, C)")
        if self.training:
            mu = x.mean(0)
            var = x.var(0, unbiased=False)
            with torch.no_grad():
                n = x.shape[0]
                self.running_mean.lerp_(mu, self.momentum)
                self.running_var.lerp_(var * n / (n - 1), self.momentum)
        else:
            mu, var = self.running_mean, self.running_var
        return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias
