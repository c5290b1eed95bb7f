"""Findings and reports of the drill checker, and the guarded call that produces them.

Two levels (issue 16). ``interview`` (面试级): the formula and semantics an interviewer checks.
``production`` (工程级): what a drop-in replacement for the torch module also needs (tuple
normalized_shape, half precision with a float32 upcast, torch's default eps, both BatchNorm
ranks, momentum=None, state_dict names and shapes). ``report.passed`` is the interview level."""

from __future__ import annotations

import html
import signal
import threading
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

LEVELS = ("interview", "production")
LEVEL_NAME = {"interview": "面试级", "production": "工程级"}


@dataclass
class Finding:
    """One check: a short id, whether it passed, a message (Chinese with the English term), for a
    failure a minimal counterexample (input, expected, got), and the level it belongs to."""

    id: str
    passed: bool
    message: str
    example: dict[str, str] = field(default_factory=dict)
    level: str = "interview"


def example_lines(f: Finding) -> list[str]:
    """A failed finding's minimal counterexample, one indented line per field (input, expected, got)."""
    return [f"        {k}: {v}" for k, v in f.example.items()]


def passed_lines(findings: list[Finding]) -> list[str]:
    """The one line naming every check that passed (none when nothing passed)."""
    good = [f.id for f in findings if f.passed]
    return [f"  ✓ 通过 (passed): {', '.join(good)}"] if good else []


@dataclass
class Report:
    kind: str
    findings: list[Finding]
    elapsed: float | None = None   # seconds since drills.start(card), in timed mode
    level: str = "interview"       # the level the caller asked for (the CLI's exit status)
    target: float | None = None    # the card's target time in seconds (shown in timed mode)
    clock_running: bool = False    # timed and not passed yet: the clock keeps running

    def timing(self) -> str | None:
        """"用时 4:12 / 目标 5:00（在目标内）" in timed mode, None otherwise."""
        if self.elapsed is None:
            return None
        text = f"用时 (time) {mmss(self.elapsed)}"
        if self.target is not None:
            text += f" / 目标 (target) {mmss(self.target)}"
        if self.clock_running:
            return text + "（未通过，计时继续 clock running）"
        if self.target is None:
            return text
        if self.elapsed <= self.target:
            return text + "（在目标内 within target）"
        return text + f"（超出目标 over target by {mmss(self.elapsed - self.target)}）"

    def failed_at(self, level: str) -> list[Finding]:
        """Failures that block ``level``: interview failures block both levels."""
        levels = ("interview",) if level == "interview" else LEVELS
        return [f for f in self.findings if not f.passed and f.level in levels]

    def passed_at(self, level: str | None = None) -> bool:
        return not self.failed_at(level or self.level)

    @property
    def passed(self) -> bool:
        """The interview level (面试级): the formula and semantics are right."""
        return self.passed_at("interview")

    @property
    def passed_production(self) -> bool:
        return self.passed_at("production")

    @property
    def failed(self) -> list[Finding]:
        return [f for f in self.findings if not f.passed]

    def ids(self, failed_only: bool = True) -> set[str]:
        return {f.id for f in (self.failed if failed_only else self.findings)}

    def verdict(self) -> str:
        """One line: "面试级 ✓ · 工程级 ✗ 2 项" ("工程级 —" for kinds without production checks)."""
        parts = []
        for lv in LEVELS:
            n = sum(1 for f in self.findings if not f.passed and f.level == lv)
            if n == 0 and lv == "production" and not self.passed:
                parts.append(f"{LEVEL_NAME[lv]} ✗（先修正公式）")
            elif lv == "production" and not any(f.level == lv for f in self.findings):
                parts.append(f"{LEVEL_NAME[lv]} —")
            else:
                parts.append(f"{LEVEL_NAME[lv]} ✓" if n == 0 else f"{LEVEL_NAME[lv]} ✗ {n} 项")
        return " · ".join(parts)

    def level_lines(self) -> list[str]:
        """A one-line verdict per level."""
        lines = []
        for lv in LEVELS:
            bad = [f.id for f in self.findings if not f.passed and f.level == lv]
            n = sum(1 for f in self.findings if f.level == lv)
            what = ("公式与语义 (formula and semantics)" if lv == "interview"
                    else "可直接替换 torch 模块 (drop-in for the torch module)")
            head = f"{LEVEL_NAME[lv]} ({lv})"
            if bad:
                lines.append(f"{head} ✗ {what}：{len(bad)}/{n} 项未通过：{', '.join(bad)}")
            elif lv == "production" and not self.passed:
                lines.append(f"{head} ✗ {what}：先修正面试级的错误（公式不对时不再重复比较数值）")
            elif n == 0:
                lines.append(f"{head} — 这类练习没有{LEVEL_NAME[lv]}检查 (no {lv} checks for this kind)")
            else:
                lines.append(f"{head} ✓ {what}：{n} 项全部通过")
        return lines

    def __str__(self) -> str:
        head = f"[{self.kind}] {'通过 PASSED' if self.passed_at() else '未通过 FAILED'} · {self.verdict()}"
        if self.elapsed is not None:
            head += " · " + self.timing()
        lines = [head] + ["  " + line for line in self.level_lines()]
        for lv in LEVELS:
            for f in self.findings:
                if f.passed or f.level != lv:
                    continue
                lines.append(f"  ✗ [{LEVEL_NAME[lv]}] {f.id}: {f.message}")
                lines += example_lines(f)
        return "\n".join(lines + passed_lines(self.findings))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        color = "#2e7d32" if self.passed_at() else "#c62828"
        rows = []
        for lv in LEVELS:
            for f in self.findings:
                if f.passed or f.level != lv:
                    continue
                ex = "<br>".join(f"<b>{html.escape(k)}</b>: <code>{html.escape(v)}</code>" for k, v in f.example.items())
                rows.append(f"<tr><td style='color:#c62828'>✗</td><td>{LEVEL_NAME[lv]}</td>"
                            f"<td><code>{html.escape(f.id)}</code></td><td>{html.escape(f.message)}</td><td>{ex}</td></tr>")
        title = (f"<b style='color:{color}'>{html.escape(self.kind)}: "
                 f"{'通过 PASSED' if self.passed_at() else '未通过 FAILED'}</b> · {html.escape(self.verdict())}")
        if self.elapsed is not None:
            title += " · " + html.escape(self.timing())
        levels = "".join(f"<div>{html.escape(line)}</div>" for line in self.level_lines())
        table = (f"<table><thead><tr><th></th><th>级别 level</th><th>检查 check</th><th>结论 finding</th>"
                 f"<th>反例 counterexample</th></tr></thead><tbody>{''.join(rows)}</tbody></table>") if rows else ""
        good = [f.id for f in self.findings if f.passed]
        passed = (f"<div style='color:#2e7d32'>✓ 通过 (passed): {html.escape(', '.join(good))}</div>") if good else ""
        return f"<div>{title}{levels}{table}{passed}</div>"


def mmss(seconds: float) -> str:
    """4:05 for 245 s (minutes may exceed 59)."""
    s = int(round(seconds))
    return f"{s // 60}:{s % 60:02d}"


class DrillTimeout(Exception):
    pass


@contextmanager
def time_limit(seconds: float):
    """Stop a runaway submission: SIGALRM interrupts pure-Python loops and returns from torch
    ops (Linux/macOS, main thread: a Jupyter kernel and pytest workers both run cells there).
    Elsewhere (a thread, Windows) the call runs without a limit."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def on_alarm(signum, frame):
        raise DrillTimeout(f"超过时间限制 {seconds:g} s (time limit)")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def short(t: object, n: int = 6) -> str:
    """A compact printout of a tensor (first n values) for counterexamples."""
    if isinstance(t, torch.Tensor):
        flat = t.detach().flatten()[:n].tolist()
        vals = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in flat)
        more = ", ..." if t.numel() > n else ""
        return f"tensor{tuple(t.shape)} {str(t.dtype).replace('torch.', '')} [{vals}{more}]"
    return repr(t)[:120]


class SubmissionError(Exception):
    """The learner's code raised: carries a one-line description for the report."""


def guarded(fn: Callable, *args, seconds: float = 2.0, passthrough: tuple[type, ...] = (), **kwargs):
    """Call learner code; turn an exception or a timeout into SubmissionError (exceptions of the types
    in ``passthrough`` are re-raised as they are, for a caller that treats them itself)."""
    try:
        with time_limit(seconds):
            return fn(*args, **kwargs)
    except passthrough:
        raise
    except DrillTimeout as err:
        raise SubmissionError(str(err)) from None
    except Exception as err:  # noqa: BLE001 - any learner error becomes a finding
        tb = traceback.extract_tb(err.__traceback__)
        where = f" (line {tb[-1].lineno})" if tb else ""
        raise SubmissionError(f"{type(err).__name__}: {err}{where}") from None
