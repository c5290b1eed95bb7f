"""The backward cards (functions): LayerNorm, BatchNorm, RMSNorm and GroupNorm backward.

Each card runs the submission on four probes (eps 1e-5 and 1e-2, |x| from 1e-3 to 1e3) in the card's layout;
when every probe of that layout raises, in the other layouts the card allows ((B, T, D) for LN/RMS, (N, C, L)
and (N, C, H, W) for BN, γ shaped (1, C, 1, 1) for GN), and the report says which layouts ran. Each returned
gradient is compared with float64 autograd of the norm (geometry.py) and, when it differs, named: a known
slip in the statistics (search), a constant factor, or a least-squares fit on the true terms (backward_fit)."""

from __future__ import annotations

import inspect

import torch
from torch import Tensor

from ..report import Finding, SubmissionError, short
from .backward_compare import compare
from .geometry import Geometry
from .probes import PROD, fail, guarded, is_timeout, step

# (label, shapes, γ shaped to broadcast): the card's layout first, then the ones tried when it raises everywhere
LAYOUTS = {
    "layernorm": [("(N, D)", [(4, 8), (6, 5), (4, 8), (3, 8)], False),
                  ("(B, T, D)", [(2, 3, 8), (2, 3, 5), (2, 2, 8), (3, 2, 8)], False)],
    "batchnorm": [("(N, C)", [(8, 4), (5, 3), (8, 4), (6, 4)], False),
                  ("(N, C, L)", [(4, 3, 5), (3, 3, 4), (4, 4, 3), (3, 4, 4)], False),
                  ("(N, C, H, W)", [(2, 3, 2, 3), (3, 3, 2, 2), (2, 4, 3, 2), (2, 4, 2, 2)], False)],
    "groupnorm": [("(N, C, H, W)", [(2, 6, 2, 3), (3, 4, 2, 2), (2, 6, 2, 2), (2, 6, 3, 2)], False),
                  ("(N, C, H, W)，γ 形状 (1, C, 1, 1)", [(2, 6, 2, 3), (3, 4, 2, 2), (2, 6, 2, 2), (2, 6, 3, 2)], True),
                  ("(N, C, L)", [(2, 6, 4), (3, 4, 3), (2, 6, 3), (2, 6, 5)], False)],
}
LAYOUTS["rmsnorm"] = LAYOUTS["layernorm"]
GROUPS = [3, 2, 2, 3]                              # GroupNorm's G on the four probes
PROBE_VALUES = [(1e-5, 2.0, 0.5), (1e-2, 0.1, 0.0), (1e-5, 1e-3, 0.0), (1e-5, 1e3, 0.0)]

BW_ROLES = {"grad": ("grad_out", "grad_output", "dout", "dy", "grad_y", "g", "upstream", "grad", "dldy", "dl_dy"),
            "x": ("x", "inp", "input", "inputs", "h", "z"),
            "weight": ("weight", "gamma", "w", "g_", "scale"),
            "bias": ("bias", "beta", "b"),
            "groups": ("num_groups", "groups", "group", "n_groups", "ngroups"),
            "eps": ("eps", "epsilon")}
CARD_ORDER = {"groupnorm": ["grad", "x", "weight", "groups", "eps"]}
CARD_WORDS = {"grad": "grad_out", "x": "x", "weight": "weight", "bias": "bias", "groups": "num_groups", "eps": "eps"}


def _bw_args(fn, values: dict, which_norm: str, out):
    """Arguments in the order the function names them (dout, x, gamma, beta, eps ...); the card's order when
    the names say nothing. A bias argument gets zeros."""
    order = CARD_ORDER.get(which_norm, ["grad", "x", "weight", "eps"])
    card = tuple(values[r] for r in order)
    try:
        every = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return card
    if any(p.kind == p.VAR_POSITIONAL for p in every):
        return card                     # f(grad_out, x, weight, *rest): the card's order
    params = [p for p in every if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.name.lower() == "cache" for p in params) and not any(f.id == "signature_cache" for f in out):
        out.append(fail("signature_cache", f"函数的参数是 ({', '.join(p.name for p in params)})：要前向存下的 cache（CS231n 的写法）。"
                        f"本卡片的签名是 ({', '.join(CARD_WORDS[r] for r in order)})：反向自己从 x 重算 μ、σ 和 x̂，"
                        "检查器按这个签名调用 (signature differs from the card's)"))
    roles = []
    for p in params:
        role = "groups" if p.name == "G" else next((r for r, names in BW_ROLES.items() if p.name.lower() in names), None)
        if role is None:
            if p.default is not inspect.Parameter.empty:
                break
            return card
        roles.append(role)
    if roles in (order, []) or len(set(roles)) != len(roles) or not {"grad", "x", "weight"} <= set(roles):
        return card
    if not any(f.id == "signature" for f in out):
        out.append(fail("signature", f"参数顺序是 ({', '.join(p.name for p in params[:len(roles)])})：本卡片约定 "
                        f"({', '.join(CARD_WORDS[r] for r in order)})，按参数名对应着检查 (arguments matched by name)",
                        level=PROD))
    return tuple(values[r] for r in roles)


def _probe(shape, k, which_norm, bcast, g):
    eps, scale, offset = PROBE_VALUES[k]
    geo = Geometry(which_norm, shape, GROUPS[k] if which_norm == "groupnorm" else 1)
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * scale + offset).requires_grad_(True)
    w = (torch.randn(geo.features, generator=g, dtype=torch.float64) + 1).requires_grad_(True)
    b = torch.randn(geo.features, generator=g, dtype=torch.float64).requires_grad_(True)
    gy = torch.randn(shape, generator=g, dtype=torch.float64)
    (geo.forward(x, w, b, eps) * gy).sum().backward()
    expected = (x.grad, w.grad) + ((b.grad,) if geo.center else ())
    return {"x": x.detach(), "w": w.detach(), "gy": gy, "eps": eps, "expected": expected, "geo": geo, "bcast": bcast,
            "label": f"{shape}" + (f", G={geo.groups}" if which_norm == "groupnorm" else "") + f", eps={eps:g}, |x|≈{scale:g}"}


def _call(fn, p, which_norm, mode, out, first):
    """The submission's gradients on one probe (torch tensors; a NumPy solution gets arrays)."""
    w = p["w"].clone()
    if p["bcast"]:
        w = p["geo"].wb(w)
    values = {"grad": p["gy"].clone(), "x": p["x"].clone(), "weight": w, "bias": torch.zeros_like(w),
              "groups": p["geo"].groups, "eps": p["eps"]}
    args = _bw_args(fn, values, which_norm, out)
    as_numpy = lambda: tuple(a.numpy() if isinstance(a, Tensor) else a for a in args)      # noqa: E731
    if mode["numpy"]:
        return guarded(fn, *as_numpy())
    try:
        return guarded(fn, *args)
    except SubmissionError as err:      # a NumPy solution (cs231n-style)? try it with arrays
        if is_timeout(err) or not first:
            raise
        try:
            got = guarded(fn, *as_numpy())
        except SubmissionError:
            raise err from None
        mode["numpy"] = True
        return got


def _returned(got, p, names, out) -> tuple | None:
    """The returned gradients as tensors of the expected shapes; each one that is None, not a tensor or of the
    wrong shape is a finding named as such (None: nothing to compare)."""
    if isinstance(got, tuple | list):
        got = tuple(torch.as_tensor(r) if hasattr(r, "__array__") and not isinstance(r, Tensor) else r for r in got)
    expected = p["expected"]
    if not isinstance(got, tuple | list) or len(got) != len(expected):
        what = "None（函数没有 return）" if got is None else short(got)
        out.append(fail("returns", f"应返回 {len(expected)} 个张量 ({', '.join(names)})，实际返回 {what}"))
        return None
    fixed = []
    geo = p["geo"]
    for name, e, r in zip(names, expected, got):
        if isinstance(r, Tensor) and r.shape != e.shape and r.numel() == e.numel() and r.squeeze().shape == e.squeeze().shape:
            if not any(f.id == "grad_shapes" for f in out):
                out.append(fail("grad_shapes", f"{name} 的形状是 {tuple(r.shape)}，应为 {tuple(e.shape)}（与参数同形）",
                                level=PROD))
            r = r.reshape(e.shape)
        if r is None or not isinstance(r, Tensor) or r.shape != e.shape:
            fixed.append(None)
            if any(f.id in (f"{name}_none", f"{name}_shape") for f in out):
                continue
        if r is None:
            out.append(fail(f"{name}_none", f"{name} 是 None：函数没有算出它 (returned None)；应为形状 {tuple(e.shape)} 的张量"))
        elif not isinstance(r, Tensor):
            out.append(fail(f"{name}_shape", f"{name} 应是张量，实际是 {type(r).__name__}"))
        elif r.shape != e.shape:
            out.append(fail(f"{name}_shape", f"{name} 的形状是 {tuple(r.shape)}，应为 {tuple(e.shape)}" +
                            _axis_hint(name, tuple(r.shape), geo), p["x"], e, r))
        else:
            fixed.append(r)
    return tuple(fixed)


def _axis_hint(name: str, shape: tuple, geo: Geometry) -> str:
    """For a parameter's gradient of the wrong shape: which axes it was summed over, when that explains it."""
    if name == "grad_x":
        return ""
    rank = len(geo.shape)
    kept = [k for k in range(rank) if shape == (geo.shape[k],)]
    if len(kept) == 1 and kept[0] != geo.channel_axis:      # only a shape that one axis explains is read this way
        keep = kept[0]
        return (f"：你在 dim={tuple(a for a in range(rank) if a != keep)} 上求和，留下了 dim={keep}；"
                f"参数的梯度应在 dim={geo.sum_axes} 上求和，留下参数所在的 dim={geo.channel_axis}")
    return "（与参数同形）"


def backward_checks(fn, which_norm: str, out: list[Finding] | None = None) -> list[Finding]:
    out = [] if out is None else out
    names = ["grad_x", "grad_weight", "grad_bias"][:2 if which_norm == "rmsnorm" else 3]
    mode = {"numpy": False}
    results = []
    for label, shapes, bcast in LAYOUTS[which_norm]:
        g = torch.Generator().manual_seed(2)
        probes, crashed, errs = [], [], []
        for k, shape in enumerate(shapes):
            p = _probe(shape, k, which_norm, bcast, g)
            with step(errs, "returns"):
                got = _call(fn, p, which_norm, mode, out, first=not probes and not results and k == 0)
                fixed = _returned(got, p, names, out)
                if fixed is None:
                    return out
                p["got"] = tuple(None if r is None else r.detach().double() for r in fixed)
                p["raw_got"] = fixed
                probes.append(p)
                continue
            crashed.append(p["label"])
        results.append((label, probes, crashed, errs))
        if probes:
            break
    label, probes, crashed, errs = results[-1] if results[-1][1] else results[0]
    card_errs, card_crashed = results[0][3], results[0][2]
    if card_errs:
        first = next((f for f in card_errs if f.id == "returns"), card_errs[0])
        out.append(first)
        out.extend(f for f in card_errs if f.id == "keepdim_missing")
        where = ("所有输入都报错" if len(results) == 1 and not probes else
                 f"其余 {len(probes)} 组输入照常比较" if len(results) == 1 else "这一布局的所有输入都报错")
        first.message += f"（在输入 {'; '.join(card_crashed)} 上；{where}）"
    tried = [r[0] for r in results]
    if len(results) > 1:
        card = tried[0]
        if probes:
            out.append(fail("layout", f"本卡片的 {card} 输入全部报错；改用 {label} 输入，{len(probes)} 组都运行了，下面的比较在 "
                            f"{label} 上 (ran on {label} only)。试过的布局 (layouts tried)：{'、'.join(tried)}"))
        else:
            out.append(fail("layout", f"试过的布局全部报错 (every layout raised)：{'、'.join(tried)}"))
    if not probes:
        return out
    with step(out, "gradients"):        # the comparison and the search: a finding, never a lost report
        compare(probes, names, which_norm, out)
    return out
