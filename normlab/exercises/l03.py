"""Exercises of lesson 03 (LayerNorm).

03.1  group_norm(x, num_groups, eps): GroupNorm from the reductions of LayerNorm and InstanceNorm
03.2  stat_groups(norm, B, S, E, G): how many statistics each norm computes on (B, S, E), and over how many elements
03.3  layer_norm(x, weight, bias, eps): eps inside the root; the probe where eps outside differs
03.4  masked_bn_stats(x, mask): BatchNorm's statistics over the real tokens of a padded batch
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.functional import jacobian

from .. import variants
from .base import SubmissionError, call, compare, exercise, fail, ok, step, with_fix

__all__ = ["TEXT_NORMS", "reference_groups"]


def _rand(shape: tuple[int, ...], seed: int) -> Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------------------------- 03.1

def _group_stats_norm(x: Tensor, groups: int, eps: float, interleaved: bool = False, over_batch: bool = False,
                      spatial: bool = True, unbiased: bool = False, eps_outside: bool = False) -> Tensor:
    """GroupNorm without affine, and the ways to get it wrong (each keyword one mistake)."""
    n, c = x.shape[:2]
    if interleaved:      # channel k goes to group k % G instead of k // (C/G)
        xg = x.reshape(n, c // groups, groups, -1).transpose(1, 2)
    else:
        xg = x.reshape(n, groups, c // groups, -1)
    dims = [2, 3] if spatial else [2]
    if over_batch:
        dims = [0] + dims
    mu = xg.mean(dims, keepdim=True)
    var = xg.var(dims, unbiased=unbiased, keepdim=True)
    y = (xg - mu) / (var.sqrt() + eps if eps_outside else torch.sqrt(var + eps))
    if interleaved:
        y = y.transpose(1, 2)
    return y.reshape(x.shape)


@exercise("03.1", title="用 LN 和 IN 的归约写 GroupNorm (reduction axes)", target_minutes=12, checks=6)
def check_group_norm(group_norm) -> list:
    out = []
    probes = (((4, 6), 3, 1e-5), ((2, 6, 5), 2, 1e-5), ((2, 6, 3, 3), 3, 1e-5), ((2, 6, 3, 3), 1, 1e-5),
              ((2, 6, 3, 3), 6, 1e-5), ((3, 8, 4), 4, 1e-1))
    for k, (shape, G, eps) in enumerate(probes):
        name = f"G{G}_{'x'.join(map(str, shape))}" + ("_eps0.1" if eps != 1e-5 else "")
        with step(out, name):
            C = shape[1]
            offsets = torch.arange(C, dtype=torch.float32).view(1, C, *([1] * (len(shape) - 2)))
            x = _rand(shape, seed=k) * (0.3 if eps > 1e-3 else 2.0) + 3 * offsets    # channels differ: groups matter
            got = call(group_norm, x.clone(), G, eps)
            want = F.group_norm(x, G, eps=eps)
            gn = lambda **kw: (lambda: _group_stats_norm(x, G, eps, **kw))
            mistakes = {
                "interleaved_groups": (gn(interleaved=True), f"通道分组错了：第 k 个通道应属于第 k // (C/G) 组（相邻的 C/G 个通道一组），"
                                                             f"你的是 k % G（reshape 成 (N, C/G, G, …) 了）"),
                "over_batch": (gn(over_batch=True), "统计量跨了 batch 维：GroupNorm 是每个样本自己的统计量（和 batch 大小无关）"),
                "spatial_missing": (gn(spatial=False), "每组只在通道上求了统计量，漏了空间/序列维：每组是 (C/G, H, W) 上的所有元素"),
                "g_as_group_size": (lambda: _group_stats_norm(x, C // G, eps), f"把 G 当成了每组的通道数：G = {G} 是组数，每组 C/G 个通道"),
                "unbiased_variance": (gn(unbiased=True), with_fix("用了无偏方差（÷(m − 1)）：归一化用有偏方差（÷m）", "`var(..., unbiased=False)`")),
                "eps_outside_root": (gn(eps_outside=True), "ε 在根号外 (x − μ)/(σ + ε)：应为 (x − μ)/√(σ² + ε)"),
                "ignores_groups": (lambda: _group_stats_norm(x, 1, eps), f"G = {G} 没有用上：结果是 G = 1（图像式 LayerNorm，整个样本一组）"),
                "always_instance": (lambda: _group_stats_norm(x, C, eps), f"G = {G} 没有用上：结果是 G = C（InstanceNorm，每个通道一组）"),
                "eps_ignored": (lambda: F.group_norm(x, G, eps=1e-5), f"传入的 eps = {eps:g} 没有用上"),
            }
            if G == 1:
                mistakes.pop("ignores_groups")
            if G == C:
                mistakes.pop("always_instance")
            if C // G == G:
                mistakes.pop("g_as_group_size")
            out.append(compare(name, got, want, mistakes, f"形状 {shape}、G = {G}：与 F.group_norm 一致",
                               f"形状 {shape}、G = {G}：与 F.group_norm 不一致", input=x))
    return out


# ----------------------------------------------------------------------------------------------- 03.2

def _channels_first(layer: nn.Module) -> Callable[[Tensor], Tensor]:
    return lambda x: layer(x.transpose(1, 2)).transpose(1, 2)


TEXT_NORMS: dict[str, Callable[[int, int, int, int], Callable[[Tensor], Tensor]]] = {
    # norm name (as the explorer of lesson 03): the real torch.nn layer on a (B, S, E) tensor
    "batchnorm": lambda B, S, E, G: _channels_first(nn.BatchNorm1d(E)),          # per feature e, over (B, S)
    "layernorm_text": lambda B, S, E, G: nn.LayerNorm(E),                          # per token
    "layernorm_image": lambda B, S, E, G: nn.LayerNorm([S, E]),                    # per sentence
    "instancenorm": lambda B, S, E, G: _channels_first(nn.InstanceNorm1d(E)),      # per (sentence, feature), over S
    "groupnorm": lambda B, S, E, G: _channels_first(nn.GroupNorm(G, E)),           # per (sentence, group of E/G features)
    "rmsnorm": lambda B, S, E, G: nn.RMSNorm(E),                                   # per token
}


@cache
def reference_groups(norm: str, B: int, S: int, E: int, G: int) -> tuple[int, int]:
    """(number of statistics, elements per statistic) read from the real layer's Jacobian: two
    elements share statistics when one's output depends on the other's input."""
    layer = TEXT_NORMS[norm](B, S, E, G)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        x = torch.randn(B, S, E)
    n = x.numel()
    dep = jacobian(layer, x).reshape(n, n) != 0
    dep = dep | dep.T
    label = [-1] * n
    count = 0
    for start in range(n):
        if label[start] >= 0:
            continue
        todo, label[start] = [start], count
        while todo:
            i = todo.pop()
            for j in torch.nonzero(dep[i]).flatten().tolist():
                if label[j] < 0:
                    label[j] = count
                    todo.append(j)
        count += 1
    return count, label.count(label[0])


GROUP_HINTS = {   # norm: {(count formula, size formula): the mistake it reveals}
    "batchnorm": {("S", "B*E"): ("bn_be_plane", "BN 算成了每个位置 s 一组、跨 (B, E)：那是 [E] 的“(B, E) 平面”（勘误 E1），"
                                                "其实是把 (B, S, E) 直接喂给 nn.BatchNorm1d(S) 的 bug；文本上的 BN 是每个特征 e 一组、跨 (B, S)"),
                  ("B*S", "E"): ("bn_as_layernorm", "BN 算成了每个 token 一组：那是 LayerNorm；BN 跨 batch，每个特征一组")},
    "layernorm_text": {("B", "S*E"): ("ln_per_sentence", "Transformer 式 LN 每个 token 一组（只在 E 上），你的是每个句子一组（图像式 LN）")},
    "layernorm_image": {("B*S", "E"): ("ln_per_token", "图像式 LN 每个样本（句子）一组、跨 (S, E)，你的是每个 token 一组")},
    "instancenorm": {("B*S", "E"): ("in_as_layernorm", "InstanceNorm 每个样本的每个特征（通道）一组、跨 S；你的是每个 token 一组"),
                     ("E", "B*S"): ("in_over_batch", "InstanceNorm 不跨 batch：每个样本各算各的，共 B·E 组")},
    "groupnorm": {("G", "B*S*E//G"): ("gn_over_batch", "GroupNorm 不跨 batch：每个样本 G 组，共 B·G 组"),
                  ("B*E//G", "S*G"): ("g_as_group_size", "G 是组数，不是每组的特征数：共 B·G 组，每组 S·E/G 个元素"),
                  ("B*G", "E//G"): ("gn_spatial_missing", "GroupNorm 每组包括整个序列：每组 S·E/G 个元素，不是 E/G")},
    "rmsnorm": {("B", "S*E"): ("rms_per_sentence", "RMSNorm 和 Transformer 式 LN 一样，每个 token 一组")},
}
SHAPES_03_2 = ((2, 3, 8, 2), (3, 5, 8, 4), (4, 6, 8, 4))


@exercise("03.2", title="数一数：(B, S, E) 上每种归一化有几组统计量 (statistics groups)", target_minutes=8, checks=6)
def check_stat_groups(stat_groups) -> list:
    out = []
    for norm in TEXT_NORMS:
        with step(out, norm):
            wrong = None
            for B, S, E, G in SHAPES_03_2:
                got = call(stat_groups, norm, B, S, E, G)
                if not (isinstance(got, tuple | list) and len(got) == 2):
                    raise SubmissionError(f"应返回 (组数, 每组元素数) 两个整数，实际返回 {got!r}")
                got = tuple(int(v) for v in got)
                want = reference_groups(norm, B, S, E, G)
                if got != want:
                    wrong = (B, S, E, G, got, want)
                    break
            if wrong is None:
                out.append(ok(norm, f"{norm}：{len(SHAPES_03_2)} 个形状上的组数和每组元素数都与真实层的雅可比矩阵一致"))
                continue
            B, S, E, G, got, want = wrong
            where = dict(shape=f"(B, S, E) = {(B, S, E)}, G = {G}", expected=want, got=got)
            sizes = dict(B=B, S=S, E=E, G=G)
            for (count, size), (mistake, message) in GROUP_HINTS.get(norm, {}).items():
                if got == (eval(count, {}, sizes), eval(size, {}, sizes)):     # the wrong formula, on this shape
                    out.append(fail(mistake, message, **where))
                    break
            else:
                out.append(fail(norm, f"{norm} 的 (组数, 每组元素数) 不对：用 explorer 点一个格子看看哪些格子共用统计量", **where))
    return out


# ----------------------------------------------------------------------------------------------- 03.3

@exercise("03.3", title="LayerNorm：ε 在根号里面 (eps inside the root)", target_minutes=8, checks=4)
def check_layer_norm(layer_norm) -> list:
    out = []
    E = 8
    w, b = _rand((E,), seed=31), _rand((E,), seed=32)
    base = _rand((3, E), seed=33)
    flat = (base - base.mean(-1, keepdim=True)) / base.std(-1, keepdim=True, unbiased=False)
    probes = (("normal_input", _rand((3, E), seed=34) * 3 + 1, 1e-5),
              ("flat_input", flat * 1e-5 ** 0.5 + 0.7, 1e-5),          # variance = eps: where eps's place matters
              ("eps_argument", _rand((3, E), seed=35) * 0.3, 1e-1),
              ("batch_3d", _rand((2, 4, E), seed=36) * 2 - 1, 1e-5))
    for name, x, eps in probes:
        with step(out, name):
            got = call(layer_norm, x.clone(), w.clone(), b.clone(), eps)
            want = F.layer_norm(x, (E,), w, b, eps)
            mu = x.mean(-1, keepdim=True)
            mistakes = {
                "eps_outside_root": (lambda: variants.layer_norm_eps_outside(x, eps) * w + b,
                                     "ε 在根号外 (x − μ)/(σ + ε)：应为 (x − μ)/√(σ² + ε)。两者只在方差接近 ε 的“平”输入上"
                                     "明显不同（这一项的输入方差正好等于 ε：根号内输出的标准差是 1/√2，根号外接近 1）"),
                "unbiased_variance": (lambda: (x - mu) / torch.sqrt(x.var(-1, keepdim=True) + eps) * w + b,
                                      with_fix("用了无偏方差 x.var(dim=-1)（÷(E − 1)，勘误 D1）：LN 用有偏方差（÷E）",
                                               "`x.var(dim=-1, keepdim=True, unbiased=False)`")),
                "std_under_root": (lambda: (x - mu) / torch.sqrt(x.std(-1, keepdim=True, unbiased=False) + eps) * w + b,
                                   "根号里是标准差 σ：应为方差 σ²（勘误 E5）"),
                "no_mean": (lambda: variants.rms_norm(x, eps=eps) * w + b, "没有减均值：那是 RMSNorm（第 04 课）；LN 先减 μ"),
                "wrong_axis": (lambda: ((x - x.mean(-2, keepdim=True)) / torch.sqrt(x.var(-2, keepdim=True, unbiased=False) + eps)) * w + b,
                               "统计量沿错了维：LN 对每个 token 在最后一维（特征 E）上求，dim=-1"),
                "no_affine": (lambda: F.layer_norm(x, (E,), eps=eps), "没有乘 γ (weight)、加 β (bias)"),
                "eps_ignored": (lambda: F.layer_norm(x, (E,), w, b, 1e-5), f"传入的 eps = {eps:g} 没有用上"),
                "eps_missing": (lambda: (x - mu) / x.std(-1, keepdim=True, unbiased=False) * w + b, "公式里没有 ε"),
            }
            if eps == 1e-5:
                mistakes.pop("eps_ignored")
            out.append(compare(name, got, want, mistakes, f"{name}（eps = {eps:g}）：与 F.layer_norm 一致",
                               f"{name}（eps = {eps:g}）：与 F.layer_norm 不一致", tol=1e-4, input=x))
    return out


# ----------------------------------------------------------------------------------------------- 03.4

def _padded(seed: int, pad_value: float) -> tuple[Tensor, Tensor]:
    B, S, E = 3, 5, 4
    x = _rand((B, S, E), seed=seed) * 2 + torch.tensor([1.0, -3.0, 0.0, 5.0])
    lengths = torch.tensor([5, 3, 1])
    mask = torch.arange(S)[None, :] < lengths[:, None]          # True = a real token
    x = torch.where(mask[..., None], x, torch.full_like(x, pad_value))
    return x, mask


@exercise("03.4", title="带填充 (padding) 的 batch：只在真实 token 上求 BN 的统计量", target_minutes=10, checks=4)
def check_masked_bn_stats(masked_bn_stats) -> list:
    out = []
    for name, pad in (("zero_padding", 0.0), ("garbage_padding", 100.0)):
        with step(out, name):
            x, mask = _padded(seed=41, pad_value=pad)
            result = call(masked_bn_stats, x.clone(), mask.clone())
            if not (isinstance(result, tuple | list) and len(result) == 2):
                raise SubmissionError(f"应返回 (mean, var) 两个形状 (E,) 的张量，实际返回 {type(result).__name__}")
            got_mean, got_var = result
            real = x[mask]                                      # (number of real tokens, E)
            mean, var = real.mean(0), real.var(0, unbiased=False)
            B, S, _ = x.shape
            m = mask[..., None].float()
            diluted = (x * m).sum((0, 1)) / (B * S)
            flat = x.reshape(-1, x.shape[-1])
            pads = x[~mask]
            mean_mistakes = {"padding_in_denominator": (diluted, "均值除以了 B·S（填充也算进了个数）：应除以真实 token 的个数 mask.sum()；"
                                                                 "这正是第 3 节里 BN 的均值随填充变小的原因"),
                             "mask_ignored": (flat.mean(0), "没有用 mask：填充位置也算进了统计量"),
                             "mask_inverted": (lambda: pads.mean(0), "mask 用反了：True 是真实 token"),
                             "wrong_axis": (lambda: real.mean(1), "均值沿错了维：每个特征 e 一组，在所有真实 token 上求")}
            out.append(compare(f"{name}.mean", got_mean, mean, mean_mistakes, f"{name}：均值与 x[mask].mean(0) 一致",
                               f"{name}：均值与 x[mask].mean(0) 不一致", input=x))
            var_mistakes = {"unbiased_variance": (real.var(0, unbiased=True), "用了无偏方差：BN 归一化用有偏方差（÷ 真实 token 数）"),
                            "padding_in_denominator": (lambda: (((x - diluted) * m) ** 2).sum((0, 1)) / (B * S),
                                                       "方差也除以了 B·S（填充也算进了个数），还是围绕被稀释的均值求的："
                                                       "两处都应除以真实 token 的个数 mask.sum()"),
                            "var_padding_count": (lambda: (((x - mean) * m) ** 2).sum((0, 1)) / (B * S),
                                                  "方差除以了 B·S：应除以真实 token 的个数"),
                            "diluted_mean": (lambda: (((x - diluted) * m) ** 2).sum((0, 1)) / mask.sum(),
                                             "方差是围绕被填充稀释的均值求的：先求对的均值"),
                            "mask_ignored": (flat.var(0, unbiased=False), "方差没有用 mask：填充位置也算进去了")}
            out.append(compare(f"{name}.var", got_var, var, var_mistakes, f"{name}：方差与 x[mask].var(0, unbiased=False) 一致",
                               f"{name}：方差与 x[mask].var(0, unbiased=False) 不一致", input=x))
    return out
