"""The gradient-flow widget: stack 2 to 128 blocks and watch activations and gradients per layer.

``curves(...)`` is the pure part: build a stack (fixed seed), push a fixed random batch through it,
backpropagate ``probes.default_loss`` and return per-layer activation std and gradient norm.
Same settings, same curves.

``GradFlow`` is a ``web_host.WebWidget``: one browser front-end (``web/gradflow.js``, SVG) draws
the two curves. In JupyterLab ``compute(controls)`` runs ``curves(...)`` in the kernel on every
control change; in the book and the slides (``NORMLAB_STATIC=1``) the same front-end reads a
precomputed grid (``GRID``) that ships with the package (``data/gradflow_grid.json.gz``; regenerate
it with ``python -m normlab.widgets.gradflow --write-grid``). ``png()`` is the matplotlib picture
for print, nbval and pages without JavaScript; ``static_figure()`` the book's comparison figure.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
import numpy as np
import traitlets
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.ticker import FuncFormatter, LogFormatterSciNotation, LogLocator, NullLocator

from .. import blocks, probes
from ..console import console_safe
from . import web_host
from .figure import fixed_figure, png_bytes

__all__ = ["DEFAULTS", "Curves", "curves", "GradFlow", "static_figure", "LABELS", "CONTROL_ORDER", "GRID",
           "WIDTHS", "curve_data", "grid", "compute_grid", "grid_controls", "spec", "GRID_FILE"]

DEFAULTS = dict(depth=24, wiring="pre", norm="layernorm", scaling="none", width=64)
LABELS = {"plain": "无残差 plain", "post": "Post-Norm", "pre": "Pre-Norm", "sandwich": "三明治 sandwich",
          "deepnorm": "DeepNorm", "layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "none": "无 none",
          "rezero": "ReZero", "layerscale": "LayerScale", "gpt2": "GPT-2 1/√(2N)"}
CONTROL_ORDER = ("depth", "wiring", "norm", "scaling", "width")   # the grid's key: "24|pre|layernorm|none|64"
DEPTH_RANGE = (2, 128)
WIDTHS = (16, 32, 64, 128, 256)                                   # the live widget's width choices
# The precomputed grid of the book and the slides: every wiring, norm and scaling at these depths and
# widths (refused combinations, e.g. Post-Norm without a norm, are stored as their error message).
GRID = dict(depth=(2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128), wiring=blocks.WIRINGS, norm=blocks.NORMS,
            scaling=blocks.SCALINGS, width=WIDTHS)
GRID_SEED = 0
GRID_FILE = Path(__file__).resolve().parent / "data" / "gradflow_grid.json.gz"

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




def _describe(st: dict, ratio: float, labels: dict | None = None, hidden: tuple[str, ...] = ()) -> str:
    """The setting and its gradient ratio in one line; controls in ``hidden`` (fixed by a lesson
    that has not taught them yet) are left out."""
    names = LABELS | (labels or {})
    parts = [names[st["wiring"]]] + [names[st["norm"]]] * ("norm" not in hidden)
    parts += [f"缩放 {names[st['scaling']]}"] * ("scaling" not in hidden)
    return (" · ".join(parts) + f" · N={st['depth']} · 宽 width={st['width']}    "
            f"||∂L/∂h_1|| / ||∂L/∂h_N|| = {ratio:.3g}")


# --- the data the front-end draws ------------------------------------------------------------------

def _settings(controls: dict) -> dict:
    """The five control values of ``controls`` (ints stay ints: they form the grid's key)."""
    missing = [n for n in CONTROL_ORDER if n not in controls]
    if missing:
        raise ValueError(f"缺少控件的值 (missing control values)：{', '.join(missing)}")
    st = {n: controls[n] for n in CONTROL_ORDER}
    for n in ("depth", "width"):
        v = st[n]
        if isinstance(v, float) and v.is_integer():   # a JSON number from the browser
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{n} 应为正整数 ({n} must be a positive integer)，实际收到 {v!r}。")
        st[n] = v
    return st


def curve_data(controls: dict, seed: int = 0) -> dict:
    """What the front-end draws for one control state: ``act`` and ``grad`` per layer (4 significant
    digits) and the ``caption`` line. A refused combination raises the Chinese ValueError."""
    st = _settings(controls)
    c = curves(**st, seed=seed)
    return web_host.plain({"act": c.act_std, "grad": c.grad_norm, "caption": _describe(st, c.grad_ratio)})


def grid_controls() -> list[dict]:
    """Every control state of the precomputed grid (GRID), refused combinations included."""
    return [dict(zip(CONTROL_ORDER, values)) for values in itertools.product(*(GRID[n] for n in CONTROL_ORDER))]


def compute_grid(seed: int = GRID_SEED, progress: bool = False) -> dict[str, dict]:
    """{key: curve_data} over ``grid_controls()``; a refused state stores {"__error__": message}.
    A few minutes on one core: the book reads the shipped file instead (``grid()``)."""
    out, states = {}, grid_controls()
    t0 = time.perf_counter()
    for i, st in enumerate(states, 1):
        key = web_host.grid_key(st, CONTROL_ORDER)
        try:
            out[key] = curve_data(st, seed)
        except ValueError as err:
            out[key] = {web_host.ERROR_KEY: str(err)}
        if progress and (i % 100 == 0 or i == len(states)):
            print(f"  {i}/{len(states)}  {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    curves.cache_clear()       # 1,584 settings went through the cache: leave it to the notebook's own
    return out


def _grid_header(seed: int) -> dict:
    return {"format": 1, "seed": seed, "control_order": list(CONTROL_ORDER),
            "axes": {n: list(GRID[n]) for n in CONTROL_ORDER}}


def write_grid(path: Path = GRID_FILE, seed: int = GRID_SEED) -> dict:
    """Compute the grid and write it, gzipped JSON with a header (seed, axes, torch version)."""
    t0 = time.perf_counter()
    g = compute_grid(seed, progress=True)
    doc = _grid_header(seed) | {"torch": torch.__version__, "compute_s": round(time.perf_counter() - t0, 1),
                                "grid": g}
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    path.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
    return doc


def read_grid_file(path: Path = GRID_FILE) -> dict:
    """The shipped file as written by ``write_grid`` (header and ``grid``)."""
    return json.loads(gzip.decompress(path.read_bytes()).decode())


@lru_cache(maxsize=4)
def grid(seed: int = GRID_SEED) -> dict[str, dict]:
    """The precomputed grid for ``seed``: the shipped file when it is that seed's and matches GRID,
    else computed now (minutes; only a book built with another NORMLAB_SEED needs that)."""
    if GRID_FILE.exists():
        doc = read_grid_file()
        if all(doc.get(k) == v for k, v in _grid_header(seed).items()):
            return doc["grid"]
    return compute_grid(seed)


def spec(seed: int = GRID_SEED, options: dict | None = None, labels: dict | None = None) -> dict:
    """The front-end's control definitions, titles and labels (constant; synced as the ``spec`` trait).

    ``options``: {control: allowed values} to offer fewer choices (a lesson that has not taught
    the rest yet); a control left with one value is not shown at all. ``labels`` renames options."""
    names = LABELS | (labels or {})
    allowed = options or {}
    opt = lambda control, values: [[n, names[n]] for n in values if n in allowed.get(control, values)]
    depths = ", ".join(map(str, GRID["depth"]))
    widths = ", ".join(map(str, GRID["width"]))
    out = {
        "title": "梯度流实验室 (gradient flow)",
        "control_order": list(CONTROL_ORDER),
        "controls": [
            {"name": "depth", "label": "层数 depth", "kind": "range", "min": DEPTH_RANGE[0], "max": DEPTH_RANGE[1],
             "step": 1, "grid_values": list(GRID["depth"])},
            {"name": "wiring", "label": "连接 wiring", "kind": "select", "options": opt("wiring", blocks.WIRINGS)},
            {"name": "norm", "label": "归一化 norm", "kind": "select", "options": opt("norm", blocks.NORMS)},
            {"name": "scaling", "label": "残差缩放 scaling", "kind": "select", "options": opt("scaling", blocks.SCALINGS)},
            {"name": "width", "label": "宽度 width", "kind": "select", "options": [[w, str(w)] for w in WIDTHS],
             "grid_values": list(GRID["width"])},
        ],
        "titles": {"act": "激活的标准差 activation std", "grad": "梯度范数 ||∂L/∂h_i||  (对数 log)"},
        "fixed": {n: v[0] for n, v in allowed.items() if len(v) == 1},   # not shown: one value only
        "xlabel": "层 layer i",
        "legend": {"current": "当前 current", "previous": "上一个设置 previous"},
        # shown on the static page only: its depth slider jumps between these values
        "grid_note": f"网格里的层数 depth：{depths}；宽度 width：{widths}；种子 seed {seed}",
    }
    out["controls"] = [c for c in out["controls"] if c["name"] not in out["fixed"]]
    return out


# --- the widget ----------------------------------------------------------------------------------

class GradFlow(web_host.WebWidget):
    """Per-layer activation std and gradient norm (log scale) for a stack you configure.

    The grey dashed lines are the previous setting, so a change shows as a difference. The line
    describing the setting (``caption()``) is text above the charts. In JupyterLab every control
    change runs ``compute`` (``curves``) in the kernel; the book and the slides get the same
    front-end over the precomputed grid. ``update(**changes)`` does from Python what a control does.
    """

    web_name = "gradflow"

    def __init__(self, dpi: int = 80, seed: int = 0, options: dict | None = None, labels: dict | None = None,
                 **settings) -> None:
        """``options`` = {control: allowed values} offers fewer choices (lesson 01 shows depth, width and
        plain vs residual only); ``labels`` renames options (e.g. {"pre": "残差 x + F(x)"})."""
        unknown = set(settings) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"GradFlow 没有这些设置 (unknown settings)：{', '.join(sorted(unknown))}；"
                            f"可用 (known)：{', '.join(DEFAULTS)}, seed, dpi")
        self.dpi, self.seed = dpi, seed
        state = _settings(DEFAULTS | settings)
        self.curves: Curves = curves(**state, seed=seed)   # raises the Chinese ValueError on a bad combination
        self.state, self._previous = state, None
        bad = {n: v for n, v in (options or {}).items() if n not in DEFAULTS or state[n] not in v}
        if bad:
            raise ValueError(f"options 里的控件或取值不对 (options must name controls and include the current value)：{bad}")
        self.options = {n: tuple(v) for n, v in (options or {}).items()}
        self.labels = dict(labels or {})
        super().__init__(spec=spec(seed, self.options, labels), controls=state)

    def compute(self, controls: dict) -> dict:
        """The data the front-end draws for ``controls`` (pure: the grid calls it too)."""
        return self._captioned(curve_data(controls, self.seed), controls)

    def _captioned(self, data: dict, controls: dict) -> dict:
        """The caption in this widget's words (its labels, without the controls it does not show)."""
        if not (self.options or self.labels) or web_host.ERROR_KEY in data:
            return data
        grad = data["grad"]                                   # the ratio from the drawn (rounded) values
        ratio = grad[0] / grad[-1] if grad[-1] > 0 else float("nan")
        return data | {"caption": _describe(_settings(controls), ratio, self.labels, tuple(self.spec["fixed"]))}

    @traitlets.observe("data")
    def _follow(self, change) -> None:
        """New data drawn: ``state``/``curves`` (what ``png`` and ``caption`` show) follow the controls."""
        state = _settings(self.controls)
        if state != self.state:
            self._previous, self.state = self.curves, state
            self.curves = curves(**state, seed=self.seed)      # from the cache: compute() just ran it

    def update(self, **changes) -> Curves:
        """Apply changes (depth, wiring, norm, scaling, width) as the controls would; returns the
        curves. A refused combination raises the Chinese ValueError and keeps the state."""
        unknown = set(changes) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"GradFlow 没有这些设置 (unknown settings)：{', '.join(sorted(unknown))}")
        state = _settings(self.state | changes)
        curves(**state, seed=self.seed)                       # raises before anything changes
        self.controls = state                                 # -> compute -> data (synced to the view)
        return self.curves

    def caption(self) -> str:
        """The current setting and its gradient ratio, in one line (the front-end shows the same)."""
        return _describe(self.state, self.curves.grad_ratio, self.labels, tuple(self.spec["fixed"]))

    def grid_controls(self) -> list[dict]:
        return [c for c in grid_controls() if all(c[n] in v for n, v in self.options.items())]

    @property
    def live_grid(self) -> bool:
        """JupyterLab answers a state of the grid in the browser too: the shipped grid's seed only
        (another seed's grid takes minutes to compute)."""
        return self.seed == GRID_SEED and GRID_FILE.exists()

    def static_grid(self) -> dict[str, dict]:
        """The precomputed grid for this widget's seed, plus its current setting if that is not in it."""
        full = grid(self.seed)
        g = {web_host.grid_key(c, CONTROL_ORDER): self._captioned(full[web_host.grid_key(c, CONTROL_ORDER)], c)
             for c in self.grid_controls()} if self.options else full
        key = web_host.grid_key(self.controls, CONTROL_ORDER)
        if key not in g:
            g = dict(g)
            try:
                g[key] = self.compute(dict(self.controls))
            except ValueError as err:
                g[key] = {web_host.ERROR_KEY: str(err)}
        return g

    def _repr_mimebundle_(self, **kwargs):
        return web_host.mimebundle(self)

    def png(self) -> bytes:
        """The picture (matplotlib, Agg): current curves in blue, the previous setting grey dashed."""
        fig = fixed_figure((10, 3.3), self.dpi)
        canvas = FigureCanvasAgg(fig)
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.26, top=0.9, wspace=0.22)
        axes = fig.subplots(1, 2)
        cur, prev = self.curves, self._previous
        for ax, title, key in ((axes[0], "激活的标准差 activation std", "act_std"),
                               (axes[1], "梯度范数 ||∂L/∂h_i||  (对数 log)", "grad_norm")):
            ys = getattr(cur, key)
            if prev is not None:
                p = getattr(prev, key)
                ax.plot(range(1, len(p) + 1), p, lw=1.2, color="0.6", ls="--", label="上一个设置 previous")
            ax.plot(range(1, len(ys) + 1), ys, lw=2.2, color="C0", marker="o", ms=3, label="当前 current")
            _log_axis(ax, [y for y in (*ys, *(getattr(prev, key) if prev else ())) if y > 0],
                      max(len(ys), len(getattr(prev, key)) if prev else 0))
            ax.set_title(title, y=1.0, pad=6)
            ax.set_xlabel("层 layer i")
            ax.grid(True, alpha=0.3)
        return png_bytes(fig, canvas, legend_from=axes[0])


def _log_axis(ax, ys: list[float], n: int) -> None:
    """Log y axis with a factor 2 margin; 1-2-5 ticks as plain numbers on a narrow range, powers of
    ten otherwise (the front-end's ticks follow the same rule)."""
    lo, hi = (min(ys), max(ys)) if ys else (1.0, 1.0)      # all zero (e.g. ReZero on plain)
    ax.set_yscale("log")
    ax.set_ylim(lo / 2, hi * 2)
    ax.yaxis.set_minor_locator(NullLocator())
    if hi / lo < 300:
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    else:
        ax.yaxis.set_major_locator(LogLocator(base=10, numticks=8))
        ax.yaxis.set_major_formatter(LogFormatterSciNotation())
    ax.set_xlim(0.5, max(n, 1) + 0.5)


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


def main(argv: list[str] | None = None) -> int:
    console_safe()   # ✓/✗ and the like readable on any console (a GBK one too), never a crash
    p = argparse.ArgumentParser(prog="python -m normlab.widgets.gradflow",
                                description="The gradient-flow widget's precomputed grid (book and slides).")
    p.add_argument("--write-grid", action="store_true", help=f"recompute GRID and write {GRID_FILE.name}")
    p.add_argument("--seed", type=int, default=GRID_SEED)
    args = p.parse_args(argv)
    if not args.write_grid:
        p.print_help()
        return 0
    doc = write_grid(seed=args.seed)
    g = doc["grid"]
    print(f"{GRID_FILE}: {len(g)} entries ({sum(web_host.ERROR_KEY in e for e in g.values())} refused), "
          f"{GRID_FILE.stat().st_size / 1024:.0f} KB gzipped, computed in {doc['compute_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
