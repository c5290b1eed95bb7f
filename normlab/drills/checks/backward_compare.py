"""Each returned gradient against float64 autograd, and the name of what differs: a slip in the statistics
every gradient shares (unbiased variance, ε missing / outside / fixed, a dropped term, statistics treated as
constants: the search), a constant factor, or, for grad_x, the terms fitted one by one (backward_fit), for a
parameter's gradient what it was built from. Nothing is named that the numbers do not show."""

from __future__ import annotations

import math

import torch

from .backward_fit import fit_grad_x, fit_param
from .formulas import FIXED_EPS
from .geometry import Geometry
from .messages import BW_TEXT
from .probes import close, fail, ok


def candidate(p: dict, var_kind: str, eps_kind, form: str) -> tuple:
    """(grad_x, grad_w[, grad_b]) of one candidate: the textbook formula with the given slips, or
    ``form == "autograd"``: autograd of the forward with those slips."""
    geo: Geometry = p["geo"].swapped() if form == "other_axes" else p["geo"]
    x, w, gy, eps = p["x"], p["w"], p["gy"], p["eps"]
    e, kind = (eps_kind, "inside") if isinstance(eps_kind, float) else (eps, eps_kind if eps_kind != "given" else "inside")
    if form == "autograd":
        xr, wr = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
        br = torch.zeros_like(w, requires_grad=True)
        xc, r = geo.stats(xr, e, var_kind, kind)
        y = xc * r * geo.wb(wr) + (geo.wb(br) if geo.center else 0)
        grads = torch.autograd.grad((y * gy).sum(), [xr, wr, br] if geo.center else [xr, wr], allow_unused=True)
        return tuple(torch.zeros_like(w) if gr is None else gr for gr in grads)
    xc, r = geo.stats(x, e, var_kind, kind)
    xh, gh = xc * r, gy * geo.wb(w)
    mean = geo.mean_s
    if form == "wrong_divisor":
        mean = lambda t: geo.mean_s(t) * geo.n_s / geo.n_o          # noqa: E731 - 1/N for 1/D
    term1 = mean(gh) if geo.center and form not in ("missing_mean_term", "stats_as_constants") else 0
    term2 = xh * mean(gh * xh) if form not in ("missing_var_term", "stats_as_constants") else 0
    gx = r * (gh - term1 - term2)
    gw = geo.psum(gy * xh * (geo.wb(w) if form == "grad_weight_uses_y" else 1))
    if form == "other_axes":            # the parameters keep the card's own layout
        gw, gb = p["geo"].psum(gy * xh), p["geo"].psum(gy)
        return (gx, gw, gb) if p["geo"].center else (gx, gw)
    return (gx, gw, geo.psum(gy)) if geo.center else (gx, gw)


def _candidates(which_norm):
    eps_kinds = ["given", "none", "outside", *FIXED_EPS]
    forms = ["full", "autograd", "missing_mean_term", "missing_var_term", "stats_as_constants", "wrong_divisor",
             "grad_weight_uses_y", "other_axes"]
    if which_norm == "rmsnorm":
        forms = [f for f in forms if f not in ("missing_mean_term", "stats_as_constants")]
    cands = [(v, e, f) for v in ("biased", "unbiased") for f in forms for e in eps_kinds]
    cands.sort(key=lambda c: (c[0] != "biased") + (c[1] != "given") + (c[2] not in ("full", "autograd")))
    return [c for c in cands if c[:2] != ("biased", "given") or c[2] not in ("full", "autograd")]


def _factor(probes, i) -> str | None:
    """"×k" (or "×k·N") when got = k · expected on every probe."""
    ks = []
    for q in probes:
        e, r = q["expected"][i], q["got"][i]
        ks.append(float((r * e).sum() / (e * e).sum()) if float((e * e).sum()) > 0 else float("nan"))
    if not (all(math.isfinite(k) for k in ks) and all(close(q["got"][i], k * q["expected"][i], 1e-6)
                                                       for q, k in zip(probes, ks))):
        return None
    for label, f in [("", lambda q: 1.0), ("1/N", lambda q: q["x"].shape[0]), ("N", lambda q: 1 / q["x"].shape[0]),
                     ("1/D", lambda q: q["x"].shape[-1]), ("D", lambda q: 1 / q["x"].shape[-1])]:
        c = [k * f(q) for q, k in zip(probes, ks)]
        if all(abs(v - c[0]) <= 1e-6 * max(1, abs(c[0])) for v in c):
            return f"×{c[0]:.4g}" if not label else f"×{label}" if abs(c[0] - 1) < 1e-6 else f"×{c[0]:.4g}·{label}"
    return None


def compare(probes, names, which_norm, out):
    cands = _candidates(which_norm)
    cache: dict = {}

    def grads_of(c, k):
        if (c, k) not in cache:
            cache[(c, k)] = candidate(probes[k], *c)
        return cache[(c, k)]

    diagnosed: dict[str, list[str]] = {}
    first: dict[str, int] = {}          # the gradient a diagnosis was first made on (for the example)
    texts: dict[str, str] = {}
    geos = [p["geo"] for p in probes]
    for i, name in enumerate(names):
        if any(q["got"][i] is None for q in probes):
            continue                     # None or a wrong shape: already a finding of its own
        bad = [p for p in probes if not close(p["got"][i], p["expected"][i], 1e-6)]
        if not bad:
            out.append(ok(name, f"{name} 与 float64 autograd 一致（{len(probes)} 组输入：eps 1e-5/1e-2，|x| 1e-3…1e3）"))
            continue
        found = next((c for c in cands if all(close(q["got"][i], grads_of(c, k)[i], 1e-6) for k, q in enumerate(probes))),
                     None)
        named: dict[str, str] = {}
        if found:
            ids = (["unbiased_variance"] if found[0] == "unbiased" else []) + \
                ([{"none": "eps_missing", "outside": "eps_outside_root"}.get(found[1], "eps_ignored")]
                 if found[1] != "given" else []) + ([found[2]] if found[2] not in ("full", "autograd") else [])
            for id in ids:
                diagnosed.setdefault(id, []).append(name)
                first.setdefault(id, i)
            continue
        if all(not bool(q["got"][i].any()) for q in probes):
            out.append(fail(f"{name}_zero", f"{name} 全是 0 (all zeros)：它应为 {'Σ g·x̂' if i == 1 else 'Σ g' if i == 2 else '非零的梯度'}",
                            bad[0]["x"], bad[0]["expected"][i], bad[0]["raw_got"][i]))
            continue
        factor = _factor(probes, i)
        if factor:
            named = {"constant_factor": f"{name} {factor}（N 为行数，D 为列数）" if "N" in factor or "D" in factor
                     else f"{name} {factor}"}
            diagnosed.setdefault("constant_factor", []).append(named["constant_factor"])
            first.setdefault("constant_factor", i)
            continue
        try:
            named = (fit_grad_x(probes, geos) if i == 0 else fit_param(i, probes, geos, name)) or {}
        except Exception:  # noqa: BLE001 - a gradient the fit cannot use (NaN, odd dtype): keep the plain finding
            named = {}
        p = bad[0]
        if named:
            for k, (id, text) in enumerate(named.items()):      # one counterexample, on the first
                how = "（grad_x 按真实公式的各项做最小二乘拟合得出）" if i == 0 else ""
                out.append(fail(id, text + how, *((p["x"], p["expected"][i], p["raw_got"][i]) if k == 0 else ())))
            continue
        labels = [q["label"] for q in bad]
        out.append(fail(name, f"{name} 与 float64 autograd 不一致；不一致的输入：{'; '.join(labels)}",
                        p["x"], p["expected"][i], p["raw_got"][i]))
    for id, where in diagnosed.items():
        if id == "constant_factor":
            text = (f"梯度差了一个常数因子 (off by a constant factor)：{', '.join(where)}。检查求和/求平均、"
                    "以及 1/N、2 之类的系数")
        elif id == "other_axes":
            right, wrong = probes[0]["geo"].axes_words()
            text = (f"反向传播里的统计量（μ、σ 和各项的平均）在 {wrong} 上求，应在 {right} 上 (statistics over the wrong "
                    f"axis)（{', '.join(where)}）")
        else:
            bn = which_norm == "batchnorm"
            right = ("LayerNorm/RMSNorm 的平均在特征维上 (除以 D)，不是 batch 大小 N (divided by the batch size N instead of D)"
                     if not bn else "BatchNorm 的平均在 batch 维上 (除以 N)，不是特征数 D (divided by D instead of the batch size N)")
            text = BW_TEXT[id].format(right=right) + f"（{', '.join(where)}）"
        i = first[id]
        bad_p = next((q for q in probes if not close(q["got"][i], q["expected"][i], 1e-6)), probes[0])
        out.append(fail(id, text, bad_p["x"], bad_p["expected"][i], bad_p["raw_got"][i]))
    return texts
