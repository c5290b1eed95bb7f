"""The axes explorer: which elements share one mean and variance, for each norm.

A tensor is drawn as its slices side by side: (N, C, H·W) for images, (B, S, E) for text.
Pick a norm and a cell; every cell normalised with the same statistics lights up, and the
panel shows the torch line that computes those statistics and their values.

This module is the widget (``AxesExplorer``) and the one import notebooks need: it re-exports
the names of the parts it is built from,
    axes_layers   NORMS, LAYOUTS, LABELS, AXES, DEFAULT_SHAPE; the real layers (normalizer, module_line)
    axes_groups   the reduction behind each norm (stat_lines, element_stats, stat_slots), groups(),
                  describe() -> Selection (the explorer's logic as a pure function)
    dependence    dependence_groups(): the groups read off any layer's Jacobian (the independent check)
    axes_draw     BlockArtists, draw_blocks, static_grid (the book's figure)
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import torch
from torch import Tensor

from .axes_draw import BlockArtists, draw_blocks, static_grid
from .axes_groups import Selection, describe, element_stats, groups, stat_lines, stat_slots
from .axes_layers import (AXES, DEFAULT_SHAPE, LABELS, LAYOUTS, NORMS, axis_sizes, check_input,
                          module_line, normalizer)
from .dependence import dependence_groups
from .lazy import LazyWidget, error_html, fixed_figure

__all__ = ["NORMS", "LAYOUTS", "LABELS", "AXES", "DEFAULT_SHAPE", "AxesExplorer", "Selection", "groups",
           "dependence_groups", "stat_slots", "normalizer", "describe", "stat_lines", "element_stats",
           "module_line", "static_grid", "draw_blocks", "BlockArtists"]


def _html_panel(sel: Selection) -> str:
    a = AXES[sel.layout]
    stats = "".join(f"<tr><td>{'均值 mean' if k == 'mean' else '方差 var' if k == 'var' else '均方根 RMS'}</td>"
                    f"<td><b>{v:.4f}</b></td><td><code>{sel.lines[k]}</code></td></tr>" for k, v in sel.stats.items())
    sizes = ", ".join(f"{k}={v}" for k, v in axis_sizes(sel.layout, sel.shape, sel.num_groups).items()
                      if k != "G" or sel.norm == "groupnorm")
    return (f"<div style='font-size:14px;line-height:1.5'>"
            f"<b>{LABELS[sel.norm]}</b> &nbsp; <code>{sel.module}</code> &nbsp; ({sizes})<br>"
            f"选中格子 cell {sel.cell}：x = {sel.value:.3f} → y = {sel.output:.3f}<br>"
            f"这一层一共计算 <b>{sel.n_groups}</b> 组统计量 (groups)，每组 m = <b>{sel.group_size}</b> 个元素 "
            f"（{' × '.join(a)} 中蓝色的格子）<br>"
            f"<table>{stats}</table></div>")


class AxesExplorer(LazyWidget):
    """Interactive explorer: pick a layout, a norm, sizes and a cell; see who shares its statistics.

    ``AxesExplorer(layout="image")`` or ``layout="text"`` (the widget can switch); show it by
    leaving it as the last line of a cell, or ``display(explorer.widget)``. ``update(...)``
    is what every control calls: it recomputes the selection, redraws the persistent figure
    in place and returns the ``Selection`` (tools/bench_explorer.py times it).
    """

    def __init__(self, layout: str = "image", shape: Sequence[int] | None = None, norm: str = "batchnorm",
                 num_groups: int = 2, cell: Sequence[int] | None = None, seed: int = 0, dpi: int = 80) -> None:
        shape = check_input(norm, layout, shape or DEFAULT_SHAPE[layout], num_groups)
        self.layout, self.seed = layout, seed
        self.state = {"norm": norm, "shape": shape, "num_groups": num_groups,
                      "cell": tuple(cell) if cell is not None else tuple(s // 2 for s in shape)}
        self.fig = fixed_figure((9, 3.6), dpi)
        self.ax = self.fig.add_axes((0, 0, 1, 0.86))
        self.title = self.fig.text(0.5, 0.97, "", ha="center", va="top", fontsize=14)
        self._art: BlockArtists | None = None
        self._x: Tensor | None = None
        self._busy = False
        self.selection = self.update()

    def tensor(self) -> Tensor:
        """The live random tensor (drawn anew when the shape or the seed changes)."""
        return self._tensor(self.state["shape"])

    def _tensor(self, shape: tuple[int, ...]) -> Tensor:
        if self._x is None or tuple(self._x.shape) != shape:
            self._x = torch.randn(shape, generator=torch.Generator().manual_seed(self.seed)) * 2 + 1
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
        state["shape"] = check_input(state["norm"], layout, state["shape"], state["num_groups"])
        state["cell"] = tuple(min(int(i), s - 1) for i, s in zip(state["cell"], state["shape"]))
        sel = describe(self._tensor(state["shape"]), state["norm"], layout, state["cell"], state["num_groups"])
        self.layout, self.state = layout, state        # only after it worked
        if self._art is None or (self._art.layout, self._art.shape) != (layout, sel.shape):
            self._art = BlockArtists(self.ax, sel.shape, layout, fontsize=12)
            self._fit_height()
        self._art.show(sel.group_ids, sel.members, sel.cell)
        g = f" (G={sel.num_groups})" if sel.norm == "groupnorm" else ""
        self.title.set_text(f"{LABELS[sel.norm]}{g}：{sel.n_groups} 组统计量，每组 {sel.group_size} 个元素")
        self.selection = sel
        if self.shown:
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
        """The figure as PNG bytes (what the widget's image shows)."""
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png", dpi=self.fig.dpi)
        return buf.getvalue()

    # --- ipywidgets wiring (thin: all logic is in update/describe)
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
            self._panel.value = error_html(err)

    def _refresh_group_options(self) -> None:
        channels = self._sizes[1].value if self.layout == "image" else self._sizes[2].value
        options = [g for g in range(1, channels + 1) if channels % g == 0]
        current = self._groups.value if self._groups.value in options else (2 if 2 in options else 1)
        if list(self._groups.options) != options:
            self._groups.options = options
        self._groups.value = current
