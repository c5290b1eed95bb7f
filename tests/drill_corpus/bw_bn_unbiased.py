"""The compact BatchNorm backward, but the variance from torch.var's unbiased default (n - 1)."""
import torch

DRILL = {"kind": "batchnorm_backward", "interview": False, "production": False, "findings": ["unbiased_variance"]}


def batchnorm_backward(dout, x, gamma, eps):
    N = x.shape[0]
    inv = 1.0 / torch.sqrt(x.var(0) + eps)
    xhat = (x - x.mean(0)) * inv
    dgamma = (dout * xhat).sum(0)
    dbeta = dout.sum(0)
    dx = (gamma * inv / N) * (N * dout - dbeta - xhat * dgamma)
    return dx, dgamma, dbeta
