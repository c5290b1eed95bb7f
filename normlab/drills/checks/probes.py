"""Running a submission safely and finding its parts: the comparison, a finding, a guarded step,
the tensors a module keeps (γ, β, running statistics under any usual name) and the Builder that
constructs it the way torch.nn is called."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from contextlib import contextmanager

import torch
from torch import Tensor

from ..report import Finding, SubmissionError, guarded, short
from .keepdim import broadcast_finding
from .messages import is_broadcast_error

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
        if is_broadcast_error(str(err)) and not any(f.id in ("keepdim_missing", "broadcast") for f in out):
            out.append(broadcast_finding(str(err), level))
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


KIND_WORDS = {"buffer": "buffer（register_buffer）", "attribute": "普通的张量属性", "parameter": "nn.Parameter"}


def tensor_kind(m, name: str | None) -> str:
    """"parameter", "buffer" or "attribute" (a plain tensor attribute) for the dotted ``name`` in ``m``."""
    if isinstance(m, torch.nn.Module) and name:
        if name in dict(m.named_parameters()):
            return "parameter"
        if name in dict(m.named_buffers()):
            return "buffer"
    return "attribute"


def param_problems(m, found, C) -> list[str]:
    """What is wrong with γ and β, each as measured (never "missing" for a tensor that is there)."""
    said = []
    for name, t, sym, init in found:
        if t is None:
            said.append(f"找不到 {sym}：没有哪个 {C} 个元素的可学习张量起 {sym} 的作用" +
                        ("（设为 0 时每个通道的输出变成常数）" if sym == "γ" else "（改变它时输出平移同样的量）"))
        elif (k := tensor_kind(m, name)) != "parameter":
            said.append(f"self.{name} ({sym}) 是 {KIND_WORDS[k]}，不是 nn.Parameter")
        elif not t.requires_grad:
            said.append(f"self.{name} ({sym}) 不可学习 (requires_grad=False)")
        elif not bool(torch.all(t == init)):
            said.append(f"self.{name} ({sym}) 的初值不是 {init}")
    return said


def leaf(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def find_tensor(m, names: tuple[str, ...], numel: int, exclude: tuple[str, ...] = ()) -> tuple[str | None, Tensor | None]:
    ts = tensors_of(m)
    for n in names:
        for full, t in ts.items():
            if leaf(full) == n and t.numel() == numel and full not in exclude:
                return full, t
    return None, None


# the roles measured on a submission's class (roles.py): role -> attribute name; consulted before any name
ROLES: dict[type, dict[str, str]] = {}


def _measured(m, role: str, numel: int):
    name = ROLES.get(type(m), {}).get(role)
    t = tensors_of(m).get(name) if name else None
    return (name, t) if isinstance(t, Tensor) and t.numel() == numel else None


def find_gain(m, numel: int):
    if (found := _measured(m, "gain", numel)) is not None:
        return found
    name, t = find_tensor(m, GAIN_NAMES, numel)
    if t is None:       # an unusual name: the first learnable tensor of the right size
        for n, v in tensors_of(m).items():
            if v.numel() == numel and v.requires_grad and leaf(n) not in BIAS_NAMES:
                return n, v
    return name, t


def find_bias(m, numel: int, gain_name: str | None):
    if (found := _measured(m, "bias", numel)) is not None:
        return found
    name, t = find_tensor(m, BIAS_NAMES, numel, exclude=(gain_name or "",))
    if t is None:
        for n, v in tensors_of(m).items():
            if v.numel() == numel and v.requires_grad and n != gain_name:
                return n, v
    return name, t


def find_stats(m, numel: int):
    mean, var = _measured(m, "mean", numel), _measured(m, "var", numel)
    if mean is not None and var is not None:
        return (*mean, *var)
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
