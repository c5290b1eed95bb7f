"""A backward pass judged by its terms: grad_x fitted by least squares on the terms of the textbook formula and
on the slips of each term, so the report can say which term is missing, extra, sign-flipped, summed (or not
summed) over the wrong axis, or computed without ε; a parameter's gradient fitted on what it may have been
built from (x̂, x, y, an x̂ without ε ...).

With x̂ = (x − μ)·r, r = 1/sqrt(σ² + ε), ĝ = g·γ and the statistic's groups s (geometry.py):

    grad_x = r·ĝ − r·mean_s(ĝ) − r·x̂·mean_s(ĝ·x̂)          (RMSNorm: no mean term; x̂ = x·r)

Offered beside the three terms: mean_o(ĝ), x̂·mean_o(ĝ·x̂) (the other grouping: the batch axis for LN, the
features for BN, each channel alone for GN), x̂·(ĝ·x̂) with no sum at all, γ·mean_s(g) and x̂·γ·mean_s(g·x̂)
(γ pulled out of a sum it varies in) and g without γ. Each term class (direct, mean, variance) may carry its
own r: with ε, without it, or with ε outside the root. Each probe is fitted on its own, so a coefficient that
grows with the group size (a sum where a mean is meant) shows."""

from __future__ import annotations

import itertools

import torch

from .geometry import Geometry

EPS_KINDS = ("inside", "none", "outside", "unbiased")      # the r each term class carries
CLASS_WORDS = {"d": "直接项 r·ĝ", "m": "均值项 r·mean(ĝ)", "v": "方差项 r·x̂·mean(ĝ·x̂)"}


def _terms(p: dict, geo: Geometry, variant: dict[str, str]) -> dict[str, torch.Tensor]:
    x, gy, eps = p["x"], p["gy"], p["eps"]
    wb = geo.wb(p["w"])
    gh = gy * wb
    r = {c: geo.stats(x, eps, var="unbiased") if variant[c] == "unbiased" else geo.stats(x, eps, eps_kind=variant[c])
         for c in "dmv"}
    xc_v, r_v = r["v"]
    xh = xc_v * r_v
    rd, rm = r["d"][1], r["m"][1]
    terms = {"dout": rd * gh, "dout_no_gamma": rd * gy, "var_s": r_v * xh * geo.mean_s(gh * xh),
             "var_o": r_v * xh * geo.mean_o(gh * xh), "var_elem": r_v * xh * gh * xh}
    terms.update(mean_s=rm * geo.mean_s(gh), mean_o=rm * geo.mean_o(gh))      # RMSNorm: expected 0 (an extra term)
    if geo.norm != "batchnorm":          # γ varies inside a statistic's group: pulling it out changes the value
        terms["var_s_gamma_out"] = r_v * xh * wb * geo.mean_s(gy * xh)
        if geo.center:
            terms["mean_s_gamma_out"] = rm * wb * geo.mean_s(gy)
    return terms


def _lstsq(A: torch.Tensor, b: torch.Tensor) -> torch.Tensor | None:
    sol = torch.linalg.lstsq(A, b[:, None], driver="gelsd").solution[:, 0]
    return sol if float((A @ sol - b).norm()) <= 1e-7 * (float(b.norm()) + 1e-30) else None


def _fit(probes, geos, variant, power):
    coefs = []
    for p, geo in zip(probes, geos):
        t = _terms(p, geo, variant)
        names = list(t)
        A = torch.stack([t[n].flatten() for n in names], 1)
        r = geo.stats(p["x"], p["eps"])[1]
        sol = _lstsq(A, (p["got"][0] * r ** (1 - power)).flatten())
        if sol is None:
            return None
        coefs.append(dict(zip(names, sol.tolist())))
    return coefs


def nice(vals: list[float], sizes: list[int]) -> str | None:
    """A coefficient in words when it is the same on every probe: "k", "k·n" (a sum where a mean is meant) or
    "k/n"; k a multiple of 1/4."""
    for label, f in (("", lambda n: 1), ("·n", lambda n: n), ("/n", lambda n: 1 / n)):
        vs = [v / f(n) for v, n in zip(vals, sizes)]
        k = round(vs[0] * 4) / 4
        if all(abs(v - k) < 1e-6 * max(1, abs(k)) + 1e-8 for v in vs):
            if label and k == 0:
                continue
            return f"{k:g}{label}"
    return None


R_POWER = {0: "少乘了 1/σ (rstd)：grad_x = (1/σ)·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂))",
           -1: "乘的是 σ 而不是 1/σ（std 与 rstd 弄反了）",
           2: "1/σ 乘了两次（x̂ 已经除过 σ，外面只再乘一次 1/σ）",
           3: "乘了 1/σ³：只有方差项里出现 1/σ³ 的写法（对 σ² 求导）要把 (x − μ) 换回 x̂ = (x − μ)/σ"}


def fit_grad_x(probes: list[dict], geos: list[Geometry]) -> dict[str, str] | None:
    """id -> message naming each term of grad_x that is wrong; None when the terms do not explain the
    submission's grad_x (then nothing is claimed)."""
    if not all(bool(torch.isfinite(p["got"][0]).all()) for p in probes):
        return None
    variants = sorted(itertools.product(EPS_KINDS, repeat=3), key=lambda v: sum(k != "inside" for k in v))
    tries = [(1, v) for v in variants] + [(pw, ("inside",) * 3) for pw in (0, -1, 2, 3)]
    for power, v in tries:
        if not geos[0].center and v[1] != "inside":
            continue
        variant = dict(zip("dmv", v))
        coefs = _fit(probes, geos, variant, power)
        if coefs is not None:
            texts = _words(coefs, geos, variant)
            if texts is not None:
                return {**({} if power == 1 else {"rstd_power": R_POWER[power]}), **texts}
    return None


def _words(coefs, geos, variant) -> dict[str, str] | None:
    geo = geos[0]
    right_axis, wrong_axis = geo.axes_words()
    size = {"s": [g.n_s for g in geos], "o": [g.n_o for g in geos], "": [1 for _ in geos]}

    def form(name):
        if name not in coefs[0]:
            return "0"
        return nice([c[name] for c in coefs], size["o" if name.endswith("_o") else "s"])

    kd, kg = form("dout"), form("dout_no_gamma")
    if kd is None or kg is None:
        return None
    texts: dict[str, str] = {}
    scale = 1.0                      # an overall factor on every term (said once)
    if kg == "0" and kd not in ("1", "0") and "·" not in kd and "/" not in kd:
        scale = float(kd)
        texts["constant_factor"] = (f"grad_x 整体差了一个因子 ×{kd}（每一项都乘了它）：检查求和/求平均、以及 1/N、2 之类的系数")
    elif (kd, kg) == ("0", "1"):
        texts["term_coefficient"] = "第一项少乘了 γ：应为 ĝ = g·γ；"
    elif (kd, kg) != ("1", "0"):
        texts["term_coefficient"] = f"第一项 ĝ 的系数是 {kd}，应为 1；"

    def add(id, text):
        texts[id] = texts.get(id, "") + text

    for cls, term, what in (("m", "mean", "均值项 −r·mean(ĝ)"), ("v", "var", "方差项 −r·x̂·mean(ĝ·x̂)")):
        ks, ko, kg_ = form(f"{term}_s"), form(f"{term}_o"), form(f"{term}_s_gamma_out")
        ke = form("var_elem") if term == "var" else "0"
        if None in (ks, ko, kg_, ke):
            return None
        want = -scale if (term == "var" or geo.center) else 0.0
        if ko != "0":
            add("term_axis", f"{what}的平均在 {wrong_axis} 上求{'（用了求和 sum）' if ko.endswith('·n') else ''}，"
                             f"应在 {right_axis} 上（和前向的统计量同一组）；")
        if ke != "0":
            add("term_not_summed", f"{what}没有求和/平均：x̂·(ĝ·x̂) 是逐元素相乘，应在 {right_axis} 上对 ĝ·x̂ 求平均"
                                   f"再乘 x̂{'' if ke.startswith('-') else '（而且符号是 +，应为 −）'}；")
        if kg_ != "0":
            add("gamma_outside_sum", f"{what}里 γ 被提到了求和外面：mean(g·γ) ≠ γ·mean(g)，γ 在统计量的组内变化，"
                                     "要先乘进 ĝ = g·γ 再求平均；")
        if ko != "0" or ke != "0" or kg_ != "0":
            continue
        if ks == "0" and want:
            texts[f"missing_{term}_term"] = f"少了{what} (missing the {'mean' if term == 'mean' else 'variance'} term)"
            texts[f"missing_{term}_term"] += "：μ 也依赖 x；" if term == "mean" else "：σ² 也依赖 x；"
        elif want == 0 and ks != "0":
            add("extra_term", f"多了{what}：RMSNorm 不减均值，没有这一项；")
        elif ks.endswith("·n"):
            add("term_coefficient", f"{what}用了求和 sum，没有除以组的大小 n（系数 {ks}）：应为平均 mean；")
        elif ks != "0" and abs(float(ks.split("/")[0]) + want) < 1e-9 and "/" not in ks:
            add("term_sign", f"{what}的符号反了：应为 −，你的是 +；")
        elif ks != f"{want:g}":
            add("term_coefficient", f"{what}的系数是 {ks}（n 为组的大小），应为 {want:g}；")
    for cls, kind in variant.items():
        if kind == "none":
            add("eps_missing", f"grad_x 的{CLASS_WORDS[cls]}里的 r 没有 ε：r = 1/sqrt(var + ε)，不是 1/sqrt(var)；")
        elif kind == "outside":
            add("eps_outside_root", f"grad_x 的{CLASS_WORDS[cls]}里的 ε 在根号外：r = 1/sqrt(var + ε)；")
        elif kind == "unbiased":
            add("unbiased_variance", f"grad_x 的{CLASS_WORDS[cls]}里的 r 用了无偏方差 (n−1)：前向的方差除以 n；")
    return {k: v.rstrip("；") for k, v in texts.items()}


def fit_param(i: int, probes: list[dict], geos: list[Geometry], name: str) -> dict[str, str] | None:
    """grad_weight (i = 1) or grad_bias (i = 2) explained as c·Σ of one thing (x̂, x, x − μ, y, an x̂ without ε
    ...): id -> message, or None when no single thing explains it."""
    bases = ["g"] if i == 2 else ["xhat", "x", "xc", "y", "xhat_noeps", "xhat_outside", "xhat_unbiased"]
    for base in bases:
        cs = []
        for p, geo in zip(probes, geos):
            x, gy, eps = p["x"], p["gy"], p["eps"]
            kind = {"xhat_noeps": ("biased", "none"), "xhat_outside": ("biased", "outside"),
                    "xhat_unbiased": ("unbiased", "inside")}.get(base, ("biased", "inside"))
            xc, r = geo.stats(x, eps, *kind)
            what = {"g": gy, "x": gy * x, "xc": gy * xc, "y": gy * xc * r * geo.wb(p["w"])}.get(base, gy * xc * r)
            t, got = geo.psum(what), p["got"][i]
            c = float((got * t).sum() / (t * t).sum()) if float((t * t).sum()) > 0 else float("nan")
            if not (c == c) or float((got - c * t).norm()) > 1e-7 * (float(got.norm()) + 1e-30):
                break
            cs.append(c)
        else:
            k = nice(cs, [int(p["x"].numel() // g.features) for p, g in zip(probes, geos)])
            if k is None:
                return None
            texts = {}
            if k == "1/n":
                texts["param_mean_not_sum"] = f"{name} 用了平均 mean，应为求和 sum（参数的梯度是所有位置之和）"
            elif k != "1":
                texts["constant_factor"] = f"{name} 差了一个因子 ×{k}（n 为求和的元素个数）"
            word = {"x": ("param_from_x", f"{name} 用了 x 而不是 x̂：dγ = Σ g·x̂（归一化之后的值），不是 Σ g·x"),
                    "xc": ("param_from_x", f"{name} 用了 x − μ 而不是 x̂（少乘了 r = 1/σ）：dγ = Σ g·x̂"),
                    "y": ("grad_weight_uses_y", f"{name} 应为 Σ g·x̂（归一化之后、乘 γ 之前的值），不是 Σ g·y"),
                    "xhat_noeps": ("eps_missing", f"{name} 里的 x̂ 没有 ε：x̂ = (x − μ)/sqrt(var + ε)"),
                    "xhat_outside": ("eps_outside_root", f"{name} 里的 x̂ 的 ε 在根号外：x̂ = (x − μ)/sqrt(var + ε)"),
                    "xhat_unbiased": ("unbiased_variance", f"{name} 里的 x̂ 用了无偏方差 (n−1)：前向是有偏的 (除以 n)")}
            if base in word:
                texts[word[base][0]] = word[base][1]
            return texts or None
    return None
