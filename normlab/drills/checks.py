"""The checks behind ``drills.check``: each compares the learner's code with torch's own
functions (F.layer_norm, F.rms_norm, F.batch_norm, autograd in float64) on several probes
(eps 1e-5 and 1e-2, |x| from 1e-3 to 1e3) and, when they differ, searches the known wrong
formulas *and their combinations* (unbiased variance x eps outside the root x no root x
(1 + weight) x every subset of reduction axes ...) for the one that reproduces the output, so
the report names the mistake. Every finding has a level: ``interview`` (the formula and its
semantics) or ``production`` (a drop-in replacement for the torch module)."""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor

from .report import Finding, SubmissionError, guarded, short

Check = Callable[[object], Finding]
PROD = "production"


def close(a: Tensor, b: Tensor, tol: float = 1e-4) -> bool:
    return (isinstance(a, Tensor) and isinstance(b, Tensor) and a.shape == b.shape
            and bool(torch.allclose(a.double(), b.double(), atol=tol, rtol=tol)))


def which(got: Tensor, candidates: dict[str, Tensor], tol: float = 1e-4) -> str | None:
    """Name of the first wrong formula that reproduces the learner's output, if any."""
    for name, value in candidates.items():
        if close(got, value, tol):
            return name
    return None


def fail(id: str, message: str, x: Tensor | None = None, expected: object = None, got: object = None,
         level: str = "interview") -> Finding:
    example = {}
    if x is not None:
        example["input"] = short(x)
    if expected is not None:
        example["expected"] = short(expected)
    if got is not None:
        example["got"] = short(got)
    return Finding(id, False, message, example, level)


def ok(id: str, message: str, level: str = "interview") -> Finding:
    return Finding(id, True, message, {}, level)


def _raised(out: list[Finding], id: str) -> bool:
    return any(f.id == id and not f.passed and f.message.startswith("你的代码报错了") for f in out)


class _Skip(Exception):
    """Leave a step without a finding (it would only repeat one already made)."""


def is_timeout(err: BaseException) -> bool:
    return "time limit" in str(err)


@contextmanager
def step(out: list[Finding], id: str, level: str = "interview"):
    """One group of checks: if the learner's code raises inside it (or breaks the check), record
    that as a finding of this step and go on with the next (a timeout stops everything: the code
    is likely to hang again; ``drills.check`` turns it into a finding and keeps the rest)."""
    try:
        yield
    except _Skip:
        pass
    except SubmissionError as err:
        if is_timeout(err):
            raise
        out.append(Finding(id, False, f"你的代码报错了 (your code raised): {err}", {}, level))
    except Exception as err:  # noqa: BLE001 - e.g. an attribute of the wrong type broke a check
        out.append(Finding(id, False, f"检查无法进行 (the submission broke this check): {type(err).__name__}: {err}",
                           {}, level))


def output_of(module, x: Tensor) -> Tensor:
    out = guarded(module, x)
    if isinstance(out, tuple | list) and out and isinstance(out[0], Tensor):
        out = out[0]                       # a forward that also returns its statistics
    if not isinstance(out, Tensor):
        raise SubmissionError(f"forward 应返回 Tensor，实际返回 {type(out).__name__} (forward must return a Tensor)")
    return out


# ---------------------------------------------------------------- building and inspecting a submission
GAIN_NAMES = ("weight", "gamma", "g", "scale", "a_2", "w", "gain")
BIAS_NAMES = ("bias", "beta", "b", "b_2", "shift", "offset")
MEAN_NAMES = ("running_mean", "moving_mean", "run_mean", "mean_running", "avg_mean", "ema_mean")
VAR_NAMES = ("running_var", "moving_var", "run_var", "var_running", "avg_var", "ema_var")
EPS_NAMES = ("eps", "epsilon", "variance_epsilon")


def tensors_of(m) -> dict[str, Tensor]:
    """Every tensor attribute of a module (its own first, then those of submodules, by dotted
    name: a class that wraps nn.LayerNorm) or of a plain object (makemore-style classes)."""
    found: dict[str, Tensor] = {}
    if isinstance(m, torch.nn.Module):
        found.update({n: p for n, p in m.named_parameters(recurse=False)})
        found.update({n: b for n, b in m.named_buffers(recurse=False) if b is not None})
    for n, v in getattr(m, "__dict__", {}).items():
        if isinstance(v, Tensor) and n not in found:
            found[n] = v
    if isinstance(m, torch.nn.Module):
        for n, p in m.named_parameters():
            found.setdefault(n, p)
        for n, b in m.named_buffers():
            if b is not None:
                found.setdefault(n, b)
    return found


def leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def find_tensor(m, names: tuple[str, ...], numel: int, exclude: tuple[str, ...] = ()) -> tuple[str | None, Tensor | None]:
    ts = tensors_of(m)
    for n in names:
        for full, t in ts.items():
            if leaf(full) == n and t.numel() == numel and full not in exclude:
                return full, t
    return None, None


def find_gain(m, numel: int):
    name, t = find_tensor(m, GAIN_NAMES, numel)
    if t is None:       # an unusual name: the first learnable tensor of the right size
        for n, v in tensors_of(m).items():
            if v.numel() == numel and v.requires_grad and leaf(n) not in BIAS_NAMES:
                return n, v
    return name, t


def find_bias(m, numel: int, gain_name: str | None):
    name, t = find_tensor(m, BIAS_NAMES, numel, exclude=(gain_name or "",))
    if t is None:
        for n, v in tensors_of(m).items():
            if v.numel() == numel and v.requires_grad and n != gain_name:
                return n, v
    return name, t


def find_stats(m, numel: int):
    (mn, mt), (vn, vt) = find_tensor(m, MEAN_NAMES, numel), find_tensor(m, VAR_NAMES, numel)
    ts = tensors_of(m)
    if mt is None:
        mn, mt = next(((n, v) for n, v in ts.items() if "mean" in leaf(n).lower() and v.numel() == numel), (None, None))
    if vt is None:
        vn, vt = next(((n, v) for n, v in ts.items() if "var" in leaf(n).lower() and v.numel() == numel), (None, None))
    return mn, mt, vn, vt


def set_tensor(t: Tensor, value: Tensor) -> None:
    with torch.no_grad():
        t.copy_(value.reshape(t.shape).to(t.dtype))


def set_param(module, name: str, value: Tensor) -> None:
    p = getattr(module, name, None)
    if not isinstance(p, torch.Tensor):
        raise SubmissionError(f"找不到参数 self.{name} (parameter {name!r} missing)")
    set_tensor(p, value)


def set_mode(m, training: bool) -> None:
    if isinstance(m, torch.nn.Module):
        m.train(training)
    elif hasattr(m, "training"):
        m.training = training


class Builder:
    """Builds the submission as ``impl(size, eps=..., momentum=...)``. When its constructor differs
    from torch's, the closest call that works: only the options its signature names, the others
    set as attributes when it has them, a required ``num_dims``-like argument filled with the
    layout's rank; each deviation is kept as a production note. Options it cannot take at all
    are in ``ignored`` (their interview probes are skipped)."""

    def __init__(self, impl):
        self.impl = impl
        self.notes: dict[str, str] = {}
        self.ignored: set[str] = set()
        try:
            params = list(inspect.signature(impl).parameters.values())
        except (TypeError, ValueError):
            params = None
        self.params = params

    def __call__(self, size, rank: int | None = None, **opts):
        if self.params is None:
            return guarded(self.impl, size, **opts)
        empty = inspect.Parameter.empty
        params = [p for p in self.params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        names = {p.name for p in params}
        varkw = any(p.kind == p.VAR_KEYWORD for p in self.params)
        option_names = set(EPS_NAMES) | {"momentum"}
        kwargs, left = {}, {}
        for k, v in opts.items():
            alias = next((n for n in ((k,) + (EPS_NAMES if k == "eps" else ())) if n in names), None)
            if alias is not None:
                kwargs[alias] = v
            elif varkw:
                kwargs[k] = v
            else:
                left[k] = v
        # the size goes first, unless the first parameter is an option (e.g. MyBN(momentum, eps, num_features))
        size_param = params[0] if params else None
        positional = [size]
        if size_param is not None and size_param.name in option_names:
            size_param = next((p for p in params if p.name not in option_names), None)
            if size_param is not None and size_param.kind != size_param.POSITIONAL_ONLY:
                kwargs[size_param.name] = size
                positional = []
                self.note(f"构造函数的第一个参数是 {params[0].name}：torch 的第一个参数是特征数")
        ok_to_call = True
        for p in params:
            if p is size_param or p.name in kwargs or p.default is not empty:
                continue
            if p.kind == p.POSITIONAL_ONLY:
                ok_to_call = False
            elif p.name in EPS_NAMES:
                kwargs[p.name] = 1e-5
            elif p.name == "momentum":
                kwargs[p.name] = 0.1
            elif "dim" in p.name.lower() or "rank" in p.name.lower():
                kwargs[p.name] = rank or 2
            else:
                ok_to_call = False      # an argument we cannot guess: let the call raise and say so
            self.note(f"构造函数需要额外的参数 {p.name}（torch 只要特征数和关键字参数）")
        m = guarded(self.impl, *positional, **kwargs) if ok_to_call else guarded(self.impl, size, **kwargs)
        for k, v in left.items():
            target = next((n for n in (EPS_NAMES if k == "eps" else (k,)) if hasattr(m, n)), None)
            if target is None:
                self.ignored.add(k)
            else:
                try:
                    setattr(m, target, v)
                except Exception:  # noqa: BLE001
                    self.ignored.add(k)
            self.note(f"构造函数不接受 {k}= 参数（torch 的模块接受）" + ("，值是写死的" if k in self.ignored else ""))
        return m

    def note(self, text: str) -> None:
        """Production note 'signature': the constructor differs from torch's (said once per point)."""
        have = self.notes.get("signature", "")
        if text not in have:
            self.notes["signature"] = (have.replace(" (the constructor differs from torch's)", "") + "；" + text
                                       if have else text) + " (the constructor differs from torch's)"


# ---------------------------------------------------------------- the formula family and its search
@dataclass
class Probe:
    """One input the submission ran on, with everything a candidate formula needs."""
    name: str
    x: Tensor                      # float64 copy of the input
    w: Tensor | None               # gain as set in the module, broadcast-ready (float64)
    b: Tensor | None
    eps: float
    got: Tensor | None = None      # the submission's output (float64), None if it raised
    expected: Tensor | None = None
    x_in: Tensor | None = None     # the input as given (for the counterexample)
    cache: dict = field(default_factory=dict)


# dimension -> (correct value is given per norm), alternatives, and the finding each alternative is
FIXED_EPS = (1e-5, 1e-6, 1e-8)


@dataclass(frozen=True)
class Formula:
    center: bool
    div: str          # "n" | "n-1" | "1"
    eps: object       # "inside" | "outside" | "none" | ("fixed", value)
    root: bool
    gain: str         # "w" | "1+w" | "none"
    bias: bool
    axes: tuple[int, ...]

    def evaluate(self, p: Probe) -> Tensor:
        key = (self.axes, self.center, self.div)
        if key not in p.cache:
            x = p.x
            n = math.prod(x.shape[a] for a in self.axes)
            num = x - x.mean(self.axes, keepdim=True) if self.center else x
            s = num.pow(2).sum(self.axes, keepdim=True)
            d = {"n": n, "n-1": n - 1, "1": 1}[self.div]
            p.cache[key] = (num, s / d)
        num, stat = p.cache[key]
        if self.eps == "inside":
            e = p.eps
        elif self.eps == "none" or self.eps == "outside":
            e = 0.0
        else:
            e = self.eps[1]
        if self.root:
            den = torch.sqrt(stat + e)
            if self.eps == "outside":
                den = den + p.eps
        else:
            den = stat + (p.eps if self.eps == "outside" else e)
        y = num / den
        if self.gain == "w":
            y = y * p.w
        elif self.gain == "1+w":
            y = y * (1 + p.w)
        if self.bias and p.b is not None:
            y = y + p.b
        return y


def search(probes: list[Probe], correct: Formula, alternatives: dict[str, list], max_dev: int = 3,
           tol: float = 1e-4) -> tuple[Formula, list[str]] | None:
    """The formula with the fewest deviations from ``correct`` that reproduces every probe's
    output: combinations of up to ``max_dev`` known mistakes, including every subset of axes."""
    probes = [p for p in probes if p.got is not None and p.expected is not None and p.got.shape == p.expected.shape]
    if not probes:
        return None
    dims = [d for d in alternatives if alternatives[d]]
    for t in (tol, 20 * tol):      # float32 submissions against float64 candidates: a looser second pass
        for k in range(1, max_dev + 1):
            for chosen in itertools.combinations(dims, k):
                for values in itertools.product(*(alternatives[d] for d in chosen)):
                    change = dict(zip(chosen, values))
                    if change.get("root") is False and change.get("eps") == "outside":
                        continue
                    cand = Formula(**{**correct.__dict__, **change})
                    if all(close(p.got, cand.evaluate(p), t) for p in probes):
                        return cand, list(chosen)
    return None


def axes_text(axes: tuple[int, ...], rank: int) -> str:
    return "dim=(" + ", ".join(str(a) for a in axes) + ("," if len(axes) == 1 else "") + ")"


def deviation_findings(kind: str, cand: Formula, changed: list[str], correct: Formula, probes: list[Probe],
                       rank: int) -> list[Finding]:
    """One finding per mistake in the formula that reproduced the output (ids merged)."""
    texts: dict[str, str] = {}
    for d in changed:
        v = getattr(cand, d)
        if d == "center":
            if kind == "RMSNorm":
                texts["centered"] = "RMSNorm 不减均值 (no mean subtraction)：y = x / sqrt(mean(x²)+ε) · γ"
            else:
                texts["not_centered"] = "没有减均值 (the mean is not subtracted)：LayerNorm 是 (x−μ)/sqrt(σ²+ε)"
        elif d == "div":
            if v == "n-1":
                texts["unbiased_variance"] = ("用了无偏方差 (unbiased variance, 除以 n−1；torch.var/torch.std 的默认)。"
                                              "归一化用有偏方差 (biased, 除以 n)：x.var(dim, unbiased=False) 或 ((x−μ)²).mean(dim)"
                                              if kind != "RMSNorm" else
                                              "RMS 用的是平方和除以 n−1：应为 mean(x²)，即除以 n")
            else:
                texts["sum_not_mean"] = ("用了平方和而不是平均 (sum instead of mean)：x.norm(dim) 是 sqrt(Σx²)，"
                                         "要除以 sqrt(n)，或直接用 x.pow(2).mean(dim)")
        elif d == "eps":
            if v == "outside":
                texts["eps_outside_root"] = ("ε 放在了根号外 (eps outside the square root)：应为 (x−μ)/sqrt(σ²+ε)，"
                                             "不是 (x−μ)/(σ+ε)" if kind != "RMSNorm" else
                                             "ε 放在了根号外：PyTorch 和 LLaMA 都是 x / sqrt(mean(x²) + ε)")
            elif v == "none":
                texts["eps_missing"] = "公式里没有 ε (eps missing)：方差很小时会除以 0；应为 sqrt(var + self.eps)"
            else:
                texts["eps_ignored"] = (f"构造时传入的 eps 没有被使用 (the eps argument is ignored)：传入 eps=1e-2 时，"
                                        f"输出相当于 eps={v[1]:g}。用 self.eps，不要把常数写死")
        elif d == "root":
            texts["no_sqrt"] = "除以了方差而不是标准差 (no square root)：分母应为 sqrt(var + ε)"
        elif d == "gain":
            texts["one_plus_weight" if v == "1+w" else "no_affine"] = (
                "乘的是 (1 + weight)（Gemma 的写法，weight 初值 0）：torch 的 RMSNorm/LayerNorm 乘 weight 本身（初值 1），"
                "两者的 state_dict 不能互换 (Gemma-style (1 + weight) gain)" if v == "1+w" else
                "没有乘 γ (missing the affine weight)")
        elif d == "bias":
            texts["no_affine"] = (texts.get("no_affine", "") + "；" if "no_affine" in texts else "") + "没有加 β (missing the bias)"
        elif d == "axes":
            want = ("最后 1 维 (dim=-1)" if kind != "BatchNorm" else
                    f"{axes_text(correct.axes, rank)}（每个通道在 batch 和空间维上）")
            texts["wrong_axis"] = (f"归约轴不对 (wrong reduction axes)：你在 {axes_text(v, rank)} 上求统计量；"
                                   f"{kind} 应在 {want}（输入形状 {tuple(probes[0].x.shape)}）")
    both = "（同时有 " + str(len(texts)) + " 处错误）" if len(texts) > 1 else ""
    p = next((q for q in probes if q.got is not None and q.expected is not None and not close(q.got, q.expected)),
             probes[0])
    found = [fail(i, t + both) for i, t in texts.items()]
    if found:       # one counterexample for the combination, on its first finding
        found[0] = fail(found[0].id, found[0].message, p.x_in if p.x_in is not None else p.x, p.expected, p.got)
    return found


# ---------------------------------------------------------------- LayerNorm / RMSNorm (modules)
MISTAKE_TEXT = {
    "eps_ignored": "构造时传入的 eps 没有被使用 (the eps argument is ignored)：用 self.eps，不要把 1e-5 写死",
}


def ln_checks(impl, rms: bool = False, out: list[Finding] | None = None) -> list[Finding]:
    kind = "RMSNorm" if rms else "LayerNorm"
    eps0 = 1e-6 if rms else 1e-5
    out = [] if out is None else out
    g = torch.Generator().manual_seed(0)
    build = Builder(impl)
    D = 8

    with step(out, "construct"):
        _ln_params(build, rms, kind, eps0, D, out)
    if _raised(out, "construct"):
        return out              # nothing else can run: one finding, not the same error once per check

    # interview probes: eps 1e-5 (1e-6) and 1e-2, |x| 1e-3 ... 1e3, int normalized_shape, float32
    plan = [("forward", eps0, 3.0, 1.0), ("eps_used", 1e-2, 0.1, 0.05 if not rms else 0.0),
            ("small_inputs", eps0, 1e-3, 0.0), ("large_inputs", eps0, 1e3, 0.0)]
    probes: list[Probe] = []
    problems: list[Finding] = []
    for name, e, scale, offset in plan:
        if (e != eps0 or scale < 0.01) and "eps" in build.ignored:
            continue        # the constructor has no eps: a production note, not an interview probe
        with step(problems, name):
            p = _ln_probe(build, rms, g, name, e, (2, 5, D), scale, offset)
            probes.append(p)
            if isinstance(p, Finding):
                problems.append(p)
    probes = [p for p in probes if isinstance(p, Probe)]
    before = len([f for f in out if not f.passed])
    with step(out, "forward"):
        _report_forward(kind, probes, problems, out, rms, D)
    if len([f for f in out if not f.passed]) > before:
        # the formula is wrong: checks that compare values again would repeat it under other names
        for note, text in build.notes.items():
            out.append(fail(note, text, level=PROD))
        return out

    if not rms:
        with step(out, "one_pass_variance"):
            p = _ln_probe(build, rms, g, "large_offset", eps0, (2, 4, 16), 1.0, 1e4, tol=2e-2, shape=(16,))
            if isinstance(p, Finding):
                out.append(p)
            elif p.got is None or not close(p.got, p.expected, 2e-2):
                out.append(fail("one_pass_variance", "输入带大偏移 (offset 1e4) 时结果错误：E[x²]−E[x]² 的单遍方差 "
                                "(one-pass variance) 在 float32 下发生灾难性抵消；先减均值再平方 (two-pass)",
                                p.x_in, p.expected, p.got))
            else:
                out.append(ok("one_pass_variance", "大偏移 (1e4) 输入下方差仍然准确（两遍法）"))
    with step(out, "gradients"):
        _ln_gradients(build, rms, eps0, g, D, out)

    # production: tuple normalized_shape, half precision with an upcast, torch's default eps, names
    with step(out, "tuple_shape", PROD):
        p = _ln_probe(build, rms, g, "tuple_shape", eps0, (3, 4, 6), 3.0, 1.0, shape=(4, 6))
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
            _ln_half(build, rms, eps0, g, dt, scale, id, D, out)
    with step(out, "default_eps", PROD):
        _ln_default_eps(build, rms, g, D, out)
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
        out.append(ok("params_bias", f"β (self.{bname})：{D} 个元素，初值 0") if good else
                   fail("params_bias", f"LayerNorm({D}) 应有形状 ({D},)、初值全 0 的可学习 β (nn.Parameter self.bias)。"))
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


def _ln_reference(x, shape, wv, bv, e, rms):
    """F.layer_norm / F.rms_norm in float64, written out (torch's float64 CPU kernels take ~25 ms a
    call on this machine; tests/test_drills.py checks these against torch's functions)."""
    x = x.double()
    dims = tuple(range(-len(shape), 0))
    num = x if rms else x - x.mean(dims, keepdim=True)
    y = num / torch.sqrt(num.pow(2).mean(dims, keepdim=True) + e) * wv.double()
    return y if rms else y + bv.double()


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
    p.got = got.detach().double()
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
    correct = Formula(center=not rms, div="n", eps="inside", root=True, gain="w", bias=not rms, axes=(2,))
    fixed = [("fixed", v) for v in FIXED_EPS]
    alts = {"center": [rms], "div": ["n-1", "1"], "eps": ["outside", "none", *fixed], "root": [False],
            "gain": ["1+w", "none"], "bias": [False] if not rms else [],
            "axes": [a for r in (1, 2, 3) for a in itertools.combinations(range(3), r) if a != (2,)]}
    found = search(probes, correct, alts)
    if found:
        out.extend(deviation_findings(kind, found[0], found[1], correct, probes, 3))
        return
    p = bad[0]
    if not torch.isfinite(p.got).all():
        out.append(fail("forward", "输出里有 NaN 或 inf (non-finite output)：检查除法的分母和 ε", p.x_in, p.expected, p.got))
        return
    names = [q.name for q in bad]
    hint = ""
    if set(names) <= {"eps_used", "small_inputs"}:
        hint = "：只在 ε 起作用的输入上不一致（eps=1e-2，或 |x|≈1e-3）——检查 ε 的用法"
    elif names == ["large_inputs"]:
        hint = "：只在 |x|≈1e3 时不一致——数值溢出或精度问题？"
    ref = "F.rms_norm" if rms else "F.layer_norm"
    out.append(fail("forward", f"输出与 torch 的 {ref} 不一致 (values differ)，不一致的输入：{', '.join(names)}{hint}",
                    p.x_in, p.expected, p.got))


def _ln_gradients(build, rms, eps, g, D, out):
    """Gradients with respect to x and γ (and β for LayerNorm) against autograd of torch's function."""
    mod = build(D, eps=eps)
    gname, w = find_gain(mod, D)
    bname, b = (None, None) if rms else find_bias(mod, D, gname)
    wv, bv = torch.randn(D, generator=g) + 1, torch.randn(D, generator=g)
    if w is not None:
        set_tensor(w, wv)
    if b is not None:
        set_tensor(b, bv)
    x = (torch.randn(2, 3, D, generator=g) * 2).requires_grad_(True)
    gy = torch.randn(2, 3, D, generator=g)
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
    good = x.grad is not None and close(x.grad, xr.grad)
    good = good and w is not None and w.grad is not None and close(w.grad.flatten(), wr.grad)
    if not rms:
        good = good and b is not None and b.grad is not None and close(b.grad.flatten(), br.grad)
    out.append(ok("gradients", f"对 {what} 的梯度与 autograd 一致") if good else
               fail("gradients", f"对 {what} 的梯度与 autograd 不一致 (gradients differ)：是否用了 .detach()/.data "
                    "或 numpy 截断了计算图？", x.detach(), xr.grad, x.grad))


def _ln_half(build, rms, eps, g, dt, scale, id, D, out):
    """Half precision: dtype kept, values right; |x|≈300 overflows x² in float16 without an upcast."""
    mod = build(D, eps=eps)
    if hasattr(mod, "to"):
        mod = mod.to(dt)          # the whole layer in half precision, as model.half() does
    x = (torch.randn(2, 4, D, generator=g) * scale).to(dt)
    got = output_of(mod, x)
    exp = _ln_reference(x, (D,), torch.ones(D), torch.zeros(D), eps, rms)
    tol = 3e-2 if dt == torch.bfloat16 else 5e-3
    if got.dtype != dt:
        out.append(fail(id, f"输入是 {dt}，输出 dtype 应与输入相同，实际 {got.dtype} (return the input dtype)", x, level=PROD))
    elif not torch.isfinite(got).all() or not close(got, exp, tol):
        square = "x²" if rms else "(x−μ)²"
        hint = (f"：|x|≈300 时 {square} 在 float16 下溢出 (300² > 65504)，先 x.float() 计算再转回输入的 dtype "
                "(no float32 upcast)") if dt == torch.float16 and scale > 100 else ""
        out.append(fail(id, f"{dt} 输入的结果错误{hint}", x, exp, got, PROD))
    else:
        out.append(ok(id, f"{dt} 输入：dtype 保持、数值正确", PROD))


def _ln_default_eps(build, rms, g, D, out):
    """Built without eps: the default must be torch's (LayerNorm 1e-5; RMSNorm None = finfo.eps,
    or the card's and LLaMA's 1e-6). The effective eps is read back from the output."""
    mod = build(D)
    gname, w = find_gain(mod, D)
    if w is not None:
        set_tensor(w, torch.ones(D))
    if not rms:
        bname, b = find_bias(mod, D, gname)
        if b is not None:
            set_tensor(b, torch.zeros(D))
    x = torch.randn(2, 8, D, generator=g) * 3e-3
    got = output_of(mod, x).detach().double()
    xd = x.double()
    num = xd if rms else xd - xd.mean(-1, keepdim=True)
    stat = num.pow(2).mean(-1, keepdim=True)
    eff = float(((num / got).pow(2) - stat).median())
    torch_eps = [1e-6, torch.finfo(torch.float32).eps] if rms else [1e-5]
    if eff < 1e-10 and "eps" in build.ignored:
        # a formula without any eps (e.g. F.normalize's clamp): the interview probes could not pass one in
        out.append(fail("eps_missing", "公式里没有 ε (eps missing)：|x| 很小时分母接近 0；构造函数也不接受 eps。" +
                        ("应为 sqrt(mean(x²) + eps)" if rms else "应为 sqrt(var + eps)"), x))
    elif any(abs(eff - e) <= 0.05 * e + 1e-9 for e in torch_eps):
        out.append(ok("default_eps", f"不传 eps 时默认 eps≈{eff:.2g}，与 torch 一致", PROD))
    else:
        want = "1e-6（LLaMA/本卡片）或 None（torch.nn.RMSNorm：float32 的 finfo.eps≈1.2e-7）" if rms else "1e-5"
        out.append(fail("default_eps", f"不传 eps 时，输出相当于 eps≈{eff:.2g}；torch 的默认是 {want} "
                        "(default eps differs from torch's)", x, level=PROD))


# ---------------------------------------------------------------- BatchNorm (module)
BN_SHAPES = {2: (16, 3), 4: (4, 3, 5, 6)}
BN_STEPS = [(2.0, 1.0), (1e-3, 0.0), (30.0, -3.0)]     # spread from 1e-3 (eps matters) to ~30


def _bshape(rank: int, C: int) -> list[int]:
    return [1, C] + [1] * (rank - 2)


def _bn_axes(rank: int) -> tuple[int, ...]:
    return (0,) + tuple(range(2, rank))


def _torch_bn(x, rm, rv, w, b, training, momentum=0.1, eps=1e-5):
    """F.batch_norm's semantics in float64, written out (torch's float64 CPU kernel takes ~0.1 s a
    call on this machine; tests/test_drills.py checks this function against F.batch_norm)."""
    x = x.double()
    axes, shp = _bn_axes(x.dim()), _bshape(x.dim(), x.shape[1])
    if training:
        mean, var = x.mean(axes), x.var(axes, unbiased=False)
        if rm is not None:
            n = x.numel() // x.shape[1]
            rm.mul_(1 - momentum).add_(momentum * mean)
            rv.mul_(1 - momentum).add_(momentum * var * n / (n - 1))
    else:
        mean, var = rm, rv
    y = (x - mean.reshape(shp)) / torch.sqrt(var.reshape(shp) + eps)
    if w is not None:
        y = y * w.double().reshape(shp)
    if b is not None:
        y = y + b.double().reshape(shp)
    return y


def _bn_fresh(build, C, rank, g, **opts):
    mod = build(C, rank=rank, **opts)
    gname, w = find_gain(mod, C)
    bname, b = find_bias(mod, C, gname)
    wv, bv = torch.randn(C, generator=g) + 1, torch.randn(C, generator=g)
    if w is not None:
        set_tensor(w, wv)
    if b is not None:
        set_tensor(b, bv)
    set_mode(mod, True)
    return mod, wv, bv


def _stats(mod, C):
    mn, mt, vn, vt = find_stats(mod, C)
    if mt is None or vt is None:
        return None
    return mt.detach().double().flatten().clone(), vt.detach().double().flatten().clone()


LAYOUT = {2: "(N, C)", 4: "(N, C, H, W)"}
RUNNING_IDS = ("momentum_reversed", "running_stats_not_updated", "running_var_biased", "running_stats_2d",
               "running_stats_4d", "no_running_stats")


def bn_checks(impl, out: list[Finding] | None = None) -> list[Finding]:
    out = [] if out is None else out
    g = torch.Generator().manual_seed(1)
    C = 3
    build = Builder(impl)
    with step(out, "construct"):
        _bn_construct(build, C, out)
    if _raised(out, "construct"):
        return out

    # which layouts does the submission support? (run every probe in those, say once which it lacks)
    supported, why = [], {}
    for rank, shape in BN_SHAPES.items():
        try:
            mod, _, _ = _bn_fresh(build, C, rank, g, eps=1e-5, momentum=0.1)
            y = output_of(mod, torch.randn(shape, generator=g))
            if y.shape == torch.Size(shape):
                supported.append(rank)
            else:
                why[rank] = f"输出形状 {tuple(y.shape)}"
        except SubmissionError as err:
            if is_timeout(err):
                raise
            why[rank] = str(err)[:160]
        except Exception as err:  # noqa: BLE001
            why[rank] = f"{type(err).__name__}: {err}"[:160]
    nhwc = False
    if 4 not in supported:
        with step([], "channels_last"):
            mod, wv, bv = _bn_fresh(build, C, 4, g, eps=1e-5, momentum=0.1)
            x = torch.randn(4, 5, 6, C, generator=g) * 2 + 1
            got = output_of(mod, x)
            exp = _torch_bn(x.permute(0, 3, 1, 2), None, None, wv, bv, True).permute(0, 2, 3, 1)
            nhwc = close(got, exp)
    if not supported:
        if nhwc:
            out.append(fail("channels_last", "你的实现把通道放在最后 (channels-last, N, H, W, C)（TensorFlow 的约定），在 dim=(0, 1, 2) 上求统计量 (wrong reduction axes)；"
                            "PyTorch 的 BatchNorm 输入是 (N, C) 或 (N, C, H, W)，统计量在除通道维 (dim=1) 以外的所有维上求"))
        else:
            out.append(fail("layout", "(N, C) 和 (N, C, H, W) 的输入都无法运行：" +
                            "；".join(f"{LAYOUT[r]}: {why.get(r, '')}" for r in BN_SHAPES)))
        _bn_production(build, impl, C, g, supported, why, nhwc, out)
        return out
    right = {}
    for rank in supported:
        right[rank] = False
        with step(out, f"train_{rank}d"):
            right[rank] = _bn_train(build, C, rank, g, out)
    rank = supported[0]
    with step(out, "stats_graph"):
        mod, wv, bv = _bn_fresh(build, C, rank, g, eps=1e-5, momentum=0.1)
        x = torch.randn(BN_SHAPES[rank], generator=g, requires_grad=True)
        output_of(mod, x)
        mn, rmg, vn, rvg = find_stats(mod, C)
        graph = any(isinstance(t, Tensor) and (t.requires_grad or t.grad_fn is not None) for t in (rmg, rvg))
        out.append(fail("stats_graph", "滑动统计量带着计算图 (autograd graph)：更新时用 torch.no_grad() 或 .detach()，"
                        "否则内存不断增长、第二次反向传播会报错") if graph else ok("stats_graph", "滑动统计量不带计算图"))
    if not right[rank]:
        # the training formula is wrong: value checks in eval or with other options would repeat it
        for note, text in build.notes.items():
            out.append(fail(note, text, level=PROD))
        return out
    with step(out, "one_pass_variance"):
        mod, wv, bv = _bn_fresh(build, C, rank, g, eps=1e-5, momentum=0.1)
        x = torch.randn(BN_SHAPES[rank], generator=g) + 1e4
        got = output_of(mod, x)
        exp = _torch_bn(x, None, None, wv, bv, True)
        out.append(ok("one_pass_variance", "大偏移 (1e4) 输入下方差仍然准确（两遍法）") if close(got, exp, 2e-2) else
                   fail("one_pass_variance", "输入带大偏移 (offset 1e4) 时结果错误：E[x²]−E[x]² 的单遍方差 (one-pass variance) "
                        "在 float32 下发生灾难性抵消；先减均值再平方 (two-pass)", x, exp, got))
    with step(out, "eval_mode"):
        _bn_eval(build, C, rank, g, out)
    running_ok = not any(not f.passed and f.id in RUNNING_IDS for f in out)
    with step(out, "options"):
        _bn_options(build, C, rank, g, out, running_ok)
    _bn_production(build, impl, C, g, supported, why, nhwc, out, running_ok)
    return out


def _bn_construct(build, C, out):
    m = build(C, rank=2, eps=1e-5, momentum=0.1)
    gname, w = find_gain(m, C)
    bname, b = find_bias(m, C, gname)
    good = (w is not None and b is not None and w.requires_grad and b.requires_grad
            and torch.all(w == 1) and torch.all(b == 0))
    out.append(ok("params", f"γ (self.{gname}) 初值 1、β (self.{bname}) 初值 0，各 {C} 个元素") if good else
               fail("params", "应有可学习的 γ（初值 1）和 β（初值 0），各 num_features 个元素：nn.Parameter self.weight / self.bias"))
    mn, mt, vn, vt = find_stats(m, C)
    odd = [f"self.{n} {tuple(t.shape)}" for n, t in ((gname, w), (bname, b), (mn, mt), (vn, vt))
           if t is not None and tuple(t.shape) != (C,)]
    if odd:     # broadcast shapes such as (1, C, 1, 1) are checked as they are, and named here
        out.append(fail("param_shapes", f"weight/bias/滑动统计量的形状应为 (C,) = ({C},)；你的是 {', '.join(odd)}"
                        "（能广播，但 torch 的 state_dict 存 (C,)）(parameter shapes differ from torch's)", level=PROD))
    if mt is None or vt is None:
        out.append(fail("no_running_stats", "没有滑动统计量 (no running statistics)：训练时要用 momentum 更新 running_mean / "
                        "running_var，eval 时用它们代替 batch 统计量"))
        return
    buffers = dict(m.named_buffers()) if isinstance(m, torch.nn.Module) else {}
    params = dict(m.named_parameters()) if isinstance(m, torch.nn.Module) else {}
    if mn in params or vn in params or mt.requires_grad:
        out.append(fail("buffers", f"self.{mn} / self.{vn} 是可学习参数：优化器会更新它们。用 self.register_buffer(...)"))
    elif mn not in buffers or vn not in buffers:
        out.append(fail("buffers", f"滑动统计量 self.{mn} / self.{vn} 是普通属性：不会进 state_dict、不会随 .to(device) 移动；"
                        "用 self.register_buffer('running_mean', torch.zeros(C)) 注册为 buffer"))
    elif not (torch.all(mt == 0) and torch.all(vt == 1)):
        out.append(fail("buffers", "running_mean 初值应为 0，running_var 初值应为 1"))
    else:
        out.append(ok("buffers", f"{mn}/{vn} 是 buffer，初值 0/1"))


def _bn_train(build, C, rank, g, out):
    """Training forward and the running-statistics update over three steps of different scale."""
    mod, wv, bv = _bn_fresh(build, C, rank, g, eps=1e-5, momentum=0.1)
    shp = _bshape(rank, C)
    rm, rv = torch.zeros(C, dtype=torch.float64), torch.ones(C, dtype=torch.float64)
    probes, seen, xs = [], [], []
    id = f"train_{rank}d"
    for k, (scale, offset) in enumerate(BN_STEPS):
        x = torch.randn(BN_SHAPES[rank], generator=g) * scale + offset
        x0 = x.clone()
        got = output_of(mod, x)
        if not torch.equal(x, x0):
            out.append(fail("input_modified", "输入张量被原地修改了 (the input was modified in place)", x0))
            return False
        exp = _torch_bn(x, rm, rv, wv, bv, True)
        if got.shape != x.shape:
            out.append(fail(id, f"输出形状应为 {tuple(x.shape)}，实际 {tuple(got.shape)}", x0, exp, got))
            return False
        probes.append(Probe(f"step{k + 1}", x.double(), wv.double().reshape(shp), bv.double().reshape(shp), 1e-5,
                            got.detach().double(), exp, x0))
        seen.append(_stats(mod, C))
        xs.append(x.double())
    bad = [p for p in probes if not close(p.got, p.expected)]
    if bad:
        correct = Formula(center=True, div="n", eps="inside", root=True, gain="w", bias=True, axes=_bn_axes(rank))
        alts = {"center": [False], "div": ["n-1", "1"], "eps": ["outside", "none", *[("fixed", v) for v in FIXED_EPS[1:]]],
                "root": [False], "gain": ["1+w", "none"], "bias": [False],
                "axes": [a for r in range(1, rank + 1) for a in itertools.combinations(range(rank), r)
                         if a != _bn_axes(rank)]}
        found = search(probes, correct, alts)
        if found:
            out.extend(deviation_findings("BatchNorm", found[0], found[1], correct, probes, rank))
        else:
            p = bad[0]
            nonfinite = not torch.isfinite(p.got).all()
            out.append(fail(id, ("输出里有 NaN 或 inf：检查分母和 ε" if nonfinite else
                                 f"训练模式输出与 F.batch_norm 不一致 ({LAYOUT[rank]}，第 {probes.index(p) + 1} 步)"),
                            p.x_in, p.expected, p.got))
    else:
        out.append(ok(id, f"训练模式 {LAYOUT[rank]}：3 步（|x| 1e-3…30）输出与 F.batch_norm 一致"))
    _bn_running(seen, xs, C, rank, out)
    return not bad


def _bn_running(seen, xs, C, rank, out):
    # running statistics: which update rule reproduces what the module stored after each step?
    if any(s is None for s in seen):
        if not any(f.id == "no_running_stats" for f in out):
            out.append(fail("no_running_stats", "找不到滑动统计量 running_mean / running_var (no running statistics)"))
        return
    axes = _bn_axes(rank)

    def simulate(conv, var_kind):
        m_, v_ = torch.zeros(C, dtype=torch.float64), torch.ones(C, dtype=torch.float64)
        seq = []
        for x in xs:
            mean = x.mean(axes)
            var = x.var(axes, unbiased=(var_kind == "unbiased"))
            if conv == "torch":
                m_, v_ = 0.9 * m_ + 0.1 * mean, 0.9 * v_ + 0.1 * var
            elif conv == "reversed":
                m_, v_ = 0.1 * m_ + 0.9 * mean, 0.1 * v_ + 0.9 * var
            seq.append((m_, v_))
        return seq

    def matches(seq):
        return all(close(a, c, 1e-4) and close(b, d, 1e-4) for (a, b), (c, d) in zip(seen, seq))

    if matches(simulate("torch", "unbiased")):
        out.append(ok(f"running_stats_{rank}d", "running_mean/running_var 的 3 步更新与 PyTorch 一致"))
        return
    text = {"reversed": "momentum 用反了 (momentum convention reversed)：PyTorch 是 running = (1−momentum)·running + "
                        "momentum·batch，momentum=0.1",
            "frozen": "训练时滑动统计量没有更新 (running statistics never updated)",
            "biased": "running_var 应该存无偏方差 (running_var should be unbiased, 乘 n/(n−1))，归一化时才用有偏方差 "
                      "(Ioffe & Szegedy 2015 §3.1；F.batch_norm 也这样做)"}
    ids = {"reversed": "momentum_reversed", "frozen": "running_stats_not_updated", "biased": "running_var_biased"}
    if any(not f.passed and f.id in RUNNING_IDS for f in out):
        return      # already named in the other layout
    for conv, var_kind in [("reversed", "unbiased"), ("torch", "biased"), ("frozen", "unbiased"), ("reversed", "biased")]:
        if matches(simulate(conv, var_kind)):
            parts = [p for p in (conv if conv != "torch" else None, "biased" if var_kind == "biased" and conv != "frozen" else None) if p]
            both = "（同时有 2 处错误）" if len(parts) > 1 else ""
            for part in parts:
                out.append(fail(ids[part], text[part] + both, xs[0], simulate("torch", "unbiased")[-1][1], seen[-1][1]))
            return
    out.append(fail(f"running_stats_{rank}d", "滑动统计量的更新与 PyTorch 不一致 (running statistics differ)",
                    xs[0], simulate("torch", "unbiased")[-1][1], seen[-1][1]))


def _bn_eval(build, C, rank, g, out):
    """eval: running statistics, with autograd ON (the d2l is_grad_enabled() bug), and no update;
    train under no_grad: batch statistics."""
    mod, wv, bv = _bn_fresh(build, C, rank, g, eps=1e-5, momentum=0.1)
    shape = BN_SHAPES[rank]
    for _ in range(3):
        output_of(mod, torch.randn(shape, generator=g) * 2 + 1)
    set_mode(mod, False)
    mn, mt, vn, vt = find_stats(mod, C)
    if mt is not None and vt is not None:     # small running variances: an eps left out of eval shows
        set_tensor(mt, torch.randn(C, generator=g))
        set_tensor(vt, torch.rand(C, generator=g) * 1e-4 + 1e-5)
    st = _stats(mod, C)
    x = torch.randn(shape, generator=g) * 1e-2
    with torch.enable_grad():
        got = output_of(mod, x)
    batch = _torch_bn(x, None, None, wv, bv, True)
    if st is None:
        out.append(fail("eval_uses_batch_stats", "eval 模式也只能用 batch 统计量 (eval uses batch statistics; no running "
                        "statistics)：推理时一个样本的输出会依赖同 batch 的其它样本", x, None, got) if close(got, batch) else
                   fail("eval_mode", "eval 模式的输出应使用 running_mean/running_var", x, None, got))
        return
    exp = _torch_bn(x, st[0].clone(), st[1].clone(), wv, bv, False)
    if close(got, exp):
        out.append(ok("eval_mode", "eval 模式（梯度开启时）使用滑动统计量"))
    elif close(got, batch):
        now = _stats(mod, C)           # the grad-enabled call may have updated them
        with torch.no_grad():
            got2 = output_of(mod, x)
        if now is not None and close(got2, _torch_bn(x, now[0].clone(), now[1].clone(), wv, bv, False)):
            out.append(fail("mode_from_grad", "model.eval() 之后仍在用 batch 统计量：模式应该看 self.training，而不是 "
                            "torch.is_grad_enabled()（d2l 的写法；eval 时不一定在 no_grad 里）(mode read from autograd, "
                            "not self.training)", x, exp, got))
        else:
            out.append(fail("eval_uses_batch_stats", "eval 模式下仍用 batch 统计量 (eval uses batch statistics)：forward 里要按 "
                            "self.training 选择 batch 统计量（训练）或 running_mean/running_var（eval）", x, exp, got))
    else:
        out.append(fail("eval_mode", "eval 模式的输出应使用 running_mean/running_var：(x − running_mean)/sqrt(running_var + ε)",
                        x, exp, got))
    after = _stats(mod, C)
    out.append(ok("eval_no_update", "eval 不更新滑动统计量") if after is not None and close(after[0], st[0], 0) and
               close(after[1], st[1], 0) else
               fail("eval_no_update", "eval 模式下滑动统计量被更新了 (running stats must not change in eval)"))
    set_mode(mod, True)
    with torch.no_grad():
        x = torch.randn(shape, generator=g) + 3
        st = _stats(mod, C)
        got = output_of(mod, x)
    exp = _torch_bn(x, None, None, wv, bv, True)
    if close(got, exp):
        out.append(ok("no_grad_train", "train 模式下 no_grad 仍用 batch 统计量"))
    else:
        used_running = st is not None and close(got, _torch_bn(x, st[0], st[1], wv, bv, False))
        out.append(fail("no_grad_train", "train 模式下即使在 torch.no_grad() 里也应使用 batch 统计量 (no_grad is not eval)" +
                        ("：你的代码用 torch.is_grad_enabled() 判断模式" if used_running else ""), x, exp, got))


def _bn_options(build, C, rank, g, out, running_ok=True):
    """Non-default eps and momentum: both must be the ones passed to the constructor."""
    eps, momentum = 1e-2, 0.3
    if build.ignored:       # a constructor without the options: the signature note says so
        return
    mod, _, _ = _bn_fresh(build, C, rank, g, eps=eps, momentum=momentum)
    level = "interview"
    gname, w = find_gain(mod, C)
    bname, b = find_bias(mod, C, gname)
    if w is not None:
        set_tensor(w, torch.ones(C))
    if b is not None:
        set_tensor(b, torch.zeros(C))
    rm, rv = torch.zeros(C, dtype=torch.float64), torch.ones(C, dtype=torch.float64)
    axes = _bn_axes(rank)
    for _ in range(2):
        x = torch.randn(BN_SHAPES[rank], generator=g) * 0.1 + 0.5       # small variance: eps = 1e-2 vs 1e-5 shows
        rm0, rv0 = rm.clone(), rv.clone()
        got = output_of(mod, x)
        exp = _torch_bn(x, rm, rv, None, None, True, momentum, eps)
        if not close(got, exp):
            ignored = close(got, _torch_bn(x, None, None, None, None, True, 0.1, 1e-5))
            out.append(fail("eps_ignored" if ignored else "options",
                            MISTAKE_TEXT["eps_ignored"] if ignored else
                            f"BatchNorm(C, eps={eps}, momentum={momentum}) 的输出与 F.batch_norm 不一致", x, exp, got, level))
            return
        st = _stats(mod, C)
        if st is None or not running_ok:
            continue        # a wrong update rule is already named: do not repeat it here
        if not (close(st[0], rm) and close(st[1], rv)):
            xd = x.double()
            default = (0.9 * rm0 + 0.1 * xd.mean(axes), 0.9 * rv0 + 0.1 * xd.var(axes))   # momentum 0.1 written in
            ignored = close(st[0], default[0]) and close(st[1], default[1])
            out.append(fail("momentum_ignored" if ignored else "options",
                            "构造时传入的 momentum 没有被使用 (the momentum argument is ignored)：用 self.momentum，不要把 0.1 写死"
                            if ignored else f"BatchNorm(C, momentum={momentum}) 的滑动统计量与 PyTorch 不一致",
                            x, rv, st[1], level))
            return
    out.append(ok("options", "eps=1e-2、momentum=0.3 时输出与滑动统计量都与 PyTorch 一致", level))


def _bn_production(build, impl, C, g, supported, why, nhwc, out, running_ok=True):
    missing = [r for r in BN_SHAPES if r not in supported]
    if supported and missing:
        r = missing[0]
        extra = "；你的实现把通道放在最后 (N, H, W, C)（channels-last）" if nhwc and r == 4 else ""
        out.append(fail("channels_last" if nhwc and r == 4 else "layouts",
                        f"只支持 {LAYOUT[supported[0]]}：{LAYOUT[r]} 的输入不行（{why.get(r, '')}）{extra}。"
                        f"面试级检查只在 {LAYOUT[supported[0]]} 上做；torch 的 BatchNorm1d/2d 两种都有", level=PROD))
    elif supported:
        out.append(ok("layouts", "(N, C) 与 (N, C, H, W) 都支持", PROD))
    if not supported:
        return
    rank = supported[0]
    shape = BN_SHAPES[rank]
    with step(out, "momentum_none", PROD):
        if "momentum" in build.ignored or not running_ok:
            raise _Skip
        mod, wv, bv = _bn_fresh(build, C, rank, g, eps=1e-5, momentum=None)
        rm, rv = torch.zeros(C, dtype=torch.float64), torch.ones(C, dtype=torch.float64)
        for k in range(3):
            x = torch.randn(shape, generator=g) * 2 + k
            try:
                output_of(mod, x)
            except SubmissionError as err:
                if is_timeout(err):
                    raise
                out.append(fail("momentum_none", f"momentum=None 时报错：{err}。torch 的 BatchNorm 用 momentum=None 表示累计平均 "
                                "(cumulative moving average, 因子 1/num_batches_tracked)", level=PROD))
                raise _Skip from None
            _torch_bn(x, rm, rv, wv, bv, True, momentum=1 / (k + 1))     # torch: cumulative average
        st = _stats(mod, C)
        good = st is not None and close(st[0], rm) and close(st[1], rv)
        out.append(ok("momentum_none", "momentum=None：滑动统计量是累计平均，与 torch 一致", PROD) if good else
                   fail("momentum_none", "momentum=None 时 torch 用累计平均 (cumulative moving average, 因子 1/num_batches_tracked)",
                        None, rv, None if st is None else st[1], PROD))
    with step(out, "batch_of_one", PROD):    # a batch of one in training: torch raises; NaN is the wrong answer
        mod, _, _ = _bn_fresh(build, C, 2 if 2 in supported else rank, g)
        one = (1, C) if 2 in supported else (1, C, 1, 1)
        try:
            got = guarded(mod, torch.randn(one, generator=g))
        except SubmissionError as err:
            if is_timeout(err):
                raise
            out.append(ok("batch_of_one", "训练模式下每通道只有 1 个值时报错（PyTorch 也报 ValueError）", PROD))
        else:
            bad = isinstance(got, Tensor) and not torch.isfinite(got).all()
            out.append(fail("batch_of_one", "训练模式下每通道只有 1 个值时返回了 NaN：方差为 0。PyTorch 会报错 "
                            "'Expected more than 1 value per channel when training'", level=PROD) if bad else
                       ok("batch_of_one", "训练模式下 batch=1 没有返回 NaN", PROD))
    for dt, tol in [(torch.float16, 1e-2), (torch.bfloat16, 3e-2)]:
        id = f"half_{str(dt).replace('torch.', '')}"
        with step(out, id, PROD):
            mod, wv, bv = _bn_fresh(build, C, rank, g)
            if hasattr(mod, "to"):
                mod = mod.to(dt)          # the whole layer in half precision, as model.half() does
            x = (torch.randn(shape, generator=g) * 2).to(dt)
            got = output_of(mod, x)
            exp = _torch_bn(x.float(), None, None, wv.to(dt), bv.to(dt), True)
            if got.dtype != dt:
                out.append(fail(id, f"输入是 {dt}，输出 dtype 应与输入相同，实际 {got.dtype} (return the input dtype)", x, level=PROD))
            elif torch.isfinite(got).all() and close(got.double(), exp, tol):
                out.append(ok(id, f"{dt} 输入：dtype 保持、数值正确", PROD))
            else:
                out.append(fail(id, f"{dt} 输入的结果错误或非有限值", x, exp, got, PROD))
    with step(out, "defaults", PROD):
        mod = build(C, rank=rank)
        set_mode(mod, True)
        x = torch.randn(shape, generator=g) * 1e-3 + 0.5
        got = output_of(mod, x)
        gname, w = find_gain(mod, C)
        bname, b = find_bias(mod, C, gname)
        exp = _torch_bn(x, None, None, None if w is None else w.detach().flatten(),
                        None if b is None else b.detach().flatten(), True)
        rm, rv = torch.zeros(C, dtype=torch.float64), torch.ones(C, dtype=torch.float64)
        _torch_bn(x, rm, rv, None, None, True)
        st = _stats(mod, C)
        good = close(got, exp) and (st is None or not running_ok or (close(st[0], rm) and close(st[1], rv)))
        out.append(ok("defaults", "默认 eps=1e-5、momentum=0.1，与 torch 一致", PROD) if good else
                   fail("defaults", "不传参数时的 eps / momentum 与 torch 的默认 (eps=1e-5, momentum=0.1) 不一致", x, exp, got, PROD))
    with step(out, "state_dict", PROD):
        m = build(C, rank=rank)
        sd = m.state_dict() if hasattr(m, "state_dict") else {}
        want = {"weight", "bias", "running_mean", "running_var"}
        shapes = {k: tuple(v.shape) for k, v in sd.items() if k in want}
        good = want <= set(sd) and all(s == (C,) for s in shapes.values())
        out.append(ok("state_dict", "state_dict 有 weight/bias/running_mean/running_var，形状 (C,)", PROD) if good else
                   fail("state_dict", f"state_dict 应有 weight、bias、running_mean、running_var，形状都是 ({C},)（可以直接加载 "
                        f"torch 的权重）；你的是 {dict(shapes) if shapes else sorted(sd)}"
                        + ("（weight 的形状应为 (C,)）" if any(s != (C,) for s in shapes.values()) else ""), level=PROD))
    for note, text in build.notes.items():
        out.append(fail(note, text, level=PROD))


# ---------------------------------------------------------------- backward passes (functions)
def _bw_stats(x, axis, var_kind, eps_kind, eps, center):
    """x̂ and r = 1/σ as a hand-written backward computes them (with the learner's possible slips)."""
    mu = x.mean(axis, keepdim=True) if center else torch.zeros_like(x)
    xc = x - mu
    n = x.shape[axis]
    var = xc.pow(2).sum(axis, keepdim=True) / (n - 1 if var_kind == "unbiased" else n)
    if eps_kind == "outside":
        r = 1 / (var.sqrt() + eps)
    else:
        e = eps if eps_kind == "given" else (0.0 if eps_kind == "none" else eps_kind)
        r = 1 / torch.sqrt(var + e)
    return xc * r, r


def _bw_candidate(p, which_norm, var_kind, eps_kind, form):
    """(grad_x, grad_w, grad_b) of one candidate: the usual formula with the given slips, or
    ``form == "autograd"``: autograd of the forward with those slips."""
    x, w, gy, eps = p["x"], p["w"], p["gy"], p["eps"]
    axis = 0 if which_norm == "batchnorm" else -1
    other = -1 if axis == 0 else 0
    center = which_norm != "rmsnorm"
    if form == "autograd":
        xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
        br = torch.zeros_like(w, requires_grad=True)
        xh, _ = _bw_stats(xr, axis, var_kind, eps_kind, eps, center)
        y = xh * wr + (br if center else 0)
        grads = torch.autograd.grad((y * gy).sum(), [xr, wr, br] if center else [xr, wr], allow_unused=True)
        return tuple(torch.zeros_like(w) if gr is None else gr for gr in grads)
    xh, r = _bw_stats(x, axis, var_kind, eps_kind, eps, center)
    gh = gy * w
    if form == "wrong_divisor":
        mean = lambda t: t.sum(axis, keepdim=True) / x.shape[other]     # noqa: E731 - 1/N for 1/D
    else:
        mean = lambda t: t.mean(axis, keepdim=True)                      # noqa: E731
    term1 = mean(gh) if center and form not in ("missing_mean_term", "stats_as_constants") else 0
    term2 = xh * mean(gh * xh) if form not in ("missing_var_term", "stats_as_constants") else 0
    gx = r * (gh - term1 - term2)
    gw = (gy * xh).sum(other)
    if form == "grad_weight_uses_y":
        gw = (gy * (xh * w)).sum(other)
    return (gx, gw, gy.sum(other)) if center else (gx, gw)


BW_TEXT = {
    "unbiased_variance": "用了无偏方差 (unbiased variance, n−1)：前向的方差是有偏的 (除以 n)，反向传播里的 σ、x̂ 也要用它",
    "eps_ignored": "传入的 eps 没有被使用 (the eps argument is ignored)：eps=1e-2 时结果相当于把 ε 写死了",
    "eps_missing": "ε 没有加进方差 (eps missing)：r = 1/sqrt(var + eps)",
    "eps_outside_root": "ε 放在了根号外 (eps outside the square root)：r = 1/sqrt(var + eps)，不是 1/(std + eps)",
    "missing_mean_term": "少了均值那一项 −mean(ĝ) (missing the mean term)：均值 μ 也依赖 x",
    "missing_var_term": "少了方差那一项 −x̂·mean(ĝ·x̂) (missing the variance term)：方差 σ² 也依赖 x",
    "stats_as_constants": "把均值和方差当成了常数 (mean and variance treated as constants)：少了 −mean(ĝ) 和 −x̂·mean(ĝ·x̂) 两项",
    "wrong_divisor": "平均除错了数 (wrong divisor in the averages)：{right}",
    "grad_weight_uses_y": "grad_weight 应为 Σ g·x̂（归一化之后、乘 γ 之前的值），不是 Σ g·y (grad_weight uses y instead of x̂)",
}


BW_ROLES = {"grad": ("grad_out", "grad_output", "dout", "dy", "grad_y", "g", "upstream", "grad", "dldy", "dl_dy"),
            "x": ("x", "inp", "input", "inputs", "h", "z"),
            "weight": ("weight", "gamma", "w", "g_", "scale"),
            "bias": ("bias", "beta", "b"),
            "eps": ("eps", "epsilon")}


def _bw_args(fn, gy, x, w, eps, out):
    """Arguments in the order the function names them (dout, x, gamma, beta, eps ...); the card's
    order (grad_out, x, weight, eps) when the names say nothing. A bias argument gets zeros."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return gy, x, w, eps
    values = {"grad": gy, "x": x, "weight": w, "bias": torch.zeros_like(w), "eps": eps}
    roles = []
    for p in params:
        role = next((r for r, names in BW_ROLES.items() if p.name.lower() in names), None)
        if role is None:
            if p.default is not inspect.Parameter.empty:
                break
            return gy, x, w, eps
        roles.append(role)
    if roles in (["grad", "x", "weight", "eps"], []) or len(set(roles)) != len(roles) or \
            not {"grad", "x", "weight"} <= set(roles):
        return gy, x, w, eps
    if not any(f.id == "signature" for f in out):
        out.append(fail("signature", f"参数顺序是 ({', '.join(p.name for p in params[:len(roles)])})：本卡片约定 "
                        "(grad_out, x, weight, eps)，按参数名对应着检查 (arguments matched by name)", level=PROD))
    return tuple(values[r] for r in roles)


def backward_checks(fn, which_norm: str, out: list[Finding] | None = None) -> list[Finding]:
    out = [] if out is None else out
    g = torch.Generator().manual_seed(2)
    bn = which_norm == "batchnorm"
    # eps 1e-5 and 1e-2, |x| from 1e-3 to 1e3: an ignored eps or a dropped term shows somewhere
    plan = ([((8, 4), 1e-5, 2.0, 0.5), ((5, 3), 1e-2, 0.1, 0.0), ((8, 4), 1e-5, 1e-3, 0.0), ((6, 4), 1e-5, 1e3, 0.0)]
            if bn else
            [((4, 8), 1e-5, 2.0, 0.5), ((6, 5), 1e-2, 0.1, 0.0), ((4, 8), 1e-5, 1e-3, 0.0), ((3, 8), 1e-5, 1e3, 0.0)])
    names = ["grad_x", "grad_weight", "grad_bias"][:2 if which_norm == "rmsnorm" else 3]
    probes = []
    mode = {"numpy": False}
    for shape, eps, scale, offset in plan:
        x = (torch.randn(shape, generator=g, dtype=torch.float64) * scale + offset).requires_grad_(True)
        feat = shape[1]
        w = (torch.randn(feat, generator=g, dtype=torch.float64) + 1).requires_grad_(True)
        b = torch.randn(feat, generator=g, dtype=torch.float64).requires_grad_(True)
        gy = torch.randn(shape, generator=g, dtype=torch.float64)
        if bn:
            y = _torch_bn(x, None, None, w, b, True, 0.1, eps)
        else:
            y = _ln_reference(x, (feat,), w, b, eps, which_norm == "rmsnorm")
        (y * gy).sum().backward()
        expected = (x.grad, w.grad) + ((b.grad,) if which_norm != "rmsnorm" else ())
        p = {"x": x.detach(), "w": w.detach(), "gy": gy, "eps": eps, "expected": expected, "label": f"{shape}, eps={eps:g}, |x|≈{scale:g}"}
        with step(out, "returns"):
            args = _bw_args(fn, gy.clone(), x.detach().clone(), w.detach().clone(), eps, out)
            if mode["numpy"]:
                got = guarded(fn, *(a.numpy() if isinstance(a, Tensor) else a for a in args))
            else:
                try:
                    got = guarded(fn, *args)
                except SubmissionError as err:      # a NumPy solution (cs231n-style)? try it with arrays
                    if is_timeout(err) or probes:
                        raise
                    try:
                        got = guarded(fn, *(a.numpy() if isinstance(a, Tensor) else a for a in args))
                    except SubmissionError:
                        raise err from None
                    mode["numpy"] = True
            if isinstance(got, tuple | list):
                got = tuple(torch.as_tensor(r) if hasattr(r, "__array__") and not isinstance(r, Tensor) else r
                            for r in got)
            if not isinstance(got, tuple | list) or len(got) != len(expected):
                out.append(fail("returns", f"应返回 {len(expected)} 个张量 ({', '.join(names)})，实际返回 {short(got)}"))
                return out
            fixed = []
            for name, e, r in zip(names, expected, got):
                if isinstance(r, Tensor) and r.shape != e.shape and r.numel() == e.numel() and r.squeeze().shape == e.squeeze().shape:
                    if not any(f.id == "grad_shapes" for f in out):
                        out.append(fail("grad_shapes", f"{name} 的形状是 {tuple(r.shape)}，应为 {tuple(e.shape)}（与参数同形）",
                                        level=PROD))
                    r = r.reshape(e.shape)
                if not isinstance(r, Tensor) or r.shape != e.shape:
                    out.append(fail(f"{name}_shape", f"{name} 的形状应为 {tuple(e.shape)}（输入 {shape}）", x.detach(), e, r))
                    return out
                fixed.append(r)
            p["got"] = tuple(r.detach().double() for r in fixed)
            probes.append(p)
        if _raised(out, "returns"):
            return out          # the same error on every probe: say it once
    if not probes:
        return out
    with step(out, "gradients"):        # the comparison and the search: a finding, never a lost report
        _bw_compare(probes, names, which_norm, bn, out)
    return out


def _bw_compare(probes, names, which_norm, bn, out):
    # candidates: the slips in the statistics x (the usual formula, its dropped terms, or autograd)
    eps_kinds = ["given", "none", "outside", *FIXED_EPS]
    forms = ["full", "autograd", "missing_mean_term", "missing_var_term", "stats_as_constants", "wrong_divisor",
             "grad_weight_uses_y"]
    if which_norm == "rmsnorm":
        forms = [f for f in forms if f not in ("missing_mean_term", "stats_as_constants")]
    cands = [("biased", e, f) for f in forms for e in eps_kinds] + [("unbiased", e, f) for f in forms for e in eps_kinds]
    cands.sort(key=lambda c: (c[0] != "biased") + (c[1] != "given") + (c[2] not in ("full", "autograd")))
    cache: dict = {}

    def grads_of(c, k):
        if (c, k) not in cache:
            cache[(c, k)] = _bw_candidate(probes[k], which_norm, *c)
        return cache[(c, k)]

    diagnosed: dict[str, list[str]] = {}
    first: dict[str, int] = {}          # the output a diagnosis was first made on (for the example)
    for i, name in enumerate(names):
        bad = [p for p in probes if not close(p["got"][i], p["expected"][i], 1e-6)]
        if not bad:
            out.append(ok(name, f"{name} 与 float64 autograd 一致（{len(probes)} 组输入：eps 1e-5/1e-2，|x| 1e-3…1e3）"))
            continue
        p = bad[0]
        found = None
        for c in cands:
            if c == ("biased", "given", "full") or c == ("biased", "given", "autograd"):
                continue
            if all(close(q["got"][i], grads_of(c, k)[i], 1e-6) for k, q in enumerate(probes)):
                found = c
                break
        if found:
            ids = []
            if found[0] == "unbiased":
                ids.append("unbiased_variance")
            if found[1] != "given":
                ids.append({"none": "eps_missing", "outside": "eps_outside_root"}.get(found[1], "eps_ignored"))
            if found[2] not in ("full", "autograd"):
                ids.append(found[2])
            for id in ids:
                diagnosed.setdefault(id, []).append(name)
                first.setdefault(id, i)
            continue
        # a constant factor: got = k · expected on every probe
        ks = []
        for q in probes:
            e, r = q["expected"][i], q["got"][i]
            ks.append(float((r * e).sum() / (e * e).sum()) if float((e * e).sum()) > 0 else float("nan"))
        factor = None
        if all(math.isfinite(k) for k in ks) and all(close(q["got"][i], k * q["expected"][i], 1e-6)
                                                     for q, k in zip(probes, ks)):
            # the same factor everywhere, or one that follows N (rows) or D (columns)
            for label, f in [("", lambda q: 1.0), ("1/N", lambda q: q["x"].shape[0]), ("N", lambda q: 1 / q["x"].shape[0]),
                             ("1/D", lambda q: q["x"].shape[1]), ("D", lambda q: 1 / q["x"].shape[1])]:
                c = [k * f(q) for q, k in zip(probes, ks)]
                if all(abs(v - c[0]) <= 1e-6 * max(1, abs(c[0])) for v in c):
                    factor = (f"×{c[0]:.4g}" if not label else
                              f"×{label}" if abs(c[0] - 1) < 1e-6 else f"×{c[0]:.4g}·{label}")
                    break
        if factor:
            first.setdefault("constant_factor", i)
            diagnosed.setdefault("constant_factor", []).append(f"{name} {factor}（N 为行数，D 为列数）"
                                                               if "N" in factor or "D" in factor else f"{name} {factor}")
            continue
        labels = [q["label"] for q in bad]
        out.append(fail(name, f"{name} 与 float64 autograd 不一致；不一致的输入：{'; '.join(labels)}",
                        p["x"], p["expected"][i], p["got"][i]))
    p = probes[0]
    for id, where in diagnosed.items():
        if id == "constant_factor":
            text = (f"梯度差了一个常数因子 (off by a constant factor)：{', '.join(where)}。检查求和/求平均、"
                    "以及 1/N、2 之类的系数")
        else:
            right = ("LayerNorm/RMSNorm 的平均在特征维上 (除以 D)，不是 batch 大小 N (divided by the batch size N instead of D)"
                     if not bn else "BatchNorm 的平均在 batch 维上 (除以 N)，不是特征数 D (divided by D instead of the batch size N)")
            text = BW_TEXT[id].format(right=right) + f"（{', '.join(where)}）"
        i = first[id]
        bad_p = next((q for q in probes if not close(q["got"][i], q["expected"][i], 1e-6)), p)
        out.append(fail(id, text, bad_p["x"], bad_p["expected"][i], bad_p["got"][i]))


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
