"""RMSNorm backward: one projection term (no mean)."""
import torch

DRILL = {"kind": "rmsnorm_backward", "interview": True, "production": True, "findings": []}


def rmsnorm_backward(dout, x, weight, eps):
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    xhat = x * r
    g = dout * weight
    dx = r * (g - xhat * (g * xhat).mean(-1, keepdim=True))
    return dx, (dout * xhat).sum(0)
