"""Timed mode and the progress file of the drills (issue 18).

Timed mode: ``drills.start("layernorm")`` (in its own cell, when the card is opened) starts a
clock for the card's kinds; each ``drills.check`` of such a kind reads the elapsed time, and the
first check that passes stops that kind's clock. A failed check shows the time so far and the
clock keeps running. The report shows the time against the card's target (``TARGETS``).

Progress file: every check of something the learner wrote (a card still holding the learner
version's ``raise NotImplementedError`` is no attempt) adds an attempt to a small JSON file:
``$NORMLAB_DRILLS_FILE`` when set (empty or "off": no file), else ``~/.normlab/drills.json``.
It holds, per kind: attempts, whether the interview / production level was ever passed, the best
timed pass and the last attempt's date. It never holds code: the learner's answers live in their
notebook or their .py files, which nothing here reads or writes.

    python -m normlab.drills --progress          # the table
    python -m normlab.drills --reset layernorm   # forget one card's progress (a card, a kind, a number, or "all")
"""

from __future__ import annotations

import json
import os
import time
import unicodedata
import warnings
from datetime import datetime
from pathlib import Path

from .report import mmss

FILE_VARIABLE = "NORMLAB_DRILLS_FILE"
FORMAT = "normlab-drills-progress/1"
# The learner version's blank (tools/notebooks.py BLANK) raises with this text: a check of a blank card
# is not an attempt (and the test run of the learner notebook leaves the progress file alone).
BLANK_MARK = "write your implementation here"

# Cards in the notebook's order: name -> (number, kinds checked on the card, target in seconds).
# The targets are what a candidate who knows the material needs to write the card from memory, with
# a margin for typing and one fix after the first report; they are checked against the clock from
# drills.start to the first passing check, so they include reading the report.
#   ① LN 5 min: ~10 lines (params, two-pass mean/var, eps inside the root, float32 and back).
#   ② RMSNorm 4 min: LN with one statistic and no β.
#   ③ BN 10 min: two modes, buffers updated under no_grad, the momentum convention, the unbiased
#      running variance, two layouts: twice LN's decisions.
#   ④ LN backward 15 min: a derivation (the mean and the variance both depend on x), not recall only.
#   ⑤ BN backward 10 min, ⑥ RMSNorm backward 10 min: ④'s derivation on another axis / with one
#      term fewer, so less than ④, more than a forward card.
#   ⑦ Pre-/Post-Norm blocks 3 min: two one-line functions.
#   ⑧ DeepNorm 10 min: four (α, β) pairs from the paper, the residual line, an init of six layers.
#   ⑨ DyT 4 min: three parameters and one line.
CARDS: dict[str, tuple[str, tuple[str, ...], int]] = {
    "layernorm": ("①", ("layernorm",), 5 * 60),
    "rmsnorm": ("②", ("rmsnorm",), 4 * 60),
    "batchnorm": ("③", ("batchnorm",), 10 * 60),
    "layernorm_backward": ("④", ("layernorm_backward",), 15 * 60),
    "batchnorm_backward": ("⑤", ("batchnorm_backward",), 10 * 60),
    "rmsnorm_backward": ("⑥", ("rmsnorm_backward",), 10 * 60),
    "blocks": ("⑦", ("prenorm_block", "postnorm_block"), 3 * 60),
    "deepnorm": ("⑧", ("deepnorm_constants", "deepnorm_residual", "deepnorm_init"), 10 * 60),
    "dyt": ("⑨", ("dyt",), 4 * 60),
}
CARD_OF = {kind: card for card, (_, kinds, _) in CARDS.items() for kind in kinds}
TARGETS = {kind: CARDS[card][2] for kind, card in CARD_OF.items()}
# Kinds whose checks are all at the interview level: the production column shows "—" for them.
NO_PRODUCTION_CHECKS = {"prenorm_block", "postnorm_block", "deepnorm_constants", "deepnorm_residual",
                        "deepnorm_init", "dyt"}

clock = time.monotonic          # the clock of timed mode (tests put a fake one here)
_started: dict[str, float] = {}
_enabled = True


def kinds_of(name: str) -> tuple[str, ...]:
    """The kinds a card name, a kind, a card number ("1" or "①") or "all" stands for."""
    name = str(name).strip()
    if name == "all":
        return tuple(CARD_OF)
    if name in CARDS:
        return CARDS[name][1]
    if name in CARD_OF:
        return (name,)
    for card, (number, kinds, _) in CARDS.items():
        if name == number or name == str("①②③④⑤⑥⑦⑧⑨".index(number) + 1):
            return kinds
    raise ValueError(f"未知的卡片 (unknown drill card) {name!r}；可选: {', '.join(CARDS)}、"
                     f"单个练习类型 (a kind) 如 prenorm_block、编号 1–9，或 all")


def card_label(kind: str) -> str:
    return f"{CARDS[CARD_OF[kind]][0]} {kind}"


# ---------------------------------------------------------------- timed mode
def start(name: str) -> None:
    """Start the clock for a card (or one kind): the next passing check of each of its kinds stops it."""
    kinds = kinds_of(name)
    now = clock()
    for kind in kinds:
        _started[kind] = now
    card = CARD_OF[kinds[0]]
    print(f"⏱ 计时开始 (timer started)：{CARDS[card][0]} {card}，目标 (target) {mmss(TARGETS[kinds[0]])}。"
          f"写完后运行检查格：检查通过时停表，未通过时继续计时。")


def lap(kind: str, passed: bool) -> tuple[float | None, bool]:
    """(seconds since start, clock still running) for a check of ``kind``; (None, False) if not timed.
    A passing check stops the kind's clock."""
    if kind not in _started:
        return None, False
    elapsed = clock() - _started[kind]
    if passed:
        del _started[kind]
    return elapsed, not passed


# ---------------------------------------------------------------- the progress file
def record_progress(on: bool) -> None:
    """Switch the progress file on or off for this process. The answer version of notebook 08 turns
    it off: the reference answers passing their own checks are not the learner's attempts."""
    global _enabled
    _enabled = bool(on)


def progress_file() -> Path | None:
    """``$NORMLAB_DRILLS_FILE`` (empty, "0" or "off": none), else ~/.normlab/drills.json."""
    value = os.environ.get(FILE_VARIABLE)
    if value is not None:
        return None if value.strip().lower() in ("", "0", "off", "none") else Path(value).expanduser()
    return Path.home() / ".normlab" / "drills.json"


def empty() -> dict:
    return {"format": FORMAT, "kinds": {}}


def load(path: Path | None = None) -> dict:
    """The progress data; an empty one when there is no file. A file that is not ours or not JSON is
    moved aside (NAME.bad) with a warning, never silently overwritten."""
    path = progress_file() if path is None else path
    if path is None or not path.exists():
        return empty()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or not isinstance(data.get("kinds"), dict):
            raise ValueError("no 'kinds' table")
        return data
    except (ValueError, UnicodeDecodeError) as err:
        bad = path.with_name(path.name + ".bad")
        os.replace(path, bad)
        warnings.warn(f"练习进度文件无法读取 (unreadable progress file) {path}: {err}；已移到 {bad}，重新开始记录",
                      stacklevel=2)
        return empty()


def save(data: dict, path: Path | None = None) -> None:
    """Write atomically (a temporary file, then a rename): a crash never leaves half a file."""
    path = progress_file() if path is None else path
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def is_blank(report) -> bool:
    """Whether the report is of a card that still holds the learner version's blank."""
    return any(BLANK_MARK in f.message for f in report.failed)


def record(report) -> None:
    """Add the report as an attempt of its kind to the progress file (see the module docstring).
    A file that cannot be written costs a warning, never the report."""
    if not _enabled or is_blank(report):
        return
    path = progress_file()
    if path is None:
        return
    try:
        data = load(path)
        entry = data["kinds"].setdefault(report.kind, {"attempts": 0, "interview": False, "production": False,
                                                       "best_seconds": None, "last_attempt": None})
        entry["attempts"] = int(entry.get("attempts", 0)) + 1
        entry["interview"] = bool(entry.get("interview")) or report.passed
        entry["production"] = bool(entry.get("production")) or report.passed_production
        entry["last_attempt"] = datetime.now().isoformat(timespec="seconds")
        if report.elapsed is not None and not report.clock_running:          # a timed check that passed
            best = entry.get("best_seconds")
            entry["best_seconds"] = round(report.elapsed if best is None else min(best, report.elapsed), 1)
        save(data, path)
    except OSError as err:
        warnings.warn(f"练习进度没有保存 (progress not saved) 到 {path}: {err}", stacklevel=2)


def reset(name: str, path: Path | None = None) -> list[str]:
    """Forget the progress of one card (or kind, or "all"); return the kinds that had any. Only the
    progress file is written: no notebook, no answer file."""
    kinds = kinds_of(name)
    path = progress_file() if path is None else path
    if path is None or not path.exists():
        return []
    data = load(path)
    gone = [k for k in kinds if data["kinds"].pop(k, None) is not None]
    if gone:
        save(data, path)
    return gone


def _width(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int, right: bool = False) -> str:
    fill = " " * max(0, width - _width(text))
    return fill + text if right else text + fill


def table(data: dict | None = None, path: Path | None = None) -> str:
    """The progress as a text table: one row per kind in card order."""
    path = progress_file() if path is None else path
    data = load(path) if data is None else data
    head = ["卡片 card", "尝试 attempts", "最佳用时 best", "目标 target", "面试级", "工程级"]
    rows = []
    for kind in CARD_OF:
        e = data["kinds"].get(kind, {})
        n = int(e.get("attempts", 0))
        best = e.get("best_seconds")

        def mark(level: str) -> str:
            if level == "production" and kind in NO_PRODUCTION_CHECKS:
                return "—"
            return "·" if not n else ("✓" if e.get(level) else "✗")

        rows.append([card_label(kind), str(n), mmss(best) if best is not None else "—", mmss(TARGETS[kind]),
                     mark("interview"), mark("production")])
    widths = [max(_width(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines = [f"练习进度 (drill progress) · {path if path is not None else '（未保存 not saved: ' + FILE_VARIABLE + ' 为空）'}"]
    for r in [head] + rows:
        lines.append("  ".join(_pad(c, w, right=0 < i < 4) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    done = sum(1 for k in CARD_OF if data["kinds"].get(k, {}).get("interview"))
    lines.append(f"面试级已通过 {done}/{len(CARD_OF)} 项 · ✓ 通过过 (passed)  ✗ 试过未通过 (attempted)  · 未做 (not yet)  "
                 f"— 这一级没有检查 (no checks at this level) · 最佳用时：计时模式下通过时的用时 (best timed pass)")
    return "\n".join(lines)
