"""A drop-in BatchNorm: both ranks, momentum=None (cumulative average), float32 compute."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": True, "production": True, "findings": []}


class BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("num_batches_tracked", torch.tensor(0))

    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        h = x.float()
        if self.training:
            n = h.numel() // h.shape[1]
            if n <= 1:
                raise ValueError("Expected more than 1 value per channel when training")
            var, mean = torch.var_mean(h, dim=dims, unbiased=False)
            with torch.no_grad():
                self.num_batches_tracked += 1
                f = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
                self.running_mean.mul_(1 - f).add_(f * mean)
                self.running_var.mul_(1 - f).add_(f * var * n / (n - 1))
        else:
            mean, var = self.running_mean.float(), self.running_var.float()
        y = (h - mean.reshape(shape)) * torch.rsqrt(var.reshape(shape) + self.eps)
        return (y * self.weight.float().reshape(shape) + self.bias.float().reshape(shape)).to(x.dtype)
