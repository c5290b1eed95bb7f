"""Interview-notes style: the constructor takes (momentum, eps, num_features), the running
statistics use the 'decay' convention, and the batch is normalised with torch.var's unbiased default."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": False, "production": False,
         "findings": ["unbiased_variance", "momentum_reversed", "signature"]}


class BatchNorm(nn.Module):
    def __init__(self, momentum, eps, num_features):
        super().__init__()
        self.momentum, self.eps = momentum, eps
        self.gamma = nn.Parameter(torch.ones(num_features))
        self.beta = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        if self.training:
            mean, var = x.mean(0), x.var(0)
            with torch.no_grad():
                self.running_mean.copy_((1 - self.momentum) * mean + self.momentum * self.running_mean)
                self.running_var.copy_((1 - self.momentum) * var + self.momentum * self.running_var)
        else:
            mean, var = self.running_mean, self.running_var
        return self.gamma * (x - mean) / torch.sqrt(var + self.eps) + self.beta
