"""The DeepNorm cards (constants, residual, initialisation), Pre-/Post-Norm blocks and DyT."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..report import Finding
from .probes import close, fail, guarded, ok, output_of, set_param, short, step, which

# ---------------------------------------------------------------- DeepNorm's beta at initialisation
def _deepnorm_block(d: int = 64):
    from torch import nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

    class FFN(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn, self.ffn = Attention(), FFN()
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)

    return Block()


def deepnorm_init_checks(fn, out: list[Finding] | None = None) -> list[Finding]:
    """fn(block, beta) initialises a Transformer block in place: Xavier with gain beta for the FFN,
    v_proj and out_proj, gain 1 for q_proj and k_proj (DeepNet §4.3, Figure 2)."""
    out = [] if out is None else out
    beta = (8 * 12) ** -0.25          # 12-layer encoder
    scaled, plain = ("v_proj", "out_proj", "fc1", "fc2"), ("q_proj", "k_proj")
    with step(out, "deepnorm_init"), torch.random.fork_rng():
        torch.manual_seed(6)
        block = _deepnorm_block()
        guarded(fn, block, beta)
        gains = {}
        for mod_name, lin in block.named_modules():
            leaf = mod_name.rsplit(".", 1)[-1]
            if leaf in scaled + plain:
                fan_out, fan_in = lin.weight.shape
                gains[leaf] = float(lin.weight.detach().std()) / math.sqrt(2 / (fan_in + fan_out))
        got = ", ".join(f"{k} {v:.2f}" for k, v in gains.items())
        near = lambda a, b: abs(a - b) <= 0.12 * b      # noqa: E731 - a std from >= 4096 weights: ~1 % noise
        bad_plain = [n for n in plain if not near(gains[n], 1.0)]
        bad_scaled = [n for n in scaled if not near(gains[n], beta)]
        example = {"input": f"β = {beta:.4f}（12 层编码器），Xavier 增益 = std / sqrt(2/(fan_in+fan_out))",
                   "expected": f"v_proj/out_proj/fc1/fc2 ≈ {beta:.2f}，q_proj/k_proj ≈ 1", "got": got}
        if not bad_plain and not bad_scaled:
            out.append(ok("deepnorm_init", f"Xavier 增益：FFN、v_proj、out_proj ≈ β={beta:.2f}，q_proj、k_proj ≈ 1（{got}）"))
            return out
        if any(near(gains[n], beta) for n in bad_plain):
            out.append(Finding("scaled_qk", False, "q_proj、k_proj 也乘了 β：DeepNet §4.3 只缩放 FFN、v_proj、out_proj，"
                               "q、k 保持 Xavier 增益 1", example))
        if any(near(gains[n], 1 / beta) for n in bad_scaled):
            out.append(Finding("beta_inverted", False, "乘的是 1/β（> 1）：β < 1，是把这些权重缩小", example))
        elif any(near(gains[n], beta * beta) for n in bad_scaled):
            out.append(Finding("scaled_twice", False, "β 乘了两次（增益 β²）", example))
        missing = [n for n in bad_scaled if not near(gains[n], 1 / beta) and not near(gains[n], beta * beta)]
        if missing:
            out.append(Finding("not_scaled", False, f"{', '.join(missing)} 的增益不是 β：FFN 的两层、v_proj 和 out_proj "
                               "都要用 Xavier 初始化并乘 β（nn.init.xavier_normal_(w, gain=β)）", example))
        if bad_plain and not any(near(gains[n], beta) for n in bad_plain):
            out.append(Finding("qk_init", False, f"{', '.join(bad_plain)} 应是增益 1 的 Xavier 初始化"
                               "（nn.init.xavier_normal_(w)；torch 默认的 Linear 初始化不是 Xavier）", example))
    return out
# ---------------------------------------------------------------- DeepNorm and Pre-/Post-Norm blocks
def paper_deepnorm(arch: str, N: int, M: int) -> tuple[float, float]:
    """alpha, beta of Wang et al. 2022 (DeepNet) §4.3, written out independently of normlab."""
    if arch == "encoder":
        return (2 * N) ** 0.25, (8 * N) ** -0.25
    if arch == "decoder":
        return (2 * M) ** 0.25, (8 * M) ** -0.25
    if arch == "encdec_encoder":
        return 0.81 * (N ** 4 * M) ** (1 / 16), 0.87 * (N ** 4 * M) ** (-1 / 16)
    if arch == "encdec_decoder":
        return (3 * M) ** 0.25, (12 * M) ** -0.25
    raise ValueError(arch)


def deepnorm_constant_checks(fn, out: list[Finding] | None = None) -> list[Finding]:
    out = [] if out is None else out
    for arch, N, M in [("encoder", 12, 0), ("decoder", 0, 24), ("encdec_encoder", 18, 18), ("encdec_decoder", 18, 18),
                       ("encoder", 1000, 0)]:
        with step(out, f"{arch}_{N}_{M}"):
            got = guarded(fn, arch, N, M)
            exp = paper_deepnorm(arch, N, M)
            if not isinstance(got, tuple | list) or len(got) != 2:
                out.append(fail(f"{arch}_{N}_{M}", f"应返回 (alpha, beta)，实际 {short(got)}"))
                continue
            a, b = float(got[0]), float(got[1])
            if math.isclose(a, exp[0], rel_tol=1e-6) and math.isclose(b, exp[1], rel_tol=1e-6):
                out.append(ok(f"{arch}_{N}_{M}", f"{arch} N={N} M={M}: α={a:.4g}, β={b:.4g}"))
                continue
            hint = ""
            if math.isclose(a, 1 / exp[0], rel_tol=1e-6) or math.isclose(b, 1 / exp[1], rel_tol=1e-6):
                hint = "：指数的符号反了？α 随深度增大 (α>1)，β 随深度减小 (β<1)"
            elif arch == "encdec_encoder" and math.isclose(b, 1.15 * (N ** 4 * M) ** (-1 / 16), rel_tol=1e-6):
                hint = "：这是 torchscale 代码里的 1.15（除以 init_scale 时的写法），论文 §4.3 是 0.87"
            out.append(Finding(f"{arch}_{N}_{M}", False,
                               f"{arch} 的 α、β 与 DeepNet 论文 §4.3 不一致{hint}",
                               {"input": f"arch={arch!r}, N={N}, M={M}", "expected": f"α={exp[0]:.6g}, β={exp[1]:.6g}",
                                "got": f"α={a:.6g}, β={b:.6g}"}))
    return out


def deepnorm_residual_checks(fn, out: list[Finding] | None = None) -> list[Finding]:
    """fn(x, fx, alpha) -> LN(alpha * x + fx), LN without affine over the last dim."""
    out = [] if out is None else out
    g = torch.Generator().manual_seed(3)
    x, fx = torch.randn(4, 16, generator=g) * 2, torch.randn(4, 16, generator=g)
    alpha = 2.3
    exp = F.layer_norm(alpha * x + fx, (16,))
    with step(out, "deepnorm_residual"):
        got = guarded(fn, x.clone(), fx.clone(), alpha)
        if not isinstance(got, Tensor) or got.shape != exp.shape:
            out.append(fail("deepnorm_residual", "应返回与 x 同形状的张量", x, exp, got))
        elif close(got, exp):
            out.append(ok("deepnorm_residual", "LN(α·x + G(x))：α 乘在恒等路径 x 上"))
        else:
            cands = {"alpha_on_branch": F.layer_norm(x + alpha * fx, (16,)),
                     "no_norm": alpha * x + fx, "alpha_outside": alpha * F.layer_norm(x + fx, (16,))}
            name = which(got, cands)
            msg = {"alpha_on_branch": "α 乘在了子层输出 G(x) 上（labml 的写法）：DeepNet §4.2 是 LN(α·x + G(x))，"
                                      "放大的是恒等路径，让每层的更新相对变小",
                   "no_norm": "少了 LayerNorm：DeepNorm 是 Post-LN 的变体，加完之后要归一化",
                   "alpha_outside": "α 应在 LN 里面乘 x，而不是乘在 LN 的输出上"}.get(name, "与 LN(α·x + G(x)) 不一致")
            out.append(fail(name or "deepnorm_residual", msg, x, exp, got))
    return out


def block_checks(fn, placement: str, out: list[Finding] | None = None) -> list[Finding]:
    """fn(x, sublayer, norm) -> x + sublayer(norm(x)) (pre) or norm(x + sublayer(x)) (post)."""
    out = [] if out is None else out
    with torch.random.fork_rng():          # the learner's global random state is left as it was
        torch.manual_seed(4)
        sub, norm = torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)
        with torch.no_grad():
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.normal_()
        x = torch.randn(3, 5, 16) * 2 + 1
    pre, post = x + sub(norm(x)), norm(x + sub(x))
    exp = pre if placement == "pre" else post
    id = f"{placement}norm_block"
    with step(out, id):
        got = guarded(fn, x.clone(), sub, norm)
        if not isinstance(got, Tensor) or got.shape != exp.shape:
            out.append(fail(id, "应返回与 x 同形状的张量", x, exp, got))
        elif close(got, exp):
            out.append(ok(id, "Pre-Norm: x + F(Norm(x))" if placement == "pre" else "Post-Norm: Norm(x + F(x))"))
        else:
            other = post if placement == "pre" else pre
            cands = {"swapped": other, "no_residual": sub(norm(x)) if placement == "pre" else norm(sub(x)),
                     "norm_on_output": norm(x + sub(norm(x)))}
            name = which(got, cands)
            msg = {"swapped": "写成了另一种位置：Pre-Norm 是 x + F(Norm(x))（恒等路径不经过 Norm），"
                              "Post-Norm 是 Norm(x + F(x))",
                   "no_residual": "少了残差连接 (the residual x + ... is missing)",
                   "norm_on_output": "归一化用了两次：Pre-Norm 的残差流 x 不做归一化（最后一层之后才有一个 final norm）"}.get(
                name, "与期望的块输出不一致")
            out.append(fail(name or id, msg, x, exp, got))
    return out


def dyt_checks(impl, out: list[Finding] | None = None) -> list[Finding]:
    """DyT(d, alpha_init=0.5): y = weight * tanh(alpha * x) + bias, alpha ONE learnable scalar."""
    out = [] if out is None else out
    g = torch.Generator().manual_seed(5)
    with step(out, "params"):
        m = guarded(impl, 8, alpha_init=0.5)
        alpha, w, b = getattr(m, "alpha", None), getattr(m, "weight", None), getattr(m, "bias", None)
        good = (isinstance(alpha, torch.nn.Parameter) and alpha.numel() == 1 and float(alpha.detach()) == 0.5
                and isinstance(w, torch.nn.Parameter) and tuple(w.shape) == (8,) and torch.all(w == 1)
                and isinstance(b, torch.nn.Parameter) and tuple(b.shape) == (8,) and torch.all(b == 0))
        out.append(ok("params", "alpha 是一个标量参数（初值 0.5），weight=1、bias=0，形状 (d,)") if good else
                   fail("params", "DyT 应有一个可学习的标量 self.alpha（初值 alpha_init）和每通道的 self.weight（1）、"
                        "self.bias（0）(one scalar alpha, per-channel weight and bias)"))
    with step(out, "forward"):
        m = guarded(impl, 8, alpha_init=0.5)
        wv, bv = torch.randn(8, generator=g), torch.randn(8, generator=g)
        set_param(m, "weight", wv)
        set_param(m, "bias", bv)
        with torch.no_grad():
            m.alpha.fill_(1.7)
        x = torch.randn(3, 5, 8, generator=g) * 3
        got = output_of(m, x)
        exp = torch.tanh(1.7 * x) * wv + bv
        if close(got, exp):
            out.append(ok("forward", "y = weight · tanh(alpha · x) + bias"))
        else:
            cands = {"alpha_outside": 1.7 * torch.tanh(x) * wv + bv, "no_affine": torch.tanh(1.7 * x),
                     "normalised_first": torch.tanh(1.7 * F.layer_norm(x, (8,))) * wv + bv}
            name = which(got, cands)
            msg = {"alpha_outside": "alpha 应乘在 tanh 里面：tanh(alpha·x)，它决定压缩从多大的 |x| 开始",
                   "no_affine": "少了每通道的 weight 和 bias（和 LayerNorm 的 γ、β 对应）",
                   "normalised_first": "DyT 不求任何统计量：不要先做 LayerNorm"}.get(name, "输出与 weight·tanh(alpha·x)+bias 不一致")
            out.append(fail(name or "forward", msg, x, exp, got))
    return out
