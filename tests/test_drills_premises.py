"""Issue 37: the drill checker says what the code does. Every planted case here is written for this test (no
public file copied). For each false-premise message the issue reports, a case asserts that the false message is
absent and the true measurement present; every backward slip is named alone and combined with another on each
backward card it applies to; BatchNorm's running statistics are named term by term; the reports say which
buffer and step, the dtype returned, the card's own keepdim advice; GroupNorm's mistakes are named.
Cost: ~90 full checks of tiny tensors (a few seconds of CPU)."""

from __future__ import annotations

import itertools
import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlab import drills
from normlab.drills import progress


@pytest.fixture(autouse=True)
def progress_file(tmp_path, monkeypatch):
    path = tmp_path / "drills.json"
    monkeypatch.setenv(progress.FILE_VARIABLE, str(path))
    monkeypatch.setattr(progress, "_started", {})
    return path


def messages(report) -> str:
    return "\n".join(f.message for f in report.findings)


# ---------------------------------------------------------------- item 1: no message with a false premise
class LNOverDimOne(nn.Module):
    """keepdim=True everywhere; the statistics over dim 1 and γ shaped (1, D, 1): a broadcast error whose cause
    is not keepdim."""
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(1, d, 1))
        self.bias = nn.Parameter(torch.zeros(1, d, 1))

    def forward(self, x):
        mu = x.mean(dim=1, keepdim=True)
        var = ((x - mu) ** 2).mean(dim=1, keepdim=True)
        return (x - mu) / torch.sqrt(var + self.eps) * self.weight + self.bias


class LNNormalizeDimMinus2(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1, d, 1))

    def forward(self, x):
        return F.normalize(x, dim=-2) * self.scale


@pytest.mark.parametrize("cls", [LNOverDimOne, LNNormalizeDimMinus2])
def test_a_broadcast_error_without_a_missing_keepdim_is_not_called_one(cls):
    report = drills.check("layernorm", cls)
    assert "keepdim_missing" not in report.ids() and "少了 keepdim" not in messages(report), str(report)
    f = next(f for f in report.failed if f.id == "broadcast")
    assert "(1, 8, 1)" in f.message and "输入 (2, 5, 8)" in f.message          # the measured shapes
    assert "问题不在 keepdim" in f.message


def test_a_missing_keepdim_is_named_with_the_call_that_lacks_it():
    class LNNoKeep(nn.Module):
        def __init__(self, d, eps=1e-5):
            super().__init__()
            self.eps, self.weight, self.bias = eps, nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))

        def forward(self, x):
            mu = x.mean(-1)
            return (x - mu) / torch.sqrt(x.var(-1, unbiased=False) + self.eps) * self.weight + self.bias

    f = next(f for f in drills.check("layernorm", LNNoKeep).failed if f.id == "keepdim_missing")
    assert "x.mean(-1)" in f.message and "keepdim=True" in f.message


class ThetaBN(nn.Module):
    """γ/β named theta_sigma/theta_mu, statistics created on the first forward (seeded from it) and used in eval;
    training normalises with the n − 1 variance."""
    def __init__(self, num_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.theta_mu = nn.Parameter(torch.zeros(num_features))
        self.theta_sigma = nn.Parameter(torch.ones(num_features))
        self.eps, self.momentum = eps, momentum
        self.m_hat = None
        self.v_hat = None

    def forward(self, x):
        dims = [0] + list(range(2, x.dim()))
        shape = [1, -1] + [1] * (x.dim() - 2)
        if self.training:
            m, v = x.mean(dims), x.var(dims)
            with torch.no_grad():
                if self.m_hat is None:
                    self.m_hat, self.v_hat = m.clone(), v.clone()
                else:
                    self.m_hat = (1 - self.momentum) * self.m_hat + self.momentum * m
                    self.v_hat = (1 - self.momentum) * self.v_hat + self.momentum * v
        else:
            m, v = self.m_hat, self.v_hat
        xh = (x - m.reshape(shape)) / torch.sqrt(v.reshape(shape) + self.eps)
        return self.theta_sigma.reshape(shape) * xh + self.theta_mu.reshape(shape)


def test_a_batchnorm_is_read_by_what_its_tensors_do_not_by_their_names():
    report = drills.check("batchnorm", ThetaBN)
    ids = report.ids()
    assert "params" not in ids and "no_running_stats" not in ids and "bias_use" not in ids, str(report)
    assert not re.search(r"没有滑动统计量|应有可学习的 γ|β 应在最后加上", messages(report))
    assert {"unbiased_variance", "running_stats_seeded"} <= ids                  # its two real bugs
    late = next(f for f in report.failed if f.id == "stats_created_late")
    assert "m_hat" in late.message and "v_hat" in late.message


class RMSEmptyWeight(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(d).uniform_(-3.0, 3.0))   # never set to 1

    def forward(self, x):
        h = x.float()
        return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def test_an_upcasting_rmsnorm_is_never_told_it_lacks_the_upcast():
    report = drills.check("rmsnorm", RMSEmptyWeight)
    assert "upcast" not in messages(report), str(report)
    assert "params_weight" in report.ids()                                     # what is wrong: γ's initial value
    assert {"half_float16", "half_bfloat16"} <= {f.id for f in report.findings if f.passed}

    class NoUpcast(nn.Module):                                                  # the control: really no upcast
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    f = next(f for f in drills.check("rmsnorm", NoUpcast).failed if f.id == "half_float16")
    assert "no float32 upcast" in f.message


# ---------------------------------------------------------------- item 2: backward slips, fitted, on every card
def _views(card, x, G):
    """(mean over the statistic's group, mean over the slip's grouping, sum to a parameter, γ broadcast shape)."""
    if card in ("layernorm", "rmsnorm"):
        return (lambda t: t.mean(-1, keepdim=True), lambda t: t.mean(0, keepdim=True),
                lambda t: t.sum(0), (-1,))
    if card == "batchnorm":
        return (lambda t: t.mean(0, keepdim=True), lambda t: t.mean(1, keepdim=True), lambda t: t.sum(0), (1, -1))
    n, c = x.shape[:2]

    def group_mean(t):
        v = t.reshape(n, G, -1)
        return v.mean(-1, keepdim=True).expand_as(v).reshape(t.shape)

    return group_mean, lambda t: t.mean((2, 3), keepdim=True), lambda t: t.sum((0, 2, 3)), (1, c, 1, 1)


def planted(card, slips=(), factor=1.0):
    """A hand-written backward of ``card`` with the named slips."""
    def backward(grad_out, x, weight, *rest):
        eps, G = rest[-1], (rest[0] if card == "groupnorm" else None)
        S, O, P, wshape = _views(card, x, G)
        if "stats_wrong_axis" in slips:              # the whole backward on the other grouping
            S, O = O, S
        xc = x if card == "rmsnorm" else x - S(x)
        var = S(xc * xc)
        r, r_bare = 1 / torch.sqrt(var + eps), 1 / torch.sqrt(var)
        xh = xc * r
        gh = grad_out * weight.reshape(wshape)
        rv = r_bare if "eps_in_var_term" in slips else r
        xv = xc * rv
        var_term = rv * xv * (gh * xv if "var_not_summed" in slips else S(gh * xv))
        mean_term = r * (O(gh) if "mean_wrong_axis" in slips else S(gh))
        gx = r * gh
        if card != "rmsnorm" and "no_mean_term" not in slips or "extra_mean_term" in slips:
            gx = gx - mean_term
        if "var_sign" in slips:
            gx = gx + var_term
        elif "no_var_term" not in slips:
            gx = gx - var_term
        xw = x if "dgamma_from_x" in slips else (xc * r_bare if "eps_in_grad_weight" in slips else xh)
        gw = grad_out * xw
        gw = gw.sum(-1) if "grad_weight_wrong_axis" in slips else P(gw)
        out = (None if "grad_x_none" in slips else factor * gx, gw, P(grad_out))
        return out[:2] if card == "rmsnorm" else out
    return backward


CARDS = ["layernorm", "batchnorm", "rmsnorm", "groupnorm"]
# slip -> (the id it must be named by, a phrase its message must hold, the cards it applies to)
SLIPS = {
    "half": ("constant_factor", "×0.5", CARDS),
    "no_var_term": ("missing_var_term", "missing the variance term", CARDS),
    "no_mean_term": ("missing_mean_term", "missing the mean term", ["layernorm", "batchnorm", "groupnorm"]),
    "extra_mean_term": ("extra_term", "RMSNorm 不减均值", ["rmsnorm"]),
    "var_sign": ("term_sign", "符号反了", CARDS),
    "var_not_summed": ("term_not_summed", "逐元素", CARDS),
    "mean_wrong_axis": ("term_axis", "应在", ["layernorm", "batchnorm", "groupnorm"]),
    "eps_in_var_term": ("eps_missing", "grad_x 的方差项", CARDS),
    "eps_in_grad_weight": ("eps_missing", "grad_weight", CARDS),
    "dgamma_from_x": ("param_from_x", "x̂", CARDS),
    "grad_weight_wrong_axis": ("grad_weight_shape", "求和", ["layernorm", "rmsnorm", "batchnorm"]),
    "grad_x_none": ("grad_x_none", "None", CARDS),
    "stats_wrong_axis": ("other_axes", "statistics over the wrong axis", CARDS),
}
# a second slip to combine each with (one that touches another gradient or another term)
PARTNER = {"dgamma_from_x": "no_var_term", "eps_in_grad_weight": "var_sign", "grad_weight_wrong_axis": "var_sign",
           "grad_x_none": "dgamma_from_x", "no_var_term": "dgamma_from_x", "no_mean_term": "eps_in_grad_weight",
           "var_sign": "dgamma_from_x", "var_not_summed": "dgamma_from_x", "mean_wrong_axis": "dgamma_from_x",
           "eps_in_var_term": "dgamma_from_x", "extra_mean_term": "dgamma_from_x", "half": "dgamma_from_x",
           "stats_wrong_axis": "eps_in_grad_weight"}


def _expect(report, slip):
    id, phrase, _ = SLIPS[slip]
    f = next((f for f in report.failed if f.id == id and phrase in f.message), None)
    assert f is not None, (slip, str(report))


CASES = [(card, slip) for slip, (_, _, cards) in SLIPS.items() for card in cards]


@pytest.mark.parametrize("card,slip", CASES)
def test_each_backward_slip_is_named_alone_and_with_another(card, slip):
    kind = f"{card}_backward"
    textbook = drills.check(kind, planted(card))
    assert textbook.passed, str(textbook)                                       # the planted textbook passes
    alone = planted(card, (), 0.5) if slip == "half" else planted(card, (slip,))
    report = drills.check(kind, alone)
    _expect(report, slip)
    assert not report.passed and card + "_backward" == report.kind
    generic = [f for f in report.failed if "与 float64 autograd 不一致" in f.message]
    assert not generic, str(report)                                             # named, never "differs"
    partner = PARTNER[slip]
    if card not in SLIPS[partner][2]:
        partner = "dgamma_from_x"
    both = planted(card, (partner,), 0.5) if slip == "half" else planted(card, (slip, partner))
    report = drills.check(kind, both)
    _expect(report, slip)
    _expect(report, partner)


@pytest.mark.parametrize("card", ["layernorm", "rmsnorm", "batchnorm"])
def test_a_backward_written_for_other_layouts_is_measured_there(card):
    """Every 2-D probe raises: the layouts the card allows are tried and the report says which ran."""
    inner = planted(card)

    def only_3d(grad_out, x, weight, eps):
        if x.dim() != 3:
            raise IndexError("written for (B, T, D) / (N, C, L) only")
        if card == "batchnorm":           # statistics over batch and length, per channel
            n, c, l = x.shape
            flat = lambda t: t.permute(0, 2, 1).reshape(-1, c)                  # noqa: E731
            gx, gw, gb = inner(flat(grad_out), flat(x), weight, eps)
            return gx.reshape(n, l, c).permute(0, 2, 1), gw, gb
        flat = lambda t: t.reshape(-1, t.shape[-1])                             # noqa: E731
        got = inner(flat(grad_out), flat(x), weight, eps)
        return (got[0].reshape(x.shape),) + tuple(got[1:])

    report = drills.check(f"{card}_backward", only_3d)
    layout = next(f for f in report.failed if f.id == "layout")
    assert "(N, C, L)" in layout.message or "(B, T, D)" in layout.message
    assert {"grad_x", "grad_weight"} <= {f.id for f in report.findings if f.passed}, str(report)


def test_a_numpy_batchnorm_backward_with_two_slips_names_both():
    """dγ from x, and the variance term elementwise (no sum over the batch) with the wrong sign."""
    np = pytest.importorskip("numpy")

    def bn_backward(dout, x, gamma, eps):
        mu = x.mean(axis=0)
        var = ((x - mu) ** 2).mean(axis=0)
        inv = 1.0 / np.sqrt(var + eps)
        xhat = (x - mu) * inv
        dxhat = dout * gamma
        dx = inv * (dxhat - dxhat.mean(axis=0) + xhat * (dxhat * xhat))
        return dx, (dout * x).sum(axis=0), dout.sum(axis=0)

    report = drills.check("batchnorm_backward", bn_backward)
    assert {"param_from_x", "term_not_summed"} <= report.ids(), str(report)
    assert "符号是 +" in next(f.message for f in report.failed if f.id == "term_not_summed")


# ---------------------------------------------------------------- item 3: running statistics, term by term
def bn_with(slips):
    class BN(nn.Module):
        def __init__(self, c, eps=1e-5, momentum=0.1):
            super().__init__()
            self.eps, self.momentum = eps, momentum
            self.weight, self.bias = nn.Parameter(torch.ones(c)), nn.Parameter(torch.zeros(c))
            self.register_buffer("running_mean", torch.zeros(c))
            self.register_buffer("running_var", torch.ones(c))
            self.steps = 0

        def forward(self, x):
            if self.training:
                m, v = x.mean(0), x.var(0, unbiased=False)
                stored = v if "biased" in slips else x.var(0)
                stored = stored + self.eps if "eps_stored" in slips else stored
                keep, new = (self.momentum, 1 - self.momentum) if "keras" in slips else (1 - self.momentum, self.momentum)
                with torch.no_grad():
                    if self.steps == 0 and "seeded" in slips:
                        self.running_mean.copy_(m)
                        self.running_var.copy_(stored)
                    else:
                        self.running_mean.mul_(keep).add_(new * m)
                        self.running_var.mul_(keep).add_(new * stored)
                self.steps += 1
            else:
                m, v = self.running_mean, self.running_var
            eps = 0.0 if not self.training and "eval_no_eps" in slips else self.eps
            return (x - m) / torch.sqrt(v + eps) * self.weight + self.bias
    return BN


RUNNING = {"keras": "momentum_reversed", "seeded": "running_stats_seeded", "biased": "running_var_biased",
           "eps_stored": "running_var_eps", "eval_no_eps": "eval_eps_missing"}


@pytest.mark.parametrize("slips", [(s,) for s in RUNNING] + list(itertools.combinations(RUNNING, 2)) +
                         [("keras", "seeded", "biased"), tuple(RUNNING)])
def test_each_running_statistics_slip_is_named_on_its_own(slips):
    assert drills.check("batchnorm", bn_with(())).passed                       # the planted textbook passes
    report = drills.check("batchnorm", bn_with(slips))
    named = {RUNNING[s] for s in slips}
    assert named <= report.ids(), (slips, str(report))
    assert not report.ids() & (set(RUNNING.values()) - named), (slips, str(report))   # nothing it does not do
    assert "running_stats" not in report.ids()                                  # never the generic "differs"


def test_a_running_statistics_counterexample_names_the_buffer_and_the_step():
    f = next(f for f in drills.check("batchnorm", bn_with(("biased",))).failed if f.id == "running_var_biased")
    where = f.example["缓冲区 buffer"]
    assert "self.running_var" in where and re.search(r"第 \d 步之后", where)
    assert "batch" in f.example["input"]


# ---------------------------------------------------------------- item 4: reports a candidate can read
def test_got_shows_the_dtype_returned():
    class LNUnbiased(nn.Module):
        def __init__(self, d, eps=1e-5):
            super().__init__()
            self.eps, self.weight, self.bias = eps, nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))

        def forward(self, x):
            mu = x.mean(-1, keepdim=True)
            return (x - mu) / torch.sqrt(x.var(-1, keepdim=True) + self.eps) * self.weight + self.bias

    f = next(f for f in drills.check("layernorm", LNUnbiased).failed if f.example)
    assert re.match(r"tensor\([\d, ]+\) float32 \[", f.example["got"]), f.example


@pytest.mark.parametrize("kind,needle,absent", [
    ("rmsnorm", "x.pow(2).mean(-1, keepdim=True)", "x.var(-1"),
    ("batchnorm", "(1, C, 1, 1)", "x.mean(-1, keepdim=True)"),
])
def test_the_keepdim_advice_is_the_cards_own(kind, needle, absent):
    class NoKeep(nn.Module):
        def __init__(self, c, eps=1e-5, momentum=0.1):
            super().__init__()
            self.eps, self.weight = eps, nn.Parameter(torch.ones(c))
            self.bias = nn.Parameter(torch.zeros(c))
            self.register_buffer("running_mean", torch.zeros(c))
            self.register_buffer("running_var", torch.ones(c))

        def forward(self, x):
            if kind == "rmsnorm":
                return x / torch.sqrt(x.pow(2).mean(-1) + self.eps) * self.weight
            return (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + self.eps) * self.weight + self.bias

    report = drills.check(kind, NoKeep)
    text = next(f.message for f in report.findings if "keepdim" in f.message and not f.passed)
    assert needle in text and absent not in text, text


def test_no_production_mark_for_a_card_without_that_level_and_counts_that_do_not_move(capsys):
    from normlab.drills.__main__ import main

    report = drills.check("layernorm_backward", planted("layernorm", ("no_var_term",)), record=True)
    assert "工程级 —" in report.verdict() and "/" not in "".join(report.level_lines())
    drills.check("layernorm_backward", planted("layernorm"), record=True)
    capsys.readouterr()
    main(["--progress"])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("④"))
    assert row.split()[-1] == "—" and "✓" in row                                 # interview ✓, production —
    bad = [drills.check("layernorm", cls) for cls in (LNOverDimOne, nn.LayerNorm)]
    assert all(not re.search(r"\d+/\d+ 项", line) for r in bad for line in r.level_lines())


# ---------------------------------------------------------------- item 5: GroupNorm
class GNBase(nn.Module):
    def __init__(self, num_groups, num_channels, eps=1e-5):
        super().__init__()
        self.G, self.eps = num_groups, eps
        self.weight = nn.Parameter(torch.ones(num_channels))
        self.bias = nn.Parameter(torch.zeros(num_channels))

    def affine(self, y):
        return y * self.weight.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)


class GNSpatial(GNBase):          # CS231n's spatial_groupnorm_forward, as a module
    def forward(self, x):
        n, c, h, w = x.shape
        v = x.reshape(n, self.G, c // self.G, h, w)
        mu = v.mean((2, 3, 4), keepdim=True)
        var = v.var((2, 3, 4), unbiased=False, keepdim=True)
        return self.affine(((v - mu) / torch.sqrt(var + self.eps)).reshape(n, c, h, w))


class GNInterleaved(GNBase):
    def forward(self, x):
        n, c, h, w = x.shape
        v = x.reshape(n, c // self.G, self.G, h, w)
        mu = v.mean((1, 3, 4), keepdim=True)
        var = v.var((1, 3, 4), unbiased=False, keepdim=True)
        return self.affine(((v - mu) / torch.sqrt(var + self.eps)).reshape(n, c, h, w))


class GNPerChannel(GNBase):
    def forward(self, x):
        mu, var = x.mean((2, 3), keepdim=True), x.var((2, 3), unbiased=False, keepdim=True)
        return self.affine((x - mu) / torch.sqrt(var + self.eps))


class GNGammaPerGroup(nn.Module):
    def __init__(self, num_groups, num_channels, eps=1e-5):
        super().__init__()
        self.G, self.eps = num_groups, eps
        self.gamma = nn.Parameter(torch.ones(1, num_groups, 1, 1, 1))
        self.beta = nn.Parameter(torch.zeros(1, num_groups, 1, 1, 1))

    def forward(self, x):
        n, c, h, w = x.shape
        v = x.reshape(n, self.G, c // self.G, h, w)
        mu = v.mean((2, 3, 4), keepdim=True)
        var = v.var((2, 3, 4), unbiased=False, keepdim=True)
        return ((v - mu) / torch.sqrt(var + self.eps) * self.gamma + self.beta).reshape(n, c, h, w)


@pytest.mark.parametrize("cls,want", [(GNSpatial, None), (nn.GroupNorm, None), (GNInterleaved, "groups_wrong_axis"),
                                      (GNPerChannel, "per_channel_stats"), (GNGammaPerGroup, "gamma_per_group")])
def test_groupnorm_card_passes_the_textbook_and_names_its_mistakes(cls, want):
    report = drills.check("groupnorm", cls)
    if want is None:
        assert report.passed, str(report)
    else:
        assert not report.passed and want in report.ids(), str(report)
        assert "forward" not in report.ids()


def test_groupnorm_backward_names_per_channel_statistics():
    def per_channel_mean(grad_out, x, weight, num_groups, eps):
        gx, gw, gb = planted("groupnorm", ("mean_wrong_axis",))(grad_out, x, weight, num_groups, eps)
        return gx, gw, gb

    f = next(f for f in drills.check("groupnorm_backward", per_channel_mean).failed if f.id == "term_axis")
    assert "每个通道" in f.message and "每组" in f.message
    assert drills.check("groupnorm_backward", lambda g, x, w, G, eps: torch.autograd.grad(
        (F.group_norm(x.requires_grad_(True), G, w.requires_grad_(True), None, eps) * g).sum(), [x, w]) +
        (g.sum((0, 2, 3)),)).passed                                             # autograd itself passes


def test_groupnorm_cards_run_from_the_command_line(tmp_path, capsys):
    from normlab.drills.__main__ import main

    file = tmp_path / "my gn 组归一化.py"
    file.write_text("import torch\nfrom torch import nn\nGroupNorm = nn.GroupNorm\n", encoding="utf-8")
    assert main(["check", "groupnorm", str(file)]) == 0
    assert "[groupnorm] 通过 PASSED" in capsys.readouterr().out
    assert main(["10", str(file)]) == 0 and main(["--reset", "11"]) == 0


def test_groupnorm_in_cs231n_function_form_is_checked_as_a_module():
    def spatial_groupnorm_forward(x, gamma, beta, G, gn_param):
        n, c, h, w = x.shape
        xg = x.reshape(n, G, c // G, h, w)
        mu, var = xg.mean((2, 3, 4), keepdim=True), xg.var((2, 3, 4), unbiased=False, keepdim=True)
        xn = ((xg - mu) / torch.sqrt(var + gn_param.get("eps", 1e-5))).reshape(n, c, h, w)
        return gamma * xn + beta, (xn, gamma, var)

    report = drills.check("groupnorm", spatial_groupnorm_forward)
    assert report.passed and "function_form" in report.ids(), str(report)

    def spatial_groupnorm_backward(dout, cache):
        raise NotImplementedError

    f = next(f for f in drills.check("groupnorm_backward", spatial_groupnorm_backward).failed
             if f.id == "signature_cache")
    assert "(dout, cache)" in f.message and "num_groups" in f.message


def test_an_eval_branch_is_said_to_use_the_batch_only_when_it_does():
    class EvalTanh(bn_with(())):
        def forward(self, x):
            y = super().forward(x)
            return y if self.training else y + 100 * x.abs()               # wrong, but per sample

    f = next(f for f in drills.check("batchnorm", EvalTanh).failed if f.id == "eval_mode")
    assert "不依赖同 batch" in f.message and "依赖同 batch 的其它样本（" not in f.message

    class EvalBatch(bn_with(())):
        def forward(self, x):
            y = super().forward(x)
            return y if self.training else y + 100 * (x.abs() - x.abs().mean(0))  # uses the batch

    f = next(f for f in drills.check("batchnorm", EvalBatch).failed if f.id == "eval_mode")
    assert "依赖同 batch 的其它样本（" in f.message


def test_a_term_whose_r_uses_the_unbiased_variance_and_a_zero_gradient_are_named():
    def backward(grad_out, x, weight, eps):
        xc = x - x.mean(-1, keepdim=True)
        r = 1 / torch.sqrt((xc ** 2).mean(-1, keepdim=True) + eps)
        r_unbiased = 1 / torch.sqrt(x.var(-1, keepdim=True) + eps)           # only in the variance term
        gh, xu = grad_out * weight, xc * r_unbiased
        grad_x = r * gh - r * gh.mean(-1, keepdim=True) - r_unbiased * xu * (gh * xu).mean(-1, keepdim=True)
        return grad_x, torch.zeros_like(weight), grad_out.sum(0)

    report = drills.check("layernorm_backward", backward)
    f = next(f for f in report.failed if f.id == "unbiased_variance")
    assert "方差项" in f.message and "grad_weight_zero" in report.ids(), str(report)
