"""The plot style finds a CJK font and renders Chinese without missing glyphs."""

from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.ft2font import FT2Font  # noqa: E402

from normlab import viz  # noqa: E402

TITLE = "批归一化 BatchNorm：训练与评估 −1"


def test_cjk_font_is_found_and_has_the_glyphs():
    name = viz.use_style()
    assert name is not None, viz.NO_FONT_MESSAGE
    path = font_manager.findfont(font_manager.FontProperties(family=name), fallback_to_default=False)
    charmap = FT2Font(path).get_charmap()
    for ch in "批归一化层残差均值方差":
        assert ord(ch) in charmap, (ch, path)


def test_chinese_figure_renders_without_missing_glyph_warnings(tmp_path):
    viz.use_style()
    fig, ax = plt.subplots(figsize=(4, 2))
    ax.plot(np.arange(5), -np.arange(5))
    ax.set_title(TITLE)
    ax.set_xlabel("层 layer")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*[Gg]lyph.*missing.*")
        fig.savefig(tmp_path / "zh.png")
    plt.close(fig)
    assert (tmp_path / "zh.png").stat().st_size > 1000


def test_rendered_chinese_is_not_tofu(tmp_path):
    """Each distinct character must draw a distinct shape; missing glyphs all draw the same box."""
    viz.use_style()
    images = []
    for ch in "批归化":
        fig = plt.figure(figsize=(0.6, 0.6), dpi=50)
        fig.text(0.5, 0.5, ch, fontsize=24, ha="center", va="center")
        fig.canvas.draw()
        images.append(np.asarray(fig.canvas.buffer_rgba())[..., 0].copy())
        plt.close(fig)
    assert not np.array_equal(images[0], images[1]) and not np.array_equal(images[1], images[2])


def test_no_font_prints_one_clear_line(monkeypatch, capsys):
    monkeypatch.setattr(viz, "find_cjk_font", lambda: None)
    assert viz.use_style() is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CJK font" in err[0]
    viz.use_style()  # restore the real style for later tests in this worker


def test_table_text_and_html():
    t = viz.Table([("LayerNorm", 0.5), ("批归一化", 1.25)], ["名称 name", "值"], title="t")
    text = str(t)
    assert "LayerNorm" in text and "1.25" in text and text.splitlines()[0] == "t"
    html = t._repr_html_()
    assert '<td style="text-align:left">批归一化</td>' in html and '<td style="text-align:right">1.25</td>' in html
    with pytest.raises(ValueError, match="列"):
        viz.Table([(1, 2, 3)], ["a", "b"])


def test_pip_shipped_font_is_used_when_the_system_has_none(monkeypatch, tmp_path):
    """A learner without root and without system CJK fonts still gets real glyphs (mplfonts)."""
    monkeypatch.setattr(viz, "SYSTEM_CJK_FONTS", ())
    viz.find_cjk_font.cache_clear()
    try:
        name = viz.find_cjk_font()
        bundled = viz._bundled_cjk_font()
        assert bundled is not None and "mplfonts" in str(bundled)
        assert name == font_manager.FontProperties(fname=str(bundled)).get_name()
        charmap = FT2Font(str(bundled)).get_charmap()
        assert all(ord(ch) in charmap for ch in "批归一化")
    finally:
        viz.find_cjk_font.cache_clear()


@pytest.mark.parametrize("figsize", [(14, 3.8), (11, 3.8), (6, 3.5)])
def test_readable_raises_small_text_to_what_shows_18px_on_a_slide(figsize):
    """Issue 36: after viz.readable, the smallest text of the PNG as saved (tight bounding box), scaled to
    fit the slide's figure box, is at least PROJECTED_MIN_PX; the control: before it, a 7-point legend
    and 9-point ticks are not (for the two wide figures)."""
    import io

    from PIL import Image

    viz.use_style()
    fig, axes = plt.subplots(1, 2, figsize=figsize)
    axes[0].plot([0, 1], [1, 0], label="训练 train")
    axes[0].legend(fontsize=7)
    axes[1].tick_params(labelsize=9)

    def shown_px():
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100)
        w, h = Image.open(buf).size
        scale = min(viz.PROJECTED_BOX[0] / w, viz.PROJECTED_BOX[1] / h)
        return min(t.get_fontsize() for t in viz.shown_texts(fig)) * 100 / 72 * scale

    before = shown_px()
    viz.readable(fig, 100)
    after = shown_px()
    plt.close(fig)
    assert after >= viz.PROJECTED_MIN_PX, (figsize, before, after)
    assert before < viz.PROJECTED_MIN_PX or figsize[0] < 10, (figsize, before)
