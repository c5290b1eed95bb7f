"""Issue 37: ε added into the stored running variance, and dropped from the eval denominator — two slips that
partly cancel; both named on their own."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": False, "production": False,
         "findings": ["running_var_eps", "eval_eps_missing"]}


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
            mu = x.mean(0)
            var = x.var(0, unbiased=False)
            with torch.no_grad():
                self.running_mean.lerp_(mu, self.momentum)
                self.running_var.lerp_(x.var(0) + self.eps, self.momentum)
            den = torch.sqrt(var + self.eps)
        else:
            mu, den = self.running_mean, torch.sqrt(self.running_var)
        return (x - mu) / den * self.weight + self.bias
