"""Issue 37: a NumPy BatchNorm backward whose dγ uses x instead of x̂ and whose variance term is elementwise (no
mean over the batch) with the wrong sign: both named, neither as "differs from autograd"."""
import numpy as np

DRILL = {"kind": "batchnorm_backward", "interview": False, "production": False,
         "findings": ["param_from_x", "term_not_summed"]}


def batchnorm_backward(dy, x, gamma, eps):
    n = x.shape[0]
    mu = np.sum(x, axis=0) / n
    xm = x - mu
    istd = 1.0 / np.sqrt(np.sum(xm * xm, axis=0) / n + eps)
    xn = xm * istd
    dxn = dy * gamma
    dx = istd * (dxn - np.sum(dxn, axis=0) / n + xn * (dxn * xn))
    return dx, np.sum(dy * x, axis=0), np.sum(dy, axis=0)
