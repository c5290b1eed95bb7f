"""Turn the course's jupytext sources (notebooks/*.md, MyST) into .ipynb files.

    python tools/notebooks.py export --out build/nbval            # fresh copies for nbval
    python tools/notebooks.py export --out workspace --keep-existing  # a learner's copies
    python tools/notebooks.py execute 03_layernorm [...]             # run, save outputs + PNGs

``execute`` writes build/executed/NAME.ipynb with outputs and every image output as
build/figures/NAME-cellK-J.png, so authors can look at each figure, and prints the time.

Run with the .venv's Python (run.py does). The sources stay the single truth; the
.ipynb files are generated and git-ignored.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "notebooks"


def sources() -> list[Path]:
    """Course notebooks in order (their names start with a two-digit number)."""
    return sorted(p for p in SOURCES.glob("[0-9][0-9]_*.md"))


# --- solution / learner versions (drill notebooks) ---------------------------------------
# In a source, code between "### BEGIN SOLUTION" and "### END SOLUTION" is a reference answer,
# and a line ending in "# solution-only" (e.g. `assert report.passed`) belongs to it too.
# In a markdown cell, text between "<!-- BEGIN SOLUTION -->" and "<!-- END SOLUTION -->" (each on
# its own line) is part of the answer (a derivation, a note on the reference answer); a cell of
# either kind tagged "solution" (MyST: `:tags: [solution]` / `+++ {"tags": ["solution"]}`) is
# answer as a whole (e.g. a demo that contains a correct implementation).
# The solution version drops the marker lines; the learner version (NAME_learner.ipynb)
# replaces each answer by a NotImplementedError, drops the solution-only lines, text and cells, and
# drops every cell that is left empty, so its check cells run and report failure instead of crashing.
BEGIN, END, ONLY = "### BEGIN SOLUTION", "### END SOLUTION", "# solution-only"
MD_BEGIN, MD_END, TAG = "<!-- BEGIN SOLUTION -->", "<!-- END SOLUTION -->", "solution"
BLANK = 'raise NotImplementedError("在这里写出你的实现 (write your implementation here)")'


def is_teacher_note(cell) -> bool:
    """A speaker note (``slideshow: {slide_type: notes}``): for the slides' speaker view only."""
    return cell.cell_type == "markdown" and cell.get("metadata", {}).get("slideshow", {}).get("slide_type") == "notes"


def without_teacher_notes(nb):
    """The notebook as learners get it (workspace/, the book): speaker notes removed. Notes often
    hold the answer to the question the lesson asks next."""
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
    import copy

    nb = copy.deepcopy(nb)
    if learner:
        nb.cells = [c for c in nb.cells if not is_solution_cell(c)]
    for cell in nb.cells:
        if cell.cell_type == "markdown" and MD_BEGIN in cell.source:
            cell.source = _markdown_version(cell.source, learner)
            continue
        if cell.cell_type != "code" or (BEGIN not in cell.source and ONLY not in cell.source):
            continue
        lines, out, inside = cell.source.split("\n"), [], False
        for line in lines:
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


def export(out: Path, keep_existing: bool) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    if not keep_existing:
        for old in out.glob("*.ipynb"):
            old.unlink()
    written = []
    for src in sources():
        dst = out / (src.stem + ".ipynb")
        if keep_existing and dst.exists():
            continue
        nb = without_teacher_notes(jupytext.read(src))
        nb.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"})
        if has_solutions(nb):
            learner = out / (src.stem + "_learner.ipynb")
            if not (keep_existing and learner.exists()):
                jupytext.write(versions(nb, learner=True), learner)
                written.append(learner)
            nb = versions(nb, learner=False)
        jupytext.write(nb, dst)
        written.append(dst)
    return written


def execute(names: list[str], timeout: int = 600) -> int:
    """Execute notebooks (all when names is empty); save outputs and figures; return failures."""
    import base64
    import time

    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    out, figs = ROOT / "build" / "executed", ROOT / "build" / "figures"
    out.mkdir(parents=True, exist_ok=True)
    figs.mkdir(parents=True, exist_ok=True)
    chosen = [s for s in sources() if not names or any(s.stem.startswith(n) for n in names)]
    # The kernel inherits this environment: with MPLBACKEND=Agg (set for the test run) plt.show()
    # would draw nothing into the notebook, and the book would lose every figure.
    os.environ.pop("MPLBACKEND", None)
    # One notebook at a time: OpenMP's default wait policy is fastest alone (05: 23 s; 50 s with
    # OMP_WAIT_POLICY=PASSIVE). The book build, which runs two at once, sets PASSIVE itself.
    failures = 0
    for src in chosen:
        nb = jupytext.read(src)
        if has_solutions(nb):
            nb = versions(nb, learner=False)
        t0 = time.time()
        try:
            NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(SOURCES)}}).execute()
            status = "ok"
        except CellExecutionError as err:
            status, failures = f"FAILED: {str(err).splitlines()[-1] if str(err) else err!r}", failures + 1
            print(f"[normlab] {src.stem}: the failing cell and its traceback:\n{err}", file=sys.stderr)
        jupytext.write(nb, out / (src.stem + ".ipynb"))
        for old in figs.glob(src.stem + "-cell*.png"):
            old.unlink()
        n = 0
        for k, cell in enumerate(nb.cells):
            for j, o in enumerate(cell.get("outputs", [])):
                data = o.get("data", {})
                if "image/png" in data:
                    (figs / f"{src.stem}-cell{k}-{j}.png").write_bytes(base64.b64decode(data["image/png"]))
                    n += 1
        draws = any("plt.show()" in c.source for c in nb.cells if c.cell_type == "code")
        if status == "ok" and draws and n == 0:
            status, failures = "FAILED: plt.show() drew no figure into the notebook", failures + 1
        print(f"[normlab] {src.stem}: {status} in {time.time() - t0:.1f} s, {n} figure(s) -> build/figures/")
    return failures


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("export")
    ex.add_argument("--out", type=Path, required=True)
    ex.add_argument("--keep-existing", action="store_true")
    run = sub.add_parser("execute")
    run.add_argument("names", nargs="*", help="notebook name prefixes, e.g. 03 or 03_layernorm")
    args = ap.parse_args(argv)
    if args.cmd == "execute":
        return 1 if execute(args.names) else 0
    written = export(args.out.resolve(), args.keep_existing)
    print(f"[normlab] {len(written)} notebook(s) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
