"""A LayerNorm backward written for D = 8 only (a reshape with the width hard-coded) and with the
unbiased variance: the crash on one input is one finding; the variance is named from the others."""
import torch

DRILL = {"kind": "layernorm_backward", "interview": False, "production": False,
         "findings": ["returns", "unbiased_variance"]}


def layernorm_backward(dout, x, gamma, eps):
    x = x.reshape(-1, 8)
    mu = x.mean(-1, keepdim=True)
    rstd = 1.0 / torch.sqrt(x.var(-1, keepdim=True) + eps)
    xhat = (x - mu) * rstd
    dxhat = dout * gamma
    dx = rstd * (dxhat - dxhat.mean(-1, keepdim=True) - xhat * (dxhat * xhat).mean(-1, keepdim=True))
    return dx, (dout * xhat).sum(0), dout.sum(0)
