"""A staged ("computational graph") LayerNorm backward as in cs231n-style assignments: every
intermediate of the forward pass gets its gradient in turn."""
import torch

DRILL = {"kind": "layernorm_backward", "interview": True, "production": True, "findings": []}


def layernorm_backward(dout, x, gamma, eps):
    D = x.shape[-1]
    mu = x.mean(-1, keepdim=True)
    xmu = x - mu
    var = (xmu ** 2).mean(-1, keepdim=True)
    sqrtvar = torch.sqrt(var + eps)
    ivar = 1.0 / sqrtvar
    xhat = xmu * ivar
    dgamma = (dout * xhat).sum(0)
    dbeta = dout.sum(0)
    dxhat = dout * gamma
    divar = (dxhat * xmu).sum(-1, keepdim=True)
    dxmu1 = dxhat * ivar
    dsqrtvar = -divar / sqrtvar ** 2
    dvar = 0.5 * dsqrtvar / sqrtvar
    dsq = dvar.expand_as(x) / D
    dxmu2 = 2 * xmu * dsq
    dx1 = dxmu1 + dxmu2
    dmu = -dx1.sum(-1, keepdim=True)
    dx = dx1 + dmu.expand_as(x) / D
    return dx, dgamma, dbeta
