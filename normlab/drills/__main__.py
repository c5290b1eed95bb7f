"""python -m normlab.drills KIND path/to/file.py — check the file's implementation, exit 1 on failure."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from . import KINDS, NAMES, check


def load(kind: str, path: Path):
    spec = importlib.util.spec_from_file_location("drill_submission", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - a learner's file with a syntax error or a bad import
        raise SystemExit(f"无法导入 {path}（your file failed to import）：{type(err).__name__}: {err}") from None
    name = NAMES[kind]
    if not hasattr(module, name):
        raise SystemExit(f"{path} 里没有找到 {name}（练习 {kind} 需要这个名字）")
    return getattr(module, name)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in KINDS:
        print(f"用法 usage: python -m normlab.drills KIND FILE.py   (KIND: {', '.join(sorted(KINDS))})")
        return 2
    path = Path(argv[1])
    if not path.exists():
        print(f"找不到文件 (file not found): {path}")
        return 2
    report = check(argv[0], load(argv[0], path))
    print(report)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
