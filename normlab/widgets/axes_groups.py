"""Which elements share one mean and variance: the reduction behind each norm, as torch code.

``stat_lines`` gives the torch line that computes a norm's statistics (``x.mean(dim=(0, 2, 3))``
for BatchNorm on images); ``element_stats`` runs those lines as written; ``groups`` says which
elements land in the same output slot of that reduction. ``describe`` puts it together for one
chosen cell: the explorer's logic as a pure function.

The table ``_REDUCTIONS`` is typed by hand, so it is checked against something that is not:
``groups(name, impl="normlab" | "torch")`` and ``dependence_groups`` read the groups off the
Jacobian of the real layers, and tests/test_explorer.py compares all of them with finite
differences of ``torch.nn`` for every norm and layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

from .axes_layers import axis_sizes, check_input, module_line, normalizer
from .dependence import canonical, dependence_groups

__all__ = ["stat_lines", "element_stats", "stat_slots", "groups", "Selection", "describe"]

# The reduction behind each norm, as the learner would type it: (reshape or None, dims).
_REDUCTIONS = {
    "image": {
        "batchnorm": (None, (0, 2, 3)), "layernorm_image": (None, (1, 2, 3)),
        "layernorm_text": (None, (1,)), "instancenorm": (None, (2, 3)),
        "groupnorm": ("x.reshape(N, G, C // G, H, W)", (2, 3, 4)), "rmsnorm": (None, (1, 2, 3)),
    },
    "text": {
        "batchnorm": (None, (0, 1)), "layernorm_image": (None, (1, 2)),
        "layernorm_text": (None, (-1,)), "instancenorm": (None, (1,)),
        "groupnorm": ("x.reshape(B, S, G, E // G)", (1, 3)), "rmsnorm": (None, (-1,)),
    },
}


def stat_lines(norm: str, layout: str, num_groups: int = 2) -> dict[str, str]:
    """The torch code that computes the statistics, e.g. {'mean': 'x.mean(dim=(0, 2, 3))', ...}."""
    g = max(int(num_groups), 1)
    check_input(norm, layout, (2, g, 2, 2) if layout == "image" else (2, 2, g), g)  # names only
    view, dims = _REDUCTIONS[layout][norm]
    src = view or "x"
    d = str(dims[0]) if len(dims) == 1 else str(dims)
    if norm == "rmsnorm":
        return {"rms": f"{src}.pow(2).mean(dim={d}).sqrt()"}
    return {"mean": f"{src}.mean(dim={d})", "var": f"{src}.var(dim={d}, unbiased=False)"}


def _view_shape(x: Tensor, norm: str, layout: str, num_groups: int) -> tuple[int, ...]:
    """The shape the reduction runs on: x's own, or that of the GroupNorm reshape."""
    view, _ = _REDUCTIONS[layout][norm]
    scope = {"x": x, **axis_sizes(layout, tuple(x.shape), num_groups)}
    return tuple(eval(view, {}, scope).shape) if view else tuple(x.shape)  # noqa: S307 (our own fixed strings)


def _per_element(stat: Tensor, view_shape: tuple[int, ...], dims: tuple[int, ...], shape: tuple[int, ...]) -> Tensor:
    """Put a reduced statistic back on every element it belongs to (undo the reduction)."""
    for d in sorted(d % len(view_shape) for d in dims):
        stat = stat.unsqueeze(d)
    return stat.expand(view_shape).reshape(shape)


def element_stats(x: Tensor, norm: str, layout: str, num_groups: int = 2) -> dict[str, Tensor]:
    """Each element's statistics, computed by running the lines of ``stat_lines`` as written."""
    shape = check_input(norm, layout, x.shape, num_groups)
    _, dims = _REDUCTIONS[layout][norm]
    scope = {"x": x, **axis_sizes(layout, shape, num_groups)}
    view_shape = _view_shape(x, norm, layout, num_groups)
    return {k: _per_element(eval(line, {}, scope), view_shape, dims, shape)  # noqa: S307
            for k, line in stat_lines(norm, layout, num_groups).items()}


def stat_slots(norm: str, shape: Sequence[int], layout: str = "image", num_groups: int = 2) -> Tensor:
    """Group ids implied by the reduction in ``stat_lines``: elements that land in the same output slot."""
    shape = check_input(norm, layout, shape, num_groups)
    _, dims = _REDUCTIONS[layout][norm]
    view_shape = _view_shape(torch.zeros(shape), norm, layout, num_groups)
    reduced = [s for i, s in enumerate(view_shape) if i not in {d % len(view_shape) for d in dims}]
    slots = torch.arange(int(np.prod(reduced))).reshape(reduced)
    return canonical(_per_element(slots, view_shape, dims, shape))


@lru_cache(maxsize=64)
def _table_groups(norm: str, shape: tuple[int, ...], layout: str, num_groups: int) -> Tensor:
    return stat_slots(norm, shape, layout, num_groups)


@lru_cache(maxsize=64)
def _layer_groups(norm: str, shape: tuple[int, ...], layout: str, num_groups: int, impl: str) -> Tensor:
    return dependence_groups(normalizer(norm, layout, shape, num_groups, impl, dtype=torch.float64), shape)


def groups(norm: str | Callable[[Tensor], Tensor], shape: Sequence[int], layout: str = "image",
           num_groups: int = 2, impl: str | None = None) -> Tensor:
    """A group id per element: equal ids <=> normalised with the same statistics.

    ``norm`` is a name from NORMS or any function x -> y. For a name, the groups are the
    slots of the reduction in ``stat_lines`` (the panel's torch line); with impl="normlab" or
    impl="torch" they are read off the Jacobian of that real layer (normlab.norms or torch.nn),
    as they are for any function. Ids count 0, 1, 2, ... in order of first appearance, so
    every route gives the same tensor for the same grouping.
    """
    if callable(norm):
        return dependence_groups(norm, shape)
    shape = check_input(norm, layout, shape, num_groups)
    g = num_groups if norm == "groupnorm" else 2
    ids = _table_groups(norm, shape, layout, g) if impl is None else _layer_groups(norm, shape, layout, g, impl)
    return ids.clone()


@dataclass(frozen=True)
class Selection:
    """Everything the explorer shows for one choice of norm and cell."""
    norm: str
    layout: str
    shape: tuple[int, ...]
    cell: tuple[int, ...]
    num_groups: int
    group_ids: Tensor          # per element
    members: Tensor            # bool, the cells that share the chosen cell's statistics
    n_groups: int              # how many separate statistics the layer computes
    group_size: int            # m, elements per statistic
    stats: dict[str, float]    # the chosen group's mean/var (or rms)
    value: float               # x at the chosen cell
    output: float              # the layer's output y at the chosen cell (gamma=1, beta=0)
    lines: dict[str, str]      # the torch code behind ``stats``
    module: str                # the torch.nn layer that does all of this


def describe(x: Tensor, norm: str, layout: str, cell: Sequence[int], num_groups: int = 2) -> Selection:
    """The explorer's logic as a pure function: groups, the chosen group and its live statistics."""
    shape = check_input(norm, layout, x.shape, num_groups)
    cell = tuple(int(i) for i in cell)
    if len(cell) != len(shape) or any(not 0 <= i < s for i, s in zip(cell, shape)):
        raise IndexError(f"格子坐标 cell={cell} 超出形状 {shape} 的范围。(cell index out of range for shape {shape}.)")
    ids = groups(norm, shape, layout, num_groups)
    members = ids == ids[cell]
    stats = {k: float(v[cell]) for k, v in element_stats(x, norm, layout, num_groups).items()}
    with torch.no_grad():
        y = normalizer(norm, layout, shape, num_groups, dtype=x.dtype)(x)
    return Selection(norm, layout, shape, cell, num_groups, ids, members, int(ids.max()) + 1,
                     int(members.sum()), stats, float(x[cell]), float(y[cell]),
                     stat_lines(norm, layout, num_groups), module_line(norm, layout))
