"""Per-sample statistics (dim=1) in a BatchNorm: LayerNorm's axis by mistake."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": False, "production": False, "findings": ["wrong_axis"]}


class BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        if self.training:
            mu = x.mean(1, keepdim=True)
            var = x.var(1, unbiased=False, keepdim=True)
        else:
            mu, var = self.running_mean, self.running_var
        return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias
