"""The drill checker accepts correct hand-written norms in several styles and names each common mistake."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlab import drills


# ---------------------------------------------------------------- correct submissions, different styles
class LNClassic(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.shape, self.eps = shape, eps
        self.weight = nn.Parameter(torch.ones(shape))
        self.bias = nn.Parameter(torch.zeros(shape))

    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        xf = x.float()
        mu = xf.mean(dims, keepdim=True)
        var = xf.var(dims, unbiased=False, keepdim=True)
        return ((xf - mu) * torch.rsqrt(var + self.eps) * self.weight + self.bias).to(x.dtype)


class LNWelfordish(nn.Module):  # a different style: torch.Size, centred second moment, .sqrt() division, type_as
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.ns = torch.Size([normalized_shape] if isinstance(normalized_shape, int) else normalized_shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(self.ns))
        self.bias = nn.Parameter(torch.zeros(self.ns))

    def forward(self, x):
        d = [-i for i in range(1, len(self.ns) + 1)]
        h = x.to(torch.float32)
        c = h - h.mean(d, keepdim=True)
        return (c / (c.pow(2).mean(d, keepdim=True) + self.eps).sqrt() * self.weight + self.bias).type_as(x)


class RMSLlama(nn.Module):
    def __init__(self, normalized_shape, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(normalized_shape))

    def forward(self, x):
        dims = tuple(range(-self.weight.dim(), 0))
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(dims, keepdim=True) + self.eps)
        return (h * self.weight.float()).to(x.dtype)


class BNGood(nn.Module):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))

    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        xf = x.float()
        if self.training:
            n = x.numel() // x.shape[1]
            if n <= 1:
                raise ValueError("need more than one value per channel")
            mean, var = xf.mean(dims), xf.var(dims, unbiased=False)
            with torch.no_grad():
                self.running_mean.mul_(1 - self.momentum).add_(self.momentum * mean)
                self.running_var.mul_(1 - self.momentum).add_(self.momentum * var * n / (n - 1))
        else:
            mean, var = self.running_mean, self.running_var
        y = (xf - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + self.eps)
        return (y * self.weight.reshape(shape) + self.bias.reshape(shape)).to(x.dtype)


def ln_backward(g, x, w, eps):
    mu = x.mean(-1, keepdim=True)
    rstd = 1 / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    xh = (x - mu) * rstd
    gx_hat = g * w
    gx = rstd * (gx_hat - gx_hat.mean(-1, keepdim=True) - xh * (gx_hat * xh).mean(-1, keepdim=True))
    return gx, (g * xh).sum(0), g.sum(0)


def bn_backward(g, x, w, eps):
    mu = x.mean(0)
    rstd = 1 / torch.sqrt(x.var(0, unbiased=False) + eps)
    xh = (x - mu) * rstd
    gx_hat = g * w
    gx = rstd * (gx_hat - gx_hat.mean(0) - xh * (gx_hat * xh).mean(0))
    return gx, (g * xh).sum(0), g.sum(0)


def rms_backward(g, x, w, eps):
    r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    xh = x * r
    gxh = g * w
    gx = r * (gxh - xh * (gxh * xh).mean(-1, keepdim=True))
    return gx, (g * xh).sum(0)


@pytest.mark.parametrize("kind,impl", [("layernorm", LNClassic), ("layernorm", LNWelfordish),
                                       ("rmsnorm", RMSLlama), ("batchnorm", BNGood),
                                       ("layernorm_backward", ln_backward), ("batchnorm_backward", bn_backward),
                                       ("rmsnorm_backward", rms_backward)])
def test_correct_submissions_pass(kind, impl):
    report = drills.check(kind, impl)
    assert report.passed, str(report)


class TorchBN(nn.modules.batchnorm._BatchNorm):  # torch's own BatchNorm, for (N, C) and (N, C, H, W) alike
    def _check_input_dim(self, input):
        pass


def test_torch_modules_themselves_pass():
    assert drills.check("layernorm", nn.LayerNorm).passed
    assert drills.check("rmsnorm", nn.RMSNorm).passed
    report = drills.check("batchnorm", TorchBN)
    assert report.passed, str(report)


def _autograd_backward(fn, with_bias=True):
    """A backward 'submission' that is autograd itself: the checker must accept it."""
    def backward(g, x, w, eps):
        x, w = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
        b = torch.zeros_like(w, requires_grad=True)
        return tuple(torch.autograd.grad((fn(x, w, b, eps) * g).sum(), [x, w, b] if with_bias else [x, w]))
    return backward


@pytest.mark.parametrize("kind,fn,with_bias", [
    ("layernorm_backward", lambda x, w, b, eps: F.layer_norm(x, x.shape[-1:], w, b, eps), True),
    ("batchnorm_backward", lambda x, w, b, eps: F.batch_norm(x, None, None, w, b, True, 0.1, eps), True),
    ("rmsnorm_backward", lambda x, w, b, eps: F.rms_norm(x, x.shape[-1:], w, eps), False),
])
def test_autograd_itself_passes_the_backward_cards(kind, fn, with_bias):
    report = drills.check(kind, _autograd_backward(fn, with_bias))
    assert report.passed, str(report)


# ---------------------------------------------------------------- each common mistake is named
class LNUnbiased(LNClassic):
    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        return (x - x.mean(dims, keepdim=True)) / torch.sqrt(x.var(dims, keepdim=True) + self.eps) * self.weight + self.bias


class LNEpsOutside(LNClassic):
    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        mu, std = x.mean(dims, keepdim=True), x.std(dims, unbiased=False, keepdim=True)
        return (x - mu) / (std + self.eps) * self.weight + self.bias


class LNOnePass(LNClassic):
    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        mu = x.mean(dims, keepdim=True)
        var = (x * x).mean(dims, keepdim=True) - mu * mu      # E[x^2] - E[x]^2
        return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias


class LNInPlace(LNClassic):
    def forward(self, x):
        x -= x.mean(-1, keepdim=True)
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight + self.bias


class LNDetached(LNClassic):
    def forward(self, x):
        mu = x.mean(-1, keepdim=True).detach()
        var = x.var(-1, unbiased=False, keepdim=True).detach()
        return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias


class LNNoUpcast(LNClassic):  # right in float32; in float16 (x - mu)^2 overflows at |x| ~ 300
    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        c = x - x.mean(dims, keepdim=True)
        return c / torch.sqrt(c.pow(2).mean(dims, keepdim=True) + self.eps) * self.weight + self.bias


class LNHardcodedEps(LNClassic):  # ignores the eps it was given
    def forward(self, x):
        dims = tuple(range(-len(self.shape), 0))
        mu, var = x.mean(dims, keepdim=True), x.var(dims, unbiased=False, keepdim=True)
        return (x - mu) / torch.sqrt(var + 1e-5) * self.weight + self.bias


class RMSNoUpcast(RMSLlama):
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class RMSCentered(RMSLlama):
    def forward(self, x):
        return F.layer_norm(x.float(), x.shape[-1:], eps=self.eps).to(x.dtype) * self.weight


class RMSWithBias(RMSLlama):
    def __init__(self, normalized_shape, eps=1e-6):
        super().__init__(normalized_shape, eps)
        self.bias = nn.Parameter(torch.zeros(normalized_shape))


class RMSEpsOutside(RMSLlama):
    def forward(self, x):
        h = x.float()
        return (h / (h.pow(2).mean(-1, keepdim=True).sqrt() + self.eps) * self.weight).to(x.dtype)


class BNReversedMomentum(BNGood):
    def forward(self, x):
        if self.training:
            dims = [0] + list(range(2, x.dim()))
            n = x.numel() // x.shape[1]
            with torch.no_grad():  # the d2l-zh / source-material convention with momentum=0.1
                self.running_mean.mul_(self.momentum).add_((1 - self.momentum) * x.mean(dims))
                self.running_var.mul_(self.momentum).add_((1 - self.momentum) * x.var(dims) )
            shape = [1, -1] + [1] * (x.dim() - 2)
            y = (x - x.mean(dims).reshape(shape)) / torch.sqrt(x.var(dims, unbiased=False).reshape(shape) + self.eps)
            return y * self.weight.reshape(shape) + self.bias.reshape(shape)
        return super().forward(x)


class BNBiasedRunningVar(BNGood):
    def forward(self, x):
        if self.training:
            dims = [0] + list(range(2, x.dim()))
            shape = [1, -1] + [1] * (x.dim() - 2)
            mean, var = x.mean(dims), x.var(dims, unbiased=False)
            with torch.no_grad():
                self.running_mean.mul_(0.9).add_(0.1 * mean)
                self.running_var.mul_(0.9).add_(0.1 * var)
            y = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + self.eps)
            return y * self.weight.reshape(shape) + self.bias.reshape(shape)
        return super().forward(x)


class BNNotBuffers(BNGood):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        nn.Module.__init__(self)
        self.eps, self.momentum = eps, momentum
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.running_mean = torch.zeros(num_features)      # plain attributes: not in state_dict
        self.running_var = torch.ones(num_features)


class BNGradMode(BNGood):  # d2l's mode switch
    def forward(self, x):
        self.training = torch.is_grad_enabled()
        return super().forward(x)


class BNGraphInStats(BNGood):
    def forward(self, x):
        if self.training:
            dims = [0] + list(range(2, x.dim()))
            n = x.numel() // x.shape[1]
            mean, var = x.mean(dims), x.var(dims, unbiased=False)
            self.running_mean = 0.9 * self.running_mean + 0.1 * mean     # keeps the graph
            self.running_var = 0.9 * self.running_var + 0.1 * var * n / (n - 1)
            shape = [1, -1] + [1] * (x.dim() - 2)
            y = (x - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + self.eps)
            return y * self.weight.reshape(shape) + self.bias.reshape(shape)
        return super().forward(x)


class BNUpdatesInEval(BNGood):
    def forward(self, x):
        y = super().forward(x)
        if not self.training:
            self.running_mean.add_(0.01)
        return y


class BNNaNBatchOne(BNGood):
    def forward(self, x):
        if self.training and x.numel() // x.shape[1] <= 1:
            return (x - x.mean(0)) / x.std(0)   # unbiased std of one value: NaN
        return super().forward(x)


class BNHardcodedMomentum(BNGood):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__(num_features, eps, 0.1)               # momentum argument dropped


class BNHardcodedEps(BNGood):
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__(num_features, 1e-5, momentum)         # eps argument dropped


class BNNoCastBack(BNGood):  # computes in float32 and forgets to cast back to the input dtype
    def forward(self, x):
        return super().forward(x).float()


def ln_backward_no_stats_grad(g, x, w, eps):  # treats mean and variance as constants
    mu = x.mean(-1, keepdim=True)
    rstd = 1 / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
    return g * w * rstd, (g * (x - mu) * rstd).sum(0), g.sum(0)


def bn_backward_wrong_count(g, x, w, eps):
    gx, gw, gb = bn_backward(g, x, w, eps)
    return gx, gw, gb[:-1]


def slow_ln(normalized_shape, eps=1e-5):
    while True:
        pass


class RaisesLN(LNClassic):
    def forward(self, x):
        raise RuntimeError("not implemented")


class WrongShapeLN(LNClassic):
    def forward(self, x):
        return x.mean(-1)


class NaNLN(LNClassic):
    def forward(self, x):
        return x * float("nan")


class WrongDtypeLN(LNClassic):  # returns float32 for half inputs
    def forward(self, x):
        return super().forward(x).float()


class HangingForwardLN(LNClassic):
    def forward(self, x):
        while True:
            pass


class NotATensorLN(LNClassic):
    def forward(self, x):
        return x.tolist()


class HangingBatchOfOne(BNGood):  # a hang is not "raises like PyTorch"
    def forward(self, x):
        while self.training and x.shape[0] == 1:
            pass
        return super().forward(x)


@pytest.mark.parametrize("kind,impl,finding", [
    ("layernorm", LNUnbiased, "unbiased_variance"),
    ("layernorm", LNEpsOutside, "eps_outside_root"),
    ("layernorm", LNOnePass, "large_offset"),
    ("layernorm", LNInPlace, "input_modified"),
    ("layernorm", LNDetached, "gradients"),
    ("layernorm", LNNoUpcast, "half_float16"),
    ("layernorm", LNHardcodedEps, "eps_ignored"),
    ("rmsnorm", RMSNoUpcast, "half_float16"),
    ("rmsnorm", RMSCentered, "centered"),
    ("rmsnorm", RMSWithBias, "no_bias"),
    ("rmsnorm", RMSEpsOutside, "rms_eps_outside"),
    ("batchnorm", BNReversedMomentum, "momentum_reversed"),
    ("batchnorm", BNBiasedRunningVar, "running_var_biased"),
    ("batchnorm", BNNotBuffers, "buffers"),
    ("batchnorm", BNGradMode, "mode_from_grad"),
    ("batchnorm", BNGraphInStats, "stats_graph"),
    ("batchnorm", BNUpdatesInEval, "eval_no_update"),
    ("batchnorm", BNNaNBatchOne, "batch_of_one"),
    ("batchnorm", BNNoCastBack, "half_bfloat16"),
    ("batchnorm", BNHardcodedMomentum, "momentum_ignored"),
    ("batchnorm", BNHardcodedEps, "eps_ignored"),
    ("layernorm_backward", ln_backward_no_stats_grad, "grad_x_4x8"),
    ("batchnorm_backward", bn_backward_wrong_count, "grad_bias_8x4"),
])
def test_each_common_mistake_is_named(kind, impl, finding):
    report = drills.check(kind, impl)
    assert not report.passed
    assert finding in report.ids(), str(report)
    failed = next(f for f in report.failed if f.id == finding)
    assert failed.message and any("\u4e00" <= ch <= "\u9fff" for ch in failed.message)  # Chinese text


def test_counterexample_shows_input_expected_got():
    report = drills.check("layernorm", LNUnbiased)
    f = next(f for f in report.failed if f.id == "unbiased_variance")
    assert set(f.example) == {"input", "expected", "got"}
    assert "<table>" in report._repr_html_() and "unbiased_variance" in str(report)


@pytest.mark.parametrize("kind,impl,needle", [
    ("layernorm", RaisesLN, "RuntimeError"), ("layernorm", WrongShapeLN, "形状"), ("layernorm", slow_ln, "时间限制"),
    ("layernorm", NaNLN, "NaN"), ("layernorm", WrongDtypeLN, "dtype"), ("layernorm", HangingForwardLN, "时间限制"),
    ("layernorm", NotATensorLN, "Tensor"), ("batchnorm", HangingBatchOfOne, "时间限制"),
    ("layernorm_backward", lambda g, x, w, eps: 1 / 0, "ZeroDivisionError"),
])
def test_broken_submissions_become_findings_not_crashes(kind, impl, needle):
    t0 = time.time()
    report = drills.check(kind, impl)
    assert not report.passed and needle in str(report), str(report)
    assert time.time() - t0 < 5


def test_full_check_is_fast():
    for kind, impl in [("layernorm", LNClassic), ("batchnorm", BNGood), ("rmsnorm", RMSLlama),
                       ("layernorm_backward", ln_backward), ("batchnorm_backward", bn_backward),
                       ("rmsnorm_backward", rms_backward), ("deepnorm_constants", dn_constants),
                       ("prenorm_block", lambda x, f, n: x + f(n(x)))]:
        t0 = time.perf_counter()
        drills.check(kind, impl)
        assert time.perf_counter() - t0 < 2.0, kind


def test_command_line(tmp_path):
    good = tmp_path / "my_ln.py"
    good.write_text("import torch\nfrom torch import nn\nLayerNorm = nn.LayerNorm\n")
    bad = tmp_path / "bad_ln.py"
    bad.write_text("import torch\nfrom torch import nn\n"
                   "class LayerNorm(nn.Module):\n"
                   "    def __init__(self, n, eps=1e-5):\n        super().__init__(); self.eps = eps\n"
                   "        self.weight = nn.Parameter(torch.ones(n)); self.bias = nn.Parameter(torch.zeros(n))\n"
                   "    def forward(self, x):\n"
                   "        return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + self.eps) * self.weight + self.bias\n")
    run = lambda f: subprocess.run([sys.executable, "-m", "normlab.drills", "layernorm", str(f)],
                                   capture_output=True, text=True, timeout=60)
    assert run(good).returncode == 0
    r = run(bad)
    assert r.returncode == 1 and "✗" in r.stdout


def test_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown drill kind"):
        drills.check("layer_norm", LNClassic)


# ---------------------------------------------------------------- DeepNorm and block cards
def dn_constants(arch, N, M):
    if arch == "encoder":
        return (2 * N) ** 0.25, (8 * N) ** -0.25
    if arch == "decoder":
        return (2 * M) ** 0.25, (8 * M) ** -0.25
    if arch == "encdec_encoder":
        return 0.81 * (N ** 4 * M) ** 0.0625, 0.87 * (N ** 4 * M) ** -0.0625
    return (3 * M) ** 0.25, (12 * M) ** -0.25


def dn_constants_torchscale(arch, N, M):  # the code's 1.15 instead of the paper's 0.87
    a, b = dn_constants(arch, N, M)
    return (a, 1.15 * (N ** 4 * M) ** -0.0625) if arch == "encdec_encoder" else (a, b)


def test_deepnorm_constants_match_the_paper_numbers():
    assert drills.check("deepnorm_constants", dn_constants).passed
    # the checker's own table against numbers worked out by hand from §4.3
    from normlab.drills.checks import paper_deepnorm
    for (arch, N, M), (alpha, beta) in {("encoder", 12, 0): (2.2134, 0.3195), ("decoder", 0, 24): (2.6321, 0.2686),
                                        ("encdec_encoder", 18, 18): (1.9987, 0.3526),
                                        ("encdec_decoder", 18, 18): (2.7108, 0.2608)}.items():
        a, b = paper_deepnorm(arch, N, M)
        assert abs(a - alpha) < 1e-4 and abs(b - beta) < 1e-4, arch
    report = drills.check("deepnorm_constants", dn_constants_torchscale)
    assert "1.15" in str(report) and not report.passed


@pytest.mark.parametrize("fn,finding", [
    (lambda x, fx, a: F.layer_norm(x + a * fx, x.shape[-1:]), "alpha_on_branch"),
    (lambda x, fx, a: a * x + fx, "no_norm"),
])
def test_deepnorm_residual_mistakes(fn, finding):
    assert drills.check("deepnorm_residual", lambda x, fx, a: F.layer_norm(a * x + fx, x.shape[-1:])).passed
    assert finding in drills.check("deepnorm_residual", fn).ids()


def test_pre_and_post_norm_blocks():
    pre = lambda x, f, n: x + f(n(x))
    post = lambda x, f, n: n(x + f(x))
    assert drills.check("prenorm_block", pre).passed and drills.check("postnorm_block", post).passed
    assert "swapped" in drills.check("prenorm_block", post).ids()
    assert "swapped" in drills.check("postnorm_block", pre).ids()
    assert "no_residual" in drills.check("prenorm_block", lambda x, f, n: f(n(x))).ids()


def test_timed_mode_reports_the_time():
    drills.start("prenorm_block")
    report = drills.check("prenorm_block", lambda x, f, n: x + f(n(x)))
    assert report.elapsed is not None and "用时" in str(report)


def test_dyt_card_accepts_the_reference_and_names_mistakes():
    from normlab.beyond import DyT

    assert drills.check("dyt", DyT).passed

    class AlphaOutside(DyT):
        def forward(self, x):
            return self.alpha * torch.tanh(x) * self.weight + self.bias

    assert "alpha_outside" in drills.check("dyt", AlphaOutside).ids()


def test_model_answers_point_at_existing_notebook_sections():
    """Every "→ `NN_name` · section" in the drills notebook's model answers names a real heading."""
    import re
    from pathlib import Path

    notebooks = Path(__file__).resolve().parent.parent / "notebooks"
    text = (notebooks / "08_drills.md").read_text(encoding="utf-8")
    answers = text[text.index("## 资料中面试题的参考答案"):]
    targets = [line.split("→", 1)[1] for line in answers.splitlines() if "→ `" in line]
    assert len(targets) == 14                                   # the 10 of [A] and the 4 of [D]
    checked = 0
    for target in targets:
        notebook = None
        for chunk in target.split("；"):
            m = re.match(r"\s*`(\d\d_[a-z_]+)`(?: · )?(.*)", chunk)
            if m:
                notebook, chunk = m.group(1), m.group(2)
            title = re.sub(r"（[^）]*）$", "", chunk.strip())
            if not title:
                continue
            headings = [h.lstrip("#").strip() for h in (notebooks / f"{notebook}.md").read_text(encoding="utf-8").splitlines()
                        if h.startswith("## ") or h.startswith("### ")]
            assert any(h.startswith(title) for h in headings), (notebook, title)
            checked += 1
    assert checked >= 20
