"""The matplotlib side the widgets keep for print, PDF and nbval: a figure with a fixed layout.

(The interactive front-ends are the ES modules in ``web/``; this picture is the ``image/png`` that
travels beside them, see ``web_host.mimebundle``.)
"""

from __future__ import annotations

import io

import numpy as np
import PIL.Image
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.layout_engine import PlaceHolderLayoutEngine

__all__ = ["fixed_figure", "png_bytes"]


def fixed_figure(figsize: tuple[float, float], dpi: int) -> Figure:
    """A Figure with a fixed layout: the course style's constrained layout would re-run (and warn,
    ~120 ms) on every redraw of a widget's figure."""
    fig = Figure(figsize=figsize, dpi=dpi)
    fig.set_layout_engine(PlaceHolderLayoutEngine(adjust_compatible=True, colorbar_gridspec=False))
    return fig


def png_bytes(fig: Figure, canvas: FigureCanvasAgg, legend_from: Axes | None = None) -> bytes:
    """The figure as PNG bytes (Agg, fast zlib level 1). ``legend_from``: one legend for the figure,
    below the panels in two columns, from that axes' lines in reverse order (the current setting,
    drawn last, first)."""
    if legend_from is not None:
        handles, labels = legend_from.get_legend_handles_labels()
        fig.legend(handles[::-1], labels[::-1], loc="lower center", ncol=2, fontsize=9, frameon=False)
    canvas.draw()
    buf = io.BytesIO()
    PIL.Image.fromarray(np.asarray(canvas.buffer_rgba())).save(buf, format="png", compress_level=1)
    return buf.getvalue()
