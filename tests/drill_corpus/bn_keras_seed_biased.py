"""Issue 37: three slips in the running statistics at once (Keras-style momentum, seeded from the first batch,
biased running variance): each named on its own, not one generic "differs"."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": False, "production": False,
         "findings": ["momentum_reversed", "running_stats_seeded", "running_var_biased"]}


class BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        if self.training:
            mu, var = x.mean(0), ((x - x.mean(0)) ** 2).mean(0)
            with torch.no_grad():
                if self.count == 0:
                    self.running_mean.copy_(mu)
                    self.running_var.copy_(var)
                else:
                    self.running_mean.copy_(self.momentum * self.running_mean + (1 - self.momentum) * mu)
                    self.running_var.copy_(self.momentum * self.running_var + (1 - self.momentum) * var)
                self.count += 1
        else:
            mu, var = self.running_mean, self.running_var
        return self.weight * (x - mu) / torch.sqrt(var + self.eps) + self.bias
