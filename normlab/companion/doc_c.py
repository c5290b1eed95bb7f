"""[C] 《Add & Norm（大模型篇）》: the demos of errata C1-C9, each beside the flawed code it runs.

The formulas ([C]'s PowerNorm, its "fused" Add & Norm, T5's norm, LayerNorm in the input's dtype)
come from normlab.variants; timing from normlab.bench; LayerNorm statistics from normlab.probes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from ..bench import timeit
from ..blocks import MLP, Residual
from ..init import deepnorm_constants
from ..probes import streams
from ..variants import add_layer_norm, batch_rms_norm, layer_norm, power_norm_source_c, rms_t5
from .base import Demo, corrects, gen, maxdiff, offset
from .doc_a import adam_effective_step

# --- C1 · LayerScale: where it comes from, and its init by depth ---------------------------------


def layerscale_drift(init: float, depth: int = 24, width: int = 32) -> float:
    """||x_L - x_0|| / ||x_0|| at init for x <- x + diag(init) F(LN(x)), F a random ReLU MLP."""
    g = gen(3)
    x0 = torch.randn(16, width, generator=g)
    x = x0
    for _ in range(depth):
        w1 = torch.randn(4 * width, width, generator=g) / math.sqrt(width)
        w2 = torch.randn(width, 4 * width, generator=g) / math.sqrt(4 * width)
        x = x + init * (F.relu(F.layer_norm(x, (width,)) @ w1.T) @ w2.T)
    return ((x - x0).norm() / x0.norm()).item()


# CaiT's LayerScale init by depth (Touvron et al. 2021 §3; facebookresearch/deit cait_models.py @7e160fe4:
# init_scale=1e-5 for the depth-24 models, 1e-6 for S36, M36 and M48, while XXS36 keeps 1e-5). [C] uses 0.1
# at any depth.
CAIT_INIT = {18: 0.1, 24: 1e-5, 36: 1e-6}


@corrects("C1")
def demo_c1() -> Demo:
    rows, values = [], {}
    for init, who in ((0.1, "[C] 示例代码（CaiT 只在深度 ≤ 18 时用 0.1）"),
                      (CAIT_INIT[24], "CaiT, 深度 24 (deit cait_models.py)"), (CAIT_INIT[36], "CaiT, 更深 (S36)")):
        d = layerscale_drift(init)
        rows.append([f"{init:g}", who, f"{d:.3g}"])
        values[f"drift_{init:g}"] = d
    rows.append(["出处", "[C] 写 \"MetaNet\"", "Touvron et al. 2021, CaiT (arXiv 2103.17239) §3"])
    return Demo("[C] LayerScale：24 个 Pre-LN 块，初始化时残差流被改变多少 ‖x_L − x_0‖/‖x_0‖",
                ["初值", "来源", "残差流的相对变化"], rows, values)


# --- C2 · ReZero without LayerNorm (illustration) -------------------------------------------------

@corrects("C2")
def demo_c2() -> Demo:
    w = 32

    def norm_params(m: nn.Module) -> int:
        return sum(p.numel() for n, p in m.named_parameters() if n.startswith("norm"))
    paper = Residual(MLP(w), w, wiring="pre", norm="none", scaling="rezero")          # x + alpha F(x)
    c_block = Residual(MLP(w), w, wiring="pre", norm="layernorm", scaling="rezero")   # x + alpha F(LN(x))
    x = torch.randn(4, w, generator=gen(4))
    with torch.no_grad():
        identity = max((paper(x) - x).abs().max().item(), (c_block(x) - x).abs().max().item())
    rows = [["Bachlechner et al. 2020 式 (1)", "x + α·F(x)", norm_params(paper), "去掉 LayerNorm，也不需要预热"],
            ["[C] 的 ReZeroTransformerBlock", "x + α·F(LN(x))", norm_params(c_block), "Pre-LN 加一个门"]]
    return Demo(f"[C] ReZero：论文的块里没有 LayerNorm（宽度 {w}；初始化时两者都是恒等映射，最大偏差 {identity:.0e}）",
                ["写法", "公式", "每块归一化参数", "说明"], rows,
                {"paper_norm_params": float(norm_params(paper)), "c_norm_params": float(norm_params(c_block)),
                 "identity_at_init": identity})


# --- C3 · "depth scaling" is not DeepNet -----------------------------------------------------------

@corrects("C3")
def demo_c3() -> Demo:
    N = 100
    alpha, beta = deepnorm_constants("decoder", N)
    c_beta = 1 / math.sqrt(2 * N)
    c_adam = adam_effective_step(c_beta)
    rows = [["[C] \"深度缩放\" (Pre-LN)", "1", f"{c_beta:.4f}", "运行时，整个分支，永远", f"{c_adam:.4f}"],
            ["DeepNet 解码器 (Post-LN, §4.3)", f"{alpha:.3f}", f"{beta:.4f}", "初始化，只 ffn/v_proj/out_proj", "1"],
            ["GPT-2 §2.3 (Pre-LN)", "1", f"{c_beta:.4f}", "初始化，写回残差流的权重", "1"]]
    return Demo(f"[C] 的深度缩放不是 DeepNet (N={N})", ["写法", "恒等路径乘 α", "分支缩放", "何时、作用于谁",
                                                       "Adam 有效学习率倍数（分支最后一层）"],
                rows, {"c_beta": c_beta, "deepnet_alpha": alpha, "deepnet_beta": beta, "c_adam_ratio": c_adam})


# --- C4 · [C]'s "PowerNorm" is RMSNorm; Shen et al.'s uses the batch ------------------------------

@corrects("C4", power_norm_source_c)
def demo_c4() -> Demo:
    g = gen(4)
    x = torch.randn(4, 6, 16, generator=g) * 3
    other = x.clone()
    other[1:] = torch.randn(3, 6, 16, generator=g) * 10             # change the *other* samples
    rms = nn.RMSNorm(16, eps=0.0)
    shen = lambda t: batch_rms_norm(t, eps=1e-5)                    # Shen et al.'s training forward, no running average
    values = {"vs_rmsnorm": maxdiff(power_norm_source_c(x), rms(x)),
              "c_batch_dep": maxdiff(power_norm_source_c(x)[0], power_norm_source_c(other)[0]),
              "shen_batch_dep": maxdiff(shen(x)[0], shen(other)[0])}
    rows = [["与 nn.RMSNorm 的最大差 (p=2)", f"{values['vs_rmsnorm']:.2g}", "—"],
            ["换掉同 batch 的其他样本，样本 0 的输出变化", f"{values['c_batch_dep']:.3g}", f"{values['shen_batch_dep']:.3g}"]]
    return Demo("[C] 的 \"PowerNorm\" 其实是 RMSNorm + β；Shen et al. 2020 的 PowerNorm 是 BN 的变体",
                ["检查", "[C] 的写法", "Shen et al. (batch 二次均值)"], rows, values)


# --- C5 · T5's norm in [C]'s model table ---------------------------------------------------------

@corrects("C5")
def demo_c5() -> Demo:
    x = torch.randn(3, 16, generator=gen(5)) + 2.0                 # tokens with a non-zero mean
    t5 = rms_t5(x, torch.ones(16), eps=1e-6)
    values = {"vs_layernorm": maxdiff(t5, F.layer_norm(x, (16,), eps=1e-6)),
              "vs_rmsnorm": maxdiff(t5, F.rms_norm(x, (16,), eps=1e-6))}
    rows = [["nn.LayerNorm（[C] 表里写的）", f"{values['vs_layernorm']:.3g}"],
            ["nn.RMSNorm", f"{values['vs_rmsnorm']:.2g}"]]
    return Demo("[C] 模型表：T5 的 norm 与谁一致？max |T5 norm − 它|", ["对照", "最大差"], rows, values)


# --- C6 · monitoring LayerNorm through attributes that do not exist --------------------------------

def monitor_like_source_c(model: nn.Module, x: Tensor) -> None:
    """[C]'s monitor: reads ``module.input`` of every LayerNorm, an attribute that does not exist."""
    model(x)
    for _, module in model.named_modules():
        if isinstance(module, nn.LayerNorm):
            module.input.mean()                                    # AttributeError


def layernorm_stats(model: nn.Sequential, x: Tensor) -> list[dict[str, float]]:
    """Input/output mean and std of every nn.LayerNorm of a Sequential, read with forward hooks
    that normlab.probes.streams removes afterwards: layer i's input is stream i, its output i + 1."""
    s = streams(model, x)
    return [{"layer": str(i), "in_mean": s[i].mean().item(), "in_std": s[i].std().item(),
             "out_mean": s[i + 1].mean().item(), "out_std": s[i + 1].std().item()}
            for i, m in enumerate(model) if isinstance(m, nn.LayerNorm)]


def tiny_model() -> nn.Sequential:
    torch.manual_seed(offset())
    return nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 8), nn.LayerNorm(8))


@corrects("C6", monitor_like_source_c)
def demo_c6() -> Demo:
    model, x = tiny_model(), torch.randn(4, 8, generator=gen(6)) * 5
    try:
        monitor_like_source_c(model, x)
        err = "无错误"
    except AttributeError as e:
        err = f"AttributeError: {str(e)[:60]}"
    stats = layernorm_stats(model, x)
    rows = [["[C] 的 monitor_layer_norm", err]] + [
        [f"forward hook：{s['layer']}", f"输入 std {s['in_std']:.3g} → 输出 std {s['out_std']:.3g}"] for s in stats]
    return Demo("[C] 的监测代码读不存在的属性；用 forward hook 才能拿到输入输出", ["做法", "结果"], rows,
                {"raises": float(err.startswith("AttributeError")), "hooked_layers": float(len(stats)),
                 "left_hooks": float(sum(len(m._forward_hooks) for m in model.modules()))})


# --- C7 · gradient hooks that pile up ----------------------------------------------------------------

def gradient_flow_like_source_c(model: nn.Module, calls: list) -> None:
    """[C]'s pattern: a tensor hook on every parameter, registered on each call, never removed."""
    for name, p in model.named_parameters():
        p.register_hook(lambda grad, name=name: calls.append(name))


@corrects("C7", gradient_flow_like_source_c)
def demo_c7() -> Demo:
    model, x = tiny_model(), torch.randn(4, 8, generator=gen(7))
    n_params = len(list(model.parameters()))
    calls: list = []
    rows, values = [], {}
    for k in (1, 2, 3):
        gradient_flow_like_source_c(model, calls)                 # "analyse" once more
        calls.clear()
        model.zero_grad()
        model(x).sum().backward()
        rows.append([k, len(calls), n_params])
        values[f"calls_after_{k}"] = float(len(calls))
    return Demo("[C] analyze_gradient_flow：钩子只注册不删除，每调用一次，每次反向传播多触发一轮",
                ["已调用次数", "一次 backward 触发的钩子数", "参数个数（应当）"], rows, values)


# --- C8 · a "fused" Add & Norm that is the same eager ops ---------------------------------------------

class _CountCalls(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def count_torch_calls(fn: Callable[[], object]) -> int:
    """How many torch operations ``fn`` calls (each one a full pass over memory in eager mode)."""
    with _CountCalls() as mode:
        fn()
    return len([c for c in mode.calls if not c.startswith("__get__")])


@corrects("C8", add_layer_norm)
def demo_c8() -> Demo:
    g = gen(8)
    x, r = torch.randn(16, 128, 512, generator=g), torch.randn(16, 128, 512, generator=g)
    w, b = torch.ones(512), torch.zeros(512)
    c_fn = lambda: add_layer_norm(x, r, w, b, eps=1e-5)
    ref_fn = lambda: F.layer_norm(x + r, (512,), w, b, eps=1e-5)
    median_ms = lambda fn: 1e3 * statistics.median(timeit(fn, warmup=1, repeats=15, inner=1))
    values = {"c_calls": float(count_torch_calls(c_fn)), "ref_calls": float(count_torch_calls(ref_fn)),
              "diff": maxdiff(c_fn(), ref_fn()), "c_ms": median_ms(c_fn), "ref_ms": median_ms(ref_fn)}
    rows = [["torch 运算调用次数（每次都是一遍完整的内存读写）", int(values["c_calls"]), int(values["ref_calls"])],
            ["CPU 中位耗时 ms（本机，(16,128,512)）", f"{values['c_ms']:.2f}", f"{values['ref_ms']:.2f}"],
            ["输出最大差", f"{values['diff']:.2g}", "—"]]
    return Demo("[C] \"融合\" Add & Norm vs x + r 再 F.layer_norm", ["", "[C] FusedAddLayerNorm", "add + F.layer_norm"],
                rows, values)


# --- C9 · eps = 1e-12 in float16 --------------------------------------------------------------------

@corrects("C9")
def demo_c9() -> Demo:
    eps16 = float(torch.tensor(1e-12, dtype=torch.float16))
    row = torch.full((1, 8), 3.0, dtype=torch.float16)              # a constant token (e.g. padding)
    nan12 = float(torch.isnan(layer_norm(row, eps=1e-12)).any())   # everything in float16, like a .half() copy
    nan5 = float(torch.isnan(layer_norm(row, eps=1e-5)).any())
    rows = [["1e-12 存成 float16 后的值", f"{eps16:g}", f"{float(torch.tensor(1e-5, dtype=torch.float16)):.3g}"],
            ["常数行的输出含 NaN？", "是" if nan12 else "否", "是" if nan5 else "否"]]
    return Demo("[C] LayerNorm 的 eps=1e-12 在 float16 下", ["", "eps = 1e-12", "eps = 1e-5"], rows,
                {"eps16": eps16, "nan_1e-12": nan12, "nan_1e-5": nan5})
