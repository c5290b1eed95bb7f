"""python -m normlab.drills KIND path/to/file.py [--level production]
python -m normlab.drills --progress
python -m normlab.drills --reset CARD

Check the file's implementation. Exit 0 when the interview level (面试级) passes; with
``--level production`` only when the production level (工程级) passes too; 1 otherwise.
``--progress`` prints the progress file as a table (card, attempts, best time, target, the levels
passed); ``--reset CARD`` forgets one card's progress (a card such as layernorm or blocks, a kind,
a number 1-9, or "all"). Neither reads nor writes any answer: only the progress file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from . import KINDS, LEVELS, NAMES, check, progress
from .console import never_crash, say


def load(kind: str, path: Path):
    spec = importlib.util.spec_from_file_location("drill_submission", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - a learner's file with a syntax error or a bad import
        raise SystemExit(f"无法导入 {path}（your file failed to import）：{type(err).__name__}: {err}") from None
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
    raise SystemExit(f"{path} 里没有找到 {name}（练习 {kind} 需要这个名字）")


def main(argv: list[str]) -> int:
    never_crash()
    args, level = list(argv), "interview"
    if args == ["--progress"]:
        say(progress.table())
        return 0
    if args and args[0].split("=", 1)[0] == "--reset":
        names = [args[0].split("=", 1)[1]] if "=" in args[0] else args[1:]
        if len(names) != 1:
            say("用法 usage: python -m normlab.drills --reset CARD   "
                  f"(CARD: {', '.join(progress.CARDS)}、一个练习类型 a kind、编号 1-9，或 all)")
            return 2
        try:
            gone = progress.reset(names[0])
        except ValueError as err:
            say(err)
            return 2
        where = progress.progress_file()
        if gone:
            say(f"已清除 (reset) {', '.join(gone)} 的练习进度 ({where})；你的答案没有改动 (your answers are untouched)")
        else:
            say(f"{names[0]} 没有记录过进度 (no progress recorded) ({where})")
        return 0
    for i, a in enumerate(args):
        if a.startswith("--level"):
            value = a.split("=", 1)[1] if "=" in a else (args[i + 1] if i + 1 < len(args) else "")
            del args[i: i + (1 if "=" in a else 2)]
            level = value
            break
    if len(args) != 2 or args[0] not in KINDS or level not in LEVELS:
        say(f"用法 usage: python -m normlab.drills KIND FILE.py [--level interview|production]   "
              f"(KIND: {', '.join(sorted(KINDS))})\n"
              f"      python -m normlab.drills --progress | --reset CARD")
        return 2
    path = Path(args[1])
    if not path.exists():
        say(f"找不到文件 (file not found): {path}")
        return 2
    report = check(args[0], load(args[0], path), level=level)
    say(report)
    return 0 if report.passed_at(level) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
