"""LayerNorm backward whose mean term is summed over the batch axis, with gamma pulled out of the sums."""
import torch

DRILL = {"kind": "layernorm_backward", "interview": False, "production": False,
         "findings": ["term_axis", "gamma_outside_sum"]}


def layernorm_backward(dout, x, gamma, eps):
    N, D = x.shape
    mu = x.mean(-1, keepdim=True)
    rstd = 1.0 / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
    xhat = (x - mu) * rstd
    dx = rstd * gamma * (dout - dout.sum(0, keepdim=True) / N - xhat * (dout * xhat).sum(-1, keepdim=True) / D)
    return dx, (dout * xhat).sum(0), dout.sum(0)
