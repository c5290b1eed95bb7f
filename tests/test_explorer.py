"""The axes explorer's groups against the real reductions of torch.nn and normlab.norms.

The explorer takes its groups from a hand-typed reduction table (the torch line its panel shows).
References used here, none of them that table:
- finite differences on torch.nn modules (perturb one input, see which outputs move);
- the Jacobian of the real layers, normlab.norms and torch.nn (``dependence_groups``, which knows
  nothing about norms or axes);
- the statistics torch.nn actually uses, recovered from its output;
- group counts worked out by hand for one shape.

The widget (an anywidget, drawn by web/explorer.js) gets its picture from ``compute()``; the tests
below check that data against the same references, the grid's keys against the contract's rule
(web_host.grid_key), its size, and the Chinese messages of refused settings. The browser check of the
front-end is the last test (skipped where no Chromium is installed).
"""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import math
import random
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from normlab.widgets import explorer as ex  # noqa: E402
from normlab.widgets.dependence import dependence_groups  # noqa: E402
from normlab import viz  # noqa: E402
from normlab.widgets import web_host  # noqa: E402

viz.use_style(quiet=True)  # the course style with its CJK font, as normlab.setup() sets in notebooks

WEB = Path(ex.__file__).resolve().parent / "web"
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


# --- the widget's data: what the browser draws comes from the real computation -------------------------

@pytest.mark.parametrize("norm,layout,shape", CASES)
def test_widget_data_is_the_real_layers_computation(norm, layout, shape):
    """compute() (what the front-end draws, live and in the grid) against torch.nn written out here."""
    e = ex.AxesExplorer(layout, shape=shape, norm=norm)
    data = e.compute(e.controls)
    assert data == e.data and e.error == ""
    ids = torch.tensor(data["ids"]).reshape(shape)
    assert partition(ids) == perturbation_partition(torch_layer(norm, layout, shape), shape)   # finite differences
    assert torch.equal(ids, dependence_groups(ex.normalizer(norm, layout, shape, impl="torch", dtype=torch.float64),
                                              shape))                                       # the Jacobian, same ids
    counts = torch.bincount(ids.reshape(-1))
    assert data["n_groups"] == len(counts) and (counts == data["group_size"]).all()
    assert data["blocks"] == [shape[0], shape[1], math.prod(shape[2:])]
    x = e.tensor().double()
    assert data["x"] == pytest.approx(x.reshape(-1).tolist(), rel=5.1e-3, abs=1e-6)   # 3 significant digits
    for g in range(len(counts)):                                        # each group's statistics, by hand
        xs = x[ids == g]
        if norm == "rmsnorm":
            assert data["stats"]["rms"][g] == pytest.approx(xs.pow(2).mean().sqrt().item(), rel=1e-3)
        else:
            assert data["stats"]["mean"][g] == pytest.approx(xs.mean().item(), rel=1e-3, abs=1e-4)
            assert data["stats"]["var"][g] == pytest.approx(xs.var(unbiased=False).item(), rel=1e-3)
    with torch.no_grad():
        y = torch_layer(norm, layout, shape)(x)
    assert data["y"] == pytest.approx(y.reshape(-1).tolist(), rel=5.1e-3, abs=1e-5)
    assert data["lines"] == ex.stat_lines(norm, layout) and data["module"] == ex.module_line(norm, layout)


def test_data_does_not_depend_on_the_selected_cell():
    e = ex.AxesExplorer("image", norm="groupnorm")
    before = e.data
    sel = e.update(cell=(0, 0, 0, 0))
    assert e.data == before and sel.cell == (0, 0, 0, 0)
    assert e.controls["cell"] == "0,0,0,0"
    # the browser's highlight rule (same group id) is the Selection's members
    ids = torch.tensor(e.data["ids"]).reshape(sel.shape)
    assert torch.equal(ids == ids[sel.cell], sel.members)


def test_widget_follows_its_controls_like_the_front_end_sends_them():
    e = ex.AxesExplorer("image")
    assert e.source == "live" and e.spec["control_order"] == ["layout", "norm", "shape", "num_groups"]
    assert e.controls == {"layout": "image", "norm": "batchnorm", "shape": "4,6,3,3", "num_groups": 0,
                          "cell": "2,3,1,1", "seed": 0}
    e.set_controls(norm="instancenorm")
    assert e.selection.norm == "instancenorm" and e.data["n_groups"] == 4 * 6
    e.set_controls(norm="groupnorm", shape="4,4,3,3", num_groups=4, cell="1,2,0,1")
    assert e.selection.num_groups == 4 and e.data["n_groups"] == 4 * 4 and e.selection.cell == (1, 2, 0, 1)
    before = e.data["stats"]
    e.update(seed=5)
    assert e.data["stats"] != before and e.controls["seed"] == 5
    e.set_controls(norm="instancenorm", shape="4,4,1,1")  # one pixel: InstanceNorm cannot train; the error says why
    assert "至少需要 2 个空间位置" in e.error and e.data["norm"] == "groupnorm"   # the last picture stays
    assert e.selection.norm == "groupnorm"                                        # and so does the state
    e.set_controls(shape="4,4,2,1")
    assert e.error == "" and e.data["norm"] == "instancenorm" and e.data["group_size"] == 2
    sel = e.update(layout="text")                 # a new layout starts from its default shape, middle cell
    assert sel.shape == ex.DEFAULT_SHAPE["text"] and e.controls["shape"] == "4,6,8" and e.controls["cell"] == "2,3,4"
    e.set_controls(norm="batchnorm")
    assert e.data["n_groups"] == ex.DEFAULT_SHAPE["text"][2] and e.controls["num_groups"] == 0
    t = ex.AxesExplorer("text", norm="layernorm_text", cell=(0, 1, 2))
    assert t.selection.group_size == 8 and t.selection.lines["mean"] == "x.mean(dim=-1)"
    assert t.png()[:4] == b"\x89PNG" and "LayerNorm" in t.caption()


def test_refused_settings_give_a_chinese_message():
    e = ex.AxesExplorer("image", norm="groupnorm")
    good = e.data
    e.set_controls(num_groups=4)                  # 4 does not divide C = 6
    assert "整除" in e.error and "(num_groups must divide the channel count.)" in e.error and e.data == good
    assert e.selection.num_groups == 2
    with pytest.raises(ValueError, match="整除"):
        e.update(num_groups=4)
    with pytest.raises(ValueError, match="整除"):
        e.compute({"layout": "text", "norm": "groupnorm", "shape": "2,3,8", "num_groups": 3})
    e.set_controls(shape="4,x,3,3")
    assert "逗号分隔的整数" in e.error
    grid = e.static_grid()
    refused = {k: v["__error__"] for k, v in grid.items() if "__error__" in v}
    assert refused and all(k.split("|")[1] == "instancenorm" and k.split("|")[2].endswith(",1,1") for k in refused)
    assert all("InstanceNorm" in m and "至少需要 2 个空间位置" in m for m in refused.values())


def test_grid_keys_follow_the_contract_and_cover_every_slider_position():
    e = ex.AxesExplorer()
    spec, grid, wanted = e.spec, e.static_grid(), e.grid_controls()
    order = spec["control_order"]
    keys = ["|".join(str(c[n]) for n in order) for c in wanted]
    assert list(grid) == keys and len(set(keys)) == len(keys)
    for c in wanted:
        assert isinstance(c["num_groups"], int) and all(isinstance(c[n], str) for n in ("layout", "norm", "shape"))
    dims = [c for c in spec["controls"] if c.get("part_of") == "shape"]
    for layout in ex.LAYOUTS:
        mine = sorted((c for c in dims if c["layout"] == layout), key=lambda c: c["index"])
        ch = spec["channel_axis"][layout]
        for shape in itertools.product(*[range(c["min"], c["grid_max"] + 1) for c in mine]):
            s = ",".join(map(str, shape))
            for norm in ex.NORMS:
                gs = [g for g in range(1, shape[ch] + 1) if shape[ch] % g == 0] if norm == "groupnorm" else [0]
                for g in gs:
                    assert f"{layout}|{norm}|{s}|{g}" in grid
        default = ",".join(map(str, ex.DEFAULT_SHAPE[layout]))
        assert all(f"{layout}|{n}|{default}|{2 if n == 'groupnorm' else 0}" in grid for n in ex.NORMS)
    for key in random.Random(0).sample(keys, 40):           # an entry is compute() of its controls
        c = dict(zip(order, key.split("|")), num_groups=int(key.split("|")[3]))
        try:
            assert grid[key] == web_host.plain(e.compute(c))
        except ValueError as err:
            assert grid[key] == {"__error__": str(err)}
    assert grid["image|batchnorm|4,6,3,3|0"] == e.data


def test_grid_json_stays_small():
    e = ex.AxesExplorer()
    text = json.dumps(web_host.plain(e.static_grid()), ensure_ascii=False, separators=(",", ":")).encode()
    packed = base64.b64encode(gzip.compress(text, compresslevel=9, mtime=0))
    assert len(text) < 3_000_000 and len(packed) < 600_000, (len(text), len(packed))
    html = e.static_html(png=e.png())
    assert len(html.encode()) < 700_000 and 'data-widget="explorer"' in html and "gzip-base64" in html


def test_a_page_can_offer_batchnorm_alone():
    """Lesson 02 comes before LN/IN/GN/RMSNorm: ``norms=("batchnorm",)`` offers BatchNorm only, in both
    layouts. The spec's norm select lists it alone (no G select), the grid holds only its states (the
    full grid's entries for those keys), and the page is smaller; other norms are refused in Chinese."""
    e = ex.AxesExplorer(layout="image", norm="batchnorm", norms=("batchnorm",))
    full = ex.AxesExplorer()
    controls = {c["name"]: c for c in e.spec["controls"]}
    assert controls["norm"]["options"] == [["batchnorm", "BatchNorm"]]
    assert "num_groups" not in controls and [o[0] for o in controls["layout"]["options"]] == list(ex.LAYOUTS)
    assert [c for c in e.spec["controls"] if c["name"] != "norm"] == \
        [c for c in full.spec["controls"] if c["name"] not in ("norm", "num_groups")]
    assert full.spec == ex.SPEC and {k: v for k, v in e.spec.items() if k != "controls"} == \
        {k: v for k, v in ex.SPEC.items() if k != "controls"}
    assert e.controls["norm"] == "batchnorm" and e.norms == ("batchnorm",)

    grid, whole = e.static_grid(), full.static_grid()
    assert {k.split("|")[1] for k in grid} == {"batchnorm"} and {k.split("|")[0] for k in grid} == set(ex.LAYOUTS)
    assert all(k.endswith("|0") for k in grid)
    assert grid == {k: v for k, v in whole.items() if k.split("|")[1] == "batchnorm"}
    assert list(grid) == ["|".join(str(c[n]) for n in e.spec["control_order"]) for c in e.grid_controls()]
    for layout in ex.LAYOUTS:                              # every slider position of both layouts
        assert f"{layout}|batchnorm|{','.join(map(str, ex.DEFAULT_SHAPE[layout]))}|0" in grid
    assert grid["image|batchnorm|4,6,3,3|0"] == e.data
    small, large = e.static_html(png=e.png()), full.static_html(png=full.png())
    assert len(small.encode()) < len(large.encode()) / 3, (len(small.encode()), len(large.encode()))

    sel = e.update(layout="text")                          # BatchNorm on text: one group per feature E
    assert sel.n_groups == ex.DEFAULT_SHAPE["text"][2] and e.data["norm"] == "batchnorm"
    e.set_controls(norm="layernorm_text")                  # as a browser could send it: refused, the state stays
    assert "只提供 batchnorm" in e.error and "(norm must be one of this explorer's norms" in e.error
    assert e.selection.norm == "batchnorm" and e.data["norm"] == "batchnorm"
    with pytest.raises(ValueError, match="只提供 batchnorm"):
        e.update(norm="groupnorm")
    with pytest.raises(ValueError, match="只提供 batchnorm"):
        e.compute({"layout": "image", "norm": "rmsnorm", "shape": "4,6,3,3", "num_groups": 0})
    assert e.selection.norm == "batchnorm"

    two = ex.AxesExplorer("text", norms=["layernorm_text", "groupnorm", "layernorm_text"])   # order kept, once each
    assert two.norms == ("layernorm_text", "groupnorm") and two.controls["norm"] == "layernorm_text"
    assert [c["name"] for c in two.spec["controls"]][:3] == ["layout", "norm", "num_groups"]
    assert ex.AxesExplorer(norms="rmsnorm").norms == ("rmsnorm",)        # one name alone is one norm


@pytest.mark.parametrize("kwargs,message", [
    ({"norms": ()}, r"norms 至少要有一个归一化.*\(norms must not be empty\.\)"),
    ({"norms": ("batchnorm", "weightnorm")}, r"未知的归一化 norms 中的 'weightnorm'.*\(unknown norm name in norms\)"),
    ({"norm": "layernorm_text", "norms": ("batchnorm",)},
     r"只提供 batchnorm，不提供 norm='layernorm_text'.*\(norm must be one of this explorer's norms: batchnorm\.\)"),
    ({"norm": "batch_norm", "norms": ("batchnorm",)}, r"未知的归一化 norm='batch_norm'.*\(unknown norm name\)"),
])
def test_bad_norms_get_a_clear_chinese_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ex.AxesExplorer(layout="image", **kwargs)


def test_the_bundle_is_static_html_in_the_book_and_the_widget_elsewhere(monkeypatch):
    e = ex.AxesExplorer("text", norm="layernorm_text")
    monkeypatch.setenv("NORMLAB_STATIC", "1")
    data, _ = e._repr_mimebundle_()
    assert "normlab-web" in data["text/html"] and data["image/png"] and "axes explorer" in data["text/plain"]
    assert "application/vnd.jupyter.widget-view+json" not in data
    monkeypatch.delenv("NORMLAB_STATIC")
    data, _ = e._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data and data["image/png"] and "text/html" not in data


def test_front_end_files_follow_the_contract():
    js = (WEB / "explorer.js").read_text(encoding="utf-8")
    css = web_host.css_text("explorer")                 # web/common.css, then web/explorer.css
    assert "export default" in js and not re.search(r"^\s*import\b|\bimport\(|https?://", js, flags=re.M)
    used = set(re.findall(r"\bmodel\.(\w+)\(", js))
    assert used <= {"get", "set", "save_changes", "on", "off"}, used
    for attr in ('"data-cell"', "dataset.group", '"selected"', '"same"', "lastUpdateMs", "ArrowLeft", '"Enter"'):
        assert attr in js, attr
    assert '"Noto Sans CJK SC", "Source Han Sans SC", "WenQuanYi Micro Hei", "Microsoft YaHei"' in css
    sizes = [float(v) for v in re.findall(r"font-size:\s*([\d.]+)px", css)]
    assert sizes and min(sizes) >= 14 and "url(" not in css and "@import" not in css


def test_static_grid_has_every_norm_and_layout():
    fig = ex.static_grid()
    titles = [ax.get_title() + " " + ax.get_figure(root=False).get_suptitle() for ax in fig.axes]   # a norm's name: its subfigure's
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


# --- the front-end in Chromium, with no kernel (the static fragment the book embeds) ---------------------

DRAWN = """() => {
  const view = document.querySelector('.normlab-web-view');
  const cells = Array.from(view.querySelectorAll('[data-cell]'));
  return { key: view.dataset.key, ms: view.dataset.lastUpdateMs, error: view.querySelector('.nl-ax-error').textContent,
           cells: cells.map(c => c.dataset.cell), groups: cells.map(c => Number(c.dataset.group)),
           selected: cells.filter(c => c.classList.contains('selected')).map(c => c.dataset.cell),
           same: cells.filter(c => c.classList.contains('same')).map(c => c.dataset.cell),
           text: view.textContent };
}"""


def test_front_end_in_chromium_without_a_kernel(browser, artifacts, tmp_path):
    """Controls, clicks and arrow keys on the static page: the highlighted cells are always the selected
    cell's group in the grid's entry for the controls shown; Chinese renders as glyphs."""
    from test_browser_book import GLYPH_CHECK

    glyphs = GLYPH_CHECK.replace("document.body", "document.querySelector('.nl-explorer')")
    viz.use_style(quiet=True)
    e = ex.AxesExplorer("image")
    grid = e.static_grid()
    from conftest import open_static_widget

    page, problems = open_static_widget(browser, tmp_path, e, "explorer")
    page.wait_for_selector(".nl-ax-cell")
    times = []

    def check(expect_key=None):
        d = page.evaluate(DRAWN)
        if expect_key:
            assert d["key"] == expect_key
        entry = grid[d["key"]]
        if "__error__" in entry:
            assert d["error"] == entry["__error__"]
            return d
        assert d["error"] == "" and d["groups"] == entry["ids"] and len(d["selected"]) == 1
        g = d["groups"][d["cells"].index(d["selected"][0])]
        assert sorted(d["same"]) == sorted(c for c, h in zip(d["cells"], d["groups"]) if h == g)
        assert len(d["same"]) == entry["group_size"] and entry["module"] in d["text"]
        if d["ms"]:
            times.append(float(d["ms"]))
        return d

    assert "预先计算的网格" in check("image|batchnorm|4,6,3,3|0")["text"]
    for norm in ex.NORMS:
        page.select_option("select[name=norm]", norm)
        check(f"image|{norm}|4,6,3,3|{2 if norm == 'groupnorm' else 0}")
    assert page.locator("select[name=num_groups]").is_disabled()    # G only for GroupNorm
    page.select_option("select[name=norm]", "groupnorm")
    page.select_option("select[name=num_groups]", "3")
    check("image|groupnorm|4,6,3,3|3")
    page.locator("input[name=C]").fill("4")                       # G=3 does not divide 4: G follows (2)
    check("image|groupnorm|4,4,3,3|2")
    page.locator(".nl-ax-cell[data-cell='0,0,0']").click()
    assert check()["selected"] == ["0,0,0"]
    for key, want in [("ArrowRight", "0,0,1"), ("ArrowDown", "0,1,1"), ("ArrowLeft", "0,1,0"), ("ArrowLeft", "0,1,0")]:
        page.keyboard.press(key)
        assert check()["selected"] == [want], key
    page.locator(".nl-ax-cell[data-cell='3,2,8']").focus()
    page.keyboard.press("Enter")
    assert check()["selected"] == ["3,2,8"]
    page.keyboard.press("ArrowRight")                              # the last column of the last slice: stays
    assert check()["selected"] == ["3,2,8"]
    page.select_option("select[name=norm]", "instancenorm")
    page.locator("input[name=H]").fill("1")
    page.locator("input[name=W]").fill("1")
    assert "至少需要 2 个空间位置" in check("image|instancenorm|4,4,1,1|0")["error"]
    page.select_option("select[name=layout]", "text")              # a new layout: its default shape
    check("text|instancenorm|4,6,8|0")
    page.select_option("select[name=norm]", "layernorm_text")
    page.locator(".nl-ax-cell[data-cell='1,2,3']").click()
    d = check("text|layernorm_text|4,6,8|0")
    assert sorted(d["same"]) == [f"1,2,{k}" for k in range(8)]     # one token: its E features
    assert page.evaluate(glyphs)                                   # the widget's font list draws CJK
    page.screenshot(path=str(artifacts / "explorer_static.png"), full_page=True)
    page.close()
    assert not problems, problems
    assert times and max(times) < 200, times                       # a sanity bound, not the benchmark



def test_front_end_offers_only_the_page_norms(browser, artifacts, tmp_path):
    """The static page of ``norms=("batchnorm",)``: the norm select shows BatchNorm, disabled (nothing to
    choose), no G select; the layout select and the sliders still work over the smaller grid. After every
    change the whole widget fits in its view (which keeps its height: a smaller picture does not move the
    page below it) and the drawn groups are the grid's."""
    e = ex.AxesExplorer(layout="image", norm="batchnorm", norms=("batchnorm",))
    grid = e.static_grid()
    page_file = tmp_path / "explorer_bn.html"
    page_file.write_text("<!doctype html><html><head><meta charset='utf-8'><link rel='icon' href='data:,'></head>"
                         f"<body style='width:900px'>{e.static_html(png=e.png())}<p id='after'>后文</p></body></html>",
                         encoding="utf-8")
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    problems = []
    page.on("pageerror", lambda err: problems.append(str(err)))
    page.goto(page_file.as_uri())
    page.wait_for_selector(".nl-ax-cell")
    norm = page.locator("select[name=norm]")
    assert norm.is_disabled() and norm.evaluate("s => Array.from(s.options).map(o => o.value)") == ["batchnorm"]
    assert not page.locator("select[name=num_groups]").is_visible()
    fits = """() => { const v = document.querySelector('.normlab-web-view'), r = v.querySelector('.nl-explorer');
                      return [r.getBoundingClientRect().height, v.getBoundingClientRect().height,
                              document.getElementById('after').getBoundingClientRect().top]; }"""
    tops = []

    def check(key):
        page.wait_for_function("k => document.querySelector('.normlab-web-view').dataset.key === k", arg=key)
        d = page.evaluate(DRAWN)
        assert d["error"] == "" and d["groups"] == grid[key]["ids"] and len(d["selected"]) == 1
        g = d["groups"][d["cells"].index(d["selected"][0])]
        assert sorted(d["same"]) == sorted(c for c, h in zip(d["cells"], d["groups"]) if h == g)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        root, view, after = page.evaluate(fits)
        assert root <= view + 0.5, (key, root, view)             # nothing of the widget is cut off
        tops.append(after)

    check("image|batchnorm|4,6,3,3|0")
    page.select_option("select[name=layout]", "text")
    check("text|batchnorm|4,6,8|0")
    page.locator("input[name=E]").fill("3")
    check("text|batchnorm|4,6,3|0")
    page.locator(".nl-ax-cell[data-cell='1,2,0']").click()
    assert page.evaluate(DRAWN)["same"] == sorted(f"{k},{r},0" for k in range(4) for r in range(6))   # one feature
    page.select_option("select[name=layout]", "image")
    check("image|batchnorm|4,6,3,3|0")
    page.locator("input[name=C]").fill("2")
    check("image|batchnorm|4,2,3,3|0")
    assert tops == sorted(tops), tops                        # the text below never moves up
    page.locator(".normlab-web").screenshot(path=str(artifacts / "explorer_static_batchnorm.png"))
    page.close()
    assert not problems, problems


def test_static_figure_can_show_batchnorm_alone():
    """Lesson 02 draws BatchNorm only (the other norms are lesson 03's): one row, both layouts,
    each panel titled with the count of statistics groups the real reduction gives."""
    import matplotlib.pyplot as plt

    fig = ex.static_grid(norms=("batchnorm",))
    titles = [ax.get_title() + " " + ax.get_figure(root=False).get_suptitle() for ax in fig.axes]   # a norm's name: its subfigure's
    assert len(fig.axes) == 2 and all(t.startswith("BatchNorm") for t in titles)
    assert "4 组统计量" in titles[0] and "4 组统计量" in titles[1]      # C = 4 channels, E = 4 features
    plt.close(fig)
    with pytest.raises(ValueError, match="norms"):
        ex.static_grid(norms=("weightnorm",))


def test_the_shipped_grid_is_the_one_the_code_computes():
    """data/explorer_grid.json.gz (the book's and JupyterLab's grid, read instead of 20 s of computing): made
    for every key the code's grid has now, and a spread of its entries equal a fresh computation."""
    import random

    from normlab.widgets import explorer, grid_file
    from normlab.widgets.web_host import ERROR_KEY, control_order, grid_key

    shipped = grid_file.read(explorer.GRID_FILE, explorer.grid_header())
    assert shipped is not None, "stale or missing: python -c \"from normlab.widgets import explorer; explorer.write_grid()\""
    states = explorer.grid_controls_for(explorer.NORMS)
    order = control_order(explorer.spec_for(explorer.NORMS))
    for c in random.Random(0).sample(states, 25):
        try:
            fresh = explorer.explorer_data(c["norm"], c["layout"], [int(v) for v in c["shape"].split(",")],
                                           c["num_groups"] or 2)
        except ValueError as err:
            fresh = {ERROR_KEY: str(err)}
        assert shipped[grid_key(c, order)] == fresh, c
