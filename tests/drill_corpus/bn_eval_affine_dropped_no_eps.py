"""Eval drops gamma and beta and leaves eps out of the root: both named, neither fix is what the code does."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": False, "production": False, "findings": ["eval_affine", "eval_eps_missing"]}


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
            m, v = x.mean(0), x.var(0, unbiased=False)
            with torch.no_grad():
                n = x.shape[0]
                self.running_mean.lerp_(m, self.momentum)
                self.running_var.lerp_(v * n / (n - 1), self.momentum)
            return self.gamma * (x - m) / torch.sqrt(v + self.eps) + self.beta
        return (x - self.running_mean) / self.running_var.sqrt()
