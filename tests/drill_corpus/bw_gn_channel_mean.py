"""GroupNorm backward whose mean term is taken per channel (over H, W) instead of per group: named as the
term's wrong grouping."""
DRILL = {"kind": "groupnorm_backward", "interview": False, "production": False, "findings": ["term_axis"]}


def groupnorm_backward(dout, x, gamma, G, eps):
    n, c, h, w = x.shape
    xg = x.reshape(n, G, -1)
    mu = xg.mean(2, keepdim=True)
    istd = ((xg - mu).pow(2).mean(2, keepdim=True) + eps).rsqrt()
    xn = ((xg - mu) * istd).reshape(x.shape)
    dxn = dout * gamma.reshape(1, c, 1, 1)
    group_var = (dxn * xn).reshape(n, G, -1).mean(2, keepdim=True).expand(n, G, c // G * h * w).reshape(x.shape)
    rstd = istd.expand(n, G, c // G * h * w).reshape(x.shape)
    dx = rstd * (dxn - dxn.mean((2, 3), keepdim=True) - xn * group_var)
    return dx, (dout * xn).sum((0, 2, 3)), dout.sum((0, 2, 3))
