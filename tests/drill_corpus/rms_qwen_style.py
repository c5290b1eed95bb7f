"""Qwen-style RMSNorm: upcast to float32, normalise, multiply by the gain, cast to the input dtype."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": True, "production": False, "findings": ["tuple_shape"]}


class RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        h = hidden_states.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return (self.weight * h.to(input_dtype)).to(input_dtype)
