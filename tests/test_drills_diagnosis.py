"""Issue 26: the drill checker names mistakes that are in no list, from properties it measures on the
submission as a black box; no message proposes as the fix what the code already does; a missing
keepdim is named (issue 28 item 7); the RMSNorm default eps says which default it found (issue 25
item 22); the checker is a readable package of small modules and stays fast."""

from __future__ import annotations

import importlib.util
import math
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlab import drills
from normlab.drills import progress
from normlab.drills.checks.backward_fit import fit_grad_x
from normlab.drills.checks.geometry import Geometry
from normlab.drills.checks.properties import measure

ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = Path(__file__).resolve().parent / "drill_corpus"


@pytest.fixture(autouse=True)
def progress_file(tmp_path, monkeypatch):
    path = tmp_path / "progress" / "drills.json"
    monkeypatch.setenv(progress.FILE_VARIABLE, str(path))
    monkeypatch.setattr(progress, "_started", {})
    return path


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"drill_corpus_{name}", CORPUS_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DRILL, getattr(module, drills.NAMES[module.DRILL["kind"]])


# ---------------------------------------------------------------- the measurements, against torch itself
def _x(shape=(2, 5, 8), seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) * 2 + torch.randn(shape[:-1] + (1,), generator=g) * 1.5


@pytest.mark.parametrize("name,f,stat,centred", [
    ("F.layer_norm", lambda t: F.layer_norm(t, t.shape[-1:], eps=1e-2).double(), "var", True),
    ("F.rms_norm", lambda t: F.rms_norm(t, t.shape[-1:], eps=1e-2).double(), "meansq", False),
])
def test_properties_of_torchs_own_norms(name, f, stat, centred):
    """Measured on torch's functions the properties are the textbook ones: groups = the last axis,
    degree 0, the statistic, scale 1, ε inside the root with the value passed, a zero group finite."""
    p = measure(f, _x(), (2,), 1e-2)
    assert p.axes == (2,) and p.degree == 0 and p.p == 0.5, (name, p)
    assert p.stat == stat and p.centred == centred and abs(p.scale - 1) < 1e-4, (name, p)
    assert p.eps_kind == "inside" and abs(p.eps_value - 1e-2) < 1e-3 and p.zero_row_finite, (name, p)


def test_properties_of_batchnorm_and_of_planted_formulas():
    x = _x((16, 3))
    p = measure(lambda t: F.batch_norm(t, None, None, training=True, eps=1e-2).double(), x, (0,), 1e-2)
    assert p.axes == (0,) and p.degree == 0 and p.stat == "var" and p.eps_kind == "inside", p

    def ln_like(t, power=0.5, eps_where="inside", unbiased=False, center=True):
        t = t.double()
        c = t - t.mean(-1, keepdim=True) if center else t
        v = t.var(-1, keepdim=True, unbiased=unbiased)
        den = (v + 1e-2) ** power if eps_where == "inside" else (v ** power + 1e-2 if eps_where == "outside" else v ** power)
        return c / den

    x = _x()
    for power, degree in ((2.0, -3.0), (-0.5, 2.0), (1.0, -1.0), (0.25, 0.5)):      # degree = 1 − 2p
        assert measure(lambda t: ln_like(t, power), x, (2,), 1e-2).degree == degree, power
    p = measure(lambda t: ln_like(t, unbiased=True), x, (2,), 1e-2)
    assert abs(p.scale - math.sqrt(7 / 8)) < 1e-4                                   # √((n−1)/n), n = 8
    assert measure(lambda t: ln_like(t, eps_where="outside"), x, (2,), 1e-2).eps_kind == "outside"
    p = measure(lambda t: ln_like(t, eps_where="none"), x, (2,), 1e-2)
    assert p.eps_kind == "none" and p.zero_row_finite is False
    p = measure(lambda t: ln_like(t, center=False), x, (2,), 1e-2)
    assert p.centred is False and p.stat == "var"
    p = measure(lambda t: F.layer_norm(t, t.shape[-2:], eps=1e-2).double(), x, (2,), 1e-2)
    assert p.axes == (1, 2)                                                          # the groups, as measured


# ---------------------------------------------------------------- every pattern, alone and with one other mistake
class LNBase(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))


class RMSBase(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))


def _ln(body):
    return type("LayerNorm", (LNBase,), {"forward": lambda s, x: body(s, x) * s.weight + s.bias})


def _rms(body):
    return type("RMSNorm", (RMSBase,), {"forward": lambda s, x: body(s, x) * s.weight})


def _mean(x, dim=-1):
    return x.mean(dim, keepdim=True)


def _var(x, dim=-1, unbiased=False):
    return x.var(dim, keepdim=True, unbiased=unbiased)


def _ms(x, dim=-1, n_minus_1=False):
    return x.pow(2).sum(dim, keepdim=True) / (x.shape[dim] - (1 if n_minus_1 else 0))


PATTERNS = [
    # × RMS (dividing by rsqrt), alone / with an unbiased mean square / with the wrong axis
    ("rmsnorm", _rms(lambda s, x: x / torch.rsqrt(_ms(x) + s.eps)), {"times_rms"}),
    ("rmsnorm", _rms(lambda s, x: x / torch.rsqrt(_ms(x, n_minus_1=True) + s.eps)), {"times_rms", "unbiased_variance"}),
    ("layernorm", _ln(lambda s, x: (x - _mean(x)) / torch.rsqrt(_var(x) + s.eps)), {"times_rms"}),
    ("layernorm", _ln(lambda s, x: (x - _mean(x, 1)) / torch.rsqrt(_var(x, 1) + s.eps)), {"times_rms", "wrong_axis"}),
    # / (var + ε)², alone / without ε / unbiased
    ("layernorm", _ln(lambda s, x: (x - _mean(x)) / (_var(x) + s.eps) ** 2), {"var_squared"}),
    ("layernorm", _ln(lambda s, x: (x - _mean(x)) / _var(x) ** 2), {"var_squared", "eps_missing"}),
    ("layernorm", _ln(lambda s, x: (x - _mean(x)) / (_var(x, unbiased=True) + s.eps) ** 2), {"var_squared", "unbiased_variance"}),
    # an uncentred x over a centred, unbiased torch.var; and with ε outside
    ("rmsnorm", _rms(lambda s, x: x / torch.sqrt(torch.var(x, -1, keepdim=True) + s.eps)), {"centered", "unbiased_variance"}),
    ("layernorm", _ln(lambda s, x: x / torch.sqrt(torch.var(x, -1, keepdim=True) + s.eps)), {"not_centered", "unbiased_variance"}),
    ("layernorm", _ln(lambda s, x: x / (torch.std(x, -1, keepdim=True) + s.eps)), {"not_centered", "unbiased_variance",
                                                                                   "eps_outside_root"}),
    ("rmsnorm", _rms(lambda s, x: x / torch.sqrt(torch.var(x, 1, keepdim=True) + s.eps)), {"centered", "unbiased_variance",
                                                                                            "wrong_axis"}),
    # x/‖x‖ · d^-½ where d^½ is meant; alone and without ε
    ("rmsnorm", _rms(lambda s, x: x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + s.eps) * x.shape[-1] ** -0.5), {"wrong_scale"}),
    ("rmsnorm", _rms(lambda s, x: x / x.norm(dim=-1, keepdim=True) * x.shape[-1] ** -0.5), {"wrong_scale", "eps_missing"}),
    # no ε behind a value mismatch (the right scale x/‖x‖·√d, or next to another mistake)
    ("rmsnorm", _rms(lambda s, x: x / x.norm(dim=-1, keepdim=True) * x.shape[-1] ** 0.5), {"eps_missing"}),
    ("layernorm", _ln(lambda s, x: (x - _mean(x)) / _var(x, unbiased=True) ** 0.25), {"double_sqrt", "eps_missing"}),
    ("rmsnorm", _rms(lambda s, x: x / torch.sqrt(_ms(x, 1))), {"wrong_axis", "eps_missing"}),
    # γ and β: how they act is measured too (zero γ, shifted β), then the normalisation with neutral values
    ("layernorm", type("LayerNorm", (LNBase,), {"forward": lambda s, x: (x - _mean(x)) / torch.sqrt(_var(x) + s.eps)
                                                * s.weight * s.bias}), {"bias_use"}),
    ("layernorm", type("LayerNorm", (LNBase,), {"forward": lambda s, x: (x - _mean(x)) / torch.sqrt(_var(x) + s.eps)
                                                + s.weight + s.bias}), {"gain_use"}),
    ("layernorm", type("LayerNorm", (LNBase,), {"forward": lambda s, x: (x - _mean(x)) / (_var(x) + s.eps) ** 2
                                                * s.weight * s.weight + s.bias}), {"gain_use", "var_squared"}),
    ("layernorm", _ln(lambda s, x: (x - _mean(x)) / ((x - _mean(x)).abs().mean(-1, keepdim=True) + s.eps)),
     {"wrong_statistic"}),
    # ε squared inside the root, next to the wrong power of the root
    ("layernorm", _ln(lambda s, x: (x - _mean(x)) / (_var(x) + s.eps ** 2) ** 2), {"var_squared", "eps_ignored"}),
    # ε hard-coded, next to a mistake the fast path does not know
    ("layernorm", _ln(lambda s, x: (x - _mean(x)) / (_var(x) + 1e-5) ** 2), {"var_squared", "eps_ignored"}),
]


@pytest.mark.parametrize("kind,impl,want", PATTERNS, ids=lambda v: "-".join(sorted(v)) if isinstance(v, set) else None)
def test_each_pattern_is_named_alone_and_combined(kind, impl, want):
    report = drills.check(kind, impl)
    assert not report.passed and want <= report.ids(), str(report)
    assert "forward" not in report.ids(), str(report)          # no bare "values differ" next to the names
    for f in report.failed:          # in the candidate's words, with the fix
        assert any("\u4e00" <= ch <= "\u9fff" for ch in f.message), f
        assert f.level == "production" or any(k in f.message for k in ("应", "用", "要", "修正", "不是")), f
    if len(want) > 1:
        assert f"同时有 {len([f for f in report.failed if f.level == 'interview'])} 处错误" in str(report)


def test_a_crash_on_one_layout_keeps_the_math_findings():
    def only_2d(s, x):
        n, d = x.shape
        return (x - _mean(x)) / torch.sqrt(_var(x) + s.eps)

    report = drills.check("layernorm", _ln(only_2d))          # alone: the layout is the one finding
    assert {f.id for f in report.failed if f.level == "interview"} == {"layout"}, str(report)
    _, impl = _load("ln_2d_only_unbiased")
    report = drills.check("layernorm", impl)
    layout = next(f for f in report.failed if f.id == "layout")
    assert "(B, T, D)" in layout.message and "(N, D)" in layout.message
    assert "unbiased_variance" in report.ids()
    _, impl = _load("bw_ln_fixed_width")
    report = drills.check("layernorm_backward", impl)
    crash = next(f for f in report.failed if f.id == "returns")
    assert "其余 3 组输入照常比较" in crash.message and "unbiased_variance" in report.ids()


# ---------------------------------------------------------------- backward: the terms fitted
def _ln_parts(g, x, w, eps):
    mu = x.mean(-1, keepdim=True)
    r = 1 / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
    return (x - mu) * r, r


def _bw(gx_of):
    def backward(g, x, w, eps):
        xh, r = _ln_parts(g, x, w, eps)
        return gx_of(g, xh, r, w), (g * xh).sum(0), g.sum(0)
    return backward


@pytest.mark.parametrize("gx_of,want,needle", [
    (lambda g, xh, r, w: r * (g * w - (g * w).mean(0, keepdim=True) - xh * (g * w * xh).mean(-1, keepdim=True)),
     "term_axis", "batch 轴"),
    (lambda g, xh, r, w: r * (g * w - w * g.mean(-1, keepdim=True) - xh * (g * w * xh).mean(-1, keepdim=True)),
     "gamma_outside_sum", "γ 被提到了求和外面"),
    (lambda g, xh, r, w: r * (g * w - (g * w).mean(-1, keepdim=True) - xh * (g * w * xh).sum(-1, keepdim=True)),
     "term_coefficient", "求和"),
    (lambda g, xh, r, w: r * (g - (g * w).mean(-1, keepdim=True) - xh * (g * w * xh).mean(-1, keepdim=True)),
     "term_coefficient", "少乘了 γ"),
    (lambda g, xh, r, w: r * (g * w - (g * w).mean(-1, keepdim=True) + xh * (g * w * xh).mean(-1, keepdim=True)),
     "term_sign", "符号反了"),
    (lambda g, xh, r, w: (g * w - (g * w).mean(-1, keepdim=True) - xh * (g * w * xh).mean(-1, keepdim=True)) / r,
     "rstd_power", "σ 而不是 1/σ"),
    (lambda g, xh, r, w: g * w - (g * w).mean(-1, keepdim=True) - xh * (g * w * xh).sum(-1, keepdim=True),
     "rstd_power", "少乘了 1/σ"),
])
def test_backward_terms_are_named(gx_of, want, needle):
    report = drills.check("layernorm_backward", _bw(gx_of))
    assert want in report.ids(), str(report)
    assert needle in next(f.message for f in report.failed if f.id == want)
    assert "grad_x" not in report.ids()                   # named, not "grad_x differs"


def test_backward_fit_claims_nothing_it_cannot_show():
    """The fit against autograd (independent reference): the true gradient fits with every coefficient
    right (no finding), and a gradient the terms cannot produce is not explained (None)."""
    g = torch.Generator().manual_seed(9)
    probes = []
    for shape, eps in (((4, 8), 1e-5), ((6, 5), 1e-2)):
        x = torch.randn(shape, generator=g, dtype=torch.float64).requires_grad_(True)
        w = torch.randn(shape[1], generator=g, dtype=torch.float64) + 1
        gy = torch.randn(shape, generator=g, dtype=torch.float64)
        (F.layer_norm(x, shape[1:], w, None, eps) * gy).sum().backward()
        probes.append({"x": x.detach(), "w": w, "gy": gy, "eps": eps, "got": (x.grad,)})
    geos = [Geometry("layernorm", tuple(p["x"].shape)) for p in probes]
    assert fit_grad_x(probes, geos) == {}
    for p in probes:
        p["got"] = (torch.tanh(p["x"]) * p["gy"],)
    assert fit_grad_x(probes, geos) is None


# ---------------------------------------------------------------- no message describes the code's own behaviour as the fix
def test_eval_without_gamma_beta_is_named_not_told_to_normalise():
    """Issue 26: the report told a learner to compute (x − running_mean)/sqrt(running_var + ε) —
    which the code did; the bug was γ and β dropped in eval."""
    _, impl = _load("bn_eval_affine_dropped")
    report = drills.check("batchnorm", impl)
    f = next(f for f in report.failed if f.id == "eval_affine")
    assert "γ" in f.message and "β" in f.message and "已经用 running_mean/running_var 归一化" in f.message
    assert "eval_mode" not in report.ids()
    # the same diagnosis still names what the code does NOT do: eps left out (and γ/β kept)
    _, impl = _load("bn_eval_no_eps")
    f = next(f for f in drills.check("batchnorm", impl).failed if f.id == "eval_eps_missing")
    assert "少了 ε" in f.message and "γ" not in f.message


def test_beta_as_buffer_is_named_not_detach():
    """Issue 26: a gradient message suggested .detach() where β was a buffer."""
    _, impl = _load("ln_beta_buffer")
    report = drills.check("layernorm", impl)
    assert not any(".detach" in f.message for f in report.failed), str(report)
    grads = next(f for f in report.failed if f.id == "gradients")
    assert "buffer" in grads.message and "nn.Parameter" in grads.message
    assert "buffer" in next(f for f in report.failed if f.id == "params_bias").message

    class Detached(LNBase):                # the control: statistics really detached → the message says so
        def forward(self, x):
            mu, var = _mean(x).detach(), _var(x).detach()
            return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias

    grads = next(f for f in drills.check("layernorm", Detached).failed if f.id == "gradients")
    assert ".detach()" in grads.message and "buffer" not in grads.message


# ---------------------------------------------------------------- keepdim (issue 28 item 7)
def test_missing_keepdim_is_named_with_the_fix_and_the_square_case():
    _, impl = _load("ln_keepdim_missing")
    report = drills.check("layernorm", impl)
    f = next(f for f in report.failed if f.id == "keepdim_missing")
    assert "keepdim=True" in f.message and "方阵" in f.message
    assert f.example["input"].startswith("tensor(8, 8)")       # silently wrong on a square input: shown

    def ln_backward_no_keepdim(g, x, w, eps):
        mu = x.mean(-1)
        return (x - mu) * w, g.sum(0), g.sum(0)

    assert "keepdim_missing" in drills.check("layernorm_backward", ln_backward_no_keepdim).ids()

    class BN4dNoReshape(nn.Module):
        def __init__(self, c, eps=1e-5, momentum=0.1):
            super().__init__()
            self.eps, self.momentum = eps, momentum
            self.weight, self.bias = nn.Parameter(torch.ones(c)), nn.Parameter(torch.zeros(c))
            self.register_buffer("running_mean", torch.zeros(c))
            self.register_buffer("running_var", torch.ones(c))

        def forward(self, x):
            dims = [0] + list(range(2, x.dim()))
            m, v = x.mean(dims), x.var(dims, unbiased=False)
            with torch.no_grad():
                n = x.numel() // x.shape[1]
                self.running_mean.lerp_(m, self.momentum)
                self.running_var.lerp_(v * n / (n - 1), self.momentum)
            if not self.training:
                m, v = self.running_mean, self.running_var
            return (x - m) / torch.sqrt(v + self.eps) * self.weight + self.bias

    report = drills.check("batchnorm", BN4dNoReshape)
    layouts = next(f for f in report.failed if f.id == "layouts")
    assert "keepdim=True" in layouts.message and "(1, C, 1, 1)" in layouts.message


# ---------------------------------------------------------------- which default eps (issue 25 item 22)
def test_rmsnorm_default_eps_says_which_default_it_found():
    class RMS(RMSBase):
        def forward(self, x):
            return x * torch.rsqrt(_ms(x) + self.eps) * self.weight

    card = next(f for f in drills.check("rmsnorm", RMS).findings if f.id == "default_eps")       # eps=1e-6
    assert card.passed and "与 torch 一致" not in card.message
    assert "LLaMA" in card.message and "不是 torch 的默认" in card.message and "1.19e-07" in card.message
    torch_own = next(f for f in drills.check("rmsnorm", nn.RMSNorm).findings if f.id == "default_eps")
    assert torch_own.passed and "torch.nn.RMSNorm 的默认一致" in torch_own.message

    class RMS5(RMS):
        def __init__(self, d, eps=1e-5):
            super().__init__(d, eps)

    wrong = next(f for f in drills.check("rmsnorm", RMS5).findings if f.id == "default_eps")
    assert not wrong.passed and wrong.level == "production" and "eps=None" in wrong.message


# ---------------------------------------------------------------- the corpus and the package
NEW_PATTERNS = ["rms_divide_by_rsqrt", "rms_rsqrt_unbiased_sum", "ln_var_squared", "ln_var_squared_no_eps", "rms_torch_var",
                "ln_uncentred_numerator", "rms_norm_times_inverse_sqrt_d", "rms_norm_sqrt_d_no_eps", "ln_keepdim_missing",
                "ln_2d_only_unbiased", "ln_beta_buffer", "ln_batch_axis_times_std", "bn_eval_affine_dropped",
                "bn_eval_affine_dropped_no_eps", "bn_rsqrt_times_std", "bw_ln_batch_axis_gamma_out", "bw_bn_mean_term_summed",
                "bw_ln_fixed_width", "ln_double_sqrt"]


def test_the_corpus_grew_with_patterns_not_in_the_known_list():
    """≥ 15 new files (issue 26), each a failing pattern with its expected findings, several combined;
    test_drills.py::test_corpus checks each verdict and finding."""
    assert len(NEW_PATTERNS) >= 15
    for name in NEW_PATTERNS:
        drill, _ = _load(name)
        assert not drill["interview"] and drill["findings"], name
    assert sum(len(_load(n)[0]["findings"]) >= 2 for n in NEW_PATTERNS) >= 6


def test_no_module_of_the_checker_is_over_400_lines():
    files = sorted((ROOT / "normlab" / "drills").rglob("*.py"))
    assert len(files) >= 10 and (ROOT / "normlab" / "drills" / "checks" / "__init__.py").exists()
    big = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert not big, big


def test_worst_case_full_check_is_under_one_second():
    """Every corpus file and every pattern above, one full check each: CPU time (what the checker costs,
    not how busy the machine is). Issue 26: ≤ 1 s on the 2-core course machine."""
    cases = [(d["kind"], impl) for d, impl in (_load(p.stem) for p in sorted(CORPUS_DIR.glob("*.py")))]
    cases += [(kind, impl) for kind, impl, _ in PATTERNS]
    worst = (0.0, None)
    for kind, impl in cases:
        drills.check(kind, impl)                       # warm torch's kernels for this path
        t0 = time.process_time()
        drills.check(kind, impl)
        worst = max(worst, (time.process_time() - t0, getattr(impl, "__module__", kind)), key=lambda w: w[0])
    print(f"worst full check: {worst[0]:.3f} s CPU ({worst[1]})")
    assert worst[0] < 1.0, worst


def test_a_right_formula_in_low_precision_is_not_given_wrong_names():
    """The properties claim nothing on an output that is torch's up to rounding: a LayerNorm computed in
    bfloat16 is named as a precision problem, not as a wrong statistic or a wrong γ/β."""
    class LNbf16(LNBase):
        def forward(self, x):
            h = x.bfloat16()
            m = h.mean(-1, keepdim=True)
            v = ((h - m) ** 2).mean(-1, keepdim=True)
            return ((h - m) / torch.sqrt(v + self.eps) * self.weight.bfloat16() + self.bias.bfloat16()).to(x.dtype)

    report = drills.check("layernorm", LNbf16)
    assert {f.id for f in report.failed if f.level == "interview"} == {"precision"}, str(report)
    assert "float32" in next(f.message for f in report.failed if f.id == "precision")


@pytest.mark.parametrize("forward", [
    lambda s, x: torch.randn_like(x),                                                         # random
    lambda s, x: torch.sort((x - _mean(x)) / torch.sqrt(_var(x) + s.eps), -1).values * s.weight + s.bias,  # permuted
    lambda s, x: ((x - _mean(x)) / torch.sqrt(_var(x) + s.eps)).round() * s.weight + s.bias,  # rounded
])
def test_properties_claim_nothing_they_did_not_measure(forward):
    """Outputs no property explains (random, permuted, rounded) keep the plain "values differ" finding:
    no invented name, no checker error."""
    report = drills.check("layernorm", type("LayerNorm", (LNBase,), {"forward": forward}))
    assert {f.id for f in report.failed if f.level == "interview"} == {"forward"}, str(report)
    assert not any("检查无法进行" in f.message for f in report.failed)
