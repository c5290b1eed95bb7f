"""The gradient-flow widget: stack 2 to 128 blocks and watch activations and gradients per layer.

``curves(...)`` is the pure part: build a stack (fixed seed), push a fixed random batch through it,
backpropagate ``probes.default_loss`` and return per-layer activation std and gradient norm.
Same settings, same curves. ``GradFlow`` keeps one matplotlib figure and moves its lines in
place on every control change (tools/bench_gradflow.py times that; the goal is < 100 ms).
``static_figure()`` is the fallback for the book (no kernel there).
"""

from __future__ import annotations

import html
import io
from functools import lru_cache
from dataclasses import dataclass

import torch
import numpy as np
import PIL.Image
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation, LogLocator, NullLocator

from .. import blocks, probes
from .lazy import LazyWidget, error_html, fixed_figure

__all__ = ["DEFAULTS", "Curves", "curves", "GradFlow", "static_figure", "LABELS"]

DEFAULTS = dict(depth=24, wiring="pre", norm="layernorm", scaling="none", width=64)
LABELS = {"plain": "无残差 plain", "post": "Post-Norm", "pre": "Pre-Norm", "sandwich": "三明治 sandwich",
          "deepnorm": "DeepNorm", "layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "none": "无 none",
          "rezero": "ReZero", "layerscale": "LayerScale", "gpt2": "GPT-2 1/√(2N)"}
BATCH = 64


@dataclass(frozen=True)
class Curves:
    """Per layer i = 1..N: std of the layer's output, ||dL/dh_i||, ||dL/dW_fc2||; and the loss."""

    act_std: tuple[float, ...]
    grad_norm: tuple[float, ...]
    fc2_grad: tuple[float, ...]
    loss: float

    @property
    def grad_ratio(self) -> float:
        """||dL/dh_1|| / ||dL/dh_N||: > 1 gradients grow towards the input, < 1 they vanish."""
        return self.grad_norm[0] / self.grad_norm[-1] if self.grad_norm[-1] > 0 else float("nan")


@lru_cache(maxsize=128)   # same settings, same curves: going back to a setting is instant
def curves(depth: int = 24, wiring: str = "pre", norm: str = "layernorm", scaling: str = "none",
           width: int = 64, seed: int = 0) -> Curves:
    """Build the stack with ``seed``, one forward + backward on a fixed N(0, 1) batch of 64 rows.

    The same numbers as ``probes.probe(stack, x)`` (tests/test_gradflow.py checks them against
    autograd), with only what the widget draws: one ``autograd.grad`` for every layer output and
    every fc2 weight, and one ``tolist()`` per curve instead of a Python number per layer and
    parameter. Runs on one torch thread: the matrices are tiny, and on a machine whose cores are
    busy with something else two threads made an update 3-10x slower (tools/bench_gradflow.py)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        stack = blocks.build_stack(depth, width, wiring, norm, scaling=scaling, seed=seed)
        h = torch.randn(BATCH, width, generator=torch.Generator().manual_seed(seed + 1))
        hs = []
        for block in stack.blocks:
            h = block(h)
            hs.append(h)
        loss = probes.default_loss(stack.final_norm(h))
        fc2 = [block.mlp.sublayer.fc2.weight for block in stack.blocks]
        grads = torch.autograd.grad(loss, hs + fc2, allow_unused=True)
        zero = torch.zeros(())
        norms = torch.stack([g.norm() if g is not None else zero for g in grads]).tolist()
        act_std = torch.stack([t.detach().std() for t in hs]).tolist()
    finally:
        torch.set_num_threads(threads)
    return Curves(tuple(act_std), tuple(norms[:depth]), tuple(norms[depth:]), loss.item())


def _describe(st: dict, c: Curves) -> str:
    return (f"{LABELS[st['wiring']]} · {LABELS[st['norm']]} · 缩放 {LABELS[st['scaling']]} · "
            f"N={st['depth']} · 宽 width={st['width']}    "
            f"||∂L/∂h_1|| / ||∂L/∂h_N|| = {c.grad_ratio:.3g}")


class GradFlow(LazyWidget):
    """Per-layer activation std and gradient norm (log scale) for a stack you configure.

    The grey dashed lines are the previous setting, so a change shows as a difference. The line
    describing the setting is HTML above the image (``caption()``), not text in the figure.

    Speed (tools/bench_gradflow.py): the figure's fixed parts (titles, axis labels, legend, frame)
    are drawn once and kept as a background; an update restores it and draws only the ticks, grid
    and the four lines (blitting), about half the cost of a full draw with CJK text.
    """

    def __init__(self, dpi: int = 80, **settings) -> None:
        self.state = DEFAULTS | settings
        self.fig = fixed_figure((10, 3.3), dpi)
        self._canvas = FigureCanvasAgg(self.fig)
        self.fig.subplots_adjust(left=0.08, right=0.98, bottom=0.26, top=0.9, wspace=0.22)
        self.ax_act, self.ax_grad = self.fig.subplots(1, 2)
        for ax, title in ((self.ax_act, "激活的标准差 activation std"),
                          (self.ax_grad, "梯度范数 ||∂L/∂h_i||  (对数 log)")):
            ax.set_yscale("log")
            ax.yaxis.set_minor_locator(NullLocator())   # no minor log ticks: dozens of artists per draw
            ax.set_title(title, y=1.0, pad=6)     # a fixed y: no search for a free spot on every draw
            ax.grid(True, alpha=0.3)
            ax.tick_params(labelfontfamily="DejaVu Sans")   # digits only: no CJK font lookup per label
            box = ax.get_position()               # the x label as fixed figure text: part of the background
            self.fig.text((box.x0 + box.x1) / 2, 0.1, "层 layer i", ha="center", va="center")
        kw = dict(lw=2.2, color="C0", marker="o", ms=3)
        ghost = dict(lw=1.2, color="0.6", ls="--")
        self._prev_act, = self.ax_act.plot([], [], **ghost, label="上一个设置 previous")
        self._prev_grad, = self.ax_grad.plot([], [], **ghost)
        self._act, = self.ax_act.plot([], [], **kw, label="当前 current")
        self._grad, = self.ax_grad.plot([], [], **kw)
        self.fig.legend(handles=[self._act, self._prev_act], loc="lower center", ncol=2, fontsize=9, frameon=False)
        self._lines = (self._prev_act, self._prev_grad, self._act, self._grad)
        for artist in (*self._lines, self.ax_act.xaxis, self.ax_act.yaxis, self.ax_grad.xaxis, self.ax_grad.yaxis):
            artist.set_animated(True)             # left out of the background, drawn on every update
        self._background = None
        self.curves: Curves | None = None
        self.update()

    def caption(self) -> str:
        """The current setting and its gradient ratio, in one line (shown above the widget's image)."""
        return _describe(self.state, self.curves)

    def update(self, **changes) -> Curves:
        """Apply changes (depth, wiring, norm, scaling, width), recompute, move the lines in place."""
        state = self.state | changes
        c = curves(**state)                     # raises a Chinese ValueError on a bad combination
        if self.curves is not None:
            n_prev = len(self.curves.act_std)
            self._prev_act.set_data(range(1, n_prev + 1), self.curves.act_std)
            self._prev_grad.set_data(range(1, n_prev + 1), self.curves.grad_norm)
        self.state, self.curves = state, c
        layers = range(1, len(c.act_std) + 1)
        self._act.set_data(layers, c.act_std)
        self._grad.set_data(layers, c.grad_norm)
        self._rescale()
        if self.shown:
            self._image.value = self.png()
            self._caption.value = f"<b>{html.escape(self.caption())}</b>"
            self._status.value = ""
        return c

    def _rescale(self) -> None:
        for ax, lines in ((self.ax_act, (self._act, self._prev_act)), (self.ax_grad, (self._grad, self._prev_grad))):
            ys = [y for ln in lines for y in ln.get_ydata() if y > 0] or [1.0]   # all zero (e.g. ReZero on plain)
            xs = [x for ln in lines for x in ln.get_xdata()]
            lo, hi = min(ys), max(ys)
            ax.set_ylim(lo / 2, hi * 2)          # a factor 2 margin on the log axis
            if hi / lo < 300:                    # narrow range: label 1-2-5 ticks as plain numbers
                ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            else:                                # wide range: powers of ten, at most ~8 labels
                ax.yaxis.set_major_locator(LogLocator(base=10, numticks=8))
                ax.yaxis.set_major_formatter(LogFormatterSciNotation())
            ax.set_xlim(0.5, max(xs) + 0.5)

    def draw(self) -> None:
        """Render into the Agg buffer: the kept background, then ticks, grid, lines and frame."""
        canvas = self._canvas
        if self._background is None:            # once: everything that never changes
            canvas.draw()
            self._background = canvas.copy_from_bbox(self.fig.bbox)
        canvas.restore_region(self._background)
        renderer = canvas.get_renderer()
        for ax in (self.ax_act, self.ax_grad):
            ax.xaxis.draw(renderer)             # ticks, tick labels and grid (below the lines)
            ax.yaxis.draw(renderer)
            for line in ax.lines:
                line.draw(renderer)
            for spine in ax.spines.values():    # the frame on top, as in a full draw
                spine.draw(renderer)

    def png(self) -> bytes:
        """One blitted Agg draw (``draw``), encoded fast (savefig would draw everything, twice)."""
        self.draw()
        buf = io.BytesIO()
        PIL.Image.fromarray(np.asarray(self._canvas.buffer_rgba())).save(buf, format="png", compress_level=1)
        return buf.getvalue()

    # --- ipywidgets wiring (thin: all logic is in update/curves)
    def _build(self):
        import ipywidgets as w
        st, style = self.state, {"description_width": "80px"}
        opt = lambda names: [(LABELS[n], n) for n in names]
        controls = {
            "depth": w.IntSlider(value=st["depth"], min=2, max=128, description="层数 depth", style=style,
                                 continuous_update=False),
            "wiring": w.Dropdown(options=opt(blocks.WIRINGS), value=st["wiring"], description="连接 wiring", style=style),
            "norm": w.Dropdown(options=opt(blocks.NORMS), value=st["norm"], description="归一化 norm", style=style),
            "scaling": w.Dropdown(options=opt(blocks.SCALINGS), value=st["scaling"], description="残差缩放", style=style),
            "width": w.Dropdown(options=[16, 32, 64, 128, 256], value=st["width"], description="宽度 width", style=style),
        }
        self._image = w.Image(format="png", value=self.png())
        self._caption = w.HTML(f"<b>{html.escape(self.caption())}</b>")
        self._status = w.HTML("")

        def on_change(_=None):
            try:
                self.update(**{k: c.value for k, c in controls.items()})
            except ValueError as err:            # e.g. Post-Norm without a norm: say why, keep going
                self._status.value = error_html(err)

        for c in controls.values():
            c.observe(on_change, names="value")
        box = w.HBox([w.VBox([controls["depth"], controls["width"]]),
                      w.VBox([controls["wiring"], controls["norm"], controls["scaling"]])])
        return w.VBox([box, self._status, self._caption, self._image])


def static_figure(depth: int = 48, width: int = 64,
                  settings: tuple[tuple[str, str, str], ...] = (("plain", "none", "none"),
                                                                 ("post", "layernorm", "none"),
                                                                 ("pre", "layernorm", "none"),
                                                                 ("pre", "none", "none"),
                                                                 ("pre", "none", "rezero"),
                                                                 ("deepnorm", "layernorm", "none")),
                  seed: int = 0):
    """The book's fallback: several (wiring, norm, scaling) settings at one depth, on shared axes."""
    import matplotlib.pyplot as plt
    fig, (ax_a, ax_g) = plt.subplots(1, 2, figsize=(12, 4.2))
    for k, (wiring, norm, scaling) in enumerate(settings):
        c = curves(depth, wiring, norm, scaling, width, seed)
        label = f"{LABELS[wiring]} · {LABELS[norm]}" + ("" if scaling == "none" else f" · {LABELS[scaling]}")
        layers = range(1, depth + 1)
        style = dict(color=f"C{k}", lw=2, ls=("-", "--", "-", "-", "-.", ":")[k % 6])   # coinciding curves stay visible
        ax_a.plot(layers, c.act_std, label=label, **style)
        ax_g.plot(layers, c.grad_norm, label=label, **style)
    for ax, title in ((ax_a, "激活的标准差 activation std"), (ax_g, "梯度范数 ||∂L/∂h_i||")):
        ax.set_yscale("log")
        ax.set_xlabel("层 layer i")
        ax.set_title(f"{title}，N={depth}，宽 {width}")
    ax_a.legend(fontsize=9, loc="best")
    return fig
