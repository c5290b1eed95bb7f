"""The most-copied LayerNorm on the web (Annotated-Transformer style): parameters a_2/b_2,
torch.std (unbiased) and eps added to the std outside the root, default eps 1e-6."""
import torch
from torch import nn

DRILL = {"kind": "layernorm", "interview": False, "production": False,
         "findings": ["unbiased_variance", "eps_outside_root"]}


class LayerNorm(nn.Module):
    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.a_2 * (x - mean) / (std + self.eps) + self.b_2
