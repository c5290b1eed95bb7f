"""[A] 《Add & Norm》: the demos of errata A1-A8, each beside the flawed code it runs.

The catalogue text (what [A] says, what is right) is in errata_A.toml; the formulas come from
normlab.variants, the DeepNet constants from normlab.init, the blocks from normlab.blocks.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..blocks import MLP, Residual, build_stack
from ..init import deepnorm_constants
from ..variants import batch_rms_norm, layer_norm_eps_outside, rms_norm, rms_upcast_then_weight
from .base import Demo, corrects, gen, maxdiff, offset, quiet

# --- A1 · §1 "the derivative is 1" ----------------------------------------------------------


def residual_chain_grad(jacobian_scale: float, depth: int = 10, width: int = 8) -> float:
    """||d(sum y)/dx|| / ||d(sum x)/dx|| through ``depth`` blocks y = x + F(x), F(x) = c*x.

    Each block's Jacobian is I + J_F = (1 + c) I, so the gradient is (1 + c)^depth, not 1^depth.
    """
    x = torch.ones(width, requires_grad=True)
    y = x
    for _ in range(depth):
        y = y + jacobian_scale * y                       # x + F(x), J = (1 + c) I
    y.sum().backward()
    return (x.grad.norm() / math.sqrt(width)).item()


def residual_mlp_gain(depth: int = 10, width: int = 32, gain: float = 1.0) -> float:
    """Gradient multiplier ||dL/dx_0|| / ||dL/dx_L|| through ``depth`` blocks x + F(x), each F a fresh
    random ReLU MLP (He-initialised weights times ``gain``), for a random direction dL/dx_L.

    If [A] §1 were right (the block's derivative is 1), this would be 1 for any F.
    """
    g = gen(30)
    x0 = torch.randn(16, width, generator=g).requires_grad_(True)
    x = x0
    for _ in range(depth):
        w1 = torch.randn(4 * width, width, generator=g) * gain * math.sqrt(2 / width)
        w2 = torch.randn(width, 4 * width, generator=g) * gain * math.sqrt(2 / (4 * width))
        x = x + F.relu(x @ w1.T) @ w2.T
    u = torch.randn(x.shape, generator=g)
    (grad,) = torch.autograd.grad(x, x0, u)
    return (grad.norm() / u.norm()).item()


@corrects("A1")
def demo_a1() -> Demo:
    rows, values = [], {}
    for c, label in ((0.0, "F 的雅可比 J_F = 0（[A] 的假设）"), (-0.9, "J_F = -0.9·I"), (0.5, "J_F = +0.5·I")):
        gr = residual_chain_grad(c)
        rows.append([label, f"{(1 + c) ** 10:.3g}", f"{gr:.3g}"])
        values[f"linear_{c:+.1f}"] = gr
    for gain in (1.0, 0.5):
        gr = residual_mlp_gain(gain=gain)
        rows.append([f"随机 ReLU MLP（He 初始化 × {gain:g}）", "—（[A]：1）", f"{gr:.3g}"])
        values[f"mlp_gain_{gain:g}"] = gr
    return Demo("[A] §1：10 个残差块后的梯度倍数 = 各块 (I + J_F) 的乘积，不是 1",
                ["子层 F", "手算 (1+c)^10", "autograd 测得 ‖∂L/∂x_0‖ / ‖∂L/∂x_10‖"], rows, values)


# --- A2 · §2.2.1 BatchNorm without running statistics ---------------------------------------


class NoRunningStatsBatchNorm(nn.Module):
    """[A] §2.2.1's mistake: always normalise with the current batch (no running statistics),
    and take dims (0, 2, 3) for anything that is not 2-D."""

    def __init__(self, c: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight, self.bias = nn.Parameter(torch.ones(c)), nn.Parameter(torch.zeros(c))

    def forward(self, x: Tensor) -> Tensor:
        dims = (0,) if x.dim() == 2 else (0, 2, 3)
        mu = x.mean(dim=dims, keepdim=True)
        var = x.var(dim=dims, keepdim=True, unbiased=False)
        return self.weight.view_as(mu) * (x - mu) / (var + self.eps).sqrt() + self.bias.view_as(mu)


@corrects("A2", NoRunningStatsBatchNorm.forward)
def demo_a2() -> Demo:
    g = gen(0)
    flawed, ref = NoRunningStatsBatchNorm(4), nn.BatchNorm1d(4)
    for _ in range(50):                                            # let torch's running stats settle
        ref(torch.randn(32, 4, generator=g) * 2 + 3)
    ref.eval()
    one = torch.randn(1, 4, generator=g) * 2 + 3                   # a single test sample
    out_flawed, out_ref = flawed(one), ref(one)
    try:
        flawed(torch.randn(2, 4, 5, generator=g))                  # (N, C, L) input
        crash = "无错误"
    except (IndexError, RuntimeError) as err:
        crash = type(err).__name__
    values = {"flawed_single_abs": out_flawed.abs().max().item(), "ref_single_abs": out_ref.abs().max().item(),
              "ncl_crashes": float(crash != "无错误")}
    rows = [["单个样本推理：输出的最大 |y|", f"{values['flawed_single_abs']:.3g}（全是 β=0）",
             f"{values['ref_single_abs']:.3g}"],
            ["(N, C, L) 输入", crash, "正常 (BatchNorm1d 支持)"]]
    return Demo("[A] §2.2.1 的 BatchNorm vs nn.BatchNorm1d (eval)", ["检查", "[A] 的写法", "torch.nn"], rows, values)


# --- A3 · §2.3.1 LayerNorm: eps outside the root ---------------------------------------------

@corrects("A3", layer_norm_eps_outside)
def demo_a3() -> Demo:
    g, rows, values = gen(0), [], {}
    ref = nn.LayerNorm(16, eps=1e-6, elementwise_affine=False)
    for scale in (1.0, 1e-2, 1e-3):
        x = torch.randn(4, 16, generator=g) * scale
        d = maxdiff(layer_norm_eps_outside(x, eps=1e-6), ref(x))
        rows.append([f"{scale:g}", f"{d:.3g}"])
        values[f"diff_{scale:g}"] = d
    values["parmaeter_exists"] = float(hasattr(nn, "Parmaeter"))
    rows.append(["nn.Parmaeter 存在吗？", "否 → AttributeError，类无法实例化" if not hasattr(nn, "Parmaeter") else "是"])
    return Demo("[A] §2.3.1 (x-μ)/(σ+ε) vs nn.LayerNorm(eps=1e-6)：输入越小差得越多",
                ["输入标准差", "max |[A] − torch|"], rows, values)


# --- A4 · §2.4 RMSNorm's output dtype ----------------------------------------------------------

@corrects("A4", rms_upcast_then_weight)
def demo_a4() -> Demo:
    x = torch.randn(2, 8, generator=gen(0)).to(torch.bfloat16)
    ref = nn.RMSNorm(8, eps=1e-6)                                  # float32 weight, as a fresh module has
    with torch.no_grad(), quiet():
        out_ref = ref(x)
    out = rms_upcast_then_weight(x, ref.weight.detach(), eps=1e-6)
    values = {"same_dtype": float(out.dtype == out_ref.dtype), "diff": maxdiff(out, out_ref)}
    rows = [["输出 dtype", str(out.dtype), str(out_ref.dtype)], ["max |差|", f"{values['diff']:.3g}", "—"]]
    return Demo("[A] §2.4 的 RMSNorm：bfloat16 输入、float32 权重", ["", "[A] 的写法", "nn.RMSNorm"], rows, values)


# --- A5 · §2.5.1 beta on the input at run time (illustration) ------------------------------------

def ffn_branch_ratio(beta: float, width: int = 16) -> float:
    """||G(beta x)|| / ||G_beta(x)|| for a bias-free ReLU FFN G(x) = W2 relu(W1 x).

    Runtime scaling of the input (flawed) multiplies the output by beta once; DeepNet scales W1
    and W2 at init, i.e. beta^2 (positive homogeneity). The ratio is 1/beta exactly.
    """
    g = gen(1)
    w1, w2 = torch.randn(4 * width, width, generator=g), torch.randn(width, 4 * width, generator=g)
    x = torch.randn(8, width, generator=g)
    flawed = F.relu((beta * x) @ w1.T) @ w2.T
    correct = F.relu(x @ (beta * w1).T) @ (beta * w2).T
    return (flawed.norm() / correct.norm()).item()


def adam_effective_step(runtime_scale: float, lr: float = 1e-3, width: int = 16) -> float:
    """Change of the *effective* linear map after one Adam step, runtime scale vs init scale.

    init-scaled:   y = W x with W = s W0 a parameter -> |dW| = lr per entry (Adam's first step)
    runtime-scaled: y = s (W x), W = W0 a parameter   -> |d(s W)| = s * lr
    Returns ||d(effective W)||(runtime) / ||d(effective W)||(init), which is s.
    """
    g = gen(2)
    w0, x, t = torch.randn(width, width, generator=g), torch.randn(32, width, generator=g), torch.randn(32, width, generator=g)
    changes = []
    for runtime in (True, False):
        w = nn.Parameter(w0.clone() if runtime else runtime_scale * w0.clone())
        opt = torch.optim.Adam([w], lr=lr)
        eff = lambda: (runtime_scale * w if runtime else w).detach().clone()
        before = eff()
        out = runtime_scale * (x @ w.T) if runtime else x @ w.T
        F.mse_loss(out, t).backward()
        opt.step()
        changes.append((eff() - before).norm().item())
    return changes[0] / changes[1]


@corrects("A5")
def demo_a5() -> Demo:
    N = 24
    alpha, beta = deepnorm_constants("decoder", N)
    r_fwd, r_adam = ffn_branch_ratio(beta), adam_effective_step(beta)
    rows = [["初始化时 FFN 分支输出之比 ‖G(βx)‖/‖G_β(x)‖", f"{r_fwd:.3f}", f"1/β = {1 / beta:.3f}"],
            ["Adam 第一步后有效权重变化之比", f"{r_adam:.3f}", f"β = {beta:.3f}"]]
    return Demo(f"[A] §2.5.1：β 乘在输入上（运行时）vs 论文的 β 初始化 (N={N}, β={beta:.3f})",
                ["量", "测得", "手算"], rows, {"beta": beta, "alpha": alpha, "fwd_ratio": r_fwd, "adam_ratio": r_adam})


# --- A6 · §2.6 where Pre-LN comes from (illustration) ---------------------------------------------

ARXIV = {  # first arXiv version (yymm.number); the arXiv id encodes the month of submission
    "Baevski & Auli 2019, Adaptive Input Representations (Pre-LN 语言模型)": "1809.10853",
    "Wang et al. 2019, Learning Deep Transformer Models for MT (Pre-LN)": "1906.01787",
    "Xiong et al. 2020, On Layer Normalization in the Transformer Architecture": "2002.04745",
}


@corrects("A6")
def demo_a6() -> Demo:
    rows = [[k, v, f"20{v[:2]}-{v[2:4]}"] for k, v in ARXIV.items()]
    rows.append(["Radford et al. 2019, GPT-2 报告 §2.3：LN 移到每个子块的输入", "（非 arXiv）", "2019-02"])
    xiong = ARXIV["Xiong et al. 2020, On Layer Normalization in the Transformer Architecture"]
    earlier = sum(v < xiong for v in ARXIV.values())
    return Demo("[A] §2.6：Pre-LN 早于 Xiong et al. 2020 就在用（arXiv 编号 = 提交年月）",
                ["论文", "arXiv", "年-月"], rows, {"earlier_papers": float(earlier)})


# --- A7 · §2.4 "formula (1) without mu" ----------------------------------------------------------
# [A]'s formula (1) is BatchNorm: without mu it is batch_rms_norm (each feature over the batch);
# formula (2), LayerNorm, without mu is rms_norm (each token over its features).

@corrects("A7", batch_rms_norm)
def demo_a7() -> Demo:
    g = gen(20)
    x = torch.randn(8, 16, generator=g) * 2 + 1
    other = x.clone()
    other[1:] = torch.randn(7, 16, generator=g) * 5                # change the *other* samples
    ref = nn.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        r = ref(x)
    from1 = lambda t: batch_rms_norm(t, eps=1e-6)
    from2 = lambda t: rms_norm(t, eps=1e-6)
    values = {"from1_vs_rmsnorm": maxdiff(from1(x), r), "from2_vs_rmsnorm": maxdiff(from2(x), r),
              "from1_batch_dep": maxdiff(from1(x)[0], from1(other)[0]),
              "from2_batch_dep": maxdiff(from2(x)[0], from2(other)[0])}
    rows = [["与 nn.RMSNorm 的最大差", f"{values['from1_vs_rmsnorm']:.3g}", f"{values['from2_vs_rmsnorm']:.2g}"],
            ["换掉同 batch 的其他样本，样本 0 的输出变化", f"{values['from1_batch_dep']:.3g}",
             f"{values['from2_batch_dep']:.2g}"]]
    return Demo("[A] §2.4 \"从式 (1) 去掉 μ\"：(1) 是 BN，(2) 才是 LN", ["检查", "式 (1) BN 去掉 μ", "式 (2) LN 去掉 μ"],
                rows, values)


# --- A8 · §2.5 "an improved LayerNorm that keeps the gradient constant" ----------------------------

def deepnorm_probe(depth: int, wiring: str, seed: int = 0, lr: float = 1e-3,
                   width: int = 32) -> tuple[list[tuple[float, float]], float]:
    """At init, for an MLP stack (normlab.blocks) of ``depth`` blocks wired ``wiring``, with an MSE loss
    to a random target: ([(||dL/dW_fc1||, ||dL/dW_fc2||) for every block], ||F(x; theta_1) - F(x; theta_0)||
    per sample after one Adam step on the sublayer (residual-branch) parameters only: DeepNet's theta, as
    in lesson 05 (``normlab.lessons.deepnorm``); the LayerNorms' gamma and beta stay put)."""
    stack = build_stack(depth, width=width, wiring=wiring, sublayer="mlp", seed=seed + offset())
    g = gen(300 + seed)
    x, target = torch.randn(64, width, generator=g), torch.randn(64, width, generator=g)
    with torch.no_grad():
        before = stack(x)
    opt = torch.optim.Adam([p for n, p in stack.named_parameters() if ".sublayer." in n], lr=lr)
    F.mse_loss(stack(x), target).backward()
    grads = [(b.mlp.sublayer.fc1.weight.grad.norm().item(), b.mlp.sublayer.fc2.weight.grad.norm().item())
             for b in stack.blocks]
    opt.step()
    with torch.no_grad():
        update = ((stack(x) - before).norm() / math.sqrt(x.shape[0])).item()
    return grads, update


@corrects("A8")
def demo_a8() -> Demo:
    torch.manual_seed(21 + offset())
    w = 16
    x = torch.randn(8, w, generator=gen(21))
    sub = MLP(w)
    alpha, _ = deepnorm_constants("encoder", 24)
    block = Residual(sub, w, wiring="deepnorm", alpha=alpha)
    with torch.no_grad():
        ln_diff = maxdiff(block(x), nn.LayerNorm(w)(alpha * x + sub(x)))      # the LN inside is plain nn.LayerNorm
        post_diff = maxdiff(Residual(sub, w, wiring="deepnorm", alpha=1.0)(x), Residual(sub, w, wiring="post")(x))
    values = {"ln_diff": ln_diff, "alpha1_vs_post": post_diff}
    rows = [["块的输出 vs nn.LayerNorm(α·x + G(x))（LN 本身没变）", f"{ln_diff:.2g}", "—", "—"],
            ["α = 1、普通初始化的 DeepNorm 块 vs Post-LN 块", f"{post_diff:.2g}", "—", "—"]]
    scaled_all = []
    for N in (6, 24, 96):
        a, b = deepnorm_constants("encoder", N)
        deep = [deepnorm_probe(N, "deepnorm", s) for s in (0, 1)]
        post = [deepnorm_probe(N, "post", s) for s in (0, 1)]
        # every block's fc1 and fc2 gradient, divided by beta/alpha
        scaled = [gr / (b / a) for grads, _ in deep for pair in grads for gr in pair]
        scaled_all += scaled
        values[f"grad_deepnorm_{N}"] = sum(gr[0][0] for gr, _ in deep) / 2          # first block's fc1
        values[f"grad_post_{N}"] = sum(gr[0][0] for gr, _ in post) / 2
        values[f"scaled_min_{N}"], values[f"scaled_max_{N}"] = min(scaled), max(scaled)
        values[f"update_deepnorm_{N}"] = sum(u for _, u in deep) / 2
        values[f"update_post_{N}"] = sum(u for _, u in post) / 2
        values[f"beta_over_alpha_{N}"] = b / a
        rows.append([f"N = {N}：第 1 块 ‖∂L/∂W_fc1‖（DeepNorm / Post-LN）",
                     f"{values[f'grad_deepnorm_{N}']:.4f}", f"{values[f'grad_post_{N}']:.4f}", f"β/α = {b / a:.4f}"])
        rows.append([f"N = {N}：全部 {N} 块的 fc1、fc2 梯度 ÷ (β/α)，最小–最大",
                     f"{min(scaled):.3f}–{max(scaled):.3f}", "—", "与 N 无关则 ∝ β/α"])
    values["scaled_spread"] = max(scaled_all) / min(scaled_all)
    for N in (6, 24, 96):
        rows.append([f"N = {N}：只更新子层参数的一步 Adam (lr 1e-3) 后的 ‖ΔF‖（DeepNorm / Post-LN）",
                     f"{values[f'update_deepnorm_{N}']:.3f}", f"{values[f'update_post_{N}']:.3f}", "—"])
    return Demo("[A] §2.5：DeepNorm 里的 LN 没变；MLP 堆叠、MSE 损失、初始化时，同一模型里各块的梯度彼此相近，"
                "不同深度的模型之间按 β/α ∝ 1/√N 变小；论文界定的是 ‖ΔF‖", ["测量", "DeepNorm", "Post-LN", "手算"],
                rows, values)
