"""LayerNorm / RMSNorm at the production level: half precision with a float32 upcast, and which default
eps the module has."""

from __future__ import annotations

import torch

from .probes import PROD, close, fail, find_bias, find_gain, ok, output_of, set_tensor
from .references import _ln_reference


def _identity_affine(mod, D, rms):
    """γ = 1 and β = 0, whatever the module set them to (an uninitialised γ included)."""
    gname, w = find_gain(mod, D)
    if w is not None:
        set_tensor(w, torch.ones(D))
    if not rms:
        bname, b = find_bias(mod, D, gname)
        if b is not None:
            set_tensor(b, torch.zeros(D))


def _in_half(x, eps, rms):
    """The norm computed in x's own half dtype, without an upcast (what "no float32 upcast" produces)."""
    num = x if rms else x - x.mean(-1, keepdim=True)
    return num / torch.sqrt(num.pow(2).mean(-1, keepdim=True) + eps)


def _same(a, b, tol):
    fa, fb = torch.isfinite(a), torch.isfinite(b)
    return bool(torch.equal(fa, fb)) and (not bool(fa.any()) or close(a[fa].double(), b[fb].double(), tol))


def _ln_half(build, rms, eps, g, dt, scale, id, shape, out):
    """Half precision: dtype kept, values right; |x|≈300 overflows x² in float16 without an upcast. The missing
    upcast is said only when the output is what the formula gives computed in the half dtype (issue 37: an
    uninitialised γ was once told it lacked an upcast)."""
    D = shape[-1]
    mod = build(D, eps=eps)
    _identity_affine(mod, D, rms)
    if hasattr(mod, "to"):
        mod = mod.to(dt)          # the whole layer in half precision, as model.half() does
    x = (torch.randn(shape, generator=g) * scale).to(dt)
    got = output_of(mod, x)
    exp = _ln_reference(x, (D,), torch.ones(D), torch.zeros(D), eps, rms)
    tol = 3e-2 if dt == torch.bfloat16 else 5e-3
    if got.dtype != dt:
        out.append(fail(id, f"输入是 {dt}，输出 dtype 应与输入相同，实际 {got.dtype} (return the input dtype)", x, level=PROD))
    elif not torch.isfinite(got).all() or not close(got, exp, tol):
        square = "x²" if rms else "(x−μ)²"
        half = _in_half(x, eps, rms)
        no_upcast = not _same(half, exp.to(dt), tol) and _same(got.detach(), half, tol)
        hint = (f"：输出和在 {dt} 里直接计算的结果一样——没有先转 float32 (no float32 upcast)" +
                (f"；|x|≈300 时 {square} 在 float16 下溢出 (300² > 65504)" if dt == torch.float16 and scale > 100 else "") +
                "；先 x.float() 计算再转回输入的 dtype") if no_upcast else \
            "（γ=1、β=0 时；与在半精度里直接计算的结果也不同，原因不是缺少 float32 upcast）"
        out.append(fail(id, f"{dt} 输入的结果错误{hint}", x, exp, got, PROD))
    else:
        out.append(ok(id, f"{dt} 输入：dtype 保持、数值正确", PROD))


def _ln_default_eps(build, rms, g, shape, out):
    """Built without eps: which default it has, read back from the output. LayerNorm: torch's 1e-5.
    RMSNorm: torch.nn.RMSNorm(eps=None) uses torch.finfo(x.dtype).eps (≈1.19e-7 in float32); 1e-6 is
    this card's default and a model configuration's (HF LLaMA's rms_norm_eps), not torch's — the
    report says which one it found."""
    D = shape[-1]
    mod = build(D)
    _identity_affine(mod, D, rms)
    x = torch.randn(shape, generator=g) * (3e-3 if not rms else 3e-4)
    got = output_of(mod, x).detach().double()
    xd = x.double()
    num = xd if rms else xd - xd.mean(-1, keepdim=True)
    stat = num.pow(2).mean(-1, keepdim=True)
    eff = float(((num / got).pow(2) - stat).median())
    near = lambda e: abs(eff - e) <= 0.05 * e + 1e-10         # noqa: E731
    finfo = torch.finfo(torch.float32).eps
    if eff < 1e-10 and "eps" in build.ignored:
        # a formula without any eps (e.g. F.normalize's clamp): the interview probes could not pass one in
        out.append(fail("eps_missing", "公式里没有 ε (eps missing)：|x| 很小时分母接近 0；构造函数也不接受 eps。" +
                        ("应为 sqrt(mean(x²) + eps)" if rms else "应为 sqrt(var + eps)"), x))
    elif not rms and near(1e-5):
        out.append(ok("default_eps", f"不传 eps 时默认 eps≈{eff:.2g}，与 torch.nn.LayerNorm 的默认 1e-5 一致", PROD))
    elif rms and near(finfo):
        out.append(ok("default_eps", f"不传 eps 时默认 eps≈{eff:.3g}：与 torch.nn.RMSNorm 的默认一致（eps=None → "
                      f"torch.finfo(float32).eps≈{finfo:.3g}）", PROD))
    elif rms and near(1e-6):
        out.append(ok("default_eps", "不传 eps 时默认 eps=1e-6：这是本卡片的默认，也是 HF LLaMA 配置的 rms_norm_eps——"
                      f"不是 torch 的默认（torch.nn.RMSNorm 的 eps=None → torch.finfo(float32).eps≈{finfo:.3g}）；"
                      "要与 torch.nn.RMSNorm 完全一致，默认写 eps=None 并在 forward 里取 torch.finfo(x.dtype).eps", PROD))
    else:
        want = (f"torch.nn.RMSNorm 的 eps=None（float32 下 finfo.eps≈{finfo:.3g}；本卡片和 HF LLaMA 配置用 1e-6）"
                if rms else "torch.nn.LayerNorm 的 1e-5")
        out.append(fail("default_eps", f"不传 eps 时，输出相当于 eps≈{eff:.2g}；默认应为 {want} "
                        "(default eps differs from torch's)", x, level=PROD))
