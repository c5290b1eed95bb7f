"""Parameter gradients averaged over the batch instead of summed: off by the factor 1/N."""
import torch

DRILL = {"kind": "batchnorm_backward", "interview": False, "production": False, "findings": ["constant_factor"]}


def batchnorm_backward(dout, x, gamma, eps):
    N = x.shape[0]
    inv = 1.0 / torch.sqrt(x.var(0, unbiased=False) + eps)
    xhat = (x - x.mean(0)) * inv
    dgamma = (dout * xhat).sum(0)
    dbeta = dout.sum(0)
    dx = (gamma * inv / N) * (N * dout - dbeta - xhat * dgamma)
    return dx, dgamma / N, dbeta / N
