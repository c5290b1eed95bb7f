"""The BatchNorm card (module): construction, training forward, running statistics."""

from __future__ import annotations

import itertools

import torch
from torch import Tensor

from ..report import Finding, SubmissionError
from .batchnorm_modes import BN_SHAPES, BN_STEPS, LAYOUT, _bn_eval, _bn_fresh, _bn_options, _bn_production, _stats
from .formulas import FIXED_EPS, Formula, Probe, deviation_findings, imprecise, search
from .probes import (PROD, Builder, _raised, close, fail, find_bias, find_gain, find_stats, is_timeout, ok, output_of,
                     param_problems, set_mode, step)
from .diagnosis import measured_findings
from .keepdim import broadcast_finding
from .messages import ONE_PASS, PRECISION, is_broadcast_error
from .properties import measure_module
from . import roles, running
from .references import _bn_axes, _bshape, _torch_bn

# ---------------------------------------------------------------- BatchNorm (module)
RUNNING_IDS = ("momentum_reversed", "running_stats_not_updated", "running_var_biased", "running_stats_seeded",
               "running_var_eps", "running_stats", "no_running_stats")


def bn_checks(impl, out: list[Finding] | None = None) -> list[Finding]:
    out = [] if out is None else out
    g = torch.Generator().manual_seed(1)
    C = 3
    build = Builder(impl)
    measured = {}
    for rank, shape in BN_SHAPES.items():        # which tensor is γ, β, the running mean and variance: measured
        measured = roles.learn(lambda c, **o: build(c, rank=rank, **o), C, shape, 1, _bn_axes(rank), roles.generator())
        if not measured.get("failed"):
            break
    with step(out, "construct"):
        _bn_construct(build, C, out, measured)
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
            err = next((why[r] for r in BN_SHAPES if is_broadcast_error(why.get(r, ""))), None)
            if err:
                out.append(broadcast_finding(err))
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
                   fail("one_pass_variance", ONE_PASS, x, exp, got))
    with step(out, "eval_mode"):
        _bn_eval(build, C, rank, g, out)
    running_ok = not any(not f.passed and f.id in RUNNING_IDS for f in out)
    with step(out, "options"):
        _bn_options(build, C, rank, g, out, running_ok)
    _bn_production(build, impl, C, g, supported, why, nhwc, out, running_ok)
    return out


def _bn_construct(build, C, out, measured):
    m = build(C, rank=2, eps=1e-5, momentum=0.1)
    gname, w = find_gain(m, C)
    bname, b = find_bias(m, C, gname)
    good = (w is not None and b is not None and w.requires_grad and b.requires_grad
            and torch.all(w == 1) and torch.all(b == 0))
    if good:
        out.append(ok("params", f"γ (self.{gname}) 初值 1、β (self.{bname}) 初值 0，各 {C} 个元素"))
    else:
        out.append(fail("params", "；".join(param_problems(m, ((gname, w, "γ", 1), (bname, b, "β", 0)), C)) +
                        "：应有可学习的 γ（初值 1）和 β（初值 0），各 num_features 个元素 (nn.Parameter)"))
    mn, mt, vn, vt = find_stats(m, C)
    if (mt is None or vt is None) and measured.get("created"):
        rank = 2 if "rank" not in measured else int(measured["rank"])
        set_mode(m, True)
        output_of(m, torch.randn(BN_SHAPES[rank], generator=torch.Generator().manual_seed(5)))
        mn, mt, vn, vt = find_stats(m, C)
        if mt is not None and vt is not None:
            out.append(fail("stats_created_late", f"滑动统计量 self.{mn} / self.{vn} 在第一次 forward 时才创建 (created on the "
                            "first forward)：训练前 state_dict 里没有它们，加载权重、.to(device) 都会漏掉；在 __init__ 里用 "
                            "register_buffer 建好（初值 0 和 1）", level=PROD))
    odd = [f"self.{n} {tuple(t.shape)}" for n, t in ((gname, w), (bname, b), (mn, mt), (vn, vt))
           if t is not None and tuple(t.shape) != (C,)]
    if odd:     # broadcast shapes such as (1, C, 1, 1) are checked as they are, and named here
        out.append(fail("param_shapes", f"weight/bias/滑动统计量的形状应为 (C,) = ({C},)；你的是 {', '.join(odd)}"
                        "（能广播，但 torch 的 state_dict 存 (C,)）(parameter shapes differ from torch's)", level=PROD))
    if mt is None or vt is None:
        if measured.get("failed"):      # nothing could be measured: say what was looked for, not that it is absent
            out.append(fail("no_running_stats", "找不到滑动统计量：没有叫 running_mean / running_var 的张量，训练 forward "
                            "又报错，无法测量哪个张量在跟踪 batch 统计量 (running statistics not found)"))
        else:
            out.append(fail("no_running_stats", "没有滑动统计量 (no running statistics)：一次训练 forward 之后，没有哪个形状 "
                            f"({C},) 的非参数张量朝 batch 的均值或方差变化；训练时要用 momentum 更新 running_mean / "
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
                            got.detach().double(), exp, x0, raw=got.detach()))
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
            err = imprecise(probes)
            named = [fail("precision", PRECISION.format(err=err), p.x_in, p.expected, p.shown)] if err is not None else \
                _bn_properties(build, C, rank, g)
            if named:
                named[0].example = fail("", "", p.x_in, p.expected, p.shown).example
                out.extend(named)
                _bn_running(seen, xs, C, rank, out, _stat_names(mod, C))
                return False
            nonfinite = not torch.isfinite(p.got).all()
            out.append(fail(id, ("输出里有 NaN 或 inf：检查分母和 ε" if nonfinite else
                                 f"训练模式输出与 F.batch_norm 不一致 ({LAYOUT[rank]}，第 {probes.index(p) + 1} 步)"),
                            p.x_in, p.expected, p.shown))
    else:
        out.append(ok(id, f"训练模式 {LAYOUT[rank]}：3 步（|x| 1e-3…30）输出与 F.batch_norm 一致"))
    _bn_running(seen, xs, C, rank, out, _stat_names(mod, C))
    return not bad


def _stat_names(mod, C):
    mn, _, vn, _ = find_stats(mod, C)
    return (mn or "running_mean", vn or "running_var")


def _bn_properties(build, C, rank, g) -> list[Finding]:
    """The general path for a training forward no known formula reproduces: how γ and β act, then the
    properties of the normalisation measured as a black box (properties.py), each one that differs from
    torch's as a finding (diagnosis.py)."""
    def measure():
        mod, _, _ = _bn_fresh(build, C, rank, g, eps=1e-2, momentum=0.1)
        gname, w = find_gain(mod, C)
        bname, b = find_bias(mod, C, gname)
        shp = _bshape(rank, C)
        x = torch.randn(BN_SHAPES[rank], generator=g) * 2 + torch.randn(shp, generator=g) * 1.5
        return measure_module(mod, x, w, b, C, shp, g, _bn_axes(rank), 1e-2)

    return measured_findings("BatchNorm", measure, _bn_axes(rank), tuple(BN_SHAPES[rank]), 1e-2)


def _bn_running(seen, xs, C, rank, out, names=("running_mean", "running_var")):
    """The running statistics, term by term (running.py); named once, in the first layout that shows them."""
    if any(s is None for s in seen):
        if not any(f.id == "no_running_stats" for f in out):
            out.append(fail("no_running_stats", "训练时没有找到被更新的滑动统计量 (no running statistics)：forward 之后没有哪个 "
                            "非参数张量朝 batch 的均值或方差变化"))
        return
    if any(not f.passed and f.id in RUNNING_IDS for f in out):
        return      # already named in the other layout
    findings, right = running.diagnose(seen, xs, _bn_axes(rank), C, names)
    if right:
        out.append(ok(f"running_stats_{rank}d", "running_mean/running_var 的 3 步更新与 PyTorch 一致"))
    out.extend(findings)
