"""The 'decay' convention: running = momentum * running + (1 - momentum) * batch, with momentum=0.1
passed as torch's modules take it (and the running variance biased as well)."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": False, "production": False,
         "findings": ["momentum_reversed", "running_var_biased"]}


class BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        if self.training:
            mu, var = x.mean(dims), x.var(dims, unbiased=False)
            with torch.no_grad():
                self.running_mean.copy_(self.momentum * self.running_mean + (1 - self.momentum) * mu)
                self.running_var.copy_(self.momentum * self.running_var + (1 - self.momentum) * var)
        else:
            mu, var = self.running_mean, self.running_var
        y = (x - mu.view(shape)) / torch.sqrt(var.view(shape) + self.eps)
        return y * self.weight.view(shape) + self.bias.view(shape)
