"""A NumPy BatchNorm backward (course-assignment style) that returns dgamma/dbeta as (1, D)."""
import numpy as np

DRILL = {"kind": "batchnorm_backward", "interview": True, "production": True, "findings": ["grad_shapes"]}


def batchnorm_backward(dout, x, gamma, eps):
    N = x.shape[0]
    mu = x.mean(axis=0, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=0, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    xhat = (x - mu) * inv
    dgamma = np.sum(dout * xhat, axis=0, keepdims=True)
    dbeta = np.sum(dout, axis=0, keepdims=True)
    dxhat = dout * gamma
    dx = inv / N * (N * dxhat - dxhat.sum(axis=0) - xhat * (dxhat * xhat).sum(axis=0))
    return dx, dgamma, dbeta
