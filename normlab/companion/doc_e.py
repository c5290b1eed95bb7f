"""[E] 《Normalization》: the demos of errata E1-E9, each beside the flawed code it runs, and the
momentum conventions of all five documents (errata A2, B1, D2, E4, E9; rows in momentum.toml).

The running-average update in both conventions is lesson 02's ``running_update`` / ``running_trace``
(normlab.lessons.batchnorm); the formulas come from normlab.variants; the DeepNet constants from
normlab.init.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..init import deepnorm_constants
from ..lessons.batchnorm import running_trace, running_update
from ..variants import bn_over_be_plane, rms_eps_outside, rms_norm
from ..viz import Table
from .base import Demo, corrects, gen, load_toml, maxdiff, offset, with_seed

# --- E1 · §1 BN on text "over the (B, E) plane" ------------------------------------------------------


@corrects("E1", bn_over_be_plane)
def demo_e1() -> Demo:
    x = torch.randn(4, 6, 5, generator=gen(12)) * torch.linspace(0.5, 3, 5) + torch.arange(5.0)  # features differ
    flawed = bn_over_be_plane(x)
    ref = nn.BatchNorm1d(5, affine=False)(x.transpose(1, 2)).transpose(1, 2)    # one statistic per feature e
    feat_mean = lambda y: y.mean(dim=(0, 1)).abs().max().item()
    values = {"flawed_feature_mean": feat_mean(flawed), "ref_feature_mean": feat_mean(ref),
              "flawed_equals_bn_over_s": float(maxdiff(flawed, nn.BatchNorm1d(6, affine=False)(x)) < 1e-5)}
    rows = [["每个特征 e 归一化后的 |均值| 最大值", f"{values['flawed_feature_mean']:.3g}", f"{values['ref_feature_mean']:.2g}"],
            ["统计量的组数", "S = 6（每个位置一组）", "E = 5（每个特征一组）"]]
    return Demo("[E] §1 \"(B, E) 平面\" vs 文本上真正的 BN（每个特征 e 跨 (B, S)）",
                ["", "[E] 的 (B, E) 平面", "nn.BatchNorm1d(E) on x.transpose(1, 2)"], rows, values)


# --- E2 · §2 LN on images "over the (B, HW) plane" -----------------------------------------------------

@corrects("E2")
def demo_e2() -> Demo:
    g = gen(13)
    x = torch.randn(4, 3, 5, 5, generator=g)
    bhw = lambda t: F.batch_norm(t, None, None, training=True)      # [E] §2's "(B, HW) plane" = BN
    lnorm = lambda t: F.layer_norm(t, t.shape[1:])                  # LN on images: per sample over (C, H, W)
    other = x.clone()
    other[1:] = torch.randn(3, 3, 5, 5, generator=g) * 4 + 2
    values = {"bhw_batch_dep": maxdiff(bhw(x)[0], bhw(other)[0]), "ln_batch_dep": maxdiff(lnorm(x)[0], lnorm(other)[0]),
              "ln_vs_groupnorm1": maxdiff(lnorm(x), F.group_norm(x, 1))}
    rows = [["换掉其他样本后样本 0 的输出变化", f"{values['bhw_batch_dep']:.3g}", f"{values['ln_batch_dep']:.2g}"],
            ["与 GroupNorm(1, C) 的最大差", "—", f"{values['ln_vs_groupnorm1']:.2g}"]]
    return Demo("[E] §2 说图像 LN 在 \"(B, HW) 平面\"：那是 BN；LN 是每个样本在 (C, H, W) 上",
                ["", "(B, HW) 平面 = BN", "LayerNorm([C, H, W])"], rows, values)


# --- E3 · §1.2 the inference formula without the square root --------------------------------------------

def bn_eval_no_root(x: Tensor, running_mean: Tensor, running_var: Tensor, eps: float = 1e-5) -> Tensor:
    """[E] §1.2's BN at test time as written: the variance, not its root, in the denominator."""
    return (x - running_mean) / (running_var + eps)


@corrects("E3", bn_eval_no_root)
def demo_e3() -> Demo:
    g = gen(14)
    bn = nn.BatchNorm1d(4)
    with torch.no_grad():
        for _ in range(30):
            bn(torch.randn(16, 4, generator=g) * 3 + 1)
    bn.eval()
    x = torch.randn(6, 4, generator=g) * 3 + 1
    no_root = bn_eval_no_root(x, bn.running_mean, bn.running_var, bn.eps)
    with torch.no_grad():
        ref = bn(x)
    values = {"diff": maxdiff(no_root, ref), "std_no_root": no_root.std().item(), "std_ref": ref.std().item()}
    rows = [["推理输出的标准差", f"{values['std_no_root']:.3f}", f"{values['std_ref']:.3f}"],
            ["与 nn.BatchNorm1d (eval) 的最大差", f"{values['diff']:.3g}", "0"]]
    return Demo("[E] §1.2 推理公式少了根号：(x−μ)/(σ²+ε) vs (x−μ)/√(σ²+ε)", ["", "[E] 的公式", "nn.BatchNorm1d"],
                rows, values)


# --- E4 · §1.2 text vs §1.3 code: one word, two opposite momenta ------------------------------------------

@corrects("E4")
def demo_e4(steps: int = 200) -> Demo:
    g = gen(15)
    p = 0.1
    text_mean = torch.zeros(2)                      # [E] §1.2 text: mean <- p*mean + (1-p)*batch
    code_mean = torch.zeros(2)                      # [E] §1.3 code: mean <- (1-p)*mean + p*batch
    ref = nn.BatchNorm1d(2, momentum=p)
    trace_t, trace_c, trace_r = [], [], []
    for _ in range(steps):
        xb = torch.randn(8, 2, generator=g) + 4
        mu = xb.mean(0)
        text_mean = running_update(text_mean, mu, p, "old_weight")
        code_mean = running_update(code_mean, mu, p, "pytorch")
        ref(xb)
        trace_t.append(text_mean[0].item()), trace_c.append(code_mean[0].item())
        trace_r.append(ref.running_mean[0].item())
    half = steps // 2                               # the second half: after the running means have settled
    jitter = lambda t: torch.tensor(t[half:]).std().item()
    gap = lambda t: sum(abs(a - b) for a, b in zip(t[half:], trace_r[half:])) / (steps - half)
    values = {"text_vs_torch": gap(trace_t), "code_vs_torch": maxdiff(code_mean, ref.running_mean),
              "jitter_text": jitter(trace_t), "jitter_code": jitter(trace_c)}
    rows = [[f"后 {steps - half} 步与 nn.BatchNorm1d(momentum=0.1) 的平均差", f"{values['text_vs_torch']:.3g}",
             f"{values['code_vs_torch']:.2g}（最大差）"],
            [f"后 {steps - half} 步滑动均值的抖动 (std)", f"{values['jitter_text']:.3g}", f"{values['jitter_code']:.3g}"]]
    return Demo("[E] §1.2 正文与 §1.3 代码对同一个 momentum = 0.1 的两种相反用法",
                ["", "正文：p·旧 + (1−p)·新", "代码：(1−p)·旧 + p·新 (= PyTorch)"], rows, values)


@with_seed
def momentum_traces(steps: int = 60, true_mean: float = 4.0) -> dict[str, list[float]]:
    """Running mean of one feature under both readings of "momentum" (batches of 8 from N(true_mean, 1)),
    from lesson 02's running_trace; "batch" is each batch's own mean (new-value weight 1).

    weight 0.1 on the new batch: torch's default = [B]'s m=0.9 old-value form = [E] §1.3's code
    weight 0.9 on the new batch: [E] §1.2's text with p=0.1 = [D]'s code with 0.9
    """
    trace = lambda m: running_trace(m, "pytorch", steps=steps, true_mean=true_mean, batch=8, seed=15 + offset()).tolist()
    return {"batch": trace(1.0), "new_weight_0.1": trace(0.1), "new_weight_0.9": trace(0.9)}


MOMENTUM_CONVENTIONS: list[tuple[str, str, str, str]] = [   # (where, the rule as written, the value, in PyTorch)
    (c["where"], c["rule"], c["value"], c["torch"]) for c in load_toml("momentum.toml")["convention"]]


def momentum_table() -> Table:
    """Which running-average rule each document's BatchNorm uses (momentum.toml)."""
    return Table([list(r) for r in MOMENTUM_CONVENTIONS], ["资料", "更新式", "取值", "对应 nn.BatchNorm1d"],
                 title="每份资料的 momentum 约定")


# --- E5 · §2 the standard deviation under the root -------------------------------------------------------

def layer_norm_sqrt_std(x: Tensor, eps: float = 1e-6) -> Tensor:
    """[E] §2's LayerNorm formula as written: (x - mu) / sqrt(sigma + eps) with sigma a standard deviation."""
    mu = x.mean(-1, keepdim=True)
    sigma = x.std(-1, keepdim=True, unbiased=False)
    return (x - mu) / torch.sqrt(sigma + eps)


@corrects("E5", layer_norm_sqrt_std)
def demo_e5() -> Demo:
    x = torch.randn(3, 16, generator=gen(16)) * 4
    flawed = layer_norm_sqrt_std(x, eps=1e-6)
    ref = F.layer_norm(x, (16,), eps=1e-6)
    values = {"diff": maxdiff(flawed, ref), "std_flawed": flawed.std(-1, unbiased=False).mean().item()}
    rows = [["每个 token 输出的标准差", f"{values['std_flawed']:.3f}", "1.000"],
            ["与 F.layer_norm 的最大差", f"{values['diff']:.3g}", "0"]]
    return Demo("[E] §2 公式 √(σ+ε)：σ 应是方差 σ²", ["", "√(σ_token + ε)", "√(σ² + ε)"], rows, values)


# --- E6 · §3 RMSNorm: eps outside the root in the formula, inside in the code ---------------------------------

@corrects("E6", rms_eps_outside)
def demo_e6() -> Demo:
    g, rows, values = gen(17), [], {}
    ref = nn.RMSNorm(16, eps=1e-6)
    for scale in (1.0, 1e-2, 1e-3):
        x = torch.randn(4, 16, generator=g) * scale
        formula = rms_eps_outside(x, eps=1e-6)                        # [E] §3 formula: eps outside
        code = rms_norm(x, eps=1e-6)                                  # [E] §3 code: eps inside
        with torch.no_grad():
            r = ref(x)
        values[f"formula_{scale:g}"], values[f"code_{scale:g}"] = maxdiff(formula, r), maxdiff(code, r)
        rows.append([f"{scale:g}", f"{values[f'formula_{scale:g}']:.3g}", f"{values[f'code_{scale:g}']:.2g}"])
    return Demo("[E] §3 RMSNorm：公式（ε 在根号外）与代码（根号内）不一致；与 nn.RMSNorm(eps=1e-6) 的最大差",
                ["输入尺度", "按 [E] 的公式", "按 [E] 的代码"], rows, values)


# --- E7 · §4 alpha on the branch, no LayerNorm (illustration) ----------------------------------------------------

def branch_shares(alpha: float, beta: float, width: int = 32) -> tuple[float, float]:
    """Share of the update ||branch|| / ||skip|| for a linear branch F(x) = W x at init.

    [E] §4:   x + alpha * (beta W) x        -> alpha * beta * ||W x|| / ||x||
    DeepNet:  LN(alpha x + (beta W) x)      -> beta * ||W x|| / (alpha ||x||)
    """
    g = gen(18)
    w = torch.randn(width, width, generator=g) / math.sqrt(width)
    x = torch.randn(16, width, generator=g)
    fx = x @ (beta * w).T
    return (alpha * fx).norm().item() / x.norm().item(), fx.norm().item() / (alpha * x).norm().item()


@corrects("E7")
def demo_e7() -> Demo:
    N = 24
    alpha, beta = deepnorm_constants("decoder", N)
    wrong, right = branch_shares(alpha, beta)
    rows = [["分支 / 恒等路径 ‖·‖（初始化时）", f"{wrong:.4f}", f"{right:.4f}"],
            ["两者之比", f"{wrong / right:.3f}", f"α² = {alpha ** 2:.3f}"]]
    return Demo(f"[E] §4：x + α·F(x) vs 论文 LN(α·x + F(x)) (N={N}, α={alpha:.3f}, β={beta:.3f})",
                ["", "[E] 的写法", "DeepNet §4.2"], rows, {"wrong": wrong, "right": right, "alpha": alpha})


# --- E8 · §4 the constants of one architecture used for all (illustration) -----------------------------------------

@corrects("E8")
def demo_e8() -> Demo:
    rows, values = [], {}
    for arch, kw in (("encoder", {"N": 12}), ("decoder", {"M": 12}), ("encdec_encoder", {"N": 12, "M": 12}),
                     ("encdec_decoder", {"N": 12, "M": 12})):
        a, b = deepnorm_constants(arch, **kw)
        rows.append([arch, f"{a:.3f}", f"{b:.3f}"])
        values[f"{arch}_alpha"], values[f"{arch}_beta"] = a, b
    a_e, b_e = (2 * 12) ** 0.25, (8 * 12) ** -0.25                   # [E]'s formula, for every architecture
    values["e_alpha"], values["e_beta"] = a_e, b_e
    rows.append(["[E]：(2N)^¼, (8N)^-¼ 用于一切", f"{a_e:.3f}", f"{b_e:.3f}"])
    rows.append(["β 作用于", "ffn、v_proj、out_proj", "不含 q_proj、k_proj（§4.3）"])
    return Demo("[E] §4 的常数只对单一编码器/解码器成立（N = M = 12）", ["架构", "α", "β"], rows, values)


# --- E9 · §1.2 the bar on sigma_t^2, and mu_test without the expectation ---------------------------------------------

@corrects("E9")
def demo_e9() -> Demo:
    g, p, B = gen(19), 0.9, 16                     # [E]'s p: weight of the old value; torch momentum = 1 - p
    batches = [torch.randn(B, 3, generator=g) * 3 + 2 for _ in range(50)]
    literal, fixed = torch.ones(3), torch.ones(3)
    ref = nn.BatchNorm1d(3, momentum=1 - p)
    for xb in batches:
        literal = running_update(literal, literal, p, "old_weight")          # bar on sigma_t^2: both terms running
        fixed = running_update(fixed, xb.var(0, unbiased=True), p, "old_weight")   # the batch's own (unbiased) variance
        ref(xb)
    data = torch.cat(batches)
    batch_means = torch.stack([xb.mean(0) for xb in batches])
    values = {"literal_var": literal.max().item(), "torch_running_var": ref.running_var.mean().item(),
              "fixed_vs_torch": maxdiff(fixed, ref.running_var),
              "single_batch_err": (batch_means - data.mean(0)).abs().max(1).values.mean().item(),
              "expectation_err": maxdiff(batch_means.mean(0), data.mean(0))}
    rows = [["50 个 batch 后的滑动方差（数据方差 ≈ 9）", f"{values['literal_var']:.3f}（停在初值）",
             f"{values['torch_running_var']:.3f}（nn.BatchNorm1d）"],
            ["μ_test 与全部训练数据均值的最大差", f"{values['single_batch_err']:.3g}（某一个 batch 的 μ，50 个 batch 的平均）",
             f"{values['expectation_err']:.2g}（E[μ_batch]，各 batch 均值的平均）"],
            ["去掉横线、σ_t² 用无偏方差后的滑动方差与 nn.BatchNorm1d(momentum=1−p) 的最大差", "—", f"{values['fixed_vs_torch']:.2g}"]]
    return Demo("[E] §1.2 的两处记号：σ_t² 上多了滑动平均的横线；μ_test、σ²_test 少了期望 E",
                ["", "按 [E] 字面", "正确"], rows, values)
