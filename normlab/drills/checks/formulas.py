"""The fast path: the known wrong formulas and their combinations (unbiased variance × ε outside
the root × no root × (1 + weight) × every subset of reduction axes ...); the one with the fewest
deviations that reproduces the output names the mistakes."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..report import Finding
from .probes import close, fail

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
    raw: Tensor | None = None      # the output as returned, in its own dtype (for the counterexample's "got")
    cache: dict = field(default_factory=dict)

    @property
    def shown(self) -> Tensor | None:
        """What the counterexample shows as "got": the output in the dtype the submission returned."""
        return self.raw if self.raw is not None else self.got


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


def imprecise(probes: list[Probe], within: float = 3e-2) -> float | None:
    """The largest relative error when every probe that differs is finite and within ``within`` of torch
    (a right formula computed in too little precision), else None."""
    errs = [float((p.got - p.expected).norm() / (p.expected.norm() + 1e-30)) for p in probes
            if p.got is not None and p.expected is not None and p.got.shape == p.expected.shape]
    if not errs or not all(math.isfinite(e) for e in errs) or max(errs) >= within:
        return None
    return max(errs)


def axes_text(axes: tuple[int, ...], rank: int | None = None) -> str:
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
        found[0] = fail(found[0].id, found[0].message, p.x_in if p.x_in is not None else p.x, p.expected, p.shown)
    return found
