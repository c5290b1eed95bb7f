"""Diagnosis: each measured property that differs from torch's norm becomes a finding in the candidate's
words, with the fix. The known mistakes (formulas.py) are the fast path; this is what names a mistake
that is in no list — in any combination, because each property is judged on its own."""

from __future__ import annotations

import math

from ..report import Finding, SubmissionError
from .formulas import axes_text
from .probes import fail, is_timeout
from .properties import Props

STAT_WORD = {"LayerNorm": "标准差", "BatchNorm": "标准差", "RMSNorm": "RMS"}


def _close(a: float, b: float, rel: float = 0.02) -> bool:
    return abs(a - b) <= rel * abs(b)


def _degree_text(p: float, d: float, stat: str) -> tuple[str, str]:
    words = {
        0.0: ("no_division", "你的输出随输入等比例放大（次数 1）：没有除以任何统计量；应除以 sqrt(方差 + ε)"),
        -0.5: ("times_rms", f"你的输出随输入放大而放大（次数 2）：你乘上了{stat}，而不是除以它"
                            f"（例如除以了 torch.rsqrt(...)——rsqrt 已经是倒数）；应为 x * torch.rsqrt(… + ε) 或 x / torch.sqrt(… + ε)"),
        1.0: ("no_sqrt", "你的输出随输入放大反而缩小（次数 −1）：除以了方差而不是标准差 (no square root)；"
                         "分母应为 torch.sqrt(var + ε)"),
        2.0: ("var_squared", "你的输出的次数是 −3（输入放大 10 倍，输出缩小 1000 倍）：你除以了 (var + ε)²，"
                             "应为平方根 (var + ε) ** 0.5 (squared instead of square root)"),
        -1.0: ("times_var", "你的输出的次数是 3：你乘上了方差；应除以它的平方根 sqrt(var + ε)"),
        0.25: ("double_sqrt", "你的输出的次数是 1/2：根号开了两次（除以了 sqrt(σ)）；分母应为 sqrt(var + ε)"),
    }
    if p in words:
        return words[p]
    return ("degree", f"输出随输入缩放的次数是 {d:g}（LayerNorm/RMSNorm 是 0：输入放大多少倍，输出都不变）："
                      f"分母相当于统计量的 {p:g} 次方，应为 1/2 次方 (sqrt)")


def property_findings(kind: str, props: Props, expected_axes: tuple[int, ...], shape: tuple[int, ...],
                      eps: float | None) -> dict[str, str]:
    """id -> message for every property of ``props`` that differs from ``kind``'s (LayerNorm, RMSNorm,
    BatchNorm in training mode)."""
    rms = kind == "RMSNorm"
    texts: dict[str, str] = {}
    stat = STAT_WORD[kind]
    if props.axes is not None and tuple(props.axes) != tuple(expected_axes):
        want = "最后 1 维 (dim=-1)" if kind != "BatchNorm" else f"{axes_text(expected_axes)}（每个通道在 batch 和空间维上）"
        if not props.axes:
            texts["wrong_axis"] = (f"改动一个元素时只有它自己的输出变了：你没有在任何维上求统计量 (no reduction)；"
                                   f"{kind} 应在 {want} 上求（输入形状 {shape}）")
        else:
            texts["wrong_axis"] = (f"归约轴不对 (wrong reduction axes)：改动一个元素，{axes_text(props.axes)} 上的输出都变了——"
                                   f"你在这些维上求统计量；{kind} 应在 {want}（输入形状 {shape}）")
    if props.degree is None:
        return texts
    if (props.degree == 0 and props.stat is None and props.axes is not None and (props.misfit or 0) > 0.02
            and (props.spread_cv or 0) > 0.02):
        texts["wrong_statistic"] = (f"输出每组的大小随数据变化：分母既不是标准差 sqrt(var) 也不是 RMS sqrt(mean(x²))"
                                    f"——检查统计量的写法；{kind} 应除以 " +
                                    ("sqrt(mean(x²) + ε)" if rms else "sqrt(mean((x − μ)²) + ε)"))
    if props.p != 0.5:
        texts.update([_degree_text(props.p, props.degree, stat)])
    if props.p == 0:
        return texts
    # the numerator and the statistic
    if props.centred is not None and props.stat is not None:
        if not rms and not props.centred and props.stat == "var":
            texts["not_centered"] = ("分子没有减均值 (the mean is not subtracted)：你算的是 x / sqrt(var + ε)，"
                                     "分母的方差减了均值，分子 x 却没有；应为 (x − μ) / sqrt(var + ε)")
        elif not rms and props.stat == "meansq":
            texts["not_centered"] = ("方差没有减均值：分母用了 mean(x²)，那是 RMSNorm 的统计量；LayerNorm 的方差是 "
                                     "mean((x − μ)²)" + ("，分子也要减 μ" if not props.centred else ""))
        elif rms and props.stat == "var":
            texts["centered"] = ("你除以的是方差 var(x)（torch.var 先减了均值）：RMSNorm 不减均值，分母应为 "
                                 "sqrt(mean(x²) + ε)，即 x.pow(2).mean(-1, keepdim=True) 加 ε 再开方" +
                                 ("；分子也不减均值" if props.centred else ""))
        elif rms and props.centred:
            texts["centered"] = "RMSNorm 不减均值 (no mean subtraction)：应为 y = x / sqrt(mean(x²) + ε) · γ"
    unbiased = False
    if props.scale is not None and not _close(props.scale, 1.0, 1e-3):
        n, p, s = props.n, props.p, props.scale
        for a in (0.0, -p, -1.0, -0.5, 0.5, 1.0):
            for b in (0.0, 1.0):
                if (a, b) == (0.0, 0.0):
                    continue
                if _close(s, n ** a * ((n - 1) / n) ** (p * b), 2e-3):
                    unbiased = b == 1.0
                    if unbiased:
                        texts["unbiased_variance"] = (
                            "用了无偏方差 (unbiased variance, 除以 n−1；torch.var/torch.std 的默认)：输出每组的标准差是 "
                            f"√((n−1)/n) = {math.sqrt((n - 1) / n):.4f} 的倍数，不是 1；" +
                            ("RMSNorm 的统计量是 mean(x²)，除以 n" if rms else
                             "用 x.var(dim, unbiased=False) 或 ((x − μ)²).mean(dim)"))
                    if a == -p:
                        texts["sum_not_mean"] = (f"用了平方和而不是平均 (sum instead of mean)：输出小了 √n 倍（n = {n}）；"
                                                 "x.norm(dim) 是 sqrt(Σx²)，要除以 √n，或直接用 x.pow(2).mean(dim)")
                    elif a == -1.0:
                        texts["wrong_scale"] = (f"输出每组的 RMS 是 1/n = {1 / n:.4g}（n = {n}），应为 1：你乘了 d ** -0.5"
                                                "（或除以了 √d），应乘 d ** 0.5：x / ‖x‖ · √d = x / rms(x)")
                    elif a != 0.0:
                        texts["wrong_scale"] = (f"输出是 torch 结果的 n^{a:g} 倍（n = {n}）：检查 √d、d 之类的系数")
                    break
            else:
                continue
            break
        else:
            texts["wrong_scale"] = f"输出是 torch 结果的 {s:.4g} 倍（每一组都一样）：检查常数系数 (off by a constant factor)"
    # ε
    if props.eps_kind == "none" or (props.eps_kind is None and props.zero_row_finite is False):
        if props.zero_row_finite is False:
            texts["eps_missing"] = ("公式里没有 ε (eps missing)：全零的一组输入输出 NaN/inf（0/0），|x| 很小时分母接近 0；"
                                    "应为 sqrt(var + self.eps)")
        elif eps is not None:
            texts["eps_ignored"] = (f"传入的 eps={eps:g} 不起作用 (the eps argument is ignored)：|x| 很小时输出和没有 ε 一样；"
                                    "用 self.eps，不要写死常数")
    elif props.eps_kind == "outside":
        texts["eps_outside_root"] = ("ε 加在了根号外 (eps outside the square root)：小 |x| 时 ε 的作用随标准差变化；"
                                     "应为 sqrt(var + ε)，不是 sqrt(var) + ε（或 std + ε）")
    elif props.eps_kind == "inside" and eps is not None and props.eps_value is not None:
        v = props.eps_value
        if _close(v, eps * eps, 0.1):
            texts["eps_ignored"] = (f"ε 被平方了 (eps squared)：传入 eps={eps:g}，输出相当于 eps≈{v:.2g} = ε²；"
                                    "应为 sqrt(var + ε)，不是 sqrt(var + ε²)")
        elif _close(v, eps / props.n, 0.1) and not _close(v, eps, 0.1):
            texts["eps_ignored"] = (f"ε 加在了平方和上 (eps added to the sum)：sqrt(Σx² + ε) 相当于 sqrt(mean(x²) + ε/n)，"
                                    f"n = {props.n}；应为 sqrt(mean(x²) + ε)")
        elif not (_close(v, eps, 0.1) or _close(v, eps * (props.n - 1) / props.n, 0.1)):
            texts["eps_ignored"] = (f"传入 eps={eps:g}，输出却相当于 eps≈{v:.2g} (the eps argument is ignored)：用 self.eps，"
                                    "不要把常数写死")
    return texts


GAIN_TEXT = {"1+w": "乘的是 (1 + γ)（Gemma 的写法，γ 初值 0）：torch 乘 γ 本身（初值 1）",
             "none": "没有乘 γ (the gain is not applied)：应为 y = γ·x̂ + β",
             "w²": "γ 乘了两次 (gain applied twice)：应为 y = γ·x̂ + β",
             "+w": "γ 是加上去的，不是乘上去的：应为 y = γ·x̂ + β",
             "other": "γ 的作用与 y = γ·x̂ + β 不一致（γ 应在归一化之后逐元素相乘）"}
BIAS_TEXT = {"none": "没有加 β (the bias is not applied)：应为 y = γ·x̂ + β",
             "×b": "β 是乘上去的，不是加上去的：应为 y = γ·x̂ + β",
             "−b": "减了 β：应为 y = γ·x̂ + β",
             "2b": "β 加了两次：应为 y = γ·x̂ + β",
             "other": "β 的作用与 y = γ·x̂ + β 不一致（β 应在最后加上，在归一化之后）"}


def affine_findings(found: dict[str, str]) -> dict[str, str]:
    """id -> message for γ/β acting differently from torch's y = γ·x̂ + β."""
    texts = {}
    if found.get("gain", "w") != "w":
        texts["one_plus_weight" if found["gain"] == "1+w" else "gain_use"] = GAIN_TEXT[found["gain"]]
    if found.get("bias", "b") != "b":
        texts["bias_use"] = BIAS_TEXT[found["bias"]]
    return texts


def as_findings(texts: dict[str, str]) -> list[Finding]:
    """One interview finding per property that differs, each saying how many there are."""
    both = "（同时有 " + str(len(texts)) + " 处错误）" if len(texts) > 1 else ""
    return [fail(i, t + both) for i, t in texts.items()]


def measured_findings(kind: str, measure, axes: tuple[int, ...], shape: tuple[int, ...], eps: float) -> list[Finding]:
    """The general path of every norm's check: ``measure()`` builds the candidate's module and measures it
    as a black box (properties.measure_module: ``(found, props)``, or None for a random or non-finite
    output); each property that differs from torch's is one finding. A module that cannot be measured
    adds nothing (the plain finding stays); a time-out still stops the check."""
    try:
        measured = measure()
        if measured is None:
            return []       # a random or non-finite output: no property can be measured on it
        found, props = measured
    except SubmissionError as err:
        if is_timeout(err):
            raise
        return []
    except Exception:  # noqa: BLE001 - an output the measurements cannot use: keep the plain finding
        return []
    return as_findings({**property_findings(kind, props, axes, shape, eps), **affine_findings(found)})
