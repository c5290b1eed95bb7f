"""The checks behind ``drills.check``: each compares the learner's code with torch's own
functions (F.layer_norm, F.rms_norm, F.batch_norm, autograd in float64) and, when they differ,
tests the usual wrong formulas to name the mistake."""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor

from .report import Finding, SubmissionError, guarded, short

Check = Callable[[object], Finding]


def close(a: Tensor, b: Tensor, tol: float = 1e-4) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a.double(), b.double(), atol=tol, rtol=tol))


def which(got: Tensor, candidates: dict[str, Tensor], tol: float = 1e-4) -> str | None:
    """Name of the first wrong formula that reproduces the learner's output, if any."""
    for name, value in candidates.items():
        if close(got, value, tol):
            return name
    return None


def fail(id: str, message: str, x: Tensor | None = None, expected: object = None, got: object = None) -> Finding:
    example = {}
    if x is not None:
        example["input"] = short(x)
    if expected is not None:
        example["expected"] = short(expected)
    if got is not None:
        example["got"] = short(got)
    return Finding(id, False, message, example)


def ok(id: str, message: str) -> Finding:
    return Finding(id, True, message)


@contextmanager
def step(out: list[Finding], id: str):
    """One group of checks: if the learner's code raises inside it, record that and go on with
    the next group (a timeout stops everything: the code is likely to hang again)."""
    try:
        yield
    except SubmissionError as err:
        if "time limit" in str(err):
            raise
        out.append(Finding(id, False, f"你的代码报错了 (your code raised): {err}"))
    except Exception as err:  # noqa: BLE001 - e.g. an attribute of the wrong type broke a check
        out.append(Finding(id, False, f"检查无法进行 (the submission broke this check): {type(err).__name__}: {err}"))


def output_of(module, x: Tensor) -> Tensor:
    out = guarded(module, x)
    if not isinstance(out, Tensor):
        raise SubmissionError(f"forward 应返回 Tensor，实际返回 {type(out).__name__} (forward must return a Tensor)")
    return out


def set_param(module, name: str, value: Tensor) -> None:
    p = getattr(module, name, None)
    if not isinstance(p, torch.Tensor):
        raise SubmissionError(f"找不到参数 self.{name} (parameter {name!r} missing)")
    with torch.no_grad():
        p.copy_(value.to(p.dtype))


# ---------------------------------------------------------------- LayerNorm / RMSNorm (modules)
def _wrong_ln(x: Tensor, dims: tuple[int, ...], w: Tensor, b: Tensor, eps: float) -> dict[str, Tensor]:
    mu = x.mean(dims, keepdim=True)
    var = ((x - mu) ** 2).mean(dims, keepdim=True)
    n = math.prod(x.shape[d] for d in dims)
    return {
        "unbiased_variance": (x - mu) / torch.sqrt(var * n / (n - 1) + eps) * w + b,
        "eps_outside_root": (x - mu) / (torch.sqrt(var) + eps) * w + b,
        "no_affine": (x - mu) / torch.sqrt(var + eps),
        "wrong_axis": F.layer_norm(x.transpose(0, -1).contiguous(), x.transpose(0, -1).shape[-len(dims):]).transpose(0, -1),
    }


MISTAKE_TEXT = {
    "unbiased_variance": "用了无偏方差 (unbiased variance, 除以 n-1)。归一化用有偏方差 (biased, 除以 n)："
                         "x.var(dim, unbiased=False) 或 ((x-mu)**2).mean(dim)",
    "eps_outside_root": "ε 放在了根号外 (eps outside the square root)：应为 (x-mu)/sqrt(var+eps)，不是 (x-mu)/(std+eps)",
    "no_affine": "没有乘 γ、加 β (missing the affine weight/bias)",
    "wrong_axis": "归约轴不对 (reduced over the wrong axis)：LayerNorm 在最后 len(normalized_shape) 维上求统计量",
    "centered": "RMSNorm 不减均值 (no mean subtraction)：y = x / sqrt(mean(x²)+ε) · γ",
    "rms_eps_outside": "ε 放在了根号外：PyTorch 和 LLaMA 都是 x / sqrt(mean(x²) + ε)",
    "rms_unbiased": "RMS 用的是平方和除以 n-1：应为 mean(x²)，即除以 n",
    "eps_ignored": "构造时传入的 eps 没有被使用 (the eps argument is ignored)：用 self.eps，不要把 1e-5 写死",
}


def ln_checks(impl, rms: bool = False) -> list[Finding]:
    kind = "RMSNorm" if rms else "LayerNorm"
    eps = 1e-6 if rms else 1e-5
    out: list[Finding] = []
    g = torch.Generator().manual_seed(0)

    with step(out, "construct"):
        _ln_params(impl, rms, kind, eps, out)
    for id, shape_in, shape_norm in [("forward_3d", (2, 5, 8), (8,)), ("forward_tuple", (3, 4, 6), (4, 6))]:
        with step(out, id):
            out.append(_ln_case(impl, rms, eps, g, id, shape_in, shape_norm) or
                       ok(id, f"输出与 torch 一致，输入形状 {shape_in}"))
    with step(out, "tiny_inputs"):
        out.append(_ln_case(impl, rms, eps, g, "tiny_inputs", (4, 8), (8,), scale=1e-3, offset=0.0, tol=1e-3)
                   or ok("tiny_inputs", "|x|≈1e-3 时也一致（ε 的位置正确）"))
    if not rms:
        with step(out, "large_offset"):
            big = _ln_case(impl, rms, eps, g, "large_offset", (4, 16), (16,), scale=1.0, offset=1e4, tol=2e-2)
            if big is None:
                out.append(ok("large_offset", "大偏移 (1e4) 输入下方差仍然准确"))
            elif big.id == "large_offset":
                big.message = ("输入带大偏移 (offset 1e4) 时结果错误：E[x²]−E[x]² 的单遍方差 (one-pass variance) "
                               "在 float32 下发生灾难性抵消；先减均值再平方 (two-pass)")
                out.append(big)
            else:
                out.append(big)
    with step(out, "gradients"):
        _ln_gradients(impl, rms, eps, g, out)
    for dt, scale in [(torch.float16, 300.0), (torch.bfloat16, 3.0)]:   # |x|~300: x² > 65504 in float16
        id = f"half_{str(dt).replace('torch.', '')}"
        with step(out, id):
            _ln_half(impl, rms, eps, g, dt, scale, id, out)
    with step(out, "option_eps"):   # a non-default eps, on inputs small enough for eps to matter
        out.append(_ln_case(impl, rms, 0.1, g, "option_eps", (4, 8), (8,), scale=0.5, offset=0.0, default_eps=eps)
                   or ok("option_eps", "eps=0.1 时也一致（用的是构造时传入的 eps）"))
    return out


def _ln_reference(x, shape, wv, bv, e, rms):
    if rms:
        return F.rms_norm(x.double(), shape, wv.double(), e).to(x.dtype)
    return F.layer_norm(x.double(), shape, wv.double(), bv.double(), e).to(x.dtype)


def _ln_params(impl, rms, kind, eps, out):
    """Construction, parameter names, shapes and initial values."""
    m = guarded(impl, 8, eps=eps)
    w = getattr(m, "weight", None)
    if not isinstance(w, torch.nn.Parameter) or tuple(w.shape) != (8,) or not torch.all(w == 1):
        out.append(fail("params_weight", f"{kind}(8) 应有形状 (8,)、初值全 1 的 nn.Parameter self.weight (γ)。",
                        got=w if isinstance(w, Tensor) else None))
    else:
        out.append(ok("params_weight", "weight (γ): 形状 (8,)，初值 1"))
    params = dict(m.named_parameters()) if hasattr(m, "named_parameters") else {}
    if rms:
        extra = [n for n in params if n != "weight"]
        out.append(ok("no_bias", "没有 β (RMSNorm has no bias)") if not extra else
                   fail("no_bias", f"RMSNorm 只有 γ，没有 β 或其它参数；多出了 {extra} (RMSNorm keeps only the gain γ)"))
    else:
        b = getattr(m, "bias", None)
        good = isinstance(b, torch.nn.Parameter) and tuple(b.shape) == (8,) and torch.all(b == 0)
        out.append(ok("params_bias", "bias (β): 形状 (8,)，初值 0") if good else
                   fail("params_bias", "LayerNorm(8) 应有形状 (8,)、初值全 0 的 nn.Parameter self.bias (β)。"))
    m2 = guarded(impl, (4, 6), eps=eps)
    w2 = getattr(m2, "weight", None)
    out.append(ok("tuple_shape", "normalized_shape 可以是 tuple") if isinstance(w2, Tensor) and tuple(w2.shape) == (4, 6)
               else fail("tuple_shape", "normalized_shape=(4, 6) 时 weight 的形状应为 (4, 6) (int or tuple normalized_shape)"))



def _ln_case(impl, rms, eps, g, id, shape_in, shape_norm, scale=3.0, offset=1.0, tol=1e-4, default_eps=None):
    """Forward values against torch on one shape, with non-trivial gamma/beta; None when right.
    default_eps: the module was built with a non-default eps; also try "it used the default"."""
    mod = guarded(impl, shape_norm if len(shape_norm) > 1 else shape_norm[0], eps=eps)
    wv = torch.randn(shape_norm, generator=g) + 1
    bv = torch.randn(shape_norm, generator=g)
    set_param(mod, "weight", wv)
    if not rms:
        set_param(mod, "bias", bv)
    x = torch.randn(shape_in, generator=g) * scale + offset
    x0 = x.clone()
    got = output_of(mod, x)
    exp = _ln_reference(x, shape_norm, wv, bv, eps, rms)
    if not torch.equal(x, x0):
        return fail("input_modified", "输入张量被原地修改了 (the input was modified in place)：不要对 x 用 x -= ... 之类的原地操作", x0)
    if got.shape != exp.shape:
        return fail(id, f"输出形状应为 {tuple(exp.shape)} (output shape)", x, exp, got)
    if close(got, exp, tol):
        return None
    if not torch.isfinite(got).all():
        return fail(id, "输出里有 NaN 或 inf (non-finite output)：检查除法的分母和 ε", x, exp, got)
    dims = tuple(range(-len(shape_norm), 0))
    xd = x.double()
    cands = _wrong_ln(xd, dims, wv.double(), bv.double(), eps) if not rms else {
        "centered": F.layer_norm(xd, shape_norm, wv.double(), None, eps),
        "rms_eps_outside": xd / (xd.pow(2).mean(dims, keepdim=True).sqrt() + eps) * wv.double(),
        "rms_unbiased": xd / torch.sqrt(xd.pow(2).sum(dims, keepdim=True) / (math.prod(shape_norm) - 1) + eps) * wv.double(),
    }
    if default_eps is not None:
        cands = {"eps_ignored": _ln_reference(xd, shape_norm, wv, bv, default_eps, rms), **cands}
    name = which(got, cands)
    msg = MISTAKE_TEXT[name] if name else f"输出与 torch 的 {'F.rms_norm' if rms else 'F.layer_norm'} 不一致 (values differ)"
    return fail(name or id, msg, x, exp, got)


def _ln_gradients(impl, rms, eps, g, out):
    """Gradients with respect to x, gamma, beta against autograd of torch's function."""
    mod = guarded(impl, 8, eps=eps)
    wv, bv = torch.randn(8, generator=g) + 1, torch.randn(8, generator=g)
    set_param(mod, "weight", wv)
    if not rms:
        set_param(mod, "bias", bv)
    x = (torch.randn(3, 8, generator=g) * 2).requires_grad_(True)
    gy = torch.randn(3, 8, generator=g)
    y = output_of(mod, x)
    try:
        (y * gy).sum().backward()
    except RuntimeError as err:
        out.append(fail("gradients", f"反向传播失败 (backward failed): {err}"))
        return
    xr, wr = x.detach().double().requires_grad_(True), wv.double().requires_grad_(True)
    br = bv.double().requires_grad_(True)
    yr = F.rms_norm(xr, (8,), wr, eps) if rms else F.layer_norm(xr, (8,), wr, br, eps)
    (yr * gy.double()).sum().backward()
    good = x.grad is not None and close(x.grad, xr.grad) and mod.weight.grad is not None and close(mod.weight.grad, wr.grad)
    if not rms:
        good = good and mod.bias.grad is not None and close(mod.bias.grad, br.grad)
    out.append(ok("gradients", "对 x、γ、β 的梯度与 autograd 一致") if good else
               fail("gradients", "梯度与 autograd 不一致 (gradients differ)：是否用了 .detach()/.data 或 numpy 截断了计算图？",
                    x.detach(), xr.grad, x.grad))


def _ln_half(impl, rms, eps, g, dt, scale, id, out):
    """Half precision: dtype kept, values right; |x|≈300 overflows x² in float16 without an upcast."""
    mod = guarded(impl, 8, eps=eps)
    if hasattr(mod, "to"):
        mod = mod.to(dt)          # the whole layer in half precision, as model.half() does
    x = (torch.randn(4, 8, generator=g) * scale).to(dt)
    got = output_of(mod, x)
    exp = _ln_reference(x, (8,), torch.ones(8), torch.zeros(8), eps, rms)
    tol = 3e-2 if dt == torch.bfloat16 else 5e-3
    if got.dtype != dt:
        out.append(fail(id, f"输入是 {dt}，输出 dtype 应与输入相同，实际 {got.dtype} (return the input dtype)", x))
    elif not torch.isfinite(got).all() or not close(got, exp, tol):
        square = "x²" if rms else "(x−μ)²"
        hint = (f"：|x|≈300 时 {square} 在 float16 下溢出 (300² > 65504)，先 x.float() 计算再转回输入的 dtype "
                "(no float32 upcast)") if dt == torch.float16 and scale > 100 else ""
        out.append(fail(id, f"{dt} 输入的结果错误{hint}", x, exp, got))
    else:
        out.append(ok(id, f"{dt} 输入：dtype 保持、数值正确"))


# ---------------------------------------------------------------- BatchNorm (module)
def _bn_train_case(fresh, torch_bn, shape, C, g, out):
    """Training forward and the running-statistics update over three steps."""
    mod, wv, bv = fresh()
    rm, rv = torch.zeros(C), torch.ones(C)
    id = f"train_{len(shape)}d"
    finding = None
    for k in range(3):
        x = torch.randn(shape, generator=g) * 2 + 1
        x0 = x.clone()
        got = output_of(mod, x)
        rm_before, rv_before = rm.clone(), rv.clone()
        exp = torch_bn(x, rm, rv, wv, bv, True)
        if not torch.equal(x, x0):
            finding = fail("input_modified", "输入张量被原地修改了 (the input was modified in place)", x0)
            break
        if not close(got, exp):
            dims = [0] + list(range(2, x.dim()))
            n = x.numel() // C
            shp = [1, C] + [1] * (x.dim() - 2)
            var_u = x.var(dims, unbiased=True).reshape(shp)
            mu = x.mean(dims).reshape(shp)
            cands = {"unbiased_variance": (x - mu) / torch.sqrt(var_u + 1e-5) * wv.reshape(shp) + bv.reshape(shp),
                     "wrong_axis": F.layer_norm(x, x.shape[1:]) * wv.reshape(shp) + bv.reshape(shp)}
            name = which(got, cands)
            msg = {"unbiased_variance": MISTAKE_TEXT["unbiased_variance"],
                   "wrong_axis": "归约轴不对：BatchNorm 对每个通道 c，在 (N, H, W) 上求统计量"}.get(
                name, f"训练模式输出与 F.batch_norm 不一致 (step {k + 1}, n={n})")
            finding = fail(name or id, msg, x, exp, got)
            break
        rmg, rvg = getattr(mod, "running_mean", None), getattr(mod, "running_var", None)
        if not isinstance(rmg, Tensor) or not isinstance(rvg, Tensor):
            finding = fail("running_stats", "找不到 self.running_mean / self.running_var")
            break
        if not (close(rmg, rm) and close(rvg, rv)):
            dims = [0] + list(range(2, x.dim()))
            mean, var_b, var_u = x.mean(dims), x.var(dims, unbiased=False), x.var(dims, unbiased=True)
            cands = {"momentum_reversed": (0.1 * rm_before + 0.9 * mean, 0.1 * rv_before + 0.9 * var_u),
                     "momentum_reversed_biased": (0.1 * rm_before + 0.9 * mean, 0.1 * rv_before + 0.9 * var_b),
                     "running_var_biased": (0.9 * rm_before + 0.1 * mean, 0.9 * rv_before + 0.1 * var_b)}
            name = next((k for k, (a, b) in cands.items() if close(rmg, a) and close(rvg, b)), None)
            msg = {"momentum_reversed": "momentum 用反了 (momentum convention reversed)：PyTorch 是 "
                                        "running = (1-momentum)·running + momentum·batch，momentum=0.1",
                   "momentum_reversed_biased": "momentum 用反了，running_var 也没用无偏估计 (两个错误)",
                   "running_var_biased": "running_var 应该用无偏方差 (unbiased, n/(n-1))，归一化时才用有偏方差 "
                                         "(Ioffe & Szegedy 2015 §3.1)"}.get(name, "滑动统计量的更新与 PyTorch 不一致")
            finding = fail({"momentum_reversed_biased": "momentum_reversed"}.get(name, name or "running_stats"), msg,
                           x, rv, rvg)
            break
    out.append(finding or ok(id, f"训练模式 {len(shape)}D：输出与 3 步滑动统计量都与 PyTorch 一致"))


def _bn_options(impl, C, g, out):
    """Non-default eps and momentum: both must be the ones passed to the constructor."""
    eps, momentum = 1e-2, 0.3
    mod = guarded(impl, C, eps=eps, momentum=momentum)
    rm, rv = torch.zeros(C), torch.ones(C)
    for _ in range(2):
        x = torch.randn(16, C, generator=g) * 0.1 + 0.5       # small variance: eps = 1e-2 vs 1e-5 shows
        rm0, rv0 = rm.clone(), rv.clone()
        got = output_of(mod, x)
        exp = F.batch_norm(x, rm, rv, None, None, training=True, momentum=momentum, eps=eps)
        if not close(got, exp):
            ignored = close(got, F.batch_norm(x, None, None, None, None, training=True, eps=1e-5))
            out.append(fail("eps_ignored" if ignored else "options",
                            MISTAKE_TEXT["eps_ignored"] if ignored else "BatchNorm(C, eps=1e-2, momentum=0.3) 的输出与 F.batch_norm 不一致",
                            x, exp, got))
            return
        rmg, rvg = getattr(mod, "running_mean", None), getattr(mod, "running_var", None)
        if not (isinstance(rmg, Tensor) and isinstance(rvg, Tensor) and close(rmg, rm) and close(rvg, rv)):
            n = x.shape[0]
            default = (0.9 * rm0 + 0.1 * x.mean(0), 0.9 * rv0 + 0.1 * x.var(0))   # momentum 0.1 written in
            ignored = isinstance(rmg, Tensor) and close(rmg, default[0]) and close(rvg, default[1])
            out.append(fail("momentum_ignored" if ignored else "options",
                            "构造时传入的 momentum 没有被使用 (the momentum argument is ignored)：用 self.momentum，不要把 0.1 写死"
                            if ignored else f"BatchNorm(C, momentum={momentum}) 的滑动统计量与 PyTorch 不一致 (n={n})",
                            x, rv, rvg))
            return
    out.append(ok("options", "eps=1e-2、momentum=0.3 时输出与滑动统计量都与 PyTorch 一致"))


def bn_checks(impl) -> list[Finding]:
    out: list[Finding] = []
    g = torch.Generator().manual_seed(1)
    C = 3
    with step(out, "construct"):
        m = guarded(impl, C)
        buffers = dict(m.named_buffers()) if hasattr(m, "named_buffers") else {}
        params = dict(m.named_parameters()) if hasattr(m, "named_parameters") else {}
        sd = m.state_dict() if hasattr(m, "state_dict") else {}
        good_params = set(params) >= {"weight", "bias"} and torch.all(params["weight"] == 1) and torch.all(params["bias"] == 0)
        out.append(ok("params", "weight=1, bias=0，形状 (C,)") if good_params else
                   fail("params", "应有 nn.Parameter self.weight（初值 1）和 self.bias（初值 0），形状 (num_features,)"))
        stats_ok = {"running_mean", "running_var"} <= set(buffers) and {"running_mean", "running_var"} <= set(sd)
        if stats_ok and not ({"running_mean", "running_var"} & set(params)):
            init_ok = torch.all(buffers["running_mean"] == 0) and torch.all(buffers["running_var"] == 1)
            out.append(ok("buffers", "running_mean/running_var 是 buffer，在 state_dict 里") if init_ok else
                       fail("buffers", "running_mean 初值应为 0，running_var 初值应为 1"))
        else:
            out.append(fail("buffers", "滑动统计量应该用 self.register_buffer('running_mean', ...) 注册为 buffer：普通属性不会进 "
                            "state_dict、不会随 .to(device) 移动；nn.Parameter 会被优化器更新 (use register_buffer)"))

    def torch_bn(x, rm, rv, w, b, training, momentum=0.1):
        return F.batch_norm(x, rm, rv, w, b, training=training, momentum=momentum, eps=1e-5)

    def fresh():
        mod = guarded(impl, C)
        wv, bv = torch.randn(C, generator=g) + 1, torch.randn(C, generator=g)
        set_param(mod, "weight", wv)
        set_param(mod, "bias", bv)
        return mod, wv, bv

    # training forward and the running-statistics update over three steps, (N, C) and (N, C, H, W)
    for shape in [(16, C), (4, C, 3, 3)]:
        with step(out, f"train_{len(shape)}d"):
            _bn_train_case(fresh, torch_bn, shape, C, g, out)



    with step(out, "stats_graph"):
        # buffers carry no autograd graph
        mod, wv, bv = fresh()
        x = torch.randn(8, C, generator=g, requires_grad=True)
        output_of(mod, x)
        rmg = getattr(mod, "running_mean", None)
        graph = isinstance(rmg, Tensor) and (rmg.requires_grad or rmg.grad_fn is not None)
        out.append(fail("stats_graph", "running_mean 带着计算图 (autograd graph)：更新时用 torch.no_grad() 或 .detach()，"
                        "否则显存不断增长、反向传播会报错") if graph else ok("stats_graph", "滑动统计量不带计算图"))

    with step(out, "eval_mode"):
        # eval: running statistics, with autograd ON (the d2l is_grad_enabled() bug), and no update
        mod, wv, bv = fresh()
        for _ in range(3):
            output_of(mod, torch.randn(16, C, generator=g) * 2 + 1)
        if hasattr(mod, "eval"):
            mod.eval()
        rm = getattr(mod, "running_mean", torch.zeros(C)).clone()
        rv = getattr(mod, "running_var", torch.ones(C)).clone()
        x = torch.randn(5, C, generator=g)
        with torch.enable_grad():
            got = output_of(mod, x)
        exp = torch_bn(x, rm.clone(), rv.clone(), wv, bv, False)
        if not close(got, exp):
            batch = torch_bn(x, None, None, wv, bv, True)
            name = "mode_from_grad" if close(got, batch) else "eval_forward"
            msg = ("model.eval() 之后仍在用 batch 统计量：模式应该看 self.training，而不是 torch.is_grad_enabled() "
                   "(d2l 的写法；eval 时不一定在 no_grad 里)") if name == "mode_from_grad" else \
                "eval 模式的输出应使用 running_mean/running_var"
            out.append(fail(name, msg, x, exp, got))
        else:
            out.append(ok("eval_mode", "eval 模式（梯度开启时）使用滑动统计量"))
        after = getattr(mod, "running_mean", rm)
        out.append(ok("eval_no_update", "eval 不更新滑动统计量") if isinstance(after, Tensor) and torch.equal(after, rm) else
                   fail("eval_no_update", "eval 模式下滑动统计量被更新了 (running stats must not change in eval)"))
        if hasattr(mod, "train"):
            mod.train()
        with torch.no_grad():
            x = torch.randn(16, C, generator=g) + 3
            got = output_of(mod, x)
        exp = torch_bn(x, None, None, wv, bv, True)
        out.append(ok("no_grad_train", "train 模式下 no_grad 仍用 batch 统计量") if close(got, exp) else
                   fail("no_grad_train", "train 模式下即使在 torch.no_grad() 里也应使用 batch 统计量 (no_grad is not eval)", x, exp, got))

    # a batch of one in training: torch raises; NaN is the wrong answer
    mod, _, _ = fresh()
    try:
        got = guarded(mod, torch.randn(1, C, generator=g))
    except SubmissionError as err:
        if "time limit" in str(err):
            raise
        out.append(ok("batch_of_one", "训练模式下 batch=1 报错（PyTorch 也报 ValueError）"))
    else:
        bad = isinstance(got, Tensor) and not torch.isfinite(got).all()
        out.append(fail("batch_of_one", "训练模式下 batch=1 返回了 NaN：每个通道只有 1 个值，方差为 0。PyTorch 会报错 "
                        "'Expected more than 1 value per channel when training'") if bad else
                   ok("batch_of_one", "训练模式下 batch=1 没有返回 NaN（PyTorch 会直接报错，更好）"))

    with step(out, "options"):
        _bn_options(impl, C, g, out)
    for dt, tol in [(torch.float16, 1e-2), (torch.bfloat16, 3e-2)]:
        id = f"half_{str(dt).replace('torch.', '')}"
        with step(out, id):
            mod, _, _ = fresh()
            if hasattr(mod, "to"):
                mod = mod.to(dt)          # the whole layer in half precision, as model.half() does
            x = (torch.randn(8, C, generator=g) * 2).to(dt)
            got = output_of(mod, x)
            exp = F.batch_norm(x.float(), None, None, mod.weight.detach().float(), mod.bias.detach().float(), True,
                               0.1, 1e-5)
            if got.dtype != dt:
                out.append(fail(id, f"输入是 {dt}，输出 dtype 应与输入相同，实际 {got.dtype} (return the input dtype)", x))
            elif torch.isfinite(got).all() and close(got.float(), exp, tol):
                out.append(ok(id, f"{dt} 输入：dtype 保持、数值正确"))
            else:
                out.append(fail(id, f"{dt} 输入的结果错误或非有限值", x, exp, got))
    return out


# ---------------------------------------------------------------- backward passes (functions)
def backward_checks(fn, which_norm: str) -> list[Finding]:
    out: list[Finding] = []
    g = torch.Generator().manual_seed(2)
    eps = 1e-5
    cases = [(4, 8), (6, 5)] if which_norm != "batchnorm" else [(8, 4), (5, 3)]
    for shape in cases:
        x = (torch.randn(shape, generator=g, dtype=torch.float64) * 2 + 0.5).requires_grad_(True)
        feat = shape[-1] if which_norm != "batchnorm" else shape[1]
        w = (torch.randn(feat, generator=g, dtype=torch.float64) + 1).requires_grad_(True)
        b = torch.randn(feat, generator=g, dtype=torch.float64).requires_grad_(True)
        gy = torch.randn(shape, generator=g, dtype=torch.float64)
        if which_norm == "layernorm":
            y = F.layer_norm(x, (feat,), w, b, eps)
        elif which_norm == "batchnorm":
            y = F.batch_norm(x, None, None, w, b, True, 0.1, eps)
        else:
            y = F.rms_norm(x, (feat,), w, eps)
        (y * gy).sum().backward()
        expected = (x.grad, w.grad) + ((b.grad,) if which_norm != "rmsnorm" else ())
        got = guarded(fn, gy.clone(), x.detach().clone(), w.detach().clone(), eps)
        names = ["grad_x", "grad_weight", "grad_bias"][:len(expected)]
        if not isinstance(got, tuple | list) or len(got) != len(expected):
            out.append(fail("returns", f"应返回 {len(expected)} 个张量 ({', '.join(names)})，实际返回 {short(got)}"))
            return out
        for name, e, r in zip(names, expected, got):
            if not isinstance(r, Tensor) or r.shape != e.shape:
                out.append(fail(f"{name}_{shape[0]}x{shape[1]}", f"{name} 的形状应为 {tuple(e.shape)}", x.detach(), e, r))
            elif not close(r, e, 1e-6):
                hint = ""
                if name == "grad_x" and which_norm != "rmsnorm":
                    hint = "：别忘了均值和方差本身也依赖 x（少了 -mean(g) 和 -x̂·mean(g·x̂) 两项？）"
                out.append(fail(f"{name}_{shape[0]}x{shape[1]}", f"{name} 与 float64 autograd 不一致{hint}", x.detach(), e, r))
            else:
                out.append(ok(f"{name}_{shape[0]}x{shape[1]}", f"{name} 与 autograd 一致（float64, {shape}）"))
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


def deepnorm_constant_checks(fn) -> list[Finding]:
    out: list[Finding] = []
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


def deepnorm_residual_checks(fn) -> list[Finding]:
    """fn(x, fx, alpha) -> LN(alpha * x + fx), LN without affine over the last dim."""
    out: list[Finding] = []
    g = torch.Generator().manual_seed(3)
    x, fx = torch.randn(4, 16, generator=g) * 2, torch.randn(4, 16, generator=g)
    alpha = 2.3
    exp = F.layer_norm(alpha * x + fx, (16,))
    with step(out, "deepnorm_residual"):
        got = guarded(fn, x.clone(), fx.clone(), alpha)
        if not isinstance(got, Tensor) or got.shape != exp.shape:
            out.append(fail("deepnorm_residual", "应返回与 x 同形状的张量", x, exp, got))
        elif close(got, exp):
            out.append(ok("deepnorm_residual", "LN(α·x + G(x))：α 乘在恒等支路 x 上"))
        else:
            cands = {"alpha_on_branch": F.layer_norm(x + alpha * fx, (16,)),
                     "no_norm": alpha * x + fx, "alpha_outside": alpha * F.layer_norm(x + fx, (16,))}
            name = which(got, cands)
            msg = {"alpha_on_branch": "α 乘在了子层输出 G(x) 上（labml 的写法）：DeepNet §4.2 是 LN(α·x + G(x))，"
                                      "放大的是恒等支路，让每层的更新相对变小",
                   "no_norm": "少了 LayerNorm：DeepNorm 是 Post-LN 的变体，加完之后要归一化",
                   "alpha_outside": "α 应在 LN 里面乘 x，而不是乘在 LN 的输出上"}.get(name, "与 LN(α·x + G(x)) 不一致")
            out.append(fail(name or "deepnorm_residual", msg, x, exp, got))
    return out


def block_checks(fn, placement: str) -> list[Finding]:
    """fn(x, sublayer, norm) -> x + sublayer(norm(x)) (pre) or norm(x + sublayer(x)) (post)."""
    out: list[Finding] = []
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
            msg = {"swapped": "写成了另一种位置：Pre-Norm 是 x + F(Norm(x))（恒等支路不经过 Norm），"
                              "Post-Norm 是 Norm(x + F(x))",
                   "no_residual": "少了残差连接 (the residual x + ... is missing)",
                   "norm_on_output": "归一化用了两次：Pre-Norm 的主干 x 不做归一化（最后一层之后才有一个 final norm）"}.get(
                name, "与期望的块输出不一致")
            out.append(fail(name or id, msg, x, exp, got))
    return out


def dyt_checks(impl) -> list[Finding]:
    """DyT(d, alpha_init=0.5): y = weight * tanh(alpha * x) + bias, alpha ONE learnable scalar."""
    out: list[Finding] = []
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
