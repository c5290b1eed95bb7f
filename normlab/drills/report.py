"""Findings and reports of the drill checker, and the guarded call that produces them.

Two levels (issue 16). ``interview`` (面试级): the formula and semantics an interviewer checks.
``production`` (工程级): what a drop-in replacement for the torch module also needs (tuple
normalized_shape, half precision with a float32 upcast, torch's default eps, both BatchNorm
ranks, momentum=None, state_dict names and shapes). ``report.passed`` is the interview level."""

from __future__ import annotations

import html
import re
import signal
import threading
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

LEVELS = ("interview", "production")
LEVEL_NAME = {"interview": "面试级", "production": "工程级", "note": "提示 note"}
# Kinds with no production level (issue 37): a function, or a check of the card's formula only. A backward
# card's notes (argument order matched by name, a (1, C, 1, 1) gradient) are shown as notes and block nothing.
NO_PRODUCTION_LEVEL = {"prenorm_block", "postnorm_block", "deepnorm_constants", "deepnorm_residual", "deepnorm_init",
                       "dyt", "layernorm_backward", "batchnorm_backward", "rmsnorm_backward", "groupnorm_backward"}


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
    return [f"        {k}: {plain(v)}" for k, v in f.example.items()]


def passed_lines(findings: list[Finding]) -> list[str]:
    """The one line naming every check that passed (none when nothing passed), each id once."""
    good = list(dict.fromkeys(f.id for f in findings if f.passed))
    return [f"  ✓ 通过 (passed): {', '.join(good)}"] if good else []


# ---------------------------------------------------------------- rendering failures (issue 28 item 4)
# A message marks code with `backticks`: the HTML form shows it as <code>, the text form drops the marks.
CODE = re.compile(r"`([^`\n]+)`")
CELL = "text-align:left;vertical-align:top;padding:2px 10px 2px 0"
CODE_STYLE = "white-space:pre-wrap;word-break:break-word"


def plain(text: str) -> str:
    """The text form of a message: code shown without its backticks."""
    return CODE.sub(r"\1", str(text))


def rich(text: str) -> str:
    """The HTML form of a message: escaped, `code` as <code>."""
    return CODE.sub(lambda m: f"<code>{m.group(1)}</code>", html.escape(str(text), quote=False))


def input_label(value: str) -> str:
    """What an input was, in a few characters: "(5, 8) float32" for a tensor, else the value, cut at 40."""
    m = re.match(r"tensor(\([^)]*\)) (\w+)", value)
    if m:
        return f"{m.group(1)} {m.group(2)}"
    return value if len(value) <= 40 else value[:39] + "…"


@dataclass
class Failure:
    """One mistake and every input it was found on: the failed findings of one level with one id (and
    findings of other ids that say exactly the same, e.g. one wrong output on two probes)."""

    level: str
    findings: list[Finding]

    @property
    def ids(self) -> list[str]:
        return list(dict.fromkeys(f.id for f in self.findings))

    @property
    def messages(self) -> list[str]:
        """What the findings say, once per wording: messages that differ only in their numbers (the same
        mistake on another input, "G = 2" / "G = 3") count as one, the first kept; so does a message that
        only begins one already kept."""
        seen: dict[str, str] = {}
        for f in self.findings:
            key = NUMBER.sub("#", f.message)
            if not any(k.startswith(key) for k in seen):
                seen[key] = f.message
        return list(seen.values())

    @property
    def message(self) -> str:
        return self.messages[0]

    @property
    def inputs(self) -> list[str]:
        return list(dict.fromkeys(input_label(f.example["input"]) for f in self.findings if "input" in f.example))

    @property
    def example(self) -> dict[str, str]:
        """The counterexample of the first input it failed on."""
        return next((f.example for f in self.findings if f.example), {})


NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)?")


def failures(findings: list[Finding], levels: tuple[str, ...] = LEVELS + ("note",)) -> list[Failure]:
    """The failed findings grouped: one Failure per (level, id), and ids whose findings say the same
    merged; in level order, then first appearance."""
    by_id: dict[tuple[str, str], Failure] = {}
    for lv in levels:
        for f in findings:
            if not f.passed and f.level == lv:
                by_id.setdefault((lv, f.id), Failure(lv, [])).findings.append(f)
    merged: dict[tuple[str, tuple[str, ...]], Failure] = {}
    for g in by_id.values():
        key = (g.level, tuple(NUMBER.sub("#", m) for m in g.messages))
        if key in merged:
            merged[key].findings.extend(g.findings)
        else:
            merged[key] = Failure(g.level, list(g.findings))
    return list(merged.values())


def failure_lines(findings: list[Finding], show_level: bool = True) -> list[str]:
    """The text form: per mistake one line (✗ [level] id: message), the inputs it failed on when there
    are several, and the counterexample of the first."""
    lines = []
    for g in failures(findings):
        tag = f"[{LEVEL_NAME[g.level]}] " if show_level else ""
        lines.append(f"  ✗ {tag}{', '.join(g.ids)}: {plain(g.message)}")
        lines += [f"      另一处 (also): {plain(m)}" for m in g.messages[1:]]
        if len(g.inputs) > 1:
            lines.append(f"      失败的输入 (failed on {len(g.inputs)} inputs): {'; '.join(g.inputs)}；反例取第一个 (first shown)")
        lines += example_lines(Finding(g.ids[0], False, "", g.example))
    return lines


def failure_table(findings: list[Finding], show_level: bool = True) -> str:
    """The HTML form: a left-aligned table, one row per mistake (the inputs it failed on in one cell,
    the first counterexample in the next); empty when nothing failed."""
    rows = []
    for g in failures(findings):
        level = f"<td style='{CELL}'>{LEVEL_NAME[g.level]}</td>" if show_level else ""
        ids = "<br>".join(f"<code style='white-space:nowrap'>{html.escape(i)}</code>" for i in g.ids)
        inputs = "<br>".join(f"<code style='white-space:nowrap'>{html.escape(i)}</code>" for i in g.inputs) or "—"
        ex = "".join(f"<div><b>{html.escape(k)}</b> <code style='{CODE_STYLE}'>{html.escape(plain(v))}</code></div>"
                     for k, v in g.example.items()) or "—"
        rows.append(f"<tr><td style='{CELL};color:#c62828'>✗</td>{level}<td style='{CELL}'>{ids}</td>"
                    f"<td style='{CELL}'>{'<br>'.join(rich(m) for m in g.messages)}</td><td style='{CELL}'>{inputs}</td>"
                    f"<td style='{CELL}'>{ex}</td></tr>")
    if not rows:
        return ""
    heads = ["", "级别 level"] if show_level else [""]
    heads += ["检查 check", "结论 finding", "失败的输入 failed on", "反例 counterexample（第一个输入）"]
    head = "".join(f"<th style='{CELL}'>{h}</th>" for h in heads)
    return (f"<table class='nl-report' style='text-align:left;border-collapse:collapse;margin:4px 0;table-layout:auto'>"
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def passed_html(findings: list[Finding]) -> str:
    good = list(dict.fromkeys(f.id for f in findings if f.passed))
    return (f"<div style='color:#2e7d32;text-align:left'>✓ 通过 (passed): "
            f"{', '.join(f'<code>{html.escape(i)}</code>' for i in good)}</div>") if good else ""


@dataclass
class Report:
    kind: str
    findings: list[Finding]
    elapsed: float | None = None   # seconds since drills.start(card), in timed mode
    level: str = "interview"       # the level the caller asked for (the CLI's exit status)
    target: float | None = None    # the card's target time in seconds (shown in timed mode)
    clock_running: bool = False    # timed and not passed yet: the clock keeps running

    def __post_init__(self):
        if self.kind in NO_PRODUCTION_LEVEL:
            for f in self.findings:
                if f.level == "production":
                    f.level = "note"

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
            n = len(failures(self.findings, (lv,)))
            if lv == "production" and self.kind in NO_PRODUCTION_LEVEL:
                parts.append(f"{LEVEL_NAME[lv]} —")
            elif n == 0 and lv == "production" and not self.passed:
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
            bad = [", ".join(g.ids) for g in failures(self.findings, (lv,))]
            n = sum(1 for f in self.findings if f.level == lv)
            what = ("公式与语义 (formula and semantics)" if lv == "interview"
                    else "可直接替换 torch 模块 (drop-in for the torch module)")
            head = f"{LEVEL_NAME[lv]} ({lv})"
            if lv == "production" and self.kind in NO_PRODUCTION_LEVEL:
                lines.append(f"{head} — 这类练习没有{LEVEL_NAME[lv]} (no {lv} level for this kind)")
            elif bad:
                lines.append(f"{head} ✗ {what}：{len(bad)} 项未通过：{'; '.join(bad)}")
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
        return "\n".join(lines + failure_lines(self.findings) + passed_lines(self.findings))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        color = "#2e7d32" if self.passed_at() else "#c62828"
        title = (f"<b style='color:{color}'>{html.escape(self.kind)}: "
                 f"{'通过 PASSED' if self.passed_at() else '未通过 FAILED'}</b> · {html.escape(self.verdict())}")
        if self.elapsed is not None:
            title += " · " + html.escape(self.timing())
        levels = "".join(f"<div>{html.escape(line)}</div>" for line in self.level_lines())
        return (f"<div style='text-align:left'><div>{title}</div>{levels}{failure_table(self.findings)}"
                f"{passed_html(self.findings)}</div>")


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
