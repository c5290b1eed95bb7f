"""The course's interactive widgets (import core only: norms, blocks, probes, viz).

Notebooks import the two front modules: ``from normlab.widgets import explorer, gradflow``.
    explorer      the axes explorer widget (AxesExplorer); re-exports the names below it
    axes_layers   the norms it knows (NORMS, LAYOUTS, labels) and the real layer behind each name
    axes_groups   the reduction behind each norm as torch code, groups(), describe() -> Selection
    dependence    dependence_groups(): groups read off any layer's Jacobian (the independent check)
    axes_draw     drawing a tensor's groups (BlockArtists, draw_blocks) and the book's static_grid
    gradflow      the gradient-flow widget (GradFlow), curves() and the book's static_figure
    lazy          what both widgets share: the lazily built ipywidgets front-end, a fixed-layout figure
"""
