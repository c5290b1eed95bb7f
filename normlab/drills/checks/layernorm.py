"""The LayerNorm and RMSNorm cards (modules)."""

from __future__ import annotations

import itertools
import math

import torch

from ..report import Finding, SubmissionError
from .diagnosis import measured_findings
from .formulas import FIXED_EPS, Formula, Probe, deviation_findings, imprecise, search
from .keepdim import broadcast_finding, shapes_text
from .messages import ONE_PASS, PRECISION, is_broadcast_error
from .probes import (KIND_WORDS, PROD, Builder, _raised, close, fail, find_bias, find_gain, is_timeout, ok, output_of,
                     set_tensor, step, tensor_kind)
from .properties import measure_module
from .layernorm_production import _ln_default_eps, _ln_half
from . import roles
from .references import _ln_reference

# ---------------------------------------------------------------- LayerNorm / RMSNorm (modules)
def ln_checks(impl, rms: bool = False, out: list[Finding] | None = None) -> list[Finding]:
    kind = "RMSNorm" if rms else "LayerNorm"
    eps0 = 1e-6 if rms else 1e-5
    out = [] if out is None else out
    g = torch.Generator().manual_seed(0)
    build = Builder(impl)
    D = 8
    roles.learn(lambda c, **o: build(c, **o), D, (2, 5, D), -1, (), roles.generator(), running=False)

    with step(out, "construct"):
        _ln_params(build, rms, kind, eps0, D, out)
    if _raised(out, "construct"):
        return out              # nothing else can run: one finding, not the same error once per check

    flat = _ln_layout(build, rms, kind, g, D, out)       # (B, T, D) inputs, or (N, D) when only those run
    if flat is None:
        for note, text in build.notes.items():
            out.append(fail(note, text, level=PROD))
        return out
    sh = (lambda *s: (math.prod(s[:-1]), s[-1])) if flat else (lambda *s: s)       # noqa: E731

    # interview probes: eps 1e-5 (1e-6) and 1e-2, |x| 1e-3 ... 1e3, int normalized_shape, float32
    plan = [("forward", eps0, 3.0, 1.0), ("eps_used", 1e-2, 0.1, 0.05 if not rms else 0.0),
            ("small_inputs", eps0, 1e-3, 0.0), ("large_inputs", eps0, 1e3, 0.0)]
    probes: list[Probe] = []
    problems: list[Finding] = []
    for name, e, scale, offset in plan:
        if (e != eps0 or scale < 0.01) and "eps" in build.ignored:
            continue        # the constructor has no eps: a production note, not an interview probe
        with step(problems, name):
            p = _ln_probe(build, rms, g, name, e, sh(2, 5, D), scale, offset)
            probes.append(p)
            if isinstance(p, Finding):
                problems.append(p)
    probes = [p for p in probes if isinstance(p, Probe)]
    before = len([f for f in out if not f.passed])
    with step(out, "forward"):
        _report_forward(kind, probes, problems, out, rms, D)
        generic = next((f for f in out[before:] if f.id == "forward" and not f.passed), None)
        if generic is not None and imprecise(probes) is not None:      # the formula is right, the arithmetic is not
            generic.id, generic.message = "precision", PRECISION.format(err=imprecise(probes))
        elif generic is not None:     # no known mistake reproduces the output: measure what it does instead
            named = _ln_properties(build, rms, kind, g, sh(2, 5, D))
            if named:
                named[0].example = generic.example        # one counterexample for the combination
                out[out.index(generic):out.index(generic) + 1] = named
    if len([f for f in out if not f.passed]) > before:
        # the formula is wrong: checks that compare values again would repeat it under other names
        for note, text in build.notes.items():
            out.append(fail(note, text, level=PROD))
        return out

    if not rms:
        with step(out, "one_pass_variance"):
            p = _ln_probe(build, rms, g, "large_offset", eps0, sh(2, 4, 16), 1.0, 1e4, tol=2e-2, shape=(16,))
            if isinstance(p, Finding):
                out.append(p)
            elif p.got is None or not close(p.got, p.expected, 2e-2):
                out.append(fail("one_pass_variance", ONE_PASS,
                                p.x_in, p.expected, p.shown))
            else:
                out.append(ok("one_pass_variance", "大偏移 (1e4) 输入下方差仍然准确（两遍法）"))
    with step(out, "gradients"):
        _ln_gradients(build, rms, eps0, g, sh(2, 3, D), out)

    # production: tuple normalized_shape, half precision with an upcast, torch's default eps, names
    with step(out, "tuple_shape", PROD):
        p = _ln_probe(build, rms, g, "tuple_shape", eps0, (3, 4, 6) if not flat else (4, 6), 3.0, 1.0, shape=(4, 6))
        if isinstance(p, Finding):
            p.id, p.level = "tuple_shape", PROD
            out.append(p)
        elif close(p.got, p.expected):
            out.append(ok("tuple_shape", "normalized_shape=(4, 6)（tuple）也与 torch 一致", PROD))
        else:
            out.append(fail("tuple_shape", "normalized_shape=(4, 6) 时应在最后 2 维上归一化，weight 形状 (4, 6)："
                            "用 dims = tuple(range(-len(shape), 0))（面试通常只写最后 1 维，这是工程级要求）",
                            p.x_in, p.expected, p.got, PROD))
    for dt, scale in [(torch.float16, 300.0), (torch.bfloat16, 3.0)]:   # |x|~300: x² > 65504 in float16
        id = f"half_{str(dt).replace('torch.', '')}"
        with step(out, id, PROD):
            _ln_half(build, rms, eps0, g, dt, scale, id, sh(2, 4, D), out)
    with step(out, "default_eps", PROD):
        _ln_default_eps(build, rms, g, sh(2, 8, D), out)
    for note, text in build.notes.items():
        out.append(fail(note, text, level=PROD))
    return out


def _ln_params(build, rms, kind, eps, D, out):
    """Construction, parameter names, shapes and initial values."""
    m = build(D, eps=eps)
    gname, w = find_gain(m, D)
    if w is None:
        out.append(fail("params_weight", f"{kind}({D}) 应有可学习的 γ：形状 ({D},)、初值全 1 的 nn.Parameter self.weight。"))
    elif not w.requires_grad:
        out.append(fail("params_weight", f"self.{gname} 不可学习 (requires_grad=False)：用 nn.Parameter"))
    elif _uninitialised(build, D, eps, w):
        out.append(fail("params_weight", f"self.{gname} 没有确定的初值（两次构造得到的值不同或不是有限数：torch.empty 不初始化）"
                        "：torch 的 γ 初值全 1，用 torch.ones", got=w))
    elif torch.all(w == 0):
        out.append(fail("params_weight", f"self.{gname} 初值全 0：torch 的 γ 初值全 1（Gemma 存 γ−1，配合 (1 + weight) 使用）"))
    elif not torch.all(w == 1):
        out.append(fail("params_weight", f"self.{gname} 初值应全为 1", got=w))
    else:
        out.append(ok("params_weight", f"γ (self.{gname})：{D} 个元素，初值 1"))
    params = dict(m.named_parameters()) if isinstance(m, torch.nn.Module) else {}
    bname = None
    if rms:
        extra = [n for n in params if n != gname]
        out.append(ok("no_bias", "没有 β (RMSNorm has no bias)") if not extra else
                   fail("no_bias", f"RMSNorm 只有 γ，没有 β 或其它参数；多出了 {extra} (RMSNorm keeps only the gain γ)"))
    else:
        bname, b = find_bias(m, D, gname)
        good = b is not None and b.requires_grad and torch.all(b == 0)
        kind_b = tensor_kind(m, bname)
        why = (f"self.{bname} 是 {KIND_WORDS[kind_b]}，不是 nn.Parameter：" if b is not None and kind_b != "parameter" else "")
        out.append(ok("params_bias", f"β (self.{bname})：{D} 个元素，初值 0") if good else
                   fail("params_bias", f"{why}LayerNorm({D}) 应有形状 ({D},)、初值全 0 的可学习 β (nn.Parameter self.bias)。"))
    # production: the names and shapes torch's state_dict uses
    want = ["weight"] if rms else ["weight", "bias"]
    have = [n for n in (gname, bname) if n]
    if have and have != want[:len(have)]:
        out.append(fail("param_names", f"参数名是 {have}：torch 的 state_dict 用 {want}，换成 torch 的模块（或加载它的权重）"
                        "时键对不上 (state_dict keys differ)", level=PROD))
    if w is not None and tuple(w.shape) != (D,):
        out.append(fail("param_shapes", f"γ 的形状应为 ({D},)，你的是 {tuple(w.shape)}", level=PROD))
    if not isinstance(m, torch.nn.Module):
        out.append(fail("module", "不是 nn.Module：没有 .parameters()/.to()/state_dict，不能放进模型里", level=PROD))


def _uninitialised(build, D, eps, w) -> bool:
    """Whether γ's initial value is left to chance (torch.empty): not finite, or different in a second build."""
    if not bool(torch.isfinite(w).all()):
        return True
    try:
        again = find_gain(build(D, eps=eps), D)[1]
    except SubmissionError:
        return False
    return again is not None and not torch.equal(again.detach(), w.detach())


def _ln_probe(build, rms, g, name, eps, shape_in, scale, offset, tol=1e-4, shape=None):
    """Build with ``eps``, set random γ/β, run on one input; a Probe, or a Finding when the
    submission's output cannot be compared (modified input, wrong shape, not a tensor)."""
    shape = shape or shape_in[-1:]
    size = shape if len(shape) > 1 else shape[0]
    mod = build(size, eps=eps)
    numel = math.prod(shape)
    gname, w = find_gain(mod, numel)
    bname, b = (None, None) if rms else find_bias(mod, numel, gname)
    wv = torch.randn(shape, generator=g) + 1
    bv = torch.randn(shape, generator=g)
    if w is not None:
        set_tensor(w, wv)
    if b is not None:
        set_tensor(b, bv)
    x = torch.randn(shape_in, generator=g) * scale + offset
    x0 = x.clone()
    exp = _ln_reference(x, shape, wv, bv, eps, rms)
    p = Probe(name, x.double(), wv.double(), None if rms else bv.double(), eps, None, exp, x0)
    got = output_of(mod, x)
    if not torch.equal(x, x0):
        return fail("input_modified", "输入张量被原地修改了 (the input was modified in place)：不要对 x 用 x -= ... 之类的原地操作", x0)
    if got.shape != exp.shape:
        return fail(name, f"输出形状应为 {tuple(exp.shape)}，实际 {tuple(got.shape)} (output shape)", x0, exp, got)
    if got.dtype != x.dtype:
        return fail(name, f"输入是 float32，输出 dtype 是 {got.dtype} (return the input dtype)", x0)
    p.got, p.raw = got.detach().double(), got.detach()
    return p


def _report_forward(kind, probes, problems, out, rms, D):
    """One finding for the interview probes: all right, or the named mistakes."""
    said: set[str] = set()
    for f in problems:              # the same error on several probes: say it once
        key = f.message.split(" (line")[0]
        if key not in said:
            said.add(key)
            out.append(f)
    bad = [p for p in probes if not close(p.got, p.expected)]
    if not bad:
        if probes and not problems:
            out.append(ok("forward", "eps=1e-5/1e-2、|x|≈1e-3…1e3 的输入都与 torch 一致（最后 1 维，float32）"))
        return
    rank = bad[0].x.dim()
    correct = Formula(center=not rms, div="n", eps="inside", root=True, gain="w", bias=not rms, axes=(rank - 1,))
    fixed = [("fixed", v) for v in FIXED_EPS]
    alts = {"center": [rms], "div": ["n-1", "1"], "eps": ["outside", "none", *fixed], "root": [False],
            "gain": ["1+w", "none"], "bias": [False] if not rms else [],
            "axes": [a for r in range(1, rank + 1) for a in itertools.combinations(range(rank), r) if a != (rank - 1,)]}
    found = search(probes, correct, alts)
    if found:
        out.extend(deviation_findings(kind, found[0], found[1], correct, probes, rank))
        return
    p = bad[0]
    if not torch.isfinite(p.got).all():
        out.append(fail("forward", "输出里有 NaN 或 inf (non-finite output)：检查除法的分母和 ε", p.x_in, p.expected, p.shown))
        return
    names = [q.name for q in bad]
    hint = ""
    if set(names) <= {"eps_used", "small_inputs"}:
        hint = "：只在 ε 起作用的输入上不一致（eps=1e-2，或 |x|≈1e-3）——检查 ε 的用法"
    elif names == ["large_inputs"]:
        hint = "：只在 |x|≈1e3 时不一致——数值溢出或精度问题？"
    ref = "F.rms_norm" if rms else "F.layer_norm"
    out.append(fail("forward", f"输出与 torch 的 {ref} 不一致 (values differ)，不一致的输入：{', '.join(names)}{hint}",
                    p.x_in, p.expected, p.shown))


def _ln_layout(build, rms, kind, g, D, out) -> bool | None:
    """Which input layouts run: (B, T, D) as the probes use, else (N, D). A crash on one layout is one
    finding and the checks go on with the other; None when neither runs (one finding)."""
    errors = {}
    for shape in ((2, 5, D), (10, D)):
        try:
            mod = build(D, eps=1e-5 if not rms else 1e-6)
            output_of(mod, torch.randn(shape, generator=g))
        except SubmissionError as err:
            if is_timeout(err):
                raise
            errors[shape] = str(err)
            continue
        if shape == (2, 5, D):
            try:                    # (N, D) too: torch's LayerNorm takes any leading dimensions
                output_of(build(D, eps=1e-5 if not rms else 1e-6), torch.randn(10, D, generator=g))
            except SubmissionError as err:
                if is_timeout(err):
                    raise
                out.append(fail("layouts", f"(N, D) 形状的输入报错：{str(err)[:160]}。torch 的 {kind} 接受任意前置维度"
                                "（(N, D)、(B, T, D) ……），在最后一维归一化", level=PROD))
            return False
        break
    text = next(iter(errors.values()))
    if is_broadcast_error(text):
        square = _ln_square(build, rms, g, D)
        try:
            shapes = shapes_text(build(D), (2, 5, D))
        except SubmissionError:
            shapes = ""
        f = broadcast_finding(text, shapes=shapes)
        if f.id == "keepdim_missing":
            f.message += f"。(B, T, D) 输入报错：{text[:120]}"
            f.example = fail("", "", *square).example
        out.append(f)
        if len(errors) == 2:
            return None
    if len(errors) == 2:
        out.append(fail("forward", f"{kind} 在 (B, T, D) 和 (N, D) 输入上都报错了：{text}"))
        return None
    out.append(fail("layout", f"(B, T, D) 形状的输入报错：{text[:160]}。{kind} 对任意前置维度都在最后一维归一化"
                    "（Transformer 里输入是 (batch, seq, d)）；其余检查在 (N, D) 输入上进行"))
    return True


def _ln_square(build, rms, g, D):
    """A square (D, D) input, where a missing keepdim broadcasts without an error: (input, expected, got)."""
    x = torch.randn(D, D, generator=g) * 2 + 1
    try:
        mod = build(D, eps=1e-5)
        got = output_of(mod, x)
    except SubmissionError:
        return ()
    gname, w = find_gain(mod, D)
    bname, b = (None, None) if rms else find_bias(mod, D, gname)
    wv = torch.ones(D) if w is None else w.detach().flatten()
    bv = torch.zeros(D) if b is None else b.detach().flatten()
    exp = _ln_reference(x, (D,), wv, bv, 1e-5, rms)
    return () if close(got, exp) else (x, exp, got)


def _ln_properties(build, rms, kind, g, shape) -> list[Finding]:
    """The general path: properties of the output measured as a black box (properties.py), each one
    that differs from torch's as a finding (diagnosis.py)."""
    D = shape[-1]
    eps = None if "eps" in build.ignored else 1e-2
    def measure():
        mod = build(D) if eps is None else build(D, eps=eps)
        gname, w = find_gain(mod, D)
        bname, b = (None, None) if rms else find_bias(mod, D, gname)
        x = torch.randn(shape, generator=g) * 2 + torch.randn(shape[:-1] + (1,), generator=g) * 1.5
        return measure_module(mod, x, w, b, D, (D,), g, (len(shape) - 1,), eps)

    return measured_findings(kind, measure, (len(shape) - 1,), tuple(shape), eps)


def _ln_gradients(build, rms, eps, g, shape, out):
    """Gradients with respect to x and γ (and β for LayerNorm) against autograd of torch's function."""
    D = shape[-1]
    mod = build(D, eps=eps)
    gname, w = find_gain(mod, D)
    bname, b = (None, None) if rms else find_bias(mod, D, gname)
    wv, bv = torch.randn(D, generator=g) + 1, torch.randn(D, generator=g)
    if w is not None:
        set_tensor(w, wv)
    if b is not None:
        set_tensor(b, bv)
    x = (torch.randn(shape, generator=g) * 2).requires_grad_(True)
    gy = torch.randn(shape, generator=g)
    y = output_of(mod, x)
    what = "x、γ" if rms else "x、γ、β"
    try:
        (y * gy).sum().backward()
    except RuntimeError as err:
        out.append(fail("gradients", f"反向传播失败 (backward failed): {err}"))
        return
    xr, wr = x.detach().double().requires_grad_(True), wv.double().requires_grad_(True)
    br = bv.double().requires_grad_(True)
    yr = _ln_reference(xr, (D,), wr, br, eps, rms)
    (yr * gy.double()).sum().backward()
    if not close(y.detach(), yr.detach()):
        out.append(fail("gradients", "前向输出已经不一致，梯度无法比较（先修正上面的前向错误）",
                        x.detach(), yr.detach(), y.detach()))
        return
    # each gradient on its own, and for a wrong one the cause the submission shows (never a guess)
    causes, ex = [], None
    for name, t, ref, sym in ((gname, w, wr, "γ"), (bname, b, br, "β"))[:1 if rms else 2]:
        if t is None:
            continue
        kind = tensor_kind(mod, name)      # a plain object's tensors (makemore style) are its parameters
        if not t.requires_grad or (kind != "parameter" and isinstance(mod, torch.nn.Module)):
            ex = ex or (None, ref.grad, None)
            causes.append(f"self.{name} ({sym}) 是 {KIND_WORDS[kind] if kind != 'parameter' else 'requires_grad=False 的参数'}，"
                          "不是可学习的 nn.Parameter：它没有梯度，优化器也不会更新它；用 "
                          f"self.{name} = nn.Parameter(...)")
        elif t.grad is None or not close(t.grad.flatten(), ref.grad):
            ex = ex or (None, ref.grad, t.grad)
            causes.append(f"对 {sym} 的梯度不一致" + ("（没有梯度：前向里 self." + name + " 被 .detach()/.data 了）"
                                                     if t.grad is None else ""))
    if x.grad is None or not close(x.grad, xr.grad):
        ex = (x.detach(), xr.grad, x.grad)
    if x.grad is None:
        causes.append("x 没有梯度：输出和 x 的计算图断了（前向里对 x 用了 .detach()、.data、.numpy() 或 torch.tensor(...)）")
    elif not close(x.grad, xr.grad):
        xd, wd = x.detach().double(), wv.double()
        num = xd if rms else xd - xd.mean(-1, keepdim=True)
        const = gy.double() * wd / torch.sqrt(num.pow(2).mean(-1, keepdim=True) + eps)
        causes.append("对 x 的梯度相当于把均值和方差当成常数：前向里的统计量被 .detach() 了（或在 torch.no_grad() 里算的），"
                      "梯度只剩 γ·g/σ；统计量也依赖 x，不要截断" if close(x.grad, const) else "对 x 的梯度不一致")
    out.append(fail("gradients", f"梯度与 autograd 不一致 (gradients differ)：{'；'.join(causes)}", *ex)
               if causes else ok("gradients", f"对 {what} 的梯度与 autograd 一致"))
