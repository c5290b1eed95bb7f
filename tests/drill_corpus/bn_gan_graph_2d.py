"""Buffers re-assigned from expressions that keep the graph (no torch.no_grad), biased running
variance, (N, C) only."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": False, "production": False,
         "findings": ["stats_graph", "running_var_biased"]}


class BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.gamma = nn.Parameter(torch.ones(num_features))
        self.beta = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        if self.training:
            m = x.mean(dim=0, keepdim=True)
            v = x.var(dim=0, unbiased=False, keepdim=True)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * m.squeeze()
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * v.squeeze()
        else:
            m, v = self.running_mean.unsqueeze(0), self.running_var.unsqueeze(0)
        return self.gamma * (x - m) / torch.sqrt(v + self.eps) + self.beta
