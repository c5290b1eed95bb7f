"""The compact LayerNorm backward with its averages divided by the batch size N instead of D."""
import torch

DRILL = {"kind": "layernorm_backward", "interview": False, "production": False, "findings": ["wrong_divisor"]}


def layernorm_backward(dout, x, gamma, eps):
    N = x.shape[0]
    mu = x.mean(-1, keepdim=True)
    rstd = 1.0 / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
    xhat = (x - mu) * rstd
    g = dout * gamma
    dx = rstd * (g - g.sum(-1, keepdim=True) / N - xhat * (g * xhat).sum(-1, keepdim=True) / N)
    return dx, (dout * xhat).sum(0), dout.sum(0)
