"""Lesson 07 (beyond) exercises.

    07.1  ScaleNorm: one scalar gain g = sqrt(d) at init, y = g * x / ||x||
    07.2  per-head QK-norm: the attention logits, and the bound sqrt(d_h) * max|g_q| * max|g_k|
    07.3  DyT: gamma * tanh(alpha * x) + beta, alpha a learnable scalar (init 0.5), gamma/beta per channel

References: the lesson's own modules (``normlab.lessons.beyond.ScaleNorm``, ``QKNormAttention`` and its
``logit_bound()``, ``DyT``), torch's F.rms_norm, and a real forward/backward of a SequenceModel whose
LayerNorms were replaced (``beyond.replace_layernorms``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..blocks import seeded
from ..lessons import beyond
from ..models import SequenceModel
from .base import Finding, SubmissionError, call, compare, exercise, fail, ok, step

D = 64


def _x(seed: int, shape=(4, 6, D), scale: float = 3.0, shift: float = 0.5) -> Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale + shift


def _module(answer, *args, **kwargs) -> nn.Module:
    m = call(answer, *args, **kwargs)
    if not isinstance(m, nn.Module):
        raise SubmissionError(f"应是一个 nn.Module 的子类，实例化得到的是 {type(m).__name__} (must be an nn.Module)")
    return m


def _params(m: nn.Module) -> dict[str, nn.Parameter]:
    return dict(m.named_parameters())


# --------------------------------------------------------------------------- 07.1 ScaleNorm

@exercise("07.1", title="ScaleNorm：只有一个标量增益 g 的 RMSNorm (one scalar gain)", target_minutes=8, checks=4)
def check_scalenorm(answer) -> list[Finding]:
    out: list[Finding] = []
    m = _module(answer, D)
    params = _params(m)
    total = sum(p.numel() for p in params.values())
    if total == D:
        out.append(fail("per_channel_gain", f"有 {D} 个增益：那是 RMSNorm 的 γ。ScaleNorm 只有一个标量 g。"))
        return out
    if total != 1:
        out.append(fail("params", f"应只有一个可学习的标量 g，实际参数：{[(n, tuple(p.shape)) for n, p in params.items()]}"))
        return out
    (g_name, g), = params.items()
    out.append(ok("params", f"一个标量参数 {g_name}"))
    value = g.detach().flatten()[0].item()
    if math.isclose(value, math.sqrt(D), rel_tol=1e-5):
        out.append(ok("init", f"g 初始化为 √d = {math.sqrt(D):.0f}"))
    elif math.isclose(value, 1.0):
        out.append(fail("g_init_one", "g 初始化成了 1：输出的范数就是 1，每个元素约 1/√d。参考实现（transformers_without_tears）"
                        "把 g 初始化为 √d，这样初始化时与 γ = 1 的 RMSNorm 完全相同。", expected=math.sqrt(D), got=value))
    else:
        out.append(fail("init", "g 应初始化为 √d", expected=math.sqrt(D), got=value))
    for name, seed, g_value in (("forward", 61, 1.7), ("forward_3d", 62, 5.0)):
        with step(out, name):
            x = _x(seed) if name == "forward_3d" else _x(seed, shape=(5, D))
            with torch.no_grad():
                g.fill_(g_value)
            ref_mod = beyond.ScaleNorm(D)
            with torch.no_grad():
                ref_mod.g.fill_(g_value)
                ref = ref_mod(x)
                got = call(m, x)
            nrm = x.norm(dim=-1, keepdim=True)
            out.append(compare(name, got, ref, {
                "divided_by_rms": (lambda: g_value * x / (nrm / math.sqrt(D)),
                                   "除以的是 RMS = ‖x‖/√d，不是 ‖x‖₂：输出大了 √d 倍。ScaleNorm 是 g·x/‖x‖₂。"),
                "mean_subtracted": (lambda: g_value * (x - x.mean(-1, keepdim=True))
                                    / (x - x.mean(-1, keepdim=True)).norm(dim=-1, keepdim=True),
                                    "减了均值：ScaleNorm 和 RMSNorm 一样不减 μ。"),
                "squared_norm": (lambda: g_value * x / nrm.pow(2), "除以的是 ‖x‖²，少了开方。"),
                "wrong_axis": (lambda: g_value * x / x.norm(), "对整个张量求了一个范数：应只对最后一维，每个 token 一个。"),
                "g_ignored": (lambda: math.sqrt(D) * x / nrm, "没有用参数 g（用了常数 √d）：g 是可学习的。"),
            }, f"g = {g_value}: 与 lessons.beyond.ScaleNorm 一致", f"g = {g_value}: 应是 g·x / ‖x‖₂", input=x))
    return out


# --------------------------------------------------------------------------- 07.2 per-head QK-norm

WIDTH, HEADS = 64, 4
DH = WIDTH // HEADS


def qk_setup(seed: int):
    """The lesson's QKNormAttention (per-head RMSNorm) with random q/k norm gains and inputs."""
    with seeded(seed):
        att = beyond.QKNormAttention(WIDTH, HEADS, qk_norm="head_rms")
        with torch.no_grad():
            att.q_norm.weight.copy_(1 + 0.5 * torch.rand(DH))
            att.k_norm.weight.copy_(0.5 + torch.rand(DH))
        x = torch.randn(2, 7, WIDTH) * 2
    return att, x


def _split(t: Tensor) -> Tensor:
    b, s, w = t.shape
    return t.view(b, s, HEADS, w // HEADS).transpose(1, 2)


def reference_logits(q: Tensor, k: Tensor, qn, kn, scale: float = DH ** -0.5, split=_split) -> Tensor:
    return qn(split(q)) @ kn(split(k)).transpose(-1, -2) * scale


@exercise("07.2", title="每个头的 QK-norm：注意力 logit 与它的界 (per-head QK-norm and the logit bound)",
          target_minutes=12, checks=2)
def check_qk(answer) -> list[Finding]:
    out: list[Finding] = []
    att, x = qk_setup(71)
    with torch.no_grad():
        q, k = att.q_proj(x), att.k_proj(x)
        ref = reference_logits(q, k, att.q_norm, att.k_norm)
    qn, kn = att.q_norm, att.k_norm
    interleaved = lambda t: t.view(t.shape[0], t.shape[1], DH, HEADS).permute(0, 3, 1, 2)
    full = lambda t, n: F.rms_norm(t, (WIDTH,), n.weight.repeat(HEADS), n.eps)
    with step(out, "logits"), torch.no_grad():
        got = call(answer, q, k, HEADS, qn, kn)
        out.append(compare("logits", got, ref, {
            "no_scale": (lambda: reference_logits(q, k, qn, kn, 1.0), "没有除以 √d_h：logit 是 q̂·k̂ / √d_h。"),
            "scaled_by_width": (lambda: reference_logits(q, k, qn, kn, WIDTH ** -0.5), "除以的是 √width，应是每个头的 √d_h。"),
            "no_norm": (lambda: _split(q) @ _split(k).transpose(-1, -2) * DH ** -0.5,
                        "q、k 都没有归一化：这就是没有 QK-norm 的注意力，logit 没有界。"),
            "k_not_normalized": (lambda: qn(_split(q)) @ _split(k).transpose(-1, -2) * DH ** -0.5,
                                 "只归一化了 q，k 没有：界要靠两边都归一化。"),
            "q_not_normalized": (lambda: _split(q) @ kn(_split(k)).transpose(-1, -2) * DH ** -0.5,
                                 "只归一化了 k，q 没有：界要靠两边都归一化。"),
            "full_width_norm": (lambda: _split(full(q, qn)) @ _split(full(k, kn)).transpose(-1, -2) * DH ** -0.5,
                                "先在整个宽度上归一化、再分头：这是 OLMo 2 的做法，不是每头的 QK-norm；"
                                "它只固定整个向量的长度，一个头可以拿走全部，界大 H 倍。"),
            "wrong_head_split": (lambda: reference_logits(q, k, qn, kn, split=interleaved),
                                 "分头的方式不对：view(b, s, heads, d_h) 再 transpose(1, 2)，每个头是连续的 d_h 个通道。"),
        }, "与 lessons.beyond.QKNormAttention 的 logit 一致", "与 q̂ k̂ᵀ/√d_h（每个头分别 RMSNorm）不一致", input=q))
    with step(out, "bound"), torch.no_grad():
        # one head carries all the signal, scaled up 1000x: the bound must still hold
        qa, ka = torch.zeros(1, 12, WIDTH), torch.zeros(1, 12, WIDTH)
        g = torch.Generator().manual_seed(72)
        qa[..., :DH] = torch.randn(1, 12, DH, generator=g) * 1000
        ka[..., :DH] = qa[..., :DH]                      # k = q: aligned, the largest logits come near the bound
        got = call(answer, qa, ka, HEADS, qn, kn)
        bound = att.logit_bound()
        top = got.abs().max().item() if isinstance(got, Tensor) else math.inf
        if top <= bound * (1 + 1e-5):
            out.append(ok("bound", f"q、k 放大 1000 倍：最大 |logit| {top:.2f} ≤ √d_h·max|g_q|·max|g_k| = {bound:.2f}"))
        else:
            out.append(fail("bound", "超过了每头 QK-norm 的界 √d_h·max|g_q|·max|g_k|：q、k 放大 1000 倍时 logit 不应再变大。",
                            expected=f"<= {bound:.3f}", got=f"{top:.3f}"))
    return out


# --------------------------------------------------------------------------- 07.3 DyT

@exercise("07.3", title="DyT：γ·tanh(αx) + β，α 是可学习的标量 (Dynamic Tanh)", target_minutes=10, checks=5)
def check_dyt(answer) -> list[Finding]:
    out: list[Finding] = []
    m = _module(answer, D)
    params = _params(m)
    alpha = params.get("alpha")
    if alpha is None:
        buffers = dict(m.named_buffers())
        plain = getattr(m, "alpha", None)
        if "alpha" in buffers or isinstance(plain, int | float | Tensor):
            return [fail("alpha_not_learnable", "α 不是可学习的参数 (nn.Parameter)：DyT 的 α 要随训练学习。")]
        return [fail("params", f"应有名为 alpha、weight、bias 的参数（参考实现 dynamic_tanh.py 的名字），实际："
                     f"{[(n, tuple(p.shape)) for n, p in params.items()]}")]
    if alpha.numel() == D:
        out.append(fail("alpha_per_channel", f"α 有 {D} 个：DyT 的 α 是一个标量（每层一个），逐通道的是 γ 和 β。"))
    elif alpha.numel() != 1:
        out.append(fail("alpha_shape", f"α 应是一个标量，实际形状 {tuple(alpha.shape)}"))
    else:
        a0 = alpha.detach().flatten()[0].item()
        if not math.isclose(a0, 0.5):
            out.append(fail("alpha_init", "α 应初始化为 0.5（参考实现 dynamic_tanh.py 的默认值）", expected=0.5, got=a0))
        else:                            # one check, one finding: the default, then the argument (issue 36: counts)
            with step(out, "alpha_init_arg"):
                a2 = _params(_module(answer, D, alpha_init=2.0)).get("alpha")
                out.append(ok("alpha", "α 是一个可学习的标量，初值 0.5，构造参数 alpha_init 也用上了")
                           if a2 is None or torch.all(a2 == 2.0)
                           else fail("alpha_init_arg", "构造时传入的 alpha_init 没有用上", expected=2.0, got=a2))
    w, b = params.get("weight"), params.get("bias")
    if w is None or b is None:
        missing = [n for n, p in (("weight", w), ("bias", b)) if p is None]
        out.append(fail("no_bias" if missing == ["bias"] else "gamma_beta",
                        f"缺少 {'、'.join(missing)}：DyT 有逐通道的 γ (weight) 和 β (bias)，可以直接替换 LayerNorm。"))
        return out
    if w.numel() != D or b.numel() != D:
        out.append(fail("scalar_gamma" if w.numel() == 1 else "gamma_beta_shape",
                        f"γ、β 应是逐通道的 ({D},)，实际 weight {tuple(w.shape)}、bias {tuple(b.shape)}"))
        return out
    out.append(ok("init_gamma_beta", "γ = 1、β = 0") if torch.all(w == 1) and torch.all(b == 0)
               else fail("gamma_beta_init", "γ 应初始化为 1、β 为 0（和 LayerNorm 一样）", got=f"weight {w[:3].tolist()}, bias {b[:3].tolist()}"))
    if alpha.numel() != 1:
        return out
    for name, seed in (("forward", 73), ("forward_2", 74)):
        with step(out, name):
            g = torch.Generator().manual_seed(seed)
            a_v, w_v, b_v = 0.3 + torch.rand((), generator=g), 1 + 0.5 * torch.randn(D, generator=g), 0.3 * torch.randn(D, generator=g)
            ref_mod = beyond.DyT(D)
            with torch.no_grad():
                for mod in (m, ref_mod):
                    mod.alpha.copy_(a_v.reshape(mod.alpha.shape))
                    mod.weight.copy_(w_v)
                    mod.bias.copy_(b_v)
                x = _x(seed)
                ref = ref_mod(x)
                got = call(m, x)
            out.append(compare(name, got, ref, {
                "gamma_inside_tanh": (lambda: torch.tanh(a_v * x * w_v) + b_v, "γ 乘到了 tanh 里面：应是 γ·tanh(αx) + β。"),
                "affine_inside_tanh": (lambda: torch.tanh(a_v * (w_v * x + b_v)), "γ、β 都放进了 tanh：应在 tanh 之后。"),
                "no_alpha": (lambda: w_v * torch.tanh(x) + b_v, "没有乘 α：tanh(αx) 里的 α 决定压缩的尺度。"),
                "alpha_outside": (lambda: w_v * a_v * torch.tanh(x) + b_v, "α 乘在了 tanh 外面：应是 tanh(α·x)。"),
                "normalized_first": (lambda: w_v * torch.tanh(a_v * F.layer_norm(x, (D,))) + b_v,
                                     "先做了 LayerNorm：DyT 不求任何统计量，直接 tanh(αx)。"),
            }, "与 lessons.beyond.DyT 一致", "应是 γ·tanh(αx) + β（逐通道 γ、β）", input=x))
    with step(out, "drop_in"):
        with seeded(75):
            model = SequenceModel(16, 12, depth=1, width=32, wiring="pre")
        n = beyond.replace_layernorms(model, answer)
        tokens = torch.randint(0, 16, (2, 12), generator=torch.Generator().manual_seed(76))
        loss = call(model, tokens).logsumexp(-1).mean()
        loss.backward()
        grads = [mod.alpha.grad for mod in model.modules() if isinstance(getattr(mod, "alpha", None), nn.Parameter)]
        if len(grads) == n and all(gr is not None and torch.isfinite(gr).all() for gr in grads):
            out.append(ok("drop_in", f"替换 SequenceModel 里的 {n} 个 LayerNorm 后，前向、反向都正常，α 有梯度"))
        else:
            out.append(fail("drop_in", "替换 LayerNorm 之后 α 没有得到梯度 (alpha gets no gradient)"))
    return out
