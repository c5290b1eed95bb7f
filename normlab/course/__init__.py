"""The course as files a learner owns: the lessons ship inside the package, and one command writes a
learner's own copies into any folder (issue 29). ``run.py course`` uses the same code.

    python -m normlab.course init [DIR] [--solutions]   # or: normlab-course init ...  (DIR: ~/normlab-course)
    python -m normlab.course reset 03 [DIR]             # lesson 03 as new; the old copy moves to DIR/.backup/
    python -m normlab.course reset --all [DIR]

A workspace holds, under the lessons' plain names, the LEARNER copies (each 练习 answer and drill card is
``raise NotImplementedError``); the solution copies only in ``solutions/`` (``--solutions``), each with a
banner cell; ``normlab-source/``, a read-only copy of the package's code and the glossary the lessons cite.
Nothing a learner wrote is ever overwritten: init writes only missing files, reset backs up first.

Every exported notebook starts with the same setup cell (SETUP_SOURCE): where normlab is installed it
does nothing; on a hosted notebook without the course it installs it (NORMLAB_INSTALL or a
normlab-*.whl beside the notebook) and the lesson goes on. It is added here, at export time, so the
sources and their recorded fingerprints do not change.

Solution markers in a source: code between "### BEGIN SOLUTION" and "### END SOLUTION" is a reference
answer, and a line ending in "# solution-only" belongs to it too; markdown between "<!-- BEGIN SOLUTION
-->" and "<!-- END SOLUTION -->" (each on its own line) is part of the answer; a cell tagged "solution"
is answer as a whole. The learner version replaces each answer by a NotImplementedError, drops the
solution-only lines, text and cells, and every cell left empty, so its check cells run and report.

The package is the course machinery, a layer between the core and the wings that use it (it imports
the core only; widgets/predict.py and classroom/ import it; the core never does): this module (export,
init, reset), answer_key (the solution markers; setup.py strips the wheel's lessons with it), workspace
and private (a workspace on disk, owner-only), predictions + predictions_data (the 先想一想 prompts),
kernelmeta (the kernel a notebook names).
"""

from __future__ import annotations

import copy
import sys
import time
import traceback
from pathlib import Path

from .answer_key import BEGIN, END, LEARNER_ONLY, MD_BEGIN, MD_END, ONLY, TAG  # noqa: F401  (the markers)
from .private import make_private, private_dir
from .workspace import (BACKUP, SOLUTIONS, SOURCE_COPY, _backup, _write,  # noqa: F401
                        migrate_old_layout, write_source_copy)

PACKAGE_DIR = Path(__file__).resolve().parent.parent   # normlab/ (this file is normlab/course/__init__.py)
BUNDLE = PACKAGE_DIR / "_course"          # in a built wheel: notebooks/*.md and book/glossary.md (setup.py)
FIRST_NOTEBOOK = "00_course_map"
DEFAULT_DIR = "~/normlab-course"
FAILURE_NOTE = "NORMLAB-INIT-FAILED.md"   # in $HOME when init at a server's start fails (--at-server-start)
BLANK = 'raise NotImplementedError("在这里写出你的实现 (write your implementation here)")'
SETUP_TAG, BANNER_TAG = "normlab-setup", "normlab-solution-banner"
SETUP_SOURCE = '''\
# NormLab setup: does nothing where normlab is installed (run.py, normlab-course init, a class server).
# On a hosted notebook without the course it installs it, from NORMLAB_INSTALL (a wheel, a path or
# any pip requirement) or a normlab-*.whl beside this notebook, then the lesson goes on.
import importlib.util, os, subprocess, sys
from pathlib import Path
if importlib.util.find_spec("normlab") is None:
    _wheels = sorted(Path.cwd().glob("normlab-*.whl")) + sorted(Path.cwd().parent.glob("normlab-*.whl"))
    _source = os.environ.get("NORMLAB_INSTALL") or (str(_wheels[-1]) if _wheels else "")
    if not _source:
        raise SystemExit("没有安装课程包 normlab：把 normlab-*.whl 放在这个 notebook 旁边，或设置环境变量 "
                         "NORMLAB_INSTALL（wheel 文件或 pip 能安装的地址）。"
                         "(normlab is not installed: put its wheel beside this notebook or set NORMLAB_INSTALL)")
    print(f"安装课程包 (installing normlab): {_source} ...", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", _source], check=True)
    importlib.invalidate_caches()'''


class CourseError(Exception):
    """A learner-facing problem (Chinese with the English term): the CLI prints it without a traceback."""


# --------------------------------------------------------------------------------- where the lessons are

def course_root(source: Path | str | None = None) -> Path:
    """The folder holding notebooks/ and book/glossary.md: `source` when given (a teacher's copy of the
    course repository), else the package's own copy in an installed wheel, else the checkout the
    package sits in (run.py's editable install)."""
    if source is not None:
        root = Path(source).expanduser()
        if not any((root / "notebooks").glob("[0-9][0-9]_*.md")):
            raise CourseError(f"{root / 'notebooks'} 里没有课程的 notebook 源文件 (NN_*.md)：--from 要指向课程仓库的"
                              "根目录。(--from needs the course repository's root folder)")
        return root
    for root in (BUNDLE, PACKAGE_DIR.parent):
        if any((root / "notebooks").glob("[0-9][0-9]_*.md")):
            return root
    raise CourseError(f"在 {BUNDLE} 和 {PACKAGE_DIR.parent / 'notebooks'} 都没有找到课程的 notebook 源文件："
                      "这个 normlab 安装不完整，请重新安装。(the lesson sources are missing from this install)")


def sources(root: Path | None = None) -> list[Path]:
    """The lessons in order (their names start with a two-digit number)."""
    return sorted((root or course_root()).joinpath("notebooks").glob("[0-9][0-9]_*.md"))


def carries_solutions(root: Path) -> bool:
    """False for the wheel's bundle, whose sources have their answers taken out (normlab.course.answer_key)."""
    return not (root / LEARNER_ONLY).exists()


# --------------------------------------------------------------------------------- solution / learner

def is_teacher_note(cell) -> bool:
    """A speaker note (``slideshow: {slide_type: notes}``): for the slides' speaker view only."""
    return cell.cell_type == "markdown" and cell.get("metadata", {}).get("slideshow", {}).get("slide_type") == "notes"


def without_teacher_notes(nb):
    """The notebook as learners get it (workspace, the book): speaker notes removed. Notes often hold
    the answer to the question the lesson asks next."""
    nb.cells = [c for c in nb.cells if not is_teacher_note(c)]
    return nb


def is_solution_cell(cell) -> bool:
    return TAG in cell.get("metadata", {}).get("tags", [])


def has_solutions(nb) -> bool:
    return any((BEGIN in c.source if c.cell_type == "code" else MD_BEGIN in c.source) or is_solution_cell(c)
               for c in nb.cells)


def _markdown_version(source: str, learner: bool) -> str:
    out, inside = [], False
    for line in source.split("\n"):
        stripped = line.strip()
        if stripped == MD_BEGIN:
            inside = True
        elif stripped == MD_END:
            inside = False
        elif not (learner and inside):
            out.append(line)
    text = "\n".join(out)
    while "\n\n\n" in text:                     # the hole a removed block leaves
        text = text.replace("\n\n\n", "\n\n")
    return text.strip("\n") if learner else text


def _is_drill_notebook(nb) -> bool:
    """The drill notebook (cards, drills.start/check) rather than a lesson with exercises."""
    return any(c.cell_type == "code" and "drills.start(" in c.source for c in nb.cells)


def versions(nb, learner: bool):
    """A copy of the notebook as the solution version or as the learner version."""
    nb = copy.deepcopy(nb)
    if learner:
        nb.cells = [c for c in nb.cells if not is_solution_cell(c)]
    for cell in nb.cells:
        if cell.cell_type == "markdown" and MD_BEGIN in cell.source:
            cell.source = _markdown_version(cell.source, learner)
            continue
        if cell.cell_type != "code" or (BEGIN not in cell.source and ONLY not in cell.source):
            continue
        out, inside = [], False
        for line in cell.source.split("\n"):
            stripped = line.strip()
            if stripped == BEGIN:
                inside = True
                if learner:
                    out.append(line[: len(line) - len(line.lstrip())] + BLANK)
            elif stripped == END:
                inside = False
            elif learner and (inside or stripped.endswith(ONLY)):
                continue
            else:
                out.append(line.replace("  " + ONLY, "").replace(" " + ONLY, "") if stripped.endswith(ONLY) else line)
        cell.source = "\n".join(out)
    if learner:
        nb.cells = [c for c in nb.cells if c.source.strip() or c.cell_type == "raw"]
    if learner and nb.cells and nb.cells[0].cell_type == "markdown":
        where = "每张卡片" if _is_drill_notebook(nb) else "每道练习 (exercise)"
        nb.cells[0].source += (f"\n\n> **学习版 (learner version)**：{where}里的实现是空的，答案不在这个文件里。"
                               "先运行一遍看检查结果，再把 `raise NotImplementedError(...)` 换成你的代码，直到检查全部通过。")
    return nb


def with_setup_cell(nb):
    """The notebook with the standard setup cell first (SETUP_SOURCE, tagged SETUP_TAG), its code folded
    (jupyter.source_hidden: JupyterLab shows one thin line above the lesson's title, not 17 lines of
    install code a learner with the course installed never needs; a click unfolds it; it runs as before,
    its prompt left blank)."""
    import nbformat

    nb.cells = [c for c in nb.cells if SETUP_TAG not in c.get("metadata", {}).get("tags", [])]
    nb.cells.insert(0, nbformat.v4.new_code_cell(SETUP_SOURCE, metadata={"tags": [SETUP_TAG],
                                                                         "jupyter": {"source_hidden": True}}))
    return nb


def with_banner(nb, stem: str):
    """A solution copy: a banner cell first (after the setup cell) saying what it is."""
    import nbformat

    text = (f"> **答案版 (solution version)**：这是 `{stem}` 填好全部答案的版本，给做完之后对照和老师讲课用。"
            f"你自己的练习在上一级文件夹的学习版 `{stem}.ipynb` 里（那里的答案是空的）。")
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(text, metadata={"tags": [BANNER_TAG]}))
    return nb


def learner_copy(nb, has_answers: bool | None = None):
    """The copy a learner gets: the learner version (when the lesson has answers), its prompts laid
    out to be guessed before the code is seen (normlab.course.predictions.learner_layout: Run All waits at an
    unanswered prompt, the experiment's code collapsed until the guess), the setup cell first."""
    from .predictions import learner_layout

    if has_answers is None:
        has_answers = has_solutions(nb)
    return with_setup_cell(learner_layout(versions(nb, learner=True) if has_answers else copy.deepcopy(nb)))


def read_source(src: Path):
    import jupytext

    from .kernelmeta import kernel_metadata
    from .predictions import with_prediction_cells   # a choice widget after each 先想一想 (issue 28)

    nb = with_prediction_cells(without_teacher_notes(jupytext.read(src)), src.stem)
    nb.metadata.update(kernel_metadata())   # what JupyterLab would write on opening it (else: unsaved at once)
    return nb


def export(out: Path, keep_existing: bool = False, srcs: list[Path] | None = None) -> list[Path]:
    """The test run's layout (build/nbval): NAME.ipynb is the solution version and NAME_learner.ipynb
    the learner copy (``learner_copy``) of a lesson with answers; a lesson without answers has one
    copy, NAME.ipynb, the learners'. Every file starts with the setup cell."""
    import jupytext

    out.mkdir(parents=True, exist_ok=True)
    if not keep_existing:
        for old in out.glob("*.ipynb"):
            old.unlink()
    written = []
    for src in sources() if srcs is None else srcs:
        dst = out / (src.stem + ".ipynb")
        if keep_existing and dst.exists():
            continue
        nb = read_source(src)
        if not has_solutions(nb):                # one copy, the learners'
            jupytext.write(learner_copy(nb, False), dst)
            written.append(dst)
            continue
        learner = out / (src.stem + "_learner.ipynb")
        if not (keep_existing and learner.exists()):
            jupytext.write(learner_copy(nb, True), learner)
            written.append(learner)
        nb = versions(nb, learner=False)
        jupytext.write(with_setup_cell(nb), dst)
        written.append(dst)
    return written


# --------------------------------------------------------------------------------- a learner's workspace

def workspace_files(solutions: bool, srcs: list[Path] | None = None) -> dict[str, object]:
    """What a workspace holds: relative path -> notebook. Lessons under their plain names are the
    learner versions; the solution versions, with a banner, only under solutions/ (when asked)."""
    files = {}
    for src in sources() if srcs is None else srcs:
        nb = read_source(src)
        answers = has_solutions(nb)
        files[f"{src.stem}.ipynb"] = learner_copy(nb, answers)
        if solutions and answers:
            files[f"{SOLUTIONS}/{src.stem}.ipynb"] = with_banner(with_setup_cell(versions(nb, learner=False)), src.stem)
    return files


def init(dest: Path | str = DEFAULT_DIR, solutions: bool = False, say=print,
         source: Path | str | None = None) -> list[Path]:
    """Write the learner's workspace into dest: every missing notebook (never overwriting one that is
    there), and a fresh normlab-source/. Returns the notebooks written. Everything it writes is its
    owner's only (0700 folders, 0600 notebooks, a 0400 normlab-source/), whatever the umask.
    `source`: a course repository to read the lessons from (a teacher's solutions; the wheel has none)."""
    root = course_root(source)
    if solutions and not carries_solutions(root):
        raise CourseError("这个安装只带学习版，没有答案 (this install carries no solutions)。老师的答案版："
                          "normlab-course init 目录 --solutions --from 课程仓库目录（仓库放在只有你能读的地方，"
                          "见教师指南「一个班用一台服务器」）。")
    dest = Path(dest).expanduser()
    private_dir(dest)
    migrate_old_layout(dest, say)
    written = []
    for rel, nb in workspace_files(solutions, sources(root)).items():
        path = dest / rel
        if not path.exists():
            _write(nb, path)
            written.append(path)
    write_source_copy(dest, root / "book" / "glossary.md")
    return written


def reset(dest: Path | str, name: str | None, everything: bool = False, say=print,
          source: Path | str | None = None) -> list[Path]:
    """Put fresh copies of lesson `name` ("03", "03_layernorm"; the old "08_drills_learner" too), or of
    all with `everything`, into dest; each replaced copy moves to dest/.backup/ first. Returns them.
    Solution copies are refreshed where the workspace has solutions/ and the lessons' source carries
    them (`source`, a course repository; never the wheel's bundle). Other files are never touched."""
    dest, root = Path(dest).expanduser(), course_root(source)
    if dest.exists():
        migrate_old_layout(dest, say)
    files = workspace_files((dest / SOLUTIONS).is_dir() and carries_solutions(root), sources(root))
    stems = sorted({Path(rel).stem for rel in files})
    wanted = (name or "").removesuffix(".ipynb").removesuffix("_learner")
    chosen = stems if everything else ([s for s in stems if s == wanted] or
                                       [s for s in stems if wanted and s.startswith(wanted)])
    if not chosen or (not everything and len(chosen) > 1):
        raise CourseError(f"恢复 (reset) 需要一个课名，例如 --reset 03 / reset 03（可选：{', '.join(stems)}）；"
                          f"全部恢复用 --reset-all / reset --all。收到 {name!r}。(reset needs one lesson name)")
    stamp, replaced = time.strftime("%Y%m%d-%H%M%S"), []
    for rel, nb in files.items():
        if Path(rel).stem not in chosen:
            continue
        path = dest / rel
        if path.exists():
            _backup(path, dest, stamp)
            replaced.append(path)
        _write(nb, path)
    say(f"[normlab] 已恢复 {len(chosen)} 课：{', '.join(chosen)}；旧副本在 {dest / BACKUP}/ "
        "(restored; the old copies are backed up)")
    return replaced


def init_at_server_start(dest: Path | str) -> int:
    """init as a class server's start runs it (deploy/): a failure never stops the server. The cause
    goes to the server's log (stderr) and into ~/NORMLAB-INIT-FAILED.md, which the server then opens
    instead of lesson 00, so the learner reads what went wrong; a later good start removes the note.
    Exit status 1 on failure (the start command switches the page on it)."""
    note = Path.home() / FAILURE_NOTE
    try:
        written = init(dest)
    except BaseException as err:                     # anything: the learner must still get their server
        detail = traceback.format_exc()
        print(f"[normlab] init {dest} failed:\n{detail}", file=sys.stderr, flush=True)
        try:
            note.write_text(
                f"# 课程工作区没有准备好 (your course workspace could not be prepared)\n\n"
                f"服务器启动时 `normlab-course init {dest}` 失败了：\n\n```\n{type(err).__name__}: {err}\n```\n\n"
                "你的服务器照常运行，已有的文件都没有动。常见原因：主目录的磁盘满了、`normlab-course` "
                "这个名字被一个文件占用了、课程包没有装好。请把这一页的内容发给老师；老师在服务器的日志里能看到完整的"
                "出错信息 (the full traceback is in the server's log)。问题解决后，停止并重新启动你的服务器"
                "（File → Hub Control Panel → Stop My Server → Start My Server）。\n", encoding="utf-8")
            make_private(note)
        except OSError as again:
            print(f"[normlab] could not write {note}: {again}", file=sys.stderr)
        return 1
    if note.exists():
        note.unlink()
    print(f"[normlab] {len(written)} 个 notebook 写入 {Path(dest).expanduser()}（已有的没有动）"
          "(workspace ready; existing files kept)", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    from ..console import console_safe

    console_safe()   # a GBK console never crashes on a character (✓ -> [OK]); imports no torch
    ap = argparse.ArgumentParser(prog="normlab-course", description=__doc__.split("\n\nEvery exported")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd")
    i = sub.add_parser("init", help="写出学习者的工作区 (write a learner's workspace)")
    i.add_argument("dir", nargs="?", default=DEFAULT_DIR, help=f"工作区文件夹 (workspace folder)，默认 {DEFAULT_DIR}")
    i.add_argument("--solutions", action="store_true", help="也写出答案版 solutions/ (for teachers)")
    r = sub.add_parser("reset", help="把一课恢复原样，旧副本先备份 (restore a lesson; backs up first)")
    r.add_argument("name", nargs="?", help="课名 (lesson)，例如 03 或 03_layernorm")
    r.add_argument("dir", nargs="?", default=DEFAULT_DIR, help=f"工作区文件夹 (workspace folder)，默认 {DEFAULT_DIR}")
    r.add_argument("--all", action="store_true")
    for p in (i, r):
        p.add_argument("--from", dest="source", metavar="REPO",
                       help="从课程仓库读课程（老师的答案版）(read the lessons from a course repository)")
    i.add_argument("--at-server-start", action="store_true",
                   help=f"服务器启动时用：失败时把原因写进 ~/{FAILURE_NOTE} (a class server's start: note a failure)")
    args = ap.parse_args(argv)
    if args.cmd is None:
        ap.print_help()
        print("\n[normlab] 需要一个命令：init 或 reset，例如 normlab-course init ~/normlab-course。"
              "(a command is needed: init or reset)", file=sys.stderr)
        return 2
    if args.cmd == "init" and args.at_server_start:
        return init_at_server_start(args.dir)
    try:
        if args.cmd == "init":
            written = init(args.dir, args.solutions, source=args.source)
            dest = Path(args.dir).expanduser()
            print(f"[normlab] {len(written)} 个 notebook 写入 {dest}（已有的没有动）；从 "
                  f"{dest / (FIRST_NOTEBOOK + '.ipynb')} 开始。(workspace ready; existing files kept)")
        elif args.all:       # reset --all [DIR]: the one positional is the folder
            reset(args.name or args.dir, None, everything=True, source=args.source)
        else:
            reset(args.dir, args.name, source=args.source)
    except (CourseError, OSError) as err:
        print(f"[normlab] {err}", file=sys.stderr)
        return 2
    return 0
