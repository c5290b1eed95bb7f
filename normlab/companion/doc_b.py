"""[B] 《BatchNorm / LayerNorm / RMSNorm 笔记》: the demos of errata B1-B2 (B1's BatchNorm code is
also [E] §1.3's), each beside the flawed code it runs.

B1 has three mistakes. The mode read from autograd is lesson 02's ``GradModeBatchNorm``
(normlab.lessons.batchnorm, a normlab.norms.BatchNorm whose mode comes from
``torch.is_grad_enabled()``); the running statistics kept as plain attributes and updated with the
biased variance are ``moving_stats_like_b`` below.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..lessons.batchnorm import GradModeBatchNorm, running_update
from .base import Demo, corrects, gen

# --- B1 · mode from autograd, plain attributes, biased variance --------------------------------


def moving_stats_like_b(moving_mean: Tensor, moving_var: Tensor, x: Tensor, m: float = 0.9) -> tuple[Tensor, Tensor]:
    """[B]'s update of the running statistics: old-value weight m, the *biased* batch variance; the
    caller stores the results as plain attributes (self.moving_mean = ...), not as buffers."""
    mu = x.mean(0)
    var = ((x - mu) ** 2).mean(0)                                   # biased: divides by n
    return running_update(moving_mean, mu, m, "old_weight"), running_update(moving_var, var, m, "old_weight")


@corrects("B1", GradModeBatchNorm.forward, moving_stats_like_b)
def demo_b1() -> Demo:
    g = gen(0)
    flawed, ref = GradModeBatchNorm(3), nn.BatchNorm1d(3)
    holder = nn.Module()                                            # where [B] keeps its statistics
    holder.moving_mean, holder.moving_var = torch.zeros(3), torch.ones(3)
    for _ in range(30):
        xb = torch.randn(8, 3, generator=g) + 2
        flawed(xb), ref(xb)
        holder.moving_mean, holder.moving_var = moving_stats_like_b(holder.moving_mean, holder.moving_var, xb)
    var_ratio = (holder.moving_var / ref.running_var).mean().item()     # after the same 30 training batches
    flawed.eval(), ref.eval()
    shifted = torch.randn(8, 3, generator=g) + 10                  # an evaluation batch, no no_grad
    before = flawed.running_mean.clone()
    yf, yr = flawed(shifted), ref(shifted)
    values = {
        "flawed_eval_mean": yf.mean().item(), "ref_eval_mean": yr.mean().item(),
        "flawed_stats_moved": float(not torch.equal(before, flawed.running_mean)),
        "flawed_in_state_dict": float(any("moving" in k for k in holder.state_dict())),
        "ref_in_state_dict": float("running_mean" in ref.state_dict()),
        "var_ratio": var_ratio,
    }
    rows = [["model.eval() 后（未包 no_grad）输出均值", f"{values['flawed_eval_mean']:.3g}（仍用 batch 统计量）",
             f"{values['ref_eval_mean']:.3g}（用滑动统计量）"],
            ["这次 eval 前向改写了滑动统计量？", "是" if values["flawed_stats_moved"] else "否", "否"],
            ["滑动统计量在 state_dict 里？", "是" if values["flawed_in_state_dict"] else "否（普通属性）", "是 (buffer)"],
            ["训练后滑动方差 / torch 的滑动方差", f"{values['var_ratio']:.3f}", "1（torch 存无偏方差；有偏 ÷ 无偏 = 7/8）"]]
    return Demo("[B]、[E] §1.3 的 BatchNorm vs nn.BatchNorm1d", ["检查", "资料的写法", "torch.nn"], rows, values)


# --- B2 · "RMSNorm has no scaling" ---------------------------------------------------------------

@corrects("B2")
def demo_b2() -> Demo:
    ln, rms = nn.LayerNorm(64), nn.RMSNorm(64)
    n_ln, n_rms = sum(p.numel() for p in ln.parameters()), sum(p.numel() for p in rms.parameters())
    names = ", ".join(n for n, _ in rms.named_parameters())
    rows = [["LayerNorm(64)", n_ln, "weight γ, bias β"], ["RMSNorm(64)", n_rms, f"{names} (γ，即缩放)"]]
    return Demo("[B] RMSNorm：去掉的是 β 和减均值，缩放 γ 还在", ["模块", "参数个数", "参数"], rows,
                {"ln_params": float(n_ln), "rms_params": float(n_rms)})
