"""Issue 37: an RMSNorm backward that returns None for grad_x (it was left for later): named as None, not as a
wrong shape."""
DRILL = {"kind": "rmsnorm_backward", "interview": False, "production": False, "findings": ["grad_x_none"]}


def rmsnorm_backward(grad_out, x, weight, eps):
    inv = (x.pow(2).mean(-1, keepdim=True) + eps).rsqrt()
    grad_x = None
    return grad_x, (grad_out * x * inv).sum(0)
