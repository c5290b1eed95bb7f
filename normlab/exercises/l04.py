"""Lesson 04 (RMSNorm) exercises.

    04.1  LLaMA's RMSNorm: float32 inside, cast back to x's dtype, THEN times the weight
    04.2  Gemma's RMSNorm as a module: gain (1 + w), w initialised to 0, float32 throughout
    04.3  Add + RMSNorm returning (h, y): the new residual stream and the normalised output
    04.4  bytes an unfused / fused Add + RMSNorm moves through memory

References: F.rms_norm / F.layer_norm computed in float32 (torch's own kernels), the byte counts of
``normlab.bench.BYTES`` (the lesson's benchmark table). Known mistakes are the formulas of
``normlab.variants`` and the lesson's errata.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .. import bench, variants
from .base import Finding, call, close, compare, exercise, fail, ok, step

D = 64
HALF = (torch.float16, torch.bfloat16)


def _sample(seed: int, shape=(4, D), scale: float = 2.0, shift: float = 0.5) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) * scale + shift


def _weight(seed: int, d: int = D, spread: float = 0.3) -> Tensor:
    g = torch.Generator().manual_seed(seed)
    return 1 + spread * torch.randn(d, generator=g)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _order_mistake(got: Tensor, right: Tensor, wrong: Tensor) -> bool:
    """True when ``got`` agrees with ``wrong`` (and not with ``right``) on the elements where the two
    half-precision results differ: the rounding order gives itself away there."""
    where = right != wrong
    if got.dtype != right.dtype or got.shape != right.shape or int(where.sum()) < 20:
        return False
    same_wrong = (got[where] == wrong[where]).float().mean().item()
    same_right = (got[where] == right[where]).float().mean().item()
    return same_wrong > 0.8 and same_right < 0.5


def _rms_mistakes(x: Tensor, w: Tensor, eps: float, gain: Tensor) -> dict:
    """Outputs of the usual wrong RMSNorm formulas (float32 probes), gain = the expected gain."""
    d = x.shape[-1]
    return {
        "mean_subtracted": (lambda: F.layer_norm(x, (d,), None, None, eps) * gain,
                            "减了均值：这是 LayerNorm (mean subtracted)。RMSNorm 只除以 √(mean(x²) + ε)，不减 μ。"),
        "eps_outside_root": (lambda: variants.rms_eps_outside(x, gain, eps),
                             "ε 放在了根号外 x / (√mean(x²) + ε) (eps outside the root)；PyTorch、LLaMA 把 ε 放在根号内。"),
        "eps_ignored": (lambda: F.rms_norm(x, (d,), gain, 1e-6),
                        "没有用传入的 eps（写死成了 1e-6）(the eps argument is ignored)。"),
        "no_sqrt": (lambda: x / (x.pow(2).mean(-1, keepdim=True) + eps) * gain,
                    "除以的是 mean(x²) + ε，少了开方 (missing square root)。"),
        "sum_not_mean": (lambda: x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps) * gain,
                         "用了平方和而不是平方的均值 (sum instead of mean)：输出小了 √d 倍。"),
        "wrong_axis": (lambda: x * torch.rsqrt(x.pow(2).mean() + eps) * gain,
                       "在所有元素上求了一个均方根 (wrong reduction axes)：应只对最后一维求，每行一个。"),
        "no_weight": (lambda: F.rms_norm(x, (d,), None, eps),
                      "没有乘增益 (the gain is missing)：RMSNorm 没有 β，但保留 γ。"),
    }


# --------------------------------------------------------------------------- 04.1 LLaMA's RMSNorm

def llama_reference(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """HF LlamaRMSNorm with torch's own kernel: float32 RMSNorm, cast back, then times the weight."""
    return weight * F.rms_norm(x.float(), (x.shape[-1],), None, eps).to(x.dtype)


@exercise("04.1", title="LLaMA 式 RMSNorm：float32 上转在乘 weight 之前结束 (upcast, cast back, then weight)",
                target_minutes=10, checks=6)
def check_llama(answer) -> list[Finding]:
    out: list[Finding] = []
    x, w = _sample(1), _weight(2)
    with step(out, "float32"):
        got = call(answer, x, w, 1e-6)
        out.append(compare("float32", got, F.rms_norm(x, (D,), w, 1e-6), _rms_mistakes(x, w, 1e-6, w),
                           "float32 输入：与 F.rms_norm 一致", "float32 输入：与 F.rms_norm 不一致 (values differ)", input=x))
    with step(out, "eps"):
        xs = _sample(3, scale=0.3, shift=0.0)          # rms ~ 0.3, eps 0.1: inside vs outside the root differ
        got = call(answer, xs, w, 0.1)
        out.append(compare("eps", got, F.rms_norm(xs, (D,), w, 0.1), _rms_mistakes(xs, w, 0.1, w),
                           "eps=0.1：ε 在根号内，与 F.rms_norm 一致", "eps=0.1：与 F.rms_norm 不一致 (values differ)",
                           input=xs))
    with step(out, "fp16_overflow"):
        xh = (_sample(4, scale=300.0, shift=0.0)).half()   # x^2 > 65504: overflows in float16
        wh = _weight(5).half()
        got = call(answer, xh, wh, 1e-6)
        ref = llama_reference(xh, wh, 1e-6)
        out.append(compare("fp16_overflow", got, ref, {
            "no_upcast": (lambda: variants.rms_norm(xh, wh, 1e-6),
                          "没有先上转到 float32 (no upcast)：float16 里 |x| ≈ 300 时 x² 溢出成 inf，RMS 变成 inf，输出全是 0。")},
            "|x| ≈ 300 的 float16：先上转，没有溢出", "|x| ≈ 300 的 float16：与 float32 算出的结果不一致", tol=1e-2,
            input=xh))
    for dtype in HALF:
        name = f"dtype_{_dtype_name(dtype)}"
        with step(out, name):
            xh, wh = _sample(6).to(dtype), _weight(7).to(dtype)
            got = call(answer, xh, wh, 1e-6)
            if not isinstance(got, Tensor):
                out.append(fail(name, f"应返回 Tensor，实际返回 {type(got).__name__}"))
            elif got.dtype != dtype:
                out.append(fail("no_cast_back", f"输入和 weight 都是 {_dtype_name(dtype)}，输出却是 {_dtype_name(got.dtype)} "
                                "(output dtype differs)：float32 的结果要先 .to(x.dtype) 转回，再乘 weight。",
                                input=xh, got=got))
            else:
                out.append(ok(name, f"{_dtype_name(dtype)} 输入 → {_dtype_name(dtype)} 输出"))
    with step(out, "order_bf16"):
        xb, wb = _sample(8, shape=(16, 256)).bfloat16(), _weight(9, 256).bfloat16()
        got = call(answer, xb, wb, 1e-6)
        right = llama_reference(xb, wb, 1e-6)
        wrong = (wb.float() * F.rms_norm(xb.float(), (256,), None, 1e-6)).to(torch.bfloat16)
        if not (isinstance(got, Tensor) and got.dtype == torch.bfloat16):
            pass                                   # the dtype finding above already names it
        elif _order_mistake(got, right, wrong):
            out.append(fail("weight_before_cast", "在 float32 里乘了 weight 再转回 bfloat16 (weight applied before the cast)："
                            "这是 Gemma 的顺序。HF 的 LlamaRMSNorm 先 .to(x.dtype) 再乘 weight，多一次舍入；"
                            "要与 LLaMA 的权重逐位一致，就得按它的顺序。", input=xb, expected=right, got=got))
        elif close(got, right, 2e-2):
            out.append(ok("order_bf16", "bfloat16：先转回、再乘 weight（与 LlamaRMSNorm 的顺序一致）"))
        else:
            out.append(fail("order_bf16", "bfloat16 输入：与 float32 算出、转回后再乘 weight 的结果不一致",
                            input=xb, expected=right, got=got))
    return out


# --------------------------------------------------------------------------- 04.2 Gemma's RMSNorm

def gemma_reference(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """Gemma: float32 throughout, gain (1 + w), one cast at the end (torch's kernel in float32)."""
    return F.rms_norm(x.float(), (x.shape[-1],), 1.0 + weight.float(), eps).to(x.dtype)


def _module(answer, *args, **kwargs) -> nn.Module:
    m = call(answer, *args, **kwargs)
    if not isinstance(m, nn.Module):
        raise TypeError(f"应是一个 nn.Module 的子类，实例化得到的是 {type(m).__name__} (must be an nn.Module)")
    return m


def _weight_param(m: nn.Module, d: int) -> Tensor:
    w = dict(m.named_parameters()).get("weight")
    if w is None or tuple(w.shape) != (d,):
        raise _MissingWeight(f"模块应有形状为 ({d},) 的参数 weight（HF 的名字，加载权重要靠它），实际参数："
                             f"{[(n, tuple(p.shape)) for n, p in m.named_parameters()]}")
    return w


class _MissingWeight(Exception):
    pass


@exercise("04.2", title="Gemma 的 RMSNorm：增益 1 + w，w 初始化为 0 (Gemma's (1 + w) gain)", target_minutes=10, checks=6)
def check_gemma(answer) -> list[Finding]:
    out: list[Finding] = []
    try:
        m = _module(answer, D)
        w = _weight_param(m, D)
    except _MissingWeight as err:
        return [fail("weight", str(err))]
    except TypeError as err:
        return [fail("module", str(err))]
    x = _sample(11)
    with step(out, "init"):
        if torch.all(w == 0):
            out.append(ok("init", "weight 初始化为 0：初始增益 1 + 0 = 1"))
        elif torch.all(w == 1):
            out.append(fail("init_ones", "weight 初始化成了 1 (initialised to ones)：Gemma 的增益是 1 + w，"
                            "w 从 0 开始；初始化为 1 会让初始增益变成 2。", got=w))
        else:
            out.append(fail("init", "weight 应初始化为全 0 (zeros)", got=w))
    with step(out, "at_init"):
        with torch.no_grad():
            w.zero_()
        got = call(m, x)
        out.append(compare("at_init", got, F.rms_norm(x, (D,), None, 1e-6), {
            "gain_is_w": (lambda: torch.zeros_like(x),
                          "输出全是 0：把 w 当成了增益 (gain w instead of 1 + w)。Gemma 存的 w 从 0 开始，增益是 1 + w。")},
            "w = 0 时输出就是 γ = 1 的 RMSNorm", "w = 0 时应等于不带增益的 RMSNorm", input=x))
    with step(out, "float32"):
        wt = _weight(12) - 1                       # a "trained" w around 0
        with torch.no_grad():
            w.copy_(wt)
        got = call(m, x)
        out.append(compare("float32", got, F.rms_norm(x, (D,), 1 + wt, 1e-6), {
            "gain_is_w": (lambda: F.rms_norm(x, (D,), wt, 1e-6),
                          "乘的是 w 而不是 1 + w (gain w instead of 1 + w)。"),
            **_rms_mistakes(x, wt, 1e-6, 1 + wt)},
            "float32：与 F.rms_norm(x, weight=1 + w) 一致", "float32：与 F.rms_norm(x, weight=1 + w) 不一致", input=x))
    with step(out, "eps"):
        m2 = _module(answer, D, eps=0.1)
        with torch.no_grad():
            _weight_param(m2, D).zero_()           # gain 1: only eps matters here
        xs = _sample(13, scale=0.3, shift=0.0)
        got = call(m2, xs)
        one = torch.ones(D)
        out.append(compare("eps", got, F.rms_norm(xs, (D,), None, 0.1), {
            "gain_is_w": (lambda: torch.zeros_like(xs), "输出全是 0：把 w 当成了增益 (gain w instead of 1 + w)。"),
            **_rms_mistakes(xs, one, 0.1, one)},
                           "eps=0.1：ε 在根号内", "eps=0.1（构造时传入）：与 F.rms_norm 不一致", input=xs))
    with step(out, "fp16_overflow"):
        mh = _module(answer, D).half()
        wh = (_weight(14) - 1).half()
        with torch.no_grad():
            _weight_param(mh, D).copy_(wh)
        xh = _sample(15, scale=300.0, shift=0.0).half()
        got = call(mh, xh)
        out.append(compare("fp16_overflow", got, gemma_reference(xh, wh, 1e-6), {
            "no_upcast": (lambda: variants.rms_norm(xh, 1 + wh, 1e-6),
                          "没有先上转到 float32 (no upcast)：float16 里 x² 溢出成 inf，输出全是 0。")},
            "|x| ≈ 300 的 float16：全程 float32，没有溢出", "|x| ≈ 300 的 float16：与 float32 算出的结果不一致",
            tol=1e-2, input=xh))
    with step(out, "bf16"):
        mb = _module(answer, 256).bfloat16()
        wb = (_weight(16, 256) - 1).bfloat16()
        with torch.no_grad():
            _weight_param(mb, 256).copy_(wb)
        xb = _sample(17, shape=(16, 256)).bfloat16()
        got = call(mb, xb)
        right = gemma_reference(xb, wb, 1e-6)
        wrong = (1 + wb) * F.rms_norm(xb.float(), (256,), None, 1e-6).to(torch.bfloat16)
        if not isinstance(got, Tensor) or got.dtype != torch.bfloat16:
            out.append(fail("dtype", "bfloat16 输入应得到 bfloat16 输出 (output dtype must be the input's)：最后转回一次。",
                            got=got))
        elif _order_mistake(got, right, wrong):
            out.append(fail("cast_before_gain", "先转回 bfloat16 再乘 (1 + w) (cast before the gain)：这是 LLaMA 的顺序。"
                            "Gemma 在 float32 里乘完 (1 + w) 才转回，只舍入一次。", input=xb, expected=right, got=got))
        elif close(got, right, 2e-2):
            out.append(ok("bf16", "bfloat16：float32 里乘 (1 + w)，最后转回一次"))
        else:
            out.append(fail("bf16", "bfloat16 输入：与 float32 算完再转回的结果不一致", input=xb, expected=right, got=got))
    return out


# --------------------------------------------------------------------------- 04.3 Add + RMSNorm

@exercise("04.3", title="Add + RMSNorm：返回新的残差流 h 和归一化的输出 y (residual add and norm)",
                target_minutes=8, checks=4)
def check_add_rms_norm(answer) -> list[Finding]:
    out: list[Finding] = []
    x, r, w = _sample(21), _sample(22, shift=-0.3), _weight(23)
    h_ref, y_ref = x + r, F.rms_norm(x + r, (D,), w, 1e-6)
    with step(out, "pair"):
        got = call(answer, x, r, w, 1e-6)
        if not (isinstance(got, tuple | list) and len(got) == 2 and all(isinstance(t, Tensor) for t in got)):
            out.append(fail("not_a_pair", "应返回两个张量 (h, y)：h = x + r 是 Pre-LN 里下一层要读的残差流 (residual stream)，"
                            f"y 是归一化的输出；实际返回 {type(got).__name__}。", got=got))
            return out
        h, y = got
        if close(h, y_ref) and close(y, h_ref):
            out.append(fail("swapped", "h 和 y 顺序反了 (returned (y, h))：约定是 (h, y)。"))
            return out
        out.append(ok("pair", "返回 (h, y)"))
        if close(h, y_ref):
            out.append(fail("h_is_y", "返回的 h 是归一化之后的结果 (the stream was normalised)：残差流应是 x + r 本身，"
                            "归一化只作用在交给子层的那一份 y 上。", input=x, expected=h_ref, got=h))
        else:
            out.append(compare("h", h, h_ref, {}, "h = x + r", "h 应等于 x + r", input=x))
        out.append(compare("y", y, y_ref, {
            "normalized_x": (lambda: F.rms_norm(x, (D,), w, 1e-6),
                             "y 归一化的是 x，不是 x + r (normalised x instead of x + r)。"),
            "normalized_r": (lambda: F.rms_norm(r, (D,), w, 1e-6), "y 归一化的是 r，不是 x + r。"),
            "y_plus_residual": (lambda: x + F.rms_norm(r, (D,), w, 1e-6),
                                "y = x + RMSNorm(r)：把归一化放在了相加之前的一份上；这里要的是 RMSNorm(x + r)。"),
            **_rms_mistakes(h_ref, w, 1e-6, w)},
            "y = RMSNorm(x + r) · weight", "y 应等于 F.rms_norm(x + r, weight)", input=x))
    with step(out, "bf16"):
        xb, rb, wb = _sample(24).bfloat16(), _sample(25).bfloat16(), _weight(26).bfloat16()
        h, y = call(answer, xb, rb, wb, 1e-6)
        bad = [f"{n} 是 {_dtype_name(t.dtype)}" for n, t in (("h", h), ("y", y)) if t.dtype != torch.bfloat16]
        if bad:
            out.append(fail("dtype", f"bfloat16 输入：{'、'.join(bad)} (output dtype)；h 是 Pre-LN 里下一层的残差流，"
                            "应和输入同 dtype，y 也要转回 bfloat16（统计量在 float32 里算）。"))
        elif close(y, llama_reference(xb + rb, wb, 1e-6), 2e-2) and torch.equal(h, xb + rb):
            out.append(ok("bf16", "bfloat16：h、y 都是 bfloat16，y 与 float32 里算的结果一致"))
        else:
            out.append(fail("bf16", "bfloat16 输入：h 应等于 x + r，y 应与 float32 里算出再转回的结果一致",
                            expected=llama_reference(xb + rb, wb, 1e-6), got=y))
    return out


# --------------------------------------------------------------------------- 04.4 bytes moved

def bytes_reference(numel: int, itemsize: int, fused: bool, write_h: bool = True) -> int:
    """From the lesson's benchmark table (bytes per float32 element), scaled to ``itemsize``."""
    key = "add_rms_norm" if not fused else ("add_rms_norm_triton" if write_h else "add_rms_norm_compiled")
    return bench.BYTES[key] // 4 * itemsize * numel


@exercise("04.4", title="数一数：未融合和融合的 Add + RMSNorm 各读写多少字节 (memory traffic)", target_minutes=8, checks=6)
def check_bytes(answer) -> list[Finding]:
    out: list[Finding] = []
    numel = 16 * 512 * 1024
    cases = [("unfused_fp32", 4, False, True), ("unfused_fp32_no_h", 4, False, False),
             ("fused_h_fp32", 4, True, True), ("fused_y_fp32", 4, True, False),
             ("unfused_bf16", 2, False, True), ("fused_h_bf16", 2, True, True)]
    for name, itemsize, fused, write_h in cases:
        with step(out, name):
            got = call(answer, numel, itemsize, fused, write_h)
            ref = bytes_reference(numel, itemsize, fused, write_h)
            what = (f"numel={numel}, itemsize={itemsize}, fused={fused}, write_h={write_h}")
            if not isinstance(got, int | float) or isinstance(got, bool):
                out.append(fail(name, f"应返回字节数（一个整数），实际返回 {type(got).__name__}", input=what))
                continue
            tensors = got / (itemsize * numel)          # how many tensor-sized reads + writes were counted
            if got == ref:
                out.append(ok(name, f"{what}: {ref} 字节（每元素 {ref // numel}）"))
            elif got == ref // numel:
                out.append(fail("per_element", "返回的是每个元素的字节数 (bytes per element)，要乘元素个数 numel。",
                                input=what, expected=ref, got=got))
            elif got == 8 * ref:
                out.append(fail("bits", "算成了比特 (bits)，不是字节 (bytes)：itemsize 已经是字节数。",
                                input=what, expected=ref, got=got))
            elif itemsize != 4 and got == bytes_reference(numel, 4, fused, write_h):
                out.append(fail("itemsize_ignored", "没有用 itemsize：bfloat16 每个元素 2 字节，不是 4。",
                                input=what, expected=ref, got=got))
            elif not fused and tensors == 4:
                out.append(fail("forgot_readback", "未融合时 h = x + r 先写回内存、再被 RMSNorm 读回来一次：读 x、r，写 h，"
                                "读 h，写 y，共 5 次 (the sum is read back)。", input=what, expected=ref, got=got))
            elif not fused and tensors == 3:
                out.append(fail("unfused_as_fused", "未融合的两个内核之间，h 必须经过内存（写一次、读一次）；"
                                "只读 x、r、写 y 的是融合内核 (that is the fused count)。", input=what, expected=ref, got=got))
            elif fused and write_h and tensors == 3:
                out.append(fail("forgot_h_write", "write_h=True：融合内核还要把 h = x + r 写出来给下一层当残差流，"
                                "读 x、r，写 h、y，共 4 次。", input=what, expected=ref, got=got))
            elif fused and not write_h and tensors == 4:
                out.append(fail("h_written_anyway", "write_h=False：只写 y，读 x、r，共 3 次 (h is not written)。",
                                input=what, expected=ref, got=got))
            else:
                out.append(fail(name, "字节数不对 (wrong byte count)：每个张量大小的读或写算 numel × itemsize 字节。",
                                input=what, expected=ref, got=got))
    return out
