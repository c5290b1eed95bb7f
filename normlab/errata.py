"""Errata of the five source documents [A]..[E]: each mistake as a minimal runnable function.

For every erratum there is (1) a *flawed* function that reproduces the document's mistake in
our own words and code (never a copy of theirs), with a few-line summary of it in ``SNIPPETS``,
(2) the correct reference (``torch.nn``, autograd, or a hand computation), and (3) a ``demo``
that puts the two side by side and returns the numbers as a :class:`Demo` (a small table plus
a dict of key values that the companion notebook checks with ``expect`` and
``tests/test_errata.py`` tests).

    from normlab import errata
    errata.catalogue()               # index table: id, where, what it says, what is right, chapter
    d = errata.show("E3", seed=0)    # print the flawed snippet, run the demo, display its table
    d = errata.demo("E3", seed=3)    # the demo alone; d.values["..."] are the key numbers

``seed`` shifts every random stream of a demo (the notebook passes ``normlab.seed()``); the
global RNG is left as it was. Ids are "<document letter><number>" (A1, ..., E9; D4 became a
claim). Claims that are a matter of degree (speed, cost, "Pre-Norm is worse") are not errata:
they are listed in ``CLAIMS`` with the chapter cell that measures them; ``bn_cost``,
``timing_pitfalls`` and ``half_precision_stability`` measure three of them here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from .viz import Table

__all__ = ["Erratum", "Demo", "ERRATA", "CLAIMS", "SNIPPETS", "MOMENTUM_CONVENTIONS", "get", "demo", "show", "catalogue",
           "claims_table", "momentum_table", "momentum_traces", "half_precision_stability", "bn_cost", "timing_pitfalls"]


# ---------------------------------------------------------------------------------------------
# The record and the demo result
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Erratum:
    id: str                 # "E3"
    doc: str                # "E"
    section: str            # the document's own numbering or heading, e.g. "§1.2"
    kind: str               # 公式 formula / 代码 code / 出处 attribution / 说法 claim
    says: str               # what the document says, in our own words
    right: str              # what is right, with the source
    chapter: str            # notebook file stem where the callout belongs, e.g. "02_batchnorm"
    chapter_section: str    # that notebook's section title
    run: Callable[[], "Demo"] = field(repr=False, compare=False)


@dataclass
class Demo:
    title: str
    columns: list[str]
    rows: list[list[object]]
    values: dict[str, float]

    def table(self) -> Table:
        return Table(self.rows, self.columns, title=self.title)

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()

    def __repr__(self) -> str:
        return str(self.table())


_OFFSET = [0]   # the seed of the current demo (see demo()); every stream below is shifted by it


def _off() -> int:
    return 1009 * _OFFSET[0]


def _gen(stream: int = 0) -> torch.Generator:
    """A generator for one of a demo's random streams, shifted by the demo's seed."""
    return torch.Generator().manual_seed(stream + _off())


class _seeded:
    """Run a demo with seed ``seed`` (streams shifted, the global RNG restored afterwards)."""

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)

    def __enter__(self):
        self._saved, _OFFSET[0] = _OFFSET[0], self.seed
        self._fork = torch.random.fork_rng()
        self._fork.__enter__()

    def __exit__(self, *exc):
        self._fork.__exit__(*exc)
        _OFFSET[0] = self._saved


def _seed_param(fn: Callable) -> Callable:
    """Give a measurement a ``seed`` keyword (its random streams shifted by it, as demo() does)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, seed: int = 0, **kwargs):
        with _seeded(seed):
            return fn(*args, **kwargs)
    return wrapper


def _maxdiff(a: Tensor, b: Tensor) -> float:
    return (a.detach().double() - b.detach().double()).abs().max().item()


# ---------------------------------------------------------------------------------------------
# [A] 《Add & Norm》
# ---------------------------------------------------------------------------------------------

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
    g = _gen(30)
    x0 = torch.randn(16, width, generator=g).requires_grad_(True)
    x = x0
    for _ in range(depth):
        w1 = torch.randn(4 * width, width, generator=g) * gain * math.sqrt(2 / width)
        w2 = torch.randn(width, 4 * width, generator=g) * gain * math.sqrt(2 / (4 * width))
        x = x + F.relu(x @ w1.T) @ w2.T
    u = torch.randn(x.shape, generator=g)
    (grad,) = torch.autograd.grad(x, x0, u)
    return (grad.norm() / u.norm()).item()


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


def demo_a2() -> Demo:
    g = _gen(0)
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


def layer_norm_std_eps(x: Tensor, eps: float = 1e-6) -> Tensor:
    """[A] §2.3.1 / [E] ...: (x - mu) / (std + eps), eps outside the root (std biased)."""
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / (x.std(-1, keepdim=True, unbiased=False) + eps)


def demo_a3() -> Demo:
    g, rows, values = _gen(0), [], {}
    ref = nn.LayerNorm(16, eps=1e-6, elementwise_affine=False)
    for scale in (1.0, 1e-2, 1e-3):
        x = torch.randn(4, 16, generator=g) * scale
        d = _maxdiff(layer_norm_std_eps(x), ref(x))
        rows.append([f"{scale:g}", f"{d:.3g}"])
        values[f"diff_{scale:g}"] = d
    values["parmaeter_exists"] = float(hasattr(nn, "Parmaeter"))
    rows.append(["nn.Parmaeter 存在吗？", "否 → AttributeError，类无法实例化" if not hasattr(nn, "Parmaeter") else "是"])
    return Demo("[A] §2.3.1 (x-μ)/(σ+ε) vs nn.LayerNorm(eps=1e-6)：输入越小差得越多",
                ["输入标准差", "max |[A] − torch|"], rows, values)


def rms_norm_upcast_then_weight(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """[A] §2.4: normalise in float32, cast back, *then* multiply by a float32 weight."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * y.type_as(x)                                   # promotes back to float32


def demo_a4() -> Demo:
    x = torch.randn(2, 8, generator=_gen(0)).to(torch.bfloat16)
    ref = nn.RMSNorm(8, eps=1e-6)                                  # float32 weight, as a fresh module has
    with torch.no_grad(), _quiet():
        out_ref = ref(x)
    out = rms_norm_upcast_then_weight(x, ref.weight.detach())
    values = {"same_dtype": float(out.dtype == out_ref.dtype), "diff": _maxdiff(out, out_ref)}
    rows = [["输出 dtype", str(out.dtype), str(out_ref.dtype)], ["max |差|", f"{values['diff']:.3g}", "—"]]
    return Demo("[A] §2.4 的 RMSNorm：bfloat16 输入、float32 权重", ["", "[A] 的写法", "nn.RMSNorm"], rows, values)


class _quiet:
    """Silence the 'mismatch dtype' UserWarning of F.rms_norm inside a demo."""

    def __enter__(self):
        import warnings
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *exc):
        self._w.__exit__(*exc)


def ffn_branch_ratio(beta: float, width: int = 16) -> float:
    """||G(beta x)|| / ||G_beta(x)|| for a bias-free ReLU FFN G(x) = W2 relu(W1 x).

    Runtime scaling of the input (flawed) multiplies the output by beta once; DeepNet scales W1
    and W2 at init, i.e. beta^2 (positive homogeneity). The ratio is 1/beta exactly.
    """
    g = _gen(1)
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
    g = _gen(2)
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


def demo_a5() -> Demo:
    from .deepnorm import constants
    N = 24
    alpha, beta = constants("decoder", N)
    r_fwd, r_adam = ffn_branch_ratio(beta), adam_effective_step(beta)
    rows = [["初始化时 FFN 分支输出之比 ‖G(βx)‖/‖G_β(x)‖", f"{r_fwd:.3f}", f"1/β = {1 / beta:.3f}"],
            ["Adam 第一步后有效权重变化之比", f"{r_adam:.3f}", f"β = {beta:.3f}"]]
    return Demo(f"[A] §2.5.1：β 乘在输入上（运行时）vs 论文的 β 初始化 (N={N}, β={beta:.3f})",
                ["量", "测得", "手算"], rows, {"beta": beta, "alpha": alpha, "fwd_ratio": r_fwd, "adam_ratio": r_adam})


ARXIV = {  # first arXiv version (yymm.number); the arXiv id encodes the month of submission
    "Baevski & Auli 2019, Adaptive Input Representations (Pre-LN 语言模型)": "1809.10853",
    "Wang et al. 2019, Learning Deep Transformer Models for MT (Pre-LN)": "1906.01787",
    "Xiong et al. 2020, On Layer Normalization in the Transformer Architecture": "2002.04745",
}


def demo_a6() -> Demo:
    rows = [[k, v, f"20{v[:2]}-{v[2:4]}"] for k, v in ARXIV.items()]
    rows.append(["Radford et al. 2019, GPT-2 报告 §2.3：LN 移到每个子块的输入", "（非 arXiv）", "2019-02"])
    xiong = ARXIV["Xiong et al. 2020, On Layer Normalization in the Transformer Architecture"]
    earlier = sum(v < xiong for v in ARXIV.values())
    return Demo("[A] §2.6：Pre-LN 早于 Xiong et al. 2020 就在用（arXiv 编号 = 提交年月）",
                ["论文", "arXiv", "年-月"], rows, {"earlier_papers": float(earlier)})


def bn_formula_without_mean(x: Tensor, eps: float = 1e-6) -> Tensor:
    """[A] §2.4 read as written: formula (1) (BatchNorm) with mu removed. Each feature is divided by
    its quadratic mean over the *batch* (dim 0): batch-dependent, not RMSNorm."""
    return x / torch.sqrt(x.pow(2).mean(0, keepdim=True) + eps)


def ln_formula_without_mean(x: Tensor, eps: float = 1e-6) -> Tensor:
    """Formula (2) (LayerNorm) with mu removed: each token divided by its own RMS, i.e. RMSNorm."""
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def demo_a7() -> Demo:
    g = _gen(20)
    x = torch.randn(8, 16, generator=g) * 2 + 1
    other = x.clone()
    other[1:] = torch.randn(7, 16, generator=g) * 5                # change the *other* samples
    ref = nn.RMSNorm(16, eps=1e-6)
    with torch.no_grad():
        r = ref(x)
    values = {"from1_vs_rmsnorm": _maxdiff(bn_formula_without_mean(x), r),
              "from2_vs_rmsnorm": _maxdiff(ln_formula_without_mean(x), r),
              "from1_batch_dep": _maxdiff(bn_formula_without_mean(x)[0], bn_formula_without_mean(other)[0]),
              "from2_batch_dep": _maxdiff(ln_formula_without_mean(x)[0], ln_formula_without_mean(other)[0])}
    rows = [["与 nn.RMSNorm 的最大差", f"{values['from1_vs_rmsnorm']:.3g}", f"{values['from2_vs_rmsnorm']:.2g}"],
            ["换掉同 batch 的其他样本，样本 0 的输出变化", f"{values['from1_batch_dep']:.3g}",
             f"{values['from2_batch_dep']:.2g}"]]
    return Demo("[A] §2.4 \"从式 (1) 去掉 μ\"：(1) 是 BN，(2) 才是 LN", ["检查", "式 (1) BN 去掉 μ", "式 (2) LN 去掉 μ"],
                rows, values)


def deepnorm_probe(depth: int, wiring: str, seed: int = 0, lr: float = 1e-3,
                   width: int = 32) -> tuple[list[tuple[float, float]], float]:
    """At init, for an MLP stack (normlab.blocks) of ``depth`` blocks wired ``wiring``, with an MSE loss
    to a random target: ([(||dL/dW_fc1||, ||dL/dW_fc2||) for every block], ||F(x; theta_1) - F(x; theta_0)||
    per sample after one Adam step)."""
    from .blocks import build_stack
    stack = build_stack(depth, width=width, wiring=wiring, sublayer="mlp", seed=seed + _off())
    g = _gen(300 + seed)
    x, target = torch.randn(64, width, generator=g), torch.randn(64, width, generator=g)
    with torch.no_grad():
        before = stack(x)
    opt = torch.optim.Adam(stack.parameters(), lr=lr)
    F.mse_loss(stack(x), target).backward()
    grads = [(b.mlp.sublayer.fc1.weight.grad.norm().item(), b.mlp.sublayer.fc2.weight.grad.norm().item())
             for b in stack.blocks]
    opt.step()
    with torch.no_grad():
        update = ((stack(x) - before).norm() / math.sqrt(x.shape[0])).item()
    return grads, update


def demo_a8() -> Demo:
    from .blocks import MLP, Residual
    from .deepnorm import constants
    torch.manual_seed(21 + _off())
    w = 16
    x = torch.randn(8, w, generator=_gen(21))
    sub = MLP(w)
    alpha, _ = constants("encoder", 24)
    block = Residual(sub, w, wiring="deepnorm", alpha=alpha)
    with torch.no_grad():
        ln_diff = _maxdiff(block(x), nn.LayerNorm(w)(alpha * x + sub(x)))     # the LN inside is plain nn.LayerNorm
        post_diff = _maxdiff(Residual(sub, w, wiring="deepnorm", alpha=1.0)(x), Residual(sub, w, wiring="post")(x))
    values = {"ln_diff": ln_diff, "alpha1_vs_post": post_diff}
    rows = [["块的输出 vs nn.LayerNorm(α·x + G(x))（LN 本身没变）", f"{ln_diff:.2g}", "—", "—"],
            ["α = 1、普通初始化的 DeepNorm 块 vs Post-LN 块", f"{post_diff:.2g}", "—", "—"]]
    scaled_all = []
    for N in (6, 24, 96):
        a, b = constants("encoder", N)
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
        rows.append([f"N = {N}：一步 Adam (lr 1e-3) 后的 ‖ΔF‖（DeepNorm / Post-LN）",
                     f"{values[f'update_deepnorm_{N}']:.3f}", f"{values[f'update_post_{N}']:.3f}", "—"])
    return Demo("[A] §2.5：DeepNorm 里的 LN 没变；MLP 堆叠、MSE 损失、初始化时，每一块的梯度都按 β/α ∝ 1/√N 变小，"
                "并不\"保持恒定\"", ["测量", "DeepNorm", "Post-LN", "手算"], rows, values)


# ---------------------------------------------------------------------------------------------
# [B] 笔记 (and the same BatchNorm code in [E] §1.3)
# ---------------------------------------------------------------------------------------------

class GradModeBatchNorm(nn.Module):
    """[B] (and [E] §1.3)-style BatchNorm: mode from torch.is_grad_enabled(), moving statistics as
    plain attributes (not buffers), biased moving variance, old-value-weight momentum m:
    moving <- m * moving + (1 - m) * batch."""

    def __init__(self, c: int, m: float = 0.9, eps: float = 1e-5) -> None:
        super().__init__()
        self.m, self.eps = m, eps
        self.gamma, self.beta = nn.Parameter(torch.ones(c)), nn.Parameter(torch.zeros(c))
        self.moving_mean, self.moving_var = torch.zeros(c), torch.ones(c)

    def forward(self, x: Tensor) -> Tensor:
        if not torch.is_grad_enabled():
            x_hat = (x - self.moving_mean) / torch.sqrt(self.moving_var + self.eps)
        else:
            mu, var = x.mean(0), ((x - x.mean(0)) ** 2).mean(0)
            x_hat = (x - mu) / torch.sqrt(var + self.eps)
            self.moving_mean = (self.m * self.moving_mean + (1 - self.m) * mu).detach()
            self.moving_var = (self.m * self.moving_var + (1 - self.m) * var).detach()
        return self.gamma * x_hat + self.beta


def demo_b1() -> Demo:
    g = _gen(0)
    flawed, ref = GradModeBatchNorm(3), nn.BatchNorm1d(3)
    for _ in range(30):
        xb = torch.randn(8, 3, generator=g) + 2
        flawed(xb), ref(xb)
    var_ratio = (flawed.moving_var / ref.running_var).mean().item()     # after the same 30 training batches
    flawed.eval(), ref.eval()
    shifted = torch.randn(8, 3, generator=g) + 10                  # an evaluation batch, no no_grad
    before = flawed.moving_mean.clone()
    yf, yr = flawed(shifted), ref(shifted)
    values = {
        "flawed_eval_mean": yf.mean().item(), "ref_eval_mean": yr.mean().item(),
        "flawed_stats_moved": float(not torch.equal(before, flawed.moving_mean)),
        "flawed_in_state_dict": float(any("moving" in k for k in flawed.state_dict())),
        "ref_in_state_dict": float("running_mean" in ref.state_dict()),
        "var_ratio": var_ratio,
    }
    rows = [["model.eval() 后（未包 no_grad）输出均值", f"{values['flawed_eval_mean']:.3g}（仍用 batch 统计量）",
             f"{values['ref_eval_mean']:.3g}（用滑动统计量）"],
            ["这次 eval 前向改写了滑动统计量？", "是" if values["flawed_stats_moved"] else "否", "否"],
            ["滑动统计量在 state_dict 里？", "是" if values["flawed_in_state_dict"] else "否（普通属性）", "是 (buffer)"],
            ["训练后滑动方差 / torch 的滑动方差", f"{values['var_ratio']:.3f}", "1（torch 存无偏方差；有偏 ÷ 无偏 = 7/8）"]]
    return Demo("[B]、[E] §1.3 的 BatchNorm vs nn.BatchNorm1d", ["检查", "资料的写法", "torch.nn"], rows, values)


def demo_b2() -> Demo:
    ln, rms = nn.LayerNorm(64), nn.RMSNorm(64)
    n_ln, n_rms = sum(p.numel() for p in ln.parameters()), sum(p.numel() for p in rms.parameters())
    names = ", ".join(n for n, _ in rms.named_parameters())
    rows = [["LayerNorm(64)", n_ln, "weight γ, bias β"], ["RMSNorm(64)", n_rms, f"{names} (γ，即缩放)"]]
    return Demo("[B] RMSNorm：去掉的是 β 和减均值，缩放 γ 还在", ["模块", "参数个数", "参数"], rows,
                {"ln_params": float(n_ln), "rms_params": float(n_rms)})


# ---------------------------------------------------------------------------------------------
# [C] 《Add & Norm（大模型篇）》
# ---------------------------------------------------------------------------------------------

def layerscale_drift(init: float, depth: int = 24, width: int = 32) -> float:
    """||x_L - x_0|| / ||x_0|| at init for x <- x + diag(init) F(LN(x)), F a random ReLU MLP."""
    g = _gen(3)
    x0 = torch.randn(16, width, generator=g)
    x = x0
    for _ in range(depth):
        w1 = torch.randn(4 * width, width, generator=g) / math.sqrt(width)
        w2 = torch.randn(width, 4 * width, generator=g) / math.sqrt(4 * width)
        x = x + init * (F.relu(F.layer_norm(x, (width,)) @ w1.T) @ w2.T)
    return ((x - x0).norm() / x0.norm()).item()


# CaiT's LayerScale init by depth (Touvron et al. 2021 §3; facebookresearch/deit cait_models.py:
# init_scale=1e-5 for the depth-24 models, 1e-6 for S36 and deeper). [C] uses 0.1 at any depth.
CAIT_INIT = {18: 0.1, 24: 1e-5, 36: 1e-6}


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


def demo_c2() -> Demo:
    from .blocks import MLP, Residual

    w = 32
    def norm_params(m: nn.Module) -> int:
        return sum(p.numel() for n, p in m.named_parameters() if n.startswith("norm"))
    paper = Residual(MLP(w), w, wiring="pre", norm="none", scaling="rezero")          # x + alpha F(x)
    c_block = Residual(MLP(w), w, wiring="pre", norm="layernorm", scaling="rezero")   # x + alpha F(LN(x))
    x = torch.randn(4, w, generator=_gen(4))
    with torch.no_grad():
        identity = max((paper(x) - x).abs().max().item(), (c_block(x) - x).abs().max().item())
    rows = [["Bachlechner et al. 2020 式 (1)", "x + α·F(x)", norm_params(paper), "去掉 LayerNorm，也不需要预热"],
            ["[C] 的 ReZeroTransformerBlock", "x + α·F(LN(x))", norm_params(c_block), "Pre-LN 加一个门"]]
    return Demo(f"[C] ReZero：论文的块里没有 LayerNorm（宽度 {w}；初始化时两者都是恒等映射，最大偏差 {identity:.0e}）",
                ["写法", "公式", "每块归一化参数", "说明"], rows,
                {"paper_norm_params": float(norm_params(paper)), "c_norm_params": float(norm_params(c_block)),
                 "identity_at_init": identity})


def demo_c3() -> Demo:
    from .deepnorm import constants
    N = 100
    alpha, beta = constants("decoder", N)
    c_beta = 1 / math.sqrt(2 * N)
    rows = [["[C] \"深度缩放\" (Pre-LN)", "1", f"{c_beta:.4f}", "运行时，整个分支，永远", f"{adam_effective_step(c_beta):.4f}"],
            ["DeepNet 解码器 (Post-LN, §4.3)", f"{alpha:.3f}", f"{beta:.4f}", "初始化，只 ffn/v_proj/out_proj", "1"],
            ["GPT-2 §2.3 (Pre-LN)", "1", f"{c_beta:.4f}", "初始化，写回残差流的权重", "1"]]
    return Demo(f"[C] 的深度缩放不是 DeepNet (N={N})", ["写法", "恒等路径乘 α", "分支缩放", "何时、作用于谁",
                                                       "Adam 有效学习率倍数"],
                rows, {"c_beta": c_beta, "deepnet_alpha": alpha, "deepnet_beta": beta,
                       "c_adam_ratio": adam_effective_step(c_beta)})


def powernorm_source_c(x: Tensor, p: float = 2.0, eps: float = 1e-6) -> Tensor:
    """[C]'s 'PowerNorm': per-token x / (mean|x|^p)^(1/p) + eps, no batch statistics (gamma=1, beta=0)."""
    return x / (x.abs().pow(p).mean(-1, keepdim=True).pow(1 / p) + eps)


def powernorm_shen_train(x: Tensor, eps: float = 1e-5) -> Tensor:
    """Shen et al. 2020 PowerNorm, training forward without the running average: each feature
    divided by its quadratic mean over the *batch* (and tokens), no mean subtraction."""
    return x / torch.sqrt(x.pow(2).mean(dim=tuple(range(x.dim() - 1)), keepdim=True) + eps)


def demo_c4() -> Demo:
    g = _gen(4)
    x = torch.randn(4, 6, 16, generator=g) * 3
    other = x.clone()
    other[1:] = torch.randn(3, 6, 16, generator=g) * 10             # change the *other* samples
    rms = nn.RMSNorm(16, eps=0.0)
    values = {"vs_rmsnorm": _maxdiff(powernorm_source_c(x), rms(x)),
              "c_batch_dep": _maxdiff(powernorm_source_c(x)[0], powernorm_source_c(other)[0]),
              "shen_batch_dep": _maxdiff(powernorm_shen_train(x)[0], powernorm_shen_train(other)[0])}
    rows = [["与 nn.RMSNorm 的最大差 (p=2)", f"{values['vs_rmsnorm']:.2g}", "—"],
            ["换掉同 batch 的其他样本，样本 0 的输出变化", f"{values['c_batch_dep']:.3g}", f"{values['shen_batch_dep']:.3g}"]]
    return Demo("[C] 的 \"PowerNorm\" 其实是 RMSNorm + β；Shen et al. 2020 的 PowerNorm 是 BN 的变体",
                ["检查", "[C] 的写法", "Shen et al. (batch 二次均值)"], rows, values)


def t5_norm(x: Tensor, eps: float = 1e-6) -> Tensor:
    """T5's layer norm (Raffel et al. 2020 §2.1): scale only, no mean subtraction, no bias."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def demo_c5() -> Demo:
    x = torch.randn(3, 16, generator=_gen(5)) + 2.0                # tokens with a non-zero mean
    values = {"vs_layernorm": _maxdiff(t5_norm(x), F.layer_norm(x, (16,), eps=1e-6)),
              "vs_rmsnorm": _maxdiff(t5_norm(x), F.rms_norm(x, (16,), eps=1e-6))}
    rows = [["nn.LayerNorm（[C] 表里写的）", f"{values['vs_layernorm']:.3g}"],
            ["nn.RMSNorm", f"{values['vs_rmsnorm']:.2g}"]]
    return Demo("[C] 模型表：T5 的 norm 与谁一致？max |T5 norm − 它|", ["对照", "最大差"], rows, values)


def monitor_like_source_c(model: nn.Module, x: Tensor) -> None:
    """[C]'s monitor: reads ``module.input`` of every LayerNorm, an attribute that does not exist."""
    model(x)
    for _, module in model.named_modules():
        if isinstance(module, nn.LayerNorm):
            module.input.mean()                                    # AttributeError


def layernorm_stats(model: nn.Module, x: Tensor) -> list[dict[str, float]]:
    """Input/output mean and std of every nn.LayerNorm, via forward hooks removed afterwards."""
    stats, handles = [], []
    for name, module in model.named_modules():
        if isinstance(module, nn.LayerNorm):
            def hook(mod, inp, out, name=name):
                stats.append({"layer": name, "in_mean": inp[0].mean().item(), "in_std": inp[0].std().item(),
                              "out_mean": out.mean().item(), "out_std": out.std().item()})
            handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return stats


def _tiny_model() -> nn.Module:
    torch.manual_seed(_off())
    return nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 8), nn.LayerNorm(8))


def demo_c6() -> Demo:
    model, x = _tiny_model(), torch.randn(4, 8, generator=_gen(6)) * 5
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


def gradient_flow_like_source_c(model: nn.Module, calls: list) -> None:
    """[C]'s pattern: a tensor hook on every parameter, registered on each call, never removed."""
    for name, p in model.named_parameters():
        p.register_hook(lambda grad, name=name: calls.append(name))


def demo_c7() -> Demo:
    model, x = _tiny_model(), torch.randn(4, 8, generator=_gen(7))
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


class _CountCalls(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def add_layer_norm_source_c(x: Tensor, residual: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-12) -> Tensor:
    """[C]'s 'FusedAddLayerNorm' forward: the same separate eager ops as usual, nothing fused."""
    s = x + residual
    mean = s.mean(dim=-1, keepdim=True)
    var = s.var(dim=-1, unbiased=False, keepdim=True)
    return weight * ((s - mean) / torch.sqrt(var + eps)) + bias


def count_torch_calls(fn: Callable[[], object]) -> int:
    with _CountCalls() as mode:
        fn()
    return len([c for c in mode.calls if not c.startswith("__get__")])


def _median_time(fn: Callable[[], object], repeats: int = 15) -> float:
    fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2]


def demo_c8() -> Demo:
    g = _gen(8)
    x, r = torch.randn(16, 128, 512, generator=g), torch.randn(16, 128, 512, generator=g)
    w, b = torch.ones(512), torch.zeros(512)
    c_fn = lambda: add_layer_norm_source_c(x, r, w, b, eps=1e-5)
    ref_fn = lambda: F.layer_norm(x + r, (512,), w, b, eps=1e-5)
    values = {"c_calls": float(count_torch_calls(c_fn)), "ref_calls": float(count_torch_calls(ref_fn)),
              "diff": _maxdiff(c_fn(), ref_fn()), "c_ms": 1e3 * _median_time(c_fn), "ref_ms": 1e3 * _median_time(ref_fn)}
    rows = [["torch 运算调用次数（每次都是一遍完整的内存读写）", int(values["c_calls"]), int(values["ref_calls"])],
            ["CPU 中位耗时 ms（本机，(16,128,512)）", f"{values['c_ms']:.2f}", f"{values['ref_ms']:.2f}"],
            ["输出最大差", f"{values['diff']:.2g}", "—"]]
    return Demo("[C] \"融合\" Add & Norm vs x + r 再 F.layer_norm", ["", "[C] FusedAddLayerNorm", "add + F.layer_norm"],
                rows, values)


def demo_c9() -> Demo:
    eps16 = float(torch.tensor(1e-12, dtype=torch.float16))
    row = torch.full((1, 8), 3.0, dtype=torch.float16)              # a constant token (e.g. padding)

    def ln_in(x: Tensor, eps: float) -> Tensor:                     # everything in x's dtype, like a .half() copy
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + torch.tensor(eps, dtype=x.dtype))

    nan12 = float(torch.isnan(ln_in(row, 1e-12)).any())
    nan5 = float(torch.isnan(ln_in(row, 1e-5)).any())
    rows = [["1e-12 存成 float16 后的值", f"{eps16:g}", f"{float(torch.tensor(1e-5, dtype=torch.float16)):.3g}"],
            ["常数行的输出含 NaN？", "是" if nan12 else "否", "是" if nan5 else "否"]]
    return Demo("[C] LayerNorm 的 eps=1e-12 在 float16 下", ["", "eps = 1e-12", "eps = 1e-5"], rows,
                {"eps16": eps16, "nan_1e-12": nan12, "nan_1e-5": nan5})


# ---------------------------------------------------------------------------------------------
# [D] 《归一化技术》
# ---------------------------------------------------------------------------------------------

def demo_d1() -> Demo:
    g = _gen(9)
    x = torch.randn(4, 8, generator=g)
    ln_flawed = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + 1e-5)   # var() = unbiased
    bn_flawed = (x - x.mean(0)) / torch.sqrt(x.var(0) + 1e-5)
    ln_ratio = (ln_flawed / F.layer_norm(x, (8,))).mean().item()
    bn_ratio = (bn_flawed / F.batch_norm(x, None, None, training=True)).mean().item()
    rows = [["LayerNorm, d = 8", f"{ln_ratio:.4f}", f"√(7/8) = {math.sqrt(7 / 8):.4f}"],
            ["BatchNorm, batch = 4", f"{bn_ratio:.4f}", f"√(3/4) = {math.sqrt(3 / 4):.4f}"]]
    return Demo("[D] Q1/Q2 用 x.var()（默认无偏）：输出 / torch 的输出", ["", "测得", "手算 √((n−1)/n)"], rows,
                {"ln_ratio": ln_ratio, "bn_ratio": bn_ratio})


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


def demo_d2() -> Demo:
    g = _gen(10)
    lin = nn.Linear(3, 3)
    flawed, ref, ref09 = MomentumMixupBatchNorm(3), nn.BatchNorm1d(3), nn.BatchNorm1d(3, momentum=0.9)
    trace_f, trace_r = [], []
    for _ in range(40):
        h = lin(torch.randn(8, 3, generator=g) + 1)               # requires grad, like a hidden layer
        flawed(h), ref(h.detach()), ref09(h.detach())
        trace_f.append(flawed.running_mean[0].item()), trace_r.append(ref.running_mean[0].item())
    jitter = lambda t: torch.tensor(t[-20:]).std().item()
    values = {"match_momentum_09": _maxdiff(flawed.running_mean, ref09.running_mean),
              "jitter_flawed": jitter(trace_f), "jitter_ref": jitter(trace_r),
              "keeps_graph": float(flawed.running_mean.grad_fn is not None),
              "var_ratio": (flawed.running_var / ref09.running_var).mean().item()}
    rows = [["滑动均值与 nn.BatchNorm1d(momentum=0.9) 的最大差", f"{values['match_momentum_09']:.2g}", "—"],
            ["最后 20 步滑动均值的抖动 (std)", f"{values['jitter_flawed']:.3g}", f"{values['jitter_ref']:.3g}（默认 0.1）"],
            ["running_mean 还挂着计算图 (grad_fn)？", "是" if values["keeps_graph"] else "否", "否"],
            ["滑动方差 / torch(momentum=0.9) 的", f"{values['var_ratio']:.3f}", "1（torch 存无偏方差）"]]
    return Demo("[D] 的 BatchNorm1d：momentum=0.9 代入 PyTorch 的公式", ["检查", "[D] 的写法", "torch.nn"], rows, values)


def preln_last_ffn_grad(depth: int, width: int = 32, seeds: tuple[int, ...] = (0, 1, 2)) -> float:
    """Mean ||dL/dW_fc2|| of the last block of a Pre-LN MLP stack (with final LN) at init."""
    from .blocks import build_stack
    total = 0.0
    for s in seeds:
        stack = build_stack(depth, width=width, wiring="pre", sublayer="mlp", seed=s + _off())
        x = torch.randn(64, width, generator=_gen(100 + s))
        target = torch.randn(64, width, generator=_gen(200 + s))
        F.mse_loss(stack(x), target).backward()
        total += stack.blocks[-1].mlp.sublayer.fc2.weight.grad.norm().item()
    return total / len(seeds)


def demo_d3() -> Demo:
    depths = (4, 16, 64)
    grads = [preln_last_ffn_grad(L) for L in depths]
    slope = (math.log(grads[-1]) - math.log(grads[0])) / (math.log(depths[-1]) - math.log(depths[0]))
    rows = [[L, f"{gr:.4f}", f"{grads[0] * math.sqrt(depths[0] / L):.4f}", f"{grads[0] * math.sqrt(L / depths[0]):.4f}"]
            for L, gr in zip(depths, grads)]
    return Demo(f"[D] Q4：Pre-LN 最后一层 FFN 的梯度随层数 L（拟合指数 {slope:.2f}）",
                ["L", "测得 ‖∂L/∂W‖", "若 ∝ 1/√L", "若 ∝ √L（[D]）"], rows, {"slope": slope})


def fold_batchnorm(linear: nn.Linear, bn: nn.BatchNorm1d) -> nn.Linear:
    """Linear followed by an eval-mode BN as one Linear: W' = s W, b' = s (b - mu) + beta, s = gamma/sqrt(var+eps)."""
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    fused = nn.Linear(linear.in_features, linear.out_features)
    with torch.no_grad():
        fused.weight.copy_(s[:, None] * linear.weight)
        fused.bias.copy_(s * (linear.bias - bn.running_mean) + bn.bias)
    return fused


@_seed_param
def bn_cost(batch: int = 512, d_in: int = 64, d_out: int = 256) -> Demo:
    """[D]'s "BN 计算成本中等" vs "BN costs nothing": both sides, on this machine.

    Inference: an eval-mode BN right after a Linear folds into it (one Linear, same output, same time
    as the bare Linear). Training: BN needs the batch reductions, the running-statistic update and
    its own backward (and, across devices, a synchronisation), none of which folds away."""
    from .bench import timeit
    g = _gen(11)
    torch.manual_seed(11 + _off())
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
        fold_rel = _maxdiff(folded(x), ref) / ref.abs().max().item()
    train_bn = nn.BatchNorm1d(d_out)

    def step(*mods: nn.Module):                   # forward + backward of a training step
        for m in mods:
            m.zero_grad(set_to_none=True)
        y = lin(x)
        for m in mods[1:]:
            y = m(y)
        y.sum().backward()

    best = lambda fn: min(timeit(fn, warmup=3, repeats=9, inner=5))
    with torch.no_grad():
        t_lin, t_fold, t_eval = best(lambda: lin(x)), best(lambda: folded(x)), best(lambda: bn(lin(x)))
    t_step_lin, t_step_bn = best(lambda: step(lin)), best(lambda: step(lin, train_bn))
    us = lambda t: f"{1e6 * t:.0f}"
    rows = [["推理：Linear", us(t_lin), "1.00"],
            ["推理：Linear → BN（eval，未折叠）", us(t_eval), f"{t_eval / t_lin:.2f}"],
            ["推理：BN 折叠进 Linear", us(t_fold), f"{t_fold / t_lin:.2f}"],
            ["训练一步（前向 + 反向）：Linear", us(t_step_lin), "1.00"],
            ["训练一步（前向 + 反向）：Linear → BN（train）", us(t_step_bn), f"{t_step_bn / t_step_lin:.2f}"],
            ["折叠后输出与 Linear → BN 的最大相对差", f"{fold_rel:.1g}", "—"]]
    return Demo(f"[D] BN 的计算成本：推理时可折叠为 0，训练时不行（本机，batch {batch}，{d_in}→{d_out}，最快一轮 µs）",
                ["", "µs", "÷ Linear"], rows,
                {"fold_rel_diff": fold_rel, "fold_vs_linear": t_fold / t_lin, "eval_vs_linear": t_eval / t_lin,
                 "train_step_ratio": t_step_bn / t_step_lin})


def preln_stream_growth(depth: int, width: int = 32, seed: int = 0, final_norm: bool = False) -> float:
    """||x_L||^2 / ||x_0||^2 of a Pre-LN MLP stack at init, without (default) or with the final norm."""
    from .blocks import build_stack
    stack = build_stack(depth, width=width, wiring="pre", sublayer="mlp", final_norm=final_norm, seed=seed + _off())
    x = torch.randn(64, width, generator=_gen(seed))
    with torch.no_grad():
        return (stack(x).pow(2).sum() / x.pow(2).sum()).item()


def demo_d5() -> Demo:
    depths = (6, 24, 96)
    growth = [preln_stream_growth(L) for L in depths]
    with_ln = [preln_stream_growth(L, final_norm=True) for L in depths]
    rows = [[L, f"{gr:.1f}", f"{fl:.2f}"] for L, gr, fl in zip(depths, growth, with_ln)]
    return Demo("[D] 的 Pre-Norm 流程图少了最后一个 LayerNorm：残差流 ‖x_L‖²/‖x_0‖² 随层数增长",
                ["层数 L", "无最终 LN", "有最终 LN (GPT-2 的 ln_f)"], rows,
                {**{f"growth_{L}": gr for L, gr in zip(depths, growth)},
                 **{f"final_ln_{L}": fl for L, fl in zip(depths, with_ln)}})


# ---------------------------------------------------------------------------------------------
# [E] 《Normalization》
# ---------------------------------------------------------------------------------------------

def bn_over_be_plane(x: Tensor, eps: float = 1e-5) -> Tensor:
    """[E] §1's 'BN on the (B, E) plane' for text (B, S, E): one statistic per position s."""
    mu = x.mean(dim=(0, 2), keepdim=True)
    var = x.var(dim=(0, 2), keepdim=True, unbiased=False)
    return (x - mu) / torch.sqrt(var + eps)


def demo_e1() -> Demo:
    x = torch.randn(4, 6, 5, generator=_gen(12)) * torch.linspace(0.5, 3, 5) + torch.arange(5.0)  # features differ
    flawed = bn_over_be_plane(x)
    ref = nn.BatchNorm1d(5, affine=False)(x.transpose(1, 2)).transpose(1, 2)    # one statistic per feature e
    feat_mean = lambda y: y.mean(dim=(0, 1)).abs().max().item()
    values = {"flawed_feature_mean": feat_mean(flawed), "ref_feature_mean": feat_mean(ref),
              "flawed_equals_bn_over_s": float(_maxdiff(flawed, nn.BatchNorm1d(6, affine=False)(x)) < 1e-5)}
    rows = [["每个特征 e 归一化后的 |均值| 最大值", f"{values['flawed_feature_mean']:.3g}", f"{values['ref_feature_mean']:.2g}"],
            ["统计量的组数", "S = 6（每个位置一组）", "E = 5（每个特征一组）"]]
    return Demo("[E] §1 \"(B, E) 平面\" vs 文本上真正的 BN（每个特征 e 跨 (B, S)）",
                ["", "[E] 的 (B, E) 平面", "nn.BatchNorm1d(E) on x.transpose(1, 2)"], rows, values)


def demo_e2() -> Demo:
    g = _gen(13)
    x = torch.randn(4, 3, 5, 5, generator=g)
    bhw = lambda t: F.batch_norm(t, None, None, training=True)      # [E] §2's "(B, HW) plane" = BN
    lnorm = lambda t: F.layer_norm(t, t.shape[1:])                  # LN on images: per sample over (C, H, W)
    other = x.clone()
    other[1:] = torch.randn(3, 3, 5, 5, generator=g) * 4 + 2
    values = {"bhw_batch_dep": _maxdiff(bhw(x)[0], bhw(other)[0]), "ln_batch_dep": _maxdiff(lnorm(x)[0], lnorm(other)[0]),
              "ln_vs_groupnorm1": _maxdiff(lnorm(x), F.group_norm(x, 1))}
    rows = [["换掉其他样本后样本 0 的输出变化", f"{values['bhw_batch_dep']:.3g}", f"{values['ln_batch_dep']:.2g}"],
            ["与 GroupNorm(1, C) 的最大差", "—", f"{values['ln_vs_groupnorm1']:.2g}"]]
    return Demo("[E] §2 说图像 LN 在 \"(B, HW) 平面\"：那是 BN；LN 是每个样本在 (C, H, W) 上",
                ["", "(B, HW) 平面 = BN", "LayerNorm([C, H, W])"], rows, values)


def demo_e3() -> Demo:
    g = _gen(14)
    bn = nn.BatchNorm1d(4)
    with torch.no_grad():
        for _ in range(30):
            bn(torch.randn(16, 4, generator=g) * 3 + 1)
    bn.eval()
    x = torch.randn(6, 4, generator=g) * 3 + 1
    no_root = (x - bn.running_mean) / (bn.running_var + bn.eps)         # [E] §1.2 as written
    with torch.no_grad():
        ref = bn(x)
    values = {"diff": _maxdiff(no_root, ref), "std_no_root": no_root.std().item(), "std_ref": ref.std().item()}
    rows = [["推理输出的标准差", f"{values['std_no_root']:.3f}", f"{values['std_ref']:.3f}"],
            ["与 nn.BatchNorm1d (eval) 的最大差", f"{values['diff']:.3g}", "0"]]
    return Demo("[E] §1.2 推理公式少了根号：(x−μ)/(σ²+ε) vs (x−μ)/√(σ²+ε)", ["", "[E] 的公式", "nn.BatchNorm1d"],
                rows, values)


def demo_e4(steps: int = 200) -> Demo:
    g = _gen(15)
    p = 0.1
    text_mean = torch.zeros(2)                      # [E] §1.2 text: mean <- p*mean + (1-p)*batch
    code_mean = torch.zeros(2)                      # [E] §1.3 code: mean <- (1-p)*mean + p*batch
    ref = nn.BatchNorm1d(2, momentum=p)
    trace_t, trace_c, trace_r = [], [], []
    for _ in range(steps):
        xb = torch.randn(8, 2, generator=g) + 4
        mu = xb.mean(0)
        text_mean = p * text_mean + (1 - p) * mu
        code_mean = (1 - p) * code_mean + p * mu
        ref(xb)
        trace_t.append(text_mean[0].item()), trace_c.append(code_mean[0].item())
        trace_r.append(ref.running_mean[0].item())
    half = steps // 2                               # the second half: after the running means have settled
    jitter = lambda t: torch.tensor(t[half:]).std().item()
    gap = lambda t: sum(abs(a - b) for a, b in zip(t[half:], trace_r[half:])) / (steps - half)
    values = {"text_vs_torch": gap(trace_t), "code_vs_torch": _maxdiff(code_mean, ref.running_mean),
              "jitter_text": jitter(trace_t), "jitter_code": jitter(trace_c)}
    rows = [[f"后 {steps - half} 步与 nn.BatchNorm1d(momentum=0.1) 的平均差", f"{values['text_vs_torch']:.3g}",
             f"{values['code_vs_torch']:.2g}（最大差）"],
            [f"后 {steps - half} 步滑动均值的抖动 (std)", f"{values['jitter_text']:.3g}", f"{values['jitter_code']:.3g}"]]
    return Demo("[E] §1.2 正文与 §1.3 代码对同一个 momentum = 0.1 的两种相反用法",
                ["", "正文：p·旧 + (1−p)·新", "代码：(1−p)·旧 + p·新 (= PyTorch)"], rows, values)


@_seed_param
def momentum_traces(steps: int = 60, true_mean: float = 4.0) -> dict[str, list[float]]:
    """Running mean of one feature under both readings of "momentum" (batches of 8 from N(true_mean, 1)).

    weight 0.1 on the new batch: torch's default = [B]'s m=0.9 old-value form = [E] §1.3's code
    weight 0.9 on the new batch: [E] §1.2's text with p=0.1 = [D]'s code with 0.9
    """
    g = _gen(15)
    ref, fast = nn.BatchNorm1d(1, momentum=0.1), nn.BatchNorm1d(1, momentum=0.9)
    out: dict[str, list[float]] = {"batch": [], "new_weight_0.1": [], "new_weight_0.9": []}
    for _ in range(steps):
        xb = torch.randn(8, 1, generator=g) + true_mean
        ref(xb), fast(xb)
        out["batch"].append(xb.mean().item())
        out["new_weight_0.1"].append(ref.running_mean.item())
        out["new_weight_0.9"].append(fast.running_mean.item())
    return out


def demo_e5() -> Demo:
    x = torch.randn(3, 16, generator=_gen(16)) * 4
    mu = x.mean(-1, keepdim=True)
    sigma = x.std(-1, keepdim=True, unbiased=False)
    flawed = (x - mu) / torch.sqrt(sigma + 1e-6)                   # [E] §2: sqrt(sigma + eps), sigma a std
    ref = F.layer_norm(x, (16,), eps=1e-6)
    values = {"diff": _maxdiff(flawed, ref), "std_flawed": flawed.std(-1, unbiased=False).mean().item()}
    rows = [["每个 token 输出的标准差", f"{values['std_flawed']:.3f}", "1.000"],
            ["与 F.layer_norm 的最大差", f"{values['diff']:.3g}", "0"]]
    return Demo("[E] §2 公式 √(σ+ε)：σ 应是方差 σ²", ["", "√(σ_token + ε)", "√(σ² + ε)"], rows, values)


def demo_e6() -> Demo:
    g, rows, values = _gen(17), [], {}
    ref = nn.RMSNorm(16, eps=1e-6)
    for scale in (1.0, 1e-2, 1e-3):
        x = torch.randn(4, 16, generator=g) * scale
        formula = x / (x.pow(2).mean(-1, keepdim=True).sqrt() + 1e-6)   # [E] §3 formula: eps outside
        code = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)   # [E] §3 code: eps inside
        with torch.no_grad():
            r = ref(x)
        values[f"formula_{scale:g}"], values[f"code_{scale:g}"] = _maxdiff(formula, r), _maxdiff(code, r)
        rows.append([f"{scale:g}", f"{values[f'formula_{scale:g}']:.3g}", f"{values[f'code_{scale:g}']:.2g}"])
    return Demo("[E] §3 RMSNorm：公式（ε 在根号外）与代码（根号内）不一致；与 nn.RMSNorm(eps=1e-6) 的最大差",
                ["输入尺度", "按 [E] 的公式", "按 [E] 的代码"], rows, values)


def branch_shares(alpha: float, beta: float, width: int = 32) -> tuple[float, float]:
    """Share of the update ||branch|| / ||skip|| for a linear branch F(x) = W x at init.

    [E] §4:   x + alpha * (beta W) x        -> alpha * beta * ||W x|| / ||x||
    DeepNet:  LN(alpha x + (beta W) x)      -> beta * ||W x|| / (alpha ||x||)
    """
    g = _gen(18)
    w = torch.randn(width, width, generator=g) / math.sqrt(width)
    x = torch.randn(16, width, generator=g)
    fx = x @ (beta * w).T
    return (alpha * fx).norm().item() / x.norm().item(), fx.norm().item() / (alpha * x).norm().item()


def demo_e7() -> Demo:
    from .deepnorm import constants
    N = 24
    alpha, beta = constants("decoder", N)
    wrong, right = branch_shares(alpha, beta)
    rows = [["分支 / 恒等路径 ‖·‖（初始化时）", f"{wrong:.4f}", f"{right:.4f}"],
            ["两者之比", f"{wrong / right:.3f}", f"α² = {alpha ** 2:.3f}"]]
    return Demo(f"[E] §4：x + α·F(x) vs 论文 LN(α·x + F(x)) (N={N}, α={alpha:.3f}, β={beta:.3f})",
                ["", "[E] 的写法", "DeepNet §4.2"], rows, {"wrong": wrong, "right": right, "alpha": alpha})


def demo_e8() -> Demo:
    from .deepnorm import constants
    rows, values = [], {}
    for arch, kw in (("encoder", {"N": 12}), ("decoder", {"M": 12}), ("encdec_encoder", {"N": 12, "M": 12}),
                     ("encdec_decoder", {"N": 12, "M": 12})):
        a, b = constants(arch, **kw)
        rows.append([arch, f"{a:.3f}", f"{b:.3f}"])
        values[f"{arch}_alpha"], values[f"{arch}_beta"] = a, b
    a_e, b_e = (2 * 12) ** 0.25, (8 * 12) ** -0.25
    values["e_alpha"], values["e_beta"] = a_e, b_e
    rows.append(["[E]：(2N)^¼, (8N)^-¼ 用于一切", f"{a_e:.3f}", f"{b_e:.3f}"])
    rows.append(["β 作用于", "ffn、v_proj、out_proj", "不含 q_proj、k_proj（§4.3）"])
    return Demo("[E] §4 的常数只对单一编码器/解码器成立（N = M = 12）", ["架构", "α", "β"], rows, values)


def demo_e9() -> Demo:
    g, p, B = _gen(19), 0.9, 16                    # [E]'s p: weight of the old value; torch momentum = 1 - p
    batches = [torch.randn(B, 3, generator=g) * 3 + 2 for _ in range(50)]
    literal, fixed = torch.ones(3), torch.ones(3)
    ref = nn.BatchNorm1d(3, momentum=1 - p)
    for xb in batches:
        literal = p * literal + (1 - p) * literal                   # bar on sigma_t^2: both terms are the running value
        fixed = p * fixed + (1 - p) * xb.var(0, unbiased=True)      # the batch's own variance (torch stores it unbiased)
        ref(xb)
    data = torch.cat(batches)
    batch_means = torch.stack([xb.mean(0) for xb in batches])
    values = {"literal_var": literal.max().item(), "torch_running_var": ref.running_var.mean().item(),
              "fixed_vs_torch": _maxdiff(fixed, ref.running_var),
              "single_batch_err": (batch_means - data.mean(0)).abs().max(1).values.mean().item(),
              "expectation_err": _maxdiff(batch_means.mean(0), data.mean(0))}
    rows = [["50 个 batch 后的滑动方差（数据方差 ≈ 9）", f"{values['literal_var']:.3f}（停在初值）",
             f"{values['torch_running_var']:.3f}（nn.BatchNorm1d）"],
            ["μ_test 与全部训练数据均值的最大差", f"{values['single_batch_err']:.3g}（某一个 batch 的 μ，50 个 batch 的平均）",
             f"{values['expectation_err']:.2g}（E[μ_batch]，各 batch 均值的平均）"],
            ["去掉横线后的滑动方差与 nn.BatchNorm1d(momentum=1−p) 的最大差", "—", f"{values['fixed_vs_torch']:.2g}"]]
    return Demo("[E] §1.2 的两处记号：σ_t² 上多了滑动平均的横线；μ_test、σ²_test 少了期望 E",
                ["", "按 [E] 字面", "正确"], rows, values)



# ---------------------------------------------------------------------------------------------
# Claims of degree measured here (see CLAIMS)
# ---------------------------------------------------------------------------------------------

def layer_norm_no_upcast(x: Tensor, eps: float = 1e-5) -> Tensor:
    """Two-pass LayerNorm computed entirely in x's dtype (no float32 upcast)."""
    mu = x.mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)


def rms_norm_no_upcast(x: Tensor, eps: float = 1e-6) -> Tensor:
    """RMSNorm computed entirely in x's dtype (no float32 upcast)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


@_seed_param
def half_precision_stability() -> Demo:
    """[D] Q2 "RMSNorm 数值稳定性更好": float16 inputs, each norm with and without the float32 upcast,
    against F.layer_norm / F.rms_norm of the same (rounded) input in float32."""
    g, rows, values = _gen(22), [], {}
    cases = (("N(0, 1)", "normal", 1.0, 0.0), ("300 + N(0, 1)（大偏移）", "offset", 1.0, 300.0),
             ("300·N(0, 1)（大幅度）", "wide", 300.0, 0.0))
    for label, key, scale, offset in cases:
        h = (torch.randn(8, 64, generator=g) * scale + offset).half()
        ref_ln, ref_rms = F.layer_norm(h.float(), (64,)), F.rms_norm(h.float(), (64,), eps=1e-6)
        errs = {"ln_raw": _maxdiff(layer_norm_no_upcast(h), ref_ln), "rms_raw": _maxdiff(rms_norm_no_upcast(h), ref_rms),
                "ln_up": _maxdiff(layer_norm_no_upcast(h.float()).half(), ref_ln),
                "rms_up": _maxdiff(rms_norm_no_upcast(h.float()).half(), ref_rms)}
        values.update({f"{k}_{key}": v for k, v in errs.items()})
        rows.append([label] + [f"{errs[k]:.3g}" for k in ("ln_raw", "rms_raw", "ln_up", "rms_up")])
    return Demo("[D] Q2 \"RMSNorm 数值稳定性更好\"：float16 输入，与 float32 参照的最大差",
                ["输入", "LN 不上转", "RMSNorm 不上转", "LN 先转 float32", "RMSNorm 先转 float32"], rows, values)

class _HandLayerNorm(nn.Module):
    """A hand-written LayerNorm module, the kind [D]'s timing code compares (our code)."""

    def __init__(self, d: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps, self.gamma, self.beta = eps, nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))

    def forward(self, x: Tensor) -> Tensor:
        mu = x.mean(-1, keepdim=True)
        return self.gamma * (x - mu) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + self.eps) + self.beta


class _HandRMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps, self.gamma = eps, nn.Parameter(torch.ones(d))

    def forward(self, x: Tensor) -> Tensor:
        return self.gamma * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


@_seed_param
def timing_pitfalls(shape: tuple[int, int, int] = (4, 384, 768), loops: int = 5, rounds: int = 7) -> Demo:
    """[D]'s compare_normalization, its pattern in our code: build BN, LN and RMSNorm modules, then time
    LN and RMSNorm once each with time.time() around a loop, no warm-up, no repetition.

    Shows (on this machine): the very first call costs more than a typical call; the LN/RMS ratio of one
    such loop moves from round to round; the BatchNorm that is built is never called (counted with hooks).
    """
    import statistics
    d = shape[-1]
    x = torch.randn(*shape, generator=_gen(40))
    mods = {"bn": nn.BatchNorm1d(d), "ln": _HandLayerNorm(d), "rms": _HandRMSNorm(d)}
    calls = dict.fromkeys(mods, 0)
    for name, m in mods.items():
        m.register_forward_hook(lambda mod, inp, out, name=name: calls.__setitem__(name, calls[name] + 1))
    with torch.no_grad():
        t0 = time.perf_counter()                    # the first call at this shape (allocations, caches)
        mods["ln"](x)
        first = time.perf_counter() - t0
        singles = {name: _single_times(lambda m=mods[name]: m(x), 15) for name in ("ln", "rms")}
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


def _single_times(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


# Which update rule each document's running statistics use (read from the documents; errata B1, D2, E4, E9).
# "old weight m": running <- m * running + (1 - m) * batch;  "new weight m": running <- (1 - m) * running + m * batch
# (PyTorch's form; torch's momentum is the new value's weight, default 0.1).
MOMENTUM_CONVENTIONS: list[tuple[str, str, str, str]] = [
    # (where, the rule as written, the value, the same thing in PyTorch)
    ("[A] §2.2.1 代码", "没有滑动统计量（推理也用当前 batch，勘误 A2）", "—", "—"),
    ("[B] BatchNorm 代码", "旧值权重 m：m·旧 + (1−m)·新", "m = 0.9", "momentum=0.1（默认值）✓"),
    ("[D] BatchNorm1d 代码", "新值权重 m（PyTorch 的写法）", "m = 0.9", "momentum=0.9 ✗（勘误 D2）"),
    ("[E] §1.2 正文", "旧值权重 p：p·旧 + (1−p)·新", "未给数值", "momentum = 1 − p"),
    ("[E] §1.3 代码", "新值权重 m（PyTorch 的写法）", "m = 0.1", "momentum=0.1（默认值）✓"),
]


def momentum_table() -> Table:
    return Table([list(r) for r in MOMENTUM_CONVENTIONS], ["资料", "更新式", "取值", "对应 nn.BatchNorm1d"],
                 title="每份资料的 momentum 约定")


# ---------------------------------------------------------------------------------------------
# The catalogue
# ---------------------------------------------------------------------------------------------

def _e(id, doc, section, kind, says, right, chapter, chapter_section, run) -> Erratum:
    return Erratum(id, doc, section, kind, says, right, chapter, chapter_section, run)


ERRATA: list[Erratum] = [
    _e("A1", "A", "§1", "说法 claim",
       "残差块对 x 的导数是 1，所以每层都加了常数 1，梯度消失就解决了。",
       "导数是雅可比矩阵 I + J_F，不是标量 1；梯度倍数是各层 (I + J_F) 的乘积，可以衰减也可以爆炸。残差让 J_F 小时接近 I（He et al. 2016 §3）。",
       "01_residuals", "2. \"雅可比矩阵里的 +1\"，用数字看", demo_a1),
    _e("A2", "A", "§2.2.1", "代码 code",
       "手写的 BatchNorm 只用当前 batch 的均值方差，没有滑动统计量；非 2 维输入一律按 (0, 2, 3) 求统计量。",
       "推理时应使用训练中累积的 running_mean/running_var（Ioffe & Szegedy 2015 §3.1、Alg. 2），否则单样本推理输出恒为 β；(N, C, L) 输入应在 (0, 2) 上求。",
       "02_batchnorm", "2. 训练模式与推理模式：`model.eval()` 与 `torch.no_grad()`", demo_a2),
    _e("A3", "A", "§2.3.1", "代码 code",
       "手写 LayerNorm 把 Parameter 拼错（运行即报错），并把 ε 加在标准差上：(x−μ)/(σ+ε)。",
       "nn.Parameter；PyTorch 与通常写法是 (x−μ)/√(σ²+ε)（torch/nn/modules/normalization.py），小方差输入时两者差别很大。",
       "03_layernorm", "5.2 ε 放在根号里面还是外面？", demo_a3),
    _e("A4", "A", "§2.4", "代码 code",
       "RMSNorm 先上转 float32 计算、转回输入类型，再乘 weight；weight 保持 float32 而输入是半精度时（混合精度的常见情形），输出类型就变了。",
       "最后的乘法把结果又提升成 float32，输出类型与输入不同；nn.RMSNorm 对 bfloat16 输入返回 bfloat16。HF/Meta 的 LLaMA 代码（[B] 的 LlamaRMSNorm 也是）同样先转回再乘 weight：整个模型都是半精度、weight 也是半精度时没有差别，所以这是 weight 为 float32 时才出现的不一致，不是 LLaMA 写错。",
       "04_rmsnorm", "4. 精度：float16 必须先转 float32", demo_a4),
    _e("A5", "A", "§2.5.1", "代码 code",
       "DeepNorm 代码在每次前向时把子层的输入乘以 β：LN(α·x + G(β·x))。",
       "β 是初始化时对 ffn、v_proj、out_proj 权重的缩放（Wang et al. 2022 §4.2–4.3，Fig. 2）；运行时缩放输入既改变了初始化的尺度（FFN 少乘一个 β），也把 Adam 的有效学习率乘了 β。",
       "05_deepnorm", "2. 两种常见的错误写法", demo_a5),
    _e("A6", "A", "§2.6", "出处 attribution",
       "说 Pre-LN 是 Xiong et al.《On Layer Normalization in the Transformer Architecture》针对 Post-LN 提出的。",
       "Pre-LN 在此之前已被使用（GPT-2 报告 §2.3；Baevski & Auli 2019；Wang et al. 2019）；Xiong et al. 2020 的贡献是理论分析（§3，定理 1）和\"无需预热\"的实验。",
       "06_placement", "2. Xiong et al. 2020：理论说了什么，我们复现出什么", demo_a6),
    _e("A7", "A", "§2.4", "公式 formula",
       "说 RMSNorm 就是从式 (1) 中去掉 μ 的计算；而 [A] 自己编号的式 (1) 是 BatchNorm，LayerNorm 是式 (2)。",
       "应是式 (2)（LayerNorm）去掉 μ：每个 token 除以自身的均方根，即 RMSNorm（Zhang & Sennrich 2019 式 (4)；nn.RMSNorm）。式 (1) 去掉 μ 得到的是每个特征在 batch 上的二次均值归一化，依赖同 batch 的其他样本，不是 RMSNorm。",
       "04_rmsnorm", "1. 从零写 RMSNorm", demo_a7),
    _e("A8", "A", "§2.5", "说法 claim",
       "称 DeepNorm 是 LayerNorm 的改进版：把残差分支的结果放大 α 倍再做 LN，从而在千层网络里保持梯度量级恒定。",
       "DeepNorm 里的 LN 就是普通 LayerNorm；论文（摘要称之为\"修改残差连接的归一化函数\"）改的是残差连接，α 乘在恒等路径 x 上：LN(α·x + G(x))，另加 β 初始化（Wang et al. 2022 §4.2–4.3）。它的理论界定的是模型更新 ‖ΔF‖ 不随深度爆炸（摘要、§4），不是梯度恒定。我们测的是 MLP 块的堆叠、MSE 损失、初始化时：每一块 fc1、fc2 的权重梯度都与 β/α ∝ 1/√N 成正比（N = 6、24、96），即随深度变小。",
       "05_deepnorm", "3.2 初始化时每一层的梯度", demo_a8),
    _e("B1", "B", "BatchNorm", "代码 code",
       "手写 BatchNorm 用 torch.is_grad_enabled() 判断训练/推理，滑动统计量是普通属性，滑动方差用有偏估计（[E] §1.3 的代码相同）。",
       "模式应看 self.training（model.eval()）；滑动统计量应 register_buffer（进 state_dict）；running_var 存无偏方差（PyTorch 文档与 Normalization.cpp；Ioffe & Szegedy §3.1）。",
       "02_batchnorm", "2. 训练模式与推理模式：`model.eval()` 与 `torch.no_grad()`", demo_b1),
    _e("B2", "B", "RMSNorm", "说法 claim",
       "RMSNorm 没有拉伸（缩放）操作，因此减少了参数。",
       "RMSNorm 去掉的是减均值和偏移 β；缩放 γ (weight) 仍在（Zhang & Sennrich 2019 式 (4)；nn.RMSNorm）。[B] 自己的代码里也有 weight。",
       "04_rmsnorm", "1. 从零写 RMSNorm", demo_b2),
    _e("C1", "C", "残差缩放与初始化 · 2. LayerScale", "出处 attribution",
       "LayerScale 由 \"MetaNet\" 提出；示例初值 0.1，不论深度。",
       "LayerScale 来自 Touvron et al. 2021 CaiT《Going deeper with Image Transformers》§3。初值随深度变：0.1 只用到深度 18，深度 24 用 1e-5，更深用 1e-6（论文 §3；官方代码 cait_models.py 里 24 层的模型用 1e-5、36 层及以上用 1e-6）；24 个块时 0.1 比论文的值大四个数量级。",
       "01_residuals", "4. 残差缩放：初始化时它们各做了什么", demo_c1),
    _e("C2", "C", "残差缩放与初始化 · 1. ReZero", "代码 code",
       "ReZero 块保留了两个 LayerNorm（Pre-LN）再乘零初始化的门。",
       "ReZero 的定义是 x + α·F(x)，去掉了 LayerNorm（Bachlechner et al. 2020 式 (1)、§1：训练 100 层以上的 Transformer 而不用 LayerNorm 和预热）。",
       "01_residuals", "4. 残差缩放：初始化时它们各做了什么", demo_c2),
    _e("C3", "C", "残差缩放与初始化 · 3. 深度缩放", "代码 code",
       "名为 DeepNetTransformerBlock 的 Pre-LN 块在每次前向时把分支乘 1/√(2N)（layer_idx 未使用）。",
       "DeepNet 是 Post-LN：恒等路径乘 α，β 只在初始化时缩放部分权重（§4.2–4.3）；1/√(2N) 是 GPT-2 的初始化规则（§2.3），同样只在初始化时用。运行时常数乘子还把 Adam 的有效学习率缩小了同样倍数。",
       "05_deepnorm", "4. 放在一起看：DeepNorm、Admin 与残差缩放", demo_c3),
    _e("C4", "C", "层归一化的变体 · 2. PowerNorm", "代码 code",
       "PowerNorm 被写成每个 token 除以自身 p 次幂均值，再加 γ、β。",
       "Shen et al. 2020 的 PowerNorm 是 BatchNorm 的变体：不减均值、用 batch 的二次均值 (quadratic mean) 和其滑动平均，并有近似反向传播（§4, Alg. 1）。[C] 的版本在 p=2 时就是 RMSNorm（ε 在根号外）加 β。",
       "07_beyond", "2. PowerNorm：论文里的和资料里的不是一个东西", demo_c4),
    _e("C5", "C", "不同模型中的Add & Norm实现", "说法 claim",
       "模型表说 T5 用 LayerNorm、\"使用高斯误差初始化\"；GPT-2 \"标准残差\"；Falcon、BLOOM 是普通 Pre-Norm；PaLM 是 LayerNorm。",
       "T5 的 norm 不减均值、没有偏置，即 RMSNorm 式（Raffel et al. 2020 §2.1）；GPT-2 按 1/√N 缩放残差输出层初始化（§2.3）；Falcon 是并行块；BLOOM 还有嵌入层 LN；PaLM 的 LN 没有 bias（§2）。",
       "06_placement", "5. 各大模型用的是哪一种", demo_c5),
    _e("C6", "C", "Add & Norm对模型训练的影响 · 1. 训练稳定性与收敛速度", "代码 code",
       "监测函数读取每个 LayerNorm 的 module.input / module.output。",
       "nn.Module 没有这两个属性，代码会 AttributeError；要拿到输入输出需用 register_forward_hook（用完删除），如 normlab.probes。",
       "06_placement", "1. 五种接法，一个参数", demo_c6),
    _e("C7", "C", "Add & Norm对模型训练的影响 · 3. 梯度流分析", "代码 code",
       "梯度流分析函数每次调用都给每个参数注册一个钩子、从不删除，并使用未定义的 input_data、loss_function、targets。",
       "钩子会越积越多：第 k 次调用后每次 backward 触发 k 轮；应保存句柄并 remove()，或在 backward 后直接读 p.grad。",
       "06_placement", "1. 五种接法，一个参数", demo_c7),
    _e("C8", "C", "Add & Norm的高效实现 · 1. 融合操作", "说法 claim",
       "FusedAddLayerNorm 用 \"单一操作\" 完成 Add 和 Norm。",
       "它在 eager 模式下仍是一串独立的运算，每个都完整读写一遍内存，并不融合；真正的融合需要自定义内核或 torch.compile，且通常还要返回相加后的残差供下一层使用。",
       "04_rmsnorm", "5. RMSNorm 真的更快吗？", demo_c8),
    _e("C9", "C", "层归一化 (Norm)", "代码 code",
       "通用 LayerNorm 示例的 ε 取 1e-12（BERT 的值）。",
       "float32 下可用，但 1e-12 在 float16 中下溢为 0：方差为 0 的行（如填充）会得到 NaN。PyTorch 默认 1e-5。",
       "03_layernorm", "5.3 BERT 的 ε = 1e-12 在半精度下", demo_c9),
    _e("D1", "D", "Q1、Q2 的技术细节代码", "代码 code",
       "BN 与 LN 的统计量示例用 x.var(...)，未指定 unbiased。",
       "torch.var 默认无偏（除以 n−1），而 BatchNorm/LayerNorm 归一化用有偏方差（除以 n）；输出整体小了 √((n−1)/n)。",
       "03_layernorm", "1. 从零写 LayerNorm", demo_d1),
    _e("D2", "D", "代码实现 · BatchNorm1d", "代码 code",
       "自实现 BatchNorm1d 用 PyTorch 的公式 (1−m)·旧 + m·新，却取 m = 0.9；直接把带计算图的张量赋给滑动统计量；方差有偏。",
       "PyTorch 的 momentum 默认 0.1（新值权重）；0.9 是\"旧值权重\"约定下的数字，混用后滑动统计量几乎只看最后一个 batch。更新应在 no_grad 下进行，running_var 存无偏方差。",
       "02_batchnorm", "3. 滑动统计量：momentum 是谁乘谁？", demo_d2),
    _e("D3", "D", "Q4", "公式 formula",
       "Pre-Norm 在深层网络中梯度的数量级为 √L。",
       "Xiong et al. 2020 定理 1：Pre-LN 最后一层 FFN 权重的梯度上界是 O(d√(ln d / L))，随 L 按 1/√L 变小；Post-LN 的与 L 无关。",
       "06_placement", "2. Xiong et al. 2020：理论说了什么，我们复现出什么", demo_d3),
    _e("D5", "D", "Pre-Norm vs Post-Norm（流程图）", "说法 claim",
       "Pre-Norm 的流程图在最后一个 Add 之后直接输出。",
       "Pre-LN 的残差流从不被归一化，范数随层数增长（Xiong et al. 2020 引理 2），所以 Pre-LN 模型在最后还有一个 LayerNorm：GPT-2 报告 §2.3 写明在最后一个自注意力块之后加一个 LayerNorm，代码里是 ln_f。（Xiong et al. 哪一张图或表画出了这个最终 LN，我们没能核实，所以不引用图号。）",
       "06_placement", "1. 五种接法，一个参数", demo_d5),
    _e("E1", "E", "§1", "说法 claim",
       "文本 (B, S, E) 上的 BN \"在 (B, E) 平面上归一化\"。",
       "文本上的 BN 是每个特征 e 一组，跨 (B, S) 求统计量（nn.BatchNorm1d(E) 作用于 x.transpose(1, 2)）；(B, E) 平面是每个位置 s 一组。",
       "03_layernorm", "2. 谁和谁共用一组统计量？", demo_e1),
    _e("E2", "E", "§2", "说法 claim",
       "图像上的 LN \"在 (B, HW) 平面上归一化\"。",
       "那是 BN 的分组；图像上的 LN 是每个样本在 (C, H, W) 上求统计量，与 batch 中其他样本无关（= GroupNorm(1, C)，Wu & He 2018 Fig. 2）。",
       "03_layernorm", "2. 谁和谁共用一组统计量？", demo_e2),
    _e("E3", "E", "§1.2", "公式 formula",
       "推理时的 BN 公式分母写成 σ² + ε。",
       "分母是 √(σ² + ε)（Ioffe & Szegedy 2015 Alg. 2）。",
       "02_batchnorm", "3. 滑动统计量：momentum 是谁乘谁？", demo_e3),
    _e("E4", "E", "§1.2、§1.3", "公式 formula",
       "正文的滑动平均把 momentum 当作旧值的权重，§1.3 的代码却把它当作新值的权重（与 PyTorch 一致），同名参数两种相反含义。",
       "PyTorch：running = (1 − momentum)·running + momentum·batch，momentum 默认 0.1（batchnorm.py 文档）；按正文的写法 0.1 意味着几乎只看最新 batch。",
       "02_batchnorm", "3. 滑动统计量：momentum 是谁乘谁？", demo_e4),
    _e("E5", "E", "§2", "公式 formula",
       "LN 公式写成 (x − μ)/√(σ_token + ε)。",
       "根号里是方差 σ²（Ba et al. 2016 式 (3)；nn.LayerNorm）；按标准差 σ 代入，输出的尺度不再是 1。",
       "03_layernorm", "1. 从零写 LayerNorm", demo_e5),
    _e("E6", "E", "§3", "公式 formula",
       "RMSNorm 公式把 ε 加在 RMS 上（根号外），代码却加在根号内；还把 RMS 写成 \"RSM\"。",
       "PyTorch、LLaMA 把 ε 放在根号内（nn.RMSNorm 文档）；论文公式没有 ε，作者代码放在根号外。两者在小输入时差别明显。",
       "04_rmsnorm", "3. 真实模型里的写法", demo_e6),
    _e("E7", "E", "§4", "公式 formula",
       "DeepNorm 把残差改成 x + α·F(x)（没有 LN），并把每层所有权重乘 β。",
       "DeepNet §4.2：x_{l+1} = LN(α·x_l + G(x_l))，α 乘在恒等路径上；β 只缩放 ffn、v_proj、out_proj 的初始化（§4.3）。α 放错一边，分支占比大了 α² 倍。",
       "05_deepnorm", "2. 两种常见的错误写法", demo_e7),
    _e("E8", "E", "§4", "公式 formula",
       "α = (2N)^¼、β = (8N)^-¼ 作为 DeepNorm 的常数，N 为层数。",
       "这是单一编码器（或单一解码器，用 M）的值；编码器-解码器两侧各不相同（DeepNet §4.3）。",
       "05_deepnorm", "1. α 与 β：逐个架构", demo_e8),
    _e("E9", "E", "§1.2", "公式 formula",
       "测试时 μ_test、σ²_test 的式子漏了期望 E（字面上就是某一个 batch 的统计量）；滑动方差的更新式给新 batch 的 σ_t² 也加了表示滑动值的横线，按字面两项都是滑动值，更新不起作用。",
       "μ_test = E[μ_batch]、σ²_test = B/(B−1)·E[σ²_batch]（Ioffe & Szegedy 2015 §3.1、Alg. 2）；更新式是 σ̄² ← p·σ̄² + (1−p)·σ_t²，σ_t² 是当前 batch 的方差（PyTorch 存它的无偏估计，batchnorm.py 文档）。",
       "02_batchnorm", "3. 滑动统计量：momentum 是谁乘谁？", demo_e9),
]

# Claims that are a matter of degree: where the course measures them.
CLAIMS: list[tuple[str, str, str, str, str]] = [
    # (document §, the claim in our words, verdict, chapter, section)
    ("[A] §2.6；[D] Q3", "Pre-Norm 不需要预热、收敛更快", "在我们的小模型上成立（种子 0–4，NORMLAB_SEED 另试 5–9），与 Xiong et al. 2020 §4 一致",
     "06_placement", "3. 学习率预热：一个几秒钟的实验"),
    ("[A] §2.6；[B] LayerNorm", "Pre-Norm 最终效果不如 Post-Norm，因为它增加的是宽度而非深度",
     "前提（相邻层输入几乎相同）测得成立；\"最终效果更差\"在文献中没有定论（[D] 的表甚至说相反）",
     "06_placement", "4. \"Pre-Norm 增加的是宽度而不是深度\"——测一测"),
    ("[C] 开头", "没有 Add & Norm，大模型无法突破 10 层",
     "01 课第 3 节：12 块（26 个线性层）、既无残差也无任何归一化层的网络，He 初始化（He et al. 2015）用 SGD "
     "训练到 0.83–0.94（种子 0–4），同一网络用 Xavier 初始化停在随机猜的水平；有残差、无归一化时，Fixup 式初始化 "
     "(Zhang et al. 2019) 与 ReZero (Bachlechner et al. 2020) 也能训练；DyT (Zhu et al. 2025) 用逐元素的 tanh(αx) "
     "代替 norm。10 层不是硬界限；归一化让训练对学习率和初始化宽容得多。",
     "01_residuals", "没有 Add、也没有 Norm 的深网络"),
    ("[D] 知识总结 · 三大归一化技术对比", "计算成本：BN \"中等\"、LN \"较高\"、RMSNorm \"最低\"",
     "推理时，紧跟在 Linear/Conv 后面的 BN 可以折叠进它的权重：输出相同，耗时与单独的 Linear 相同，额外成本为 0"
     "（Ioffe & Szegedy 2015 Alg. 2）。训练时不行：BN 要做 batch 归约、更新滑动统计量、反向传播，多卡时还要同步。"
     "LN 与 RMSNorm 的差距取决于实现（04 课第 5 节）。测量：errata.bn_cost()",
     "09_companion", "3. 程度性说法：在哪里测量"),
    ("[D] Q2", "RMSNorm 省去均值计算，减少约 15% 计算量", "省多少取决于实现与带宽；本机测得的比值见 04 课", "04_rmsnorm",
     "5. RMSNorm 真的更快吗？"),
    ("[E] §3", "RMSNorm 节省 7%–64% 的运算", "论文说的是运行时间（Zhang & Sennrich 2019 摘要，2019 年的 GPU 实现），不是运算量",
     "04_rmsnorm", "5. RMSNorm 真的更快吗？"),
    ("[D] 代码 compare_normalization", "用 time.time() 各循环 1000 次比较手写 LN 与 RMSNorm 的速度",
     "没有预热、不重复：第一次调用的开销和其他进程的干扰都算进结果；建了 BatchNorm1d 却从不计时；"
     "比的是手写模块而非 F.layer_norm/F.rms_norm。测量：errata.timing_pitfalls()；正确的测法见 normlab.bench",
     "09_companion", "3. 程度性说法：在哪里测量"),
    ("[D] Pre/Post-Norm", "Post-Norm 浅层（≤6 层）效果更好，Pre-Norm 深层更优", "经验说法，无出处；与 [A]/[B] 的结论相反",
     "06_placement", "5. 各大模型用的是哪一种"),
    ("[D] Q2", "RMSNorm 数值稳定性更好",
     "无出处。float16 不上转时 RMSNorm 并不更稳：输入有大偏移时 x² 溢出、输出全为 0，先减均值的 LN 误差约 0.1；幅度大时两者都坏；"
     "先转 float32（LLaMA、PyTorch 的做法）后两者都只剩舍入误差。测量：errata.half_precision_stability()",
     "09_companion", "3. 程度性说法：在哪里测量"),
    ("[E] 开头、§1.3；[C] 层归一化的优势", "BN（和 LN）通过减少内部协变量偏移 (ICS) 起作用",
     "Santurkar et al. 2018：ICS 与 BN 的效果关系不大，BN 使优化地形更平滑", "02_batchnorm",
     "6. BN 为什么有效？\"内部协变量偏移\"之争"),
]

# The flawed snippet of each erratum: the document's mistake in a few lines of our own code (never
# the document's code), with the line that fixes it. errata.show(id) prints it above the measurement.
SNIPPETS: dict[str, str] = {
    "A1": """# [A] §1: "d(x + F(x))/dx = 1 + dF/dx, so the gradient never vanishes"
grad_x = grad_y * (1 + dF_dx)          # scalar reading
# fix: a Jacobian, and depth multiplies them: prod_l (I + J_F_l), which can shrink or grow""",
    "A2": """def batch_norm(x, gamma, beta):     # no running statistics at all
    dims = (0,) if x.dim() == 2 else (0, 2, 3)
    mu, var = x.mean(dims), x.var(dims, unbiased=False)
    return gamma * (x - mu) / (var + eps).sqrt() + beta
# fix: keep running_mean/var in training, use them in eval (nn.BatchNorm1d)""",
    "A3": """self.gamma = nn.Parmaeter(torch.ones(d))      # misspelt: AttributeError
y = (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True, unbiased=False) + eps)
# fix: nn.Parameter, and (x - mu) / sqrt(var + eps)""",
    "A4": """xf = x.float()
y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
return self.weight * y.type_as(x)     # float32 weight promotes a bf16 result back to float32
# fix: multiply in the input's dtype, or cast the result: (self.weight * y).type_as(x)""",
    "A5": """def forward(self, x):
    return self.ln(self.alpha * x + self.ffn(self.beta * x))   # beta applied at every call
# fix: beta scales the init of ffn / v_proj / out_proj once; forward is ln(alpha * x + ffn(x))""",
    "A6": """# [A] §2.6: "Pre-LN was proposed by Xiong et al. 2020"
# fix: Pre-LN was used before (GPT-2 report §2.3, Baevski & Auli 2019, Wang et al. 2019);
#      Xiong et al. analysed it (Theorem 1) and dropped the warm-up""",
    "A7": """# [A] §2.4: "RMSNorm = formula (1) without mu"   -- but (1) is BatchNorm (statistics over dim 0)
y = x / torch.sqrt(x.pow(2).mean(0, keepdim=True) + eps)
# fix: formula (2), LayerNorm, without mu: x / sqrt(mean(x**2, dim=-1) + eps)""",
    "A8": """# [A] §2.5: "DeepNorm is an improved LayerNorm that keeps gradient magnitudes constant"
x = layer_norm(alpha * x + G(x))      # the LN is plain; alpha on the identity path, beta at init
# fix: it bounds the model update ||dF||; the gradients shrink with depth as beta/alpha""",
    "B1": """if not torch.is_grad_enabled():      # mode read from autograd, not from model.eval()
    x_hat = (x - self.moving_mean) / torch.sqrt(self.moving_var + eps)
self.moving_mean = m * self.moving_mean + (1 - m) * mean   # plain attribute, not a buffer
# fix: if not self.training; register_buffer; store the unbiased batch variance""",
    "B2": """# [B]: "RMSNorm has no scaling (stretch), so it saves parameters"
# fix: RMSNorm drops the mean and the bias beta; the gain gamma (weight) stays""",
    "C1": """self.gamma = nn.Parameter(0.1 * torch.ones(d))   # LayerScale, 0.1 at any depth, "from MetaNet"
# fix: CaiT (Touvron et al. 2021 §3): 0.1 up to depth 18, 1e-5 at 24, 1e-6 deeper""",
    "C2": """h = x + self.alpha * self.attn(self.ln1(x))      # "ReZero" that keeps the LayerNorms
# fix: ReZero is x + alpha * F(x), alpha = 0 at init, no LayerNorm (Bachlechner et al. 2020 eq. 1)""",
    "C3": """scale = 1 / math.sqrt(2 * num_layers)            # "DeepNet", Pre-LN, every forward
x = x + scale * self.ffn(self.ln(x))
# fix: DeepNet is Post-LN: ln(alpha * x + ffn(x)), beta only at init (§4.2-4.3)""",
    "C4": """norm = x.abs().pow(p).mean(-1, keepdim=True).pow(1 / p)   # per token
y = gamma * x / (norm + eps) + beta                         # called "PowerNorm"
# fix: Shen et al.'s PowerNorm uses the batch's quadratic mean and its running average""",
    "C5": """# [C]'s model table: "T5 — LayerNorm"
# fix: T5's norm subtracts no mean and has no bias: RMSNorm-style (Raffel et al. 2020 §2.1)""",
    "C6": """for name, module in model.named_modules():
    if isinstance(module, nn.LayerNorm):
        stats[name] = module.input.mean()     # nn.Module has no .input: AttributeError
# fix: register_forward_hook, read (input, output) in the hook, remove() the handle""",
    "C7": """def analyse_gradients(model):
    for name, p in model.named_parameters():
        p.register_hook(lambda g, name=name: log(name, g))   # handle never kept, never removed
# fix: keep the handles and h.remove() them, or read p.grad after backward()""",
    "C8": """class FusedAddLayerNorm(nn.Module):      # "one fused operation"
    def forward(self, x, residual):
        s = x + residual                        # then mean, var, sub, div, mul, add: separate eager ops
        return self.weight * (s - s.mean(-1, keepdim=True)) / torch.sqrt(s.var(-1, keepdim=True, unbiased=False) + eps) + self.bias
# fix: fusion needs one kernel (Triton, torch.compile); eager code is the same ops as before""",
    "C9": """ln = LayerNorm(d, eps=1e-12)            # BERT's eps, then model.half()
# fix: 1e-12 rounds to 0 in float16: a constant row gives 0/0 = NaN; use 1e-5 or compute in float32""",
    "D1": """var = x.var(dim=-1, keepdim=True)       # unbiased by default (divides by n - 1)
y = (x - x.mean(-1, keepdim=True)) / torch.sqrt(var + eps)
# fix: x.var(dim=-1, keepdim=True, unbiased=False), as LayerNorm and BatchNorm normalise""",
    "D2": """self.momentum = 0.9                      # meant as the old value's weight ...
self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean   # ... used as the new one's
# fix: momentum=0.1 in this (PyTorch's) form, update under no_grad, store the unbiased variance""",
    "D3": """# [D] Q4: "in Pre-Norm the gradient is of order sqrt(L)"
# fix: Xiong et al. 2020 Theorem 1: the last FFN's gradient in Pre-LN is O(d sqrt(ln d / L)), falling as 1/sqrt(L)""",
    "D5": """for block in blocks:                     # Pre-Norm flow chart: x + F(LN(x)), block after block ...
    x = x + block.ffn(block.ln(x))
return x                                 # ... and out, no final norm
# fix: return final_ln(x), as GPT-2's ln_f""",
    "E1": """# [E] §1: BN on text (B, S, E) "normalises over the (B, E) plane"
mu = x.mean(dim=(0, 2), keepdim=True)    # one statistic per position s
# fix: one statistic per feature e, over (B, S): nn.BatchNorm1d(E)(x.transpose(1, 2))""",
    "E2": """# [E] §2: LN on images "normalises over the (B, HW) plane"
mu = x.mean(dim=(0, 2, 3), keepdim=True) # that is BatchNorm's grouping
# fix: LN takes each sample over (C, H, W): F.layer_norm(x, x.shape[1:]) = GroupNorm(1, C)""",
    "E3": """y = (x - running_mean) / (running_var + eps)       # [E] §1.2 at test time: no square root
# fix: (x - running_mean) / torch.sqrt(running_var + eps)""",
    "E4": """running = p * running + (1 - p) * batch_mean        # §1.2 text: p weights the OLD value
running = (1 - p) * running + p * batch_mean        # §1.3 code: p weights the NEW value (PyTorch)
# fix: one meaning; PyTorch's momentum is the new value's weight, default 0.1""",
    "E5": """y = (x - mu) / torch.sqrt(sigma + eps)             # [E] §2: sigma is a standard deviation here
# fix: torch.sqrt(sigma**2 + eps), the variance under the root""",
    "E6": """y = x / (torch.sqrt(x.pow(2).mean(-1, keepdim=True)) + eps)   # [E] §3 formula: eps outside
y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)     # [E] §3 code:    eps inside
# fix: pick one; PyTorch and LLaMA put eps inside the root""",
    "E7": """x = x + alpha * F(x)                     # [E] §4: alpha on the branch, no LayerNorm
# fix: DeepNet §4.2: x = LN(alpha * x + F(x)), alpha on the identity path""",
    "E8": """alpha, beta = (2 * N) ** 0.25, (8 * N) ** -0.25    # [E] §4, "for DeepNorm"
# fix: these are the encoder-only (or decoder-only) values; encoder-decoder has its own (DeepNet §4.3)""",
    "E9": """running_var = p * running_var + (1 - p) * running_var   # [E] §1.2 literally: bar on sigma_t^2 too
mu_test = mu_batch                                       # no expectation E[.]
# fix: running_var = p * running_var + (1 - p) * batch_var;  mu_test = E[mu_batch]""",
}


_BY_ID = {e.id: e for e in ERRATA}


def get(erratum_id: str) -> Erratum:
    """The erratum with this id (e.g. "E3")."""
    try:
        return _BY_ID[erratum_id]
    except KeyError:
        raise KeyError(f"没有编号为 {erratum_id!r} 的勘误 (no erratum with this id)；可用的编号："
                       f"{', '.join(_BY_ID)}。") from None


def demo(erratum_id: str, seed: int = 0) -> Demo:
    """Run the demonstration of one erratum with ``seed`` and return its table and numbers."""
    e = get(erratum_id)
    with _seeded(seed):
        return e.run()


def show(erratum_id: str, seed: int = 0) -> Demo:
    """Print the erratum's flawed snippet (our code, with the fix), then run its demo with ``seed``
    and display the measurement. Returns the Demo (its ``values`` are the numbers)."""
    e = get(erratum_id)
    head = f"{e.id} · [{e.doc}] {e.section}：资料的写法（转述为我们自己的代码）"
    d = demo(erratum_id, seed=seed)
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
        if get_ipython() is None:
            raise ImportError
        display(Markdown(f"{head}\n\n```python\n{SNIPPETS[e.id]}\n```"))
        display(d)
    except ImportError:
        print(head, SNIPPETS[e.id], "", str(d), sep="\n")
    return d


def catalogue(doc: str | None = None) -> Table:
    """The index of errata: id, where, kind, what the document says, what is right, chapter."""
    if doc is not None and doc not in "ABCDE":
        raise ValueError(f"doc 应为 'A'..'E' 之一 (expected one of A-E)，实际收到 {doc!r}。")
    rows = [[e.id, f"[{e.doc}] {e.section}", e.kind, e.says, e.right, f"{e.chapter} · {e.chapter_section}"]
            for e in ERRATA if doc is None or e.doc == doc]
    return Table(rows, ["编号", "位置", "类型", "资料的说法（转述）", "正确的是", "课程章节"],
                 title="勘误索引 (errata)" + (f"：[{doc}]" if doc else ""))


def claims_table() -> Table:
    """Claims of degree, with the chapter section that measures them."""
    rows = [[where, claim, verdict, f"{ch} · {sec}"] for where, claim, verdict, ch, sec in CLAIMS]
    return Table(rows, ["位置", "资料的说法（转述）", "测量结论", "在哪里测"], title="程度性说法：在哪里测量")
