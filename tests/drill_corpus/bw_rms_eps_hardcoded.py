"""RMSNorm backward that ignores its eps argument (1e-5 written in)."""
import torch

DRILL = {"kind": "rmsnorm_backward", "interview": False, "production": False, "findings": ["eps_ignored"]}


def rmsnorm_backward(dout, x, weight, eps):
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    xhat = x * r
    g = dout * weight
    dx = r * (g - xhat * (g * xhat).mean(-1, keepdim=True))
    return dx, (dout * xhat).sum(0)
