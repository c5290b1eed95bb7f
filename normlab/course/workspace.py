"""A learner's workspace on disk (normlab.course writes it): each notebook owner-only, the backups a
reset makes, the move from the old layout, and normlab-source/ (a read-only copy of the package's code
and the glossary). Everything here is private by default (normlab.course.private): 0700 folders, 0600
notebooks, a 0400 normlab-source/, whatever the umask (issue 38)."""

from __future__ import annotations

import os
import shutil
import stat
import sys
import time
from pathlib import Path

from .private import make_private, private_dir

PACKAGE_DIR = Path(__file__).resolve().parent.parent   # normlab/, all of it (this file is normlab/course/workspace.py)
SOLUTIONS, BACKUP, SOURCE_COPY = "solutions", ".backup", "normlab-source"
SOURCE_SUFFIXES = (".py", ".toml", ".js", ".css")   # what normlab-source/ copies of the package


def _write(nb, path: Path) -> None:
    """A notebook of the workspace, owner-only (0600; its folders 0700) whatever the umask (issue 38)."""
    import jupytext

    private_dir(path.parent)
    jupytext.write(nb, path)
    make_private(path)


def _backup(path: Path, dest: Path, stamp: str) -> Path:
    """Move a copy out of the way into dest/.backup/ (never deleted)."""
    backup = private_dir(dest / BACKUP)
    prefix = f"{SOLUTIONS}-" if path.parent.name == SOLUTIONS else ""
    target = backup / f"{prefix}{path.stem}.{stamp}{path.suffix}"
    shutil.move(str(path), target)
    return target


def migrate_old_layout(dest: Path, say=print) -> list[str]:
    """Workspaces made before the learner copies took the plain names held NAME.ipynb (the solution
    version) beside NAME_learner.ipynb (the learner's answers). The solution copy moves to .backup/,
    the learner's file takes the plain name: nothing is lost, and no answer key stays at the door."""
    moved, stamp = [], time.strftime("%Y%m%d-%H%M%S")
    for learner in sorted(dest.glob("[0-9][0-9]_*_learner.ipynb")):
        plain = learner.with_name(learner.name.replace("_learner.ipynb", ".ipynb"))
        if plain.exists():
            _backup(plain, dest, stamp)
        learner.rename(plain)
        moved.append(plain.name)
    if moved:
        say(f"[normlab] 旧版工作区：{', '.join(moved)} 现在就是你的学习版（原来的 *_learner 文件改了名，"
            f"答案版副本移到 {BACKUP}/）。(old layout migrated: your learner files keep their answers)")
    return moved


def _make_writable(func, path, _exc) -> None:
    """rmtree's error hook: a read-only file (Windows refuses to delete one) is made writable, then removed."""
    os.chmod(path, stat.S_IWRITE | stat.S_IREAD)
    func(path)


def _remove_tree(folder: Path) -> None:
    if sys.version_info >= (3, 12):
        shutil.rmtree(folder, onexc=_make_writable)
    else:
        shutil.rmtree(folder, onerror=_make_writable)


def write_source_copy(dest: Path, glossary: Path) -> Path:
    """dest/normlab-source/: a read-only copy of the package's code (normlab/...) and the glossary, so
    the files the lessons tell a learner to read open in JupyterLab, whose root is the workspace.
    Rewritten by every init (it is no learner's work)."""
    out = dest / SOURCE_COPY
    if out.exists():
        _remove_tree(out)
    private_dir(out)
    files = [p for p in sorted(PACKAGE_DIR.rglob("*")) if p.suffix in SOURCE_SUFFIXES
             and "_course" not in p.relative_to(PACKAGE_DIR).parts and "__pycache__" not in p.parts]
    for p in files:
        target = out / "normlab" / p.relative_to(PACKAGE_DIR)
        private_dir(target.parent)
        shutil.copyfile(p, target)
    if glossary.exists():
        shutil.copyfile(glossary, out / "glossary.md")
    (out / "README.md").write_text(
        "# normlab-source（只读副本 read-only copy）\n\n课程里提到的 `normlab/…` 文件在这里的 `normlab/…`，"
        "术语表 (glossary) 是 `glossary.md`。这是课程包的只读副本，每次 `normlab-course init`（或 "
        "`python3 run.py course`）都会重新生成：不要在这里改代码。"
        f"\n\nThe code that runs is the installed package: `{PACKAGE_DIR}`.\n", encoding="utf-8")
    for p in out.rglob("*"):
        if p.is_file():
            os.chmod(p, stat.S_IREAD)                # read-only, and the owner's only (0400)
    return out
