"""The exercises of lessons 04-07 (normlab/exercises/l04.py ... l07.py and the 练习 sections of the
notebooks): each reference solution, taken from the notebook source itself, passes in well under
2 s; each real mistake is named by its finding id; the learner version's blank gives "not written";
the learner export holds no solution code."""

from __future__ import annotations

import math
import re
import sys
import time
from pathlib import Path

import jupytext
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from normlab import exercises, models
from normlab.exercises import l06, l07
from test_exercises import counts_never_change  # noqa: F401 - autouse: every report counts out of its checks

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import notebooks as nbtools  # noqa: E402

NOTEBOOKS = {"04": "04_rmsnorm", "05": "05_deepnorm", "06": "06_placement", "07": "07_beyond"}
IDS = {"04": ["04.1", "04.2", "04.3", "04.4"], "05": ["05.1", "05.2", "05.3"], "06": ["06.1", "06.2", "06.3"],
       "07": ["07.1", "07.2", "07.3"]}
ALL_IDS = [i for ids in IDS.values() for i in ids]


def answers(lesson: str, learner: bool) -> dict[str, object]:
    """The answer cells of a lesson's 练习 section run as the solution or the learner version; the
    objects each check cell passes to exercises.check, by exercise id."""
    nb = jupytext.read(ROOT / "notebooks" / f"{NOTEBOOKS[lesson]}.md")
    cells = nbtools.versions(nb, learner=learner).cells
    start = next(k for k, c in enumerate(cells) if c.cell_type == "markdown" and "## 练习 (exercises)" in c.source)
    cells = cells[start:]
    ns: dict[str, object] = {"torch": torch, "nn": nn, "F": F, "math": math, "models": models}
    for cell in cells:
        if cell.cell_type == "code" and re.match(r"(def|class) \w+", cell.source) and "exercises.check" not in cell.source:
            exec(cell.source, ns)                                  # noqa: S102 - the course's own source
    found = {}
    for cell in cells:
        for id, name in re.findall(r'exercises\.check\("(\d\d\.\d)", (\w+)\)', cell.source):
            if name in ns:
                found[id] = ns[name]
    return found


@pytest.fixture(scope="module")
def solutions() -> dict[str, object]:
    out = {}
    for lesson in IDS:
        out.update(answers(lesson, learner=False))
    exercises.check("06.1", out["06.1"])            # first use of train()/Adam imports torch._dynamo (~1.5 s once)
    exercises.check("06.3", out["06.3"])            # ... and sklearn's digits: paid once, not by the timed checks
    return out


@pytest.mark.parametrize("id", ALL_IDS)
def test_the_notebook_solution_passes_quickly(solutions, id):
    cpu = time.process_time()
    report = exercises.check(id, solutions[id])
    cpu = time.process_time() - cpu          # CPU time: the machine is shared, wall time depends on its load
    assert report.passed, str(report)
    assert len(report.findings) == exercises.REGISTRY[id].checks     # the declared count is the full run's
    assert cpu < 2.0, f"{id}: the check took {cpu:.2f} s of CPU time ({report.seconds:.2f} s wall)"


@pytest.mark.parametrize("lesson", list(IDS))
def test_every_check_cell_has_its_answer_and_the_learner_blank_is_not_written(lesson):
    learner = answers(lesson, learner=True)
    assert sorted(learner) == IDS[lesson]
    for id, blank in learner.items():
        report = exercises.check(id, blank)
        assert report.ids() == {"not_written"}, f"{id}: {report}"


@pytest.mark.parametrize("lesson", list(IDS))
def test_the_learner_export_holds_no_solution_code(lesson):
    nb = jupytext.read(ROOT / "notebooks" / f"{NOTEBOOKS[lesson]}.md")
    learner = nbtools.versions(nbtools.without_teacher_notes(nb), learner=True)
    text = "\n".join(c.source for c in learner.cells)
    hidden = []
    for cell in nb.cells:
        src = cell.source
        if cell.cell_type == "code" and nbtools.BEGIN in src:
            hidden += [b for block in re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", src, re.S)
                       for b in block.splitlines()]
            hidden += [line for line in src.splitlines() if line.strip().endswith(nbtools.ONLY)]
        elif cell.cell_type == "markdown" and nbtools.MD_BEGIN in src:
            hidden += re.findall(r"<!-- BEGIN SOLUTION -->\n(.*?)<!-- END SOLUTION -->", src, re.S)
    hidden = [h.strip() for h in hidden if len(h.strip()) >= 15 and not h.strip().startswith("#")]
    assert len(hidden) >= 2 * len(IDS[lesson])
    leaked = [h for h in hidden if h in text]
    assert not leaked, f"{lesson}: solution text in the learner version: {leaked}"
    assert text.count(nbtools.BLANK) >= len(IDS[lesson])
    assert "## 练习 (exercises)" in text and not re.search(r'expect\("ex\.\d\d\.\d\.passed"', text)


def names(id: str, answer) -> set[str]:
    report = exercises.check(id, answer)
    assert not report.passed, f"{id}: a wrong answer passed"
    return report.ids()


# --------------------------------------------------------------------------- 04

def _rms32(x, eps):
    h = x.float()
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)


class _Gemma(nn.Module):
    def __init__(self, dim, eps=1e-6, init=0.0):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.full((dim,), init))

    def forward(self, x):
        return (_rms32(x, self.eps) * (1.0 + self.weight.float())).to(x.dtype)


class _GemmaInitOnes(_Gemma):
    def __init__(self, dim, eps=1e-6):
        super().__init__(dim, eps, init=1.0)


class _GemmaGainW(_Gemma):
    def forward(self, x):
        return (_rms32(x, self.eps) * self.weight.float()).to(x.dtype)


class _GemmaCastFirst(_Gemma):
    def forward(self, x):
        return (1 + self.weight) * _rms32(x, self.eps).to(x.dtype)


class _GemmaNoUpcast(_Gemma):
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * (1 + self.weight)


def _pair(x, r, w, eps=1e-6):
    return x + r, w * _rms32(x + r, eps).to(x.dtype)


MISTAKES = {
    "04.1": {
        "no_upcast": lambda x, w, eps=1e-6: w * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps),
        "weight_before_cast": lambda x, w, eps=1e-6: (w.float() * _rms32(x, eps)).to(x.dtype),
        "no_cast_back": lambda x, w, eps=1e-6: w * _rms32(x, eps),
        "eps_outside_root": lambda x, w, eps=1e-6: w * (x.float() / (x.float().pow(2).mean(-1, keepdim=True).sqrt() + eps)).to(x.dtype),
        "mean_subtracted": lambda x, w, eps=1e-6: w * F.layer_norm(x.float(), (x.shape[-1],), eps=eps).to(x.dtype),
        "eps_ignored": lambda x, w, eps=1e-6: w * _rms32(x, 1e-6).to(x.dtype),
        "no_weight": lambda x, w, eps=1e-6: _rms32(x, eps).to(x.dtype),
    },
    "04.2": {"init_ones": _GemmaInitOnes, "gain_is_w": _GemmaGainW, "cast_before_gain": _GemmaCastFirst,
             "no_upcast": _GemmaNoUpcast},
    "04.3": {
        "not_a_pair": lambda x, r, w, eps=1e-6: _pair(x, r, w, eps)[1],
        "h_is_y": lambda x, r, w, eps=1e-6: (_pair(x, r, w, eps)[1],) * 2,
        "swapped": lambda x, r, w, eps=1e-6: _pair(x, r, w, eps)[::-1],
        "normalized_x": lambda x, r, w, eps=1e-6: (x + r, w * _rms32(x, eps).to(x.dtype)),
        "dtype": lambda x, r, w, eps=1e-6: ((x + r).float(), w.float() * _rms32(x + r, eps)),
    },
    "04.4": {
        "forgot_readback": lambda n, i, fused, write_h=True: ((4 if write_h else 3) if fused else 4) * n * i,
        "unfused_as_fused": lambda n, i, fused, write_h=True: ((4 if write_h else 3) if fused else 3) * n * i,
        "forgot_h_write": lambda n, i, fused, write_h=True: (3 if fused else 5) * n * i,
        "h_written_anyway": lambda n, i, fused, write_h=True: (4 if fused else 5) * n * i,
        "itemsize_ignored": lambda n, i, fused, write_h=True: ((4 if write_h else 3) if fused else 5) * n * 4,
        "per_element": lambda n, i, fused, write_h=True: ((4 if write_h else 3) if fused else 5) * i,
        "bits": lambda n, i, fused, write_h=True: ((4 if write_h else 3) if fused else 5) * n * i * 8,
    },
}


# --------------------------------------------------------------------------- 05

# DeepNet §4.3's constants as the drills' checker writes them out, independently of normlab.init
from normlab.drills.checks import paper_deepnorm as _consts  # noqa: E402


def _init(scaled=("fc1", "fc2", "v_proj", "out_proj"), gain=lambda b: b, uniform=False, bias=True, touch_norms=False):
    def init_(model, beta):
        for name, m in model.named_modules():
            if isinstance(m, nn.Linear):
                g = gain(beta) if name.rsplit(".", 1)[-1] in scaled else 1.0
                (nn.init.xavier_uniform_ if uniform else nn.init.xavier_normal_)(m.weight, gain=g)
                if bias:
                    nn.init.zeros_(m.bias)
            elif touch_norms and isinstance(m, nn.LayerNorm):
                m.weight.mul_(beta)
    return init_


MISTAKES.update({
    "05.1": {
        "swapped": lambda a, N=0, M=0: _consts(a, N, M)[::-1],
        "beta_sign": lambda a, N=0, M=0: (_consts(a, N, M)[0], 1 / _consts(a, N, M)[1]),
        "square_root": lambda a, N=0, M=0: tuple(v * v for v in _consts(a, N, M)),
        "encdec_as_encoder": lambda a, N=0, M=0: ((2 * max(N, M)) ** 0.25, (8 * max(N, M)) ** -0.25)
        if a != "encdec_encoder" else ((2 * N) ** 0.25, (8 * N) ** -0.25),
        "torchscale_beta": lambda a, N=0, M=0: (_consts(a, N, M)[0], 1.15 * (N ** 4 * M) ** (-1 / 16))
        if a == "encdec_encoder" else _consts(a, N, M),
        "encdec_sides_swapped": lambda a, N=0, M=0: _consts({"encdec_encoder": "encdec_decoder",
                                                              "encdec_decoder": "encdec_encoder"}.get(a, a), N, M),
    },
    "05.2": {
        "alpha_on_branch": lambda x, s, n, a: n(x + a * s(x)),
        "no_norm": lambda x, s, n, a: a * x + s(x),
        "no_norm_alpha_on_branch": lambda x, s, n, a: x + a * s(x),
        "alpha_ignored": lambda x, s, n, a: n(x + s(x)),
        "pre_ln": lambda x, s, n, a: x + s(n(x)),
        "alpha_before_sublayer": lambda x, s, n, a: n(a * x + s(a * x)),
        "alpha_after_norm": lambda x, s, n, a: a * n(x + s(x)),
    },
    "05.3": {
        "qk_scaled": _init(scaled=("fc1", "fc2", "v_proj", "out_proj", "q_proj", "k_proj")),
        "missed_scaled": _init(scaled=("fc1", "fc2")),
        "beta_squared": _init(gain=lambda b: b * b),
        "bias_not_zero": _init(bias=False),
        "touched_norm": _init(touch_norms=True),
        "not_xavier": lambda model, beta: [m.reset_parameters() or nn.init.zeros_(m.bias)
                                           for m in model.modules() if isinstance(m, nn.Linear)],
        "not_reinitialised": lambda model, beta: None,
    },
})


# --------------------------------------------------------------------------- 06

def _stack(update, final=True):
    def run(x, sublayers, norms, final_norm):
        for f, n in zip(sublayers, norms):
            x = update(x, f, n)
        return final_norm(x) if final else x
    return run


def _setup(depth=24, wiring="post", lr=3e-3, norm="layernorm"):
    return lambda seed: (models.DigitsNet(depth=depth, width=32, wiring=wiring, norm=norm, seed=seed), lr)


MISTAKES.update({
    "06.1": {
        "off_by_one": lambda t, lr, T: lr if T <= 0 else lr * min(1.0, t / T),
        "no_cap": lambda t, lr, T: lr if T <= 0 else lr * (t + 1) / T,
        "inverse_sqrt_decay": lambda t, lr, T: lr if T <= 0 else lr * min((t + 1) / T, math.sqrt(T / (t + 1))),
        "late_by_one": lambda t, lr, T: lr if T <= 0 else lr * min(1.0, (t + 1) / (T + 1)),
        "no_warmup": lambda t, lr, T: lr * min(1.0, (t + 1) / T),          # T = 0: ZeroDivisionError
    },
    "06.2": {
        "no_final_norm": _stack(lambda h, f, n: h + f(n(h)), final=False),
        "post_norm": _stack(lambda h, f, n: n(h + f(h))),
        "post_norm_no_final": _stack(lambda h, f, n: n(h + f(h)), final=False),
        "normalized_stream": _stack(lambda h, f, n: n(h) + f(n(h))),
        "no_residual": _stack(lambda h, f, n: f(n(h))),
    },
    "06.3": {
        "still_stuck": _setup(),
        "depth": _setup(depth=12),
        "norm_removed": _setup(wiring="pre", norm="none"),
        "lr_too_small": _setup(lr=1e-5),
        "returns": lambda seed: models.DigitsNet(depth=24, width=32, seed=seed),
    },
})


# --------------------------------------------------------------------------- 07

class _Scale(nn.Module):
    def __init__(self, d, eps=1e-5, g=None, per_channel=False):
        super().__init__()
        value = math.sqrt(d) if g is None else g
        self.g = nn.Parameter(torch.full((d,), value) if per_channel else torch.tensor(value))
        self.eps = eps

    def forward(self, x):
        return self.g * x / x.norm(dim=-1, keepdim=True).clamp(min=self.eps)


class _ScaleRMS(_Scale):
    def forward(self, x):
        return self.g * x / x.pow(2).mean(-1, keepdim=True).sqrt()


class _ScaleCentred(_Scale):
    def forward(self, x):
        c = x - x.mean(-1, keepdim=True)
        return self.g * c / c.norm(dim=-1, keepdim=True)


def _qk(norm_q=True, norm_k=True, scale=None, full=False):
    def logits(q, k, heads, qn, kn):
        b, s, w = q.shape
        d = w // heads
        split = lambda t: t.view(b, s, heads, d).transpose(1, 2)
        if full:
            q = F.rms_norm(q, (w,), qn.weight.repeat(heads), qn.eps)
            k = F.rms_norm(k, (w,), kn.weight.repeat(heads), kn.eps)
            qh, kh = split(q), split(k)
        else:
            qh = qn(split(q)) if norm_q else split(q)
            kh = kn(split(k)) if norm_k else split(k)
        return qh @ kh.transpose(-1, -2) * (d ** -0.5 if scale is None else scale(w, d))
    return logits


class _DyT(nn.Module):
    def __init__(self, d, alpha_init=0.5, alpha_shape=(), learnable=True):
        super().__init__()
        alpha = torch.full(alpha_shape, float(alpha_init))
        if learnable:
            self.alpha = nn.Parameter(alpha)
        else:
            self.register_buffer("alpha", alpha)
        self.weight, self.bias = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))

    def forward(self, x):
        return self.weight * torch.tanh(self.alpha * x) + self.bias


class _DyTGammaInside(_DyT):
    def forward(self, x):
        return torch.tanh(self.alpha * x * self.weight) + self.bias


class _DyTNoBias(nn.Module):
    def __init__(self, d, alpha_init=0.5):
        super().__init__()
        self.alpha, self.weight = nn.Parameter(torch.tensor(alpha_init)), nn.Parameter(torch.ones(d))

    def forward(self, x):
        return self.weight * torch.tanh(self.alpha * x)


MISTAKES.update({
    "07.1": {
        "per_channel_gain": lambda d, eps=1e-5: _Scale(d, eps, per_channel=True),
        "g_init_one": lambda d, eps=1e-5: _Scale(d, eps, g=1.0),
        "divided_by_rms": _ScaleRMS,
        "mean_subtracted": _ScaleCentred,
    },
    "07.2": {
        "no_scale": _qk(scale=lambda w, d: 1.0),
        "scaled_by_width": _qk(scale=lambda w, d: w ** -0.5),
        "no_norm": _qk(norm_q=False, norm_k=False),
        "k_not_normalized": _qk(norm_k=False),
        "q_not_normalized": _qk(norm_q=False),
        "full_width_norm": _qk(full=True),
    },
    "07.3": {
        "alpha_per_channel": lambda d, alpha_init=0.5: _DyT(d, alpha_init, alpha_shape=(d,)),
        "alpha_not_learnable": lambda d, alpha_init=0.5: _DyT(d, alpha_init, learnable=False),
        "alpha_init": lambda d, alpha_init=0.5: _DyT(d, 1.0),
        "gamma_inside_tanh": _DyTGammaInside,
        "no_bias": _DyTNoBias,
    },
})

CASES = [(id, mistake) for id, table in MISTAKES.items() for mistake in table]


@pytest.mark.parametrize(("id", "mistake"), CASES, ids=[f"{i}-{m}" for i, m in CASES])
def test_each_mistake_is_named(id, mistake):
    assert mistake in names(id, MISTAKES[id][mistake])


def test_every_exercise_of_04_07_has_named_mistakes():
    assert set(MISTAKES) == set(ALL_IDS)
    assert all(len(MISTAKES[id]) >= 4 for id in ALL_IDS)


# --------------------------------------------------------------------------- references and calibration

def test_the_qk_reference_is_the_lessons_module():
    att, x = l07.qk_setup(71)
    with torch.no_grad():
        att(x)
        ref = l07.reference_logits(att.q_proj(x), att.k_proj(x), att.q_norm, att.k_norm)
    assert math.isclose(ref.abs().max().item(), att.last_max_logit, rel_tol=1e-6)


@pytest.mark.parametrize("setup", [_setup(wiring="pre"), _setup(wiring="deepnorm"), _setup(lr=1e-3)],
                         ids=["pre_ln", "deepnorm", "post_ln_lr_1e-3"])
def test_deep_post_ln_can_be_fixed_three_ways(setup):
    report = exercises.check("06.3", setup)
    assert report.passed, str(report)


def test_the_warmup_reference_is_the_training_loop():
    lrs = l06.recorded_lrs(3e-3, 5, 12)
    assert lrs[0] == pytest.approx(3e-3 / 5) and lrs[4] == lrs[11] == pytest.approx(3e-3)
