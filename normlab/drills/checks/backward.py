"""The backward cards (functions): LayerNorm, BatchNorm and RMSNorm backward."""

from __future__ import annotations

import inspect
import math

import torch
from torch import Tensor

from ..report import Finding, SubmissionError
from .backward_fit import fit_grad_x
from .formulas import FIXED_EPS
from .messages import BW_TEXT
from .probes import PROD, _raised, close, fail, guarded, is_timeout, ok, short, step
from .references import _ln_reference, _torch_bn

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
    probes, crashed = [], []
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
        errs: list[Finding] = []
        with step(errs, "returns"):
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
        if errs:                # a crash on one input is one finding; the others are still compared
            crashed.append(p["label"])
            if not _raised(out, "returns"):
                out.extend(errs)
    if crashed:
        raised = next(f for f in out if f.id == "returns" and not f.passed)
        raised.message += (f"（在输入 {'; '.join(crashed)} 上；" +
                           (f"其余 {len(probes)} 组输入照常比较）" if probes else "所有输入都报错）"))
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
        try:
            fitted = fit_grad_x(probes, which_norm) if i == 0 else None
        except Exception:  # noqa: BLE001 - a gradient the fit cannot use (NaN, odd dtype): keep the plain finding
            fitted = None
        if fitted:                      # the general path: the true formula's terms, fitted
            for k, (id, text) in enumerate(fitted.items()):     # one counterexample, on the first
                out.append(fail(id, f"{text}（grad_x 按真实公式的各项做最小二乘拟合得出）",
                                *((p["x"], p["expected"][i], p["got"][i]) if k == 0 else ())))
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
