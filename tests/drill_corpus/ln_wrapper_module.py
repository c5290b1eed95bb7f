"""A thin wrapper around nn.LayerNorm (common in model code): right at the interview level; its
state_dict keys carry the submodule's prefix (layer_norm.weight), a production note."""
from torch import nn

DRILL = {"kind": "layernorm", "interview": True, "production": False, "findings": ["param_names"]}


class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.layer_norm = nn.LayerNorm(normalized_shape, eps=eps)

    def forward(self, x):
        return self.layer_norm(x)
