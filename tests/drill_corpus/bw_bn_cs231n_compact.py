"""The compact BatchNorm backward (one line for dx), training mode, (N, D) input."""
import torch

DRILL = {"kind": "batchnorm_backward", "interview": True, "production": True, "findings": []}


def batchnorm_backward(dout, x, gamma, eps):
    N = x.shape[0]
    mu = x.mean(0)
    var = x.var(0, unbiased=False)
    inv = 1.0 / torch.sqrt(var + eps)
    xhat = (x - mu) * inv
    dgamma = (dout * xhat).sum(0)
    dbeta = dout.sum(0)
    dx = (gamma * inv / N) * (N * dout - dbeta - xhat * dgamma)
    return dx, dgamma, dbeta
