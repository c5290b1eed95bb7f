"""Findings and reports of the drill checker, and the guarded call that produces them."""

from __future__ import annotations

import html
import signal
import threading
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch


@dataclass
class Finding:
    """One check: a short id, whether it passed, a message (Chinese with the English term),
    and for a failure a minimal counterexample (input, expected, got)."""

    id: str
    passed: bool
    message: str
    example: dict[str, str] = field(default_factory=dict)


@dataclass
class Report:
    kind: str
    findings: list[Finding]
    elapsed: float | None = None   # seconds since drills.start(kind), in timed mode

    @property
    def passed(self) -> bool:
        return all(f.passed for f in self.findings)

    @property
    def failed(self) -> list[Finding]:
        return [f for f in self.findings if not f.passed]

    def ids(self, failed_only: bool = True) -> set[str]:
        return {f.id for f in (self.failed if failed_only else self.findings)}

    def __str__(self) -> str:
        head = f"[{self.kind}] {'通过 PASSED' if self.passed else '未通过 FAILED'}: " \
               f"{len(self.findings) - len(self.failed)}/{len(self.findings)} 项检查通过"
        if self.elapsed is not None:
            head += f"，用时 {int(self.elapsed // 60)} 分 {int(self.elapsed % 60)} 秒"
        lines = [head]
        for f in self.findings:
            lines.append(f"  {'✓' if f.passed else '✗'} {f.id}: {f.message}")
            for k, v in f.example.items():
                lines.append(f"        {k}: {v}")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        color = "#2e7d32" if self.passed else "#c62828"
        rows = []
        for f in self.findings:
            ex = "<br>".join(f"<b>{html.escape(k)}</b>: <code>{html.escape(v)}</code>" for k, v in f.example.items())
            mark = "✓" if f.passed else "✗"
            rows.append(f"<tr><td style='color:{'#2e7d32' if f.passed else '#c62828'}'>{mark}</td>"
                        f"<td><code>{html.escape(f.id)}</code></td><td>{html.escape(f.message)}</td><td>{ex}</td></tr>")
        title = (f"<b style='color:{color}'>{html.escape(self.kind)}: "
                 f"{'通过 PASSED' if self.passed else '未通过 FAILED'}</b> "
                 f"({len(self.findings) - len(self.failed)}/{len(self.findings)})")
        if self.elapsed is not None:
            title += f" · 用时 {int(self.elapsed // 60)}:{int(self.elapsed % 60):02d}"
        return (f"<div>{title}<table><thead><tr><th></th><th>检查 check</th><th>结论 finding</th>"
                f"<th>反例 counterexample</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>")


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


def guarded(fn: Callable, *args, seconds: float = 2.0, **kwargs):
    """Call learner code; turn an exception or a timeout into SubmissionError."""
    try:
        with time_limit(seconds):
            return fn(*args, **kwargs)
    except DrillTimeout as err:
        raise SubmissionError(str(err)) from None
    except Exception as err:  # noqa: BLE001 - any learner error becomes a finding
        tb = traceback.extract_tb(err.__traceback__)
        where = f" (line {tb[-1].lineno})" if tb else ""
        raise SubmissionError(f"{type(err).__name__}: {err}{where}") from None
