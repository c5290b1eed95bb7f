"""Turn the course's jupytext sources (notebooks/*.md, MyST) into .ipynb files.

    python tools/notebooks.py export --out build/nbval            # fresh copies for nbval
    python tools/notebooks.py export --out DIR --keep-existing       # the same, keeping files there
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
sys.path.insert(0, str(ROOT))       # run as a script from a checkout: normlab is the checkout's
from normlab import course  # noqa: E402
from normlab.course import (  # noqa: E402,F401  (this module's names before the code moved to normlab.course)
    BEGIN, BLANK, END, MD_BEGIN, MD_END, ONLY, TAG, _is_drill_notebook, _markdown_version, has_solutions,
    is_solution_cell, is_teacher_note, versions, with_setup_cell, without_teacher_notes)

SOURCES = ROOT / "notebooks"


def sources() -> list[Path]:
    """Course notebooks in order (their names start with a two-digit number)."""
    return sorted(p for p in SOURCES.glob("[0-9][0-9]_*.md"))


# The solution / learner versions, the setup cell every exported notebook starts with and a learner's
# workspace (plain names = learner versions, solutions/ for teachers) are normlab.course's: the
# installed package needs them without tools/. This file keeps the test run's layout (build/nbval:
# NAME.ipynb the solution version, NAME_learner.ipynb the learner version) and the execute command.


def export(out: Path, keep_existing: bool) -> list[Path]:
    return course.export(out, keep_existing, srcs=sources())


def execute(names: list[str], timeout: int = 600, learner: bool = False) -> int:
    """Execute notebooks (all when names is empty); save outputs and figures; return failures.
    ``learner``: the learner version of each notebook with answers (the learners' book shows it), saved
    as NAME_learner.ipynb without figures; a notebook without answers is skipped."""
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
    os.environ.setdefault("NORMLAB_PREDICT_WAIT", "0")   # no stop at an unanswered 先想一想 (normlab.course.predictions)
    # One notebook at a time: OpenMP's default wait policy is fastest alone (05: 23 s; 50 s with
    # OMP_WAIT_POLICY=PASSIVE). The book build, which runs two at once, sets PASSIVE itself.
    failures = 0
    from normlab.course.predictions import with_prediction_cells

    for src in chosen:
        nb = with_prediction_cells(jupytext.read(src), src.stem)   # the 先想一想 choices, as the export adds them
        if learner and not has_solutions(nb):
            continue
        if has_solutions(nb):
            nb = versions(nb, learner=learner)
        if learner:                   # the learner copy's layout (normlab.course.learner_copy, no setup cell)
            from normlab.course.predictions import learner_layout
            nb = learner_layout(nb)
        stem = src.stem + ("_learner" if learner else "")
        t0 = time.time()
        try:
            NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(SOURCES)}}).execute()
            status = "ok"
        except CellExecutionError as err:
            status, failures = f"FAILED: {str(err).splitlines()[-1] if str(err) else err!r}", failures + 1
            print(f"[normlab] {src.stem}: the failing cell and its traceback:\n{err}", file=sys.stderr)
        jupytext.write(nb, out / (stem + ".ipynb"))
        if learner:
            print(f"[normlab] {stem}: {status} in {time.time() - t0:.1f} s")
            continue
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
    from normlab.console import console_safe   # ✓/✗ and the like readable on any console (a GBK one too)

    console_safe()
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
