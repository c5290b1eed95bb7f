"""A backward pass judged by its terms: grad_x fitted by least squares on the terms of the true formula,
each along both axes, so the report can say which term has the wrong coefficient or the wrong axis.

With x̂ = (x − μ)/σ, ĝ = g·γ and the statistics over axis s (the feature axis for LayerNorm/RMSNorm,
the batch axis for BatchNorm; o is the other axis):

    σ · grad_x = 1·ĝ − 1·mean_s(ĝ) − 1·x̂·mean_s(ĝ·x̂)          (RMSNorm: no mean term; x̂ = x/rms)

The fit also offers mean_o(ĝ), x̂·mean_o(ĝ·x̂) (a term along the wrong axis), γ·mean_s(g) and
x̂·γ·mean_s(g·x̂) (γ pulled out of a sum over features, where γ varies) and g without γ. Each probe is
fitted on its own, so a coefficient that grows with the axis length (a sum where a mean is meant) shows."""

from __future__ import annotations

import torch

AXIS_WORDS = {0: "batch 轴 dim=0", -1: "特征轴 dim=-1"}


def _terms(p: dict, which_norm: str) -> dict[str, torch.Tensor]:
    x, w, gy, eps = p["x"], p["w"], p["gy"], p["eps"]
    s = 0 if which_norm == "batchnorm" else -1
    o = -1 if s == 0 else 0
    center = which_norm != "rmsnorm"
    xc = x - x.mean(s, keepdim=True) if center else x
    r = 1 / torch.sqrt(xc.pow(2).mean(s, keepdim=True) + eps)
    xh, gh = xc * r, gy * w
    terms = {"dout": gh, "dout_no_gamma": gy, "var_s": xh * (gh * xh).mean(s, keepdim=True),
             "var_o": xh * (gh * xh).mean(o, keepdim=True)}
    if center:
        terms.update(mean_s=gh.mean(s, keepdim=True).expand_as(x), mean_o=gh.mean(o, keepdim=True).expand_as(x))
    if s == -1:                              # γ varies along the features: pulling it out of the sum changes the value
        terms["var_s_gamma_out"] = xh * w * (gy * xh).mean(s, keepdim=True)
        if center:
            terms["mean_s_gamma_out"] = w * gy.mean(s, keepdim=True)
    return {"r": r, **terms}


R_POWER = {0: "少乘了 1/σ (rstd)：grad_x = (1/σ)·(ĝ − mean(ĝ) − x̂·mean(ĝ·x̂))",
           -1: "乘的是 σ 而不是 1/σ（std 与 rstd 弄反了）",
           2: "1/σ 乘了两次（x̂ 已经除过 σ，外面只再乘一次 1/σ）",
           3: "乘了 1/σ³：只有方差项里出现 1/σ³ 的写法（对 σ² 求导）要把 (x − μ) 换回 x̂ = (x − μ)/σ"}


def _fit(probes: list[dict], which_norm: str, power: int):
    """Per-probe least-squares coefficients of σ^power · grad_x on the terms, or None when they do not fit."""
    s = 0 if which_norm == "batchnorm" else -1
    o = -1 if s == 0 else 0
    coefs, sizes = [], []
    for p in probes:
        t = _terms(p, which_norm)
        r = t.pop("r")
        names = list(t)
        A = torch.stack([t[n].flatten() for n in names], 1)
        b = (p["got"][0] / r ** power).flatten()
        sol = torch.linalg.lstsq(A, b[:, None], driver="gelsd").solution[:, 0]
        if float((A @ sol - b).norm()) > 1e-6 * (float(b.norm()) + 1e-30):
            return None
        coefs.append(dict(zip(names, sol.tolist())))
        sizes.append({"s": p["x"].shape[s], "o": p["x"].shape[o]})
    return coefs, sizes


def fit_grad_x(probes: list[dict], which_norm: str) -> dict[str, str] | None:
    """id -> message naming each term of grad_x whose coefficient or axis is wrong (and a wrong power of
    1/σ outside the bracket); None when the terms do not explain the submission's grad_x (then nothing
    is claimed)."""
    if not all(bool(torch.isfinite(p["got"][0]).all()) for p in probes):
        return None
    s = 0 if which_norm == "batchnorm" else -1
    o = -1 if s == 0 else 0
    for power in (1, 0, -1, 2, 3):
        fitted = _fit(probes, which_norm, power)
        if fitted:
            break
    else:
        return None
    coefs, sizes = fitted
    extra = {} if power == 1 else {"rstd_power": R_POWER[power]}
    want = {"dout": 1.0, "mean_s": -1.0 if which_norm != "rmsnorm" else 0.0, "var_s": -1.0}

    def form(name: str) -> str | None:
        """The coefficient in words when it is the same on every probe: "k" (a mean) or "k·n" (a sum)."""
        ax = "o" if name.endswith("_o") else "s"
        for per_n, label in ((False, ""), (True, "n")):
            vals = [c[name] / (z[ax] if per_n else 1) for c, z in zip(coefs, sizes)]
            k = round(vals[0])
            if all(abs(v - k) < 1e-6 * max(1, abs(k)) + 1e-8 for v in vals):
                return f"{k}{'·' + label if label else ''}"
        return None

    texts: dict[str, str] = {}
    for term, what in (("mean_s", "均值项 mean(ĝ) "), ("var_s", "方差项 x̂·mean(ĝ·x̂) ")):
        other, out_ = term.replace("_s", "_o"), term + "_gamma_out"
        k_s, k_o, k_g = form(term) if term in coefs[0] else "0", form(other) if other in coefs[0] else "0", \
            form(out_) if out_ in coefs[0] else "0"
        if k_s is None or k_o is None or k_g is None:
            return None
        right = want[term]
        if k_s == f"{int(right)}" and k_o == "0" and k_g == "0":
            continue
        sum_word = lambda k: "（用了求和 sum，没有除以轴长 n）" if k.endswith("·n") else ""      # noqa: E731
        if k_o != "0":
            texts.setdefault("term_axis", "")
            texts["term_axis"] += (f"{what}在 {AXIS_WORDS[o]} 上求了{sum_word(k_o)}，应在 {AXIS_WORDS[s]} 上"
                                   "（和前向的统计量同一个轴）；")
        if k_g != "0":
            texts.setdefault("gamma_outside_sum", "")
            texts["gamma_outside_sum"] += (f"{what}里 γ 被提到了求和外面{sum_word(k_g)}：mean(g·γ) ≠ γ·mean(g)，"
                                           "γ 沿特征轴变化，要先乘进 ĝ = g·γ 再求平均；")
        if k_o == "0" and k_g == "0" and k_s != f"{int(right)}":
            texts.setdefault("term_coefficient", "")
            texts["term_coefficient"] += (f"{what}的系数是 {k_s}（n 为轴长），应为 {int(right)}"
                                          f"{sum_word(k_s)}；" if right else f"{what}不该出现（系数 {k_s}）；")
    kd, kg = form("dout"), form("dout_no_gamma")
    if kd is None or kg is None:
        return None
    if (kd, kg) != ("1", "0"):
        texts["term_coefficient"] = texts.get("term_coefficient", "") + (
            "第一项少乘了 γ：应为 ĝ = g·γ；" if (kd, kg) == ("0", "1") else f"第一项 ĝ 的系数是 {kd}，应为 1；")
    return {**extra, **{k: v.rstrip("；") for k, v in texts.items()}}
