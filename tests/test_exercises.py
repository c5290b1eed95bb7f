"""normlab.exercises: the registry, the guarded check, and the exercises of lessons 01-03
(each textbook solution passes; each real mistake is named by its finding id; the learner's blank
gives the "not written" finding; the learner export of 01-03 holds no solution code)."""

from __future__ import annotations

import pytest
import torch

from normlab import exercises
from torch import nn
from normlab.exercises import base
from normlab.exercises.base import call, exercise, fail, ok, step


def blank(*args, **kwargs):
    raise NotImplementedError("在这里写出你的实现 (write your implementation here)")


# --------------------------------------------------------------------------- the infrastructure

@pytest.fixture(autouse=True)
def counts_never_change(monkeypatch):
    """Every report in these tests counts out of its exercise's declared checks: no answer, right or
    wrong, makes a checker report more findings than that (so "k/N" keeps its N between attempts);
    and each test starts with no earlier tries (hints escalate per process)."""
    plain = exercises.run
    base.forget_tries()

    def counted(id, answer):
        report = plain(id, answer)
        n = base.REGISTRY[id].checks
        assert n == 0 or len(report.findings) <= n, (id, [f.id for f in report.findings])
        assert report.verdict().split(" ")[0].endswith(f"/{n or len(report.findings)}"), report.verdict()
        return report
    monkeypatch.setattr(exercises, "run", counted)

@pytest.fixture
def demo():
    @exercise("99.1", title="平方 (square)", target_minutes=3)
    def check(answer):
        out = []
        with step(out, "value"):
            got = call(answer, 3)
            out.append(ok("value", "3² = 9") if got == 9 else fail("value", "3² 应为 9", input=3, expected=9, got=got))
        with step(out, "tensor"):
            x = torch.arange(4.0)
            got = call(answer, x)
            out.append(ok("tensor", "逐元素") if base.close(got, x * x) else fail("tensor", "应逐元素平方", expected=x * x, got=got))
        return out
    yield "99.1"
    base.REGISTRY.pop("99.1")


def test_a_right_answer_passes(demo):
    report = exercises.check(demo, lambda v: v * v)
    assert report.passed and report.ids(failed_only=False) == {"value", "tensor"}
    assert "通过 PASSED" in str(report) and "2/2" in report._repr_html_()


def test_the_learners_blank_is_not_written(demo):
    report = exercises.check(demo, blank)
    assert not report.passed and report.ids() == {"not_written"}
    assert "还没有写 (not written yet)" in str(report)


def test_an_exception_becomes_a_finding_of_its_step(demo):
    report = exercises.check(demo, lambda v: v * v if isinstance(v, int) else v.foo())
    assert report.ids() == {"tensor"} and "AttributeError" in str(report)
    assert exercises.check(demo, None).ids() == {"value", "tensor"}          # not callable: named, no crash


def test_a_wrong_value_shows_its_counterexample(demo):
    report = exercises.check(demo, lambda v: v + v)
    assert report.ids() == {"value", "tensor"}
    assert "expected: 9" in str(report) and "got: 6" in str(report)


def test_a_runaway_answer_is_stopped(demo):
    import time

    def forever(v):                 # waits rather than spins (the same limit, drills.report.guarded, stops a
        while True:                 # spinning loop in test_drills: slow_ln); each call is stopped at 2 s
            time.sleep(0.01)
    report = exercises.check(demo, forever)
    assert not report.passed and "time limit" in str(report)


def test_a_broken_checker_reports_instead_of_crashing():
    @exercise("99.2", title="坏的检查 (broken checker)")
    def check(answer):
        raise KeyError("oops")
    try:
        assert exercises.check("99.2", lambda: 0).ids() == {"checker"}
    finally:
        base.REGISTRY.pop("99.2")


def test_the_fix_line_comes_only_after_a_second_try_of_the_same_mistake():
    """Issue 36: the first failed check names the mistake and the idea; the exact line that fixes it
    only from the second try of the same mistake of the same exercise (kept per process)."""
    class AlphaIsAFloat(nn.Module):            # 01.4's ReZero with alpha a plain float: not learnable
        def __init__(self, branch):
            super().__init__()
            self.branch, self.alpha = branch, 0.0

        def forward(self, x):
            return x + self.alpha * self.branch(x)
    fix = "self.alpha = nn.Parameter(torch.zeros(()))"
    first = exercises.check("01.4", AlphaIsAFloat)
    assert "not_parameter" in first.ids() and "nn.Parameter" in str(first) and fix not in str(first)
    assert fix not in first._repr_html_() and "second try" in str(first)
    second = exercises.check("01.4", AlphaIsAFloat)
    assert fix in str(second) and fix in second._repr_html_().replace("<code>", "").replace("</code>", "")
    # the same count both times, out of all four checks (the two that need alpha are waiting)
    assert first.verdict() == second.verdict() == "1/4 项检查通过 (checks passed)"
    assert "另有 2 项检查" in str(first)
    # another exercise's mistake of the same id is its own first try
    class KeepsBranchInAList(nn.Module):
        def __init__(self, branch):
            super().__init__()
            self.parts = [branch]

        def forward(self, x):
            return x + self.parts[0](x)
    other = exercises.check("01.1", KeepsBranchInAList)
    assert other.ids() == {"not_registered"} and "self.branch = branch" not in str(other)
    assert "self.branch = branch" in str(exercises.check("01.1", KeepsBranchInAList))
    base.forget_tries()                          # a new kernel: the first try again
    assert fix not in str(exercises.check("01.4", AlphaIsAFloat))


def test_a_wrong_and_a_right_answer_count_the_same_checks():
    class NoIdentity(nn.Module):                 # 01.1 without + x: two shapes and the gradient fail
        def __init__(self, branch):
            super().__init__()
            self.branch = branch

        def forward(self, x):
            return self.branch(x)
    wrong = exercises.check("01.1", NoIdentity)
    assert wrong.verdict() == "1/4 项检查通过 (checks passed)（3 项未通过，是 2 个错误 (mistakes)）"
    assert len(wrong.findings) == 4 and exercises.check("01.1", blank).verdict() == "0/4 项检查通过 (checks passed)"


def test_ids_and_unknown_exercises_are_refused():
    with pytest.raises(ValueError, match="02.1"):
        exercise("2.1", title="x")
    with pytest.raises(ValueError, match="unknown exercise"):
        exercises.check("99.9", None)


def test_list_for_gives_a_table(demo):
    table = exercises.list_for("99")
    assert table.rows == [["99.1", "平方 (square)", 3]]
    assert exercises.list_for(99).rows == table.rows


# --------------------------------------------------------------------------- lessons 01-03: the notebooks' answers

import re
import sys
from pathlib import Path

import jupytext
import torch.nn.functional as F
from torch import nn
from torch.autograd.functional import jacobian

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import notebooks as nbtools  # noqa: E402

LESSONS = {"01": "01_residuals", "02": "02_batchnorm", "03": "03_layernorm"}
ANSWERS = {"01.1": "ResidualBlock", "01.2": "residual_jacobian", "01.3": "residual_forward", "01.4": "ReZero",
           "02.1": "bn_eval", "02.2": "update_running", "02.3": "from_keras", "02.4": "eval_accuracy",
           "03.1": "group_norm", "03.2": "stat_groups", "03.3": "layer_norm", "03.4": "masked_bn_stats"}
HEADING = "## 练习 (exercises)"


def exercise_cells(stem: str, learner: bool) -> list:
    """The code cells of the notebook's exercise section, in the solution or the learner version."""
    nb = nbtools.versions(nbtools.without_teacher_notes(jupytext.read(ROOT / "notebooks" / f"{stem}.md")), learner)
    start = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and HEADING in c.source)
    return nb.cells[start:]


def answers(lesson: str, learner: bool = False) -> dict:
    """Run the section's answer cells (those that define a function or class) the way the notebook
    does, in a namespace holding what the lesson imported before."""
    import normlab
    from normlab import variants
    from normlab.data import digits
    from normlab.lessons import batchnorm as bn_lab
    from normlab.train import accuracy, train

    ns = dict(torch=torch, nn=nn, F=F, jacobian=jacobian, normlab=normlab, variants=variants, bn_lab=bn_lab,
              train=train, accuracy=accuracy)
    if lesson == "02":
        ns.update(zip(("x_train", "y_train", "x_test", "y_test"), digits()))
    for cell in exercise_cells(LESSONS[lesson], learner):
        if cell.cell_type == "code" and re.match(r"(def|class) ", cell.source):
            exec(compile(cell.source, f"<{lesson} exercise>", "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def solutions():
    from normlab.exercises.l02 import reference_eval_accuracy
    reference_eval_accuracy("bn", 4, steps=1)     # in the notebook, 02 has trained before: torch.optim is imported
    return {lesson: answers(lesson) for lesson in LESSONS}


@pytest.mark.parametrize("id", sorted(ANSWERS))
def test_each_textbook_solution_passes_quickly(id, solutions):
    report = exercises.check(id, solutions[id[:2]][ANSWERS[id]])
    assert report.passed, str(report)
    assert len(report.findings) == base.REGISTRY[id].checks          # the declared count is the full run's
    print(f"{id}: {report.seconds:.2f} s")
    assert report.seconds < 2.0, f"{id}: the check took {report.seconds:.2f} s"


@pytest.mark.parametrize("id", sorted(ANSWERS))
def test_the_learner_blank_is_reported_as_not_written(id):
    ns = answers(id[:2], learner=True)
    assert exercises.check(id, ns[ANSWERS[id]]).ids() == {"not_written"}


def test_every_exercise_of_01_03_is_listed_and_checked_in_its_notebook():
    assert {e for e in base.REGISTRY if e[:2] in LESSONS} == set(ANSWERS)
    for lesson, stem in LESSONS.items():
        source = (ROOT / "notebooks" / f"{stem}.md").read_text(encoding="utf-8")
        assert source.index(HEADING) > source.index("## 面试要点")                 # appended at the end
        assert f'exercises.list_for("{lesson}")' in source
        for id in (i for i in ANSWERS if i.startswith(lesson)):
            assert f'exercises.check("{id}", {ANSWERS[id]})' in source
            assert f'expect("ex.{id}.passed", report.passed, "==", True)  # solution-only' in source
        assert [len(exercises.list_for(lesson).rows)] == [sum(i.startswith(lesson) for i in ANSWERS)]


@pytest.mark.parametrize("stem", sorted(LESSONS.values()))
def test_the_learner_export_holds_no_solution(stem):
    source = jupytext.read(ROOT / "notebooks" / f"{stem}.md")
    assert nbtools.has_solutions(source)                    # so `export` writes NAME_learner.ipynb
    solution_lines, inside = [], False
    for cell in source.cells:
        for line in cell.source.splitlines():
            s = line.strip()
            if s in (nbtools.BEGIN, nbtools.MD_BEGIN):
                inside = True
            elif s in (nbtools.END, nbtools.MD_END):
                inside = False
            elif (inside or s.endswith(nbtools.ONLY)) and s and not s.startswith("#"):
                solution_lines.append(s)
    learner = nbtools.versions(nbtools.without_teacher_notes(source), learner=True)
    text = "\n".join(c.source for c in learner.cells)
    code_lines = {line.strip() for c in exercise_cells(stem, learner=True) if c.cell_type == "code"  # the lesson's own
                  for line in c.source.splitlines()}                                       # code stays above
    leaked = [line for line in solution_lines if line in code_lines]
    assert not leaked, leaked
    assert "SOLUTION" not in text and nbtools.ONLY not in text
    for cell in learner.cells:                               # every code cell still compiles
        if cell.cell_type == "code":
            compile("\n".join(l for l in cell.source.splitlines() if not l.lstrip().startswith(("%", "!"))), stem, "exec")


def test_export_writes_a_learner_version_of_01_03(tmp_path):
    written = {p.name for p in nbtools.export(tmp_path, keep_existing=False)}
    assert {f"{stem}_learner.ipynb" for stem in LESSONS.values()} <= written


# --------------------------------------------------------------------------- each real mistake is named

def _sh(t, x):
    return t.view(1, -1, *([1] * (x.dim() - 2)))


class _Block(nn.Module):
    def __init__(self, branch):
        super().__init__()
        self.branch = branch


class _InPlace(_Block):
    def forward(self, x):
        x += self.branch(x)
        return x


class _InList(nn.Module):
    def __init__(self, branch):
        super().__init__()
        self.branches = [branch]

    def forward(self, x):
        return x + self.branches[0](x)


class _Detached(_Block):
    def forward(self, x):
        return x.detach() + self.branch(x)


class _NoIdentity(_Block):
    def forward(self, x):
        return self.branch(x)


class _AlphaFloat(_Block):
    def __init__(self, branch):
        super().__init__(branch)
        self.alpha = 0.0

    def forward(self, x):
        return x + self.alpha * self.branch(x)


class _AlphaVector(_AlphaFloat):
    def __init__(self, branch):
        super().__init__(branch)
        self.alpha = nn.Parameter(torch.zeros(8))


class _AlphaOne(_AlphaFloat):
    def __init__(self, branch):
        super().__init__(branch)
        self.alpha = nn.Parameter(torch.ones(()))


class _KeptNorm(_AlphaFloat):      # [C]'s ReZero block (errata C2)
    def __init__(self, branch):
        super().__init__(branch)
        self.alpha, self.norm = nn.Parameter(torch.zeros(())), nn.LayerNorm(8)

    def forward(self, x):
        return x + self.alpha * self.branch(self.norm(x))


def _plain(branches, x):
    for f in branches:
        x = f(x)
    return x


def _bn(x, rm, rv, w, b, eps, *, outside=False, root=True, use_eps=None):
    e = eps if use_eps is None else use_eps
    v = _sh(rv, x)
    den = (v.sqrt() + e) if outside else (torch.sqrt(v + e) if root else v + e)
    return _sh(w, x) * (x - _sh(rm, x)) / den + _sh(b, x)


def _gn(x, G, eps=1e-5, interleaved=False, unbiased=False, over_batch=False):
    n, c = x.shape[:2]
    g = x.reshape(n, c // G, G, -1).transpose(1, 2) if interleaved else x.reshape(n, G, c // G, -1)
    dims = (0, 2, 3) if over_batch else (2, 3)
    y = (g - g.mean(dims, keepdim=True)) / torch.sqrt(g.var(dims, unbiased=unbiased, keepdim=True) + eps)
    return (y.transpose(1, 2) if interleaved else y).reshape(x.shape)


_GROUPS = {"batchnorm": lambda B, S, E, G: (E, B * S), "layernorm_text": lambda B, S, E, G: (B * S, E),
           "layernorm_image": lambda B, S, E, G: (B, S * E), "instancenorm": lambda B, S, E, G: (B * E, S),
           "groupnorm": lambda B, S, E, G: (B * G, S * E // G), "rmsnorm": lambda B, S, E, G: (B * S, E)}


def _groups_with(norm, wrong):
    return lambda n, B, S, E, G=4: wrong(B, S, E, G) if n == norm else _GROUPS[n](B, S, E, G)


def _ln(x, w, b, eps=1e-5, outside=False, unbiased=False, std=False):
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, unbiased=unbiased)
    den = var.sqrt() + eps if outside else torch.sqrt((var.sqrt() if std else var) + eps)
    return (x - mu) / den * w + b


def _masked(x, mask, diluted=False, unbiased=False, ignore=False):
    if ignore:
        flat = x.reshape(-1, x.shape[-1])
        return flat.mean(0), flat.var(0, unbiased=False)
    if diluted:
        m, n = mask[..., None].float(), mask.numel()
        mean = (x * m).sum((0, 1)) / n
        return mean, (((x - mean) * m) ** 2).sum((0, 1)) / n
    real = x[mask]
    return real.mean(0), real.var(0, unbiased=unbiased)


def _eval_acc(norm, batch, steps=400, seed=0, mode="eval", lr=2e-3):
    from normlab.exercises.l02 import reference_eval_accuracy
    return reference_eval_accuracy(norm, batch, steps, seed, mode=mode, lr=lr)


MISTAKES = [
    ("01.1", _InPlace, "input_modified"), ("01.1", _InList, "not_registered"), ("01.1", _Detached, "identity_detached"),
    ("01.1", _NoIdentity, "no_identity"),
    ("01.2", lambda f, v: jacobian(f, v), "missing_identity"), ("01.2", lambda f, v: jacobian(f, v) + 1, "scalar_one"),
    ("01.2", lambda f, v: (torch.eye(v.numel()) + jacobian(f, v)).T, "transposed"),
    ("01.2", lambda f, v: torch.eye(v.numel()) + jacobian(f, torch.zeros_like(v)), "wrong_point"),
    ("01.3", _plain, "still_plain"), ("01.3", _plain, "vanishing_gradient"), ("01.3", lambda b, x: x + _plain(b, x), "one_skip"),
    ("01.4", _AlphaFloat, "not_parameter"), ("01.4", _AlphaVector, "per_channel"), ("01.4", _AlphaOne, "alpha_init_one"),
    ("01.4", _KeptNorm, "kept_layernorm"),
    ("02.1", lambda x, rm, rv, w, b, eps=1e-5: F.batch_norm(x, None, None, w, b, True, 0.1, eps), "batch_stats"),
    ("02.1", lambda x, rm, rv, w, b, eps=1e-5: _bn(x, rm, rv, w, b, eps, outside=True), "eps_outside_root"),
    ("02.1", lambda x, rm, rv, w, b, eps=1e-5: _bn(x, rm, rv, w, b, eps, root=False), "no_sqrt"),
    ("02.1", lambda x, rm, rv, w, b, eps=1e-5: _bn(x, rm, rv, w, b, eps, use_eps=1e-5), "eps_ignored"),
    ("02.1", lambda x, rm, rv, w, b, eps=1e-5: w * (x - rm) / torch.sqrt(rv + eps) + b, "wrong_axis"),
    ("02.2", lambda rm, rv, x, m: ((1 - m) * rm + m * x.mean(0), (1 - m) * rv + m * x.var(0, unbiased=False)), "biased_running_var"),
    ("02.2", lambda rm, rv, x, m: (m * rm + (1 - m) * x.mean(0).detach(), m * rv + (1 - m) * x.var(0).detach()),
     "old_weight_convention"),
    ("02.2", lambda rm, rv, x, m: ((1 - m) * rm + m * x.mean(0), (1 - m) * rv + m * x.var(0)), "graph_attached"),
    ("02.3", lambda n, momentum=0.99, epsilon=1e-3: nn.BatchNorm1d(n, momentum=momentum, eps=epsilon), "same_number"),
    ("02.3", lambda n, momentum=0.99, epsilon=1e-3: nn.BatchNorm1d(n, momentum=1 - momentum), "eps_default"),
    ("02.4", lambda norm, batch, steps=400, seed=0: _eval_acc(norm, batch, steps, seed, mode="train"), "train_mode"),
    ("02.4", lambda norm, batch, steps=400, seed=0: _eval_acc(norm, 64, steps, seed), "batch_ignored"),
    ("02.4", lambda norm, batch, steps=400, seed=0: _eval_acc(norm, batch, steps, seed, lr=3e-3), "lr"),
    ("03.1", lambda x, G, eps=1e-5: _gn(x, G, eps, interleaved=True), "interleaved_groups"),
    ("03.1", lambda x, G, eps=1e-5: _gn(x, G, eps, unbiased=True), "unbiased_variance"),
    ("03.1", lambda x, G, eps=1e-5: _gn(x, G, eps, over_batch=True), "over_batch"),
    ("03.1", lambda x, G, eps=1e-5: _gn(x, 1, eps), "ignores_groups"),
    ("03.2", _groups_with("batchnorm", lambda B, S, E, G: (S, B * E)), "bn_be_plane"),
    ("03.2", _groups_with("groupnorm", lambda B, S, E, G: (G, B * S * E // G)), "gn_over_batch"),
    ("03.2", _groups_with("instancenorm", lambda B, S, E, G: (B * S, E)), "in_as_layernorm"),
    ("03.3", lambda x, w, b, eps=1e-5: _ln(x, w, b, eps, outside=True), "eps_outside_root"),
    ("03.3", lambda x, w, b, eps=1e-5: _ln(x, w, b, eps, unbiased=True), "unbiased_variance"),
    ("03.3", lambda x, w, b, eps=1e-5: _ln(x, w, b, eps, std=True), "std_under_root"),
    ("03.4", lambda x, m: _masked(x, m, diluted=True), "padding_in_denominator"),
    ("03.4", lambda x, m: _masked(x, m, unbiased=True), "unbiased_variance"),
    ("03.4", lambda x, m: _masked(x, m, ignore=True), "mask_ignored"),
]


@pytest.mark.parametrize("id, answer, finding", MISTAKES, ids=[f"{m[0]}-{m[2]}" for m in MISTAKES])
def test_each_real_mistake_is_named(id, answer, finding):
    report = exercises.check(id, answer)
    assert finding in report.ids(), str(report)
    assert not ({"checker", "raised", "timeout", "not_written"} & report.ids()), str(report)


# --------------------------------------------------------------------------- reports (issue 28 item 4)

class _PlusOne(_Block):                     # [A]'s "the derivative is 1" taken literally (erratum A1)
    def forward(self, x):
        return self.branch(x) + 1


def test_plus_one_is_diagnosed_as_plus_one_never_as_detach():
    """`return self.branch(x) + 1` has no identity path: the report says so (plus_one), and its gradient
    finding says the same instead of blaming .detach(); no message names a symbol it does not define."""
    report = exercises.check("01.1", _PlusOne)
    assert report.ids() == {"plus_one", "no_identity_gradient"}, str(report)
    text = str(report)
    assert "detach" not in text and "勘误 A1" in text
    assert "g = ∂L/∂y" in text and "那一份 r" not in text          # the upstream gradient is defined where it is used
    detached = exercises.check("01.1", _Detached)                    # the value right, the gradient cut: detach
    assert detached.ids() == {"identity_detached"} and "g = ∂L/∂y" in str(detached), str(detached)


def test_a_mistake_is_one_line_with_the_inputs_it_failed_on():
    """Two probes fail with one mistake: one line (and one HTML row) naming both inputs, one counterexample;
    code is plain text in the text form and <code> in the HTML, never literal backticks."""
    assert "return x + self.branch(x)" not in str(exercises.check("01.1", _PlusOne))   # the first try: no fix line
    report = exercises.check("01.1", _PlusOne)                                          # the second: the fix
    plus_one = [f for f in report.failed if f.id == "plus_one"]
    assert len(plus_one) == 2                                        # found on both inputs ...
    text = str(report)
    assert text.count("plus_one") == 1 and text.count("counterexample") == 0     # ... reported once
    assert "(5, 8) float32; (2, 3, 8) float32" in text
    assert text.count("expected:") == 2                              # plus_one's first input, the gradient's
    assert "`" not in text and "return x + self.branch(x)" in text
    page = report._repr_html_()
    assert "`" not in page and "<code>return x + self.branch(x)</code>" in page
    body = page.split("<tbody>", 1)[1]
    assert body.count("<tr>") == 2 and re.search(r"<code[^>]*>\(5, 8\) float32</code><br><code[^>]*>\(2, 3, 8\) float32</code>", body)
    assert all("text-align:left" in cell for cell in re.findall(r"<t[dh] [^>]*>", page))
    groups = exercises.check("03.1", lambda x, G, eps=1e-5: _gn(x, 1, eps))  # "G = 3 没有用上" on several probes
    assert len([f for f in groups.failed if f.id == "ignores_groups"]) >= 3
    assert str(groups).count("ignores_groups") == 1 and groups._repr_html_().count("没有用上") == 1
    single = exercises.check("01.1", _Detached)                      # one input: no "failed on" line
    assert "failed on" not in str(single) and str(single).count("identity_detached:") == 1


def test_drill_reports_group_the_same_mistake_too():
    from normlab.drills.report import Finding, Report

    a = Finding("unbiased_variance", False, "用了无偏方差：`x.var()` 默认 unbiased", {"input": "tensor(4, 8) float32 [1, 2]",
                                                                                    "expected": "1", "got": "2"})
    b = Finding("unbiased_variance", False, a.message, {"input": "tensor(2, 3, 8) float32 [3]", "expected": "3", "got": "4"})
    c = Finding("half_float16", False, "float16 溢出", {"input": "tensor(4, 8) float16 [300]"}, level="production")
    report = Report("layernorm", [a, b, c, Finding("grad", True, "ok"), Finding("grad", True, "ok")])
    text = str(report)
    assert text.count("unbiased_variance:") == 1 and "(4, 8) float32; (2, 3, 8) float32" in text
    assert "x.var()" in text and "`" not in text and text.count("grad") == 1        # passed ids once
    assert text.index("[面试级] unbiased_variance") < text.index("[工程级] half_float16")
    page = report._repr_html_()
    assert page.split("<tbody>", 1)[1].count("<tr>") == 2 and "<code>x.var()</code>" in page and "`" not in page


# JupyterLab's rendermime rules for an output's HTML table (jupyterlab/packages/rendermime, base.css): right-aligned,
# centred, middle-aligned cells. A report must read left-aligned under them.
JUPYTERLAB_TABLE_CSS = """
.jp-RenderedHTMLCommon table { border-collapse: collapse; border-spacing: 0; border: none; font-size: 13px;
  table-layout: fixed; margin-left: auto; margin-bottom: 1em; margin-right: auto; }
.jp-RenderedHTMLCommon td, .jp-RenderedHTMLCommon th, .jp-RenderedHTMLCommon tr { vertical-align: middle;
  padding: 0.5em; line-height: normal; white-space: normal; max-width: none; border: none; }
:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td, :not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon th,
:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon tr { text-align: right; }
.jp-RenderedHTMLCommon tbody tr:nth-child(even) { background: #f5f5f5; }
.jp-RenderedHTMLCommon code { font-family: monospace; background: #eee; padding: 1px 5px; }
body { font-family: 'Noto Sans CJK SC', 'WenQuanYi Zen Hei', sans-serif; margin: 16px; }
"""


def test_report_reads_left_aligned_under_jupyterlab_css(browser, tmp_path):
    """In Chromium under JupyterLab's table rules: every cell left-aligned, the table at the output's left
    edge, one row per mistake, no literal backtick; a plain table in the same place is right-aligned
    (the rules do apply). The screenshot goes to build/artifacts/exercise_report_01_1.png."""
    from conftest import ARTIFACTS

    exercises.check("01.1", _PlusOne)
    report = exercises.check("01.1", _PlusOne)                       # a second try: the fix line is shown
    page = tmp_path / "report.html"
    page.write_text(f"<!doctype html><meta charset='utf-8'><style>{JUPYTERLAB_TABLE_CSS}</style>"
                    f"<div class='jp-RenderedHTMLCommon' id='out' style='width:1100px'>{report._repr_html_()}</div>"
                    f"<div class='jp-RenderedHTMLCommon' style='width:1100px'><table id='plain'><tr><td>x</td></tr></table></div>",
                    encoding="utf-8")
    p = browser.new_page(viewport={"width": 1180, "height": 700})
    try:
        p.goto(page.as_uri())
        got = p.evaluate("""() => {
            const out = document.getElementById('out'), table = out.querySelector('table');
            const cells = [...out.querySelectorAll('td, th')];
            return {aligns: [...new Set(cells.map(c => getComputedStyle(c).textAlign))],
                    tableLeft: table.getBoundingClientRect().left, outLeft: out.getBoundingClientRect().left,
                    rows: out.querySelectorAll('tbody tr').length, text: out.innerText,
                    plain: getComputedStyle(document.querySelector('#plain td')).textAlign};
        }""")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        p.screenshot(path=str(ARTIFACTS / "exercise_report_01_1.png"), full_page=True)
    finally:
        p.close()
    assert got["plain"] == "right"                                   # the control: JupyterLab's rule is in force
    assert got["aligns"] == ["left"] and abs(got["tableLeft"] - got["outLeft"]) < 1
    assert got["rows"] == 2 and "`" not in got["text"] and "return x + self.branch(x)" in got["text"]
