"""BatchNorm backward that sums the mean term over the batch instead of averaging it."""
import torch

DRILL = {"kind": "batchnorm_backward", "interview": False, "production": False, "findings": ["term_coefficient"]}


def batchnorm_backward(dout, x, gamma, eps):
    mu = x.mean(0)
    rstd = 1.0 / torch.sqrt(x.var(0, unbiased=False) + eps)
    xhat = (x - mu) * rstd
    dxhat = dout * gamma
    dx = rstd * (dxhat - dxhat.sum(0) - xhat * (dxhat * xhat).mean(0))
    return dx, (dout * xhat).sum(0), dout.sum(0)
