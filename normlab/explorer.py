"""The axes explorer: which elements share one mean and variance, for each norm.

A tensor is drawn as its slices side by side: (N, C, H·W) for images, (B, S, E) for text.
Pick a norm and a cell; every cell normalised with the same statistics lights up.

Where do the groups come from? Not from a table. Two elements share statistics exactly
when the output at one depends on the input at the other, so ``groups()`` takes the
Jacobian dy_i/dx_j of the real layer (``normlab.norms`` or ``torch.nn``, training mode)
and returns its connected components. The torch line the panel shows (``x.mean(dim=...)``)
is the line that computes the panel's numbers, and the tests check that its reduction
gives the same groups as the Jacobian.

Norms (``NORMS``) and what "channel" means in each layout:
    image (N, C, H, W): channel axis C.   text (B, S, E): channel axis E (the features),
    so BatchNorm/InstanceNorm/GroupNorm see the text as (B, E, S), as ``nn.BatchNorm1d``
    does after ``x.transpose(1, 2)``.
    layernorm_image  LayerNorm over everything but the batch axis: (C, H, W) or (S, E)
    layernorm_text   LayerNorm over the channel axis only: E per token, or C per pixel
    rmsnorm          RMSNorm over the layout's usual LayerNorm axes: (C, H, W) or E
"""

from __future__ import annotations

import html
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import matplotlib.colors as mcolors
import numpy as np
import torch
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from matplotlib.patches import Rectangle
from torch import Tensor, nn

from . import norms

__all__ = ["NORMS", "LAYOUTS", "AxesExplorer", "Selection", "groups", "stat_slots", "normalizer",
           "describe", "stat_lines", "static_grid", "draw_blocks"]

NORMS = ("batchnorm", "layernorm_image", "layernorm_text", "instancenorm", "groupnorm", "rmsnorm")
LAYOUTS = ("image", "text")
LABELS = {"batchnorm": "BatchNorm", "layernorm_image": "LayerNorm (图像式 image form)",
          "layernorm_text": "LayerNorm (Transformer 式 text form)", "instancenorm": "InstanceNorm",
          "groupnorm": "GroupNorm", "rmsnorm": "RMSNorm"}
AXES = {"image": ("N", "C", "H·W"), "text": ("B", "S", "E")}
DEFAULT_SHAPE = {"image": (4, 6, 3, 3), "text": (4, 6, 8)}

# The reduction behind each norm, as the learner would type it: (reshape or None, dims).
# Only the panel's code line and numbers come from here; the tests check it against
# the Jacobian of the real layers, so a wrong entry fails them.
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


# ----------------------------------------------------------------- checking input
def _check(norm: str, layout: str, shape: Sequence[int], num_groups: int) -> tuple[int, ...]:
    if layout not in LAYOUTS:
        raise ValueError(f"未知的布局 layout={layout!r}：应为 'image' (N, C, H, W) 或 'text' (B, S, E)。"
                         f"(layout must be 'image' or 'text'.)")
    if norm not in NORMS:
        raise ValueError(f"未知的归一化 norm={norm!r}：可选 {', '.join(NORMS)}。(unknown norm name)")
    shape = tuple(int(s) for s in shape)
    want = 4 if layout == "image" else 3
    if len(shape) != want or min(shape) < 1:
        names = "(N, C, H, W)" if layout == "image" else "(B, S, E)"
        raise ValueError(f"布局 {layout!r} 期望 {want} 维形状 {names}，每维至少 1，实际收到 {shape}。"
                         f"(expected a {want}-D shape {names}.)")
    channels = shape[1] if layout == "image" else shape[2]
    if norm == "groupnorm" and (num_groups < 1 or channels % num_groups):
        raise ValueError(f"GroupNorm 的组数 num_groups={num_groups} 必须整除通道数 {channels}"
                         f"（{'C' if layout == 'image' else 'E'}）。(num_groups must divide the channel count.)")
    return shape


def _sizes(layout: str, shape: tuple[int, ...], num_groups: int) -> dict[str, int]:
    names = ("N", "C", "H", "W") if layout == "image" else ("B", "S", "E")
    return dict(zip(names, shape)) | {"G": num_groups}


# ----------------------------------------------------------------- the real layers
def normalizer(norm: str, layout: str, shape: Sequence[int], num_groups: int = 2,
               impl: str = "normlab", dtype: torch.dtype = torch.float32) -> Callable[[Tensor], Tensor]:
    """The layer ``norm`` as a function x -> y for this layout (training mode, default init).

    impl="normlab" builds it from normlab.norms, impl="torch" from torch.nn.
    """
    shape = _check(norm, layout, shape, num_groups)
    if impl not in ("normlab", "torch"):
        raise ValueError(f"impl 应为 'normlab' 或 'torch'，实际 {impl!r}。(impl must be 'normlab' or 'torch'.)")
    lib = norms if impl == "normlab" else nn
    spatial = 2 if layout == "image" else 1
    bn = lib.BatchNorm if impl == "normlab" else {1: nn.BatchNorm1d, 2: nn.BatchNorm2d}[spatial]
    inorm = lib.InstanceNorm if impl == "normlab" else {1: nn.InstanceNorm1d, 2: nn.InstanceNorm2d}[spatial]
    ch = shape[1] if layout == "image" else shape[2]
    kw = {"dtype": dtype}
    channel_first = {  # layers that want the channel on axis 1
        "batchnorm": lambda: bn(ch, **kw),
        "instancenorm": lambda: inorm(ch, **kw),
        "groupnorm": lambda: lib.GroupNorm(num_groups, ch, **kw),
    }
    if norm in channel_first:
        m = channel_first[norm]()
        if layout == "image":
            return m
        return lambda x: m(x.transpose(1, 2)).transpose(1, 2)           # (B, S, E) -> (B, E, S) and back
    if norm == "layernorm_image" or (norm == "rmsnorm" and layout == "image"):
        cls = lib.LayerNorm if norm == "layernorm_image" else lib.RMSNorm
        return cls(list(shape[1:]), **kw)
    if norm == "rmsnorm":
        return lib.RMSNorm(shape[-1], **kw)
    m = lib.LayerNorm(ch, **kw)                                        # layernorm_text: over the channel axis
    if layout == "text":
        return m
    return lambda x: m(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)     # per pixel over C


def _canonical(ids: Tensor) -> Tensor:
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
    return _canonical(torch.tensor([root(i) for i in range(n)]).reshape(shape))


@lru_cache(maxsize=64)
def _groups_cached(norm: str, shape: tuple[int, ...], layout: str, num_groups: int, impl: str) -> Tensor:
    fn = normalizer(norm, layout, shape, num_groups, impl, dtype=torch.float64)
    return dependence_groups(fn, shape)


def groups(norm: str | Callable[[Tensor], Tensor], shape: Sequence[int], layout: str = "image",
           num_groups: int = 2, impl: str = "normlab") -> Tensor:
    """A group id per element: equal ids <=> normalised with the same statistics.

    ``norm`` is a name from NORMS (the layer is built from normlab.norms, or torch.nn with
    impl="torch") or any function x -> y. Derived from the Jacobian of the real layer.
    """
    if callable(norm):
        return dependence_groups(norm, shape)
    shape = _check(norm, layout, shape, num_groups)
    return _groups_cached(norm, shape, layout, num_groups if norm == "groupnorm" else 2, impl).clone()


# ----------------------------------------------------------------- the torch line and its numbers
def stat_lines(norm: str, layout: str, num_groups: int = 2) -> dict[str, str]:
    """The torch code that computes the statistics, e.g. {'mean': 'x.mean(dim=(0, 2, 3))', ...}."""
    g = max(int(num_groups), 1)
    _check(norm, layout, (2, g, 2, 2) if layout == "image" else (2, 2, g), g)  # names only
    view, dims = _REDUCTIONS[layout][norm]
    src = view or "x"
    d = str(dims[0]) if len(dims) == 1 else str(dims)
    if norm == "rmsnorm":
        return {"rms": f"{src}.pow(2).mean(dim={d}).sqrt()"}
    return {"mean": f"{src}.mean(dim={d})", "var": f"{src}.var(dim={d}, unbiased=False)"}


def _per_element(stat: Tensor, view_shape: tuple[int, ...], dims: tuple[int, ...], shape: tuple[int, ...]) -> Tensor:
    """Put a reduced statistic back on every element it belongs to (undo the reduction)."""
    for d in sorted(d % len(view_shape) for d in dims):
        stat = stat.unsqueeze(d)
    return stat.expand(view_shape).reshape(shape)


def element_stats(x: Tensor, norm: str, layout: str, num_groups: int = 2) -> dict[str, Tensor]:
    """Each element's statistics, computed by running the lines of ``stat_lines`` as written."""
    shape = _check(norm, layout, x.shape, num_groups)
    view, dims = _REDUCTIONS[layout][norm]
    scope = {"x": x, **_sizes(layout, shape, num_groups)}
    view_shape = tuple(eval(view, {}, scope).shape) if view else shape  # noqa: S307 (our own fixed strings)
    return {k: _per_element(eval(line, {}, scope), view_shape, dims, shape)  # noqa: S307
            for k, line in stat_lines(norm, layout, num_groups).items()}


def stat_slots(norm: str, shape: Sequence[int], layout: str = "image", num_groups: int = 2) -> Tensor:
    """Group ids implied by the reduction in ``stat_lines``: elements that land in the same output slot."""
    shape = _check(norm, layout, shape, num_groups)
    view, dims = _REDUCTIONS[layout][norm]
    probe = torch.zeros(shape)
    view_shape = tuple(eval(view, {}, {"x": probe, **_sizes(layout, shape, num_groups)}).shape) if view else shape  # noqa: S307
    reduced = [s for i, s in enumerate(view_shape) if i not in {d % len(view_shape) for d in dims}]
    slots = torch.arange(int(np.prod(reduced))).reshape(reduced)
    return _canonical(_per_element(slots, view_shape, dims, shape))


# ----------------------------------------------------------------- one interaction, as data
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


def module_line(norm: str, layout: str) -> str:
    """The torch.nn call for this norm and layout (what the learner would write in a model)."""
    t = ".transpose(1, 2)"
    return {
        ("batchnorm", "image"): "nn.BatchNorm2d(C)(x)", ("batchnorm", "text"): f"nn.BatchNorm1d(E)(x{t}){t}",
        ("layernorm_image", "image"): "nn.LayerNorm([C, H, W])(x)", ("layernorm_image", "text"): "nn.LayerNorm([S, E])(x)",
        ("layernorm_text", "image"): "nn.LayerNorm(C)(x.permute(0, 2, 3, 1))",
        ("layernorm_text", "text"): "nn.LayerNorm(E)(x)",
        ("instancenorm", "image"): "nn.InstanceNorm2d(C)(x)", ("instancenorm", "text"): f"nn.InstanceNorm1d(E)(x{t}){t}",
        ("groupnorm", "image"): "nn.GroupNorm(G, C)(x)", ("groupnorm", "text"): f"nn.GroupNorm(G, E)(x{t}){t}",
        ("rmsnorm", "image"): "nn.RMSNorm([C, H, W])(x)", ("rmsnorm", "text"): "nn.RMSNorm(E)(x)",
    }[(norm, layout)]


def describe(x: Tensor, norm: str, layout: str, cell: Sequence[int], num_groups: int = 2) -> Selection:
    """The explorer's logic as a pure function: groups, the chosen group and its live statistics."""
    shape = _check(norm, layout, x.shape, num_groups)
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


# ----------------------------------------------------------------- drawing
BASE, HIT, EDGE, PICK = "#e4e4e4", "#2f6fbf", "#333333", "#d62728"
GAP = 1.0


def _as_blocks(shape: Sequence[int]) -> tuple[int, int, int]:
    """(N, C, H, W) -> (N, C, H·W); (B, S, E) stays."""
    return (shape[0], shape[1], int(np.prod(shape[2:])))


def _per_row(blocks: tuple[int, int, int], max_units: float = 40.0) -> int:
    """Slices per row: all in one row unless that gets too wide, then wrap onto two or more."""
    n, _, cols = blocks
    return max(1, min(n, int((max_units + GAP) // (cols + GAP))))


def _origin(k: int, blocks: tuple[int, int, int]) -> tuple[float, float]:
    """Top-left corner of slice k (slices wrap onto new rows, 2.6 units apart)."""
    _, rows, cols = blocks
    per_row = _per_row(blocks)
    return (k % per_row) * (cols + GAP), (k // per_row) * (rows + 2.6)


def _cell_xy(k: int, r: int, c: int, blocks: tuple[int, int, int]) -> tuple[float, float]:
    x0, y0 = _origin(k, blocks)
    return x0 + c, y0 + r


def _boundaries(ids3: np.ndarray) -> list[list[tuple[float, float]]]:
    """Line segments between neighbouring cells of one slice that belong to different groups."""
    n, rows, cols = ids3.shape
    segs = []
    for k in range(n):
        x0, y0 = _origin(k, ids3.shape)
        for r in range(rows):
            for c in range(cols):
                if c + 1 < cols and ids3[k, r, c] != ids3[k, r, c + 1]:
                    segs.append([(x0 + c + 1, y0 + r), (x0 + c + 1, y0 + r + 1)])
                if r + 1 < rows and ids3[k, r, c] != ids3[k, r + 1, c]:
                    segs.append([(x0 + c, y0 + r + 1), (x0 + c + 1, y0 + r + 1)])
    return segs


class BlockArtists:
    """The slices of one tensor drawn on an Axes, updated in place (colours, boundaries, marker)."""

    def __init__(self, ax, shape: Sequence[int], layout: str, fontsize: float = 10) -> None:
        self.ax, self.layout, self.shape, self.blocks = ax, layout, tuple(shape), _as_blocks(shape)
        n, rows, cols = self.blocks
        ax.clear()
        ax.set_axis_off()
        ax.set_aspect("equal")
        polys = [[(x, y), (x + 1, y), (x + 1, y + 1), (x, y + 1)]
                 for k in range(n) for r in range(rows) for c in range(cols)
                 for x, y in [_cell_xy(k, r, c, self.blocks)]]
        self.cells = PolyCollection(polys, facecolors=BASE, edgecolors="white", linewidths=0.8)
        ax.add_collection(self.cells)
        self.walls = LineCollection([], colors=EDGE, linewidths=2.2)
        ax.add_collection(self.walls)
        self.pick = Rectangle((0, 0), 1, 1, fill=False, edgecolor=PICK, linewidth=2.6, zorder=5)
        ax.add_patch(self.pick)
        a0, a1, a2 = AXES[layout]
        for k in range(n):
            x0, y0 = _origin(k, self.blocks)
            ax.add_patch(Rectangle((x0, y0), cols, rows, fill=False, edgecolor=EDGE, linewidth=1.2))
            if layout == "image" and 1 < shape[3] < cols:   # small ticks where a new image row h starts
                for h in range(1, shape[2]):
                    ax.plot([x0 + h * shape[3]] * 2, [y0 + rows, y0 + rows + 0.18], color="#555555", lw=1)
            ax.text(x0 + cols / 2, y0 - 0.3, f"{a0.lower()}={k}", ha="center", va="bottom", fontsize=fontsize)
            ax.text(x0 + cols / 2, y0 + rows + 0.3, f"{a2} →", ha="center", va="top", fontsize=fontsize * 0.85,
                    color="#555555")
            if x0 == 0:
                ax.text(-0.3, y0 + rows / 2, f"{a1} ↓", ha="right", va="center", fontsize=fontsize * 0.85,
                        color="#555555")
        per_row = _per_row(self.blocks)
        n_rows = -(-n // per_row)
        ax.set_xlim(-1.6, per_row * (cols + GAP) - GAP + 0.2)
        ax.set_ylim((n_rows - 1) * (rows + 2.6) + rows + 1.25, -1.3)

    def column(self, cell: Sequence[int]) -> int:
        """Column of a cell in its slice: e for text, h*W + w for images."""
        return int(cell[2]) if self.layout == "text" else int(cell[2]) * self.shape[3] + int(cell[3])

    def show(self, ids: Tensor, members: Tensor, cell: Sequence[int] | None) -> None:
        n, rows, cols = self.blocks
        hit = members.reshape(-1).numpy()[:, None]
        self.cells.set_facecolor(np.where(hit, mcolors.to_rgba_array(HIT), mcolors.to_rgba_array(BASE)))
        self.walls.set_segments(_boundaries(ids.reshape(n, rows, cols).numpy()))
        self.pick.set_visible(cell is not None)
        if cell is not None:
            self.pick.set_xy(_cell_xy(int(cell[0]), int(cell[1]), self.column(cell), self.blocks))


def draw_blocks(ax, ids: Tensor, layout: str, cell: Sequence[int], title: str | None = None,
                fontsize: float = 10) -> BlockArtists:
    """Draw a tensor's groups on ``ax``: the chosen cell's group in blue, group walls in black."""
    art = BlockArtists(ax, ids.shape, layout, fontsize)
    art.show(ids, ids == ids[tuple(cell)], cell)
    if title:
        ax.set_title(title, fontsize=fontsize + 1)
    return art


def static_grid(image_shape: Sequence[int] = (3, 4, 2, 2), text_shape: Sequence[int] = (3, 4, 4),
                num_groups: int = 2) -> Figure:
    """Every norm x both layouts: the group of one cell in blue, walls between groups (for the book).

    A pyplot figure, so ``plt.show()`` (or the end of a notebook cell) displays it.
    """
    import matplotlib.pyplot as plt

    cells = {"image": (1, 1, 0, 1), "text": (1, 1, 1)}
    shapes = {"image": tuple(image_shape), "text": tuple(text_shape)}
    fig, axes = plt.subplots(len(NORMS), 2, figsize=(12, 15), layout="constrained")
    for i, norm in enumerate(NORMS):
        for j, layout in enumerate(LAYOUTS):
            ids = groups(norm, shapes[layout], layout, num_groups)
            a0, a1, a2 = AXES[layout]
            kind = "图像 image" if layout == "image" else "文本 text"
            g = f"G={num_groups}, " if norm == "groupnorm" else ""
            draw_blocks(axes[i, j], ids, layout, cells[layout], fontsize=11,
                        title=f"{LABELS[norm]}\n{kind} ({a0}, {a1}, {a2}) · {g}{int(ids.max()) + 1} 组统计量")
    fig.suptitle("每种归一化：蓝色格子共用红框格子的均值和方差；黑线分开不同的组", fontsize=14)
    return fig


# ----------------------------------------------------------------- the widget
def _html_panel(sel: Selection) -> str:
    a = AXES[sel.layout]
    stats = "".join(f"<tr><td>{'均值 mean' if k == 'mean' else '方差 var' if k == 'var' else '均方根 RMS'}</td>"
                    f"<td><b>{v:.4f}</b></td><td><code>{sel.lines[k]}</code></td></tr>" for k, v in sel.stats.items())
    sizes = ", ".join(f"{k}={v}" for k, v in _sizes(sel.layout, sel.shape, sel.num_groups).items()
                      if k != "G" or sel.norm == "groupnorm")
    return (f"<div style='font-size:14px;line-height:1.5'>"
            f"<b>{LABELS[sel.norm]}</b> &nbsp; <code>{sel.module}</code> &nbsp; ({sizes})<br>"
            f"选中格子 cell {sel.cell}：x = {sel.value:.3f} → y = {sel.output:.3f}<br>"
            f"这一层一共计算 <b>{sel.n_groups}</b> 组统计量 (groups)，每组 m = <b>{sel.group_size}</b> 个元素 "
            f"（{' × '.join(a)} 中蓝色的格子）<br>"
            f"<table>{stats}</table></div>")


class AxesExplorer:
    """Interactive explorer: pick a layout, a norm, sizes and a cell; see who shares its statistics.

    ``AxesExplorer(layout="image")`` or ``layout="text"`` (the widget can switch); show it by
    leaving it as the last line of a cell, or ``display(explorer.widget)``. ``update(...)``
    is what every control calls: it recomputes the selection, redraws the persistent figure
    in place and returns the ``Selection`` (tools/bench_explorer.py times it).
    """

    def __init__(self, layout: str = "image", shape: Sequence[int] | None = None, norm: str = "batchnorm",
                 num_groups: int = 2, cell: Sequence[int] | None = None, seed: int = 0, dpi: int = 80) -> None:
        shape = _check(norm, layout, shape or DEFAULT_SHAPE[layout], num_groups)
        self.layout, self.seed = layout, seed
        self.state = {"norm": norm, "shape": shape, "num_groups": num_groups,
                      "cell": tuple(cell) if cell is not None else tuple(s // 2 for s in shape)}
        self.fig = Figure(figsize=(9, 3.6), dpi=dpi)
        # a fixed layout: the style's constrained layout would re-run (and warn) on every redraw
        self.fig.set_layout_engine(PlaceHolderLayoutEngine(adjust_compatible=True, colorbar_gridspec=False))
        self.ax = self.fig.add_axes((0, 0, 1, 0.86))
        self.title = self.fig.text(0.5, 0.97, "", ha="center", va="top", fontsize=14)
        self._art: BlockArtists | None = None
        self._x: Tensor | None = None
        self._widget = None
        self._busy = False
        self.selection = self.update()

    def tensor(self) -> Tensor:
        """The live random tensor (drawn anew when the shape or the seed changes)."""
        shape = self.state["shape"]
        return self._x if self._x is not None and tuple(self._x.shape) == shape else self._new_tensor(shape)

    def _new_tensor(self, shape: tuple[int, ...]) -> Tensor:
        g = torch.Generator().manual_seed(self.seed)
        self._x = torch.randn(shape, generator=g) * 2 + 1
        return self._x

    def update(self, **changes) -> Selection:
        """Apply changes (layout, norm, shape, num_groups, cell, seed), recompute, redraw in place.

        A new layout without a shape starts from that layout's default shape, middle cell and G=2.
        """
        if "seed" in changes:
            self.seed, self._x = int(changes.pop("seed")), None
        layout = changes.pop("layout", self.layout)
        if layout != self.layout:
            changes.setdefault("shape", DEFAULT_SHAPE.get(layout, ()))
            changes.setdefault("cell", tuple(s // 2 for s in changes["shape"]))
            changes.setdefault("num_groups", 2)
        state = self.state | changes
        state["shape"] = _check(state["norm"], layout, state["shape"], state["num_groups"])
        state["cell"] = tuple(min(int(i), s - 1) for i, s in zip(state["cell"], state["shape"]))
        x = self._x if self._x is not None and tuple(self._x.shape) == state["shape"] else self._new_tensor(state["shape"])
        sel = describe(x, state["norm"], layout, state["cell"], state["num_groups"])
        self.layout, self.state = layout, state        # only after it worked
        if self._art is None or (self._art.layout, self._art.shape) != (layout, sel.shape):
            self._art = BlockArtists(self.ax, sel.shape, layout, fontsize=12)
            self._fit_height()
        self._art.show(sel.group_ids, sel.members, sel.cell)
        g = f" (G={sel.num_groups})" if sel.norm == "groupnorm" else ""
        self.title.set_text(f"{LABELS[sel.norm]}{g}：{sel.n_groups} 组统计量，每组 {sel.group_size} 个元素")
        self.selection = sel
        if self._widget is not None:
            self._image.value = self.png()
            self._panel.value = _html_panel(sel)
        return sel

    def _fit_height(self, max_width: float = 9.0, title: float = 0.45) -> None:
        """Size the figure to the blocks' aspect ratio (cells at most 0.5 in), without empty bands."""
        x0, x1 = self.ax.get_xlim()
        y1, y0 = self.ax.get_ylim()
        width = min(max_width, 0.5 * (x1 - x0))
        blocks = min(max(width * (y1 - y0) / (x1 - x0), 1.2), 5.5)
        self.fig.set_size_inches(max(width, 4.5), blocks + title)
        self.ax.set_position((0, 0, 1, blocks / (blocks + title)))
        self.title.set_y(1 - 0.08 / (blocks + title))

    def png(self) -> bytes:
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png", dpi=self.fig.dpi)
        return buf.getvalue()

    # --- ipywidgets wiring (thin: all logic is in update/describe)
    @property
    def widget(self):
        if self._widget is None:
            self._widget = self._build()
        return self._widget

    def _ipython_display_(self) -> None:
        from IPython.display import display
        display(self.widget)

    def _build(self):
        import ipywidgets as w
        self._style = {"description_width": "70px"}
        st = self.state
        self._layout = w.ToggleButtons(options=[("图像 (N, C, H, W)", "image"), ("文本 (B, S, E)", "text")],
                                       value=self.layout, description="布局", style=self._style)
        self._norm = w.Dropdown(options=[(LABELS[n], n) for n in NORMS], value=st["norm"],
                                description="归一化", style=self._style)
        self._groups = w.Dropdown(description="组数 G", style=self._style)
        resample = w.Button(description="重新抽样 x (resample)")
        self._size_box, self._idx_box = w.VBox(), w.VBox()
        self._make_sliders()
        self._image = w.Image(format="png", value=self.png())
        self._panel = w.HTML(_html_panel(self.selection))
        self._layout.observe(self._on_layout, names="value")
        self._norm.observe(self._on_change, names="value")
        self._groups.observe(self._on_change, names="value")
        resample.on_click(lambda _: self.update(seed=self.seed + 1))
        controls = w.HBox([w.VBox([self._norm, self._groups, resample]), self._size_box, self._idx_box])
        return w.VBox([self._layout, controls, self._image, self._panel])

    def _make_sliders(self) -> None:
        """Size and cell sliders for the current layout (rebuilt when the layout changes)."""
        import ipywidgets as w
        names = ("N", "C", "H", "W") if self.layout == "image" else ("B", "S", "E")
        st, longest = self.state, 4 if self.layout == "image" else 8
        self._sizes = [w.IntSlider(value=v, min=2 if i < 2 else 1, max=6 if i < 2 else longest,
                                   description=f"大小 {n}", style=self._style, continuous_update=False)
                       for i, (n, v) in enumerate(zip(names, st["shape"]))]
        self._idx = [w.IntSlider(value=c, min=0, max=s - 1, description=f"格子 {n.lower()}", style=self._style)
                     for n, c, s in zip(names, st["cell"], st["shape"])]
        for c in [*self._sizes, *self._idx]:
            c.observe(self._on_change, names="value")
        self._size_box.children, self._idx_box.children = tuple(self._sizes), tuple(self._idx)
        self._busy, busy = True, self._busy
        try:
            self._refresh_group_options()
        finally:
            self._busy = busy
        self._groups.disabled = st["norm"] != "groupnorm"

    def _on_layout(self, change) -> None:
        self._show_errors(lambda: self.update(layout=change["new"], num_groups=2))
        self._make_sliders()

    def _on_change(self, _=None) -> None:
        if self._busy:  # our own adjustments below must not trigger a second redraw
            return
        self._busy = True
        try:
            shape = tuple(s.value for s in self._sizes)
            for sl, s in zip(self._idx, shape):
                sl.max = s - 1
            self._refresh_group_options()
            self._groups.disabled = self._norm.value != "groupnorm"
        finally:
            self._busy = False
        self._show_errors(lambda: self.update(norm=self._norm.value, shape=shape, num_groups=self._groups.value,
                                              cell=tuple(sl.value for sl in self._idx)))

    def _show_errors(self, action) -> None:
        try:
            action()
        except (ValueError, IndexError) as err:   # e.g. InstanceNorm with H = W = 1: say why, keep going
            self._panel.value = f"<div style='color:#b00020;font-size:14px'>{html.escape(str(err))}</div>"

    def _refresh_group_options(self) -> None:
        channels = self._sizes[1].value if self.layout == "image" else self._sizes[2].value
        options = [g for g in range(1, channels + 1) if channels % g == 0]
        current = self._groups.value if self._groups.value in options else (2 if 2 in options else 1)
        if list(self._groups.options) != options:
            self._groups.options = options
        self._groups.value = current
