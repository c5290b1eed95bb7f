"""The course's interactive widgets (import core and, for the 先想一想 prompt widget, normlab.course).

Notebooks import the front modules: ``from normlab.widgets import explorer, gradflow, momentum``. Each
widget has ONE browser front-end, an anywidget ES module in ``web/`` (``explorer.js``, ``gradflow.js``,
``momentum.js``): in JupyterLab Python computes the data on every control change (实时计算); in the
static book and the slides the same module reads a precomputed grid embedded in the page (预先计算的网格),
no kernel.
    explorer      the axes explorer widget (AxesExplorer); re-exports the names below it
    axes_layers   the norms it knows (NORMS, LAYOUTS, labels) and the real layer behind each name
    axes_groups   the reduction behind each norm as torch code, groups(), describe() -> Selection
    dependence    dependence_groups(): groups read off any layer's Jacobian (the independent check)
    axes_draw     drawing a tensor's groups (BlockArtists, draw_blocks) and the book's static_grid
    gradflow      the gradient-flow widget (GradFlow), curves() and the book's static_figure
    momentum      lesson 02's momentum widget (MomentumLab): one m in two running-average conventions;
                  the update rule comes from the lesson as an argument (trace=, conventions=)
    web_host      WebWidget (the anywidget base: traits controls / data / spec / source / error) and
                  static_html() (the same front-end with a grid and a model shim, for pages with no kernel)
    figure        the fixed-layout matplotlib figure behind the PNG each widget also shows (print, nbval)
    web/          the ES modules and their CSS; data/ the gradient-flow grid, precomputed (regenerate:
                  python -m normlab.widgets.gradflow --write-grid)
"""
