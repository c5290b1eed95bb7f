"""Treats the mean and the variance as constants: dx = dout * gamma / std."""
import torch

DRILL = {"kind": "layernorm_backward", "interview": False, "production": False, "findings": ["stats_as_constants"]}


def layernorm_backward(dout, x, gamma, eps):
    mu = x.mean(-1, keepdim=True)
    std = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    return dout * gamma / std, (dout * (x - mu) / std).sum(0), dout.sum(0)
