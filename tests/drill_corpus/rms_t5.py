"""T5-style norm (HF): variance of the float32 input, eps stored as variance_epsilon, the gain
applied after casting back to the gain's dtype. No mean, no bias."""
import torch
from torch import nn

DRILL = {"kind": "rmsnorm", "interview": True, "production": False, "findings": ["tuple_shape"]}


class RMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            hidden_states = hidden_states.to(self.weight.dtype)
        return self.weight * hidden_states
