"""[D] 《归一化技术》: the demos of errata D1-D5 (D4, BN's cost, became a claim: claims.bn_cost),
each beside the flawed code it runs."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..blocks import build_stack
from .base import Demo, corrects, gen, maxdiff, offset

# --- D1 · x.var() is unbiased by default ----------------------------------------------------------


def norm_with_default_var(x: Tensor, dim: int, eps: float = 1e-5) -> Tensor:
    """[D]'s statistics: (x - mean) / sqrt(x.var() + eps) with torch's default *unbiased* variance
    (divides by n - 1). dim=-1: its LayerNorm; dim=0: its BatchNorm."""
    return (x - x.mean(dim, keepdim=True)) / torch.sqrt(x.var(dim, keepdim=True) + eps)


@corrects("D1", norm_with_default_var)
def demo_d1() -> Demo:
    x = torch.randn(4, 8, generator=gen(9))
    ln_ratio = (norm_with_default_var(x, -1) / F.layer_norm(x, (8,))).mean().item()
    bn_ratio = (norm_with_default_var(x, 0) / F.batch_norm(x, None, None, training=True)).mean().item()
    rows = [["LayerNorm, d = 8", f"{ln_ratio:.4f}", f"√(7/8) = {math.sqrt(7 / 8):.4f}"],
            ["BatchNorm, batch = 4", f"{bn_ratio:.4f}", f"√(3/4) = {math.sqrt(3 / 4):.4f}"]]
    return Demo("[D] Q1/Q2 用 x.var()（默认无偏）：输出 / torch 的输出", ["", "测得", "手算 √((n−1)/n)"], rows,
                {"ln_ratio": ln_ratio, "bn_ratio": bn_ratio})


# --- D2 · momentum 0.9 in PyTorch's form ------------------------------------------------------------

class MomentumMixupBatchNorm(nn.Module):
    """[D]'s BatchNorm1d: PyTorch's formula (1-m)*running + m*batch with m = 0.9, biased variance,
    and running statistics assigned from tensors that still carry the autograd graph."""

    def __init__(self, c: int, momentum: float = 0.9, eps: float = 1e-5) -> None:
        super().__init__()
        self.momentum, self.eps = momentum, eps
        self.gamma, self.beta = nn.Parameter(torch.ones(c)), nn.Parameter(torch.zeros(c))
        self.register_buffer("running_mean", torch.zeros(c))
        self.register_buffer("running_var", torch.ones(c))

    def forward(self, x: Tensor) -> Tensor:
        if self.training:
            mu, var = x.mean(0), x.var(0, unbiased=False)
            self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mu
            self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var
        else:
            mu, var = self.running_mean, self.running_var
        return self.gamma * (x - mu) / torch.sqrt(var + self.eps) + self.beta


@corrects("D2", MomentumMixupBatchNorm.forward)
def demo_d2() -> Demo:
    g = gen(10)
    lin = nn.Linear(3, 3)
    flawed, ref, ref09 = MomentumMixupBatchNorm(3), nn.BatchNorm1d(3), nn.BatchNorm1d(3, momentum=0.9)
    trace_f, trace_r = [], []
    for _ in range(40):
        h = lin(torch.randn(8, 3, generator=g) + 1)               # requires grad, like a hidden layer
        flawed(h), ref(h.detach()), ref09(h.detach())
        trace_f.append(flawed.running_mean[0].item()), trace_r.append(ref.running_mean[0].item())
    jitter = lambda t: torch.tensor(t[-20:]).std().item()
    values = {"match_momentum_09": maxdiff(flawed.running_mean, ref09.running_mean),
              "jitter_flawed": jitter(trace_f), "jitter_ref": jitter(trace_r),
              "keeps_graph": float(flawed.running_mean.grad_fn is not None),
              "var_ratio": (flawed.running_var / ref09.running_var).mean().item()}
    rows = [["滑动均值与 nn.BatchNorm1d(momentum=0.9) 的最大差", f"{values['match_momentum_09']:.2g}", "—"],
            ["最后 20 步滑动均值的抖动 (std)", f"{values['jitter_flawed']:.3g}", f"{values['jitter_ref']:.3g}（默认 0.1）"],
            ["running_mean 还挂着计算图 (grad_fn)？", "是" if values["keeps_graph"] else "否", "否"],
            ["滑动方差 / torch(momentum=0.9) 的", f"{values['var_ratio']:.3f}", "1（torch 存无偏方差）"]]
    return Demo("[D] 的 BatchNorm1d：momentum=0.9 代入 PyTorch 的公式", ["检查", "[D] 的写法", "torch.nn"], rows, values)


# --- D3 · Q4 "the gradient is of order sqrt(L)" -----------------------------------------------------

def preln_last_ffn_grad(depth: int, width: int = 32, seeds: tuple[int, ...] = (0, 1, 2)) -> float:
    """Mean ||dL/dW_fc2|| of the last block of a Pre-LN MLP stack (with final LN) at init."""
    total = 0.0
    for s in seeds:
        stack = build_stack(depth, width=width, wiring="pre", sublayer="mlp", seed=s + offset())
        x = torch.randn(64, width, generator=gen(100 + s))
        target = torch.randn(64, width, generator=gen(200 + s))
        F.mse_loss(stack(x), target).backward()
        total += stack.blocks[-1].mlp.sublayer.fc2.weight.grad.norm().item()
    return total / len(seeds)


@corrects("D3")
def demo_d3() -> Demo:
    depths = (4, 16, 64)
    grads = [preln_last_ffn_grad(L) for L in depths]
    slope = (math.log(grads[-1]) - math.log(grads[0])) / (math.log(depths[-1]) - math.log(depths[0]))
    rows = [[L, f"{gr:.4f}", f"{grads[0] * math.sqrt(depths[0] / L):.4f}", f"{grads[0] * math.sqrt(L / depths[0]):.4f}"]
            for L, gr in zip(depths, grads)]
    return Demo(f"[D] Q4：Pre-LN 最后一层 FFN 的梯度随层数 L（拟合指数 {slope:.2f}）",
                ["L", "测得 ‖∂L/∂W‖", "若 ∝ 1/√L", "若 ∝ √L（按最后一层读 [D]）"], rows, {"slope": slope})


# --- D5 · a Pre-Norm model built from the one-layer chart needs a final LayerNorm ------------------

def preln_stream_growth(depth: int, width: int = 32, seed: int = 0, final_norm: bool = False) -> float:
    """||x_L||^2 / ||x_0||^2 of a Pre-LN MLP stack at init, without (default) or with the final norm."""
    stack = build_stack(depth, width=width, wiring="pre", sublayer="mlp", final_norm=final_norm, seed=seed + offset())
    x = torch.randn(64, width, generator=gen(seed))
    with torch.no_grad():
        return (stack(x).pow(2).sum() / x.pow(2).sum()).item()


@corrects("D5")
def demo_d5() -> Demo:
    depths = (6, 24, 96)
    growth = [preln_stream_growth(L) for L in depths]
    with_ln = [preln_stream_growth(L, final_norm=True) for L in depths]
    rows = [[L, f"{gr:.1f}", f"{fl:.2f}"] for L, gr, fl in zip(depths, growth, with_ln)]
    return Demo("[D] 的 Pre-Norm 流程图少了最后一个 LayerNorm：残差流 ‖x_L‖²/‖x_0‖² 随层数增长",
                ["层数 L", "无最终 LN", "有最终 LN (GPT-2 的 ln_f)"], rows,
                {**{f"growth_{L}": gr for L, gr in zip(depths, growth)},
                 **{f"final_ln_{L}": fl for L, fl in zip(depths, with_ln)}})
