"""The exercise registry and the checked call every exercise checker uses.

An exercise is a checker registered under an id "LL.K" (lesson LL, exercise K):

    @exercise("02.1", title="从滑动统计量写推理模式的 BN", target_minutes=10)
    def check(answer) -> list[Finding]:
        out = []
        y = call(answer, x, mean, var, weight, bias, eps)      # the learner's code, guarded
        out.append(ok("value", "...") if close(y, ref) else fail("value", "...", x=x, expected=ref, got=y))
        return out

``run(id, answer)`` (``exercises.check``) returns a drill-style Report that renders in Jupyter:
an answer that raises NotImplementedError (the learner version's blank) gives one finding
``not_written`` "还没有写 (not written yet)"; any other exception, a timeout or a checker that
breaks becomes a finding, never a crash. ``with step(out, "id"):`` keeps the findings made so far
when one part of a checker meets an exception (it becomes the finding "id").

Checkers compare with an independent reference (torch modules, autograd, the lesson's own
machinery), use one torch thread and run in well under 2 s.

Hints escalate (issue 36): a mistake's message names the mistake and the idea; where it also knows
the exact line that fixes it (``with_fix(idea, fix)``), that line is shown only from the second
report of the same mistake of the same exercise in this process (kernel): the first failed try is
the learner's to fix. Counts stay the same between attempts: an exercise declares how many checks
it makes (``checks=``), and a report counts passed checks out of that number, whatever the answer
(checks not reached because an earlier part is wrong are said to be waiting).
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import Tensor

from ..drills.report import (Finding, Report, SubmissionError, failure_lines, failure_table, failures, guarded,
                             passed_html, passed_lines, short)
from ..viz import Table

__all__ = ["Exercise", "ExerciseReport", "NotWritten", "REGISTRY", "exercise", "run", "list_for", "call", "step",
           "ok", "fail", "close", "compare", "with_fix", "forget_tries", "SubmissionError", "Finding"]

NOT_WRITTEN = "not_written"
FIX = "\u27e6fix\u27e7"        # separates a message's idea from its exact fix line (never shown)
TRIES: dict[tuple[str, str], int] = {}   # (exercise id, mistake id) -> failed reports so far, in this process


class NotWritten(Exception):
    """The answer is still the learner version's blank (it raised NotImplementedError)."""


@dataclass
class Exercise:
    id: str                    # "02.1"
    title: str                 # Chinese, with the English term
    target_minutes: int
    checker: Callable[[object], list[Finding]]
    checks: int = 0            # how many checks a full run makes (the textbook answer's findings)

    @property
    def lesson(self) -> str:
        return self.id.split(".", 1)[0]


REGISTRY: dict[str, Exercise] = {}


def exercise(id: str, title: str, target_minutes: int = 10, checks: int = 0) -> Callable:
    """Register ``check(answer) -> list[Finding]`` as exercise ``id`` ("LL.K"), which makes ``checks``
    checks when every part can run (0: as many as it reports)."""
    parts = id.split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts) or len(parts[0]) != 2:
        raise ValueError(f"练习编号应形如 \"02.1\"（两位课号.序号），实际是 {id!r}。(exercise id must look like '02.1')")

    def register(checker: Callable[[object], list[Finding]]) -> Callable[[object], list[Finding]]:
        if id in REGISTRY and REGISTRY[id].checker.__qualname__ != checker.__qualname__:
            raise ValueError(f"练习 {id} 已经注册过了 (exercise {id} is registered twice)")
        REGISTRY[id] = Exercise(id, title, target_minutes, checker, checks)
        return checker

    return register


class ExerciseReport(Report):
    """A drill Report (Finding list, ``passed``, ``ids()``) shown without the drills' two levels:
    a verdict "3/4 项检查通过", one row per mistake with the inputs it failed on and the first
    counterexample (report.failure_table / failure_lines), then the passed ids."""

    total: int = 0       # the exercise's number of checks (Exercise.checks); 0: as many as the findings

    def verdict(self) -> str:
        n, good = max(self.total, len(self.findings)), len(self.findings) - len(self.failed)
        bad, rows = len(self.failed), len(failures(self.findings))
        grouped = f"（{bad} 项未通过，是 {rows} 个错误 (mistakes)）" if rows < bad else ""
        return f"{good}/{n} 项检查通过 (checks passed){grouped}"

    def waiting(self) -> str | None:
        """The checks this answer did not reach (an earlier part failed or is not written)."""
        left = self.total - len(self.findings)
        return f"另有 {left} 项检查要等上面的问题改好才能进行 ({left} more checks wait for the parts above)" if left > 0 else None

    def __str__(self) -> str:
        lines = [f"[{self.kind}] {'通过 PASSED' if self.passed else '未通过 FAILED'} · {self.verdict()}"]
        wait = [f"  … {self.waiting()}"] if self.waiting() else []
        return "\n".join(lines + failure_lines(self.findings, show_level=False) + wait + passed_lines(self.findings))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        color = "#2e7d32" if self.passed else "#c62828"
        title = (f"<b style='color:{color}'>{html.escape(self.kind)}: {'通过 PASSED' if self.passed else '未通过 FAILED'}"
                 f"</b> · {html.escape(self.verdict())}")
        wait = f"<div style='color:#666'>… {html.escape(self.waiting())}</div>" if self.waiting() else ""
        return (f"<div style='text-align:left'><div>{title}</div>{failure_table(self.findings, show_level=False)}"
                f"{wait}{passed_html(self.findings)}</div>")


def call(fn: object, *args, seconds: float = 2.0, **kwargs):
    """Call the learner's ``fn`` under a time limit. NotImplementedError -> NotWritten; any other
    exception or a timeout -> SubmissionError with a one-line description (type, message, line)."""
    if not callable(fn):
        raise SubmissionError(f"答案应是一个函数或类 (a callable)，实际是 {type(fn).__name__}: {short(fn)}")
    try:
        return guarded(fn, *args, seconds=seconds, passthrough=(NotImplementedError,), **kwargs)
    except NotImplementedError as err:                 # the learner's blank: not a mistake, not written yet
        raise NotWritten(str(err)) from None


@contextmanager
def step(out: list[Finding], id: str) -> Iterator[None]:
    """One part of a checker: an exception inside becomes the failed finding ``id`` and the checker
    goes on. NotWritten passes through (the whole report is then "not written")."""
    try:
        yield
    except NotWritten:
        raise
    except SubmissionError as err:
        out.append(Finding(id, False, f"你的代码报错了 (your code raised): {err}"))
    except Exception as err:  # noqa: BLE001 - e.g. the answer returned something of the wrong type
        out.append(Finding(id, False, f"检查无法进行 (the answer broke this check): {type(err).__name__}: {err}"))


def with_fix(idea: str, fix: str) -> str:
    """A mistake's message: ``idea`` (the mistake and why) always; ``fix`` (the exact line) from the
    second failed try of the same mistake on (``escalate``)."""
    return f"{idea}{FIX}{fix}"


def escalate(exercise_id: str, findings: list[Finding]) -> list[Finding]:
    """Each failed finding's message as this try may show it: a first try of a mistake gets its idea
    and a line saying the fix comes next time; a repeated one gets the fix line too. Counts the try."""
    out = []
    for f in findings:
        if not f.passed and FIX in f.message:
            idea, fix = f.message.split(FIX, 1)
            again = TRIES.get((exercise_id, f.id), 0) > 0
            shown = (f"{idea}。改法 (fix)：{fix}" if again else
                     f"{idea}。（先按这个思路自己改；同一个错误再出现一次时，这里会给出改法 (the exact fix comes "
                     f"after a second try)）")
            f = Finding(f.id, f.passed, shown, f.example, f.level)
        out.append(f)
    for mistake in dict.fromkeys(f.id for f in findings if not f.passed):
        TRIES[(exercise_id, mistake)] = TRIES.get((exercise_id, mistake), 0) + 1
    return out


def forget_tries() -> None:
    """Start every mistake's count again (as a new kernel would)."""
    TRIES.clear()


def ok(id: str, message: str) -> Finding:
    return Finding(id, True, message)


def fail(id: str, message: str, **example: object) -> Finding:
    """A failed finding; ``example`` (e.g. input=x, expected=ref, got=y) is shown as a counterexample."""
    return Finding(id, False, message, {k: short(v) if isinstance(v, Tensor) else str(v) for k, v in example.items()})


def close(a: object, b: object, tol: float = 1e-4) -> bool:
    """Same shape and values (float64 comparison, absolute and relative tolerance ``tol``)."""
    return (isinstance(a, Tensor) and isinstance(b, Tensor) and a.shape == b.shape
            and bool(torch.allclose(a.detach().double(), b.detach().double(), atol=tol, rtol=tol)))


Mistakes = dict[str, tuple[object, str]]   # mistake id -> (what that mistake outputs, or a callable making it; message)


def compare(id: str, got: object, expected: Tensor, mistakes: Mistakes, passed: str, failed: str,
            tol: float = 1e-4, **example: object) -> Finding:
    """A finding on one probe: ``id`` passed when ``got`` matches ``expected``; else the first
    known mistake whose output ``got`` reproduces (the finding takes the mistake's id and message);
    else ``id`` failed with ``failed``. ``example`` (e.g. input=x) goes into the counterexample."""
    if close(got, expected, tol):
        return ok(id, passed)
    if not isinstance(got, Tensor):
        return fail(id, f"应返回一个 Tensor (must return a Tensor)，实际返回 {type(got).__name__}", **example)
    if got.shape != expected.shape:
        return fail(id, f"输出形状应为 {tuple(expected.shape)}，实际是 {tuple(got.shape)} (wrong shape)", **example)
    for mistake, (value, message) in mistakes.items():
        try:
            value = value() if callable(value) else value
        except Exception:  # noqa: BLE001 - a candidate that cannot be formed on this probe is no match
            continue
        if close(got, value, tol):
            return fail(mistake, message, **example, expected=expected, got=got)
    return fail(id, failed, **example, expected=expected, got=got)


def _lookup(id: str) -> Exercise:
    if id not in REGISTRY:
        raise ValueError(f"没有编号为 {id!r} 的练习 (unknown exercise)；可选: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[id]


def run(id: str, answer: object) -> ExerciseReport:
    """Check ``answer`` against exercise ``id``; never raises for the learner's mistakes."""
    ex = _lookup(id)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # tiny tensors: one thread is fastest and shares the machine
    t0 = time.perf_counter()
    try:
        findings = list(ex.checker(answer))
        if not findings:
            findings = [Finding("checker", False, "检查没有给出任何结论 (the checker made no finding)")]
    except NotWritten as err:
        said = f"（它说：{err}）" if str(err) else ""
        findings = [Finding(NOT_WRITTEN, False, f"还没有写 (not written yet)：答案仍是 raise NotImplementedError{said}。"
                                                f"把它换成你的代码，再运行这个检查。")]
    except SubmissionError as err:
        findings = [Finding("timeout" if "time limit" in str(err) else "raised", False,
                            f"你的代码报错了 (your code raised): {err}")]
    except Exception as err:  # noqa: BLE001 - a checker must report, not crash
        findings = [Finding("checker", False, f"检查时出错 (the answer broke a check): {type(err).__name__}: {err}")]
    finally:
        torch.set_num_threads(threads)
    report = ExerciseReport(f"练习 {ex.id} · {ex.title}", escalate(ex.id, findings))
    report.total = ex.checks
    report.seconds = time.perf_counter() - t0      # the checker's own run time (tests keep it < 2 s)
    return report


def list_for(lesson: str | int | None = None) -> Table:
    """The exercises of one lesson ("02", 2) or of all lessons, as a table."""
    key = None if lesson is None else f"{int(lesson):02d}"
    rows = [[e.id, e.title, e.target_minutes] for e in sorted(REGISTRY.values(), key=lambda e: tuple(map(int, e.id.split("."))))
            if key is None or e.lesson == key]
    title = f"第 {key} 课的练习 (exercises)" if key else "练习 (exercises)"
    return Table(rows, ["编号 id", "题目 title", "目标时间 target (min)"], title=title)
