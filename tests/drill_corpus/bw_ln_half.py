"""Issue 37: a LayerNorm backward off by exactly one half (the 2 of d(x²)/dx dropped twice): "×0.5" said."""
DRILL = {"kind": "layernorm_backward", "interview": False, "production": False, "findings": ["constant_factor"]}


def layernorm_backward(grad_out, x, weight, eps):
    c = x - x.mean(-1, keepdim=True)
    s = 1 / (c.pow(2).mean(-1, keepdim=True) + eps).sqrt()
    u = c * s
    g = grad_out * weight
    grad_x = 0.5 * s * (g - g.mean(-1, keepdim=True) - u * (g * u).mean(-1, keepdim=True))
    return grad_x, (grad_out * u).sum(0), grad_out.sum(0)
