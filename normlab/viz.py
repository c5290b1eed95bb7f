"""Plot style with Chinese glyphs, and small comparison tables.

``use_style()`` picks a CJK font in this order:
1. a system font the learner already has (Noto Sans CJK SC, Source Han Sans SC,
   WenQuanYi, Microsoft YaHei, PingFang SC, ...);
2. Noto Sans CJK SC shipped inside the ``mplfonts`` PyPI package (installed by
   ``python3 run.py ...``; needs no root);
and prints one clear line when it finds none.

Figures are projected (issue 36): on a 1280x720 slide a figure fills at most PROJECTED_BOX, and its
smallest text must come out at PROJECTED_MIN_PX or more. In a notebook, ``use_style()`` has every figure
it displays drawn with no text smaller than ``projected_floor(fig)`` points (``readable``), and writes
the sizes into the PNG (PNG_TEXT_KEY: its smallest text in points and its dpi), so that the slides'
test can measure each figure's smallest text as shown (tests/test_slides_readable.py).
"""

from __future__ import annotations

import html
import json
import unicodedata
import sys
from collections.abc import Sequence
from functools import lru_cache, partial
from importlib import import_module, util as importlib_util
from pathlib import Path

import matplotlib as mpl
from matplotlib import font_manager

# A figure on a slide (tools/slide_model.py IMG_WIDTH, IMG_MAX: 95% of the slide's width, at most 500 px
# high, scaled to fit) and the smallest text it may show there, read from the back of a room (issue 36).
PROJECTED_BOX = (1180, 500)
PROJECTED_MIN_PX = 18
READABLE_MAX_PT = 17             # above this floor a figure is too tall or wide for its text: left as drawn
PNG_TEXT_KEY = "normlab-text"     # the PNG's tEXt chunk: {"min_pt": ..., "dpi": ...}

SYSTEM_CJK_FONTS = (
    "Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "Source Han Sans CN",
    "WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Microsoft YaHei", "PingFang SC",
    "Hiragino Sans GB", "Heiti SC", "Sarasa Gothic SC", "SimHei",
)
NO_FONT_MESSAGE = ("normlab: 没有找到中文字体 (CJK font)，图中的中文会显示成方框。"
                   "运行 `python3 run.py course` 会安装 mplfonts；或安装系统字体 Noto Sans CJK SC / fonts-noto-cjk。")


def _bundled_cjk_font() -> Path | None:
    """Noto Sans CJK SC from the mplfonts package, if installed (OFL-licensed)."""
    spec = importlib_util.find_spec("mplfonts")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / "fonts" / "NotoSansCJKsc-Regular.otf"
    return path if path.exists() else None


@lru_cache(maxsize=1)
def find_cjk_font() -> str | None:
    """Name of a font family that has Chinese glyphs, registering a bundled one if needed."""
    installed = {f.name for f in font_manager.fontManager.ttflist}
    for name in SYSTEM_CJK_FONTS:
        if name in installed:
            return name
    bundled = _bundled_cjk_font()
    if bundled is not None:
        font_manager.fontManager.addfont(str(bundled))
        return font_manager.FontProperties(fname=str(bundled)).get_name()
    return None


def use_style(quiet: bool = False) -> str | None:
    """Apply NormLab's matplotlib style (readable when projected); return the CJK font used."""
    font = find_cjk_font()
    mpl.rcParams.update({
        "figure.dpi": 100, "savefig.dpi": 120, "savefig.bbox": "tight", "figure.constrained_layout.use": True,
        "font.size": 14, "axes.titlesize": 15, "axes.labelsize": 14, "legend.fontsize": 13,
        "xtick.labelsize": 13, "ytick.labelsize": 13, "figure.titlesize": 16,
        "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
        "axes.unicode_minus": False,  # CJK fonts lack U+2212; use the ASCII hyphen-minus
        "font.family": "sans-serif",
        "font.sans-serif": ([font] if font else []) + ["DejaVu Sans"],
    })
    if font is None and not quiet:
        print(NO_FONT_MESSAGE, file=sys.stderr)
    _display_readable()
    return font


def projected_floor(fig, dpi: float | None = None) -> float:
    """The smallest font size (points) that shows as PROJECTED_MIN_PX when the figure, saved at ``dpi``,
    is scaled to fit PROJECTED_BOX (5% to spare: a tight bounding box may add a little)."""
    dpi = dpi or fig.dpi
    w, h = fig.get_size_inches() * dpi
    scale = min(PROJECTED_BOX[0] / w, PROJECTED_BOX[1] / h)
    return round(1.05 * PROJECTED_MIN_PX * 72 / (dpi * scale), 1)


def shown_texts(fig) -> list:
    """The figure's visible, non-empty text artists (titles, labels, tick labels, legends, notes)."""
    from matplotlib.text import Text
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def readable(fig, dpi: float | None = None) -> float:
    """Raise every text of ``fig`` smaller than ``projected_floor`` to it (tick labels through
    tick_params, as ticks are made again at each draw); returns the smallest size then, in points.
    A figure whose floor is above READABLE_MAX_PT (a 3x2 grid of panels 8 inches high) is left as it is:
    text that large would overlap its panels; such a figure needs a smaller figsize or fewer panels
    (the slides' test reports it)."""
    floor = projected_floor(fig, dpi)
    if floor > READABLE_MAX_PT:
        return min((t.get_fontsize() for t in shown_texts(fig)), default=floor)
    for ax in fig.axes:
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            labels = axis.get_ticklabels(which="both")
            if labels and min(t.get_fontsize() for t in labels) < floor:
                ax.tick_params(axis=name, which="both", labelsize=floor)
    for t in shown_texts(fig):
        if t.get_fontsize() < floor:
            t.set_fontsize(floor)
    return min((t.get_fontsize() for t in shown_texts(fig)), default=floor)


def text_record(fig, dpi: float | None = None) -> dict:
    """PNG metadata that says the figure's smallest text (points) and the dpi it is saved at."""
    smallest = min((t.get_fontsize() for t in shown_texts(fig)), default=0.0)
    return {PNG_TEXT_KEY: json.dumps({"min_pt": round(smallest, 2), "dpi": dpi or fig.dpi})}


def _readable_png(original, fig, **kwargs):
    """The notebook's PNG of a figure: made readable, its smallest text and dpi in PNG_TEXT_KEY."""
    dpi = kwargs.get("dpi") or fig.dpi
    readable(fig, dpi)
    return original(fig, metadata=text_record(fig, dpi), **kwargs)


def _display_readable() -> None:
    """In IPython with the inline backend: the PNG formatter of figures goes through _readable_png."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    if not shell or not hasattr(shell, "display_formatter"):
        return
    from matplotlib.figure import Figure
    if "inline" in mpl.get_backend():     # its first import registers its formatter: now, not after ours
        import_module("matplotlib_inline.backend_inline")
    png = shell.display_formatter.formatters["image/png"]
    original = png.lookup_by_type(Figure) if Figure in png.type_printers else None
    if original is None or getattr(original, "normlab_readable", False):
        return
    wrapped = partial(_readable_png, original)
    wrapped.normlab_readable = True
    png.for_type(Figure, wrapped)


class Table:
    """A small table that renders as HTML in a notebook and as aligned text elsewhere."""

    def __init__(self, rows: Sequence[Sequence[object]], columns: Sequence[str], title: str | None = None,
                 floatfmt: str = ".4g") -> None:
        self.rows = [list(r) for r in rows]
        self.columns = list(columns)
        self.title, self.floatfmt = title, floatfmt
        for r in self.rows:
            if len(r) != len(self.columns):
                raise ValueError(f"表格每行应有 {len(self.columns)} 列，实际一行有 {len(r)} 列: {r}"
                                 f" (each row needs {len(self.columns)} columns, one per name in columns.)")

    def _fmt(self, v: object) -> str:
        return format(v, self.floatfmt) if isinstance(v, float) else str(v)

    def __str__(self) -> str:
        cells = [self.columns] + [[self._fmt(v) for v in r] for r in self.rows]
        width = [max(_display_width(c[i]) for c in cells) for i in range(len(self.columns))]
        line = lambda c: "  ".join(s + " " * (w - _display_width(s)) for s, w in zip(c, width)).rstrip()
        out = [self.title] if self.title else []
        out += [line(cells[0]), "  ".join("-" * w for w in width)] + [line(c) for c in cells[1:]]
        return "\n".join(out)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        def cell(tag: str, text: str, numeric: bool) -> str:  # numbers right-aligned, words left-aligned
            return f'<{tag} style="text-align:{"right" if numeric else "left"}">{html.escape(text)}</{tag}>'
        numeric = [all(_is_number(r[i]) for r in self.rows) for i in range(len(self.columns))]
        head = "".join(cell("th", c, n) for c, n in zip(self.columns, numeric))
        body = "".join("<tr>" + "".join(cell("td", self._fmt(v), _is_number(v)) for v in r) + "</tr>"
                       for r in self.rows)
        cap = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _is_number(v: object) -> bool:
    if isinstance(v, (int, float)):
        return True
    try:
        float(str(v).rstrip("%x×"))
        return True
    except ValueError:
        return False


def _display_width(s: str) -> int:
    """Terminal width: wide and full-width characters (CJK, full-width punctuation) take two columns."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in s)
