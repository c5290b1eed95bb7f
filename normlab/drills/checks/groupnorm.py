"""The GroupNorm card (module): class GroupNorm(num_groups, num_channels, eps=1e-5), input (N, C, H, W).

What students write is CS231n's spatial_groupnorm_forward: x.reshape(N, G, C // G, H, W), the mean and variance
over the group's channels and space, back to (N, C, H, W), then γ/β per channel. Checked against
F.group_norm's semantics in float64 (geometry.py; tests compare it with F.group_norm) on probes with G = 3 and
G = 2, eps 1e-5 and 1e-2, |x| 1e-3 … 1e3. A wrong output is named from a search over the slips this card
has — the groups over the wrong axis (channels c, c + G, ... interleaved, or the group's channels at one
position), per-channel statistics (InstanceNorm), one group for all (LayerNorm over C, H, W) — crossed with
the variance, ε and root slips; γ per group instead of per channel is named from the parameters' sizes."""

from __future__ import annotations

import inspect
import itertools

import torch
from torch import nn

from ..report import Finding, SubmissionError, guarded
from . import roles
from .geometry import Geometry
from .probes import (PROD, _raised, close, fail, find_bias, find_gain, is_timeout, ok, output_of, param_problems, set_tensor,
                     step, tensors_of)
from .properties import groups as moved_axes

C = 6
PLAN = [((2, C, 3, 4), 3, 1e-5, 3.0, 1.0), ((3, C, 2, 3), 2, 1e-2, 0.1, 0.0), ((2, C, 3, 4), 3, 1e-5, 1e-3, 0.0),
        ((2, C, 2, 2), 2, 1e-5, 1e3, 0.0)]
GROUPINGS = {
    "group": None,
    "interleaved": ("groups_wrong_axis", "分组的轴不对 (groups over the wrong axis)：你的组是隔 G 取一个通道（通道 c, c+G, c+2G …，"
                    "例如 x.reshape(N, C // G, G, H, W) 后在 dim=(1, 3, 4) 上求）；GroupNorm 的组是相邻的 C/G 个通道："
                    "x.reshape(N, G, C // G, H, W)，在 dim=(2, 3, 4) 上求"),
    "position": ("groups_wrong_axis", "分组的轴不对 (groups over the wrong axis)：统计量只在组内的通道上求、每个空间位置各一个"
                 "（dim=2）；GroupNorm 在组内的通道和所有空间位置上一起求：x.reshape(N, G, -1) 的最后一维"),
    "channel": ("per_channel_stats", "每个通道一个统计量 (per-channel instead of per-group statistics)：那是 InstanceNorm；"
                "GroupNorm 把相邻的 C/G 个通道连同空间位置合成一组，每个样本 G 个统计量"),
    "layer": ("one_group", "所有通道合成了一组 (one group over C, H, W: num_groups ignored)：那是 G = 1 的 LayerNorm；"
              "按 num_groups 分成 G 组，每组 C/G 个通道"),
}


def _stats_of(x, G, grouping, var, eps_kind, eps):
    N, Cx = x.shape[:2]
    if grouping == "group":
        v = x.reshape(N, G, -1)
        dims = (-1,)
    elif grouping == "interleaved":
        v = x.reshape(N, Cx // G, G, -1).transpose(1, 2)
        dims = (2, 3)
    elif grouping == "position":
        v = x.reshape(N, G, Cx // G, -1)
        dims = (2,)
    elif grouping == "channel":
        v = x.reshape(N, Cx, -1)
        dims = (-1,)
    else:
        v = x.reshape(N, 1, -1)
        dims = (-1,)
    mu = v.mean(dims, keepdim=True)
    s = (v - mu).pow(2).mean(dims, keepdim=True)
    if var == "unbiased":
        n = 1
        for d in dims:
            n *= v.shape[d]
        s = s * n / (n - 1)
    if eps_kind == "outside":
        den = s.sqrt() + eps
    elif eps_kind == "noroot":
        den = s + eps
    else:
        den = torch.sqrt(s + (0.0 if eps_kind == "none" else eps if eps_kind == "inside" else eps_kind))
    y = (v - mu) / den
    if grouping == "interleaved":
        y = y.transpose(1, 2)
    return y.reshape(x.shape)


def _candidate(p, grouping="group", var="biased", eps_kind="inside"):
    key = (grouping, var, eps_kind)
    if key not in p["cache"]:
        wb = p["geo"].wb(p["w"])
        p["cache"][key] = _stats_of(p["x"], p["G"], grouping, var, eps_kind, p["eps"]) * wb + p["geo"].wb(p["b"])
    return p["cache"][key]


SLIPS = {"grouping": ["interleaved", "position", "channel", "layer"], "var": ["unbiased"],
         "eps_kind": ["outside", "none", "noroot", 1e-5, 1e-6]}


def _search(probes):
    for k in (1, 2, 3):
        for dims in itertools.combinations(SLIPS, k):
            for values in itertools.product(*(SLIPS[d] for d in dims)):
                change = dict(zip(dims, values))
                if all(close(p["got"], _candidate(p, **change), 1e-4) for p in probes):
                    return change
    return None


def _slip_texts(change, eps) -> dict[str, str]:
    texts = {}
    if "grouping" in change:
        id, text = GROUPINGS[change["grouping"]]
        texts[id] = text
    if change.get("var") == "unbiased":
        texts["unbiased_variance"] = "用了无偏方差 (unbiased variance, 除以 n−1)：GroupNorm 和 F.group_norm 用有偏方差（除以 n）"
    e = change.get("eps_kind")
    if e == "outside":
        texts["eps_outside_root"] = "ε 放在了根号外 (eps outside the square root)：应为 sqrt(var + ε)"
    elif e == "none":
        texts["eps_missing"] = "公式里没有 ε (eps missing)：应为 sqrt(var + self.eps)"
    elif e == "noroot":
        texts["no_sqrt"] = "除以了方差而不是标准差 (no square root)：分母应为 sqrt(var + ε)"
    elif isinstance(e, float):
        texts["eps_ignored"] = f"传入的 eps 没有被使用 (the eps argument is ignored)：输出相当于 eps={e:g}；用 self.eps"
    return texts


def _build(impl, G, eps):
    try:
        return guarded(impl, G, C, eps=eps), True
    except SubmissionError as err:
        if is_timeout(err) or "eps" not in str(err):
            raise
    m = guarded(impl, G, C)
    for name in ("eps", "epsilon"):
        if hasattr(m, name):
            setattr(m, name, eps)
    return m, False


def as_module(fn):
    """CS231n's function form, spatial_groupnorm_forward(x, gamma, beta, G, gn_param) -> (out, cache), as the
    module the card asks for (γ/β shaped (1, C, 1, 1) as that assignment passes them); None for anything else."""
    if inspect.isclass(fn) or not callable(fn):
        return None
    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        return None
    if len(names) < 4 or names[0].lower() not in ("x", "inp", "input") or names[1].lower() not in ("gamma", "weight", "w"):
        return None

    class FunctionGroupNorm(nn.Module):
        def __init__(self, num_groups, num_channels, eps=1e-5):
            super().__init__()
            self.num_groups, self.eps = num_groups, eps
            self.weight = nn.Parameter(torch.ones(num_channels))
            self.bias = nn.Parameter(torch.zeros(num_channels))

        def forward(self, x):
            shape = (1, x.shape[1]) + (1,) * (x.dim() - 2)
            rest = [self.num_groups, {"eps": self.eps}][:len(names) - 3]
            y = fn(x, self.weight.reshape(shape), self.bias.reshape(shape), *rest)
            return y[0] if isinstance(y, tuple | list) else y
    return FunctionGroupNorm


def gn_checks(impl, out: list[Finding] | None = None) -> list[Finding]:
    out = [] if out is None else out
    module = as_module(impl)
    if module is not None:
        out.append(fail("function_form", "这是函数形式（CS231n 的 spatial_groupnorm_forward(x, gamma, beta, G, gn_param)）："
                        "按它的参数包装成模块来检查；本卡片和 torch 一样要 class GroupNorm(num_groups, num_channels, eps)，"
                        "weight/bias 是模块自己的 (C,) 参数", level=PROD))
        impl = module
    g = torch.Generator().manual_seed(3)
    roles.learn(lambda c, **o: _build(impl, 3, o.get("eps", 1e-5))[0], C, (2, C, 3, 4), 1, (0, 2, 3), roles.generator(),
                running=False)
    with step(out, "construct"):
        _params(impl, out)
    if _raised(out, "construct"):
        return out
    per_group = any(f.id == "gamma_per_group" for f in out)
    probes, problems = [], []
    for shape, G, eps, scale, offset in PLAN:
        with step(problems, "forward"):
            probes.append(_probe(impl, shape, G, eps, scale, offset, g, per_group))
    said = set()
    for f in problems:
        if f.message not in said:
            said.add(f.message)
            out.append(f)
    bad = [p for p in probes if not close(p["got"], p["expected"], 1e-4)]
    if probes and not bad and not problems:
        out.append(ok("forward", "G=3/2、eps=1e-5/1e-2、|x|≈1e-3…1e3 的 (N, C, H, W) 输入都与 F.group_norm 一致"))
    elif bad:
        change = _search(probes)
        p = bad[0]
        if change:
            texts = _slip_texts(change, p["eps"])
            both = f"（同时有 {len(texts)} 处错误）" if len(texts) > 1 else ""
            for k, (id, text) in enumerate(texts.items()):
                out.append(fail(id, text + both, *((p["x"], p["expected"], p["raw"]) if k == 0 else ())))
        else:
            out.append(fail("forward", _measured(impl, p) + f"；不一致的输入：{'; '.join(q['label'] for q in bad)}",
                            p["x"], p["expected"], p["raw"]))
    if bad or problems or not probes:
        return out
    with step(out, "gradients"):
        _gradients(impl, g, out)
    _production(impl, g, out)
    return out


def _params(impl, out):
    m, _ = _build(impl, 3, 1e-5)
    gname, w = find_gain(m, C)
    bname, b = find_bias(m, C, gname)
    small = [(n, t) for n, t in tensors_of(m).items() if t.numel() == 3 and t.requires_grad]
    if w is None and small:
        out.append(fail("gamma_per_group", f"γ/β 每组一个（self.{small[0][0]} 有 G = 3 个元素）(gamma per group instead of per "
                        f"channel)：GroupNorm 的 weight/bias 每个通道一个，形状 (C,) = ({C},)，只有统计量是每组的"))
        return
    problems = param_problems(m, ((gname, w, "γ", 1), (bname, b, "β", 0)), C)
    out.append(fail("params", "；".join(problems) + f"：GroupNorm(3, {C}) 应有可学习的 γ（初值 1）和 β（初值 0），各 C = {C} "
                    "个元素 (nn.Parameter self.weight / self.bias)") if problems else
               ok("params", f"γ (self.{gname}) 初值 1、β (self.{bname}) 初值 0，各 C = {C} 个元素"))


def _probe(impl, shape, G, eps, scale, offset, g, per_group):
    mod, _ = _build(impl, G, eps)
    numel = G if per_group else C
    gname, w = find_gain(mod, numel) if not per_group else next(
        ((n, t) for n, t in tensors_of(mod).items() if t.numel() == G and t.requires_grad), (None, None))
    bname, b = find_bias(mod, numel, gname) if not per_group else next(
        ((n, t) for n, t in tensors_of(mod).items() if t.numel() == G and t.requires_grad and n != gname), (None, None))
    wv, bv = torch.randn(numel, generator=g) + 1, torch.randn(numel, generator=g)
    if w is not None:
        set_tensor(w, wv)
    if b is not None:
        set_tensor(b, bv)
    wc = wv.repeat_interleave(C // G) if per_group else wv        # what the module's γ means per channel
    bc = bv.repeat_interleave(C // G) if per_group else bv
    x = torch.randn(shape, generator=g) * scale + offset
    x0 = x.clone()
    geo = Geometry("groupnorm", shape, G)
    exp = geo.forward(x, wc if w is not None else torch.ones(C), bc if b is not None else torch.zeros(C), eps)
    got = output_of(mod, x)
    if not torch.equal(x, x0):
        raise SubmissionError("输入张量被原地修改了 (the input was modified in place)")
    if got.shape != x.shape:
        raise SubmissionError(f"输出形状应为 {tuple(x.shape)}，实际 {tuple(got.shape)}")
    return {"x": x0, "G": G, "eps": eps, "geo": geo, "w": wc.double(), "b": bc.double(), "expected": exp,
            "got": got.detach().double(), "raw": got.detach(), "cache": {}, "mod": mod,
            "label": f"{tuple(shape)}, G={G}, eps={eps:g}, |x|≈{scale:g}", "x64": x0.double()}


def _measured(impl, p) -> str:
    """No known slip reproduces the output: say which elements share statistics (perturb one, see what moves)."""
    try:
        mod = p["mod"]
        axes = moved_axes(lambda t: output_of(mod, t).detach().double(), p["x"].clone(), p["got"])
    except SubmissionError:
        axes = None
    if axes is None:
        return "输出与 F.group_norm 不一致 (values differ)"
    return (f"输出与 F.group_norm 不一致：改动一个元素，dim={axes} 上的输出都变了——你的统计量在这些维上；GroupNorm "
            "的统计量在每个样本的一组通道（C/G 个相邻通道）及其空间位置上")


def _gradients(impl, g, out):
    shape, G, eps = (2, C, 3, 2), 3, 1e-5
    mod, _ = _build(impl, G, eps)
    gname, w = find_gain(mod, C)
    bname, b = find_bias(mod, C, gname)
    x = (torch.randn(shape, generator=g) * 2).requires_grad_(True)
    gy = torch.randn(shape, generator=g)
    (output_of(mod, x) * gy).sum().backward()
    xr = x.detach().double().requires_grad_(True)
    wr = (w.detach().double().flatten() if w is not None else torch.ones(C, dtype=torch.float64)).requires_grad_(True)
    br = (b.detach().double().flatten() if b is not None else torch.zeros(C, dtype=torch.float64)).requires_grad_(True)
    (Geometry("groupnorm", shape, G).forward(xr, wr, br, eps) * gy.double()).sum().backward()
    bad = [n for n, t, r in (("x", x, xr), (gname, w, wr), (bname, b, br)) if t is not None and
           (t.grad is None or not close(t.grad.flatten() if n != "x" else t.grad, r.grad, 1e-4))]
    out.append(ok("gradients", "对 x、γ、β 的梯度与 float64 autograd 一致") if not bad else
               fail("gradients", f"梯度与 autograd 不一致 (gradients differ)：{', '.join(bad)}（前向已经一致：检查 .detach()/.data、"
                    "或把 γ/β 存成了 buffer）", x.detach(), xr.grad, x.grad))


def _production(impl, g, out):
    """A drop-in for torch.nn.GroupNorm: any (N, C, *) input, torch's default eps, state_dict names, float16."""
    with step(out, "layouts", PROD):
        mod, _ = _build(impl, 2, 1e-5)
        x = torch.randn(4, C, 5, generator=g)
        got = output_of(mod, x)
        exp = torch.nn.functional.group_norm(x, 2, eps=1e-5)
        out.append(ok("layouts", "(N, C, L) 输入也与 F.group_norm 一致", PROD) if close(got, exp, 1e-4) else
                   fail("layouts", "(N, C, L) 输入的结果与 F.group_norm 不一致：torch 的 GroupNorm 接受 (N, C, *)，"
                        "用 x.reshape(N, G, -1) 而不是写死 H、W", x, exp, got, PROD))
    with step(out, "defaults", PROD):
        mod = guarded(impl, 2, C)
        x = torch.randn(2, C, 3, 3, generator=g) * 1e-3
        got = output_of(mod, x)
        good = close(got, torch.nn.functional.group_norm(x, 2, eps=1e-5), 1e-3)
        out.append(ok("defaults", "默认 eps=1e-5，与 torch 一致", PROD) if good else
                   fail("defaults", "不传 eps 时与 torch.nn.GroupNorm 的默认 eps=1e-5 不一致", x, None, got, PROD))
    with step(out, "state_dict", PROD):
        m = guarded(impl, 2, C)
        sd = m.state_dict() if hasattr(m, "state_dict") else {}
        shapes = {k: tuple(v.shape) for k, v in sd.items()}
        good = shapes.get("weight") == (C,) and shapes.get("bias") == (C,)
        out.append(ok("state_dict", "state_dict 有 weight、bias，形状 (C,)", PROD) if good else
                   fail("state_dict", f"state_dict 应有 weight、bias，形状都是 ({C},)（可以直接加载 torch 的权重）；你的是 {shapes}",
                        level=PROD))
