"""Timed mode and the progress file of the drills (issue 18).

Timed mode: ``drills.start("layernorm")`` (in its own cell, when the card is opened) starts a
clock for the card's kinds; each ``drills.check`` of such a kind reads the elapsed time, and the
first check that passes stops that kind's clock. A failed check shows the time so far and the
clock keeps running. The report shows the time against the card's target (``TARGETS``).

Timed mode in one's own editor (issue 28 item 6): ``python -m normlab.drills start layernorm``
writes the start time (wall clock, ``started``) into the progress file; ``python -m normlab.drills
check layernorm my_ln.py`` reads it, like a notebook check reads the kernel's clock, and the first
passing check stops it. Both record their times in the same entries of the same file.

Who records (issue 28 item 9): only the learner's attempts. ``drills.check(kind, impl)`` called as a
library (a script, a test, a tool) writes nothing; ``check(..., record=True)`` records, and so does a
check of a card opened with ``drills.start(card)`` in this process (the notebook's cards: their timing
cell opens the card) and every check of the command line. ``record_progress(False)`` turns recording
off for the process whatever the caller asks (the answer version of notebook 08).

Progress file: every recorded check of something the learner wrote (a card still holding the learner
version's ``raise NotImplementedError`` is no attempt) adds an attempt to a small JSON file:
``$NORMLAB_DRILLS_FILE`` when set (empty or "off": no file), else ``~/.normlab/drills.json``.
It holds, per kind: attempts, whether the interview / production level was ever passed
(``interview``, ``production``) and whether the latest attempt passed it (``latest_interview``,
``latest_production``), the best timed pass, the last attempt's date and, while a command-line clock
runs, its start. It never holds code: the learner's answers live in their notebook or their .py
files, which nothing here reads or writes.

    python -m normlab.drills --progress          # the table: one row per card, as notebook 08 shows them
    python -m normlab.drills --reset layernorm   # forget one card's progress (a card, a kind, a number, or "all")
"""

from __future__ import annotations

import json
import logging
import os
import time
import unicodedata
import warnings
from datetime import datetime
from pathlib import Path

from .console import encodable, say
from .report import NO_PRODUCTION_LEVEL, mmss

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
#   ⑩ GroupNorm 6 min: LayerNorm's decisions plus one reshape to (N, G, C/G, H, W) and back, γ/β per channel.
#   ⑪ GroupNorm backward 12 min: ④'s derivation with the statistic over a group of channels and space, the
#      parameters' sums over batch and space: more bookkeeping than ⑤, less derivation than ④.
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
    "groupnorm": ("⑩", ("groupnorm",), 6 * 60),
    "groupnorm_backward": ("⑪", ("groupnorm_backward",), 12 * 60),
}
NUMBERS = "①②③④⑤⑥⑦⑧⑨⑩⑪"
CARD_OF = {kind: card for card, (_, kinds, _) in CARDS.items() for kind in kinds}
TARGETS = {kind: CARDS[card][2] for kind, card in CARD_OF.items()}
# Kinds whose checks are all at the interview level: the production column shows "—" for them.
NO_PRODUCTION_CHECKS = NO_PRODUCTION_LEVEL

# What a card's file must define, per kind: (the name, its signature, what the checker looks for).
# The command line's --help and start print it; notebook 08's card tasks state the same.
DEFINES: dict[str, tuple[str, str, str]] = {
    "layernorm": ("LayerNorm", "class LayerNorm(normalized_shape, eps=1e-5)",
                  "nn.Parameter self.weight, self.bias (shape normalized_shape); self.eps"),
    "rmsnorm": ("RMSNorm", "class RMSNorm(normalized_shape, eps=1e-6)", "nn.Parameter self.weight; self.eps"),
    "batchnorm": ("BatchNorm", "class BatchNorm(num_features, eps=1e-5, momentum=0.1)",
                  "nn.Parameter self.weight, self.bias; buffers self.running_mean, self.running_var; "
                  "self.eps, self.momentum; input (N, C) and/or (N, C, H, W)"),
    "layernorm_backward": ("layernorm_backward",
                           "def layernorm_backward(grad_out, x, weight, eps) -> (grad_x, grad_weight, grad_bias)",
                           "x: (N, D), normalised over the last dimension"),
    "batchnorm_backward": ("batchnorm_backward",
                           "def batchnorm_backward(grad_out, x, weight, eps) -> (grad_x, grad_weight, grad_bias)",
                           "x: (N, C), training mode (batch statistics)"),
    "rmsnorm_backward": ("rmsnorm_backward", "def rmsnorm_backward(grad_out, x, weight, eps) -> (grad_x, grad_weight)",
                         "x: (N, D), last dimension"),
    "prenorm_block": ("prenorm_block", "def prenorm_block(x, sublayer, norm)", "x: (B, S, d); returns the block's output"),
    "postnorm_block": ("postnorm_block", "def postnorm_block(x, sublayer, norm)", "x: (B, S, d); returns the block's output"),
    "deepnorm_constants": ("deepnorm_constants", "def deepnorm_constants(arch, N, M) -> (alpha, beta)",
                           'arch: "encoder", "decoder", "encdec_encoder" or "encdec_decoder"'),
    "deepnorm_residual": ("deepnorm_residual", "def deepnorm_residual(x, fx, alpha)", "x, fx: (..., d)"),
    "deepnorm_init": ("deepnorm_init", "def deepnorm_init(block, beta)",
                      "initialises block.attn.{q,k,v,out}_proj and block.ffn.fc1/fc2 in place"),
    "dyt": ("DyT", "class DyT(d, alpha_init=0.5)", "nn.Parameter self.alpha, self.weight, self.bias; input (..., d)"),
    "groupnorm": ("GroupNorm", "class GroupNorm(num_groups, num_channels, eps=1e-5)",
                  "nn.Parameter self.weight, self.bias (shape (num_channels,)); self.eps; input (N, C, H, W)"),
    "groupnorm_backward": ("groupnorm_backward",
                           "def groupnorm_backward(grad_out, x, weight, num_groups, eps) -> (grad_x, grad_weight, grad_bias)",
                           "x: (N, C, H, W), weight: (C,); statistics per sample over each group of C/G channels and H, W"),
}

clock = time.monotonic          # the clock of timed mode in a notebook (tests put a fake one here)
wall = time.time                # the clock of timed mode across processes (the command line; tests fake it too)
_started: dict[str, float] = {}
_opened: set[str] = set()       # kinds whose card drills.start opened in this process: their checks are recorded
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
        if name == number or name == str(NUMBERS.index(number) + 1):
            return kinds
    raise ValueError(f"未知的卡片 (unknown drill card) {name!r}；可选: {', '.join(CARDS)}、"
                     f"单个练习类型 (a kind) 如 prenorm_block、编号 1–{len(CARDS)}，或 all")


def card_label(kind: str) -> str:
    return f"{CARDS[CARD_OF[kind]][0]} {kind}"


# ---------------------------------------------------------------- timed mode
def start(name: str) -> None:
    """Open a card (or one kind) in this process: start its clock (the next passing check of each of its
    kinds stops it) and record its checks as the learner's attempts (see the module docstring)."""
    kinds = kinds_of(name)
    now = clock()
    for kind in kinds:
        _started[kind] = now
    _opened.update(kinds)
    card = CARD_OF[kinds[0]]
    say(f"⏱ 计时开始 (timer started)：{CARDS[card][0]} {card}，目标 (target) {mmss(TARGETS[kinds[0]])}。"
        f"写完后运行检查格：检查通过时停表，未通过时继续计时。")


def lap(kind: str, passed: bool, shared: bool = False) -> tuple[float | None, bool]:
    """(seconds since start, clock still running) for a check of ``kind``; (None, False) if not timed.
    The clock of this process (drills.start) first; with ``shared``, else the one ``start_shared`` wrote
    into the progress file (the command line). A passing check stops the process's clock here and the
    file's clock when ``record`` saves the pass."""
    if kind in _started:
        elapsed = clock() - _started[kind]
        if passed:
            del _started[kind]
        return elapsed, not passed
    path = progress_file() if shared else None
    if path is None or not path.exists():
        return None, False
    started = load(path)["kinds"].get(kind, {}).get("started")
    if not isinstance(started, (int, float)):
        return None, False
    return max(0.0, wall() - started), not passed


def start_shared(name: str) -> tuple[str, tuple[str, ...], Path]:
    """Start a card's clock in the progress file (the command line's ``start``): (card, kinds, file).
    A check in another process (``check`` on the command line) reads it. Raises ValueError when
    there is no progress file to keep it in."""
    kinds = kinds_of(name)
    path = progress_file()
    if path is None:
        raise ValueError(f"计时要记在进度文件里，但 {FILE_VARIABLE} 关掉了它 (timing needs the progress file; "
                         f"unset {FILE_VARIABLE} or set it to a path)")
    data = load(path)
    now = round(wall(), 1)
    for kind in kinds:
        data["kinds"].setdefault(kind, new_entry())["started"] = now
    save(data, path)
    return CARD_OF[kinds[0]], kinds, path


def wants(kind: str, record: bool | None) -> bool:
    """Whether a check of ``kind`` is recorded: ``record`` when given, else whether drills.start opened
    its card in this process; never while record_progress(False) holds."""
    return _enabled and (kind in _opened if record is None else bool(record))


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
    # Owner-only (a 0700 folder, a 0600 file) whatever the umask: a learner's attempts are theirs alone on a
    # shared server (issue 38). drills imports nothing else of normlab, so this is normlab.course.private's rule inline.
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if FILE_VARIABLE not in os.environ:          # ~/.normlab, the course's own folder (not one the learner named)
        os.chmod(path.parent, 0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
        f.write(json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def is_blank(report) -> bool:
    """Whether the report is of a card that still holds the learner version's blank."""
    return any(BLANK_MARK in f.message for f in report.failed)


def new_entry() -> dict:
    return {"attempts": 0, "interview": False, "production": False, "latest_interview": None,
            "latest_production": None, "best_seconds": None, "last_attempt": None}


def record(report) -> None:
    """Add the report as an attempt of its kind to the progress file (see the module docstring); the
    caller decides whether to record (``wants``). A file that cannot be written costs a warning,
    never the report."""
    if not _enabled or is_blank(report):
        return
    # The class service's client listens here when a hub runs it (normlab/classroom/client.py); else no-op.
    logging.getLogger("normlab.events").info("drill %s %s", report.kind, report.passed, extra={"normlab_event": {
        "kind": "drill", "card": report.kind, "level": report.level, "passed": report.passed_at(),
        "seconds": None if report.clock_running else report.elapsed}})
    path = progress_file()
    if path is None:
        return
    try:
        data = load(path)
        entry = data["kinds"].setdefault(report.kind, new_entry())
        entry["attempts"] = int(entry.get("attempts", 0)) + 1
        entry["interview"] = bool(entry.get("interview")) or report.passed
        entry["production"] = bool(entry.get("production")) or report.passed_production
        entry["latest_interview"], entry["latest_production"] = report.passed, report.passed_production
        entry["last_attempt"] = datetime.now().isoformat(timespec="seconds")
        if report.elapsed is not None and not report.clock_running:          # a timed check that passed
            best = entry.get("best_seconds")
            entry["best_seconds"] = round(report.elapsed if best is None else min(best, report.elapsed), 1)
            entry.pop("started", None)                                       # the clock stops at the pass
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


def kind_mark(entry: dict, level: str, kind: str) -> str:
    """✓ the latest attempt passed ``level``; ✗ it did not (“✗ 曾通过” when an earlier one did);
    · no attempt; — the kind has no checks at this level."""
    if level == "production" and kind in NO_PRODUCTION_CHECKS:
        return "—"
    if not int(entry.get("attempts", 0)):
        return "·"
    latest = entry.get(f"latest_{level}")
    latest = bool(entry.get(level)) if latest is None else latest     # a file written before the latest was kept
    return "✓" if latest else ("✗ 曾通过" if entry.get(level) else "✗")


def card_mark(data: dict, card: str, level: str) -> str:
    """A card's mark: ✓ when the latest attempt of each of its kinds passed, else as kind_mark."""
    kinds = [k for k in CARDS[card][1] if not (level == "production" and k in NO_PRODUCTION_CHECKS)]
    if not kinds:
        return "—"
    marks = [kind_mark(data["kinds"].get(k, {}), level, k) for k in kinds]
    if all(m == "·" for m in marks):
        return "·"
    if all(m == "✓" for m in marks):
        return "✓"
    return "✗ 曾通过" if all(m in ("✓", "✗ 曾通过") for m in marks) else "✗"


def cards_passed(data: dict) -> int:
    """How many of the lesson's cards pass the interview level in their latest attempts."""
    return sum(card_mark(data, card, "interview") == "✓" for card in CARDS)


def table(data: dict | None = None, path: Path | None = None, encoding: str = "utf-8") -> str:
    """The progress as a text table: one row per card of notebook 08, in its order (a card with several
    kinds adds one indented row per kind), the count of cards passed, and any clock still running.
    ``encoding``: the console's; its cells are what it can show ([OK] for ✓ on GBK), aligned as shown."""
    path = progress_file() if path is None else path
    data = load(path) if data is None else data
    head = ["卡片 card", "尝试 attempts", "最佳用时 best", "目标 target", "面试级", "工程级"]
    rows, running = [], []
    for card, (number, kinds, target) in CARDS.items():
        entries = [data["kinds"].get(k, {}) for k in kinds]
        bests = [e.get("best_seconds") for e in entries]
        best = max(bests) if all(b is not None for b in bests) else None     # the card is done when its last kind is
        rows.append([f"{number} {card}", str(sum(int(e.get("attempts", 0)) for e in entries)),
                     mmss(best) if best is not None else "—", mmss(target),
                     card_mark(data, card, "interview"), card_mark(data, card, "production")])
        if len(kinds) > 1 and any(e.get("attempts") for e in entries):
            for k, e in zip(kinds, entries):
                rows.append([f"   {k}", str(int(e.get("attempts", 0))),
                             mmss(e["best_seconds"]) if e.get("best_seconds") is not None else "—", "",
                             kind_mark(e, "interview", k), kind_mark(e, "production", k)])
        started = [e["started"] for e in entries if isinstance(e.get("started"), (int, float))]
        if started:
            since = datetime.fromtimestamp(min(started)).strftime("%H:%M")
            running.append(f"⏱ {number} {card} 计时中 (clock running)：{since} 开始，已 {mmss(max(0.0, wall() - min(started)))}")
    rows = [[encodable(c, encoding) for c in r] for r in rows]
    widths = [max(_width(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines = [f"练习进度 (drill progress) · {path if path is not None else '（未保存 not saved: ' + FILE_VARIABLE + ' 为空）'}"]
    for r in [head] + rows:
        lines.append("  ".join(_pad(c, w, right=0 < i < 4) for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    lines.append(f"面试级通过 {cards_passed(data)}/{len(CARDS)} 张卡片 (cards, latest attempt) · "
                 f"✓ 最近一次通过 (latest attempt passed)  ✗ 最近一次未通过 (latest failed)  "
                 f"✗ 曾通过 = 以前通过过、最近一次没有 (passed once)  · 未做 (not yet)  — 这一级没有检查 (no checks at this level)")
    lines.append("最佳用时 (best)：计时模式下第一次通过的用时，从 drills.start 或命令行 start 算起")
    return "\n".join(lines + running)
