"""The momentum widget of lesson 02: one number m in two conventions of the running-average update.

Two panels side by side, each the running mean over ``steps`` batches drawn from N(true_mean, 1):
the same m in the PyTorch convention (running <- (1 - m) * running + m * batch, m weighs the NEW
value) and in the "old-value weight" convention (running <- m * running + (1 - m) * batch: d2l-zh,
Keras/TF), with the true mean as a horizontal line and the previous setting grey dashed.

``MomentumLab`` is a ``web_host.WebWidget`` (front-end ``web/momentum.js``, SVG). The update rule is
not written here: the widget gets it as an argument, ``trace(m, convention, steps=..., true_mean=...,
seed=...) -> running_mean after each step`` and ``conventions`` {name: the rule as written}; lesson
02 passes ``normlab.lessons.batchnorm.running_trace`` and ``CONVENTIONS`` (widgets import the core
only, tests/test_architecture.py, and the formula lives in the lesson once).

The control is ``m100`` = m x 100, an int (the grid's key): m = 0.01 .. 0.99 in steps of 0.01, so the
book's precomputed grid holds all 99 states. In JupyterLab the widget sends that grid along
(``live_grid``: 99 x 2 traces, about 0.4 s of CPU once, 35 KB packed) and the front-end draws every
slider position from it at once, the kernel following (issue 36). ``png()`` is the matplotlib picture
(print, nbval).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import traitlets
from matplotlib.backends.backend_agg import FigureCanvasAgg

from . import web_host
from .figure import fixed_figure, png_bytes

__all__ = ["MomentumLab", "TITLES", "M100_RANGE", "check_m", "m100_of"]

M100_RANGE = (1, 99)               # the slider: m = 0.01 .. 0.99 in steps of 0.01 (m100 = m x 100)
CONTROL_ORDER = ("m100",)
TITLES = {"pytorch": "PyTorch 写法 (PyTorch convention)",
          "old_weight": "旧值权重写法 (old-value weight: d2l-zh, Keras)"}


def check_m(m) -> int:
    """m (a float in [0.01, 0.99], a multiple of 0.01) as m100 = round(100 m); else the Chinese ValueError."""
    if isinstance(m, bool) or not isinstance(m, (int, float, np.floating, np.integer)) or not np.isfinite(m):
        raise ValueError(f"动量 momentum m 应为 0.01 到 0.99 之间的数 (m must be a number in [0.01, 0.99])，"
                         f"实际收到 {m!r}。")
    m100 = round(float(m) * 100)
    if not M100_RANGE[0] <= m100 <= M100_RANGE[1] or abs(float(m) * 100 - m100) > 1e-6:
        raise ValueError(f"动量 momentum m 应在 0.01 到 0.99 之间、取 0.01 的整数倍 "
                         f"(m must be in [0.01, 0.99], in steps of 0.01)，实际收到 {m!r}。")
    return m100


def m100_of(controls: Mapping) -> int:
    """The control value m100 (an int 1..99; a JSON number from the browser is accepted when whole)."""
    if "m100" not in controls:
        raise ValueError("缺少控件的值 (missing control value)：m100")
    v = controls["m100"]
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not M100_RANGE[0] <= v <= M100_RANGE[1]:
        raise ValueError(f"m100 (= 动量 momentum m × 100) 应为 1 到 99 的整数 (m100 must be an int in [1, 99])，"
                         f"实际收到 {v!r}。")
    return v


# The traces computed in this process, shared by every instance (a live widget computes its whole grid,
# 99 x 2 traces, ~0.4 s of CPU; a second widget over the same trace function and settings reuses them):
# (trace function, m100, convention, steps, true_mean, seed) -> running_mean after each step.
_TRACES: dict[tuple, list[float]] = {}


class MomentumLab(web_host.WebWidget):
    """The same m in every convention of ``conventions``, one panel each (left to right).

    ``trace``: the lesson's ``running_trace`` (called as ``trace(m, convention, steps=, true_mean=,
    seed=)``); ``conventions``: {name: the update as written} (the lesson's ``CONVENTIONS``; the text
    before two spaces is shown under each panel's title); ``panels``: which of them, in order
    (default: all). ``update(m=...)`` does from Python what the slider does.
    """

    web_name = "momentum"
    live_grid = True             # the grid is every state and cheap: JupyterLab answers from it in the browser

    def __init__(self, trace: Callable, conventions: Mapping[str, str], *, m: float = 0.1,
                 panels: Sequence[str] | None = None, seed: int = 0, steps: int = 60, true_mean: float = 5.0,
                 titles: Mapping[str, str] | None = None, dpi: int = 80) -> None:
        if not callable(trace):
            raise TypeError("trace 应为函数 (a function): trace(m, convention, steps=, true_mean=, seed=)")
        if not isinstance(conventions, Mapping) or not conventions:
            raise ValueError("conventions 应为非空的 {写法: 更新式} 字典 (a non-empty mapping of conventions)")
        panels = tuple(conventions) if panels is None else tuple(panels)
        unknown = [p for p in panels if p not in conventions]
        if unknown or not panels:
            raise ValueError(f"未知的滑动平均写法 (unknown convention)：{', '.join(map(repr, unknown)) or '(none)'}；"
                             f"可用 (known)：{', '.join(conventions)}")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"步数 steps 应为正整数 (steps must be a positive integer)，实际收到 {steps!r}。")
        self.trace_fn, self.conventions, self.panels = trace, dict(conventions), panels
        self.seed, self.steps, self.true_mean, self.dpi = seed, steps, float(true_mean), dpi
        self.titles = TITLES | dict(titles or {})
        self._previous: dict | None = None
        self._shown: dict | None = None
        m100 = check_m(m)
        super().__init__(spec=self._spec(), controls={"m100": m100})
        self._shown = self.data

    # --- the numbers --------------------------------------------------------------------------------

    def series(self, m: float, convention: str) -> list[float]:
        """running_mean after each step for ``m`` in ``convention`` (the trace function's numbers)."""
        if convention not in self.conventions:
            raise ValueError(f"未知的滑动平均写法 (unknown convention)：{convention!r}；"
                             f"可用 (known)：{', '.join(self.conventions)}")
        m100 = check_m(m)
        key = (self.trace_fn, m100, convention, self.steps, self.true_mean, self.seed)
        if key not in _TRACES:
            tr = self.trace_fn(m100 / 100, convention, steps=self.steps, true_mean=self.true_mean, seed=self.seed)
            _TRACES[key] = [float(v) for v in (tr.tolist() if hasattr(tr, "tolist") else tr)]
        return _TRACES[key]

    def compute(self, controls: dict) -> dict:
        """What the front-end draws for ``controls`` = {"m100": 1..99}: each panel's trace (4 significant
        digits, as every widget's data) and the caption line."""
        m100 = m100_of(controls)
        m = m100 / 100
        panels = [{"convention": c, "trace": self.series(m, c)} for c in self.panels]
        data = web_host.plain({"m": m, "panels": panels})
        data["caption"] = self._describe(data)
        return data

    def _describe(self, data: dict) -> str:
        last = "；".join(f"{self.titles.get(p['convention'], p['convention']).split(' (')[0]} "
                        f"{p['trace'][-1]:.2f}" for p in data["panels"])
        return f"m = {data['m']:.2f}：第 {self.steps} 步 (step {self.steps}) 的 running_mean — {last}（真实均值 true mean {self.true_mean:g}）"

    def grid_controls(self) -> list[dict]:
        return [{"m100": k} for k in range(M100_RANGE[0], M100_RANGE[1] + 1)]

    def _recompute(self, controls) -> None:
        """As every widget (the grid's entry where it holds the state), after m100's own check: the grid's
        key is a string, so m100="10" would find the entry of 10."""
        try:
            m100_of(controls)
        except ValueError as err:
            self.error = str(err)
            return
        super()._recompute(controls)

    def _spec(self) -> dict:
        lo = min(0.0, self.true_mean) - 0.1 * abs(self.true_mean)
        hi = max(0.0, self.true_mean) + 0.4 * abs(self.true_mean)
        return {
            "title": "滑动统计量的 momentum (running statistics)",
            "control_order": list(CONTROL_ORDER),
            "controls": [{"name": "m100", "label": "动量 momentum m", "kind": "range", "min": M100_RANGE[0],
                          "max": M100_RANGE[1], "step": 1, "scale": 100, "digits": 2}],
            "panels": [{"convention": c, "title": self.titles.get(c, c),
                        "rule": self.conventions[c].split("  ")[0].strip()} for c in self.panels],
            "steps": self.steps,
            "true_mean": self.true_mean,
            "y_range": [round(lo, 4), round(hi, 4)],
            "xlabel": "训练步 step",
            "ylabel": "running_mean",
            "true_label": f"真实均值 true mean {self.true_mean:g}",
            "legend": {"current": "当前 current", "previous": "上一个设置 previous"},
            "grid_note": f"网格：m = 0.01 … 0.99，步长 0.01（99 个设置 settings）；种子 seed {self.seed}",
        }

    # --- from Python, and what follows a change -----------------------------------------------------

    def update(self, m: float) -> dict:
        """Set m (as the slider would); returns the new data. A bad m raises the Chinese ValueError."""
        self.controls = {"m100": check_m(m)}
        return self.data

    @property
    def m(self) -> float:
        return m100_of(self.controls) / 100

    @traitlets.observe("data")
    def _follow(self, change) -> None:
        """New data drawn: the previous one becomes the grey dashed line of ``png()``."""
        if self._shown is not None and change["new"] != self._shown:
            self._previous = self._shown
        self._shown = change["new"]

    def caption(self) -> str:
        return self.data.get("caption", "")

    def _repr_mimebundle_(self, **kwargs):
        return web_host.mimebundle(self)

    def png(self) -> bytes:
        """The picture (matplotlib, Agg): one panel per convention, the current m in blue, the previous
        setting grey dashed, the true mean as a black line."""
        spec, cur, prev = self.spec, self.data, self._previous
        n = len(spec["panels"])
        fig = fixed_figure((5 * n, 3.3), self.dpi)
        canvas = FigureCanvasAgg(fig)
        fig.subplots_adjust(left=0.07 if n > 1 else 0.12, right=0.98, bottom=0.25, top=0.84, wspace=0.12)
        axes = np.atleast_1d(fig.subplots(1, n, sharey=True))
        steps = range(1, spec["steps"] + 1)
        for i, (ax, panel) in enumerate(zip(axes, spec["panels"])):
            tr = cur["panels"][i]["trace"]
            if prev is not None:
                ax.plot(steps, prev["panels"][i]["trace"], lw=1.2, color="0.6", ls="--",
                        label=f"{spec['legend']['previous']} m = {prev['m']:.2f}")
            ax.plot(steps, tr, lw=2.2, color="C0", label=f"{spec['legend']['current']} m = {cur['m']:.2f}")
            ax.axhline(spec["true_mean"], color="k", lw=0.8)
            ax.set(ylim=spec["y_range"], xlim=(0.5, spec["steps"] + 0.5), xlabel=spec["xlabel"])
            ax.set_title(f"{panel['title']}\nm = {cur['m']:.2f}：第 {spec['steps']} 步 {tr[-1]:.2f}", fontsize=10)
            ax.text(0.98, 0.05, panel["rule"], transform=ax.transAxes, ha="right", fontsize=9, color="#444444")
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel(spec["ylabel"])
        return png_bytes(fig, canvas, legend_from=axes[0])
