"""The drills' command line: check a file written in one's own editor, timed like notebook 08's cards.

    python -m normlab.drills start CARD                        # start the clock, print what to write and where
    python -m normlab.drills check CARD FILE.py [--level production]
    python -m normlab.drills CARD FILE.py [--level production] # the same check
    python -m normlab.drills --progress                        # one row per card of notebook 08
    python -m normlab.drills --reset CARD                      # forget one card's progress
    python -m normlab.drills --help                            # what each card's file must define, and the above

A check exits 0 when the interview level (面试级) passes (``--level production``: both levels), 1
otherwise, 2 for a usage error. Every check here is an attempt, recorded in the progress file (a
card opened with ``start`` is timed: the first passing check stops its clock). Nothing here reads or
writes an answer other than the file given to check (read only). Every line goes through
console.say, so a console without ✓/✗ (GBK) shows [OK]/[X]."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from . import KINDS, LEVELS, NAMES, check, progress
from .console import never_crash, say
from .report import mmss

# the command that works where this runs: `python3 run.py drills` when run.py started it (a plain shell)
PROG = os.environ.get("NORMLAB_DRILLS_PROG") or "python -m normlab.drills"


class UsageError(Exception):
    """A bad command line or a file that cannot be checked: said in Chinese with the English term, exit 2."""


def card_spec(kind: str) -> str:
    name, signature, needs = progress.DEFINES[kind]
    return f"{signature}\n        {needs}"


def help_text() -> str:
    """What each card's file must define, the commands, where progress is kept and how to reset it."""
    lines = [f"用法 (usage):",
             f"  {PROG} start CARD                     开始计时，并说明要写什么、写在哪 (start the clock)",
             f"  {PROG} check CARD FILE.py [--level production]",
             f"                                                检查你的文件；计时中的卡片在第一次通过时停表",
             f"  {PROG} CARD FILE.py                   同 check (same as check)",
             f"  {PROG} --progress                     进度表：第 08 课的 {len(progress.CARDS)} 张卡片",
             f"  {PROG} --reset CARD                   清除一张卡片的进度（不动你的答案）；CARD 为 all 时清除全部",
             f"  {PROG} --help                         本说明",
             "",
             f"CARD：卡片名、编号 1-{len(progress.CARDS)} 或单个练习类型 (a card name, its number 1-{len(progress.CARDS)}, or one kind)。",
             "文件里必须定义的名字和签名 (what FILE.py must define, per card)："]
    for card, (number, kinds, target) in progress.CARDS.items():
        lines.append(f"  {number} {card}（目标 target {mmss(target)}）")
        for kind in kinds:
            lines.append(f"      {card_spec(kind)}" + (f"   [kind {kind}]" if len(kinds) > 1 else ""))
    where = progress.progress_file()
    lines += ["",
              "退出码 (exit status)：0 面试级通过（--level production：两级都通过），1 未通过，2 用法错误。",
              f"进度文件 (progress file)：{where if where is not None else '未保存 (off)'}",
              f"  环境变量 {progress.FILE_VARIABLE} 改位置（设为 off 则不记录）；只记尝试次数、用时和是否通过，不存代码。",
              f"  清除一张卡片 (reset)：{PROG} --reset layernorm；全部：{PROG} --reset all"]
    return "\n".join(lines)


def usage() -> str:
    return (f"用法 usage: {PROG} start CARD | check CARD FILE.py [--level interview|production] | "
            f"--progress | --reset CARD | --help\n      CARD: {', '.join(progress.CARDS)}（或编号 1-{len(progress.CARDS)}、单个练习类型）")


def import_file(path: Path):
    """The learner's file as a module, without writing a __pycache__/ into their folder."""
    spec = importlib.util.spec_from_file_location("drill_submission", path)
    module = importlib.util.module_from_spec(spec)
    write, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - a learner's file with a syntax error or a bad import
        raise UsageError(f"无法导入 {path}（your file failed to import）：{type(err).__name__}: {err}") from None
    finally:
        sys.dont_write_bytecode = write
    return module


def find(kind: str, module, path: Path):
    """The object ``kind`` checks: its name (NAMES), or the one other definition whose name says the same."""
    name = NAMES[kind]
    if hasattr(module, name):
        return getattr(module, name)
    # another name for the same thing (BatchNorm2d, MyLayerNorm, rms_norm_backward ...): one candidate only
    key = kind.replace("_", "").lower()
    own = [(n, obj) for n, obj in vars(module).items()
           if callable(obj) and getattr(obj, "__module__", None) == module.__name__ and not n.startswith("_")]
    found = [(n, obj) for n, obj in own if key in n.replace("_", "").lower()]
    if len(found) != 1:
        loose = key.replace("backward", "").replace("norm", "")     # "batch", "layer", "rms", ...
        found = [(n, obj) for n, obj in own if loose and loose in n.lower() and
                 ("backward" in n.lower()) == ("backward" in key)]
    if len(found) == 1:
        say(f"（没有找到 {name}，检查 {found[0][0]}）")
        return found[0][1]
    raise UsageError(f"{path} 里没有找到 {name}（练习 {kind} 需要这个名字 (this name is required)）：\n    {card_spec(kind)}")


def load(kind: str, path: Path):
    """The object in ``path`` that ``kind`` checks (see find)."""
    return find(kind, import_file(path), path)


def cmd_start(name: str) -> int:
    card, kinds, where = progress.start_shared(name)
    number, _, target = progress.CARDS[card]
    file = Path(f"my_{card}.py")
    say(f"⏱ 计时开始 (timer started)：{number} {card}，目标 (target) {mmss(target)}。")
    say(f"在你自己的编辑器里写一个 .py 文件，例如 {file.resolve()}" + ("（已存在 exists）" if file.exists() else "") + "，定义：")
    for kind in kinds:
        say(f"    {card_spec(kind)}")
    say(f"写完后检查（通过时停表，未通过时继续计时）：\n    {PROG} check {card} {file}")
    say(f"开始时间记在 (start time kept in) {where}；{PROG} --progress 查看，--reset {card} 清除。")
    return 0


def cmd_check(name: str, path: Path, level: str) -> int:
    kinds = progress.kinds_of(name) if name not in KINDS else (name,)
    if not path.exists():
        raise UsageError(f"找不到文件 (file not found): {path}")
    module = import_file(path)
    impls = [(kind, find(kind, module, path)) for kind in kinds]
    passed = True
    for kind, impl in impls:
        report = check(kind, impl, level=level, record=True)      # the command line's checks are attempts
        say(report)
        passed = passed and report.passed_at(level)
    return 0 if passed else 1


def main(argv: list[str]) -> int:
    never_crash()
    args, level = list(argv), "interview"
    try:
        if not args or args[0] in ("-h", "--help", "help"):
            say(help_text() if args else usage() + f"\n      {PROG} --help 看每张卡片要定义什么 (what each card needs)")
            return 0 if args else 2
        if args == ["--progress"]:
            say(progress.table(encoding=getattr(sys.stdout, "encoding", None) or "utf-8"))
            return 0
        if args[0].split("=", 1)[0] == "--reset":
            names = [args[0].split("=", 1)[1]] if "=" in args[0] else args[1:]
            if len(names) != 1:
                raise UsageError(f"用法 usage: {PROG} --reset CARD   "
                                 f"(CARD: {', '.join(progress.CARDS)}、一个练习类型 a kind、编号 1-{len(progress.CARDS)}，或 all)")
            gone = progress.reset(names[0])
            where = progress.progress_file()
            if gone:
                say(f"已清除 (reset) {', '.join(gone)} 的练习进度 ({where})；你的答案没有改动 (your answers are untouched)")
            else:
                say(f"{names[0]} 没有记录过进度 (no progress recorded) ({where})")
            return 0
        if args[0] == "start":
            if len(args) != 2:
                raise UsageError(f"用法 usage: {PROG} start CARD   (CARD: {', '.join(progress.CARDS)})")
            return cmd_start(args[1])
        if args[0] == "check":
            args = args[1:]
        for i, a in enumerate(args):
            if a.startswith("--level"):
                level = a.split("=", 1)[1] if "=" in a else (args[i + 1] if i + 1 < len(args) else "")
                del args[i: i + (1 if "=" in a else 2)]
                break
        if len(args) != 2 or level not in LEVELS:
            raise UsageError(usage())
        return cmd_check(args[0], Path(args[1]), level)
    except (UsageError, ValueError) as err:
        say(err, sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
