"""What the course's widgets share: a lazily built ipywidgets front-end and a fixed-layout figure.

A widget class keeps its logic in plain methods (``update``, ``png``) that run without a kernel
or a browser; the ipywidgets controls are built on first use of ``.widget`` (or when Jupyter
displays the object), so importing the module or calling ``update`` in a test needs no frontend.
"""

from __future__ import annotations

import html

from matplotlib.figure import Figure
from matplotlib.layout_engine import PlaceHolderLayoutEngine

__all__ = ["LazyWidget", "fixed_figure", "error_html"]


class LazyWidget:
    """Mixin: ``widget`` builds the front-end once with ``_build()``; the last line of a cell shows it."""

    _widget = None

    @property
    def widget(self):
        if self._widget is None:
            self._widget = self._build()
        return self._widget

    @property
    def shown(self) -> bool:
        """Whether the front-end exists (then ``update`` must refresh its image and text)."""
        return self._widget is not None

    def _ipython_display_(self) -> None:
        from IPython.display import display
        display(self.widget)

    def _build(self):
        raise NotImplementedError


def fixed_figure(figsize: tuple[float, float], dpi: int) -> Figure:
    """A Figure with a fixed layout: the course style's constrained layout would re-run (and warn,
    ~120 ms) on every redraw of a widget's figure."""
    fig = Figure(figsize=figsize, dpi=dpi)
    fig.set_layout_engine(PlaceHolderLayoutEngine(adjust_compatible=True, colorbar_gridspec=False))
    return fig


def error_html(err: Exception) -> str:
    """A refused setting's message (Chinese, from the ValueError), shown in red in the widget."""
    return f"<div style='color:#b00020;font-size:14px'>{html.escape(str(err))}</div>"
