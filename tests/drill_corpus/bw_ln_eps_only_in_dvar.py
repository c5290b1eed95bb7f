"""Issue 37: a staged LayerNorm backward that forgets ε in one place only (the derivative with respect to the
variance): named as ε missing in grad_x's variance term."""
DRILL = {"kind": "layernorm_backward", "interview": False, "production": False, "findings": ["eps_missing"]}


def layernorm_backward(grad_out, x, weight, eps):
    d = x.shape[-1]
    mu = x.mean(-1, keepdim=True)
    xmu = x - mu
    var = (xmu ** 2).mean(-1, keepdim=True)
    std_inv = (var + eps) ** -0.5
    dxhat = grad_out * weight
    dvar = (dxhat * xmu).sum(-1, keepdim=True) * -0.5 * var ** -1.5
    dmu = (-dxhat * std_inv).sum(-1, keepdim=True) + dvar * (-2 * xmu).mean(-1, keepdim=True)
    grad_x = dxhat * std_inv + dvar * 2 * xmu / d + dmu / d
    return grad_x, (grad_out * xmu * std_inv).sum(0), grad_out.sum(0)
