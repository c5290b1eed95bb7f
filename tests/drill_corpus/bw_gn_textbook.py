"""GroupNorm backward, CS231n's spatial_groupnorm_backward in closed form: passes."""
DRILL = {"kind": "groupnorm_backward", "interview": True, "production": True, "findings": []}


def groupnorm_backward(dout, x, gamma, G, eps):
    n, c, h, w = x.shape
    xg = x.reshape(n, G, -1)
    mu = xg.mean(2, keepdims=True)
    istd = 1.0 / ((xg - mu) ** 2).mean(2, keepdims=True).add(eps).sqrt()
    xn = (xg - mu) * istd
    dxn = (dout * gamma.reshape(1, c, 1, 1)).reshape(n, G, -1)
    dx = istd * (dxn - dxn.mean(2, keepdims=True) - xn * (dxn * xn).mean(2, keepdims=True))
    xn4 = xn.reshape(n, c, h, w)
    return dx.reshape(n, c, h, w), (dout * xn4).sum((0, 2, 3)), dout.sum((0, 2, 3))
