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
    axes_draw     BlockArtists, draw_blocks, static_grid (the book's figure of every norm)

The widget is an anywidget (``web_host.WebWidget``): its picture is drawn by the browser
(``web/explorer.js``) from ``explorer_data(...)``, which Python computes from the real reduction
(groups, statistics, the layer's output). In JupyterLab the kernel computes it on each control
change; in the book and the slides the page carries it precomputed for every setting the page
offers (``grid_controls``), so the same front-end runs without a kernel. The selected cell is
handled in the browser (same group id = highlighted), so the data never depends on it.
``norms=`` narrows the norms a page offers (lesson 02: ``norms=("batchnorm",)``): the norm select
lists only those, and the static grid holds only their states.
``png()`` is the matplotlib picture of the current state (print, nbval, the book's figure checks).
"""

from __future__ import annotations

import hashlib
import io
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar
from functools import lru_cache

import numpy as np
import torch
import traitlets
from matplotlib.figure import Figure
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from torch import Tensor

from .axes_draw import BlockArtists, draw_blocks, static_grid
from .axes_groups import Selection, describe, element_stats, groups, stat_lines, stat_slots
from .axes_layers import (AXES, DEFAULT_SHAPE, LABELS, LAYOUTS, NORMS, axis_sizes, check_input,
                          module_line, normalizer)
from .dependence import dependence_groups
from . import grid_file
from .web_host import WebWidget, control_order, grid_key, plain

__all__ = ["NORMS", "LAYOUTS", "LABELS", "AXES", "DEFAULT_SHAPE", "AxesExplorer", "Selection", "groups",
           "dependence_groups", "stat_slots", "normalizer", "describe", "stat_lines", "element_stats",
           "module_line", "static_grid", "draw_blocks", "BlockArtists", "explorer_data", "SPEC",
           "offered_norms", "spec_for"]

STAT_NAMES = {"mean": "均值 (mean)", "var": "方差 (var)", "rms": "均方根 (RMS)"}
KIND_LABELS = {"image": "图像 image (N, C, H, W)", "text": "文本 text (B, S, E)"}
# The size sliders, one per axis of each layout: the live range (min, max) and the smaller range the
# static page precomputes (grid_max). They make up the ``shape`` control ("4,6,3,3").
DIMS = {
    "image": [("N", "批量 N (batch)", 2, 6, 4), ("C", "通道 C (channels)", 2, 6, 6),
              ("H", "高 H (height)", 1, 4, 3), ("W", "宽 W (width)", 1, 4, 3)],
    "text": [("B", "批量 B (batch)", 2, 6, 4), ("S", "序列长度 S (sequence)", 2, 6, 6),
             ("E", "特征 E (embedding)", 1, 8, 8)],
}
MAX_GROUPS = 8

# What the front-end needs to build its controls (constant). The grid key is control_order:
# layout | norm | shape ("4,6,3,3") | num_groups (GroupNorm's G; 0 for every other norm, which has none).
# ``controls`` also carries cell ("2,3,1,1", the selected element) and seed (the resample button), which
# are not in the key: neither changes ``data`` (the grid has seed 0; the selection is drawn in the browser).
# Controls depend on each other: a new layout starts from its default shape; a new channel count or
# norm picks a G that divides the channels; the front-end writes the grid key it shows in data-key.
SPEC = {
    "title": "轴浏览器 (axes explorer)：哪些元素共用同一组统计量",
    "control_order": ["layout", "norm", "shape", "num_groups"],
    "controls": [
        {"name": "layout", "label": "布局 (layout)", "kind": "select",
         "options": [[k, v] for k, v in KIND_LABELS.items()]},
        {"name": "norm", "label": "归一化 (norm)", "kind": "select", "options": [[n, LABELS[n]] for n in NORMS]},
        {"name": "num_groups", "label": "组数 G (num_groups, GroupNorm)", "kind": "select",
         "options": [[g, str(g)] for g in range(1, MAX_GROUPS + 1)], "only_for": "groupnorm",
         "note": "offered: the divisors of the channel count (C or E)"},
        *[{"name": name, "label": label, "kind": "range", "min": lo, "max": hi, "step": 1, "grid_max": grid_max,
           "layout": layout, "part_of": "shape", "index": i}
          for layout, dims in DIMS.items() for i, (name, label, lo, hi, grid_max) in enumerate(dims)],
    ],
    "default_shape": {k: list(v) for k, v in DEFAULT_SHAPE.items()},
    "axes": {k: list(v) for k, v in AXES.items()},
    "channel_axis": {"image": 1, "text": 2},
    "stat_names": STAT_NAMES,
    "text": {
        "cell": "选中格子 (cell)", "group": "所在组 (group)", "groups": "（共 {n} 组 groups）",
        "size": "每组元素 m (group size)", "module": "torch.nn 层 (layer)", "stats": "该组的统计量 (statistics)",
        "code": "torch 代码 (code)", "resample": "重新抽样 x (resample)",
        "keys": "点格子选择；方向键移动选中格子 (arrow keys move the selection)",
        "no_g": "只用于 GroupNorm (GroupNorm only)",
    },
}


def sample(shape: Sequence[int], seed: int = 0) -> Tensor:
    """The explorer's random input: N(1, 2²) drawn from ``seed`` (the same tensor for the same shape)."""
    return torch.randn(tuple(shape), generator=torch.Generator().manual_seed(int(seed))) * 2 + 1


def _title(norm: str, num_groups: int, n_groups: int, group_size: int) -> str:
    g = f" (G={num_groups})" if norm == "groupnorm" else ""
    return f"{LABELS[norm]}{g}：{n_groups} 组统计量，每组 {group_size} 个元素"


@lru_cache(maxsize=256)
def _data(norm: str, layout: str, shape: tuple[int, ...], num_groups: int, seed: int) -> dict:
    shape = check_input(norm, layout, shape, num_groups)
    x = sample(shape, seed)
    ids = groups(norm, shape, layout, num_groups)                   # the reduction table's slots
    flat = ids.reshape(-1)
    counts = torch.bincount(flat)
    first = torch.tensor([int(torch.nonzero(flat == g)[0]) for g in range(len(counts))])
    stats = {k: v.reshape(-1)[first] for k, v in element_stats(x, norm, layout, num_groups).items()}
    with torch.no_grad():
        y = normalizer(norm, layout, shape, num_groups)(x)        # the real layer (may refuse: ValueError)
    sizes = axis_sizes(layout, shape, num_groups)
    return plain({
        "layout": layout, "norm": norm, "shape": list(shape), "num_groups": num_groups if norm == "groupnorm" else 0,
        "blocks": [shape[0], shape[1], int(np.prod(shape[2:]))],
        "ids": flat, "n_groups": len(counts), "group_size": int(counts[0]),
        "stats": stats, "lines": stat_lines(norm, layout, num_groups), "module": module_line(norm, layout),
        "x": plain(x.reshape(-1), 3), "y": plain(y.reshape(-1), 3),     # 3 digits: the panel's x -> y
        "title": _title(norm, num_groups, len(counts), int(counts[0])),
        "sizes": ", ".join(f"{k}={v}" for k, v in sizes.items() if k != "G" or norm == "groupnorm"),
    })


def explorer_data(norm: str, layout: str, shape: Sequence[int], num_groups: int = 2, seed: int = 0) -> dict:
    """Everything the front-end draws for one setting (plain JSON; floats to 4 significant digits).

    ids          group id per element, flattened in (N, C, H·W) / (B, S, E) order (``groups``)
    stats        per group: {"mean": [...], "var": [...]} or {"rms": [...]}, by running ``stat_lines``
    x, y         the input and the real layer's output per element (training mode, γ=1, β=0)
    n_groups, group_size, lines (the torch code), module (the torch.nn call), title, sizes, blocks
    A refused setting raises ValueError with a Chinese message (e.g. G does not divide the channels).
    """
    g = int(num_groups) if norm == "groupnorm" else 2
    return _data(norm, layout, tuple(int(s) for s in shape), g, int(seed))


def grid_controls_for(norms: Sequence[str]) -> list[dict]:
    """Every norm of ``norms`` × layout × every size a static page's sliders reach (up to each axis's
    grid_max), GroupNorm with every G that divides the channels; seed 0, the middle cell."""
    out = []
    for layout in LAYOUTS:
        ranges = [range(lo, grid_max + 1) for _, _, lo, _, grid_max in DIMS[layout]]
        ch = SPEC["channel_axis"][layout]
        for shape in itertools.product(*ranges):
            for norm in norms:
                gs = _divisors(shape[ch]) if norm == "groupnorm" else [0]
                out += [{"layout": layout, "norm": norm, "shape": _shape_text(shape), "num_groups": g} for g in gs]
    return out


# The full grid (every norm, seed 0) ships with the package: 20 s of CPU that neither the book's
# executor nor a JupyterLab kernel should spend. Rewrite it after a change here: write_grid().
GRID_FILE = Path(__file__).resolve().parent / "data" / "explorer_grid.json.gz"


def grid_header() -> dict:
    """What the shipped grid must have been made for: its format, seed 0, and every key of the full grid."""
    order = control_order(spec_for(NORMS))
    keys = sorted(grid_key(c, order) for c in grid_controls_for(NORMS))
    return {"format": 1, "seed": 0, "keys": hashlib.sha1("\n".join(keys).encode()).hexdigest()}


def write_grid() -> None:
    """python -c "from normlab.widgets import explorer; explorer.write_grid()" (about 20 s)."""
    grid_file.write(GRID_FILE, grid_header(), WebWidget.static_grid(AxesExplorer()))   # computed, not read


def _shape_text(shape: Sequence[int]) -> str:
    return ",".join(str(int(s)) for s in shape)


def _parse_ints(text, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in str(text).split(","))
    except ValueError:
        raise ValueError(f"{what} 应为逗号分隔的整数，实际收到 {text!r}。({what} must be comma-separated ints.)") from None


def _divisors(n: int) -> list[int]:
    return [g for g in range(1, n + 1) if n % g == 0]


def offered_norms(norms: Sequence[str] | str) -> tuple[str, ...]:
    """``norms`` as a tuple of known norm names in the given order (a single name is a one-tuple,
    a repeated name counts once), or a Chinese ValueError: empty, or a name not in ``NORMS``."""
    names = (norms,) if isinstance(norms, str) else tuple(norms)
    if not names:
        raise ValueError(f"norms 至少要有一个归一化，可选 {', '.join(NORMS)}。(norms must not be empty.)")
    unknown = [n for n in names if n not in NORMS]
    if unknown:
        raise ValueError(f"未知的归一化 norms 中的 {', '.join(map(repr, unknown))}：可选 {', '.join(NORMS)}。"
                         f"(unknown norm name in norms)")
    return tuple(dict.fromkeys(names))


def spec_for(norms: tuple[str, ...]) -> dict:
    """``SPEC`` with the norm select narrowed to ``norms`` (the same object when all are offered);
    without GroupNorm among them the G select is left out."""
    if norms == NORMS:
        return SPEC
    controls = []
    for c in SPEC["controls"]:
        if c["name"] == "norm":
            c = c | {"options": [[n, LABELS[n]] for n in norms]}
        elif c["name"] == "num_groups" and "groupnorm" not in norms:
            continue
        controls.append(c)
    return SPEC | {"controls": controls}


class AxesExplorer(WebWidget):
    """Interactive explorer: pick a layout, a norm, sizes and a cell; see who shares its statistics.

    ``AxesExplorer(layout="image")`` or ``layout="text"`` (the widget can switch); leave it as the
    last line of a cell to show it (JupyterLab: the live browser widget; the book and the slides:
    the same front-end over a precomputed grid; always also a PNG picture). ``update(...)`` changes
    the state from Python as the controls do and returns the ``Selection``.
    ``norms`` are the norms it offers (default: all of ``NORMS``); ``norm`` (default: the first of
    them) must be one. ``AxesExplorer(norm="batchnorm", norms=("batchnorm",))`` offers BatchNorm
    alone (both layouts): a smaller static grid, and the other norms are refused like a bad setting.
    """

    web_name = "explorer"

    def __init__(self, layout: str = "image", shape: Sequence[int] | None = None, norm: str | None = None,
                 num_groups: int = 2, cell: Sequence[int] | None = None, seed: int = 0, dpi: int = 80,
                 norms: Sequence[str] | str = NORMS) -> None:
        self.norms = offered_norms(norms)
        norm = self.norms[0] if norm is None else norm
        self._check_offered(norm)
        shape = check_input(norm, layout, shape or DEFAULT_SHAPE.get(layout, ()), num_groups)
        self.seed, self.dpi = int(seed), dpi
        self.state = {"layout": layout, "norm": norm, "shape": shape, "num_groups": int(num_groups),
                      "cell": tuple(int(i) for i in cell) if cell is not None else tuple(s // 2 for s in shape)}
        self._selection: Selection | None = None
        self._fig: Figure | None = None
        self._drawn: tuple | None = None
        self.selection = describe(sample(shape, self.seed), norm, layout, self.state["cell"], num_groups)
        super().__init__(spec=spec_for(self.norms), controls=self._controls())

    def _check_offered(self, norm: str) -> None:
        """A ValueError (Chinese, with the English term) for a norm this explorer does not offer."""
        if norm in self.norms:
            return
        if norm not in NORMS:
            check_input(norm, LAYOUTS[0], DEFAULT_SHAPE[LAYOUTS[0]], 2)      # the unknown-name message
        raise ValueError(f"这个轴浏览器只提供 {', '.join(self.norms)}，不提供 norm={norm!r}。"
                         f"(norm must be one of this explorer's norms: {', '.join(self.norms)}.)")

    # --- the data source --------------------------------------------------------------------------
    def compute(self, controls: dict) -> dict:
        """``explorer_data`` for a controls dict (what the front-end sends); a norm this explorer
        does not offer is refused (ValueError)."""
        layout, norm = controls["layout"], controls["norm"]
        self._check_offered(norm)
        shape = _parse_ints(controls["shape"], "shape")
        return explorer_data(norm, layout, shape, int(controls.get("num_groups") or 2), int(controls.get("seed", 0)))

    def grid_controls(self) -> list[dict]:
        return grid_controls_for(self.norms)

    _grids: ClassVar[dict[tuple[str, ...], dict]] = {}
    grid_fixed = {"seed": 0}             # the grid's input is seed 0's; another seed goes to the kernel

    @staticmethod
    def _full_grid() -> dict | None:
        """Every norm's grid: the shipped file, read once per process (None where it is missing or stale)."""
        if NORMS not in AxesExplorer._grids:
            AxesExplorer._grids[NORMS] = grid_file.read(GRID_FILE, grid_header())
        return AxesExplorer._grids[NORMS]

    @property
    def live_grid(self) -> bool:
        """JupyterLab answers a state of the grid in the browser too, where the grid is read, not computed."""
        return self._full_grid() is not None

    def static_grid(self) -> dict[str, dict]:
        """{grid key: data} over ``grid_controls()`` (the same for every instance offering the same
        norms: seed 0; the shipped file's full grid, or computed once per set of norms)."""
        grid = AxesExplorer._grids.get(self.norms)
        if grid is None:
            full = self._full_grid()
            if full is not None:
                order = control_order(self.spec)
                grid = {k: full[k] for k in (grid_key(c, order) for c in self.grid_controls())}
            else:
                grid = super().static_grid()
            AxesExplorer._grids[self.norms] = grid
        return grid

    # --- state <-> controls ---------------------------------------------------------------------------
    def _controls(self) -> dict:
        st = self.state
        return {"layout": st["layout"], "norm": st["norm"], "shape": _shape_text(st["shape"]),
                "num_groups": st["num_groups"] if st["norm"] == "groupnorm" else 0,
                "cell": _shape_text(st["cell"]), "seed": self.seed}

    @traitlets.observe("controls")
    def _observe_controls(self, change) -> None:
        """A change from the browser (or ``set_controls``): follow it if it is a valid setting."""
        c = change["new"]
        try:
            state = {"layout": c["layout"], "norm": c["norm"], "shape": _parse_ints(c["shape"], "shape"),
                     "num_groups": int(c.get("num_groups") or self.state["num_groups"]),
                     "cell": _parse_ints(c.get("cell", ""), "cell") if c.get("cell") else None}
            seed = int(c.get("seed", self.seed))
            if state["cell"] is None or len(state["cell"]) != len(state["shape"]):
                state["cell"] = tuple(s // 2 for s in state["shape"])
            state["cell"] = tuple(min(max(i, 0), s - 1) for i, s in zip(state["cell"], state["shape"]))
            self._check_offered(state["norm"])
            check_input(state["norm"], state["layout"], state["shape"], state["num_groups"])
            explorer_data(state["norm"], state["layout"], state["shape"], state["num_groups"], seed)  # cached
        except (ValueError, KeyError, TypeError):
            return                       # compute() reports it in ``error``; the state stays
        if (state, seed) != (self.state, self.seed):
            self.state, self.seed, self._selection = state, seed, None

    # --- the Python API (notebooks, tests) ------------------------------------------------------------
    def tensor(self) -> Tensor:
        """The live random tensor (drawn anew when the shape or the seed changes)."""
        return sample(self.state["shape"], self.seed)

    @property
    def layout_name(self) -> str:
        """"image" or "text" (``layout`` itself is the ipywidgets Layout trait)."""
        return self.state["layout"]

    @property
    def selection(self) -> Selection:
        """The current setting as a ``Selection`` (groups, the chosen cell's group and statistics)."""
        if self._selection is None:
            st = self.state
            self._selection = describe(self.tensor(), st["norm"], st["layout"], st["cell"], st["num_groups"])
        return self._selection

    @selection.setter
    def selection(self, sel: Selection) -> None:
        self._selection = sel

    def update(self, **changes) -> Selection:
        """Apply changes (layout, norm, shape, num_groups, cell, seed) as the controls would; returns the
        ``Selection``. A new layout without a shape starts from that layout's default shape, middle cell
        and G=2. A refused setting raises ValueError (IndexError for a cell out of range); nothing changes."""
        seed = int(changes.pop("seed", self.seed))
        layout = changes.pop("layout", self.state["layout"])
        if layout != self.state["layout"]:
            changes.setdefault("shape", DEFAULT_SHAPE.get(layout, ()))
            changes.setdefault("cell", tuple(s // 2 for s in changes["shape"]))
            changes.setdefault("num_groups", 2)
        state = self.state | changes | {"layout": layout}
        self._check_offered(state["norm"])
        state["shape"] = check_input(state["norm"], layout, state["shape"], state["num_groups"])
        state["num_groups"] = int(state["num_groups"])
        state["cell"] = tuple(min(int(i), s - 1) for i, s in zip(state["cell"], state["shape"]))
        sel = describe(sample(state["shape"], seed), state["norm"], layout, state["cell"], state["num_groups"])
        self.state, self.seed, self._selection = state, seed, sel          # only after it worked
        self.controls = self._controls()                                   # recomputes ``data`` (and the browser)
        return sel

    def caption(self) -> str:
        """One line of text for the current setting (the text/plain fallback)."""
        sel = self.selection
        stats = ", ".join(f"{k}={v:.4f}" for k, v in sel.stats.items())
        return (f"轴浏览器 axes explorer: {_title(sel.norm, sel.num_groups, sel.n_groups, sel.group_size)}; "
                f"{sel.layout} {sel.shape}, cell {sel.cell}: {stats}")

    def png(self) -> bytes:
        """The current state as a matplotlib picture, PNG bytes (print, nbval, the book's figure checks)."""
        sel = self.selection
        if self._fig is None:
            self._fig = Figure(figsize=(9, 3.6), dpi=self.dpi)   # fixed layout: no constrained-layout pass
            self._fig.set_layout_engine(PlaceHolderLayoutEngine(adjust_compatible=True, colorbar_gridspec=False))
            self._ax = self._fig.add_axes((0, 0, 1, 0.86))
            self._title_text = self._fig.text(0.5, 0.97, "", ha="center", va="top", fontsize=14)
        if self._drawn != (sel.layout, sel.shape):
            self._art = BlockArtists(self._ax, sel.shape, sel.layout, fontsize=12)
            self._fit_height()
            self._drawn = (sel.layout, sel.shape)
        self._art.show(sel.group_ids, sel.members, sel.cell)
        self._title_text.set_text(_title(sel.norm, sel.num_groups, sel.n_groups, sel.group_size))
        buf = io.BytesIO()
        self._fig.savefig(buf, format="png", dpi=self._fig.dpi)
        return buf.getvalue()

    def _fit_height(self, max_width: float = 9.0, title: float = 0.45) -> None:
        """Size the figure to the blocks' aspect ratio (cells at most 0.5 in), without empty bands."""
        x0, x1 = self._ax.get_xlim()
        y1, y0 = self._ax.get_ylim()
        width = min(max_width, 0.5 * (x1 - x0))
        blocks = min(max(width * (y1 - y0) / (x1 - x0), 1.2), 5.5)
        self._fig.set_size_inches(max(width, 4.5), blocks + title)
        self._ax.set_position((0, 0, 1, blocks / (blocks + title)))
        self._title_text.set_y(1 - 0.08 / (blocks + title))

    @property
    def widget(self) -> AxesExplorer:
        """The widget itself (kept for ``display(explorer.widget)``)."""
        return self
