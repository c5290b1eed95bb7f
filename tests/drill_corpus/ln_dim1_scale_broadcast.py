"""Issue 37 (false premise): keepdim=True on every statistic, but the statistics are over dim 1 and the scale is
shaped (1, D, 1) — a broadcast error that is not a missing keepdim. The report must say what it measured."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False, "findings": ["broadcast"]}


class LayerNorm(nn.Module):
    def __init__(self, size, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.alpha = nn.Parameter(torch.ones(1, size, 1))
        self.shift = nn.Parameter(torch.zeros(1, size, 1))

    def forward(self, h):
        centre = h.mean(dim=1, keepdim=True)
        spread = h.var(dim=1, keepdim=True, unbiased=False)
        return self.alpha * (h - centre) / (spread + self.eps).sqrt() + self.shift
