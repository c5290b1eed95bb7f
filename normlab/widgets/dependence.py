"""Which elements share statistics, read off the computation itself (the Jacobian).

Two elements are normalised with the same statistics exactly when the output at one depends on
the input at the other. ``dependence_groups(fn, shape)`` takes the Jacobian dy_i/dx_j of any
function x -> y and returns its connected components. It knows nothing about norms or axes,
so it is the independent check of the explorer's reduction table (tests/test_explorer.py) and
works on any layer a learner writes (a ConvNeXt-style permute + LayerNorm, a BatchNorm1d on the
wrong axis ...).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

__all__ = ["canonical", "dependence_groups"]


def canonical(ids: Tensor) -> Tensor:
    """Relabel group ids 0, 1, 2, ... in order of first appearance (flattened order)."""
    flat = ids.reshape(-1)
    _, first = np.unique(flat.numpy(), return_index=True)
    order = torch.as_tensor(flat.numpy()[np.sort(first)])
    lut = {int(v): i for i, v in enumerate(order)}
    return torch.tensor([lut[int(v)] for v in flat], dtype=torch.long).reshape(ids.shape)


def dependence_groups(fn: Callable[[Tensor], Tensor], shape: Sequence[int]) -> Tensor:
    """Group ids from the computation itself: i ~ j when dy_i/dx_j != 0 (connected components).

    Row i of the Jacobian is one backward pass, grad of y_i w.r.t. x, on a random float64
    input. Rows are taken only for elements not yet placed, so it costs one backward pass
    per group; union-find merges rows, so an entry that vanished by chance cannot split a group.
    """
    shape = tuple(shape)
    n = int(np.prod(shape))
    g = torch.Generator().manual_seed(1234)
    x64 = torch.randn(shape, generator=g, dtype=torch.float64) * 1.7 + 0.3
    try:
        x = x64.clone().requires_grad_(True)
        y = fn(x).reshape(-1)
    except RuntimeError:                 # a float32 layer refuses float64 input: probe it in float32
        x = x64.float().requires_grad_(True)
        y = fn(x).reshape(-1)
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    placed = torch.zeros(n, dtype=torch.bool)
    for i in range(n):
        if placed[i]:
            continue
        (row,) = torch.autograd.grad(y[i], x, retain_graph=True)        # row i of dy/dx
        row = row.reshape(-1).abs()
        linked = torch.nonzero(row > 1e-9 * row.max()).flatten().tolist() if row.max() > 0 else []
        for j in linked:
            parent[root(j)] = root(i)
        placed[linked] = True
        placed[i] = True
    return canonical(torch.tensor([root(i) for i in range(n)]).reshape(shape))
