"""Batch statistics always: no running statistics at all, so eval uses the batch too."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": False, "production": False,
         "findings": ["no_running_stats", "eval_uses_batch_stats"]}


class BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))

    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        mu = x.mean(dims, keepdim=True)
        var = x.var(dims, unbiased=False, keepdim=True)
        return (x - mu) / torch.sqrt(var + self.eps) * self.weight.view(shape) + self.bias.view(shape)
