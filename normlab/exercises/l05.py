"""Lesson 05 (DeepNorm) exercises.

    05.1  DeepNet's alpha and beta for each architecture (§4.3)
    05.2  DeepNorm's residual update LN(alpha * x + G(x)), and labml's alpha-on-the-branch mistake
    05.3  DeepNorm's init: Xavier with gain beta on fc1, fc2, v_proj, out_proj only

References: ``normlab.init.deepnorm_constants`` and ``init_weights_`` (tested against the paper in
tests/test_deepnorm.py and tests/test_init.py), ``normlab.blocks.Residual(wiring="deepnorm")``, and
the lesson's wrong versions (``normlab.lessons.deepnorm.AlphaOnBranch``).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import blocks
from ..init import ARCHITECTURES, SCALED, deepnorm_constants, init_weights_
from ..lessons.deepnorm import AlphaOnBranch
from .base import Finding, SubmissionError, call, compare, exercise, fail, ok, step

# --------------------------------------------------------------------------- 05.1 alpha, beta

PROBES = [("encoder", 12, 0), ("encoder", 1000, 0), ("decoder", 0, 24), ("encdec_encoder", 18, 18),
          ("encdec_encoder", 6, 12), ("encdec_decoder", 18, 18), ("encdec_decoder", 6, 12)]


def _wrong_constants(arch: str, N: int, M: int) -> dict[str, tuple[tuple[float, float], str]]:
    """What the usual mistakes give for one architecture."""
    L = M if arch in ("decoder", "encdec_decoder") else N
    a, b = deepnorm_constants(arch, N, M)
    out = {
        "swapped": ((b, a), "α 和 β 写反了 (swapped)：α > 1 乘在恒等路径上，β < 1 是初始化增益。"),
        "beta_sign": ((a, 1 / b), "β 的指数符号反了：β = (8N)^(-1/4) < 1，不是 (8N)^(1/4)。"),
        "square_root": ((a * a, b * b), "指数用成了 1/2：论文是四次方根 α = (2N)^(1/4)、β = (8N)^(-1/4)。"),
    }
    if arch.startswith("encdec"):
        out["encdec_as_encoder"] = ((((2 * L) ** 0.25, (8 * L) ** -0.25)),
                                    "编码器-解码器两侧不能用仅编码器的公式 (E8)：编码器侧 α = 0.81 (N⁴M)^(1/16)、"
                                    "β = 0.87 (N⁴M)^(-1/16)；解码器侧 α = (3M)^(1/4)、β = (12M)^(-1/4)。")
    if arch == "encdec_encoder":
        out["torchscale_beta"] = ((a, 1.15 * (N ** 4 * M) ** (-1 / 16)),
                                  "β 用了 1.15：这是 torchscale 代码里的写法（除以 (N⁴M)^(1/16)/1.15，等于乘 1.15）；"
                                  "论文是 0.87 = 1/1.15。")
        out["encdec_sides_swapped"] = (deepnorm_constants("encdec_decoder", N, M),
                                       "用了解码器侧的常数：编码器侧是 0.81 (N⁴M)^(1/16) 和 0.87 (N⁴M)^(-1/16)。")
    if arch == "encdec_decoder":
        out["encdec_sides_swapped"] = (deepnorm_constants("encdec_encoder", N, M),
                                       "用了编码器侧的常数：解码器侧是 α = (3M)^(1/4)、β = (12M)^(-1/4)。")
        out["used_N"] = ((((3 * N) ** 0.25, (12 * N) ** -0.25)) if N else (0.0, 0.0),
                         "解码器侧的常数只依赖解码器层数 M，不是 N。")
    return out


def _pair(got) -> tuple[float, float] | None:
    try:
        a, b = got
        return float(a), float(b)
    except (TypeError, ValueError):
        return None


def _same(p: tuple[float, float], q: tuple[float, float]) -> bool:
    return all(math.isclose(u, v, rel_tol=1e-3) for u, v in zip(p, q))


@exercise("05.1", title="DeepNet 的 α、β：四种架构 (alpha, beta per architecture)", target_minutes=8, checks=4)
def check_constants(answer) -> list[Finding]:
    out: list[Finding] = []
    for arch in ARCHITECTURES:
        bad = None
        for a, N, M in PROBES:
            if a != arch:
                continue
            what = f"arch={arch!r}, N={N}, M={M}"
            try:
                got = call(answer, arch, N, M)
            except SubmissionError as err:
                bad = fail(arch, f"你的代码报错了 (your code raised): {err}", input=what)
                break
            pair, ref = _pair(got), deepnorm_constants(arch, N, M)
            if pair is None:
                bad = fail(arch, f"应返回 (alpha, beta) 两个数，实际返回 {type(got).__name__}", input=what, got=got)
                break
            if _same(pair, ref):
                continue
            wrong = next(((k, msg) for k, (v, msg) in _wrong_constants(arch, N, M).items() if _same(pair, v)), None)
            shown = dict(input=what, expected=f"({ref[0]:.4f}, {ref[1]:.4f})", got=f"({pair[0]:.4f}, {pair[1]:.4f})")
            bad = fail(*wrong, **shown) if wrong else fail(arch, f"{arch} 的 α、β 不对（§4.3 的表）", **shown)
            break
        out.append(bad or ok(arch, f"{arch}: α、β 与 §4.3 一致"))
    return out


# --------------------------------------------------------------------------- 05.2 the residual update

WIDTH = 16


def _parts(seed: int, alpha: float):
    """A sublayer (MLP), a LayerNorm with random gain/bias, and the lesson's Residual holding both."""
    with blocks.seeded(seed):
        mlp = blocks.MLP(WIDTH)
        ln = nn.LayerNorm(WIDTH)
        with torch.no_grad():
            ln.weight.copy_(1 + 0.3 * torch.randn(WIDTH))
            ln.bias.copy_(0.2 * torch.randn(WIDTH))
            for p in mlp.parameters():
                p.mul_(2.0)                        # a branch as large as the stream: the mistakes show
        x = torch.randn(3, 5, WIDTH) * 1.5
    res = blocks.Residual(mlp, WIDTH, wiring="deepnorm", alpha=alpha)
    res.norm = ln
    return x, mlp, ln, res


@exercise("05.2", title="DeepNorm 的残差更新 LN(α·x + G(x))（改正 labml 的写法）", target_minutes=8, checks=2)
def check_update(answer) -> list[Finding]:
    out: list[Finding] = []
    for name, alpha in (("update", 2.21), ("update_alpha_small", 1.3)):
        with step(out, name):
            x, mlp, ln, res = _parts(31 if name == "update" else 32, alpha)
            with torch.no_grad():
                ref = res(x)
                got = call(answer, x, mlp, ln, alpha)
                mistakes = {
                    "alpha_on_branch": (lambda: AlphaOnBranch(res)(x),
                                        "α 乘在了子层输出上 LN(x + α·G(x))：这正是 labml deep_norm 的写法（issue #145）。"
                                        "α 应放大恒等路径 x，让每层对残差流的改动相对变小；放大 G(x) 方向正好相反。"),
                    "no_norm": (lambda: alpha * x + mlp(x),
                                "没有 LayerNorm：α·x + G(x) 之后还要过 LN（[E] §4 的写法漏了它，勘误 E7）。"),
                    "no_norm_alpha_on_branch": (lambda: x + alpha * mlp(x),
                                                "x + α·F(x)：既没有 LN，α 也乘错了一边（[E] §4 的写法，勘误 E7）。"),
                    "alpha_ignored": (lambda: ln(x + mlp(x)), "没有乘 α：这是 Post-LN LN(x + G(x))（α = 1）。"),
                    "pre_ln": (lambda: x + mlp(ln(x)), "写成了 Pre-LN x + G(LN(x))：DeepNorm 仍是 Post-LN 结构，LN 在相加之后。"),
                    "alpha_before_sublayer": (lambda: ln(alpha * x + mlp(alpha * x)),
                                              "子层读的是 α·x：G 的输入应是 x 本身，α 只乘在恒等路径上。"),
                    "alpha_after_norm": (lambda: alpha * ln(x + mlp(x)), "α 乘在了 LN 的输出上：应在 LN 之内乘 x。"),
                }
                out.append(compare(name, got, ref, mistakes, f"α = {alpha}: 与 blocks.Residual(wiring='deepnorm') 一致",
                                   f"α = {alpha}: 与 LN(α·x + G(x)) 不一致", input=x))
    return out


# --------------------------------------------------------------------------- 05.3 the init

BETA = 0.25          # not any depth's beta: the answer must use the argument


def _xavier_std(lin: nn.Linear, gain: float) -> float:
    return gain * math.sqrt(2.0 / (lin.in_features + lin.out_features))


def _model(seed: int = 41) -> nn.Module:
    """A 2-layer Transformer stack (attention: q/k/v/out_proj, MLP: fc1/fc2, LayerNorms), every Linear
    filled with a constant so that an untouched weight shows."""
    stack = blocks.build_stack(2, 64, wiring="deepnorm", sublayer="transformer", seed=seed)
    with torch.no_grad():
        for m in stack.modules():
            if isinstance(m, nn.Linear):
                m.weight.fill_(0.05)
                m.bias.fill_(0.1)
    return stack


def _gains(model: nn.Module) -> dict[str, float]:
    """Per kind of weight (q_proj ... fc2, pooled over the layers): std / Xavier std at gain 1."""
    out = {}
    for leaf in ("q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"):
        mods = [m for n, m in model.named_modules() if isinstance(m, nn.Linear) and n.rsplit(".", 1)[-1] == leaf]
        out[leaf] = torch.cat([m.weight.detach().flatten() / _xavier_std(m, 1.0) for m in mods]).std().item()
    return out


@exercise("05.3", title="DeepNorm 的初始化：β 只缩放 fc1、fc2、v_proj、out_proj (init with beta)", target_minutes=10, checks=3)
def check_init(answer) -> list[Finding]:
    out: list[Finding] = []
    model = _model()
    norms_before = {n: p.detach().clone() for n, p in model.named_parameters() if ".norm" in n}
    with torch.no_grad():
        call(answer, model, BETA)
    ref_model = _model()
    init_weights_(ref_model, 2, deepnorm_beta=BETA)           # the lesson's init: what "right" means here
    linears = {n: m for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    ratio, expect = _gains(model), _gains(ref_model)          # std / Xavier std at gain 1, pooled per leaf
    untouched = [n for n, m in linears.items() if torch.all(m.weight == 0.05)]
    if untouched:
        out.append(fail("not_reinitialised", f"这些权重没有重新初始化 (not re-initialised): {', '.join(untouched)}；"
                        "每个 nn.Linear 都要做 Xavier 初始化。"))
        return out
    bad_gain = {leaf: r for leaf, r in ratio.items() if not 0.9 < r / expect[leaf] < 1.1}
    shown = dict(got=", ".join(f"{k} {v:.3f}" for k, v in ratio.items()),
                 expected=", ".join(f"{k} {v:.3f}" for k, v in expect.items()))
    qk_scaled = all(abs(ratio[k] / BETA - 1) < 0.1 for k in ("q_proj", "k_proj"))
    xavier = qk_scaled or all(abs(ratio[k] - 1) < 0.1 for k in ("q_proj", "k_proj"))   # gain-1 weights as Xavier's
    unscaled = [k for k in SCALED if abs(ratio[k] - 1) < 0.1] if xavier else []
    squared = [k for k in SCALED if abs(ratio[k] / BETA ** 2 - 1) < 0.1] if xavier else []
    if qk_scaled:
        out.append(fail("qk_scaled", "q_proj、k_proj 也乘了 β：§4.3 只缩放 FFN 的两层和注意力的 v、out 投影，"
                        "q、k 投影保持增益 1（[E] §4 把每层所有权重都乘 β，勘误 E7）。", **shown))
    if unscaled:
        which = ("v_proj、out_proj 没有乘 β：注意力的 value 和输出投影也要缩放" if set(unscaled) == {"v_proj", "out_proj"}
                 else f"{', '.join(unscaled)} 没有乘 β")
        out.append(fail("missed_scaled", f"{which}（§4.3：fc1、fc2、v_proj、out_proj）。", **shown))
    if squared:
        out.append(fail("beta_squared", f"{', '.join(squared)} 的增益是 β²：β 只乘一次（xavier_normal_(w, gain=β)）。", **shown))
    if not (qk_scaled or unscaled or squared) and bad_gain:
        out.append(fail("not_xavier", "标准差不是 Xavier 的 gain·√(2/(fan_in + fan_out))"
                        f"（{', '.join(bad_gain)}）：用 nn.init.xavier_normal_(w, gain=...)。", **shown))
    if not bad_gain:
        out.append(ok("gains", "fc1、fc2、v_proj、out_proj 的增益是 β，q_proj、k_proj 是 1（与 normlab.init 一致）"))
    biases = [n for n, m in linears.items() if m.bias is not None and not torch.all(m.bias == 0)]
    out.append(fail("bias_not_zero", f"偏置应初始化为 0 (zero biases)：{', '.join(biases)}") if biases
               else ok("biases", "偏置全为 0"))
    changed = [n for n, p in model.named_parameters() if n in norms_before and not torch.equal(p, norms_before[n])]
    out.append(fail("touched_norm", f"LayerNorm 的参数被改了：{', '.join(changed)}；β 只作用在子层的线性层上。")
               if changed else ok("norms", "LayerNorm 的参数没有动"))
    same_shapes = all(p.shape == q.shape for p, q in zip(model.parameters(), ref_model.parameters()))
    if not same_shapes:
        out.append(fail("shapes", "参数的形状变了：只改初始值，不改模型。"))
    return out

