"""Claims of degree measured in notebook 09 (the others point at the lesson that measures them; all
listed in claims.toml): BN's cost, [D]'s way of timing, and "RMSNorm is numerically more stable".

Each takes a ``seed`` keyword like the errata demos; timings come from normlab.bench.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn

from ..bench import timeit
from ..lessons.batchnorm import fold_batchnorm
from ..norms import LayerNorm, RMSNorm
from ..variants import layer_norm, rms_norm
from .base import Demo, gen, maxdiff, offset, with_seed

__all__ = ["bn_cost", "timing_pitfalls", "half_precision_stability"]


def _fastest_interleaved(fns, rounds: int = 15, inner: int = 5) -> list[float]:
    """Each function's fastest round in seconds of this process's CPU time (time.process_time: the time
    the process ran, so other processes that take the CPU away do not count), the functions timed in
    turn within every round (a, b, c, a, b, c, ...), so a busy phase of the machine hits all alike."""
    for fn in fns:
        for _ in range(3):
            fn()
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            for _ in range(inner):
                fn()
            best[i] = min(best[i], (time.process_time() - t0) / inner)
    return best


@with_seed
def bn_cost(batch: int = 512, d_in: int = 64, d_out: int = 256) -> Demo:
    """[D]'s cost ranking (BN "中等" < LN "较高"; RMSNorm "最低"), both phases, on this machine.

    Inference: an eval-mode BN right after a Linear folds into it (one Linear, same output, same time
    as the bare Linear). Training: BN needs the batch reductions, the running-statistic update and
    its own backward (and, across devices, a synchronisation), none of which folds away. The control
    for the training ratio: the bare Linear's step timed a second time (BN removed from both sides),
    whose ratio to the first timing shows what the timing noise alone gives."""
    g = gen(11)
    torch.manual_seed(11 + offset())
    lin, bn = nn.Linear(d_in, d_out), nn.BatchNorm1d(d_out)
    with torch.no_grad():
        for _ in range(20):
            bn(lin(torch.randn(batch, d_in, generator=g) * 2 + 1))
        bn.weight.uniform_(0.5, 2.0), bn.bias.uniform_(-1, 1)
    bn.eval()
    folded = fold_batchnorm(lin, bn)
    x = torch.randn(batch, d_in, generator=g)
    with torch.no_grad():
        ref = bn(lin(x))
        fold_rel = maxdiff(folded(x), ref) / ref.abs().max().item()
    train_bn = nn.BatchNorm1d(d_out)

    def step(*mods: nn.Module):                   # forward + backward of a training step
        for m in mods:
            m.zero_grad(set_to_none=True)
        y = lin(x)
        for m in mods[1:]:
            y = m(y)
        y.sum().backward()

    with torch.no_grad():
        t_lin, t_fold, t_eval = _fastest_interleaved([lambda: lin(x), lambda: folded(x), lambda: bn(lin(x))])
    # the control: the bare Linear's step a second time, no BN on either side
    t_step_lin, t_step_bn, t_step_lin_again = _fastest_interleaved(
        [lambda: step(lin), lambda: step(lin, train_bn), lambda: step(lin)])
    us = lambda t: f"{1e6 * t:.0f}"
    rows = [["推理：Linear", us(t_lin), "1.00"],
            ["推理：Linear → BN（eval，未折叠）", us(t_eval), f"{t_eval / t_lin:.2f}"],
            ["推理：BN 折叠进 Linear", us(t_fold), f"{t_fold / t_lin:.2f}"],
            ["训练一步（前向 + 反向）：Linear", us(t_step_lin), "1.00"],
            ["训练一步（前向 + 反向）：Linear → BN（train）", us(t_step_bn), f"{t_step_bn / t_step_lin:.2f}"],
            ["训练一步：Linear，再测一次（对照 control）", us(t_step_lin_again), f"{t_step_lin_again / t_step_lin:.2f}"],
            ["折叠后输出与 Linear → BN 的最大相对差", f"{fold_rel:.1g}", "—"]]
    return Demo(f"[D] BN 的计算成本：推理时可折进前一层，训练时不行（本机，batch {batch}，{d_in}→{d_out}，最快一轮的 CPU 时间 µs）",
                ["", "µs", "÷ Linear"], rows,
                {"fold_rel_diff": fold_rel, "fold_vs_linear": t_fold / t_lin, "eval_vs_linear": t_eval / t_lin,
                 "train_step_ratio": t_step_bn / t_step_lin, "train_step_control": t_step_lin_again / t_step_lin})


@with_seed
def timing_pitfalls(shape: tuple[int, int, int] = (4, 384, 768), loops: int = 5, rounds: int = 7) -> Demo:
    """[D]'s compare_normalization, its pattern in our code: build BN, LN and RMSNorm modules (the
    hand-written ones of normlab.norms), then time LN and RMSNorm once each with time.time() around
    a loop, no warm-up, no repetition.

    Shows (on this machine): the very first call costs more than a typical call; the LN/RMS ratio of one
    such loop moves from round to round; the BatchNorm that is built is never called (counted with hooks).
    """
    d = shape[-1]
    x = torch.randn(*shape, generator=gen(40))
    mods = {"bn": nn.BatchNorm1d(d), "ln": LayerNorm(d), "rms": RMSNorm(d, eps=1e-6)}
    calls = dict.fromkeys(mods, 0)
    for name, m in mods.items():
        m.register_forward_hook(lambda mod, inp, out, name=name: calls.__setitem__(name, calls[name] + 1))
    with torch.no_grad():
        t0 = time.perf_counter()                    # the first call at this shape (allocations, caches)
        mods["ln"](x)
        first = time.perf_counter() - t0
        singles = {name: timeit(lambda m=mods[name]: m(x), warmup=0, repeats=15, inner=1) for name in ("ln", "rms")}
        naive = []
        for _ in range(rounds):                     # the source's pattern: one loop each, time.time()
            t0 = time.time()
            for _ in range(loops):
                mods["ln"](x)
            t_ln = time.time() - t0
            t0 = time.time()
            for _ in range(loops):
                mods["rms"](x)
            naive.append(t_ln / (time.time() - t0))
    med = {name: statistics.median(t) for name, t in singles.items()}
    values = {"first_vs_median_ln": first / med["ln"], "single_max_vs_min_ln": max(singles["ln"]) / min(singles["ln"]),
              "naive_ratio_min": min(naive), "naive_ratio_max": max(naive), "median_ratio": med["ln"] / med["rms"],
              "bn_calls": float(calls["bn"]), "ln_calls": float(calls["ln"])}
    rows = [["LN 的第一次调用 ÷ 之后 15 次调用的中位数", f"{values['first_vs_median_ln']:.2f}"],
            ["LN 单次调用 15 次：最慢 ÷ 最快", f"{values['single_max_vs_min_ln']:.2f}"],
            [f"同一段计时代码重复 {rounds} 次，\"RMSNorm 加速倍数\" 的最小–最大", f"{min(naive):.2f}–{max(naive):.2f}"],
            ["对照：15 次单次调用的中位数之比 LN ÷ RMSNorm", f"{values['median_ratio']:.2f}"],
            ["建好的 BatchNorm1d 被调用的次数", f"{calls['bn']}（LN 被调用 {calls['ln']} 次）"]]
    return Demo(f"[D] compare_normalization 的计时方式（本机，输入 {tuple(shape)}，每轮 {loops} 次）", ["现象", "本机测得"],
                rows, values)


@with_seed
def half_precision_stability() -> Demo:
    """[D] Q2 "RMSNorm 数值稳定性更好": float16 inputs, each norm with and without the float32 upcast
    (normlab.variants.layer_norm / rms_norm compute in their input's dtype), against F.layer_norm /
    F.rms_norm of the same (rounded) input in float32."""
    g, rows, values = gen(22), [], {}
    cases = (("N(0, 1)", "normal", 1.0, 0.0), ("300 + N(0, 1)（大偏移）", "offset", 1.0, 300.0),
             ("300·N(0, 1)（大幅度）", "wide", 300.0, 0.0))
    for label, key, scale, offset_ in cases:
        h = (torch.randn(8, 64, generator=g) * scale + offset_).half()
        ref_ln, ref_rms = F.layer_norm(h.float(), (64,)), F.rms_norm(h.float(), (64,), eps=1e-6)
        errs = {"ln_raw": maxdiff(layer_norm(h), ref_ln), "rms_raw": maxdiff(rms_norm(h, eps=1e-6), ref_rms),
                "ln_up": maxdiff(layer_norm(h.float()).half(), ref_ln),
                "rms_up": maxdiff(rms_norm(h.float(), eps=1e-6).half(), ref_rms)}
        values.update({f"{k}_{key}": v for k, v in errs.items()})
        rows.append([label] + [f"{errs[k]:.3g}" for k in ("ln_raw", "rms_raw", "ln_up", "rms_up")])
    return Demo("[D] Q2 \"RMSNorm 数值稳定性更好\"：float16 输入，与 float32 参照的最大差",
                ["输入", "LN 不上转", "RMSNorm 不上转", "LN 先转 float32", "RMSNorm 先转 float32"], rows, values)
