"""torch's semantics written out in float64 (faster than torch's float64 CPU kernels on this machine;
tests/test_drills.py checks them against F.layer_norm, F.rms_norm and F.batch_norm)."""

from __future__ import annotations

import torch


def _ln_reference(x, shape, wv, bv, e, rms):
    """F.layer_norm / F.rms_norm in float64, written out (torch's float64 CPU kernels take ~25 ms a
    call on this machine; tests/test_drills.py checks these against torch's functions)."""
    x = x.double()
    dims = tuple(range(-len(shape), 0))
    num = x if rms else x - x.mean(dims, keepdim=True)
    y = num / torch.sqrt(num.pow(2).mean(dims, keepdim=True) + e) * wv.double()
    return y if rms else y + bv.double()


def _bshape(rank: int, C: int) -> list[int]:
    return [1, C] + [1] * (rank - 2)


def _bn_axes(rank: int) -> tuple[int, ...]:
    return (0,) + tuple(range(2, rank))


def _torch_bn(x, rm, rv, w, b, training, momentum=0.1, eps=1e-5):
    """F.batch_norm's semantics in float64, written out (torch's float64 CPU kernel takes ~0.1 s a
    call on this machine; tests/test_drills.py checks this function against F.batch_norm)."""
    x = x.double()
    axes, shp = _bn_axes(x.dim()), _bshape(x.dim(), x.shape[1])
    if training:
        mean, var = x.mean(axes), x.var(axes, unbiased=False)
        if rm is not None:
            n = x.numel() // x.shape[1]
            rm.mul_(1 - momentum).add_(momentum * mean)
            rv.mul_(1 - momentum).add_(momentum * var * n / (n - 1))
    else:
        mean, var = rm, rv
    y = (x - mean.reshape(shp)) / torch.sqrt(var.reshape(shp) + eps)
    if w is not None:
        y = y * w.double().reshape(shp)
    if b is not None:
        y = y + b.double().reshape(shp)
    return y
