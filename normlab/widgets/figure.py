"""The matplotlib side the widgets keep for print, PDF and nbval: a figure with a fixed layout.

(The interactive front-ends are the ES modules in ``web/``; this picture is the ``image/png`` that
travels beside them, see ``web_host.mimebundle``.)
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.layout_engine import PlaceHolderLayoutEngine

__all__ = ["fixed_figure"]


def fixed_figure(figsize: tuple[float, float], dpi: int) -> Figure:
    """A Figure with a fixed layout: the course style's constrained layout would re-run (and warn,
    ~120 ms) on every redraw of a widget's figure."""
    fig = Figure(figsize=figsize, dpi=dpi)
    fig.set_layout_engine(PlaceHolderLayoutEngine(adjust_compatible=True, colorbar_gridspec=False))
    return fig
