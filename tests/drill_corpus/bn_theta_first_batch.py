"""Issue 37 (false premises): γ/β under unusual names, running statistics that only exist after the first
batch (which seeds them) and are used in eval; training normalises with the n − 1 variance. The report must
read the tensors by what they do and name the two real bugs."""
import torch
from torch import nn

DRILL = {"kind": "batchnorm", "interview": False, "production": False,
         "findings": ["unbiased_variance", "running_stats_seeded", "stats_created_late"]}


class BatchNorm(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.scale_c = nn.Parameter(torch.ones(num_features))
        self.shift_c = nn.Parameter(torch.zeros(num_features))
        self.eps, self.momentum = eps, momentum
        self.mean_ema = None
        self.var_ema = None

    def forward(self, x):
        axes = [0] + list(range(2, x.dim()))
        view = [1, x.shape[1]] + [1] * (x.dim() - 2)
        if self.training:
            mean, var = x.mean(axes), x.var(axes)
            with torch.no_grad():
                if self.mean_ema is None:
                    self.mean_ema, self.var_ema = mean.detach().clone(), var.detach().clone()
                else:
                    self.mean_ema = self.mean_ema * (1 - self.momentum) + mean.detach() * self.momentum
                    self.var_ema = self.var_ema * (1 - self.momentum) + var.detach() * self.momentum
        else:
            mean, var = self.mean_ema, self.var_ema
        z = (x - mean.view(view)) / (var.view(view) + self.eps).sqrt()
        return z * self.scale_c.view(view) + self.shift_c.view(view)
