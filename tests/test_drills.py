"""The drill checker accepts correct hand-written norms in several styles and names each common mistake."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlab import drills
from normlab.drills import progress
from normlab.drills import report as drill_report
from normlab.drills.report import Finding, Report

ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = Path(__file__).resolve().parent / "drill_corpus"
CORPUS = sorted(CORPUS_DIR.glob("*.py"))


@pytest.fixture(autouse=True)
def progress_file(tmp_path, monkeypatch):
    """Every test writes its progress to its own temporary file (never ~/.normlab), with no clock running."""
    path = tmp_path / "progress" / "drills.json"
    monkeypatch.setenv(progress.FILE_VARIABLE, str(path))
    monkeypatch.setattr(progress, "_started", {})
    monkeypatch.setattr(progress, "_enabled", True)
    return path


def _load(path: Path):
    """A corpus file: its DRILL dict and the implementation the CLI would check."""
    spec = importlib.util.spec_from_file_location(f"drill_corpus_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DRILL, getattr(module, drills.NAMES[module.DRILL["kind"]])


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


class HangingForwardLN(LNClassic):   # a hang that waits (slow_ln is the one that spins: both are stopped)
    def forward(self, x):
        while True:
            time.sleep(0.01)


class NotATensorLN(LNClassic):
    def forward(self, x):
        return x.tolist()


class HangingBatchOfOne(BNGood):  # a hang is not "raises like PyTorch"
    def forward(self, x):
        while self.training and x.shape[0] == 1:
            time.sleep(0.01)            # waits rather than spins: the limit stops it all the same, for less CPU
        return super().forward(x)


@pytest.mark.parametrize("kind,impl,finding,level", [
    ("layernorm", LNUnbiased, "unbiased_variance", "interview"),
    ("layernorm", LNEpsOutside, "eps_outside_root", "interview"),
    ("layernorm", LNOnePass, "one_pass_variance", "interview"),
    ("layernorm", LNInPlace, "input_modified", "interview"),
    ("layernorm", LNDetached, "gradients", "interview"),
    ("layernorm", LNNoUpcast, "half_float16", "production"),
    ("layernorm", LNHardcodedEps, "eps_ignored", "interview"),
    ("rmsnorm", RMSNoUpcast, "half_float16", "production"),
    ("rmsnorm", RMSCentered, "centered", "interview"),
    ("rmsnorm", RMSWithBias, "no_bias", "interview"),
    ("rmsnorm", RMSEpsOutside, "eps_outside_root", "interview"),
    ("batchnorm", BNReversedMomentum, "momentum_reversed", "interview"),
    ("batchnorm", BNBiasedRunningVar, "running_var_biased", "interview"),
    ("batchnorm", BNNotBuffers, "buffers", "interview"),
    ("batchnorm", BNGradMode, "mode_from_grad", "interview"),
    ("batchnorm", BNGraphInStats, "stats_graph", "interview"),
    ("batchnorm", BNUpdatesInEval, "eval_no_update", "interview"),
    ("batchnorm", BNNaNBatchOne, "batch_of_one", "production"),
    ("batchnorm", BNNoCastBack, "half_bfloat16", "production"),
    ("batchnorm", BNHardcodedMomentum, "momentum_ignored", "interview"),
    ("batchnorm", BNHardcodedEps, "eps_ignored", "interview"),
    ("layernorm_backward", ln_backward_no_stats_grad, "stats_as_constants", "interview"),
    ("batchnorm_backward", bn_backward_wrong_count, "grad_bias_shape", "interview"),
])
def test_each_common_mistake_is_named(kind, impl, finding, level):
    report = drills.check(kind, impl)
    assert not report.passed_at(level)
    assert report.passed == (level == "production"), str(report)   # a production finding leaves the interview level
    assert finding in report.ids(), str(report)
    failed = next(f for f in report.failed if f.id == finding)
    assert failed.level == level
    assert failed.message and any("\u4e00" <= ch <= "\u9fff" for ch in failed.message)  # Chinese text


def test_counterexample_shows_input_expected_got():
    report = drills.check("layernorm", LNUnbiased)
    f = next(f for f in report.failed if f.id == "unbiased_variance")
    assert set(f.example) == {"input", "expected", "got"}
    assert "<table" in report._repr_html_() and "unbiased_variance" in str(report)


@pytest.mark.parametrize("kind,impl,needle,level", [
    ("layernorm", RaisesLN, "RuntimeError", "interview"), ("layernorm", WrongShapeLN, "形状", "interview"),
    ("layernorm", slow_ln, "时间限制", "interview"), ("layernorm", NaNLN, "NaN", "interview"),
    ("layernorm", WrongDtypeLN, "dtype", "production"), ("layernorm", HangingForwardLN, "时间限制", "interview"),
    ("layernorm", NotATensorLN, "Tensor", "interview"), ("batchnorm", HangingBatchOfOne, "时间限制", "production"),
    ("layernorm_backward", lambda g, x, w, eps: 1 / 0, "ZeroDivisionError", "interview"),
])
def test_broken_submissions_become_findings_not_crashes(kind, impl, needle, level, monkeypatch):
    fired = []                      # time limits that ran out, counted (not timed: a busy machine slows the clock)
    real_limit = drill_report.time_limit

    @contextlib.contextmanager
    def counting_limit(seconds):
        try:
            with real_limit(seconds):
                yield
        except drill_report.DrillTimeout:
            fired.append(seconds)
            raise

    monkeypatch.setattr(drill_report, "time_limit", counting_limit)
    t0 = time.process_time()
    report = drills.check(kind, impl)
    assert not report.passed_at(level) and needle in str(report), str(report)
    assert "checker" not in report.ids()
    assert len(fired) <= 1, f"a hang must stop the check at its first time limit, {len(fired)} ran out"
    assert ("时间限制" in needle) == (len(fired) == 1)
    assert time.process_time() - t0 < 5   # CPU time, which other processes' load does not add to


class NoFormulaLN(LNClassic):     # matches no known formula: the whole combination search runs
    def forward(self, x):
        return torch.tanh(x) * self.weight + self.bias


class NoFormulaBN(BNGood):
    def forward(self, x):
        return torch.tanh(x)


def test_full_check_is_fast():
    """CPU time of a full check (process time: what the checker costs, not how busy the machine is),
    including the combination search on submissions with combined mistakes. Budget: 1 s."""
    corpus = {p.stem: _load(p) for p in CORPUS if p.stem in ("ln_annotated_transformer", "bn_d2l_style",
                                                              "bw_bn_unbiased", "rms_gemma_one_plus")}
    cases = [("layernorm", LNClassic), ("batchnorm", BNGood), ("rmsnorm", RMSLlama),
             ("layernorm_backward", ln_backward), ("batchnorm_backward", bn_backward),
             ("rmsnorm_backward", rms_backward), ("deepnorm_constants", dn_constants),
             ("deepnorm_init", dn_init), ("prenorm_block", lambda x, f, n: x + f(n(x))),
             ("layernorm", LNUnbiased), ("layernorm", NoFormulaLN), ("batchnorm", NoFormulaBN)] + \
        [(d["kind"], impl) for d, impl in corpus.values()]
    for kind, impl in cases:
        drills.check(kind, impl)                    # warm caches (first calls of torch kernels)
        t0 = time.process_time()
        drills.check(kind, impl)
        assert time.process_time() - t0 < 1.0, (kind, impl)


def test_command_line(tmp_path, capsys):
    good = tmp_path / "my_ln.py"
    good.write_text("import torch\nfrom torch import nn\nLayerNorm = nn.LayerNorm\n", encoding="utf-8")
    bad = tmp_path / "bad_ln.py"
    bad.write_text("import torch\nfrom torch import nn\n"
                   "class LayerNorm(nn.Module):\n"
                   "    def __init__(self, n, eps=1e-5):\n        super().__init__(); self.eps = eps\n"
                   "        self.weight = nn.Parameter(torch.ones(n)); self.bias = nn.Parameter(torch.zeros(n))\n"
                   "    def forward(self, x):\n"
                   "        return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + self.eps) * self.weight + self.bias\n", encoding="utf-8")
    textbook = CORPUS_DIR / "ln_textbook_two_pass.py"       # interview ✓, production ✗
    r = subprocess.run([sys.executable, "-m", "normlab.drills", "layernorm", str(textbook)],
                       capture_output=True, text=True, timeout=120, encoding="utf-8")
    assert r.returncode == 0 and "面试级 ✓" in r.stdout and "工程级 ✗" in r.stdout, r.stdout + r.stderr
    from normlab.drills.__main__ import main          # the same entry point, in-process (one torch import)
    assert main(["layernorm", str(good)]) == 0
    assert main(["layernorm", str(good), "--level", "production"]) == 0
    capsys.readouterr()
    assert main(["layernorm", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "✗" in out and "面试级" in out
    assert main(["layernorm", str(textbook), "--level=production"]) == 1
    assert main(["layernorm", str(textbook), "--level", "strict"]) == 2
    other = tmp_path / "my_bn.py"                       # another name for the class: checked when unambiguous
    other.write_text("from torch import nn\nclass MyBatchNorm1d(nn.BatchNorm1d):\n    pass\n", encoding="utf-8")
    assert main(["batchnorm", str(other)]) == 0 and "MyBatchNorm1d" in capsys.readouterr().out


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


def test_dyt_card_accepts_the_reference_and_names_mistakes():
    from normlab.lessons.beyond import DyT

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


# ---------------------------------------------------------------- the corpus of real-world patterns (issue 16)
@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus(path):
    """Each pattern reaches the verdict its file states at both levels, and the report names the
    mistakes it lists; no report of the corpus contains a checker error."""
    expect, impl = _load(path)
    report = drills.check(expect["kind"], impl)
    assert report.passed == expect["interview"], str(report)
    assert report.passed_production == expect["production"], str(report)
    assert set(expect["findings"]) <= report.ids(), str(report)
    assert not ({"checker", "raised", "timeout", "unexpected"} & report.ids()), str(report)
    for f in report.failed:
        assert "检查无法进行" not in f.message, str(report)          # a step broken by the submission
        assert any("\u4e00" <= ch <= "\u9fff" for ch in f.message)
    lines = str(report).splitlines()
    assert lines[0].count("面试级") == 1 and lines[0].count("工程级") == 1          # the one-line verdict
    assert lines[1].lstrip().startswith("面试级") and lines[2].lstrip().startswith("工程级")


def test_corpus_covers_the_issue():
    """The corpus holds the patterns issue 16 lists, correct and buggy, for every card kind."""
    files = {p.stem: _load(p)[0] for p in CORPUS}
    named = set().union(*(d["findings"] for d in files.values()))
    assert {"unbiased_variance", "eps_outside_root", "eps_missing", "eps_ignored", "one_pass_variance",
            "one_plus_weight", "no_sqrt", "wrong_axis", "no_running_stats", "eval_uses_batch_stats", "stats_graph",
            "channels_last", "mode_from_grad", "buffers", "running_var_biased", "momentum_reversed", "wrong_divisor",
            "constant_factor", "stats_as_constants", "sum_not_mean", "centered"} <= named
    assert sum(d["interview"] for d in files.values()) >= 10 and sum(not d["interview"] for d in files.values()) >= 20
    assert any(len(d["findings"]) >= 2 and not d["interview"] for d in files.values())      # combined mistakes
    assert {d["kind"] for d in files.values()} >= {"layernorm", "rmsnorm", "batchnorm", "layernorm_backward",
                                                   "batchnorm_backward", "rmsnorm_backward"}


def test_annotated_transformer_names_both_mistakes_in_one_report():
    expect, impl = _load(CORPUS_DIR / "ln_annotated_transformer.py")
    report = drills.check("layernorm", impl)
    assert {"unbiased_variance", "eps_outside_root"} <= report.ids()
    assert "同时有 2 处错误" in str(report)
    assert "param_names" in report.ids() and next(f for f in report.failed if f.id == "param_names").level == "production"


def test_wrong_axis_says_which_axes_were_reduced():
    _, impl = _load(CORPUS_DIR / "ln_wrong_axis.py")
    msg = next(f.message for f in drills.check("layernorm", impl).failed if f.id == "wrong_axis")
    assert "dim=(1,)" in msg and "最后 1 维" in msg


def test_backward_constant_factor_is_said():
    _, impl = _load(CORPUS_DIR / "bw_ln_double_grad.py")
    msg = next(f.message for f in drills.check("layernorm_backward", impl).failed if f.id == "constant_factor")
    assert "×2" in msg
    _, impl = _load(CORPUS_DIR / "bw_bn_mean_not_sum.py")
    msg = next(f.message for f in drills.check("batchnorm_backward", impl).failed if f.id == "constant_factor")
    assert "×1/N" in msg


def test_levels_and_verdict_line():
    fs = [Finding("a", True, "ok"), Finding("b", False, "工程", level="production")]
    r = Report("layernorm", fs)
    assert r.passed and not r.passed_production and r.passed_at("interview") and not r.passed_at("production")
    assert r.verdict() == "面试级 ✓ · 工程级 ✗ 1 项"
    r = Report("layernorm", [Finding("c", False, "面试")])
    assert not r.passed and not r.passed_production
    strict = drills.check("layernorm", nn.LayerNorm, level="production")
    assert strict.level == "production" and strict.passed_at() and strict.passed
    with pytest.raises(ValueError):
        drills.check("layernorm", nn.LayerNorm, level="strict")


def test_rmsnorm_report_does_not_mention_beta():
    """Issue 15 item 11: RMSNorm has no β, so its gradient check speaks of x and γ only."""
    report = drills.check("rmsnorm", RMSLlama)
    msg = next(f.message for f in report.findings if f.id == "gradients")
    assert "β" not in msg and "γ" in msg


def test_ignored_eps_is_caught_in_forward_and_backward():
    """eps 1e-2 and |x| 1e-3 probes: a hard-coded eps cannot pass (issue 16's false accept)."""
    def rms_bw_fixed_eps(g, x, w, eps):
        return rms_backward(g, x, w, 1e-5)
    assert "eps_ignored" in drills.check("rmsnorm_backward", rms_bw_fixed_eps).ids()
    assert "eps_ignored" in drills.check("layernorm", LNHardcodedEps).ids()


def test_a_step_that_raises_keeps_the_rest_of_the_report():
    _, impl = _load(CORPUS_DIR / "bn_eval_raises.py")
    report = drills.check("batchnorm", impl)
    eval_f = next(f for f in report.failed if f.id == "eval_mode")
    assert "UnboundLocalError" in eval_f.message or "NameError" in eval_f.message
    assert {"train_2d", "buffers", "params"} <= report.ids(failed_only=False) - report.ids()


def test_broadcast_shaped_parameters_are_checked_not_fatal():
    """d2l keeps γ, β and the statistics as (1, C) / (1, C, 1, 1): checked in both layouts, the
    shapes named at the production level."""
    _, impl = _load(CORPUS_DIR / "bn_d2l_style.py")
    report = drills.check("batchnorm", impl)
    assert {"train_2d", "train_4d"} <= report.ids(failed_only=False) - report.ids()
    sd = next(f for f in report.failed if f.id == "state_dict")
    assert sd.level == "production"
    shapes = next(f for f in report.failed if f.id == "param_shapes")
    assert shapes.level == "production" and "(1, 3)" in shapes.message and "(C,)" in shapes.message


def test_written_out_references_match_torch():
    """The checker's float64 references (faster than torch's float64 CPU kernels) are torch's semantics."""
    from normlab.drills.checks import _ln_reference, _torch_bn
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 5, 6, generator=g, dtype=torch.float64) * 3 + 1
    w, b = torch.randn(3, generator=g, dtype=torch.float64), torch.randn(3, generator=g, dtype=torch.float64)
    for shape in [(16, 3), (4, 3, 5, 6)]:
        xi = x.reshape(-1)[: torch.Size(shape).numel()].reshape(shape)
        rm1, rv1, rm2, rv2 = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), \
            torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
        for momentum in (0.1, 0.3):
            assert torch.allclose(_torch_bn(xi, rm1, rv1, w, b, True, momentum, 1e-2),
                                  F.batch_norm(xi, rm2, rv2, w, b, True, momentum, 1e-2))
            assert torch.allclose(rm1, rm2) and torch.allclose(rv1, rv2)
        assert torch.allclose(_torch_bn(xi, rm1, rv1, w, b, False), F.batch_norm(xi, rm2, rv2, w, b, False))
    y = torch.randn(2, 5, 8, generator=g, dtype=torch.float64) * 2 + 1
    wv, bv = torch.randn(8, generator=g, dtype=torch.float64), torch.randn(8, generator=g, dtype=torch.float64)
    assert torch.allclose(_ln_reference(y, (8,), wv, bv, 1e-2, False), F.layer_norm(y, (8,), wv, bv, 1e-2))
    assert torch.allclose(_ln_reference(y, (8,), wv, None, 1e-2, True), F.rms_norm(y, (8,), wv, 1e-2))
    assert torch.allclose(_ln_reference(y, (5, 8), torch.ones(5, 8), torch.zeros(5, 8), 1e-5, False),
                          F.layer_norm(y, (5, 8), eps=1e-5))


# ---------------------------------------------------------------- DeepNorm β at initialisation (issue 15, [A] Q7)
def dn_init(block, beta):
    for name, m in block.named_modules():
        if isinstance(m, nn.Linear):
            gain = beta if name.rsplit(".", 1)[-1] in ("fc1", "fc2", "v_proj", "out_proj") else 1.0
            nn.init.xavier_normal_(m.weight, gain=gain)
            nn.init.zeros_(m.bias)


def dn_init_all(block, beta):              # [E]'s reading: every weight times beta
    for m in block.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_normal_(m.weight, gain=beta)


def dn_init_attention_only(block, beta):   # forgets the FFN
    for name, m in block.named_modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_normal_(m.weight, gain=beta if name.endswith(("v_proj", "out_proj")) else 1.0)


def dn_init_torchscale_style(block, beta):  # xavier_uniform first, then divide the scaled ones by 1/beta
    for name, m in block.named_modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if name.rsplit(".", 1)[-1] in ("fc1", "fc2", "v_proj", "out_proj"):
                m.weight.data.div_(1 / beta)


def test_deepnorm_init_card():
    assert drills.check("deepnorm_init", dn_init).passed
    assert drills.check("deepnorm_init", dn_init_torchscale_style).passed
    assert "scaled_qk" in drills.check("deepnorm_init", dn_init_all).ids()
    report = drills.check("deepnorm_init", dn_init_attention_only)
    assert "not_scaled" in report.ids() and "fc1" in str(report)
    state = torch.random.get_rng_state()
    drills.check("deepnorm_init", dn_init)
    assert torch.equal(state, torch.random.get_rng_state())      # the learner's random stream is untouched


def test_learner_version_of_the_drill_notebook_is_valid_python():
    """The learner copy drops answers and solution-only lines: every code cell must still parse
    (a loop whose body was solution-only once left a bare `for` header)."""
    import ast

    import jupytext
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import notebooks as nbtools

    nb = nbtools.versions(jupytext.read(Path(__file__).resolve().parent.parent / "notebooks" / "08_drills.md"), learner=True)
    for cell in nb.cells:
        if cell.cell_type == "code":
            ast.parse(cell.source)
    assert any("NotImplementedError" in c.source for c in nb.cells if c.cell_type == "code")


# (timed mode, the progress file and the command line: tests/test_drills_cli.py)


# ---------------------------------------------------------------- notebook 08: the learner version holds no answer
def _drill_sources():
    import jupytext
    sys.path.insert(0, str(ROOT / "tools"))
    import notebooks as nbtools

    source = nbtools.without_teacher_notes(jupytext.read(ROOT / "notebooks" / "08_drills.md"))
    return nbtools, source, nbtools.versions(source, learner=True), nbtools.versions(source, learner=False)


def _answer_lines(nbtools, nb) -> set[str]:
    """Lines of the source that belong to an answer (code and markdown solution blocks, solution-only
    lines, solution cells) and to nothing else in it."""
    answer, other = set(), set()
    for cell in nb.cells:
        inside = nbtools.is_solution_cell(cell)
        begin, end = (nbtools.BEGIN, nbtools.END) if cell.cell_type == "code" else (nbtools.MD_BEGIN, nbtools.MD_END)
        for line in cell.source.splitlines():
            s = line.strip()
            if s in (begin, end):
                inside = (s == begin) or nbtools.is_solution_cell(cell)
                continue
            (answer if inside or (cell.cell_type == "code" and s.endswith(nbtools.ONLY)) else other).add(s)
    return {s for s in answer - other if len(s) >= 8}


def test_learner_version_of_the_drill_notebook_holds_no_answer():
    import re

    nbtools, source, learner, solution = _drill_sources()
    text = "\n".join(c.source for c in learner.cells)
    answers = _answer_lines(nbtools, source)
    assert len(answers) > 100                                               # the answers exist in the source ...
    leaked = sorted(a for a in answers if a in {line.strip() for line in text.splitlines()})
    assert not leaked, leaked[:5]                                           # ... and none reaches the learner
    solution_text = "\n".join(c.source for c in solution.cells)
    for formula in (r"\langle \hat g", r"\hat g", "ghat", "xhat", r"\partial L/\partial x =", "rsqrt"):
        assert formula in solution_text and formula not in text, formula   # the backward formulas
    for cls in ("LNTextbook", "LNWithUnbiasedVar", "## 资料中面试题的参考答案", "**[A]", "record_progress", "expect("):
        assert cls in solution_text and cls not in text, cls
    # what a card's task says outside its hint gives nothing away; the hints are behind a reveal
    opened = re.sub(r"<details>.*?</details>", "", text, flags=re.S)
    hinted = ("有偏", "无偏", "根号里", "register_buffer", "self.training", "no_grad", "is_grad_enabled", "先转 float32",
              "(2N)^{1/4}", r"\tanh(\alpha", "乘在恒等路径", "E[x²]", "(1 + weight)")
    for phrase in hinted + ("sublayer(norm(x))", "norm(x + sublayer", "var(", ".std(", "xavier_normal_(module"):
        assert phrase not in opened, phrase
    assert all(phrase in text for phrase in hinted)                         # behind the reveal
    assert text.count("<details><summary>提示 (hint)</summary>") == len(drills.CARDS)
    assert not [c for c in learner.cells if not c.source.strip()]            # no empty leftover cell
    assert not any(nbtools.is_teacher_note(c) for c in learner.cells)


REQUIRED = {   # card heading -> what its task must state: the signature, the names the checker looks for, the layout
    "① LayerNorm": ["LayerNorm(normalized_shape, eps=1e-5)", "self.weight", "self.bias", "self.eps",
                   "(..., *normalized_shape)"],
    "② RMSNorm": ["RMSNorm(normalized_shape, eps=1e-6)", "self.weight", "self.eps"],
    "③ BatchNorm": ["BatchNorm(num_features, eps=1e-5, momentum=0.1)", "self.weight", "self.bias",
                   "self.running_mean", "self.running_var", "self.eps", "self.momentum", "(N, C)", "(N, C, H, W)",
                   "running = (1 − momentum) · running + momentum · batch", "model.eval()"],
    "④ LayerNorm": ["layernorm_backward(grad_out, x, weight, eps) -> (grad_x, grad_weight, grad_bias)", "(N, D)"],
    "⑤ BatchNorm": ["batchnorm_backward(grad_out, x, weight, eps) -> (grad_x, grad_weight, grad_bias)", "(N, C)"],
    "⑥ RMSNorm": ["rmsnorm_backward(grad_out, x, weight, eps) -> (grad_x, grad_weight)", "(N, D)"],
    "⑦ Pre-Norm": ["prenorm_block(x, sublayer, norm)", "postnorm_block(x, sublayer, norm)", "(B, S, d)"],
    "⑧ DeepNorm": ["deepnorm_constants(arch, N, M) -> (alpha, beta)", "deepnorm_residual(x, fx, alpha)",
                  "deepnorm_init(block, beta)", '"encdec_encoder"', "q_proj", "fc2"],
    "⑨ DyT": ["DyT(d, alpha_init=0.5)", "self.alpha", "self.weight", "self.bias", "(..., d)"],
    "⑩ GroupNorm": ["GroupNorm(num_groups, num_channels, eps=1e-5)", "self.weight", "self.bias", "self.eps", "(N, C, H, W)"],
    "⑪ GroupNorm": ["groupnorm_backward(grad_out, x, weight, num_groups, eps) -> (grad_x, grad_weight, grad_bias)",
                   "(N, C, H, W)"],
}


def test_each_card_states_its_task_and_is_timed():
    """A card's task names its signature and required names (outside the hint); its clock starts in a
    cell of its own before the blank, and every kind checked on the card belongs to the card started."""
    import re

    _, _, learner, _ = _drill_sources()
    cells = learner.cells
    heads = [i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## ")]
    assert len(heads) == len(REQUIRED) == len(drills.CARDS)
    for h, (title, needed), (card, (number, kinds, _)) in zip(heads, REQUIRED.items(), drills.CARDS.items()):
        task = re.sub(r"<details>.*?</details>", "", cells[h].source, flags=re.S)
        assert cells[h].source.startswith(f"## {title}") and title.startswith(number)
        for name in needed:
            assert name in task, (title, name)
        assert f"目标 {drills.TARGETS[kinds[0]] // 60} 分钟" in task, title
        start, blank = cells[h + 1], cells[h + 2]
        assert start.source.strip() == f'drills.start("{card}")', title          # its own cell, before the blank
        assert "NotImplementedError" in blank.source and "drills.start" not in blank.source
        body = "\n".join(c.source for c in cells[h + 2: (heads + [len(cells)])[heads.index(h) + 1]])
        assert set(re.findall(r'drills\.check\("(\w+)"', body)) == set(kinds), title
