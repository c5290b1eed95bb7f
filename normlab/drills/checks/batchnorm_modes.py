"""BatchNorm: eval mode, options (eps, momentum) and the production checks."""

from __future__ import annotations

import torch
from torch import Tensor

from ..report import SubmissionError
from .keepdim import broadcast_finding
from .messages import MISTAKE_TEXT, is_broadcast_error
from .probes import (PROD, _Skip, close, fail, find_bias, find_gain, find_stats, guarded, is_timeout, ok, output_of,
                     set_mode, set_tensor, step)
from .references import _bn_axes, _torch_bn

BN_SHAPES = {2: (16, 3), 4: (4, 3, 5, 6)}
BN_STEPS = [(2.0, 1.0), (1e-3, 0.0), (30.0, -3.0)]     # spread from 1e-3 (eps matters) to ~30


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
        x2 = x.clone()
        x2[1:] = x2[1:] * 3 + 1                      # change every sample but the first
        with torch.no_grad():
            depends = not close(output_of(mod, x2)[:1], got[:1].detach())
        for k, (id, text) in enumerate(_eval_diagnosis(x, got, st, wv, bv, 1e-5, depends)):
            out.append(fail(id, text, *((x, exp, got) if k == 0 else ())))
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


def _eval_diagnosis(x, got, st, wv, bv, eps, depends=True) -> list[tuple[str, str]]:
    """What the eval output does, per channel: it is a·x + b when it uses fixed statistics; compare a and b
    with torch's γ/sqrt(running_var + ε) and β − running_mean·a, and never propose what the code already
    does (issue 26: a report told a learner to normalise with the running statistics — which the code did;
    it had dropped γ and β). Each slip is its own (id, text) (issue 37)."""
    C = x.shape[1]
    xd, yd = x.double().transpose(0, 1).reshape(C, -1), got.detach().double().transpose(0, 1).reshape(C, -1)
    xc = xd - xd.mean(1, keepdim=True)
    a = (xc * yd).sum(1) / (xc * xc).sum(1)
    b = yd.mean(1) - a * xd.mean(1)
    if float((yd - a[:, None] * xd - b[:, None]).abs().max()) > 1e-4 * (float(yd.abs().max()) + 1e-12):
        if depends:
            return [("eval_mode", "eval 模式的输出不是每个通道上 x 的仿射函数：它还依赖同 batch 的其它样本（改动其它样本，"
                                  "第一个样本的输出也变了）——eval 要用固定的 running_mean/running_var，不要用 batch 统计量")]
        return [("eval_mode", "eval 模式的输出不是每个通道上 x 的仿射函数 a·x + b（用固定的 running_mean/running_var 时应是）；"
                              "它不依赖同 batch 的其它样本：检查 eval 分支的公式")]
    rm, rv = st
    w, bb = wv.double(), bv.double()
    near = lambda u, v: bool(torch.allclose(u, v, rtol=2e-3, atol=1e-6 * (float(v.abs().max()) + 1)))   # noqa: E731
    scales = {"torch": 1 / torch.sqrt(rv + eps), "no_eps": 1 / torch.sqrt(rv), "eps_outside": 1 / (rv.sqrt() + eps),
              "no_sqrt": 1 / (rv + eps)}
    for how, r in scales.items():
        for gam, bet in ((True, True), (False, False), (True, False), (False, True)):
            sa = r * (w if gam else 1)
            if near(a, sa) and near(b, (bb if bet else 0) - rm * sa):
                dropped = [n for n, keep in (("γ", gam), ("β", bet)) if not keep]
                parts = []
                if dropped:
                    parts.append(("eval_affine",
                                  f"eval 模式下漏了 {' 和 '.join(dropped)} (the affine {'weight' if not gam else ''}"
                                  f"{' and ' if len(dropped) == 2 else ''}{'bias' if not bet else ''} dropped in eval)："
                                  "你已经用 running_mean/running_var 归一化了，但还要乘 γ、加 β：y = γ·x̂ + β，训练和推理都一样"))
                if how != "torch":
                    parts.append({"no_eps": ("eval_eps_missing", "eval 分支的分母少了 ε (eps dropped at eval)："
                                                                 "sqrt(running_var + ε)，不是 sqrt(running_var)"),
                                  "eps_outside": ("eval_mode", "eval 分支的 ε 在根号外：应为 sqrt(running_var + ε)"),
                                  "no_sqrt": ("eval_mode", "eval 分支除以了 running_var 而不是它的平方根")}[how])
                both = f"（同时有 {len(parts)} 处错误）" if len(parts) > 1 else ""
                return [(id, text + both) for id, text in parts]
    return [("eval_mode", f"eval 模式下每个通道的输出是 a·x + b，a = {', '.join(f'{v:.4g}' for v in a.tolist())}；torch 的 "
                          f"a = γ/sqrt(running_var + ε) = {', '.join(f'{v:.4g}' for v in (w * scales['torch']).tolist())}"
                          "，b = β − running_mean·a")]


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
                        f"面试级检查只在 {LAYOUT[supported[0]]} 上做；torch 的 BatchNorm1d/2d 两种都有"
                        + ("。" + broadcast_finding(why[r]).message if is_broadcast_error(why.get(r, "")) else ""), level=PROD))
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
