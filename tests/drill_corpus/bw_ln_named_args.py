"""A LayerNorm backward with its own argument order (x, dout, gamma, beta, eps): matched by name."""
import torch

DRILL = {"kind": "layernorm_backward", "interview": True, "production": True, "findings": ["signature"]}


def layernorm_backward(x, dout, gamma, beta, eps):
    mu = x.mean(-1, keepdim=True)
    inv = torch.rsqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
    xhat = (x - mu) * inv
    dxhat = dout * gamma
    dx = inv * (dxhat - dxhat.mean(-1, keepdim=True) - xhat * (dxhat * xhat).mean(-1, keepdim=True))
    return dx, (dout * xhat).sum(0), dout.sum(0)
