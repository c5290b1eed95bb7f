"""Issue 37: a LayerNorm backward written for (B, T, D) input only (the parameter gradients sum dim -2 twice):
every (N, D) probe raises; the (B, T, D) layout is tried and measured there."""
DRILL = {"kind": "layernorm_backward", "interview": False, "production": False, "findings": ["returns", "layout"]}


def layernorm_backward(grad_out, x, weight, eps):
    mean = x.mean(-1, keepdim=True)
    rstd = (((x - mean) ** 2).mean(-1, keepdim=True) + eps) ** -0.5
    xhat = (x - mean) * rstd
    g = grad_out * weight
    grad_x = rstd * (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True))
    return grad_x, (grad_out * xhat).sum(-2).sum(-2), grad_out.sum(-2).sum(-2)
