"""A LayerNorm backward whose dx comes out twice too large (a stray factor 2 from d(x^2))."""
import torch

DRILL = {"kind": "layernorm_backward", "interview": False, "production": False, "findings": ["constant_factor"]}


def layernorm_backward(dout, x, gamma, eps):
    mu = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
    xhat = (x - mu) * rstd
    g = dout * gamma
    dx = 2 * rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
    return dx, (dout * xhat).sum(0), dout.sum(0)
