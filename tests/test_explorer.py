"""The axes explorer's groups against the real reductions of torch.nn and normlab.norms.

The explorer takes its groups from a hand-typed reduction table (the torch line its panel shows).
References used here, none of them that table:
- finite differences on torch.nn modules (perturb one input, see which outputs move);
- the Jacobian of the real layers, normlab.norms and torch.nn (``dependence_groups``, which knows
  nothing about norms or axes);
- the statistics torch.nn actually uses, recovered from its output;
- group counts worked out by hand for one shape.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from normlab.widgets import explorer as ex  # noqa: E402
from normlab.widgets.dependence import dependence_groups  # noqa: E402
from normlab import viz  # noqa: E402

viz.use_style(quiet=True)  # the course style with its CJK font, as normlab.setup() sets in notebooks

SHAPES = {"image": [(2, 4, 3, 2), (3, 6, 1, 4)], "text": [(2, 5, 4), (3, 2, 6)]}
CASES = [(norm, layout, shape) for layout in ex.LAYOUTS for shape in SHAPES[layout] for norm in ex.NORMS]


def torch_layer(norm: str, layout: str, shape, g: int = 2):
    """torch.nn layer for each norm, written out here independently of normlab.widgets."""
    to_cf = (lambda x: x) if layout == "image" else (lambda x: x.transpose(1, 2))  # channel first
    ch = shape[1] if layout == "image" else shape[2]
    dims = len(shape) - 2
    d = torch.float64
    if norm == "batchnorm":
        m = (nn.BatchNorm2d if dims == 2 else nn.BatchNorm1d)(ch, dtype=d)
        return lambda x: to_cf(m(to_cf(x)))
    if norm == "instancenorm":
        m = (nn.InstanceNorm2d if dims == 2 else nn.InstanceNorm1d)(ch, dtype=d)
        return lambda x: to_cf(m(to_cf(x)))
    if norm == "groupnorm":
        m = nn.GroupNorm(g, ch, dtype=d)
        return lambda x: to_cf(m(to_cf(x)))
    if norm == "layernorm_image":
        return nn.LayerNorm(list(shape[1:]), dtype=d)
    if norm == "rmsnorm":
        return nn.RMSNorm(list(shape[1:]) if layout == "image" else shape[-1], dtype=d)
    if layout == "text":  # layernorm_text
        return nn.LayerNorm(shape[-1], dtype=d)
    m = nn.LayerNorm(shape[1], dtype=d)
    return lambda x: m(x.movedim(1, -1)).movedim(-1, 1)


def perturbation_partition(fn, shape) -> set[frozenset[int]]:
    """Groups by finite differences: j belongs with i when moving x_j moves y_i."""
    torch.manual_seed(3)
    x = torch.randn(shape, dtype=torch.float64) * 2 + 0.5
    with torch.no_grad():
        y0 = fn(x).reshape(-1)
        n = x.numel()
        touched = []
        for j in range(n):
            xp = x.clone().reshape(-1)
            xp[j] += 0.5
            touched.append(frozenset(torch.nonzero((fn(xp.reshape(shape)).reshape(-1) - y0).abs() > 1e-12)
                                     .flatten().tolist()) | {j})
    return set(touched)


def partition(ids: torch.Tensor) -> set[frozenset[int]]:
    flat = ids.reshape(-1).tolist()
    return {frozenset(i for i, v in enumerate(flat) if v == g) for g in set(flat)}


@pytest.mark.parametrize("norm,layout,shape", CASES)
def test_groups_equal_the_real_reductions(norm, layout, shape):
    ids = ex.groups(norm, shape, layout)                      # from the reduction table (the panel's torch line)
    expected = perturbation_partition(torch_layer(norm, layout, shape), shape)   # torch.nn, no autograd
    assert partition(ids) == expected
    for impl in ("normlab", "torch"):                         # the Jacobian of the real layers
        jacobian = dependence_groups(ex.normalizer(norm, layout, shape, impl=impl, dtype=torch.float64), shape)
        assert partition(jacobian) == expected
        assert torch.equal(jacobian, ids)                     # the same ids, not only the same partition
        assert torch.equal(ex.groups(norm, shape, layout, impl=impl), ids)


@pytest.mark.parametrize("layout,shape,g", [("image", (2, 6, 2, 2), 3), ("image", (2, 6, 2, 2), 6),
                                            ("image", (2, 6, 2, 2), 1), ("text", (2, 3, 8), 4)])
def test_groupnorm_groups_for_other_group_counts(layout, shape, g):
    expected = perturbation_partition(torch_layer("groupnorm", layout, shape, g), shape)
    assert partition(ex.groups("groupnorm", shape, layout, num_groups=g)) == expected
    assert partition(ex.groups("groupnorm", shape, layout, num_groups=g, impl="normlab")) == expected


def test_group_counts_worked_out_by_hand():
    # image (N, C, H, W) = (2, 4, 3, 5): BN one per channel (4); LN one per sample (2);
    # LN over C one per pixel (2*15); IN one per (n, c) (8); GN G=2 (2*2); RMSNorm per sample (2)
    want = {"batchnorm": 4, "layernorm_image": 2, "layernorm_text": 30, "instancenorm": 8,
            "groupnorm": 4, "rmsnorm": 2}
    for norm, count in want.items():
        assert int(ex.groups(norm, (2, 4, 3, 5), "image").max()) + 1 == count, norm
    # text (B, S, E) = (3, 5, 4): BN per feature (4); LN per token (15); LN over (S, E) per sentence (3);
    # IN per (b, e) (12); GN G=2 (3*2); RMSNorm per token (15)
    want = {"batchnorm": 4, "layernorm_text": 15, "layernorm_image": 3, "instancenorm": 12,
            "groupnorm": 6, "rmsnorm": 15}
    for norm, count in want.items():
        assert int(ex.groups(norm, (3, 5, 4), "text").max()) + 1 == count, norm


@pytest.mark.parametrize("norm,layout,shape", [c for c in CASES if c[2] in (SHAPES["image"][0], SHAPES["text"][0])])
def test_panel_numbers_are_the_statistics_torch_uses(norm, layout, shape):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64) * 3 + 1
    cell = tuple(s - 1 for s in shape)
    sel = ex.describe(x, norm, layout, cell)
    xs = x[sel.members]
    assert sel.group_size == xs.numel()
    y = torch_layer(norm, layout, shape)(x).detach()
    eps = 1e-6 if norm == "rmsnorm" else 1e-5
    if norm == "rmsnorm":
        eps = torch.finfo(torch.float64).eps
        assert sel.stats["rms"] == pytest.approx(xs.pow(2).mean().sqrt().item(), rel=1e-10)
        rebuilt = x[sel.members] / torch.sqrt(xs.pow(2).mean() + eps)
    else:
        assert sel.stats["mean"] == pytest.approx(xs.mean().item(), rel=1e-10, abs=1e-12)
        assert sel.stats["var"] == pytest.approx(xs.var(unbiased=False).item(), rel=1e-10)
        rebuilt = (xs - sel.stats["mean"]) / (sel.stats["var"] + eps) ** 0.5
    torch.testing.assert_close(rebuilt, y[sel.members])   # torch.nn normalised these cells with these numbers
    assert sel.output == pytest.approx(y[cell].item(), rel=1e-6, abs=1e-9)


def test_source_material_BE_plane_is_not_batchnorm_on_text():
    """[E] §1 says BN on (B, S, E) text normalises 'on the (B, E) plane'; nn.BatchNorm1d(E) does not."""
    shape = (3, 4, 5)
    bn_text = partition(ex.groups("batchnorm", shape, "text", impl="torch"))
    be_plane = partition(ex.groups(nn.BatchNorm1d(4), shape))  # S taken as the channel (a float32 module)
    assert bn_text != be_plane
    assert len(bn_text) == 5 and len(be_plane) == 4   # one per feature E vs one per position S


def test_any_function_can_be_probed():
    """ConvNeXt-style LN (permute, LayerNorm(C), permute back) is the image layout's layernorm_text."""
    ln = nn.LayerNorm(4)                                               # float32 parameters
    convnext_ln = lambda x: ln(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)  # noqa: E731
    got = partition(ex.groups(convnext_ln, (2, 4, 3, 2)))
    assert got == partition(ex.groups("layernorm_text", (2, 4, 3, 2), "image")) and len(got) == 2 * 3 * 2


def test_widget_builds_and_reacts_without_a_browser():
    e = ex.AxesExplorer("image")
    w = e.widget
    assert w is not None and e._image.value[:4] == b"\x89PNG"
    e._norm.value = "instancenorm"
    assert e.selection.norm == "instancenorm" and e.selection.n_groups == 4 * 6
    e._sizes[1].value = 4                  # C = 4: the group dropdown follows the divisors
    assert list(e._groups.options) == [1, 2, 4]
    e._norm.value = "groupnorm"
    e._groups.value = 4
    assert e.selection.num_groups == 4 and e.selection.n_groups == 4 * 4
    before = e.selection.stats
    e.update(seed=5)
    assert e.selection.stats != before
    e._norm.value = "instancenorm"
    e._sizes[2].value, e._sizes[3].value = 1, 1   # one pixel: InstanceNorm cannot train; the panel says why
    assert "至少需要 2 个空间位置" in e._panel.value
    e._layout.value = "text"                      # switch layout: three size sliders, default (B, S, E)
    assert e.selection.layout == "text" and e.selection.shape == ex.DEFAULT_SHAPE["text"]
    assert len(e._sizes) == 3 and e._idx[2].max == ex.DEFAULT_SHAPE["text"][2] - 1
    e._norm.value = "batchnorm"
    assert e.selection.n_groups == ex.DEFAULT_SHAPE["text"][2]      # one statistic per feature E
    e._idx[2].value = 1
    assert e.selection.cell[2] == 1
    t = ex.AxesExplorer("text", norm="layernorm_text", cell=(0, 1, 2))
    assert t.selection.group_size == 8 and t.selection.lines["mean"] == "x.mean(dim=-1)"


def test_static_grid_has_every_norm_and_layout():
    fig = ex.static_grid()
    titles = [ax.get_title() for ax in fig.axes]
    assert len(titles) == len(ex.NORMS) * 2
    assert sum("BatchNorm" in t for t in titles) == 2 and sum("文本" in t for t in titles) == len(ex.NORMS)
    matplotlib.pyplot.close(fig)


def test_bad_input_gets_a_clear_chinese_error():
    with pytest.raises(ValueError, match="未知的归一化"):
        ex.groups("batch_norm", (2, 2, 2, 2))
    with pytest.raises(ValueError, match="布局"):
        ex.groups("batchnorm", (2, 2, 2), layout="image")
    with pytest.raises(ValueError, match="整除"):
        ex.groups("groupnorm", (2, 6, 2, 2), num_groups=4)
    with pytest.raises(IndexError, match="超出"):
        ex.describe(torch.randn(2, 3, 4), "batchnorm", "text", (0, 3, 0))


def test_each_control_change_redraws_once():
    """A slider move may adjust other controls (cell range, G options); it must still redraw once."""
    e = ex.AxesExplorer("image")
    _ = e.widget
    calls = []
    real_update = e.update
    e.update = lambda **kw: calls.append(kw) or real_update(**kw)
    e._sizes[1].value = 4          # C: 6 -> 4 changes the cell slider's range and the G options
    e._idx[1].value = 0
    e._norm.value = "groupnorm"
    e._layout.value = "text"
    assert len(calls) == 4
