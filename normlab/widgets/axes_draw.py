"""Drawing a tensor's groups: its slices side by side, the chosen cell's group in blue.

A tensor is drawn as (N, C, H·W) for images and (B, S, E) for text: one block per sample,
rows C (or S), columns H·W (or E). ``BlockArtists`` keeps the matplotlib artists of one drawing
and recolours them in place (the widget's redraw); ``draw_blocks`` draws once on an Axes;
``static_grid`` is the book's figure of every norm in both layouts.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.colors as mcolors
import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from torch import Tensor

from .axes_groups import groups
from .axes_layers import AXES, LABELS, LAYOUTS, NORMS

__all__ = ["BlockArtists", "draw_blocks", "static_grid"]

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
                num_groups: int = 2, norms: Sequence[str] = NORMS) -> Figure:
    """Each norm in ``norms`` (default: all) x both layouts: the group of one cell in blue, walls
    between groups (for print; lesson 02 shows BatchNorm only, lesson 03 all six).

    A pyplot figure, so ``plt.show()`` (or the end of a notebook cell) displays it.
    """
    import matplotlib.pyplot as plt

    cells = {"image": (1, 1, 0, 1), "text": (1, 1, 1)}
    shapes = {"image": tuple(image_shape), "text": tuple(text_shape)}
    unknown = [n for n in norms if n not in NORMS]
    if unknown or not norms:
        raise ValueError(f"norms 应取自 {NORMS}（至少一个），实际收到 {list(norms)}。(unknown norm)")
    wide = len(norms) > 2       # the overview of every norm: two norms a row (a 16:9 slide's shape, issue 36)
    if wide:                    # each norm a subfigure titled with its name; its two panels say the layout
        rows = -(-len(norms) // 2)
        fig = plt.figure(figsize=(13, 1.85 * rows + 0.5), layout="constrained")
        subs = fig.subfigures(rows, 2, squeeze=False).flat
        axes = [sub.subplots(1, 2) for sub in subs]
        for sub, norm in zip(fig.subfigs, norms):
            sub.suptitle(LABELS[norm], fontsize=15)
        for sub in fig.subfigs[len(norms):]:
            for ax in sub.axes:
                ax.set_axis_off()
    else:
        fig, axes = plt.subplots(len(norms), 2, figsize=(12, 2.5 * len(norms) + 1.2), layout="constrained", squeeze=False)
    for i, norm in enumerate(norms):
        for j, layout in enumerate(LAYOUTS):
            ids = groups(norm, shapes[layout], layout, num_groups)
            a0, a1, a2 = AXES[layout]
            kind = "图像 image" if layout == "image" else "文本 text"
            g = f"G={num_groups}, " if norm == "groupnorm" else ""
            title = (f"{kind} · {g}{int(ids.max()) + 1} 组" if wide else
                     f"{LABELS[norm]}\n{kind} ({a0}, {a1}, {a2}) · {g}{int(ids.max()) + 1} 组统计量")
            draw_blocks(axes[i][j], ids, layout, cells[layout], fontsize=13 if wide else 11, title=title)
    fig.suptitle("每种归一化：蓝色格子共用红框格子的均值和方差；黑线分开不同的组", fontsize=16 if wide else 14)
    return fig
