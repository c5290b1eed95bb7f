"""Plot style with Chinese glyphs, and small comparison tables.

``use_style()`` picks a CJK font in this order:
1. a system font the learner already has (Noto Sans CJK SC, Source Han Sans SC,
   WenQuanYi, Microsoft YaHei, PingFang SC, ...);
2. Noto Sans CJK SC shipped inside the ``mplfonts`` PyPI package (installed by
   ``python3 run.py ...``; needs no root);
and prints one clear line when it finds none.
"""

from __future__ import annotations

import html
import unicodedata
import sys
from collections.abc import Sequence
from functools import lru_cache
from importlib import util as importlib_util
from pathlib import Path

import matplotlib as mpl
from matplotlib import font_manager

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
        "font.size": 11, "axes.titlesize": 12, "axes.labelsize": 11, "legend.fontsize": 10,
        "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
        "axes.unicode_minus": False,  # CJK fonts lack U+2212; use the ASCII hyphen-minus
        "font.family": "sans-serif",
        "font.sans-serif": ([font] if font else []) + ["DejaVu Sans"],
    })
    if font is None and not quiet:
        print(NO_FONT_MESSAGE, file=sys.stderr)
    return font


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
