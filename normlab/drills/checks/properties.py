"""Properties of a forward pass measured as a black box: no list of mistakes, only experiments on the
submission's output, each compared with what torch's norm gives.

    groups      perturb one element and see which outputs move: the elements that share statistics
                (the reduction axes, whatever the code wrote)
    degree      f(c·x) against f(x) for c = 10, 100, 1000 (where ε is negligible): the output scales like
                c^d. A norm has d = 0; x·RMS has 2, x/var has −1, x/(var+ε)² has −3. With d = 1 − 2p the
                statistic appears as stat^(−p) (p = 1/2 for a square root).
    centring    the numerator: are the output groups centred (x − μ) or not (x)?
    statistic   which statistic divides: the centred variance or the mean square — the one that makes the
                output's spread the same in every group
    scale       that spread: 1 for torch's norm; √((n−1)/n) for an unbiased variance; 1/√n for a sum in
                place of a mean; 1/n for x/‖x‖·n^−½ ...
    ε           at small |x| (c down to ~1e-3) the statistic is comparable to ε, and the output falls
                short of the power law: h = shortfall^(−1/p) − 1 falls like c^−2 when ε is inside the root
                (sqrt(var + ε)), like c^−1 when it is added to the standard deviation (σ + ε), and is 0
                without ε (then a zero group gives NaN/inf); its size is the ε in effect.
    γ and β     (affine) γ = 0, 1 and random, β = 0, 1 and random: torch's output is x̂·γ + β.
Every measurement runs on the inputs the submission accepts; a measurement whose inputs it rejects is
left unknown (None), never guessed."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ..report import SubmissionError
from .probes import output_of, set_tensor


@dataclass
class Props:
    n: int                              # elements per group (with the measured axes)
    axes: tuple[int, ...] | None        # the reduction axes the output shows (None: not a set of whole axes)
    degree: float | None = None         # f(c·x) ≈ c^degree · f(x) for large c (None: not a power law)
    p: float | None = None              # the statistic's power in the denominator: degree = 1 − 2p
    centred: bool | None = None         # the numerator is x − μ
    stat: str | None = None             # "var" (centred) | "meansq" | None (neither fits)
    scale: float | None = None          # the output's spread per group, in units of torch's
    misfit: float | None = None         # how far the best statistic is from explaining the output (relative)
    spread_cv: float | None = None      # how much the output's spread differs between groups (0: the same)
    eps_kind: str | None = None         # "inside" | "outside" | "none" | None (not measured)
    eps_value: float | None = None      # the ε the output shows (inside the root)
    zero_row_finite: bool | None = None


def _reduce(t: Tensor, axes: tuple[int, ...], how: str) -> Tensor:
    if how == "mean":
        return t.mean(axes, keepdim=True)
    c = t - t.mean(axes, keepdim=True)
    return c.pow(2).mean(axes, keepdim=True) if how == "var" else t.pow(2).mean(axes, keepdim=True)


def _norms(y: Tensor, axes: tuple[int, ...]) -> Tensor:
    return y.pow(2).sum(axes).sqrt().flatten()


def groups(f: Callable[[Tensor], Tensor], x: Tensor, y0: Tensor) -> tuple[int, ...] | None:
    """Which axes the statistics run over: perturb the middle element and see which outputs move."""
    idx = tuple(s // 2 for s in x.shape)
    x1 = x.clone()
    x1[idx] = x1[idx] + 0.5 * (abs(float(x[idx])) + 1.0)
    moved = (f(x1) - y0).abs() > 1e-5 * (float(y0.abs().max()) + 1e-30)
    moved[idx] = True
    where = moved.nonzero()
    axes = tuple(a for a in range(x.dim()) if bool((where[:, a] != idx[a]).any()))
    size = math.prod(x.shape[a] for a in axes)
    return axes if int(moved.sum()) == size else None


def _power(ratios: list[tuple[float, float]]) -> float | None:
    """d such that ratio ≈ c^d for every (c, ratio), or None."""
    ds = [math.log(r) / math.log(c) for c, r in ratios if r > 0 and math.isfinite(r)]
    if len(ds) < 2 or max(ds) - min(ds) > 0.05:
        return None
    return sorted(ds)[len(ds) // 2]


def measure(f: Callable[[Tensor], Tensor], x: Tensor, axes_expected: tuple[int, ...], eps: float | None) -> Props:
    """Every property of the forward ``f`` (γ = 1, β = 0 already set; output in float64) on input ``x``
    (float32, groups with different means and spreads). ``eps`` is the ε the module was built with
    (None: it could not be passed in, so the ε analysis only looks for its absence)."""
    y0 = f(x)
    if not torch.isfinite(y0).all() or float(y0.std()) == 0 or not torch.equal(y0, f(x)):
        # NaN/inf, a constant or a random output: nothing to measure
        return Props(n=math.prod(x.shape[a] for a in axes_expected), axes=None)
    try:
        axes = groups(f, x, y0)
    except SubmissionError:
        axes = None
    ax = axes if axes else axes_expected
    n = math.prod(x.shape[a] for a in ax)
    props = Props(n=n, axes=axes)
    base = 100.0          # a scale where ε is negligible (the statistic ~ 4e4 ≫ ε)
    xb = x.double()
    try:
        yb = f((x * base).float())
        ratios = [(c, float(_norms(f((x * base * c).float()), ax).sum() / _norms(yb, ax).sum())) for c in (0.1, 10.0)]
    except SubmissionError:
        return props
    d = _power(ratios)
    if d is None:
        return props
    for k in (0.0, 2.0, -1.0, -3.0, 1.0, 3.0, 0.5, -0.5):      # a clean number when the power law is one
        if abs(d - k) < 0.02:
            d = k
    props.degree, props.p = d, (1 - d) / 2
    p = props.p
    # centring of the numerator, then the statistic: y · stat^p is the numerator times a constant
    mean_y, spread_y = _reduce(yb, ax, "mean"), _reduce(yb, ax, "var").sqrt()
    props.centred = bool((mean_y.abs() <= 1e-3 * spread_y + 1e-12).all())
    spread = (spread_y if props.centred else _reduce(yb, ax, "meansq").sqrt()).flatten()
    props.spread_cv = float(spread.std(unbiased=False) / (spread.mean() + 1e-300))
    xs = xb * base
    num = xs - xs.mean(ax, keepdim=True) if props.centred else xs
    fits = {}
    for stat in ("var", "meansq"):
        a = yb * _reduce(xs, ax, stat).pow(p)
        k = float((a * num).sum() / (num * num).sum())
        fits[stat] = (float((a - k * num).norm() / (a.norm() + 1e-300)), k)
    stat = min(fits, key=lambda k: fits[k][0])
    props.misfit = fits[stat][0]
    if fits[stat][0] < 1e-3:
        props.stat, props.scale = stat, fits[stat][1]
    # ε: the shortfall of the output at small |x| against the power law seen at large |x|
    if p and props.stat:
        _eps(f, x, ax, props, yb, base, eps)
    try:
        xz = x.clone()
        xz[tuple(slice(None) if a in ax else 0 for a in range(x.dim()))] = 0.0     # one group all zeros
        props.zero_row_finite = bool(torch.isfinite(f(xz)).all())
    except SubmissionError:
        pass
    return props


def _eps(f, x, ax, props: Props, yb: Tensor, base: float, eps: float | None) -> None:
    p, stat = props.p, props.stat
    vx = _reduce(x.double(), ax, stat).flatten()
    ref = _norms(yb, ax) / base ** props.degree
    target = eps if eps is not None else 1e-5
    hs = []
    for c in (3.0, 1.0, 0.3):            # inputs scaled so that the statistic is 9ε, ε and ε/11
        scale = math.sqrt(target / float(vx.mean())) * c
        try:
            y = f((x * scale).float())
        except SubmissionError:
            return
        if not torch.isfinite(y).all():
            return
        g = _norms(y, ax) / (ref * scale ** props.degree)
        h = g.pow(-1 / p) - 1                 # ε / (c² v) when ε is inside the statistic
        hs.append((scale, h))
    small = float(max(h.abs().max() for _, h in hs))
    if small < 0.02:                          # no ε shows even where the statistic is ~ε
        props.eps_kind, props.eps_value = "none", 0.0
        return
    (s1, h1), (s3, h3) = hs[0], hs[-1]
    q = float((torch.log(h3 / h1) / math.log(s1 / s3)).median()) if bool((h1 > 0).all() and (h3 > 0).all()) else None
    if q is None:
        return
    if abs(q - 2) < 0.3:
        props.eps_kind = "inside"
        props.eps_value = float((hs[1][1] * vx * hs[1][0] ** 2).median())
    elif abs(q - 1) < 0.3:
        props.eps_kind = "outside"
        props.eps_value = float((((1 + hs[1][1]).sqrt() - 1) * (vx * hs[1][0] ** 2).sqrt()).median())


def affine(run: Callable[[Tensor | None, Tensor | None], Tensor], w: Tensor, b: Tensor | None) -> dict[str, str]:
    """How γ and β act: ``run(gain, bias)`` sets them (None: γ = 1 / β = 0) and returns the output on a
    fixed input. torch: y = x̂·γ + β (γ = 0 gives β; β shifts the output). Returns {"gain": ..., "bias": ...}
    naming what the output shows."""
    one = torch.ones_like(w)
    y1, y0, yw = run(None, None), run(0 * one, None), run(w, None)
    gains = {"w": (yw, y1 * w), "1+w": (yw, y0 * (1 + w)), "+w": (yw, y0 + w), "none": (yw, y1), "w²": (yw, y1 * w * w)}
    found = {"gain": next((k for k, (a, c) in gains.items() if _near(a, c) and (k != "w" or _near(y0, 0 * y0))),
                          "other")}
    if b is not None:
        yb, yb1 = run(None, b), run(None, one)
        biases = {"b": y1 + b, "none": y1, "×b": yb1 * b, "−b": y1 - b, "2b": y1 + 2 * b}
        found["bias"] = next((k for k, v in biases.items() if _near(yb, v)), "other")
    return found


def _near(a: Tensor, b: Tensor) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=1e-4, atol=1e-5 * (float(b.abs().max()) + 1e-12)))


def measure_module(mod, x: Tensor, w: Tensor | None, b: Tensor | None, size: int, param_shape: tuple[int, ...],
                   g: torch.Generator, axes: tuple[int, ...], eps: float | None) -> tuple[dict[str, str], Props] | None:
    """A norm module's properties on `x`: first how γ (`w`) and β (`b`) act (γ = 0, 1, random; β = 0, 1, random),
    then the normalisation, measured with γ and β at the values that leave it alone in this submission.
    None when the output is random or not finite (nothing can be measured on it)."""
    def run(gain, bias):
        for t, v, default in ((w, gain, torch.ones(size)), (b, bias, torch.zeros(size))):
            if t is not None:
                set_tensor(t, default if v is None else v)
        return output_of(mod, x).detach().double()

    y = run(None, None)
    if not torch.equal(y, run(None, None)) or not torch.isfinite(y).all():
        return None
    found = {} if w is None else affine(run, torch.randn(param_shape, generator=g).double() + 1,
                                        None if b is None else torch.randn(param_shape, generator=g).double())
    run(torch.zeros(size) if found.get("gain") in ("+w", "1+w") else None,
        torch.ones(size) if found.get("bias") == "×b" else None)
    return found, measure(lambda t: output_of(mod, t).detach().double(), x, axes, eps)
